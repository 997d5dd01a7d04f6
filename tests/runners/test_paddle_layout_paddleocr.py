"""paddle_layout backend "paddleocr": fake paddleocr.LayoutDetection replaying real LayoutAnalysisResult / DetResult JSON."""

from __future__ import annotations

import json

import pytest

from prod_helpers import make_page, replayed, read_json, run_on_a_card_without_kernels, run_runner, write_paddle_model

V3 = replayed("paddleocr_layout_detection.res.json")
PLUS_L = replayed("paddleocr_layout_detection.plus_l.res.json")


@pytest.fixture
def pdx_cache(tmp_path):
    home = tmp_path / "pdx"
    for name in ("PP-DocLayoutV2", "PP-DocLayoutV3", "PP-DocLayout_plus-L"):
        write_paddle_model(home / "official_models" / name)
    return home


def _env(tmp_path, pdx, **extra):
    return {"PADDLE_PDX_CACHE_HOME": str(pdx), "FAKE_CALL_LOG": str(tmp_path / "calls.jsonl"), **extra}


def _calls(tmp_path):
    return [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("model_name, sample, has_order", [
    ("PP-DocLayoutV3", V3, True),        # LayoutAnalysisResult: int coordinates, order (null for skipped labels)
    ("PP-DocLayout_plus-L", PLUS_L, False),  # DetResult: float coordinates, no order
])
def test_boxes_from_result_json(tmp_path, pdx_cache, model_name, sample, has_order):
    pages = [make_page(tmp_path, "p0"), make_page(tmp_path, "p1")]
    params = {"backend": "paddleocr", "model_name": model_name, "batch_size": 2, "threshold": 0.3}
    code, out_dir, _, err = run_runner(tmp_path, "paddle_layout", pages, params, device="gpu",
                                       allow_cpu_fallback=False, env=_env(tmp_path, pdx_cache, FAKE_CUDA="1"))
    assert code == 0, err
    regions = read_json(out_dir / "p1.json")["regions"]
    boxes = sample["boxes"]
    assert [r["label"] for r in regions] == [b["label"] for b in boxes]
    assert [r["bbox_xyxy"] for r in regions] == [pytest.approx(b["coordinate"], abs=0.01) for b in boxes]
    assert [r["score"] for r in regions] == [round(b["score"], 5) for b in boxes]
    assert [r["order"] for r in regions] == [b.get("order") for b in boxes]
    assert any(r["order"] is not None for r in regions) == has_order
    calls = _calls(tmp_path)
    ctor = next(c for c in calls if c["call"] == "LayoutDetection")
    assert ctor["model_name"] == model_name and ctor["device"] == "gpu:0"
    assert ctor["model_dir"] == str(pdx_cache / "official_models" / model_name)
    assert [(c["n"], c["batch_size"], c["threshold"]) for c in calls if c["call"] == "LayoutDetection.predict"] == [(2, 2, 0.3)]


def test_threshold_passed_to_predict_filters(tmp_path, pdx_cache):
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3", "threshold": 0.95}
    code, out_dir, _, err = run_runner(tmp_path, "paddle_layout", [make_page(tmp_path, "p0")], params,
                                       env=_env(tmp_path, pdx_cache))
    assert code == 0, err
    assert {r["label"] for r in read_json(out_dir / "p0.json")["regions"]} == {
        b["label"] for b in V3["boxes"] if b["score"] >= 0.95}


def test_gpu_missing_fallback_refused_exits_5(tmp_path, pdx_cache):
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV2"}
    code, _, events, _ = run_runner(tmp_path, "paddle_layout", [make_page(tmp_path, "p0")], params, device="gpu",
                                    allow_cpu_fallback=False, env=_env(tmp_path, pdx_cache))
    assert code == 5 and "paddle sees no GPU" in events[-1]["error"]


@pytest.mark.parametrize("fallback", [True, False])
def test_gpu_without_kernels_for_the_card_is_found_before_any_page(tmp_path, pdx_cache, fallback):
    """paddle sees the card but has no kernels for it (Paddle wheels on H200 sm_90): the first real op fails."""
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3"}
    pages = [make_page(tmp_path, "p0"), make_page(tmp_path, "p1")]
    run_on_a_card_without_kernels(tmp_path, "paddle_layout", pages, params, _env(tmp_path, pdx_cache), fallback)
    if fallback:
        assert next(c for c in _calls(tmp_path) if c["call"] == "LayoutDetection")["device"] == "cpu"


def test_offline_without_weights_exits_3_with_the_prestage_command(tmp_path):
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3"}
    code, out_dir, events, _ = run_runner(tmp_path, "paddle_layout", [make_page(tmp_path, "p0")], params,
                                          env={"PADDLE_PDX_CACHE_HOME": str(tmp_path / "none"),
                                               "FAKE_CALL_LOG": str(tmp_path / "calls.jsonl")})
    error = events[-1]["error"]
    assert code == 3 and "PP-DocLayoutV3 is not in the PaddleX cache" in error and not out_dir.exists()
    assert "from paddleocr import LayoutDetection; LayoutDetection(model_name='PP-DocLayoutV3')" in error
    assert not (tmp_path / "calls.jsonl").exists()  # never constructed: nothing tried to download


@pytest.mark.parametrize("make, cause", [
    (lambda d: d.mkdir(parents=True), "is empty"),
    (lambda d: (write_paddle_model(d), (d / "inference.pdiparams").unlink()), "holds no weights"),
    (lambda d: (write_paddle_model(d), (d / "inference.pdiparams").write_text("")), "is empty: the copy is incomplete"),
])
def test_empty_or_half_copied_model_dir_says_why(tmp_path, make, cause):
    folder = tmp_path / "PP-DocLayoutV3"
    make(folder)
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3", "model_dir": str(folder)}
    code, _, events, err = run_runner(tmp_path, "paddle_layout", [make_page(tmp_path, "p0")], params)
    assert code == 3 and cause in events[-1]["error"] and cause in err


@pytest.mark.parametrize("error", [
    "(External) CUDA error(209), no kernel image is available for execution on the device.",  # H200 + old wheel
    "(PreconditionNotMet) The third-party dynamic library (libcudnn.so) that Paddle depends on is not configured correctly.",
    "(InvalidArgument) Deserialize to tensor failed, maybe the loaded file is not a paddle model",  # corrupt weights
])
def test_constructor_failures_keep_their_own_message(tmp_path, pdx_cache, error):
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3"}
    code, _, events, _ = run_runner(tmp_path, "paddle_layout", [make_page(tmp_path, "p0")], params,
                                    env=_env(tmp_path, pdx_cache, FAKE_PADDLE_INIT_ERROR=error))
    assert code == 1 and events[-1]["error"] == f"model setup failed: RuntimeError: {error}"
    assert "weights" not in events[-1]["error"]


def test_paddlex_no_model_source_error_still_means_missing_weights(tmp_path, pdx_cache):
    # e.g. a sub-model paddlex resolves on its own: its own "no model source" exception -> exit 3
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3"}
    msg = "Encounter exception when download model from bos. No model source is available! Please check network"
    code, _, events, _ = run_runner(tmp_path, "paddle_layout", [make_page(tmp_path, "p0")], params,
                                    env=_env(tmp_path, pdx_cache, FAKE_PADDLE_INIT_ERROR=msg))
    assert code == 3 and "weights not found and no download on a compute node" in events[-1]["error"]
    assert "LayoutDetection(model_name='PP-DocLayoutV3')" in events[-1]["error"]


def test_batch_with_bad_page_then_resume(tmp_path, pdx_cache):
    pages = [make_page(tmp_path, "a"), make_page(tmp_path, "bad"), make_page(tmp_path, "c")]
    params = {"backend": "paddleocr", "model_name": "PP-DocLayoutV3", "batch_size": 3}
    env = _env(tmp_path, pdx_cache)
    code, out_dir, _, _ = run_runner(tmp_path, "paddle_layout", pages, params, env=env)
    assert code == 4 and (out_dir / "a.json").exists() and (out_dir / "c.json").exists()
    assert read_json(out_dir / "_failed" / "bad.json")["error_class"] == "RuntimeError"
    assert [c["n"] for c in _calls(tmp_path) if c["call"] == "LayoutDetection.predict"] == [3, 1, 1, 1]
    code, _, events, _ = run_runner(tmp_path, "paddle_layout", [pages[0], pages[2]], params, env=env)
    assert code == 0 and {e["status"] for e in events if e["event"] == "done"} == {"skipped"}
