"""text_lines runner: DB post-processing on hand-made maps, line grouping, the real PP-OCRv4 det on NZZ pages."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import ndimage

import _columns  # noqa: E402  (runners/ is on sys.path via conftest)
import _db  # noqa: E402
from newsbag.evaluate import evaluate_page_class  # noqa: E402

pytest.importorskip("onnxruntime")

NZZ_STEM = "nzz_19330203_0_0_a1_p1_1"  # 3912x5551, 5 columns, ~470 ground-truth lines


@pytest.mark.parametrize("h, w, max_side, expected", [
    (1800, 1321, 2048, (1792, 1312)),   # smaller than max_side: own size, to multiples of 32 (no upscale)
    (5551, 3912, 2048, (2048, 1440)),   # 3912 * 0.369 = 1443.3 -> 1440
    (10, 10, 2048, (32, 32)),           # tiny page: one 32-pixel cell, not 2048x2048
    (1, 1, 2048, (32, 32)),             # 1x1 page
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


def test_components_and_their_own_pixel_scores():
    prob = _prob_map()
    assert _db.components_xyxy(prob > 0.3).tolist() == [[3, 2, 13, 6], [20, 10, 22, 12], [2, 14, 20, 18]]
    labels, n = ndimage.label(prob > 0.3, structure=np.ones((3, 3), bool))
    score, length, thick = _db.component_stats(prob, labels, n)
    np.testing.assert_allclose(score, [0.9, 0.9, 0.35])
    np.testing.assert_allclose(length, [10, 2, 18])   # upright rectangles: their sides
    np.testing.assert_allclose(thick, [4, 2, 4])


def _skewed_line(length=300, thick=4, rise=12, shape=(40, 320)):
    """A text kernel 4 px thick rising 12 px over 300 px (a 2.3 degree skew), prob 0.9."""
    prob = np.zeros(shape)
    for x in range(length):
        y = 10 + round(rise * x / length)
        prob[y:y + thick, 10 + x] = 0.9
    return prob


def test_skewed_line_is_scored_by_its_own_pixels():
    # Its upright box (300 x 16) is 3/4 background: mean 0.9 * 4/16 = 0.23 < 0.5 dropped it.
    prob = _skewed_line()
    boxes, scores = _db.db_boxes(prob, bin_threshold=0.3, box_threshold=0.5, unclip_ratio=1.6)
    assert len(boxes) == 1
    np.testing.assert_allclose(scores, [0.9])
    # Unclipped by its own thickness (4 px: d = 300*4*1.6 / (2*304) = 3.2), not its box's 16.
    d = 300 * 4 * 1.6 / (2 * (300 + 4))
    np.testing.assert_allclose(boxes[0], [10 - d, 10 - d, 310 + d, 26 + d], atol=0.3)


def test_db_boxes_unclip_and_filters():
    boxes, scores = _db.db_boxes(_prob_map(), bin_threshold=0.3, box_threshold=0.5, unclip_ratio=1.6)
    d = (10 * 4) * 1.6 / (2 * (10 + 4))  # area * ratio / perimeter of the 10x4 kernel
    np.testing.assert_allclose(boxes, [[3 - d, 2 - d, 13 + d, 6 + d]])
    np.testing.assert_allclose(scores, [0.9])


def test_db_boxes_empty_map():
    boxes, scores = _db.db_boxes(np.zeros((8, 8)))
    assert boxes.shape == (0, 4) and scores.shape == (0,)


H = 20  # line height of the hand-made pages below; lines 22 px apart (2 px leading)


def _column(x0, x1, n, y=0, pitch=22):
    return [[x0, y + k * pitch, x1, y + k * pitch + H] for k in range(n)]


def _partition(ids):
    return sorted(sorted(np.flatnonzero(ids == b).tolist()) for b in np.unique(ids))


# (lines xyxy, expected block partition as lists of line indices) — one comment per row.
GROUP_CASES = [
    ([], []),                                                                          # empty
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [0, 44, 300, 44 + H],
      [340, 0, 640, H], [340, 22, 640, 22 + H]], [[0, 1, 2], [3, 4]]),                # two columns
    ([[0, 0, 300, H], [0, 22, 120, 22 + H], [20, 44, 300, 44 + H], [0, 66, 300, 66 + H]],
     [[0, 1], [2, 3]]),                                                                # short last line ends a paragraph
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [20, 44, 300, 44 + H], [0, 66, 300, 66 + H]],
     [[0, 1], [2, 3]]),                                                                # indented first line starts one
    ([[0, 0, 300, H], [0, 22, 190, 22 + H], [195, 22, 300, 22 + H], [0, 44, 300, 44 + H]],
     [[0, 1, 2, 3]]),                                                                  # a line split at a word space
    ([[0, 0, 300, H], [0, 22, 150, 22 + H], [140, 30, 300, 30 + H], [0, 44, 300, 44 + H]],
     [[0, 1, 2, 3]]),                                                                  # pieces 8 px off-level (0.4 H) still one row
    ([[0, 0, 300, 3 * H], [0, 62, 300, 62 + H], [0, 84, 300, 84 + H]], [[0], [1, 2]]),  # headline 3x taller
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [0, 120, 300, 120 + H]], [[0, 1], [2]]),  # vertical gap of 4 lines
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [100, 44, 200, 44 + H], [0, 66, 300, 66 + H],
      [0, 88, 300, 88 + H]], [[0, 1], [2], [3, 4]]),                                   # centred dateline between paragraphs
    ([[0, 0, 300, H], [0, 22, 300, 22 + H], [0, 44, 300, 44 + H], [0, 66, 300, 66 + H]],
     [[0, 1, 2, 3]]),                                                                  # 4 plain lines: one paragraph
]


@pytest.mark.parametrize("lines, blocks", GROUP_CASES)
def test_group_lines(lines, blocks):
    xyxy = np.array(lines, dtype=float).reshape(-1, 4)
    pieces, parent, block = _db.group_lines(xyxy)
    np.testing.assert_array_equal(parent, np.arange(len(lines)))  # nothing here crosses a gutter
    np.testing.assert_array_equal(pieces, xyxy)
    assert _partition(block) == blocks


def test_group_lines_drops_specks():
    lines = _column(0, 300, 3) + [[150, 30, 158, 36]]  # 8x6 dirt between lines 1 and 2
    pieces, parent, block = _db.group_lines(np.array(lines, dtype=float))
    assert parent.tolist() == [0, 1, 2] and _partition(block) == [[0, 1, 2]]


def _two_columns(gutter_px: float, n: int = 12, span_row: int | None = 5):
    """Columns x 0..300 and 300+gutter..600+gutter; row ``span_row`` is one line DB ran across both."""
    left = _column(0, 300, n)
    right = _column(300 + gutter_px, 600 + gutter_px, n)
    if span_row is None:
        return np.array(left + right, dtype=float)
    spanning = [[0, span_row * 22, 600 + gutter_px, span_row * 22 + H]]
    keep = [k for k in range(n) if k != span_row]
    return np.array([left[k] for k in keep] + [right[k] for k in keep] + spanning, dtype=float)


def test_find_gutters_marks_the_gutter_only():
    # Unclipped lines 8 px apart (0.4 H): the cores (shrunk by 0.25 H = 5 px) leave 18 px.
    gutters = _columns.find_gutters(_two_columns(8), H)
    rows, cols = np.nonzero(gutters.mask)
    x = (cols + 0.5) * gutters.cell_w
    assert rows.size > 0
    assert ((x > 295) & (x < 313)).all()  # inside the core gap, nowhere in the text
    # Every line row of the columns (not only the spanning one) sees the gutter.
    row_of_line = (np.arange(12) * 22 + H / 2) // gutters.cell_h
    assert set(row_of_line.astype(int)) <= set(rows.tolist())


def test_find_gutters_ignores_word_spaces():
    # One column with word spaces at staggered places on every line: no gutter.
    lines = []
    for k in range(12):
        split = 80 + 37 * (k % 5)
        lines += [[0, k * 22, split, k * 22 + H], [split + 6, k * 22, 300, k * 22 + H]]
    assert not _columns.find_gutters(np.array(lines, dtype=float), H).mask.any()


def test_split_at_gutters_cuts_and_trims():
    xyxy = _two_columns(8)
    gutters = _columns.find_gutters(xyxy, H)
    stub = np.array([[0, 22, 318, 22 + H]])  # left-column line poking 10 px into the right one
    pieces, parent = _columns.split_at_gutters(np.vstack([xyxy, stub]), gutters, min_piece=2 * H)
    n = len(xyxy)
    spanning = n - 1
    assert (parent == spanning).sum() == 2 and (parent == n).sum() == 1
    left_piece, right_piece = pieces[parent == spanning]
    assert left_piece[0] == 0 and 295 <= left_piece[2] <= 308   # ends at the gutter
    assert 300 <= right_piece[0] <= 313 and right_piece[2] == 608
    assert (left_piece[[1, 3]] == [5 * 22, 5 * 22 + H]).all()
    assert 295 <= pieces[parent == n][0, 2] <= 308  # the stub was trimmed, not cut off as a piece
    others = parent < spanning
    np.testing.assert_array_equal(pieces[others], xyxy[:spanning])  # untouched lines stay as they were


@pytest.mark.parametrize("gutter_px, span_row", [
    (8, 5),      # narrow gutter (less than word_gap) and one line run across it
    (8, None),   # narrow gutter, rows of the two columns would join at a word-space distance
    (30, 5),     # ordinary gutter with a spanning line
])
def test_group_lines_never_crosses_a_gutter(gutter_px, span_row):
    xyxy = _two_columns(gutter_px, span_row=span_row)
    pieces, parent, block = _db.group_lines(xyxy)
    centre_x = (pieces[:, 0] + pieces[:, 2]) / 2
    side = centre_x > 300
    assert len(np.unique(block)) == 2
    assert all(len(set(side[block == b])) == 1 for b in np.unique(block))
    if span_row is not None:
        assert sorted(side[parent == len(xyxy) - 1].tolist()) == [False, True]


def test_gutter_cells_between_counts_cells_in_the_row():
    mask = np.zeros((3, 10), bool)
    mask[1, 4:6] = True
    g = _columns.Gutters(mask, 10.0, 10.0)
    got = _columns.gutter_cells_between(g, np.array([0.0, 0.0, 0.0, 51.0]), np.array([100.0, 100.0, 40.0, 100.0]),
                                        np.array([15.0, 5.0, 15.0, 15.0]))
    assert got.tolist() == [2, 0, 0, 0]  # row 1 spans both; row 0 none; ends before; starts after


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
    # Blocks are unions of line pieces: nearly every line centre lies in a block (specks
    # are dropped, lines cut at a gutter may have their centre in it).
    kept = _centres_inside(xyxy, b_xyxy)
    assert kept.mean() > 0.9
    area = (xyxy[:, 2] - xyxy[:, 0]) * (xyxy[:, 3] - xyxy[:, 1])
    assert np.median(area[~kept]) < 0.1 * np.median(area[kept])  # what is left out is specks
    # Paragraph granularity, no cross-column blocks (grouping before gutters and paragraph
    # cues: iou_f1 0.24, xcol 0.08 on this page; now 0.60 and 0.0).
    m = evaluate_page_class(b_xyxy, gt_text, gt["width"], gt["height"])
    assert m["iou_f1"] >= 0.45 and m["xcol"] <= 0.03 and m["region_recall"] >= 0.85


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


# --- the sweep against the dense all-pairs grouping it replaced (tests/reference/dense_db.py) ---

def _newspaper_lines(rng, n_cols: int, lines_per_col: int, lh: float = 30.0) -> np.ndarray:
    """Columns of jittered lines with paragraph gaps, indents, word splits and lines run across a gutter."""
    boxes = []
    for c in range(n_cols):
        y, left = 100.0, 50 + c * 625
        for _ in range(lines_per_col):
            y += lh * 1.2 if rng.random() < 0.08 else 0.0
            x0 = left + (rng.uniform(20, 60) if rng.random() < 0.1 else rng.uniform(-3, 3))
            x1 = left + 600 - (rng.uniform(50, 400) if rng.random() < 0.1 else rng.uniform(-3, 3))
            if rng.random() < 0.15:
                mid = rng.uniform(x0 + 50, x1 - 50)
                boxes += [[x0, y, mid, y + lh + rng.uniform(-2, 2)], [mid + rng.uniform(5, 12), y, x1, y + lh]]
            else:
                boxes.append([x0, y, x1, y + lh + rng.uniform(-2, 2)])
            y += lh * 0.95
    xyxy = np.array(boxes)
    across = rng.choice(len(xyxy), len(xyxy) // 50, replace=False)
    xyxy[across, 2] += 400
    return xyxy


def _random_lines(rng, n: int) -> np.ndarray:
    xy = rng.uniform(0, 1000, (n, 2))
    wh = rng.uniform(1, 120, (n, 2)) * [3, 0.3]
    return np.hstack([xy, xy + wh])


def test_group_lines_equals_the_dense_grouping():
    from reference.dense_db import group_lines_dense

    rng = np.random.default_rng(7)
    inputs = [_random_lines(rng, int(rng.integers(0, 250))) for _ in range(150)]
    inputs += [_newspaper_lines(rng, int(rng.integers(1, 7)), int(rng.integers(5, 90))) for _ in range(6)]
    for xyxy in inputs:
        for got, want in zip(_db.group_lines(xyxy), group_lines_dense(xyxy)):
            np.testing.assert_array_equal(got, want)


def test_group_lines_memory_is_not_quadratic():
    # 8,000 lines: the dense version held several N x N float matrices (>= 0.5 GB each).
    import tracemalloc

    xyxy = _newspaper_lines(np.random.default_rng(3), 8, 850)
    assert len(xyxy) > 7000
    tracemalloc.start()
    try:
        _db.group_lines(xyxy)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400e6


def _db_like_model(path, half: bool) -> None:
    """A DB head in miniature: prob = sigmoid(-4 * channel 0 of the normalised input), so dark ink
    gives text probability; ``half``: input and output float16, as an fp16 export of the det model."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    elem, dtype = (TensorProto.FLOAT16, np.float16) if half else (TensorProto.FLOAT, np.float32)
    nodes = [helper.make_node("Slice", ["x", "start", "end", "axis"], ["c0"]),
             helper.make_node("Mul", ["c0", "k"], ["logit"]),
             helper.make_node("Sigmoid", ["logit"], ["prob"])]
    init = [numpy_helper.from_array(np.array([0], np.int64), "start"), numpy_helper.from_array(np.array([1], np.int64), "end"),
            numpy_helper.from_array(np.array([1], np.int64), "axis"), numpy_helper.from_array(np.array(-4.0, dtype), "k")]
    graph = helper.make_graph(nodes, "db_like", [helper.make_tensor_value_info("x", elem, [1, 3, None, None])],
                              [helper.make_tensor_value_info("prob", elem, [1, 1, None, None])], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_a_float16_det_model_finds_the_lines_of_its_float32_twin(harness, tmp_path):
    """onnxruntime refuses float32 for a float16 input ("Unexpected input data type"): the runner
    feeds each input the type the model declares and reads the map back as float32."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (640, 480), "white")
    draw = ImageDraw.Draw(image)
    for y in (40, 120, 200):
        draw.rectangle([50, y, 500, y + 30], fill="black")
    image.save(tmp_path / "page.png")
    page = harness.page_entry(tmp_path / "page.png", "page")
    boxes = {}
    for half in (False, True):
        model = tmp_path / f"db_{half}.onnx"
        _db_like_model(model, half)
        rc, out = harness.run("text_lines", [page], {"model_path": str(model)}, variant=f"half_{half}")
        assert rc == 0, json.loads((out / "_failed" / "page.json").read_text())["error"]
        boxes[half] = [r["bbox_xyxy"] for r in harness.read_page(out, "page")["regions"]]
    assert len(boxes[False]) == 3
    np.testing.assert_allclose(boxes[True], boxes[False], atol=1.0)
