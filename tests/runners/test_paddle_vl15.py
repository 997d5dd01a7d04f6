"""PaddleOCR-VL 1.5 runner end to end in a subprocess, with fake paddle/paddleocr replaying the real result JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from prod_helpers import FAKES, replayed, write_paddle_model, RUNNERS, make_page, read_json, run_runner

sys.path.insert(0, str(RUNNERS))
from paddle_vl15 import regions_from_vl  # noqa: E402  (pure function; no paddle import at module level)

SAMPLE = replayed("paddleocr_vl.res.json")


@pytest.fixture
def pdx_cache(tmp_path):
    """A PaddleX cache with the two models the v1.5 pipeline loads."""
    home = tmp_path / "pdx"
    for name in ("PP-DocLayoutV3", "PaddleOCR-VL-1.5"):  # paddlex drops "-0.9B" from VL folder names
        write_paddle_model(home / "official_models" / name)
    return home


def _env(tmp_path, pdx_cache, **extra):
    return {"PADDLE_PDX_CACHE_HOME": str(pdx_cache), "FAKE_CALL_LOG": str(tmp_path / "calls.jsonl"), **extra}


def test_regions_keep_layout_scores_and_block_text():
    regions = regions_from_vl(SAMPLE, 2000, 3000)
    boxes = SAMPLE["layout_det_res"]["boxes"]
    assert len(regions) == len(boxes)  # every block matches its layout box in the sample
    assert [r["label"] for r in regions] == [b["label"] for b in boxes]
    assert [r["score"] for r in regions] == [b["score"] for b in boxes]
    table = next(r for r in regions if r["label"] == "table")
    assert table["text"].startswith("<table><tr><td>Year</td>") and table["order"] is None
    title = next(r for r in regions if r["label"] == "doc_title")
    assert title["text"] == "Annual Report 2024" and title["order"] == 1 and title["bbox_xyxy"] == [180, 150, 1821, 261]
    # the image block was never read (its block_content is ""): no text, not an empty string that
    # PAGE-XML would write as an empty TextEquiv
    image = next(r for r in regions if r["label"] == "image")
    assert image["text"] is None


@pytest.mark.parametrize("case, mutate, expected", [
    # reference boxes are filtered out of parsing_res_list by the pipeline: layout region, no text
    ("layout box without block", lambda r: r["parsing_res_list"].pop(3), ("text", None, 0.9599999785423279)),
    # a block with no layout box (pipeline-built) is kept, unscored
    ("block without layout box", lambda r: r["layout_det_res"]["boxes"].pop(3),
     ("text", "This report summarises the financial results of the\nyear. Revenue grew by 12.5% compared to 2023.", None)),
])
def test_unmatched_boxes_and_blocks(case, mutate, expected):
    res = json.loads(json.dumps(SAMPLE))
    mutate(res)
    regions = regions_from_vl(res, 2000, 3000)
    hit = [r for r in regions if r["bbox_xyxy"] == [179, 420, 1822, 800]]
    assert len(hit) == 1 and (hit[0]["label"], hit[0]["text"], hit[0]["score"]) == expected


def test_layout_box_left_out_of_parsing_has_no_order():
    # The pipeline runs the layout model with filter_overlap_boxes=False, so layout_det_res keeps
    # a reference box (not in SKIP_ORDER_LABELS: it is numbered) that the pipeline's filter drops
    # from parsing_res_list, whose block_order is numbered without it (paddleocr_vl.res.json,
    # shared/formats README "block_order"). Its layout order counts in another sequence.
    res = json.loads(json.dumps(SAMPLE))
    boxes = res["layout_det_res"]["boxes"]
    reference = {"cls_id": 18, "label": "reference", "score": 0.8, "coordinate": [180, 2610, 1821, 2630], "order": 4}
    for box in boxes[7:]:  # the layout model numbers the boxes after it one further
        box["order"] += 1
    boxes.insert(7, reference)
    regions = regions_from_vl(res, 2000, 3000)
    ref = next(r for r in regions if r["label"] == "reference")
    assert (ref["text"], ref["order"]) == (None, None)
    orders = [r["order"] for r in regions if r["order"] is not None]
    assert orders == [b["block_order"] for b in res["parsing_res_list"] if b["block_order"] is not None]


def test_result_size_differs_from_page_scales_back():
    regions = regions_from_vl(SAMPLE, 1000, 1500)  # pipeline worked on a 2x image
    assert regions[1]["bbox_xyxy"] == [90, 75, 910.5, 130.5]


def test_end_to_end_gpu_batched(tmp_path, pdx_cache):
    pages = [make_page(tmp_path, f"p{i}") for i in range(3)]
    code, out_dir, _, err = run_runner(tmp_path, "paddle_vl15", pages, {"batch_size": 2}, device="gpu",
                                       allow_cpu_fallback=False, env=_env(tmp_path, pdx_cache, FAKE_CUDA="1"))
    assert code == 0, err
    page = read_json(out_dir / "p2.json")
    assert [r["label"] for r in page["regions"]] == [b["label"] for b in SAMPLE["layout_det_res"]["boxes"]]
    assert page["regions"][6]["class"] == "table" and page["regions"][6]["text"].startswith("<table>")
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    ctor = next(c for c in calls if c["call"] == "PaddleOCRVL")
    assert ctor["pipeline_version"] == "v1.5" and ctor["device"] == "gpu:0" and ctor["use_doc_unwarping"] is False
    assert [c["n"] for c in calls if c["call"] == "PaddleOCRVL.predict_iter"] == [2, 1]
    report = read_json(out_dir / "run_report.json")
    assert report["device_used"] == "cuda" and report["gpu_name"] == "NVIDIA H200" and report["batch_size"] == 2


def test_cpu_only_paddle_fallback_refused_exits_5(tmp_path, pdx_cache):
    code, out_dir, events, _ = run_runner(tmp_path, "paddle_vl15", [make_page(tmp_path, "p0")], device="gpu",
                                          allow_cpu_fallback=False, env=_env(tmp_path, pdx_cache, FAKE_PADDLE_CUDA_BUILD="0"))
    assert code == 5 and "not compiled with CUDA" in events[-1]["error"]


def test_cpu_fallback_allowed(tmp_path, pdx_cache):
    code, out_dir, _, err = run_runner(tmp_path, "paddle_vl15", [make_page(tmp_path, "p0")], device="gpu",
                                       allow_cpu_fallback=True, env=_env(tmp_path, pdx_cache))
    assert code == 0, err
    assert read_json(out_dir / "run_report.json")["pipeline_kwargs"]["device"] == "cpu"


@pytest.mark.parametrize("have, missing", [
    ((), "the layout model PP-DocLayoutV3 is not in the PaddleX cache"),
    (("PP-DocLayoutV3",), "the VL recognition model PaddleOCR-VL-1.5-0.9B is not in the PaddleX cache"),
])
def test_no_weights_exits_3_naming_the_missing_model_and_the_prestage_command(tmp_path, have, missing):
    for name in have:
        write_paddle_model(tmp_path / "pdx" / "official_models" / name)
    code, out_dir, events, err = run_runner(tmp_path, "paddle_vl15", [make_page(tmp_path, "p0")],
                                            env={"PADDLE_PDX_CACHE_HOME": str(tmp_path / "pdx"),
                                                 "FAKE_CALL_LOG": str(tmp_path / "calls.jsonl")})
    assert code == 3 and missing in events[-1]["error"] and not out_dir.exists()
    assert "from paddleocr import PaddleOCRVL; PaddleOCRVL(pipeline_version='v1.5')" in events[-1]["error"]
    assert not (tmp_path / "calls.jsonl").exists()  # paddleocr never constructed: no download attempt


def test_constructor_failure_keeps_its_own_message(tmp_path, pdx_cache):
    kernel = "(External) CUDA error(209), no kernel image is available for execution on the device."
    code, out_dir, events, err = run_runner(tmp_path, "paddle_vl15", [make_page(tmp_path, "p0")],
                                            env=_env(tmp_path, pdx_cache, FAKE_PADDLE_INIT_ERROR=kernel))
    assert code == 1 and events[-1]["error"] == f"model setup failed: RuntimeError: {kernel}"
    assert "pre-stage" not in events[-1]["error"] and not out_dir.exists()


def test_offline_switches_and_model_names_in_report(tmp_path, pdx_cache):
    code, out_dir, _, err = run_runner(tmp_path, "paddle_vl15", [make_page(tmp_path, "p0")],
                                       env=_env(tmp_path, pdx_cache, HF_HUB_OFFLINE=""))
    assert code == 0, err
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    env = next(c for c in calls if c["call"] == "paddlex.env")
    assert env["model_source_check_disabled"] == "True" and env["hf_offline"] == "1"
    report = read_json(out_dir / "run_report.json")
    assert report["model"] == "PaddleOCR-VL-v1.5 (PP-DocLayoutV3, PaddleOCR-VL-1.5)"
    assert report["pipeline_kwargs"]["vl_rec_model_dir"] == str(pdx_cache / "official_models" / "PaddleOCR-VL-1.5")


def test_bad_page_recorded_others_done_then_resume(tmp_path, pdx_cache):
    pages = [make_page(tmp_path, "a"), make_page(tmp_path, "bad"), make_page(tmp_path, "c")]
    env = _env(tmp_path, pdx_cache)
    code, out_dir, _, _ = run_runner(tmp_path, "paddle_vl15", pages, {"batch_size": 4}, env=env)
    assert code == 4
    assert (out_dir / "a.json").exists() and (out_dir / "c.json").exists()
    assert "Cannot allocate" in read_json(out_dir / "_failed" / "bad.json")["error"]
    code, _, events, _ = run_runner(tmp_path, "paddle_vl15", [pages[0], pages[2]], env=env)
    assert code == 0 and [e["status"] for e in events if e["event"] == "done"] == ["skipped", "skipped"]


def test_model_dirs_passed_and_staged(tmp_path):
    dirs = {}
    for key in ("layout_detection_model_dir", "vl_rec_model_dir"):
        dirs[key] = write_paddle_model(tmp_path / "models" / key)
    params = {**{k: str(v) for k, v in dirs.items()}, "stage_weights": True}
    code, out_dir, _, err = run_runner(tmp_path, "paddle_vl15", [make_page(tmp_path, "p0")], params,
                                       env={"SLURM_TMPDIR": str(tmp_path / "node"),
                                            "PADDLE_PDX_CACHE_HOME": str(tmp_path / "empty")})
    assert code == 0, err
    kwargs = read_json(out_dir / "run_report.json")["pipeline_kwargs"]
    assert all(kwargs[k].startswith(str(tmp_path / "node" / "newsbag-weights")) for k in dirs)


def test_a_batch_reports_each_page_as_the_pipeline_finishes_it(tmp_path, pdx_cache, capsys):
    """Batch of 4, the third page hangs in the VLM: the two before it are written and reported
    during the batch (computed once), the hang is found after the no-progress limit of the two
    unfinished pages, and only the hanging page fails. Before, the batch came back as one list:
    nothing was reported, then all four pages were recomputed one at a time."""
    from nbtest import run_cli

    for name in ("a", "b", "c_hang", "d"):
        make_page(tmp_path, name)  # tmp/pages/<name>.png
    env = {"PYTHONPATH": str(FAKES), **_env(tmp_path, pdx_cache, FAKE_HANG_ON="hang")}
    config = tmp_path / "vl.json"
    config.write_text(json.dumps({
        "version": 1, "envs": {"paddle": {"python": sys.executable, "env": env}}, "device": "auto",
        "stages": [{"name": "paddle_vl15", "family": "paddle_vl15", "env": "paddle", "page_timeout_s": 3,
                    "max_restarts": 3, "variants": {"doc_parser": {"batch_size": 4}}}]}))
    code, _, err = run_cli(capsys, "run", "--input-dir", tmp_path / "pages", "--run-dir", tmp_path / "run",
                           "--config", config)
    assert code == 4, err
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c["path"] for c in calls if c["call"] == "PaddleOCRVL.page"] == ["a.png", "b.png", "d.png"]
    out = tmp_path / "run" / "outputs" / "sources" / "paddle_vl15" / "doc_parser"
    assert sorted(p.name.split("-")[0] for p in out.glob("*.json") if p.name != "run_report.json") == ["a", "b", "d"]
    failed = [json.loads(p.read_text()) for p in (out / "_failed").glob("*.json")]
    assert [(Path(f["path"]).name, f["error_class"]) for f in failed] == [("c_hang.png", "Timeout")]
