"""MinerU2.5 runner end to end in a subprocess, with fake torch/transformers/mineru_vl_utils on PYTHONPATH."""

from __future__ import annotations

import json

import pytest

from nbtest import write_hf_model
from prod_helpers import make_page, replayed, read_json, run_on_a_card_without_kernels, run_runner

HUB_ID = "opendatalab/MinerU2.5-2509-1.2B"
LAYOUT = replayed("mineru_layout_detect.example.json")
TWO_STEP = replayed("mineru_two_step_extract.example.json")


@pytest.fixture
def hf_home(tmp_path):
    """An HF cache holding a snapshot of the hub id in the real layout (refs/main -> snapshots/<hash>)."""
    home = tmp_path / "hf"
    repo = home / "hub" / ("models--" + HUB_ID.replace("/", "--"))
    write_hf_model(repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    return home


def _calls(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _env(tmp_path, hf_home, **extra):
    return {"HF_HOME": str(hf_home), "FAKE_CALL_LOG": str(tmp_path / "calls.jsonl"), **extra}


def test_layout_mode_batched_scaled_to_pixels_on_gpu(tmp_path, hf_home):
    pages = [make_page(tmp_path, f"p{i}", (1000, 2000)) for i in range(3)]
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages, {"batch_size": 2}, device="gpu",
                                       allow_cpu_fallback=False, env=_env(tmp_path, hf_home, FAKE_CUDA="1"))
    assert code == 0, err
    regions = read_json(out_dir / "p0.json")["regions"]
    assert [r["label"] for r in regions] == [b["type"] for b in LAYOUT]
    first = LAYOUT[0]["bbox"]
    assert regions[0]["bbox_xyxy"] == pytest.approx([first[0] * 1000, first[1] * 2000, first[2] * 1000, first[3] * 2000])
    assert [r["order"] for r in regions] == list(range(1, len(LAYOUT) + 1))
    assert all(r["score"] is None and r["text"] is None for r in regions)
    calls = _calls(tmp_path / "calls.jsonl")
    load = next(c for c in calls if c["call"] == "Qwen2VLForConditionalGeneration.from_pretrained")
    assert load["device_map"] == {"": "cuda:0"} and load["dtype"] == "auto" and load["path"].endswith("snapshots/abc123")
    assert next(c for c in calls if c["call"] == "AutoProcessor.from_pretrained")["use_fast"] is True
    assert [c["n"] for c in calls if c["call"] == "batch_layout_detect"] == [2, 1]
    meta = read_json(out_dir / "run_meta.json")
    assert meta["cuda_available"] is True and meta["device_used"] == "cuda" and meta["gpu_name"] == "NVIDIA H200"
    assert meta["state"] == "finished" and meta["counts"]["ok"] == 3


def test_two_step_keeps_content_as_text(tmp_path, hf_home):
    pages = [make_page(tmp_path, "p0", (1000, 1000))]
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages, {"mode": "two_step"}, env=_env(tmp_path, hf_home))
    assert code == 0, err
    regions = read_json(out_dir / "p0.json")["regions"]
    table = next(r for r in regions if r["label"] == "table")
    assert table["text"].startswith("<table><tr><td>Year</td>") and table["class"] == "table"
    assert [r["text"] for r in regions] == [b["content"] for b in TWO_STEP]


def test_gpu_unavailable_falls_back_to_cpu_when_allowed(tmp_path, hf_home):
    pages = [make_page(tmp_path, "p0", (800, 600))]
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages, device="gpu", allow_cpu_fallback=True,
                                       env=_env(tmp_path, hf_home))
    assert code == 0, err
    assert read_json(out_dir / "run_report.json")["device_used"] == "cpu"
    assert read_json(out_dir / "run_meta.json")["cuda_available"] is False
    load = next(c for c in _calls(tmp_path / "calls.jsonl") if c["call"].startswith("Qwen2VL"))
    assert load["device_map"] == {"": "cpu"}


