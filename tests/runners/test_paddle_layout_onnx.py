"""paddle_layout, onnxruntime backend: numpy pre/post-processing, real CDLA PP-PicoDet, a PaddleDetection-style export."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

import _picodet  # noqa: E402  (runners/ is on sys.path via conftest)
import paddle_layout  # noqa: E402

pytest.importorskip("onnxruntime")


# --- resize: OpenCV INTER_LINEAR semantics (half-pixel centres, edge clamp, no antialias) ---

def test_resize_2x2_to_4x4_by_hand():
    image = np.array([[0, 4], [8, 12]], dtype=np.uint8)
    # Output centres map to source x = (d + .5) / 2 - .5 = -.25 (clamped to 0), .25, .75, 1.25
    # (clamped to the last pixel), so the weights of the right/lower pixel are 0, 1/4, 3/4, 1.
    w = np.array([0, 0.25, 0.75, 1])
    row_top = 0 + (4 - 0) * w            # between 0 and 4
    row_bottom = 8 + (12 - 8) * w        # between 8 and 12
    expected = row_top[None, :] + (row_bottom - row_top)[None, :] * w[:, None]
    np.testing.assert_allclose(_picodet.resize_bilinear(image, (4, 4)), expected)


@pytest.mark.parametrize("image, out_hw, expected", [
    # 4 -> 2 samples source x = 0.5 and 2.5: the mean of each pixel pair, no wider kernel
    (np.array([[0, 2, 10, 30]]), (1, 2), np.array([[1, 20]])),
    # same size: identity
    (np.array([[1, 2], [3, 4]]), (2, 2), np.array([[1, 2], [3, 4]])),
    # 1 -> 3: a single pixel is copied
    (np.array([[7]]), (3, 1), np.array([[7], [7], [7]])),
])
def test_resize_small_cases(image, out_hw, expected):
    np.testing.assert_allclose(_picodet.resize_bilinear(image.astype(np.uint8), out_hw), expected)


def test_resize_keeps_channels_and_input_tensor_normalises():
    image = np.full((10, 20, 3), (255, 0, 128), dtype=np.uint8)
    tensor = _picodet.to_input_tensor(image, (8, 4))
    assert tensor.shape == (1, 3, 8, 4) and tensor.dtype == np.float32
    # BGR order: channel 0 is blue (128), normalised with the first mean/std entry.
    mean, std = _picodet.IMAGENET_MEAN, _picodet.IMAGENET_STD
    np.testing.assert_allclose(tensor[0, :, 0, 0], [(128 / 255 - mean[0]) / std[0], (0 - mean[1]) / std[1],
                                                    (1 - mean[2]) / std[2]], rtol=1e-5)


# --- GFL decoding ---

def test_anchor_counts_match_cdla_outputs():
    counts = [_picodet.anchor_centres((800, 608), s).shape[0] for s in (8, 16, 32, 64)]
    assert counts == [7600, 1900, 475, 130]
    np.testing.assert_allclose(_picodet.anchor_centres((800, 608), 64)[[0, 1, 10]],
                               [[32, 32], [96, 32], [32, 96]])  # 10 columns per row at stride 64


def test_decode_gfl_level_by_hand():
    bins = 8
    one_hot = np.full((4, bins), -50.0)
    one_hot[[0, 1, 2, 3], [1, 2, 3, 0]] = 50.0   # left 1, top 2, right 3, bottom 0 bins
    uniform = np.zeros((4, bins))                 # expectation (0 + ... + 7) / 8 = 3.5 bins
    dist = np.stack([one_hot.ravel(), uniform.ravel()])
    centres = np.array([[100.0, 200.0], [50.0, 50.0]])
    boxes = _picodet.decode_gfl_level(dist, centres, stride=16)
    np.testing.assert_allclose(boxes[0], [100 - 16, 200 - 32, 100 + 48, 200 + 0], atol=1e-6)
    np.testing.assert_allclose(boxes[1], [50 - 56, 50 - 56, 50 + 56, 50 + 56], atol=1e-6)


# (boxes, scores, classes, iou threshold, kept indices in score order) — one comment per row.
NMS_CASES = [
    ([], [], [], 0.5, []),                                                  # empty
    ([[0, 0, 10, 10], [1, 0, 11, 10]], [.9, .8], [0, 0], 0.5, [0]),         # IoU 9/11 same class: drop
    ([[0, 0, 10, 10], [1, 0, 11, 10]], [.9, .8], [0, 1], 0.5, [0, 1]),      # same overlap, other class: keep
    ([[0, 0, 10, 10], [5, 0, 15, 10]], [.7, .9], [2, 2], 0.5, [1, 0]),      # IoU 1/3 below 0.5: keep both
    ([[0, 0, 10, 10], [2, 0, 12, 10], [4, 0, 14, 10]], [.9, .8, .7], [0, 0, 0], 0.5, [0, 2]),
    # ^ chain: 1 is suppressed by 0 (IoU 8/12); 2 overlaps only 1 enough (IoU 8/12) and 0 by 6/14: kept
]


@pytest.mark.parametrize("boxes, scores, classes, thr, kept", NMS_CASES)
def test_nms_per_class(boxes, scores, classes, thr, kept):
    keep = _picodet.nms_per_class(np.array(boxes, dtype=float).reshape(-1, 4), np.array(scores, dtype=float),
                                  np.array(classes, dtype=int), thr)
    assert keep.tolist() == kept


def _random_candidates(rng, n: int, n_classes: int = 3):
    xy = rng.uniform(0, 600, (n, 2))
    wh = rng.uniform(0, 150, (n, 2))
    if rng.random() < 0.3:  # a coarse grid: equal coordinates and zero-width boxes
        xy, wh = np.round(xy / 20) * 20, np.round(wh / 20) * 20
    return np.hstack([xy, xy + wh]), np.round(rng.random(n), int(rng.integers(1, 4))), rng.integers(0, n_classes, n)


def test_nms_per_class_equals_the_dense_nms():
    from reference.dense_nms import nms_per_class_dense

    rng = np.random.default_rng(11)
    for _ in range(300):
        boxes, scores, classes = _random_candidates(rng, int(rng.integers(0, 200)))
        thr = float(rng.choice([-0.1, 0.0, 0.3, 0.5, 0.7, 1.0]))
        np.testing.assert_array_equal(_picodet.nms_per_class(boxes, scores, classes, thr),
                                      nms_per_class_dense(boxes, scores, classes, thr))


def test_nms_per_class_memory_is_not_quadratic():
    # 20,000 candidates (a lowered score threshold): dense IoU alone would be 3.2 GB.
    import tracemalloc

    rng = np.random.default_rng(5)
    objects = rng.uniform(0, 560, (1000, 2))
    base = np.repeat(np.hstack([objects, objects + rng.uniform(5, 200, (1000, 2)) * [1, 0.3]]), 20, axis=0)
    boxes = base + rng.normal(0, 3, base.shape)
    tracemalloc.start()
    try:
        keep = _picodet.nms_per_class(boxes, rng.random(len(boxes)), np.repeat(rng.integers(0, 10, 1000), 20), 0.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 1000 <= keep.size < 20000 and peak < 1e9


# --- the real CDLA model on a clean synthetic page ---

TITLE_BOX = (200, 60, 800, 120)
COLUMNS = [(80, 200, 560, 1040), (620, 200, 1140, 1040)]
GRID = (100, 1150, 1100, 1450)


def _synthetic_page(path):
    im = Image.new("RGB", (1200, 1600), "white")
    draw = ImageDraw.Draw(im)
    draw.text(TITLE_BOX[:2], "A Clean Synthetic Title Here", fill="black", font=ImageFont.load_default(size=48))
    small = ImageFont.load_default(size=16)
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit"]
    for c, (x0, y0, _, _) in enumerate(COLUMNS):
        for para in range(4):
            for line in range(8):
                text = " ".join(words[(c + para + line + k) % 8] for k in range(8))
                draw.text((x0, y0 + para * 220 + line * 22), text, fill="black", font=small)
    for r in range(6):
        draw.line((GRID[0], GRID[1] + r * 60, GRID[2], GRID[1] + r * 60), fill="black", width=2)
    for c in range(5):
        draw.line((GRID[0] + c * 250, GRID[1], GRID[0] + c * 250, GRID[3] - 0), fill="black", width=2)
    for r in range(5):
        for c in range(4):
            draw.text((GRID[0] + 20 + c * 250, GRID[1] + 15 + r * 60), f"cell {r}{c} 12.5", fill="black", font=small)
    im.save(path)


def _inside(box, area, slack=30):
    return (box[0] >= area[0] - slack and box[1] >= area[1] - slack
            and box[2] <= area[2] + slack and box[3] <= area[3] + slack)


def test_cdla_finds_title_text_and_table_where_drawn(harness, tmp_path):
    image = tmp_path / "synthetic.png"
    _synthetic_page(image)
    page = harness.page_entry(image, "synthetic")
    rc, out = harness.run("paddle_layout", [page])
    assert rc == 0
    report = json.loads((out / "run_report.json").read_text())
    assert report["providers_used"] == ["CPUExecutionProvider"] and report["labels"][:2] == ["text", "title"]
    regions = harness.read_page(out, "synthetic")["regions"]
    by_label = {}
    for r in regions:
        by_label.setdefault(r["label"], []).append(r["bbox_xyxy"])
    assert any(_inside(b, TITLE_BOX) for b in by_label.get("title", []))
    text_like = by_label.get("text", []) + by_label.get("reference", [])
    assert len(text_like) >= 6
    assert all(any(_inside(b, col) for col in COLUMNS) for b in text_like)
    # Every drawn column holds at least one text paragraph.
    assert all(any(_inside(b, col) for b in by_label.get("text", [])) for col in COLUMNS)
    assert any(_inside(b, GRID) and (b[2] - b[0]) > 0.8 * (GRID[2] - GRID[0]) for b in by_label.get("table", []))


def test_gpu_without_fallback_exits_5(harness):
    page = harness.page_entry(harness.sample_page, "sample")
    rc, out = harness.run("paddle_layout", [page], device="gpu", allow_cpu_fallback=False)
    assert rc == 5
    assert not (out / "sample.json").exists()


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown paddle_layout backend 'nope'; choose one of"):
        paddle_layout.PaddleLayoutDetector({"backend": "nope"}, "auto", True)


# --- a PaddleDetection-style export: inputs image, im_shape, scale_factor; rows [cls, score, box] ---

# Rows the tiny model returns, boxes in network-input pixels (800x800); the graph divides them
# by scale_factor as real exports do, so they come out in page pixels.
EXPORT_ROWS = [
    [0, 0.95, 80, 40, 400, 200],    # kept: text
    [1, 0.60, 400, 400, 760, 480],  # kept: title
    [2, 0.30, 0, 0, 100, 100],      # below threshold 0.5
    [-1, 0.99, 0, 0, 10, 10],       # padding row (class -1)
]


def _export_model(path, half_image: bool = False):
    """``half_image``: the image input is float16, im_shape and scale_factor stay float32 (the
    inputs of an fp16 export need not share one type)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rows = np.array(EXPORT_ROWS, dtype=np.float32)
    nodes = [
        helper.make_node("Constant", [], ["cls_score"], value=numpy_helper.from_array(rows[:, :2], "cs")),
        helper.make_node("Constant", [], ["boxes_in"], value=numpy_helper.from_array(rows[:, 2:], "bx")),
        helper.make_node("Constant", [], ["order"], value=numpy_helper.from_array(np.array([1, 0, 1, 0], np.int64), "o")),
        # scale_factor is [[h_scale, w_scale]]; boxes are x, y, x, y.
        helper.make_node("Gather", ["scale_factor", "order"], ["sf_xyxy"], axis=1),
        helper.make_node("Div", ["boxes_in", "sf_xyxy"], ["boxes"]),
        helper.make_node("Concat", ["cls_score", "boxes"], ["rows"], axis=1),
        # touch the image so the input is really consumed: rows + 0 * mean(image)
        helper.make_node("ReduceMean", ["image"], ["image_mean_in"], keepdims=0),
        helper.make_node("Cast", ["image_mean_in"], ["image_mean"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["image_mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["rows", "nothing"], ["multiclass_nms3_0.tmp_0"]),
    ]
    graph = helper.make_graph(
        nodes, "paddledet_export",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT16 if half_image else TensorProto.FLOAT,
                                       [1, 3, None, None]),
         helper.make_tensor_value_info("im_shape", TensorProto.FLOAT, [1, 2]),
         helper.make_tensor_value_info("scale_factor", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("multiclass_nms3_0.tmp_0", TensorProto.FLOAT, [None, 6])],
        initializer=[numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.mark.parametrize("half_image", [False, True])
def test_paddledet_export_rows_come_back_in_page_pixels(harness, tmp_path, half_image):
    model = tmp_path / "export.onnx"
    _export_model(model, half_image)
    image = tmp_path / "page.png"
    Image.new("L", (1600, 400), 255).save(image)  # scale_factor = [800/400, 800/1600] = [2, 0.5]
    page = harness.page_entry(image, "page")
    params = {"model_path": str(model), "input_size": [800, 800], "labels": ["text", "title", "figure"],
              "mean": [0, 0, 0], "std": [1, 1, 1]}
    rc, out = harness.run("paddle_layout", [page], params)
    assert rc == 0
    regions = harness.read_page(out, "page")["regions"]
    assert [r["label"] for r in regions] == ["text", "title"]
    assert regions[0]["bbox_xyxy"] == [80 / 0.5, 40 / 2, 400 / 0.5, 200 / 2]
    assert regions[1]["bbox_xyxy"] == [400 / 0.5, 400 / 2, 760 / 0.5, 480 / 2]
    assert regions[0]["score"] == pytest.approx(0.95) and regions[1]["class"] == "title"
    assert json.loads((out / "run_report.json").read_text())["model"] == "export.onnx (paddledet_export, onnxruntime)"
