"""Dell (American Stories YOLOv8 ONNX) runner: a real tiny ONNX model with the [1, 14, N] output, run by onnxruntime."""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from prod_helpers import FAKES, RUNNERS, make_page, read_json, run_runner

sys.path.insert(0, str(RUNNERS))
import _yolo  # noqa: E402

LABELS = ["article", "author", "cartoon_or_advertisement", "headline", "image_caption",
          "masthead", "newspaper_header", "page_number", "photograph", "table"]
W, H = 2000, 1000  # letterbox to 1280: gain 0.64, new 1280x640, pad top 320, left 0
GAIN, PAD_X, PAD_Y = 0.64, 0, 320

# (original-pixel box, class, score, kept?) — kept after conf 0.005 and agnostic NMS IoU 0.10.
TRUTH = [
    ((100, 100, 500, 300), "article", 0.90, True),
    ((110, 105, 505, 310), "headline", 0.50, False),   # IoU ~0.93 with the article: suppressed across classes
    ((1000, 500, 1800, 900), "photograph", 0.80, True),
    ((1750, 850, 1950, 990), "image_caption", 0.30, True),  # IoU 2500/345500 < 0.10 with the photograph
    ((300, 600, 700, 800), "table", 0.004, False),      # below conf 0.005
]


def _head_output() -> np.ndarray:
    """[1, 14, N] rows cx, cy, w, h (input pixels) then 10 class scores, N = boxes + 3 empty anchors."""
    n = len(TRUTH) + 3
    out = np.zeros((1, 4 + len(LABELS), n), dtype=np.float32)
    for i, (box, label, score, _) in enumerate(TRUTH):
        x0, y0, x1, y1 = box
        cx0, cy0, cx1, cy1 = x0 * GAIN + PAD_X, y0 * GAIN + PAD_Y, x1 * GAIN + PAD_X, y1 * GAIN + PAD_Y
        out[0, :4, i] = [(cx0 + cx1) / 2, (cy0 + cy1) / 2, cx1 - cx0, cy1 - cy0]
        out[0, 4 + LABELS.index(label), i] = score
        out[0, 4 + (LABELS.index(label) + 1) % len(LABELS), i] = score / 3  # a runner-up class
    return out


