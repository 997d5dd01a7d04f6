"""text_lines runner: DB post-processing on hand-made maps, line grouping, the real PP-OCRv4 det on NZZ pages."""

from __future__ import annotations

import json

import numpy as np
import pytest

import _db  # noqa: E402  (runners/ is on sys.path via conftest)

pytest.importorskip("onnxruntime")

NZZ_STEM = "nzz_19330203_0_0_a1_p1_1"  # 3912x5551, 5 columns, ~470 ground-truth lines


@pytest.mark.parametrize("h, w, max_side, expected", [
    (1800, 1321, 2048, (2048, 1504)),   # upscaled: 1321 * 2048/1800 = 1503 -> 1504
    (5551, 3912, 2048, (2048, 1440)),   # 3912 * 0.369 = 1443.3 -> 1440
    (10, 10, 2048, (2048, 2048)),
    (100, 40, 32, (32, 32)),            # never below one 32-pixel cell
])
def test_db_input_hw(h, w, max_side, expected):
    assert _db.db_input_hw(h, w, max_side) == expected


def _prob_map():
    prob = np.zeros((20, 30))
    prob[2:6, 3:13] = 0.9      # a text kernel: box x 3..13, y 2..6
    prob[10:12, 20:22] = 0.9   # 2x2 speck: short side 2 < min_side 3
    prob[14:18, 2:20] = 0.35   # above the 0.3 binarisation, mean 0.35 < box threshold 0.5
    return prob


def test_components_and_box_mean():
    prob = _prob_map()
    boxes = _db.components_xyxy(prob > 0.3)
    assert boxes.tolist() == [[3, 2, 13, 6], [20, 10, 22, 12], [2, 14, 20, 18]]
    np.testing.assert_allclose(_db.box_mean(prob, boxes), [0.9, 0.9, 0.35])
    # A box twice the kernel's width holds half background: mean halves.
    np.testing.assert_allclose(_db.box_mean(prob, np.array([[3, 2, 23, 6]])), [0.45])


def test_db_boxes_unclip_and_filters():
    boxes, scores = _db.db_boxes(_prob_map(), bin_threshold=0.3, box_threshold=0.5, unclip_ratio=1.6)
    d = (10 * 4) * 1.6 / (2 * (10 + 4))  # area * ratio / perimeter of the 10x4 kernel
    np.testing.assert_allclose(boxes, [[3 - d, 2 - d, 13 + d, 6 + d]])
    np.testing.assert_allclose(scores, [0.9])


def test_db_boxes_empty_map():
    boxes, scores = _db.db_boxes(np.zeros((8, 8)))
    assert boxes.shape == (0, 4) and scores.shape == (0,)


H = 20  # line height of the hand-made pages below

# (lines xyxy, expected block partition as lists of line indices) — one comment per row.
GROUP_CASES = [
    ([], []),                                                                          # empty
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [0, 44, 300, 44 + H],
      [340, 0, 640, H], [340, 22, 640, 22 + H]], [[0, 1, 2], [3, 4]]),                # two columns
    ([[0, 0, 300, H], [0, 22, 120, 22 + H], [20, 44, 300, 44 + H], [0, 66, 300, 66 + H]],
     [[0, 1], [2, 3]]),                                                                # short last line ends a paragraph
    ([[0, 0, 300, H], [0, 22, 190, 22 + H], [195, 22, 300, 22 + H], [0, 44, 300, 44 + H]],
     [[0, 1, 2, 3]]),                                                                  # a line split at a word space
    ([[0, 0, 300, 3 * H], [0, 62, 300, 62 + H], [0, 84, 300, 84 + H]], [[0], [1, 2]]),  # headline 3x taller
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [0, 120, 300, 120 + H]], [[0, 1], [2]]),  # vertical gap of 4 lines
]


@pytest.mark.parametrize("lines, blocks", GROUP_CASES)
def test_group_lines(lines, blocks):
    block = _db.group_lines(np.array(lines, dtype=float).reshape(-1, 4))
    got = sorted(sorted(np.flatnonzero(block == b).tolist()) for b in np.unique(block))
    assert got == blocks


def _centres_inside(xyxy, regions):
    c = (xyxy[:, :2] + xyxy[:, 2:]) / 2
    return ((c[:, None, 0] >= regions[None, :, 0]) & (c[:, None, 0] <= regions[None, :, 2])
            & (c[:, None, 1] >= regions[None, :, 1]) & (c[:, None, 1] <= regions[None, :, 3])).any(1)


def test_lines_and_blocks_on_an_nzz_page(harness):
    image, gt = harness.nzz_page(NZZ_STEM)
    page = harness.page_entry(image, "nzz")
    rc_l, out_l = harness.run("text_lines", [page], {"group": False}, variant="lines")
    rc_b, out_b = harness.run("text_lines", [page], {"group": True}, variant="blocks")
    assert rc_l == rc_b == 0
    report = json.loads((out_l / "run_report.json").read_text())
    assert report["model"].startswith("ch_PP-OCRv4_det_infer.onnx") and report["device_used"] == "cpu"

    gt_text = np.array([r["bbox_xyxy"] for r in gt["regions"] if r["label"] == "text"], dtype=float)
    n_gt_lines = sum(len(r.get("lines", [])) for r in gt["regions"])
    lines = harness.read_page(out_l, "nzz")["regions"]
    assert {r["label"] for r in lines} == {"text_line"} and {r["class"] for r in lines} == {"text_line"}
    xyxy = np.array([r["bbox_xyxy"] for r in lines])
    assert 0.7 * n_gt_lines <= len(lines) <= 1.6 * n_gt_lines
    assert _centres_inside(xyxy, gt_text).mean() > 0.85
    assert np.median(xyxy[:, 2] - xyxy[:, 0]) > 5 * np.median(xyxy[:, 3] - xyxy[:, 1])  # lines, not words
    assert all(0.5 <= r["score"] <= 1 for r in lines)

    blocks = harness.read_page(out_b, "nzz")["regions"]
    assert {r["label"] for r in blocks} == {"text_block"} and {r["class"] for r in blocks} == {"text"}
    b_xyxy = np.array([r["bbox_xyxy"] for r in blocks])
    assert 0.3 * len(gt_text) <= len(blocks) <= min(2 * len(gt_text), len(lines) / 3)
    # Every line lies inside some block (blocks are unions of lines).
    inside = ((xyxy[:, None, :2] >= b_xyxy[None, :, :2] - 0.01).all(2)
              & (xyxy[:, None, 2:] <= b_xyxy[None, :, 2:] + 0.01).all(2))
    assert inside.any(1).all()


def test_sample_page_as_a_subprocess(harness):
    page = harness.page_entry(harness.sample_page, "sample")
    rc, out, stdout = harness.run_script("text_lines", [page])
    assert rc == 0, stdout
    assert '"event": "end", "ok": 1' in stdout
    lines = harness.read_page(out, "sample")["regions"]
    assert len(lines) >= 800  # a dense 8-column US front page at 1114x1500
    xyxy = np.array([r["bbox_xyxy"] for r in lines])
    assert (xyxy[:, 2] <= page["width"]).all() and (xyxy[:, 3] <= page["height"]).all()


def test_gpu_without_fallback_exits_5(harness):
    page = harness.page_entry(harness.sample_page, "sample")
    rc, out = harness.run("text_lines", [page], device="gpu", allow_cpu_fallback=False)
    assert rc == 5
    assert not (out / "sample.json").exists()