@pytest.mark.parametrize("params, device, fallback", [
    ({}, "gpu", False),                     # GPU asked, none, fallback refused
    ({"require_cuda": True}, "auto", True),  # require_cuda guard wins over the fallback
])
def test_fallback_refused_exits_5_and_leaves_no_source_folder(tmp_path, hf_home, params, device, fallback):
    pages = [make_page(tmp_path, "p0", (800, 600))]
    code, out_dir, events, err = run_runner(tmp_path, "mineru", pages, params, device=device,
                                            allow_cpu_fallback=fallback, env=_env(tmp_path, hf_home))
    assert code == 5 and events[-1]["error_class"] == "DeviceUnavailable"
    # no run_meta.json / run_report.json: fusion must not take a refused member for one that ran
    assert not out_dir.exists()
    assert "CUDA is not usable" in events[-1]["error"] and "device unavailable" in err


@pytest.mark.parametrize("fallback", [True, False])
def test_gpu_without_kernels_for_the_card_is_found_before_any_page(tmp_path, hf_home, fallback):
    """torch sees the card, the weights load onto it, but the first real op has no kernel (a wheel
    built without this card's arch): CPU with the reason, or exit 5; never the error on every page."""
    pages = [make_page(tmp_path, f"p{i}", (800, 600)) for i in range(2)]
    out_dir = run_on_a_card_without_kernels(tmp_path, "mineru", pages, {}, _env(tmp_path, hf_home), fallback)
    if fallback:
        assert "no kernel image is available" in read_json(out_dir / "run_meta.json")["gpu_op_error"]
        load = next(c for c in _calls(tmp_path / "calls.jsonl") if c["call"].startswith("Qwen2VL"))
        assert load["device_map"] == {"": "cpu"}


def test_offline_without_cached_weights_exits_3_with_prestage_hint(tmp_path):
    pages = [make_page(tmp_path, "p0", (800, 600))]
    code, _, events, _ = run_runner(tmp_path, "mineru", pages, env={"HF_HOME": str(tmp_path / "empty")})
    assert code == 3
    assert "HF_HUB_OFFLINE=1" in events[-1]["error"] and f"hf download {HUB_ID}" in events[-1]["error"]


def test_failing_page_in_batch_retried_alone_then_resume(tmp_path, hf_home):
    good = [make_page(tmp_path, f"g{i}", (600, 800)) for i in range(2)]
    bad = make_page(tmp_path, "bad", (600, 800), color=(255, 0, 0))  # red pixel: the fake model raises
    env = _env(tmp_path, hf_home)
    code, out_dir, _, _ = run_runner(tmp_path, "mineru", [good[0], bad, good[1]], {"batch_size": 4}, env=env)
    assert code == 4
    assert (out_dir / "g0.json").exists() and (out_dir / "g1.json").exists()
    assert "index out of range" in read_json(out_dir / "_failed" / "bad.json")["error"]
    # one batch of 3 raised, then each page alone
    assert [c["n"] for c in _calls(tmp_path / "calls.jsonl") if c["call"] == "batch_layout_detect"] == [3, 1, 1, 1]
    code, _, events, _ = run_runner(tmp_path, "mineru", good, {"batch_size": 4}, env=env)
    assert code == 0 and {e["status"] for e in events if e["event"] == "done"} == {"skipped"}


