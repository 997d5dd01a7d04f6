"""Reading ground truth as correction tools write it: PAGE-XML (2013, 2019), ALTO (v2-v4), COCO."""

from __future__ import annotations

import json

import pytest

from newsbag.groundtruth import read_ground_truth
from newsbag.groundtruth.labels import TYPES

PAGE_2013 = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15"
PAGE_2019 = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"


def _page_xml(ns: str, body: str, image="scan.tif", w=1000, h=2000, head="") -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>{head}<PcGts xmlns="{ns}"><Metadata><Creator>t</Creator></Metadata>'
            f'<Page imageFilename="{image}" imageWidth="{w}" imageHeight="{h}">{body}</Page></PcGts>')


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


REGIONS = (
    '<ReadingOrder><OrderedGroup id="ro"><RegionRefIndexed index="1" regionRef="p"/>'
    '<RegionRefIndexed index="0" regionRef="h"/></OrderedGroup></ReadingOrder>'
    '<TextRegion id="h" type="heading"><Coords points="10,10 200,12 190,50 12,48"/></TextRegion>'
    '<TextRegion id="p" type="paragraph"><Coords points="10,60 400,60 400,300 10,300"/>'
    '<TextLine id="l1"><Coords points="10,60 400,60 400,80 10,80"/><TextEquiv><Unicode>Zürich,</Unicode></TextEquiv></TextLine>'
    '<TextLine id="l2"><Coords points="10,90 400,90 400,110 10,110"/><TextEquiv><Unicode>den 1.</Unicode></TextEquiv></TextLine>'
    '<TextEquiv><Unicode>ignored: the lines say it</Unicode></TextEquiv></TextRegion>'
    '<TextRegion id="m" custom="structure {type:masthead;}" type="heading"><Coords points="0,0 5,0 5,5 0,5"/></TextRegion>'
    '<SeparatorRegion id="s"><Coords points="500,0 502,0 502,2000 500,2000"/></SeparatorRegion>'
    '<ImageRegion id="i"><Coords points="500,500 900,500 900,900"/></ImageRegion>'
    '<TableRegion id="t"><Coords points="10,1000 900,1000 900,1500 10,1500"/>'
    '<TextRegion id="cell"><Coords points="10,1000 50,1000 50,1050 10,1050"/></TextRegion></TableRegion>'
)


@pytest.mark.parametrize("ns", [PAGE_2013, PAGE_2019])
def test_page_xml_regions_types_order_and_text(tmp_path, ns):
    _write(tmp_path / "gt/scan.xml", _page_xml(ns, REGIONS))
    (page,), problems = read_ground_truth(tmp_path / "gt")
    assert problems == {}
    assert (page.name, page.image, page.width, page.height, page.stem_path) == ("scan.xml", "scan.tif", 1000, 2000, "scan")
    assert page.raw.tolist() == ["TextRegion/heading", "TextRegion/paragraph", "TextRegion/masthead", "SeparatorRegion",
                                 "ImageRegion", "TableRegion"]    # top-level regions: the table's cell is its table
    assert page.coarse.tolist() == ["title", "text", "other", "other", "image", "table"]
    assert page.xyxy.tolist()[:2] == [[10, 10, 200, 50], [10, 60, 400, 300]]   # each polygon's bounding box
    assert page.order.tolist() == [0, 1, -1, -1, -1, -1]
    assert page.text.tolist()[:2] == [None, "Zürich,\nden 1."]
    assert page.lines[1] == [{"bbox_xyxy": [10, 60, 400, 80], "text": "Zürich,"},
                             {"bbox_xyxy": [10, 90, 400, 110], "text": "den 1."}]


def test_xml_is_read_without_entities_dtds_or_network(tmp_path):
    secret = _write(tmp_path / "secret.txt", "SECRET")
    head = f'<!DOCTYPE PcGts [<!ENTITY x SYSTEM "file://{secret}"><!ENTITY w SYSTEM "http://127.0.0.1:9/x">]>'
    body = ('<TextRegion id="p"><Coords points="1,1 9,9"/><TextLine id="l"><Coords points="1,1 9,9"/>'
            '<TextEquiv><Unicode>a&x;&w;b</Unicode></TextEquiv></TextLine></TextRegion>')
    _write(tmp_path / "gt/scan.xml", _page_xml(PAGE_2019, body, head=head))
    (page,), _ = read_ground_truth(tmp_path / "gt")
    assert "SECRET" not in page.text[0]


