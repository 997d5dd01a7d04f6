"""The quick start's page (in the clone) through the embedded bag and its transcription: Latin
text in articles, words in ALTO. Real models, with Tesseract and with PP-OCRv6 (the embedded
config's recogniser, from pip wheels alone); no ../shared needed."""

import json
import sys
import unicodedata
from pathlib import Path

import pytest
from lxml import etree

from newsbag.cli import main
from newsbag.tool_spec import load_tool_spec
from newsbag.resources import runners_dir
from nbtest import EXAMPLE_PAGE, REPO
from stage_kit import needs_traineddata

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))
from xsd import ALTO_XSD, validation_errors  # noqa: E402

pytest.importorskip("tesserocr")
needs = needs_traineddata("eng", "Fraktur")
ALTO = {"a": "http://www.loc.gov/standards/alto/ns-v4#"}


def _tesseract_config(tmp_path) -> str:
    """The embedded bag's config, its transcription read by Tesseract (Fraktur or eng per page)."""
    config = json.loads((REPO / "configs" / "pipeline.local.json").read_text())
    entry = next(s for s in config["stages"] if s.get("kind") == "transcription")
    for key in ("recognizers", "vote", "cascade", "drop_below"):   # Tesseract alone, as measured
        entry.pop(key, None)
    entry.update(recognizer_family="recognize_tesseract", recognizer={"models": ["Fraktur", "eng"]}, device="cpu")
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(config))
    return str(path)


@needs
def test_the_quick_start_page_reads_as_latin_text_in_articles_with_words_in_alto(tmp_path, capsys):
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--input-dir", str(EXAMPLE_PAGE.parent), "--run-dir", str(run), "--config", _tesseract_config(tmp_path),
              "--stages", "tesseract,paddle_layout,text_lines,fusion,transcription,export"])
    assert exc.value.code == 0, capsys.readouterr().err
    (record_path,) = (run / "outputs" / "transcripts").glob("*/*.json")
    record = json.loads(record_path.read_text())

    # Latin script only (the Chinese/English model wrote Han characters into this page's text)
    letters = [c for c in record["text"] if c.isalpha()]
    assert len(letters) > 4500   # the page read (its ~5,000 letters), each once
    assert sorted({c for c in letters if "LATIN" not in unicodedata.name(c, "")}) == []
    assert record["models"] == ["eng"]   # an Antiqua page: English over Fraktur
    for words in ("PORT GIBSON", "Capital and Surplus", "Port Gibson Bank"):
        assert words in record["text"]

    # articles: the .txt is the articles a blank line apart, each led by its headline where it has one
    articles = [a for a in record["articles"] if a["text"]]
    txt = record_path.with_suffix(".txt").read_text()
    assert txt == "\n\n".join(a["text"] for a in articles) + "\n"
    headed = [a for a in articles if a["headline"]]
    assert len(articles) >= 10 and len(headed) >= 3
    assert all(a["text"].startswith(a["headline"]) for a in headed)

    # ALTO 4: each line's words as String elements with CONTENT and WC
    (alto,) = (run / "exports" / "alto").rglob("*.xml")
    assert validation_errors(alto, ALTO_XSD) == []
    strings = etree.parse(str(alto)).findall(".//a:String", ALTO)
    assert len(strings) > 1000
    assert all(s.get("CONTENT") and 0 <= float(s.get("WC")) <= 1 for s in strings)
    assert {"PORT", "GIBSON"} <= {s.get("CONTENT") for s in strings}


def test_with_no_traineddata_the_quick_start_reads_latin_text_and_warns_of_its_resolution(tmp_path, capsys,
                                                                                          monkeypatch):
    pytest.importorskip("rapidocr")   # PP-OCRv6 rec: the ONNX inside the rapidocr 3.10 wheel
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))   # no traineddata anywhere the runner looks
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--input-dir", str(EXAMPLE_PAGE.parent), "--run-dir", str(run), "--json",
              "--stages", "tesseract,paddle_layout,text_lines,fusion,transcription"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    (record_path,) = (run / "outputs" / "transcripts").glob("*/*.json")
    record = json.loads(record_path.read_text())
    letters = [c for c in record["text"] if c.isalpha()]
    assert len(letters) > 4000   # the page read (its ~5,000 letters)
    assert sorted({c for c in record["text"] if unicodedata.category(c)[0] in "LMN" and not c.isascii()
                   and "LATIN" not in unicodedata.name(c, "")}) == []
    assert "PORT GIBSON" in record["text"].upper()
    # 7 columns scanned 1114 px wide: lines lower than PP-OCRv6 reads well, said once for the page
    needs_px = load_tool_spec("recognize", runners_dir())["needs_line_height_px"]
    low = json.loads(out)["builtin"]["transcription"]["low_resolution"]
    assert low["pages"] == 1 and low["needs_px"] == needs_px and low["line_height_px"] < needs_px
    warnings = [line for line in err.splitlines() if "px high (median planned line box)" in line]
    assert len(warnings) == 1
    assert f"its text lines are {low['line_height_px']:.0f} px high" in warnings[0]
    assert f"recognize needs {needs_px:.0f} px" in warnings[0]