def test_a_lost_cuda_context_ends_the_runner_instead_of_failing_every_later_page(tmp_path, hf_home):
    """An illegal memory access leaves the process's CUDA context unusable: the runner stops (the
    orchestrator restarts it) rather than failing the rest of its pages with the same error."""
    good = [make_page(tmp_path, f"g{i}", (600, 800)) for i in range(2)]
    bad = make_page(tmp_path, "bad", (600, 800), color=(255, 0, 0))
    env = _env(tmp_path, hf_home, FAKE_CUDA="1")
    code, out_dir, events, err = run_runner(tmp_path, "mineru", [good[0], bad, good[1]], {"batch_size": 1},
                                            device="gpu", env=env)
    assert code == 8, err
    assert [(e["page_id"], e["status"]) for e in events if e["event"] == "done"] == [("g0", "ok"), ("bad", "failed")]
    assert "illegal memory access" in read_json(out_dir / "_failed" / "bad.json")["error"]
    assert not (out_dir / "_failed" / "g1.json").exists() and not (out_dir / "g1.json").exists()
    assert read_json(out_dir / "run_report.json")["state"] == "interrupted"
    # in a batch the culprit is unknown: nothing is retried in the lost context, nothing blamed
    (tmp_path / "b").mkdir()
    code, out_dir, events, err = run_runner(tmp_path / "b", "mineru", [good[0], bad, good[1]], {"batch_size": 4},
                                            device="gpu", env=env)
    assert code == 8, err
    assert [e for e in events if e["event"] == "done"] == []
    assert [c["n"] for c in _calls(tmp_path / "calls.jsonl") if c["call"] == "batch_layout_detect"][-1:] == [3]


def test_model_dir_staged_to_node_local(tmp_path):
    model = write_hf_model(tmp_path / "weights" / "MinerU2.5")
    pages = [make_page(tmp_path, "p0", (600, 800))]
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages, {"model_dir": str(model), "stage_weights": True},
                                       env={"TMPDIR": str(tmp_path / "local"), "SLURM_TMPDIR": ""})
    assert code == 0, err
    assert read_json(out_dir / "run_report.json")["model_path"].startswith(str(tmp_path / "local" / "newsbag-weights"))


def test_pro_style_checkpoint_loads_with_tied_lm_head_like_the_library(tmp_path):
    # MinerU2.5-Pro layout: tie_word_embeddings only under text_config. transformers 5.10.1-5.15.1
    # (the fake reproduces what the real 5.15.1 did here) leave lm_head random unless the
    # tie is copied onto the config first, as mineru_vl_utils.transformers_loading does.
    model = write_hf_model(tmp_path / "pro", {"model_type": "qwen2_vl", "text_config": {"tie_word_embeddings": True}})
    pages = [make_page(tmp_path, "p0", (600, 800))]
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages, {"model_dir": str(model)},
                                       env={"FAKE_CALL_LOG": str(tmp_path / "calls.jsonl")})
    assert code == 0, err
    load = next(c for c in _calls(tmp_path / "calls.jsonl") if c["call"].startswith("Qwen2VL"))
    assert load["tie"] is True and load["output_loading_info"] is True


def test_newly_initialised_weights_are_refused(tmp_path):
    model = write_hf_model(tmp_path / "m")
    pages = [make_page(tmp_path, "p0", (600, 800))]
    code, out_dir, events, err = run_runner(tmp_path, "mineru", pages, {"model_dir": str(model)},
                                            env={"FAKE_LOAD_MISSING": "visual.merger.mlp.0.weight"})
    assert code == 3 and not out_dir.exists()
    error = events[-1]["error"]
    assert "visual.merger.mlp.0.weight" in error and "transformers 5.15.1 left them randomly initialised" in error
    assert "hf download" not in error  # not a missing-weights remedy


@pytest.mark.parametrize("make, cause", [
    (lambda d: d.mkdir(parents=True), "is empty"),                                        # nothing copied yet
    (lambda d: write_hf_model(d, truncate=True), "truncated"),                             # copy killed half-way
    (lambda d: (write_hf_model(d), (d / "model.safetensors").unlink()), "no *.safetensors"),  # weights not copied
])
def test_empty_or_half_copied_model_dir_says_why(tmp_path, make, cause):
    folder = tmp_path / "MinerU2.5"
    make(folder)
    code, out_dir, events, err = run_runner(tmp_path, "mineru", [make_page(tmp_path, "p0", (600, 800))],
                                            {"model_dir": str(folder)})
    assert code == 3 and cause in events[-1]["error"] and str(folder) in events[-1]["error"]
    assert cause in err  # the runner log (and so the console message) carries the cause


