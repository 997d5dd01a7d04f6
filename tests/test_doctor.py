"""newsbag doctor: probes run in the stage env's interpreter (fakes on its PYTHONPATH), one real page per runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PIL import Image

from newsbag.doctor import format_doctor_table, run_doctor

from nbtest import EXAMPLE_PAGE, shared_path, write_hf_model

FAKES = Path(__file__).resolve().parent / "runners" / "fakes"
HUB = "opendatalab/MinerU2.5-2509-1.2B"
SAMPLE_PAGE = EXAMPLE_PAGE


@pytest.fixture
def page(tmp_path):
    path = tmp_path / "page.png"
    Image.new("RGB", (1000, 1500), "white").save(path)
    return str(path)


@pytest.fixture
def hf_home(tmp_path):
    repo = tmp_path / "hf" / "hub" / ("models--" + HUB.replace("/", "--"))
    write_hf_model(repo / "snapshots" / "c0ffee")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c0ffee")
    return tmp_path / "hf"


def _config(hf_home, gpu_env: dict, mineru_python: str = sys.executable, **stage_kw) -> dict:
    env = {"PYTHONPATH": str(FAKES), "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", **gpu_env}
    return {"version": 1, "envs": {"torch": {"python": mineru_python, "env": env}},
            "stages": [{"name": "mineru", "family": "mineru", "env": "torch", "device": "gpu",
                        "variants": {"layout": {}}, **stage_kw}]}


def test_ready_gpu_stage_runs_one_page(hf_home, page):
    shared_path("formats")  # the fake MinerU's page replays the library's own answers
    rows = run_doctor(_config(hf_home, {"FAKE_CUDA": "1", "FAKE_CAPABILITY": "9.0"}, allow_cpu_fallback=False),
                      run_page=page)
    (row,) = rows
    assert row["ready"] and row["problems"] == []
    assert (row["device"], row["gpu_name"], row["compute_capability"]) == ("cuda", "NVIDIA H200", "9.0")
    assert row["arch_supported"] is True and row["gpu_op_ok"] is True
    assert row["page_ok"] is True and row["page_regions"] == 10 and row["device_used"] == "cuda"
    assert "mineru/layout  yes" in format_doctor_table(rows)


@pytest.mark.parametrize("gpu_env, fallback, device, problem", [
    # GB10 sm_121 with a build that only has sm_80/sm_90 cubins and no PTX
    ({"FAKE_CUDA": "1", "FAKE_CAPABILITY": "12.1", "FAKE_ARCH_LIST": "sm_80,sm_90"}, True, "cuda",
     "compute capability 12.1 is not in the build's arch list"),
    # the card is listed but the first real op has no kernel (H200 with a bad wheel): the runner
    # finds it before loading the model and, fallback allowed, the page runs on cpu
    ({"FAKE_CUDA": "1", "FAKE_KERNEL_FAIL": "1"}, True, "cpu", "no kernel image is available"),
    # no GPU, fallback refused: the runner exits 5 and the row says why
    ({}, False, "none (GPU required, no fallback)", "no usable GPU and allow_cpu_fallback is false"),
])
def test_gpu_problems_reported(hf_home, page, gpu_env, fallback, device, problem):
    (row,) = run_doctor(_config(hf_home, gpu_env, allow_cpu_fallback=fallback), run_page=page)
    assert not row["ready"] and row["device"] == device
    assert any(problem in p for p in row["problems"]), row["problems"]


def test_cpu_fallback_page_runs_on_cpu(hf_home, page):
    shared_path("formats")  # the fake MinerU's page replays the library's own answers
    (row,) = run_doctor(_config(hf_home, {}, allow_cpu_fallback=True), run_page=page)
    assert row["ready"] and row["device"] == "cpu" and row["device_used"] == "cpu"


def test_missing_interpreter_and_missing_weights(tmp_path, hf_home, page):
    (row,) = run_doctor(_config(hf_home, {}, mineru_python=str(tmp_path / "envs" / "mineru" / "bin" / "python")),
                        run_page=page)
    assert not row["python_ok"] and not row["ready"] and "does not exist; create the env" in row["problems"][0]
    (row,) = run_doctor(_config(tmp_path / "empty_hf", {"FAKE_CUDA": "1"}), run_page=page)
    assert row["imports_ok"] and row["page_ok"] is False
    assert any("hf download " + HUB in p for p in row["problems"])


def test_import_failure_skips_page(tmp_path, hf_home, page):
    cfg = _config(hf_home, {"FAKE_CUDA": "1"})
    cfg["envs"]["torch"]["env"]["PYTHONPATH"] = str(tmp_path)  # no fakes: torch & co. are missing
    (row,) = run_doctor(cfg, run_page=page)
    assert row["imports_ok"] is False and row["page_ok"] is None
    assert any(p.startswith("import torch: ModuleNotFoundError") for p in row["problems"])


def test_shipped_torch_config_parses_and_reports_missing_envs(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("BASE", str(tmp_path / "base"))
    raw = json.loads((Path(__file__).resolve().parents[1] / "configs" / "pipeline.torch.json").read_text())
    rows = run_doctor(raw, run_page=None)
    assert [(r["stage"], r["variant"]) for r in rows] == [
        ("paddle_layout", "pp_doclayout_v2"), ("paddle_layout", "pp_doclayout_v3"),
        ("paddle_layout", "pp_doclayout_plus_l"), ("paddle_vl15", "doc_parser"), ("dell", "american_stories"),
        ("mineru", "layout"), ("text_lines", "lines"), ("text_lines", "blocks"), ("transcription", "lines")]
    assert all(not r["ready"] and r["python"].startswith(str(tmp_path / "base" / "envs")) for r in rows)


def test_no_page_checks_weights_where_the_config_says(tmp_path, hf_home):
    (row,) = run_doctor(_config(tmp_path / "empty_hf", {"FAKE_CUDA": "1"}), run_page=None)
    assert not row["ready"] and row["weights_ok"] is False and row["page_ok"] is None
    assert any(p.startswith("weights: ") and "hf download " + HUB in p for p in row["problems"])
    (row,) = run_doctor(_config(hf_home, {"FAKE_CUDA": "1"}), run_page=None)
    assert row["ready"] and row["weights_ok"] is True and row["weights"][0].endswith("snapshots/c0ffee")
    cfg = _config(hf_home, {"FAKE_CUDA": "1"})
    cfg["stages"][0]["variants"]["layout"] = {"model_dir": str(tmp_path / "copy")}
    (tmp_path / "copy").mkdir()
    (row,) = run_doctor(cfg, run_page=None)  # an empty folder where the weights should be
    assert not row["ready"] and any("is empty" in p for p in row["problems"])


def test_an_empty_page_fails_the_one_page_check(tmp_path, hf_home):
    page = tmp_path / "blank.png"
    Image.new("RGB", (1000, 1500), (0, 0, 255)).save(page)  # the fake model answers this one with no layout
    (row,) = run_doctor(_config(hf_home, {"FAKE_CUDA": "1"}), run_page=str(page))
    assert row["page_ok"] is False and not row["ready"]
    assert any("answered but nothing usable came back" in p and "Sorry, I cannot read this page." in p
               for p in row["problems"])


def test_text_lines_import_list_has_scipy():
    from newsbag.doctor import family_imports

    assert "scipy" in family_imports("text_lines", {})


def test_a_failed_page_check_names_the_runner_error_among_malformed_and_glued_events():
    """The runner's stdout is other people's code too: a malformed event is ignored (it used to end
    doctor with a traceback) and an event glued to a library's progress text is still read."""
    from newsbag.doctor import page_error

    stdout = "\n".join([
        "@@newsbag [1,2]",
        "@@newsbag {not json",
        '@@newsbag {"event": "start", "page_id": "doctor"}',
        '\rpredict: 100%@@newsbag {"event": "done", "page_id": "doctor", "status": "failed", '
        '"error": "CUDA error: no kernel image is available"}',
    ])
    assert page_error(stdout, "a traceback\nits last line\n") == "CUDA error: no kernel image is available"
    assert page_error("@@newsbag {oops\n", "a traceback\nits last line\n") == "its last line"
    assert page_error("", "") == "no output"


def test_device_column_says_where_the_page_ran_when_onnxruntime_lists_cuda_it_cannot_load():
    """onnxruntime-gpu lists CUDAExecutionProvider even where it cannot load (../shared/formats/
    onnxruntime_providers.md): the row must say the page ran on cpu, not the device the list suggests."""
    env = {"PYTHONPATH": str(FAKES.parent / "fakes_ort_gpu"), "FAKE_ORT_GPU": "no_cuda_libs"}
    raw = {"version": 1, "envs": {"dell": {"python": sys.executable, "env": env}},
           "stages": [{"name": "text_lines", "family": "text_lines", "env": "dell", "device": "gpu",
                       "allow_cpu_fallback": True, "variants": {"lines": {}}}]}
    rows = run_doctor(raw, run_page=str(SAMPLE_PAGE))
    (row,) = rows
    assert row["page_ok"] is True and row["providers_used"] == ["CPUExecutionProvider"]
    assert row["device_used"] == "cpu" and row["device"] == "cpu"
    assert format_doctor_table(rows).splitlines()[1].split()[5] == "cpu"
