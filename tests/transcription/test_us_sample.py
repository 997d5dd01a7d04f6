"""The quick start's page (in the clone) through the embedded bag and its transcription: Latin
text in articles, words in ALTO. Real models and real Tesseract; no ../shared needed."""

import json
import sys
import unicodedata
from pathlib import Path

import pytest
from lxml import etree

from newsbag.cli import main
from nbtest import EXAMPLE_PAGE
from stage_kit import needs_traineddata

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))
from xsd import ALTO_XSD, validation_errors  # noqa: E402

pytest.importorskip("tesserocr")
needs = needs_traineddata("eng", "Fraktur")
ALTO = {"a": "http://www.loc.gov/standards/alto/ns-v4#"}


@needs
def test_the_quick_start_page_reads_as_latin_text_in_articles_with_words_in_alto(tmp_path, capsys):
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--input-dir", str(EXAMPLE_PAGE.parent), "--run-dir", str(run),
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