def _write_model(path, names_meta: bool = True, half: bool = False) -> None:
    """images [1,3,1280,1280] -> output0 = head + 0 * mean(images): the graph really consumes the input.

    ``half``: input and output are float16, as in an Ultralytics ``export(half=True)``.
    """
    dtype = np.float16 if half else np.float32
    head = numpy_helper.from_array(_head_output().astype(dtype), "head")
    zero = numpy_helper.from_array(np.zeros((), dtype), "zero")
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["head", "z"], ["output0"]),
    ]
    elem = TensorProto.FLOAT16 if half else TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "tiny_yolov8_head",
        [helper.make_tensor_value_info("images", elem, [1, 3, 1280, 1280])],
        [helper.make_tensor_value_info("output0", elem, [1, 14, len(TRUTH) + 3])],
        initializer=[head, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if names_meta:
        entry = model.metadata_props.add()
        entry.key, entry.value = "names", repr(dict(enumerate(LABELS)))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "layout_model_new.onnx"
    _write_model(path)
    return path


def test_letterbox_geometry():
    canvas, gain, pad = _yolo.letterbox(np.zeros((H, W, 3), np.uint8), 1280, 114)
    assert canvas.shape == (1280, 1280, 3) and gain == pytest.approx(GAIN) and pad == (PAD_X, PAD_Y)
    assert (canvas[:PAD_Y] == 114).all() and (canvas[PAD_Y + 640:] == 114).all()
    assert (canvas[PAD_Y:PAD_Y + 640] == 0).all()


@pytest.mark.parametrize("xyxy, score, iou, expected", [
    (np.zeros((0, 4)), np.zeros(0), 0.1, []),                                   # empty (0,4)
    ([[0, 0, 10, 10]], [0.3], 0.1, [0]),                                        # single box
    ([[0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30]], [0.5, 0.9, 0.1], 0.1, [1, 2]),  # best wins, far box kept
    ([[0, 0, 10, 10], [9, 0, 19, 10]], [0.9, 0.8], 0.1, [0, 1]),               # IoU 10/190 ~0.05 <= 0.1 kept
])
def test_nms_table(xyxy, score, iou, expected):
    assert _yolo.nms_xyxy(np.asarray(xyxy, float), np.asarray(score, float), iou).tolist() == expected


def test_resize_bilinear_matches_half_pixel_formula():
    img = np.arange(16, dtype=np.uint8).reshape(4, 4, 1) * 10
    out = _yolo.resize_bilinear(img, (2, 2))
    # dst 0 -> src 0.5: mean of rows/cols 0 and 1 (values 0,10,40,50 -> 25); dst 1 -> src 2.5
    assert out[:, :, 0].tolist() == [[25, 45], [105, 125]]


def test_dell_end_to_end_through_onnxruntime(tmp_path, model_path):
    pages = [make_page(tmp_path, "p1", (W, H))]
    code, out_dir, events, err = run_runner(tmp_path, "dell", pages, {"model_path": str(model_path)}, fakes=False)
    assert code == 0, err
    page = read_json(out_dir / "p1.json")
    kept = [t for t in TRUTH if t[3]]
    got = sorted(page["regions"], key=lambda r: -r["score"])
    assert [r["label"] for r in got] == [t[1] for t in kept]
    np.testing.assert_allclose([r["bbox_xyxy"] for r in got], [t[0] for t in kept], atol=0.02)
    np.testing.assert_allclose([r["score"] for r in got], [t[2] for t in kept], atol=1e-5)
    assert [r["class"] for r in got] == ["text", "image", "caption"]
    report = read_json(out_dir / "run_report.json")
    assert report["providers_used"] == ["CPUExecutionProvider"] and report["device_used"] == "cpu"
    assert report["labels"] == LABELS


def test_a_half_precision_export_gives_the_boxes_of_the_float32_one(tmp_path):
    """An fp16 export (input and output float16) is fed float16 and read back as float32: the
    same regions as the float32 model, up to float16's rounding of the head's numbers."""
    path = tmp_path / "half.onnx"
    _write_model(path, half=True)
    pages = [make_page(tmp_path, "p1", (W, H))]
    code, out_dir, events, err = run_runner(tmp_path, "dell", pages, {"model_path": str(path)}, fakes=False)
    assert code == 0 and "Unexpected input data type" not in err, err
    kept = [t for t in TRUTH if t[3]]
    got = sorted(read_json(out_dir / "p1.json")["regions"], key=lambda r: -r["score"])
    assert [r["label"] for r in got] == [t[1] for t in kept]
    np.testing.assert_allclose([r["bbox_xyxy"] for r in got], [t[0] for t in kept], atol=1.0)
    np.testing.assert_allclose([r["score"] for r in got], [t[2] for t in kept], atol=1e-3)


def test_labels_from_params_without_metadata(tmp_path):
    path = tmp_path / "m.onnx"
    _write_model(path, names_meta=False)
    pages = [make_page(tmp_path, "p1", (W, H))]
    code, out_dir, _, err = run_runner(tmp_path, "dell", pages, {"model_path": str(path)}, fakes=False)
    assert code == 0, err
    assert {r["label"] for r in read_json(out_dir / "p1.json")["regions"]} == {"article", "photograph", "image_caption"}


@pytest.mark.parametrize("params, device, fallback", [
    ({}, "gpu", False),                              # GPU asked, CPU-only session, fallback refused
    ({"require_cuda_provider": True}, "auto", True),  # hard requirement whatever the fallback says
])
def test_cpu_only_session_refused_exits_5(tmp_path, model_path, params, device, fallback):
    pages = [make_page(tmp_path, "p1", (W, H))]
    code, out_dir, events, err = run_runner(tmp_path, "dell", pages, {"model_path": str(model_path), **params},
                                            device=device, allow_cpu_fallback=fallback, fakes=False)
    assert code == 5, err
    assert events[-1]["event"] == "fatal" and events[-1]["error_class"] == "DeviceUnavailable"
    assert not (out_dir / "p1.json").exists()


ORT_GPU = FAKES.parent / "fakes_ort_gpu"  # onnxruntime-gpu's provider behaviour over the real onnxruntime


def test_cuda_that_fails_at_first_inference_falls_back_to_cpu_before_any_page(tmp_path, model_path):
    """CUDA loads but its first run fails (no kernels for the card): found at set-up, not on every page."""
    pages = [make_page(tmp_path, "p1", (W, H)), make_page(tmp_path, "p2", (W, H))]
    code, out_dir, events, err = run_runner(tmp_path, "dell", pages, {"model_path": str(model_path)},
                                            device="gpu", allow_cpu_fallback=True, fakes=False,
                                            env={"PYTHONPATH": str(ORT_GPU), "FAKE_ORT_GPU": "run_fails"})
    assert code == 0, err
    assert [e["status"] for e in events if e["event"] == "done"] == ["ok", "ok"]
    report = read_json(out_dir / "run_report.json")
    assert report["device_used"] == "cpu" and report["providers_used"] == ["CPUExecutionProvider"]
    assert "no kernel image is available" in report["cuda_error"]
    assert read_json(out_dir / "p1.json")["source"]["device"] == "cpu"
    assert "falling back to CPU" in err


def test_cuda_that_fails_at_first_inference_without_fallback_exits_5(tmp_path, model_path):
    pages = [make_page(tmp_path, "p1", (W, H))]
    code, out_dir, events, err = run_runner(tmp_path, "dell", pages, {"model_path": str(model_path)},
                                            device="gpu", allow_cpu_fallback=False, fakes=False,
                                            env={"PYTHONPATH": str(ORT_GPU), "FAKE_ORT_GPU": "run_fails"})
    assert code == 5, err
    assert events[-1]["event"] == "fatal" and events[-1]["error_class"] == "DeviceUnavailable"
    assert "no kernel image is available" in events[-1]["error"]
    assert not (out_dir / "p1.json").exists()


def test_a_source_run_on_two_devices_says_so_in_its_report_and_status(tmp_path, model_path, capsys):
    """One page on the GPU, the next (a later call with --device cpu) on the CPU: the report's
    device_used is only the last runner's, so the pages are counted by the device they ran on."""
    from nbtest import run_cli

    pages_dir = tmp_path / "scans"
    for name in ("a", "b"):
        make_page(tmp_path, name, (W, H))
        pages_dir.mkdir(exist_ok=True)
        (tmp_path / "pages" / f"{name}.png").rename(pages_dir / f"{name}.png")
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"version": 1, "envs": {"dell": {"python": sys.executable, "env": {
        "PYTHONPATH": str(ORT_GPU), "FAKE_ORT_GPU": "ok"}}}, "stages": [
        {"name": "dell", "family": "dell", "env": "dell", "device": "auto",
         "variants": {"as": {"model_path": str(model_path)}}}]}))
    run = tmp_path / "run"
    assert run_cli(capsys, "run", "--input-dir", pages_dir, "--run-dir", run, "--config", cfg, "--max-pages", "1")[0] == 0
    assert run_cli(capsys, "run", "--input-dir", pages_dir, "--run-dir", run, "--config", cfg, "--device", "cpu")[0] == 0
    report = read_json(run / "outputs" / "sources" / "dell" / "as" / "run_report.json")
    assert report["device_used"] == "cpu" and report["devices"] == {"cuda": 1, "cpu": 1}
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert code == 0 and json.loads(out)["sources"][0]["devices"] == {"cpu": 1, "cuda": 1}
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "on cpu 1, cuda 1" in next(line for line in out.splitlines() if "dell/as" in line)