def test_generation_limits_padding_and_reported_model(tmp_path):
    model = write_hf_model(tmp_path / "MinerU2.5-custom")
    params = {"model_dir": str(model), "max_new_tokens": 2048, "content_max_new_tokens": 512,
              "no_repeat_ngram_size": 50, "batch_size": 2}
    pages = [make_page(tmp_path, f"p{i}", (600, 800)) for i in range(2)]
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages, params,
                                       env={"FAKE_CALL_LOG": str(tmp_path / "calls.jsonl")})
    assert code == 0, err
    calls = _calls(tmp_path / "calls.jsonl")
    client = next(c for c in calls if c["call"] == "MinerUClient")
    assert (client["layout_max_new_tokens"], client["text_max_new_tokens"], client["no_repeat_ngram_size"]) == (2048, 512, 50)
    assert {c["padding_side"] for c in calls if c["call"] == "batch_predict"} == {"left"}  # the fake tokenizer says right
    report = read_json(out_dir / "run_report.json")
    assert report["model"] == "MinerU2.5-custom" and report["model_dir"] == str(model)  # not the default hub id
    assert read_json(out_dir / "p0.json")["source"]["model"] == "MinerU2.5-custom"


def test_unparseable_answer_is_an_empty_page_with_the_answer_as_reason(tmp_path, hf_home):
    pages = [make_page(tmp_path, "good", (600, 800)), make_page(tmp_path, "blank", (600, 800), color=(0, 0, 255))]
    code, out_dir, events, err = run_runner(tmp_path, "mineru", pages, {"batch_size": 2}, env=_env(tmp_path, hf_home))
    assert code == 0, err
    done = {e["page_id"]: e for e in events if e["event"] == "done"}
    assert done["good"]["status"] == "ok" and done["blank"]["status"] == "empty"
    assert "Sorry, I cannot read this page." in done["blank"]["reason"]
    report = read_json(out_dir / "run_report.json")
    assert report["pages"]["blank"]["status"] == "empty" and report["empty_share"] == 0.5 and report["flags"]
    meta = read_json(out_dir / "run_meta.json")
    assert meta["counts"]["empty"] == 1 and meta["flags"] == report["flags"]


def _raw_layout(blocks) -> str:
    """A layout answer in MinerU2.5's raw format (0..1000 integer corners, as ../shared/formats/scripts/make_mineru.py)."""
    return "\n".join(f"<|box_start|>{x0:03d} {y0:03d} {x1:03d} {y1:03d}<|box_end|><|ref_start|>{kind}<|ref_end|><|rotate_up|>"
                     for kind, (x0, y0, x1, y1) in blocks)


# The model's containers (structs.BlockType "containers": list, image_block, equation_block) come
# back from batch_layout_detect beside the blocks they hold.
NESTED = [
    ("text", (90, 20, 910, 100)),
    ("list", (90, 120, 910, 300)),
    ("list_item", (95, 125, 905, 180)),          # inside the list
    ("list_item", (95, 190, 905, 295)),          # inside the list
    ("image_block", (90, 320, 910, 700)),
    ("image", (95, 325, 495, 640)),              # inside the image block
    ("chart", (505, 325, 905, 640)),             # inside the image block
    ("image_caption", (95, 650, 905, 695)),      # inside the image block
    ("equation_block", (250, 720, 750, 800)),
    ("equation", (255, 725, 745, 755)),          # inside the equation block
    ("equation", (255, 765, 745, 795)),          # inside the equation block
    ("list_item", (95, 280, 905, 340)),          # a quarter inside the list: its own region
    ("text", (90, 820, 910, 900)),
]