def test_a_transkribus_export_names_its_images_beside_its_page_folder(tmp_path):
    """Transkribus writes doc/page/<image stem>.xml naming the image bare; the image is in doc/."""
    _write(tmp_path / "gt/issue1/page/p1.xml", _page_xml(PAGE_2013, "", image="p1.jpg"))
    _write(tmp_path / "gt/issue2/page/p1.xml", _page_xml(PAGE_2013, "", image="p1.jpg"))
    _write(tmp_path / "gt/issue2/mets.xml", '<mets:mets xmlns:mets="http://www.loc.gov/METS/"/>')   # skipped quietly
    pages, problems = read_ground_truth(tmp_path / "gt")
    assert [(p.name, p.image, p.stem_path) for p in pages] == [
        ("issue1/page/p1.xml", "issue1/p1.jpg", "issue1/p1"), ("issue2/page/p1.xml", "issue2/p1.jpg", "issue2/p1")]
    assert problems == {}


def test_the_nzz_pages_read_from_their_page_xml_as_from_their_json():
    """../shared/eval/nzz/page is the Transkribus PAGE-XML the nzz JSON was converted from."""
    import numpy as np

    from nbtest import shared_path

    xml_pages, xml_problems = read_ground_truth(shared_path("eval", "nzz", "page"))
    json_pages, _ = read_ground_truth(shared_path("eval", "nzz"))
    assert xml_problems == {} and len(xml_pages) == len(json_pages) == 32
    by_image = {p.image.rsplit("/", 1)[-1]: p for p in xml_pages}
    for nzz in json_pages:
        page = by_image[nzz.image.rsplit("/", 1)[-1]]
        assert (page.width, page.height) == (nzz.width, nzz.height)
        for cls in ("text", "image", "table"):
            a, b = np.sort(nzz.xyxy[nzz.coarse == cls], 0), np.sort(page.xyxy[page.coarse == cls], 0)
            # the JSON clipped boxes to the last pixel (width - 1), the reader to the page's edge (width)
            assert a.shape == b.shape and np.abs(a - b).max(initial=0) <= 1, (nzz.name, cls)


def _alto(ns: str, blocks: str, unit="pixel", page='WIDTH="1000" HEIGHT="2000"', extra="") -> str:
    return (f'<?xml version="1.0"?><alto xmlns="{ns}"><Description><MeasurementUnit>{unit}</MeasurementUnit>'
            f'<sourceImageInformation><fileName>scans/a.tif</fileName></sourceImageInformation></Description>{extra}'
            f'<Layout><Page ID="p1" {page}><PrintSpace>{blocks}</PrintSpace></Page></Layout></alto>')


ALTO_BLOCKS = (
    '<TextBlock ID="b1" HPOS="10" VPOS="20" WIDTH="100" HEIGHT="50">'
    '<TextLine HPOS="10" VPOS="20" WIDTH="100" HEIGHT="20"><String CONTENT="Neue"/><SP/><String CONTENT="Zeitung"/></TextLine>'
    '</TextBlock>'
    '<Illustration ID="b2" HPOS="200" VPOS="200" WIDTH="300" HEIGHT="300"/>'
    '<GraphicalElement ID="b3" HPOS="600" VPOS="0" WIDTH="2" HEIGHT="2000"/>'
    '<ComposedBlock ID="c1" HPOS="0" VPOS="1000" WIDTH="1000" HEIGHT="500">'
    '<TextBlock ID="b4" HPOS="0" VPOS="1000" WIDTH="500" HEIGHT="500" TAGREFS="tag_head"/></ComposedBlock>'
    '<ComposedBlock ID="c2" TYPE="table" HPOS="0" VPOS="1600" WIDTH="1000" HEIGHT="300">'
    '<TextBlock ID="b5" HPOS="0" VPOS="1600" WIDTH="10" HEIGHT="10"/></ComposedBlock>'
)


@pytest.mark.parametrize("ns", [f"http://www.loc.gov/standards/alto/ns-v{v}#" for v in (2, 3, 4)])
def test_alto_blocks_composed_blocks_tags_and_reading_order(tmp_path, ns):
    tags = '<Tags><LayoutTag ID="tag_head" LABEL="heading"/></Tags>'
    order = '<ReadingOrder><OrderedGroup ID="o"><ElementRef ID="r1" REF="b4"/><ElementRef ID="r2" REF="b1"/></OrderedGroup></ReadingOrder>'
    _write(tmp_path / "gt/alto/a.xml", _alto(ns, ALTO_BLOCKS, extra=tags + order))
    (page,), problems = read_ground_truth(tmp_path / "gt")
    assert problems == {}
    assert (page.image, page.stem_path, page.width, page.height) == ("scans/a.tif", "a", 1000, 2000)
    assert page.raw.tolist() == ["TextBlock", "Illustration", "GraphicalElement", "TextBlock/heading",
                                 "ComposedBlock/table"]   # an untyped ComposedBlock is its blocks
    assert page.coarse.tolist() == ["text", "image", "other", "title", "table"]
    assert page.xyxy.tolist()[0] == [10, 20, 110, 70]
    assert page.order.tolist() == [1, -1, -1, 0, -1]
    assert page.text[0] == "Neue Zeitung"


