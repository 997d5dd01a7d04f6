"""Exports: PAGE-XML and ALTO valid against the official schemas, COCO loads in pycocotools, reruns resume."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from lxml import etree

from nbtest import run_cli, write_manifest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xsd import ALTO_XSD, PAGE_XSD, validation_errors  # noqa: E402

from newsbag.config import parse_config  # noqa: E402
from newsbag.errors import ConfigError  # noqa: E402
from newsbag import revisions  # noqa: E402
from newsbag.export.coco import CATEGORIES, image_id_for  # noqa: E402
from newsbag.export.options import parse_export_cfg  # noqa: E402
from newsbag.export.stage import run_export  # noqa: E402
from newsbag.labels import LABELS  # noqa: E402

W, H = 300, 400
PAGE_NS = {"pc": "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"}
ALTO_NS = {"a": "http://www.loc.gov/standards/alto/ns-v4#"}
# One region per canonical label, each its own box; order runs bottom-up so it differs from
# the stored order.
BOXES = {label: [10 + 15 * k, 10 + 20 * k, 60 + 15 * k, 25 + 20 * k] for k, label in enumerate(LABELS)}


def _region(label: str, k: int, n: int) -> dict:
    return {"bbox_xyxy": BOXES[label], "label": f"raw_{label}", "class": label,
            "score": None if label == "unknown" else 0.5 + k / 100, "order": n - 1 - k,
            "text": "Zürich" if label == "text" else None,
            "support": ["a/x", "b/y"], "members": [
                {"source": "a/x", "bbox_xyxy": BOXES[label], "label": f"raw_{label}", "score": 0.9},
                {"source": "b/y", "bbox_xyxy": BOXES[label], "label": label, "score": None}]}


def _page(page_id: str, stage: str, variant: str, regions: list[dict]) -> dict:
    return {"page_id": page_id, "image": {"path": f"images/{page_id}.png", "width": W, "height": H},
            "source": {"stage": stage, "variant": variant, "family": stage}, "regions": regions, "seconds": 0.0}


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)


@pytest.fixture
def run(tmp_path) -> Path:
    """Two pages; fused variants V1 (recommended, every label) and V2; sources a/x and b/y."""
    run = tmp_path / "run"
    fused = [_region(label, k, len(LABELS)) for k, label in enumerate(LABELS)]
    for page_id in ("p1", "p2"):
        _write(run / "outputs" / "fusion" / "V1" / f"{page_id}.json", _page(page_id, "fusion", "V1", fused))
        _write(run / "outputs" / "fusion" / "V2" / f"{page_id}.json", _page(page_id, "fusion", "V2", fused[:2]))
        plain = [{k: v for k, v in r.items() if k not in ("support", "members", "order")} for r in fused[:3]]
        _write(run / "outputs" / "sources" / "a" / "x" / f"{page_id}.json", _page(page_id, "a", "x", plain))
    _write(run / "outputs" / "sources" / "b" / "y" / "p1.json", _page("p1", "b", "y", []))
    _write(run / "outputs" / "sources" / "b" / "y" / "p2.json", '{"page_id": "p2", "regions": [')  # broken
    _write(run / "outputs" / "fusion" / "summary.json",
           {"recommended_variant": "V1", "variants": {"V1": {"method": "consensus"}, "V2": {"method": "wbf"}}})
    manifest = [{"page_id": p, "path": f"images/{p}.png", "image_path": str(run / "images" / f"{p}.png"),
                 "width": W, "height": H, "sha256": ""} for p in ("p1", "p2")]
    write_manifest(run, manifest)
    return run


def _export(run: Path, **cfg) -> dict:
    return run_export(run, ["p1", "p2"], cfg)


@pytest.mark.parametrize("label, element, text_type", [
    ("text", "TextRegion", "paragraph"),
    ("headline", "TextRegion", "heading"),
    ("title", "TextRegion", "heading"),
    ("caption", "TextRegion", "caption"),
    ("byline", "TextRegion", "credit"),
    ("page_number", "TextRegion", "page-number"),
    ("header", "TextRegion", "header"),
    ("footer", "TextRegion", "footer"),
    ("masthead", "TextRegion", "heading"),  # custom="structure {type:masthead;}" keeps the label
    ("image", "ImageRegion", None),
    ("advertisement", "AdvertRegion", None),
    ("table", "TableRegion", None),
    ("separator", "SeparatorRegion", None),
    ("formula", "MathsRegion", None),
    ("unknown", "UnknownRegion", None),
])
def test_page_xml_regions_are_typed_from_canonical_labels(run, label, element, text_type):
    _export(run, formats=["page-xml"])
    path = run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml"
    assert validation_errors(path, PAGE_XSD) == []
    root = etree.parse(str(path)).getroot()
    k = LABELS.index(label)
    (el,) = root.xpath(f"//pc:*[@id='r{k:04d}']", namespaces=PAGE_NS)
    assert etree.QName(el).localname == element
    assert el.get("type") == text_type
    x0, y0, x1, y1 = BOXES[label]  # original pixels, rectangle corners clockwise
    assert el.find("pc:Coords", PAGE_NS).get("points") == f"{x0},{y0} {x1},{y0} {x1},{y1} {x0},{y1}"
    attrs = {u.get("name"): u.get("value") for u in el.iterfind("pc:UserDefined/pc:UserAttribute", PAGE_NS)}
    assert attrs["newsbag:class"] == label and attrs["newsbag:label"] == f"raw_{label}"
    assert attrs["newsbag:support"] == "a/x,b/y"
    assert [m["source"] for m in json.loads(attrs["newsbag:members"])] == ["a/x", "b/y"]


def test_page_xml_metadata_reading_order_confidence_text(run):
    _export(run, formats=["page-xml"])
    path = run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml"
    root = etree.parse(str(path)).getroot()
    assert root.findtext("pc:Metadata/pc:Creator", namespaces=PAGE_NS).startswith("newsbag")
    labels = {lab.get("type"): lab.get("value") for lab in root.iterfind(".//pc:MetadataItem/pc:Labels/pc:Label", PAGE_NS)}
    assert labels["layer"] == "fusion/V1" and labels["method"] == "consensus"
    page = root.find("pc:Page", PAGE_NS)
    assert (page.get("imageWidth"), page.get("imageHeight")) == (str(W), str(H))
    assert page.get("imageFilename") == "../../../../images/p1.png"  # relative to the XML file
    refs = root.findall(".//pc:ReadingOrder/pc:OrderedGroup/pc:RegionRefIndexed", PAGE_NS)
    # order was n-1-k: the last stored region reads first
    assert [r.get("regionRef") for r in refs] == [f"r{k:04d}" for k in reversed(range(len(LABELS)))]
    assert [r.get("index") for r in refs] == [str(i) for i in range(len(LABELS))]
    text = root.find(".//pc:TextRegion[@id='r0000']", PAGE_NS)
    assert text.find("pc:Coords", PAGE_NS).get("conf") == "0.5000"
    assert text.findtext("pc:TextEquiv/pc:Unicode", namespaces=PAGE_NS) == "Zürich"
    unknown = root.find(f".//pc:UnknownRegion[@id='r{LABELS.index('unknown'):04d}']", PAGE_NS)
    assert unknown.find("pc:Coords", PAGE_NS).get("conf") is None  # no score, no confidence


def test_alto_is_valid_pixel_blocks_with_notes(run):
    _export(run, formats=["alto"])
    path = run / "exports" / "alto" / "fusion" / "V1" / "p1.xml"
    assert validation_errors(path, ALTO_XSD) == []
    root = etree.parse(str(path)).getroot()
    assert root.findtext("a:Description/a:MeasurementUnit", namespaces=ALTO_NS) == "pixel"
    space = root.find("a:Layout/a:Page/a:PrintSpace", ALTO_NS)
    kinds = {b.get("ID"): (etree.QName(b).localname, b.get("TYPE")) for b in space}
    assert kinds[f"r{LABELS.index('text'):04d}"] == ("TextBlock", None)
    assert kinds[f"r{LABELS.index('image'):04d}"] == ("Illustration", "image")
    assert kinds[f"r{LABELS.index('table'):04d}"] == ("ComposedBlock", "table")
    assert kinds[f"r{LABELS.index('separator'):04d}"] == ("GraphicalElement", None)
    block = space.find("a:TextBlock[@ID='r0000']", ALTO_NS)
    x0, y0, x1, y1 = BOXES["text"]
    assert [block.get(k) for k in ("HPOS", "VPOS", "WIDTH", "HEIGHT")] == [str(x0), str(y0), str(x1 - x0), str(y1 - y0)]
    note = root.find("a:Tags/a:OtherTag[@ID='note_r0000']", ALTO_NS)
    assert block.get("TAGREFS") == "class_text note_r0000"
    info = json.loads(note.get("DESCRIPTION"))
    assert (info["class"], info["score"], info["support"]) == ("text", 0.5, ["a/x", "b/y"])
    refs = [e.get("REF") for e in root.iterfind("a:ReadingOrder/a:OrderedGroup/a:ElementRef", ALTO_NS)]
    assert refs == [f"r{k:04d}" for k in reversed(range(len(LABELS)))]


def test_coco_loads_in_pycocotools_and_cocoeval_runs(run):
    pytest.importorskip("pycocotools", reason="pip install -e '.[test]' (pycocotools)")
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    _export(run, formats=["coco"])
    path = run / "exports" / "coco" / "fusion" / "V1.json"
    gt = COCO(str(path))
    assert sorted(c["name"] for c in gt.loadCats(gt.getCatIds())) == sorted(LABELS)  # one per canonical label
    assert sorted(gt.getImgIds()) == sorted(image_id_for(p) for p in ("p1", "p2"))
    anns = json.loads(path.read_text())["annotations"]
    assert len(anns) == 2 * len(LABELS)
    first = next(a for a in anns if a["region_id"] == "r0000")
    x0, y0, x1, y1 = BOXES["text"]
    assert first["bbox"] == [x0, y0, x1 - x0, y1 - y0] and first["score"] == 0.5
    assert first["support"] == ["a/x", "b/y"] and first["members"] == ["a/x", "b/y"]
    missing = next(a for a in anns if a["category_id"] == LABELS.index("unknown") + 1)
    assert missing["score"] == 1.0 and missing["score_missing"] is True
    # The export evaluated against itself: every box found, AP 1.
    dt = gt.loadRes(anns)
    ev = COCOeval(gt, dt, "bbox")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    assert ev.stats[0] == pytest.approx(1.0)


def test_coco_image_ids_stable_and_whole_run(run):
    _export(run, formats=["coco"], variants=["V1"])
    path = run / "exports" / "coco" / "fusion" / "V1.json"
    full = {i["page_id"]: i["id"] for i in json.loads(path.read_text())["images"]}
    assert full == {p: image_id_for(p) for p in ("p1", "p2")}
    # A call over one page still describes the whole run (every manifest page), with the same ids.
    run_export(run, ["p2"], {"formats": ["coco"]}, force=True)
    assert {i["page_id"]: i["id"] for i in json.loads(path.read_text())["images"]} == full
    assert [c["id"] for c in CATEGORIES] == list(range(1, len(LABELS) + 1))


def test_rerun_skips_fresh_files_and_rewrites_changed_pages(run):
    first = _export(run)
    assert (first["ok"], first["skipped"], first["failed"]) == (2, 0, 0)
    files = sorted((run / "exports").rglob("*.*"))
    assert len(files) == 2 * 2 + 1  # page-xml + alto for 2 pages, one COCO (recommended V1 only)
    stamps = {f: f.stat().st_mtime_ns for f in files}
    again = _export(run)
    assert (again["ok"], again["skipped"]) == (0, 2) and again["coco"] == {"fusion/V1": "skipped"}
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    page = run / "outputs" / "fusion" / "V1" / "p2.json"
    page.write_text(page.read_text().replace('"Z\\u00fcrich"', '"Bern"'))
    third = _export(run)
    assert (third["ok"], third["skipped"]) == (1, 1) and third["coco"] == {"fusion/V1": "ok"}
    changed = {f for f in files if f.stat().st_mtime_ns != stamps[f]}
    assert {f.relative_to(run / "exports").as_posix() for f in changed} == {
        "page-xml/fusion/V1/p2.xml", "alto/fusion/V1/p2.xml", "coco/fusion/V1.json"}
    assert not list((run / "exports").rglob(".*.tmp"))  # atomic writes leave no temp files
    assert _export(run)["skipped"] == 2
    assert run_export(run, ["p1", "p2"], {}, force=True)["ok"] == 2


def test_a_page_whose_layer_output_is_gone_keeps_no_export(run):
    """Fusion failed on p2 since it was exported (its fused page removed, a failure record
    written): its PAGE-XML and ALTO files go too, so no export passes the old layout off as current."""
    assert _export(run)["ok"] == 2
    fused = run / "outputs" / "fusion" / "V1"
    (fused / "p2.json").unlink()
    _write(fused / "_failed" / "p2.json", {"page_id": "p2", "error": "no readable source page"})
    _export(run)
    exported = sorted(p.relative_to(run / "exports").as_posix() for p in (run / "exports").rglob("*.xml"))
    assert exported == ["alto/fusion/V1/p1.xml", "page-xml/fusion/V1/p1.xml"]
    coco = json.loads((run / "exports" / "coco" / "fusion" / "V1.json").read_text())
    assert [i["page_id"] for i in coco["images"]] == ["p1"]


def test_sources_and_variant_choice(run):
    result = _export(run, variants=["all"], sources=True)
    assert result["layers"] == ["fusion/V1", "fusion/V2", "sources/a/x", "sources/b/y"]
    assert (run / "exports" / "page-xml" / "sources" / "a" / "x" / "p2.xml").exists()
    # b/y p2 is broken JSON: that page of that layer fails, the rest is written
    assert result["failures"] == [{"page_id": "p2", "layer": "sources/b/y", "error": result["failures"][0]["error"]}]
    assert "p2.json" in result["failures"][0]["error"]
    assert not (run / "exports" / "page-xml" / "sources" / "b" / "y" / "p2.xml").exists()
    ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["page_id"], r["layer"]) for r in ledger] == [("export", "p2", "sources/b/y")]
    coco = json.loads((run / "exports" / "coco" / "sources" / "b" / "y.json").read_text())
    assert [i["page_id"] for i in coco["images"]] == ["p1"]
    for path in (run / "exports" / "page-xml").rglob("*.xml"):
        assert validation_errors(path, PAGE_XSD) == [], path
    for path in (run / "exports" / "alto").rglob("*.xml"):
        assert validation_errors(path, ALTO_XSD) == [], path
    only_v2 = run_export(run, ["p1"], {"variants": ["V2"], "formats": ["alto"]})
    assert only_v2["layers"] == ["fusion/V2"]


@pytest.mark.parametrize("cfg, message", [
    ({"formats": ["pdf"]}, "export stage: formats must be a list of page-xml, alto, coco (at least 1), got ['pdf']"),
    ({"formats": "coco"}, "export stage: formats must be a list of page-xml, alto, coco (at least 1), got 'coco'"),
    ({"formats": []}, "export stage: formats must be a list of page-xml, alto, coco (at least 1), got []"),
    ({"sources": "yes"}, "sources must be true or false"),
    ({"variant": ["V1"]}, "unknown key 'variant'; did you mean 'variants'?"),
])
def test_bad_options_are_refused(cfg, message):
    with pytest.raises(ValueError) as exc:
        parse_export_cfg(cfg)
    assert message in str(exc.value)


def test_config_validates_export_stage():
    base = {"stages": [{"name": "export", "kind": "export", "formats": ["coco"]}]}
    assert parse_config(base).stages[0].kind == "export"
    with pytest.raises(ConfigError, match="formats must be a list of page-xml, alto, coco"):
        parse_config({"stages": [{"name": "export", "kind": "export", "formats": ["tei"]}]})


@pytest.mark.parametrize("args, code, expected", [
    (["--format", "tei"], 2, "choose from page-xml, alto, coco"),
    (["--format", "page-xml,coco", "--variant", "V2", "--json"], 0, '"ok": 2'),   # the summary by --json
    (["--sources"], 4, "export: 1 page(s) failed"),
])
def test_cli_export(run, capsys, args, code, expected):
    exit_code, out, err = run_cli(capsys, "export", "--run-dir", run, *args)
    assert exit_code == code, (out, err)
    assert expected in out + err


def test_run_stages_export_resumes(run, capsys):
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--stages", "export")
    assert code == 0, err
    assert (run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml").exists()
    mtime = (run / "exports" / "alto" / "fusion" / "V1" / "p1.xml").stat().st_mtime_ns
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--stages", "export")
    assert code == 0
    assert (run / "exports" / "alto" / "fusion" / "V1" / "p1.xml").stat().st_mtime_ns == mtime


def test_alto_strings_carry_the_recogniser_s_word_boxes_and_confidences(run):
    text_k = LABELS.index("text")
    words = [{"bbox_xyxy": [11.2, 11, 30.6, 17], "text": "Neue", "score": 0.93},
             {"bbox_xyxy": [33, 11.5, 59, 17], "text": "Zürcher", "score": 0.4}]
    _write(run / "outputs" / "transcripts" / "V1" / "p1.json", {"page_id": "p1", "regions": [
        {"region": text_k, "bbox_xyxy": BOXES["text"], "text": "Neue Zürcher", "lines": [
            {"bbox_xyxy": [11, 11, 59, 17], "text": "Neue Zürcher", "score": 0.66, "words": words,
             "model": "Fraktur"}]}]})
    assert _export(run, formats=["alto"])["failed"] == 0
    alto = run / "exports" / "alto" / "fusion" / "V1" / "p1.xml"
    assert validation_errors(alto, ALTO_XSD) == []
    strings = etree.parse(str(alto)).getroot().findall(f".//a:TextBlock[@ID='r{text_k:04d}']/a:TextLine/a:String",
                                                       ALTO_NS)
    # each word its own covering integer box and its own confidence, not the line's
    assert [(s.get("CONTENT"), s.get("WC"), s.get("HPOS"), s.get("VPOS"), s.get("WIDTH"), s.get("HEIGHT"))
            for s in strings] == [("Neue", "0.9300", "11", "11", "20", "6"),
                                  ("Zürcher", "0.4000", "33", "11", "26", "6")]


def test_transcribed_lines_go_into_page_xml_and_alto_and_make_files_stale(run):
    text_k, head_k = LABELS.index("text"), LABELS.index("headline")
    transcript = {"page_id": "p1", "regions": [
        {"region": text_k, "bbox_xyxy": BOXES["text"], "text": "Neue Zürcher\nZeitung heute", "lines": [
            {"bbox_xyxy": [11, 11, 59, 17], "text": "Neue Zürcher", "score": 0.91},
            {"bbox_xyxy": [11, 18, 59, 24], "text": "Zeitung heute", "score": 0.8},
            {"bbox_xyxy": [11, 24, 59, 25], "text": "", "score": 0.0}]},   # nothing read: no line
        {"region": head_k, "bbox_xyxy": BOXES["headline"], "text": "Krieg", "lines": [{"bbox_xyxy": BOXES["headline"], "text": "Krieg", "score": None}]}]}
    first = _export(run, formats=["page-xml", "alto"])
    assert first["ok"] == 2
    _write(run / "outputs" / "transcripts" / "V1" / "p1.json", transcript)
    again = _export(run, formats=["page-xml", "alto"])  # the new transcript makes p1's files stale
    assert (again["ok"], again["skipped"]) == (1, 1)

    page = run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml"
    assert validation_errors(page, PAGE_XSD) == []
    region = etree.parse(str(page)).getroot().find(f".//pc:TextRegion[@id='r{text_k:04d}']", PAGE_NS)
    lines = region.findall("pc:TextLine", PAGE_NS)
    assert [ln.findtext("pc:TextEquiv/pc:Unicode", namespaces=PAGE_NS) for ln in lines] == ["Neue Zürcher", "Zeitung heute"]
    assert [ln.find("pc:TextEquiv", PAGE_NS).get("conf") for ln in lines] == ["0.9100", "0.8000"]
    assert lines[0].find("pc:Coords", PAGE_NS).get("points") == "11,11 59,11 59,17 11,17"
    assert region.findtext("pc:TextEquiv/pc:Unicode", namespaces=PAGE_NS) == "Neue Zürcher\nZeitung heute"

    alto = run / "exports" / "alto" / "fusion" / "V1" / "p1.xml"
    assert validation_errors(alto, ALTO_XSD) == []
    block = etree.parse(str(alto)).getroot().find(f".//a:TextBlock[@ID='r{text_k:04d}']", ALTO_NS)
    alto_lines = block.findall("a:TextLine", ALTO_NS)
    assert [[s.get("CONTENT") for s in ln.findall("a:String", ALTO_NS)] for ln in alto_lines] == [
        ["Neue", "Zürcher"], ["Zeitung", "heute"]]
    assert [ln.get("HPOS") for ln in alto_lines] == ["11", "11"]
    assert alto_lines[0].find("a:String", ALTO_NS).get("WC") == "0.9100"
    # p2 has no transcript: its text region keeps the fused page's own text and no lines
    p2 = etree.parse(str(run / "exports" / "page-xml" / "fusion" / "V1" / "p2.xml")).getroot()
    assert p2.findall(f".//pc:TextRegion[@id='r{text_k:04d}']/pc:TextLine", PAGE_NS) == []


def test_a_region_read_in_column_parts_exports_the_lines_of_all_its_parts():
    # The transcript lists a region fused across a gutter once per column part, in reading
    # order (other regions between them); its exported text and lines are both parts'.
    from newsbag.export.layout import _transcribed

    transcript = {"regions": [
        {"region": 3, "text": "left part", "lines": [{"bbox_xyxy": [0, 0, 90, 10], "text": "left part", "score": 0.9}]},
        {"region": 4, "text": "between", "lines": [{"bbox_xyxy": [0, 20, 90, 30], "text": "between", "score": 0.9}]},
        {"region": 3, "text": "right part", "lines": [{"bbox_xyxy": [110, 0, 200, 10], "text": "right part", "score": 0.8}]}]}
    read = _transcribed(transcript, 200, 100)
    assert read[3][0] == "left part\nright part"
    assert [ln.text for ln in read[3][1]] == ["left part", "right part"]
    assert read[4][0] == "between"


@pytest.mark.parametrize("transcript", [[1, 2], {"regions": [{"region": "x", "lines": 3}]}, {"regions": {"a": 1}}])
def test_a_transcript_of_the_wrong_shape_fails_that_page_only(run, transcript):
    """A transcript file that is JSON but not a transcript (hand-edited, another tool's) fails
    the pages it belongs to with one line naming the page; the other page is exported."""
    _write(run / "outputs" / "transcripts" / "V1" / "p1.json", transcript)
    result = _export(run, formats=["page-xml", "alto"])
    assert (result["ok"], result["failed"]) == (1, 1)
    assert {f["page_id"] for f in result["failures"]} == {"p1"}
    for failure in result["failures"]:
        assert failure["error"].startswith("page p1: ") and "\n" not in failure["error"]
    assert (run / "exports" / "alto" / "fusion" / "V1" / "p2.xml").is_file()


def test_a_misspelt_variant_is_named_with_the_variants_there(run, caplog):
    result = _export(run, variants=["V9"])
    assert result["layers"] == []
    assert "fused variant(s) V9 not found under" in caplog.text and "(it has: V1, V2)" in caplog.text


def _more_pages(run: Path, n: int) -> list[str]:
    """The run with `n` pages of fused variant V1 (p1, p2 and copies of p1), all in the manifest."""
    fused = run / "outputs" / "fusion" / "V1"
    ids = [f"p{k}" for k in range(1, n + 1)]
    for page_id in ids[2:]:
        _write(fused / f"{page_id}.json", {**json.loads((fused / "p1.json").read_text()), "page_id": page_id,
                                           "image": {"path": f"images/{page_id}.png", "width": W, "height": H}})
    manifest = [{"page_id": p, "path": f"images/{p}.png", "image_path": str(run / "images" / f"{p}.png"),
                 "width": W, "height": H, "sha256": ""} for p in ids]
    write_manifest(run, manifest)
    return ids


def test_coco_holds_one_page_at_a_time(run, monkeypatch):
    """The COCO file of a 100k-page run cannot be built in memory (every page, then the whole
    dict, then its text): each page read is let go before the next page is read."""
    import weakref

    from newsbag.export import stage

    class Page(dict):  # a dict that can be watched for its end
        pass

    live: set[str] = set()
    most = [0]
    real = stage.read_page

    def watched(path, page_id, **kwargs):
        page = Page(real(path, page_id, **kwargs))
        live.add(page_id)
        weakref.finalize(page, live.discard, page_id)
        most[0] = max(most[0], len(live))
        return page

    monkeypatch.setattr(stage, "read_page", watched)
    ids = _more_pages(run, 6)
    assert run_export(run, ids, {"formats": ["coco"]})["coco"] == {"fusion/V1": "ok"}
    assert most[0] <= 2  # the page being read and, at most, the one before it
    coco = json.loads((run / "exports" / "coco" / "fusion" / "V1.json").read_text())
    assert [i["page_id"] for i in coco["images"]] == ids
    assert [a["id"] for a in coco["annotations"]] == list(range(1, 6 * len(LABELS) + 1))


def test_streamed_coco_is_the_coco_dataset_of_its_pages(run):
    """The file written page by page is, byte for byte, `coco_dataset` of the same pages as one JSON."""
    from newsbag.export.coco import coco_dataset
    from newsbag.export.layout import ExportInfo
    from newsbag.page_reader import read_page

    ids = _more_pages(run, 4)
    (run / "outputs" / "fusion" / "V1" / "p3.json").write_text('{"page_id": "p3", "regions": [')  # left out
    run_export(run, ids, {"formats": ["coco"]})
    path = run / "exports" / "coco" / "fusion" / "V1.json"
    written = json.loads(path.read_text())
    info = written["info"]
    kept = [p for p in ids if p != "p3"]
    pages = [(read_page(run / "outputs" / "fusion" / "V1" / f"{p}.json", p), f"../../../images/{p}.png") for p in kept]
    expected = coco_dataset(pages, ExportInfo(layer="fusion/V1", method="consensus", tool=info["version"],
                                              created=info["date_created"], fingerprint=info["newsbag_fingerprint"],
                                              image_filename=""))
    assert [i["page_id"] for i in written["images"]] == kept
    assert path.read_bytes() == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    assert not list(path.parent.glob(".*.tmp"))


# Text no XML 1.0 document can hold: C0 controls (a "\b" or "\f" of a model's LaTeX read as a
# JSON escape: "\beta" -> "\x08eta"), a lone surrogate (a JSON "\ud835" cut from its pair),
# the noncharacters U+FFFE/U+FFFF. Each becomes U+FFFD; tab, newline and the rest are kept.
_UNWRITABLE = "\x08eta \x0crac x\ud835y \x00 z\ufffe"
_WRITTEN = "\ufffdeta \ufffdrac x\ufffdy \ufffd z\ufffd"


def test_text_xml_cannot_hold_is_replaced_so_every_file_still_parses(run):
    text_k = LABELS.index("text")
    fused = json.loads((run / "outputs" / "fusion" / "V1" / "p1.json").read_text())
    fused["regions"][text_k].update(text=_UNWRITABLE, label="raw\x01label")
    _write(run / "outputs" / "fusion" / "V1" / "p1.json", fused)
    _write(run / "outputs" / "transcripts" / "V1" / "p2.json", {"page_id": "p2", "regions": [
        {"region": text_k, "bbox_xyxy": BOXES["text"], "text": _UNWRITABLE, "lines": [{"bbox_xyxy": [11, 11, 59, 17], "text": _UNWRITABLE,
                                                           "score": 0.9}]}]})
    assert _export(run, formats=["page-xml", "alto"])["failed"] == 0
    for page_id in ("p1", "p2"):
        page = run / "exports" / "page-xml" / "fusion" / "V1" / f"{page_id}.xml"
        alto = run / "exports" / "alto" / "fusion" / "V1" / f"{page_id}.xml"
        assert validation_errors(page, PAGE_XSD) == []
        assert validation_errors(alto, ALTO_XSD) == []
        region = etree.parse(str(page)).getroot().find(f".//pc:TextRegion[@id='r{text_k:04d}']", PAGE_NS)
        assert region.findtext("pc:TextEquiv/pc:Unicode", namespaces=PAGE_NS) == _WRITTEN
    p1 = etree.parse(str(run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml")).getroot()
    assert p1.find(".//pc:UserAttribute[@name='newsbag:label'][@value='raw\ufffdlabel']", PAGE_NS) is not None
    block = etree.parse(str(run / "exports" / "alto" / "fusion" / "V1" / "p2.xml")).getroot().find(
        f".//a:TextBlock[@ID='r{text_k:04d}']", ALTO_NS)
    # ALTO words are the line split at whitespace, and "\f" is whitespace
    assert [s.get("CONTENT") for s in block.iter(f"{{{ALTO_NS['a']}}}String")] == [
        "\ufffdeta", "rac", "x\ufffdy", "\ufffd", "z\ufffd"]


def test_a_transcript_of_an_older_layout_puts_no_text_on_the_new_one(run, caplog):
    # Fusion reran after `newsbag transcribe` (a source or the config changed) and export runs
    # before the next transcribe: the transcript's region numbers name the old layout's regions.
    text_k = LABELS.index("text")
    fused_path = run / "outputs" / "fusion" / "V1" / "p1.json"
    fused = json.loads(fused_path.read_text())
    _write(run / "outputs" / "transcripts" / "V1" / "p1.json", {"page_id": "p1", "regions": [
        {"region": text_k, "bbox_xyxy": BOXES["text"], "text": "Neue Zürcher", "lines": [
            {"bbox_xyxy": [11, 11, 59, 17], "text": "Neue Zürcher", "score": 0.9}]}]})
    fused["regions"] = fused["regions"][::-1]   # the new layout: other regions at those numbers
    _write(fused_path, fused)
    assert fused["regions"][text_k]["class"] != "text"

    caplog.set_level("WARNING")
    assert _export(run, formats=["page-xml", "alto"])["failed"] == 0
    page = etree.parse(str(run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml")).getroot()
    assert page.findall(".//pc:TextLine", PAGE_NS) == []
    assert "Neue Zürcher" not in (run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml").read_text()
    assert "Zürcher" not in (run / "exports" / "alto" / "fusion" / "V1" / "p1.xml").read_text()
    assert "p1" in caplog.text and "newsbag transcribe" in caplog.text

    # transcribed again on the new layout, the text region read as two column parts: its
    # text is exported on the region it was read from
    new_k = len(LABELS) - 1 - text_k
    x0, y0, x1, y1 = BOXES["text"]
    mid = (x0 + x1) / 2 + 0.004   # a part's box is rounded to 0.01
    _write(run / "outputs" / "transcripts" / "V1" / "p1.json", {"page_id": "p1", "regions": [
        {"region": new_k, "bbox_xyxy": [x0, y0, mid, y1], "text": "Neue", "lines": [
            {"bbox_xyxy": [x0, y0, mid, y1], "text": "Neue", "score": 0.9}]},
        {"region": new_k, "bbox_xyxy": [mid, y0, x1 + 0.004, y1], "text": "Zürcher", "lines": [
            {"bbox_xyxy": [mid, y0, x1, y1], "text": "Zürcher", "score": 0.9}]}]})
    _export(run, formats=["page-xml"])
    page = etree.parse(str(run / "exports" / "page-xml" / "fusion" / "V1" / "p1.xml")).getroot()
    region = page.find(f".//pc:TextRegion[@id='r{new_k:04d}']", PAGE_NS)
    assert [ln.findtext("pc:TextEquiv/pc:Unicode", namespaces=PAGE_NS) for ln in region.findall("pc:TextLine", PAGE_NS)] \
        == ["Neue", "Zürcher"]


def test_a_page_coco_cannot_read_is_a_failure_on_every_run_not_a_log_line(run):
    # COCO alone (no per-page format to fail the page first): b/y's p2 is broken JSON.
    for k in range(2):   # the rerun finds the page as broken as before and says so again
        result = _export(run, formats=["coco"], sources=True)
        assert [(f["page_id"], f["layer"]) for f in result["failures"]] == [("p2", "sources/b/y")]
        assert "p2.json" in result["failures"][0]["error"] and result["failed"] == 1
        ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
        assert [(r["stage"], r["page_id"], r["layer"]) for r in ledger] == [("export", "p2", "sources/b/y")] * (k + 1)
        coco = json.loads((run / "exports" / "coco" / "sources" / "b" / "y.json").read_text())
        assert [i["page_id"] for i in coco["images"]] == ["p1"]
    # a call for p1 alone still names p2, which its COCO files (the whole run) leave out
    assert run_export(run, ["p1"], {"formats": ["coco"], "sources": True})["failed"] == 1
    # mended, the page is written, and the file is current again
    _write(run / "outputs" / "sources" / "b" / "y" / "p2.json", json.loads((run / "outputs" / "sources" / "b" / "y" /
                                                                            "p1.json").read_text()) | {"page_id": "p2"})
    assert _export(run, formats=["coco"], sources=True)["failures"] == []
    coco = json.loads((run / "exports" / "coco" / "sources" / "b" / "y.json").read_text())
    assert [i["page_id"] for i in coco["images"]] == ["p1", "p2"]
    assert _export(run, formats=["coco"], sources=True)["coco"]["sources/b/y"] == "skipped"


def test_a_writer_revision_bump_redoes_that_format_only(run, monkeypatch):
    """A writer fix bumps its format's revision: the next export rewrites that format's files
    (every page, and nothing of the other formats), as a runner revision does for its pages."""
    assert _export(run)["ok"] == 2
    files = sorted((run / "exports").rglob("*.*"))
    stamps = {f: f.stat().st_mtime_ns for f in files}
    for fmt, expected in (("alto", {"alto/fusion/V1/p1.xml", "alto/fusion/V1/p2.xml"}),
                          ("coco", {"coco/fusion/V1.json"})):
        now = revisions.REVISIONS[f"export/{fmt}"]
        monkeypatch.setitem(revisions.REVISIONS, f"export/{fmt}", dataclasses.replace(now, number=now.number + 1))
        result = _export(run)
        changed = {f.relative_to(run / "exports").as_posix() for f in files if f.stat().st_mtime_ns != stamps[f]}
        assert changed == expected
        assert result["coco"] == {"fusion/V1": "ok" if fmt == "coco" else "skipped"}
        stamps = {f: f.stat().st_mtime_ns for f in files}
        assert _export(run)["skipped"] == 2


def test_status_counts_exports_and_says_a_new_writer_revision_makes_them_stale(run, monkeypatch, capsys):
    """Export had no status: now each exported layer's pages are counted as `newsbag export`
    finds them, and a writer's new code revision is named as the reason they are stale."""
    from newsbag.export.stage import export_status
    from newsbag.manifest import read_pages

    assert export_status(run, read_pages(run), {}) == []          # never exported
    assert _export(run)["ok"] == 2
    (layer,) = export_status(run, read_pages(run), {})
    assert (layer.name, layer.done, layer.stale, layer.pending, layer.whole) == ("fusion/V1", 2, 0, 0, True)
    now = revisions.REVISIONS["export/alto"]
    monkeypatch.setitem(revisions.REVISIONS, "export/alto", dataclasses.replace(now, number=now.number + 1))
    (layer,) = export_status(run, read_pages(run), {})
    assert (layer.done, layer.stale) == (0, 2)
    assert layer.reasons == {f"made by export/alto code revision {now.number}, now {now.number + 1}": 2}
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert f"      stale: made by export/alto code revision {now.number}, now {now.number + 1} (2 pages)" in out
    assert _export(run)["ok"] == 2
    (layer,) = export_status(run, read_pages(run), {})
    assert (layer.done, layer.stale) == (2, 0)


def test_a_thin_box_keeps_at_least_one_pixel_in_every_format(run):
    """Round-half-even took a 1 px box from 1.5 to 2.5 to [2, 2] (zero width; boxes under 1 px
    are dropped on read): exported boxes cover their float box (start floored, end ceiled,
    clipped to the page), so every box the page keeps has >= 1 px in every format."""
    page = _page("p1", "fusion", "V1", [
        {"bbox_xyxy": [1.5, 10, 2.5, 30], "class": "separator", "label": "sep", "score": 0.9, "order": 0},
        {"bbox_xyxy": [40.2, 11.5, 41.4, 12.5], "class": "text", "label": "text", "score": 0.9, "order": 1},
        {"bbox_xyxy": [W - 1, 0, W + 3, 12.5], "class": "text", "label": "text", "score": 0.9, "order": 2}])
    _write(run / "outputs" / "fusion" / "V1" / "p1.json", page)
    assert _export(run)["failed"] == 0
    expected = [(1, 10, 3, 30), (40, 11, 42, 13), (W - 1, 0, W, 13)]
    exports = run / "exports"
    pc = etree.parse(str(exports / "page-xml" / "fusion" / "V1" / "p1.xml"))
    boxes = []
    for points in pc.xpath("//pc:Page/*/pc:Coords/@points", namespaces=PAGE_NS):
        xs, ys = zip(*(tuple(map(int, p.split(","))) for p in points.split()))
        boxes.append((min(xs), min(ys), max(xs), max(ys)))
    assert boxes == expected
    alto = etree.parse(str(exports / "alto" / "fusion" / "V1" / "p1.xml"))
    blocks = alto.xpath("//a:PrintSpace/*", namespaces=ALTO_NS)
    assert [(int(b.get("HPOS")), int(b.get("VPOS")), int(b.get("HPOS")) + int(b.get("WIDTH")),
             int(b.get("VPOS")) + int(b.get("HEIGHT"))) for b in blocks] == expected
    coco = json.loads((exports / "coco" / "fusion" / "V1.json").read_text())
    anns = [a for a in coco["annotations"] if a["image_id"] == image_id_for("p1")]
    assert [(x, y, x + w, y + h) for x, y, w, h in (a["bbox"] for a in anns)] == expected
    assert all(a["area"] >= 1 for a in anns)


def test_warnings_of_worker_processes_reach_the_handlers_of_the_call(run, capsys, caplog, monkeypatch):
    """`--workers 2`: a warning logged in a worker process (here a page's box repaired on read)
    goes through the call's own logging (its handlers, format and level), as one from the main
    process does, not to a bare stderr line outside it that a log file or a log reader misses."""
    import logging

    monkeypatch.setattr(logging.getLogger(), "_newsbag_configured", True, raising=False)  # keep caplog's handler
    caplog.set_level(logging.INFO)  # and the root level back after the test (-l error sets it)
    page = run / "outputs" / "fusion" / "V1" / "p1.json"
    fused = json.loads(page.read_text())
    fused["regions"][0]["bbox_xyxy"] = [W - 20, 10, W + 30, 40]  # reaches off the page: clipped on read
    _write(page, fused)
    code, _, err = run_cli(capsys, "export", "--run-dir", run, "--workers", "2", "--format", "page-xml")
    assert code == 0, err
    repaired = [r for r in caplog.records if "repaired boxes: clipped_box 1" in r.getMessage()]
    assert [(r.levelname, r.name, r.processName != "MainProcess") for r in repaired] == [
        ("WARNING", "newsbag.page_reader", True)]
    caplog.clear()
    code, _, err = run_cli(capsys, "export", "--run-dir", run, "--workers", "2", "--force", "-l", "error")
    assert code == 0, err
    assert not [r for r in caplog.records if r.levelno < logging.ERROR]  # the call's level holds in workers too
