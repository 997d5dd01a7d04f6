"""Variants of one family that differ only in post-processing share one model pass per page,
and their outputs (and so the fused output) are identical to running each variant alone."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tesserocr")

STEMS = ("nzz_17810901_0_0_a1_p1_1", "nzz_17840710_0_0_a1_p1_1")  # two real NZZ front pages
REPO = Path(__file__).resolve().parents[2]
DETECTOR_CLASSES = {"tesseract": "TesseractDetector", "text_lines": "TextLinesDetector"}
STAGES = {  # family -> (its model-pass method, the embedded config's variants)
    "tesseract": ("model_pass", {"blocks": {"level": "block"}, "paragraphs": {"level": "paragraph"}}),
    "text_lines": ("model_pass", {"lines": {"group": False}, "blocks": {"group": True}}),
}


def _run_stage(harness, run_dir, family, variants, pages, shared: bool) -> None:
    import _loop

    detector_cls = getattr(importlib.import_module(family), DETECTOR_CLASSES[family])
    for variant, params in variants.items():
        job = harness.job(family, pages, params, variant=variant)
        job["out_dir"] = str(run_dir / "outputs" / "sources" / family / variant)
        if shared:  # what the orchestrator sends: every variant of the stage with its params
            job["stage_variants"] = {v: harness.job(family, [], p)["params"] for v, p in variants.items()}
        assert _loop.run_job(job, detector_cls) == 0


def test_one_model_pass_per_page_and_identical_fused_output(harness, tmp_path, monkeypatch):
    from newsbag.fusion.stage import run_fusion

    pages = [harness.page_entry(harness.nzz_page(stem)[0], page_id=f"p{k}") for k, stem in enumerate(STEMS)]
    solo, shared = tmp_path / "solo", tmp_path / "shared"
    for family, (method, variants) in STAGES.items():
        _run_stage(harness, solo, family, variants, pages, shared=False)   # before: a model pass per variant
        cls = getattr(importlib.import_module(family), DETECTOR_CLASSES[family])
        passes = []
        original = getattr(cls, method)
        monkeypatch.setattr(cls, method, lambda self, path, _o=original: passes.append(path) or _o(self, path))
        _run_stage(harness, shared, family, variants, pages, shared=True)
        assert len(passes) == len(pages), f"{family}: {len(passes)} model passes for {len(pages)} pages x 2 variants"
        assert not any((shared / "outputs" / "sources" / family / "_shared").rglob("*.json"))  # cache released
        for variant in variants:
            for page in pages:
                a, b = (json.loads((run / "outputs" / "sources" / family / variant / f"{page['page_id']}.json").read_text())
                        for run in (solo, shared))
                assert a["regions"] == b["regions"], f"{family}/{variant} {page['page_id']}"
    from newsbag.config import BuiltinStage, load_config, to_jsonable

    fusion = next(s for s in load_config(REPO / "configs" / "pipeline.local.json").stages
                  if isinstance(s, BuiltinStage) and s.kind == "fusion")
    for run in (solo, shared):
        run_fusion(run, [p["page_id"] for p in pages], to_jsonable(fusion.options))
    fused = sorted(p.relative_to(solo / "outputs" / "fusion") for p in (solo / "outputs" / "fusion").glob("*/p*.json")
                   if not p.parent.name.startswith("_"))
    assert fused
    for rel in fused:
        a, b = (json.loads((run / "outputs" / "fusion" / rel).read_text())["regions"] for run in (solo, shared))
        assert a == b, rel


@pytest.mark.parametrize("family", sorted(STAGES))
def test_the_sibling_loads_no_model_when_every_page_has_a_pass(family, harness, tmp_path, monkeypatch):
    """README's bag_bench "model set-up s" of a shared-pass variant is its model load; the second
    variant reads every page's pass, so it loads nothing; without the entry of one page it loads
    once and runs the pass on that page only."""
    import _shared

    method, variants = STAGES[family]
    cls = getattr(importlib.import_module(family), DETECTOR_CLASSES[family])
    pages = [harness.page_entry(harness.nzz_page(stem)[0], page_id=f"p{k}") for k, stem in enumerate(STEMS)]
    loads, passes = [], []
    init, model_pass = cls.__init__, getattr(cls, method)
    monkeypatch.setattr(cls, "__init__", lambda self, *a, **k: loads.append(1) or init(self, *a, **k))
    monkeypatch.setattr(cls, method, lambda self, path: passes.append(path) or model_pass(self, path))
    monkeypatch.setattr(_shared.SharedModelOutput, "release", lambda self, page_id: None)  # keep the entries
    first, second = variants
    _run_stage(harness, tmp_path / "a", family, {first: variants[first], second: variants[second]}, pages, shared=True)
    assert (len(loads), len(passes)) == (1, len(pages))
    for entry in (tmp_path / "a" / "outputs" / "sources" / family / "_shared").rglob("p1.json"):
        entry.unlink()
    (tmp_path / "a" / "outputs" / "sources" / family / second / "p1.json").unlink()
    _run_stage(harness, tmp_path / "a", family, {second: variants[second]} | {first: variants[first]}, pages,
               shared=True)  # the first variant's pages are current (skipped): only the sibling works
    assert (len(loads), len(passes)) == (2, len(pages) + 1)