def test_a_container_and_the_blocks_it_holds_are_written_as_one_region(tmp_path, hf_home):
    pages = [make_page(tmp_path, "p0", (1000, 1000), color=(0, 0, 255))]  # blue: the fake answers FAKE_MINERU_ANSWER
    code, out_dir, _, err = run_runner(tmp_path, "mineru", pages,
                                       env=_env(tmp_path, hf_home, FAKE_MINERU_ANSWER=_raw_layout(NESTED)))
    assert code == 0, err
    regions = read_json(out_dir / "p0.json")["regions"]
    kept = [NESTED[i] for i in (0, 1, 4, 8, 11, 12)]
    assert [r["label"] for r in regions] == [kind for kind, _ in kept]
    assert [r["bbox_xyxy"] for r in regions] == [pytest.approx(list(box)) for _, box in kept]
    assert [r["order"] for r in regions] == list(range(1, len(kept) + 1))


def test_two_step_container_carries_the_text_of_the_blocks_it_holds():
    from mineru import blocks_to_regions

    blocks = [{"type": "list", "bbox": [0.1, 0.1, 0.9, 0.5], "content": None},            # two_step skips lists
              {"type": "text", "bbox": [0.1, 0.1, 0.9, 0.3], "content": "1. eggs"},       # list_item -> text
              {"type": "text", "bbox": [0.1, 0.3, 0.9, 0.5], "content": "2. milk"},
              {"type": "text", "bbox": [0.1, 0.6, 0.9, 0.9], "content": "after the list"}]
    regions = blocks_to_regions(blocks, 100, 200)
    assert [(r["label"], r["text"], r["order"]) for r in regions] == [
        ("list", "1. eggs\n2. milk", 1), ("text", "after the list", 2)]
    assert regions[0]["bbox_xyxy"] == pytest.approx([10, 20, 90, 100])
    assert len(blocks) == 4 and blocks[0]["content"] is None  # the library's blocks are left as they were



def test_a_block_held_by_a_container_holds_nothing_itself():
    """image_block > image > caption: the caption goes with the outer container (the one region
    written), whatever the answer's order; held by the image, it and its text were lost."""
    from mineru import blocks_to_regions

    blocks = [{"type": "image", "bbox": [0.1, 0.1, 0.9, 0.6], "content": None},
              {"type": "image_block", "bbox": [0.1, 0.1, 0.9, 0.7], "content": None},
              {"type": "image_caption", "bbox": [0.2, 0.5, 0.8, 0.58], "content": "Fig. 1 The bridge"}]
    regions = blocks_to_regions(blocks, 100, 100)
    assert [(r["label"], r["text"]) for r in regions] == [("image_block", "Fig. 1 The bridge")]

@pytest.mark.parametrize("level, shown", [("WARNING", False), ("DEBUG", True)])
def test_library_debug_output_off_by_default(tmp_path, hf_home, level, shown):
    pages = [make_page(tmp_path, "p0", (600, 800))]
    code, _, _, err = run_runner(tmp_path, "mineru", pages, {"library_log_level": level}, env=_env(tmp_path, hf_home))
    assert code == 0
    assert ("Layout raw output" in err) is shown
    assert all(len(line) < 400 for line in err.splitlines())  # a raw answer is cut, never pasted whole


@pytest.mark.parametrize("params, message", [
    ({"dtype": "fp16"}, "variant 'layout': dtype must be one of auto, bfloat16, float16, float32, got 'fp16'"),
    ({"max_new_tokens": 0}, "variant 'layout': max_new_tokens must be a whole number in [16, 32768], got 0"),
    ({"library_log_level": "debug"}, "variant 'layout': library_log_level must be one of"),
])
def test_bad_parameters_fail_at_config_load(params, message):
    from newsbag.config import parse_config
    from newsbag.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        parse_config({"version": 1, "stages": [{"name": "mineru", "variants": {"layout": params}}]})
    assert message in str(exc.value)
