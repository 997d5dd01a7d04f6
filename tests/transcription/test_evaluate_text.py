"""Transcript metrics: CER with collapsed whitespace, pairwise reading-order agreement, the nzz pairing."""

import json

import numpy as np
import pytest

from newsbag import rundir
from newsbag.evaluate_text import char_error_rate, evaluate_transcripts, gt_conventions, order_agreement

from nbtest import write_manifest


@pytest.mark.parametrize("pred, ref, expected", [
    ("abc", "abc", (0, 3)),            # identical
    ("a \n\n b", "a b", (0, 3)),       # line breaks and runs of spaces are layout, not text
    ("abd", "abc", (1, 3)),            # one substitution
    ("", "abc", (3, 3)),               # nothing read
    ("abc", "", (3, 0)),               # nothing to read
])
def test_char_error_rate(pred, ref, expected):
    assert char_error_rate(pred, ref) == expected


@pytest.mark.parametrize("gt, pred, expected", [
    ([0, 1, 2], [0, 1, 2], (1.0, 3)),       # same order
    ([0, 1, 2], [2, 1, 0], (0.0, 3)),       # reversed
    ([0, 1, 2], [0, 0, 1], (5 / 6, 3)),     # 0 and 1 in one predicted region: half credit
    ([0], [0], (np.nan, 0)),                # one region: no pair
])
def test_order_agreement(gt, pred, expected):
    got = order_agreement(np.array(gt), np.array(pred))
    np.testing.assert_allclose(got[0], expected[0])
    assert got[1] == expected[1]


def _gt_and_run(tmp_path, gt_size, run_size, regions):
    """A ground-truth page "a" of `gt_size` with `regions`, a run whose manifest holds it at
    `run_size`, and that run's empty transcript folder for variant C: (run, gt, transcripts)."""
    gt = tmp_path / "gt"
    (gt / "annotations").mkdir(parents=True)
    (gt / "annotations" / "a.json").write_text(json.dumps({
        "page_id": "a", "image": "images/a.png", "width": gt_size[0], "height": gt_size[1], "regions": regions}))
    run = tmp_path / "run"
    write_manifest(run, [{"page_id": "a", "path": "../gt/images/a.png", "image_path": str(gt / "images/a.png"),
                          "width": run_size[0], "height": run_size[1], "sha256": "0"}])
    out = rundir.transcript_dir(run, "C")
    out.mkdir(parents=True)
    return run, gt, out


def test_evaluate_transcripts_pairs_pages_and_scores_text_and_order(tmp_path):
    # the run page is the same image at half size: boxes scale back to ground-truth pixels
    run, gt, out = _gt_and_run(tmp_path, (200, 100), (100, 50), [
        {"bbox_xyxy": [0, 0, 90, 100], "label": "text", "order": 0, "text": "left text"},
        {"bbox_xyxy": [110, 0, 200, 100], "label": "text", "order": 1, "text": "right"},
        {"bbox_xyxy": [0, 0, 200, 2], "label": "separator"}])
    # read right column first: order wrong, text right
    (out / "a.json").write_text(json.dumps({"page_id": "a", "text": "right\n\nleft text", "regions": [
        {"bbox_xyxy": [55, 0, 100, 50], "text": "right"}, {"bbox_xyxy": [0, 0, 45, 50], "text": "left text"}]}))
    [result] = evaluate_transcripts(run, gt)
    assert (result["variant"], result["pages"]) == ("C", 1)
    edits, _ = char_error_rate("right left text", "left text right")
    assert result["cer"] == pytest.approx(edits / len("left text right"))
    assert result["cer_gt_order"] == 0.0
    assert result["order"] == 0.0
    assert (out / "eval_transcripts.tsv").read_text().splitlines()[1].startswith("a\t")


@pytest.mark.parametrize("text, expected", [
    ("Geſetz", "Gesetz"),                          # long s as s
    ("Zei¬\ntung", "Zei-\ntung"),                  # line-end hyphen marks as "-"
    ("Zei⸗\ntung Zei=  \nen", "Zei-\ntung Zei-  \nen"),
    ("Zei¬", "Zei-"),                              # at the end of the text too
    ("a = b\nc", "a = b\nc"),                      # not at a line end: left
])
def test_gt_conventions(text, expected):
    assert gt_conventions(text) == expected


def test_the_prediction_is_the_lines_as_read_with_their_hyphens(tmp_path):
    # the region text joined "Zei¬" "tung" for readers; the ground truth keeps the line break
    # and its hyphen, and so does what is scored
    run, gt, out = _gt_and_run(tmp_path, (100, 100), (100, 100), [
        {"bbox_xyxy": [0, 0, 100, 100], "label": "text", "order": 0, "text": "Die Zei¬\ntung iſt da"}])
    lines = [{"bbox_xyxy": [0, 0, 100, 10], "text": "Die Zei=", "hyphen": "dropped"},
             {"bbox_xyxy": [0, 10, 100, 20], "text": "tung ist da"}]
    (out / "a.json").write_text(json.dumps({"page_id": "a", "text": "Die Zeitung\nist da", "regions": [
        {"bbox_xyxy": [0, 0, 100, 100], "text": "Die Zeitung\nist da", "lines": lines}]}))
    [result] = evaluate_transcripts(run, gt)
    ref = len("Die Zei¬ tung iſt da")
    assert result["cer"] == pytest.approx(2 / ref)        # "=" for "¬", "s" for "ſ"
    assert result["cer_conv"] == 0.0


def test_page_xml_ground_truth_gives_its_lines_text_in_its_reading_order(tmp_path):
    """The reference text from PAGE-XML: TextLine TextEquiv in ReadingOrder, as from the nzz JSON."""
    run, gt, out = _gt_and_run(tmp_path, (200, 100), (200, 100), [])
    ns = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15"
    line = '<TextLine id="{0}l"><Coords points="{1}"/><TextEquiv><Unicode>{2}</Unicode></TextEquiv></TextLine>'
    regions = "".join(f'<TextRegion id="{rid}" type="paragraph"><Coords points="{pts}"/>{line.format(rid, pts, text)}'
                      "</TextRegion>" for rid, pts, text in (("r", "110,0 200,100", "right"),
                                                            ("l", "0,0 90,100", "left text")))
    page = gt / "page" / "a.xml"
    page.parent.mkdir()
    page.write_text(f'<PcGts xmlns="{ns}"><Page imageFilename="a.png" imageWidth="200" imageHeight="100">'
                    '<ReadingOrder><OrderedGroup id="g"><RegionRefIndexed index="0" regionRef="l"/>'
                    f'<RegionRefIndexed index="1" regionRef="r"/></OrderedGroup></ReadingOrder>{regions}</Page></PcGts>')
    (out / "a.json").write_text(json.dumps({"page_id": "a", "text": "left text\n\nright", "regions": [
        {"bbox_xyxy": [0, 0, 90, 100], "text": "left text"}, {"bbox_xyxy": [110, 0, 200, 100], "text": "right"}]}))
    [result] = evaluate_transcripts(run, gt / "page")
    assert (result["pages"], result["cer"], result["order"]) == (1, 0.0, 1.0)
