"""tesseract runner: real tesserocr layout analysis on a US front page and an NZZ page."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("tesserocr")

import tesseract  # noqa: E402  (runners/ is on sys.path via conftest)
from newsbag.tool_spec import label_table  # noqa: E402

NZZ_STEM = "nzz_17810901_0_0_a1_p1_1"


@pytest.mark.parametrize("width, height, max_side, expected", [
    (1000, 2000, 3500, 1.0),          # small page: untouched
    (4000, 7000, 3500, 3500 / 7000),  # long side brought to max_side
    (7000, 4000, 3500, 3500 / 7000),  # landscape: width is the long side
    (4000, 7000, 0, 1.0),             # 0 disables downscaling
])
def test_downscale_factor(width, height, max_side, expected):
    assert tesseract.downscale_factor(width, height, max_side) == pytest.approx(expected)


@pytest.mark.parametrize("info, expected", [
    ({"dpi": (300.0, 300.0)}, 300.0),   # square
    ({"dpi": (200, 400)}, 400.0),       # vertical resolution counts
    ({}, None),                          # no resolution in the file
    ({"dpi": (0, 0)}, None),             # Pillow's "unknown"
])
def test_source_dpi(info, expected):
    assert tesseract.source_dpi(info) == expected


@pytest.mark.parametrize("dpi, max_side, expected", [
    (300, 0, 300),        # full size: the file's dpi
    (300, 500, 150),      # 1000 px long side halved: half the dpi
])
def test_tesseract_gets_the_pages_resolution(tmp_path, dpi, max_side, expected):
    from PIL import Image

    path = tmp_path / "page.png"
    Image.new("L", (600, 1000), 255).save(path, dpi=(dpi, dpi))
    det = tesseract.TesseractDetector({"level": "block", "max_side": max_side}, "cpu", True)
    calls = []

    class Recorder:  # the real API, with SetSourceResolution recorded (tesserocr has no getter)
        def __getattr__(self, name):
            return getattr(api, name)

        def SetImage(self, image):
            calls.append(("SetImage", image.size))
            api.SetImage(image)

        def SetSourceResolution(self, value):
            calls.append(("SetSourceResolution", value))
            api.SetSourceResolution(value)

    api, det.api = det.api, Recorder()
    try:
        det.detect(str(path), {})
    finally:
        det.close()
    # After SetImage, which resets it.
    assert [c[0] for c in calls] == ["SetImage", "SetSourceResolution"] and calls[1][1] == expected


def test_every_block_type_has_a_label_mapping():
    import tesserocr

    names = set(tesseract.block_type_names(tesserocr.PT).values())
    assert {"flowing_text", "heading_text", "horz_line", "table"} <= names
    assert names <= set(label_table("tesseract"))


def _xyxy(page):
    return np.array([r["bbox_xyxy"] for r in page["regions"]], dtype=float).reshape(-1, 4)


def test_blocks_on_real_pages(harness):
    sample = harness.page_entry(harness.sample_page, "sample")
    nzz_image, gt = harness.nzz_page(NZZ_STEM)
    nzz = harness.page_entry(nzz_image, "nzz")
    rc, out = harness.run("tesseract", [sample, nzz])
    assert rc == 0
    report = json.loads((out / "run_report.json").read_text())
    assert report["model"].startswith("tesseract-5") and report["device_used"] == "cpu"

    page = harness.read_page(out, "sample")
    labels = Counter(r["label"] for r in page["regions"])
    # The US page has ~8 narrow columns: tesseract returns dozens of text blocks.
    assert labels["flowing_text"] + labels["vertical_text"] >= 20
    xyxy = _xyxy(page)
    assert (xyxy[:, :2] >= 0).all() and (xyxy[:, 2] <= sample["width"]).all() and (xyxy[:, 3] <= sample["height"]).all()
    assert all(r["class"] == label_table("tesseract")[r["label"]] for r in page["regions"])

    page = harness.read_page(out, "nzz")
    text = _xyxy({"regions": [r for r in page["regions"] if r["class"] == "text"]})
    assert len(text) >= 3
    # The text blocks cover most of the ground-truth text area of this one-column page.
    gt_text = np.array([r["bbox_xyxy"] for r in gt["regions"] if r["label"] == "text"], dtype=float)
    mask = np.zeros((gt["height"], gt["width"]), dtype=bool)
    for x0, y0, x1, y1 in text.astype(int):
        mask[y0:y1, x0:x1] = True
    gt_mask = np.zeros_like(mask)
    for x0, y0, x1, y1 in gt_text.astype(int):
        gt_mask[y0:y1, x0:x1] = True
    assert (mask & gt_mask).sum() / gt_mask.sum() > 0.7


def test_paragraphs_keep_their_block_type_and_lie_inside_blocks(harness):
    sample = harness.page_entry(harness.sample_page, "sample")
    rc_b, out_b = harness.run("tesseract", [sample], {"level": "block"}, variant="blocks")
    rc_p, out_p = harness.run("tesseract", [sample], {"level": "paragraph"}, variant="paras")
    assert rc_b == rc_p == 0
    blocks = harness.read_page(out_b, "sample")["regions"]
    paras = harness.read_page(out_p, "sample")["regions"]
    assert len(paras) >= len(blocks)
    b_xyxy, p_xyxy = _xyxy({"regions": blocks}), _xyxy({"regions": paras})
    inside = ((p_xyxy[:, None, :2] >= b_xyxy[None, :, :2] - 2).all(2)
              & (p_xyxy[:, None, 2:] <= b_xyxy[None, :, 2:] + 2).all(2))
    same_label = np.array([p["label"] for p in paras])[:, None] == np.array([b["label"] for b in blocks])[None, :]
    assert (inside & same_label).any(1).all()


def test_downscaled_boxes_are_scaled_back(harness):
    nzz_image, _ = harness.nzz_page(NZZ_STEM)
    page = harness.page_entry(nzz_image, "nzz")
    rc_full, out_full = harness.run("tesseract", [page], {"max_side": 0}, variant="full")
    rc_small, out_small = harness.run("tesseract", [page], {"max_side": 1200}, variant="small")
    assert rc_full == rc_small == 0
    full, small = (_xyxy({"regions": [r for r in harness.read_page(out, "nzz")["regions"] if r["class"] == "text"]})
                   for out in (out_full, out_small))
    # The text ends at the same right and bottom edges in original pixels (within 2 % of the
    # page), not at 1200/2362 of them. (The top edge differs: at 1200 px the masthead's
    # caption is typed text, at full size an image.)
    far_edges = lambda b: np.array([b[:, 2].max(), b[:, 3].max()])  # noqa: E731
    assert np.abs(far_edges(full) - far_edges(small)).max() < 0.02 * page["height"]
    assert far_edges(small)[1] > 0.8 * page["height"]


def test_gpu_without_fallback_exits_5(harness):
    sample = harness.page_entry(harness.sample_page, "sample")
    rc, out = harness.run("tesseract", [sample], device="gpu", allow_cpu_fallback=False)
    assert rc == 5
    assert not (out / "sample.json").exists()