def test_alto_in_mm10_is_placed_by_its_page_size_or_refused(tmp_path):
    ns = "http://www.loc.gov/standards/alto/ns-v3#"
    block = '<TextBlock ID="b" HPOS="100" VPOS="100" WIDTH="500" HEIGHT="500"/>'
    _write(tmp_path / "gt/a.xml", _alto(ns, block, unit="mm10", page='WIDTH="2100" HEIGHT="2970"'))
    _write(tmp_path / "gt/b.xml", _alto(ns, block, unit="mm10", page=""))
    _write(tmp_path / "gt/c.xml", _alto(ns, block, unit="furlong"))
    pages, problems = read_ground_truth(tmp_path / "gt")
    assert [(p.name, p.width, p.height, p.xyxy.tolist()) for p in pages] == [
        ("a.xml", 2100, 2970, [[100, 100, 600, 600]])]    # scaled onto the scan like any other ground truth
    assert problems == {"b.xml": "ALTO Page without WIDTH and HEIGHT: regions in mm10 cannot be placed on the scan",
                        "c.xml": "ALTO MeasurementUnit 'furlong': newsbag reads pixel, mm10, inch1200"}


def _coco(images, annotations, categories=({"id": 1, "name": "text"}, {"id": 2, "name": "Picture"})):
    return json.dumps({"images": list(images), "annotations": list(annotations), "categories": list(categories)})