def test_missing_model_exits_3(tmp_path):
    code, _, events, _ = run_runner(tmp_path, "dell", [make_page(tmp_path, "p1", (W, H))],
                                    {"model_path": str(tmp_path / "nope.onnx")}, fakes=False)
    assert code == 3 and "nope.onnx" in events[-1]["error"]


def test_bad_page_recorded_job_continues_then_resume_skips(tmp_path, model_path):
    good = make_page(tmp_path, "good", (W, H))
    bad = make_page(tmp_path, "bad", (W, H))
    open(bad["image_path"], "wb").write(b"not an image")
    params = {"model_path": str(model_path)}
    code, out_dir, events, _ = run_runner(tmp_path, "dell", [bad, good], params, fakes=False)
    assert code == 4
    assert (out_dir / "good.json").exists() and not (out_dir / "bad.json").exists()
    assert "UnidentifiedImageError" in read_json(out_dir / "_failed" / "bad.json")["error"]
    first = (out_dir / "good.json").read_bytes()
    code, _, events, _ = run_runner(tmp_path, "dell", [good], params, fakes=False)
    assert code == 0 and [e["status"] for e in events if e["event"] == "done"] == ["skipped"]
    assert (out_dir / "good.json").read_bytes() == first


def test_stage_weights_copies_once(tmp_path, model_path):
    stage_root = tmp_path / "node_local"
    pages = [make_page(tmp_path, "p1", (W, H))]
    code, out_dir, _, err = run_runner(tmp_path, "dell", pages, {"model_path": str(model_path), "stage_weights": True},
                                       env={"SLURM_TMPDIR": str(stage_root)}, fakes=False)
    assert code == 0, err
    staged = read_json(out_dir / "run_report.json")["model_path"]
    assert staged.startswith(str(stage_root)) and open(staged, "rb").read() == model_path.read_bytes()