def test_coco_images_are_pages_and_a_bad_image_is_left_out_alone(tmp_path, caplog):
    images = [{"id": 1, "file_name": "scans/a.png", "width": 100, "height": 200},
              {"id": 2, "file_name": "scans/b.png", "width": 100, "height": 200},
              {"id": 3, "file_name": "scans/c.png", "width": 100, "height": 200}]
    annotations = [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 20, 30, 40], "order": 0},
                   {"id": 2, "image_id": 1, "category_id": 2, "bbox": [50, 50, 10, 10]},
                   {"id": 3, "image_id": 1, "category_id": 3, "bbox": [0, 0, 10, 10]},
                   {"id": 4, "image_id": 2, "category_id": 1, "bbox": [1, 2, 3]}]
    cats = [{"id": 1, "name": "text"}, {"id": 2, "name": "Picture"}, {"id": 3, "name": "stamp"}]
    path = _write(tmp_path / "gt.json", _coco(images, annotations, cats))
    with caplog.at_level("WARNING"):
        pages, problems = read_ground_truth(path)
    assert [(p.name, p.image, p.stem_path, len(p)) for p in pages] == [
        ("gt.json:scans/a.png", "scans/a.png", "scans/a", 3), ("gt.json:scans/c.png", "scans/c.png", "scans/c", 0)]
    assert pages[0].xyxy.tolist() == [[10, 20, 40, 60], [50, 50, 60, 60], [0, 0, 10, 10]]
    assert pages[0].coarse.tolist() == ["text", "image", "other"] and pages[0].order.tolist() == [0, -1, -1]
    assert problems == {"gt.json:scans/b.png": "annotation 4: bbox must be 4 finite numbers [x, y, w, h], "
                                               "w and h >= 0, got [1, 2, 3]"}
    assert any("categories not in the label table, read as unknown (not scored): stamp" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("name, text, reason", [
    ("broken.xml", "<PcGts><Page", "unreadable XML: "),
    ("other.xml", "<html/>", "not PAGE-XML or ALTO (root element html)"),
    ("other.json", "[1]", "not a COCO file (expected images, annotations and categories lists)"),
    ("nopage.xml", f'<PcGts xmlns="{PAGE_2019}"/>', "PAGE-XML without a Page element"),
    ("nosize.xml", _page_xml(PAGE_2019, "", w="", h=""), "page width must be a positive number, got ''"),
])
def test_a_file_that_is_not_usable_ground_truth_is_named_and_the_rest_read(tmp_path, name, text, reason):
    _write(tmp_path / "gt/good.xml", _page_xml(PAGE_2019, ""))
    _write(tmp_path / f"gt/{name}", text)
    pages, problems = read_ground_truth(tmp_path / "gt")
    assert [p.name for p in pages] == ["good.xml"]
    assert list(problems) == [name] and problems[name].startswith(reason) and "\n" not in problems[name]


def test_a_folder_without_ground_truth_is_an_input_error(tmp_path):
    from newsbag.errors import InputError

    _write(tmp_path / "gt/readme.txt", "")
    with pytest.raises(InputError, match="no ground truth found: expected a folder of PAGE-XML or ALTO files"):
        read_ground_truth(tmp_path / "gt")


def test_the_label_table_is_the_manual_s():
    """docs/ground-truth.md shows the table as the code declares it; rewrite it from
    `label_table_markdown()` when the table changes."""
    from nbtest import REPO
    from newsbag.groundtruth.labels import label_table_markdown

    assert label_table_markdown() in (REPO / "docs/ground-truth.md").read_text(encoding="utf-8")
    assert all(key == key.lower().replace("_", "-") for key in TYPES)   # as `type_key` compares them


def test_ground_truth_of_no_run_page_is_named_and_the_rest_scored(tmp_path, caplog):
    from nbtest import write_manifest
    from newsbag.evaluate import run_evaluate

    run = tmp_path / "run"
    write_manifest(run, [{"page_id": "s1", "path": "scans/issue1/s1.tif", "width": 1000, "height": 2000}])
    (run / "outputs/sources/x/y").mkdir(parents=True)
    (run / "outputs/sources/x/y/s1.json").write_text(json.dumps(
        {"page_id": "s1", "image": {"path": "scans/issue1/s1.tif", "width": 1000, "height": 2000}, "source": {},
         "regions": [{"bbox_xyxy": [10, 60, 400, 300], "label": "t", "class": "text"}]}))
    body = '<TextRegion id="p"><Coords points="10,60 400,60 400,300 10,300"/></TextRegion>'
    _write(tmp_path / "gt/issue1/page/s1.xml", _page_xml(PAGE_2019, body, image="s1.jpg"))   # by file name
    _write(tmp_path / "gt/issue9/page/s9.xml", _page_xml(PAGE_2019, body, image="s9.jpg"))
    with caplog.at_level("WARNING"):
        res = run_evaluate(run, tmp_path / "gt")
    assert res["pages"] == 1 and res["sources"][0]["iou_f1"] == 1.0 and res["unmatched_gt"] == ["issue9/page/s9.xml"]
    assert [r.getMessage() for r in caplog.records if "s9" in r.getMessage()] == [
        f"evaluate: 1 ground-truth page(s) in {tmp_path / 'gt'} match no run page (by the image they name, page id, "
        "path, or file name without extension), skipped: issue9/page/s9.xml"]


def test_many_unmatched_ground_truth_pages_are_one_line(tmp_path, caplog):
    """Ground truth of a whole collection against a few pages: one warning naming five and the count."""
    from nbtest import write_manifest
    from newsbag.evaluate import run_evaluate

    run = tmp_path / "run"
    write_manifest(run, [{"page_id": "s1", "path": "scans/s1.tif", "width": 1000, "height": 2000}])
    body = '<TextRegion id="p"><Coords points="10,60 400,60 400,300 10,300"/></TextRegion>'
    for i in range(1, 9):
        _write(tmp_path / f"gt/s{i}.xml", _page_xml(PAGE_2019, body, image=f"s{i}.jpg"))
    with caplog.at_level("WARNING"):
        run_evaluate(run, tmp_path / "gt")
    lines = [r.getMessage() for r in caplog.records if "match no run page" in r.getMessage()]
    assert lines == [f"evaluate: 7 ground-truth page(s) in {tmp_path / 'gt'} match no run page (by the image they "
                     "name, page id, path, or file name without extension), skipped: s2.xml, s3.xml, s4.xml, "
                     "s5.xml, s6.xml and 2 more"]


@pytest.mark.parametrize("xml, image, named, expected", [
    ("a/p1.xml", "a/p1.tif", "p1.tif", "a/p1.tif"),                           # beside the file (eScriptorium)
    ("a/page/p1.xml", "a/p1.tif", "p1.tif", "a/p1.tif"),                      # Transkribus
    ("ws/OCR-D-GT-SEG/g1.xml", "ws/OCR-D-IMG/1.tif", "OCR-D-IMG/1.tif", "ws/OCR-D-IMG/1.tif"),   # OCR-D workspace
    ("a/page/p1.xml", None, "p1.tif", "a/p1.tif"),                            # images not exported: Transkribus' place
    ("a/p1.xml", None, "C:\\scans\\p1.tif", "C:/scans/p1.tif"),               # Aletheia on Windows
])
def test_the_named_image_is_found_where_each_tool_puts_it(tmp_path, xml, image, named, expected):
    _write(tmp_path / "gt" / xml, _page_xml(PAGE_2019, "", image=named))
    if image:
        _write(tmp_path / "gt" / image, "")
    (page,), _ = read_ground_truth(tmp_path / "gt")
    assert page.image == expected
