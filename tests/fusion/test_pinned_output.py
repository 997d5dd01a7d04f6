"""Fusion's output is pinned: speed work on the stage must not change a single fused region.

The fixed synthetic runs of `synthetic_run` (the Torch bag's sources and the embedded bag's) go
through `run_fusion` with each shipped config's fusion section; every fused page, read back as
readers see it (`page_reader.read_page`: members resolved), is digested per variant together with the
leaderboards and per-page metric tables, and compared with `pinned_output.json`.

When a change to fusion's *algorithm* (not its speed) is intended, regenerate and commit the
expectation, saying so in the commit message:

    NEWSBAG_PIN_REGEN=1 pytest tests/fusion/test_pinned_output.py
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from synthetic_run import LOCAL_SOURCES, TORCH_SOURCES, write_synthetic_run

from newsbag.config import BuiltinStage, load_config, to_jsonable
from newsbag.fusion.stage import run_fusion
from newsbag.page_reader import read_page

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("pinned_output.json")
PAGES = ["page-a", "page-b", "page-c"]
CASES = {"torch": ("pipeline.torch.json", TORCH_SOURCES), "local": ("pipeline.local.json", LOCAL_SOURCES)}


def _fusion_section(config_name: str) -> dict:
    config = load_config(REPO / "configs" / config_name)
    stage = next(s for s in config.stages if isinstance(s, BuiltinStage) and s.kind == "fusion")
    return to_jsonable(stage.options)


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:20]


def _pinned_view(run: Path, summary: dict) -> dict:
    """What readers see of a fusion run: per variant and page a digest of the regions (with
    members resolved), their count and labels; the tables; the summary's choices."""
    fusion = run / "outputs" / "fusion"
    variants = {}
    for name in sorted(summary["variants"]):
        if name in summary["skipped_variants"]:
            continue
        for pid in PAGES:
            page = read_page(fusion / name / f"{pid}.json", pid)
            regions = page["regions"]
            variants[f"{name}/{pid}"] = {"n": len(regions), "labels": dict(sorted(Counter(r["class"] for r in regions).items())),
                                         "regions": _digest(regions)}
    tables = {t: _digest((fusion / t).read_text()) for t in ("variant_leaderboard.tsv", "source_leaderboard.tsv",
                                                              "per_page_variant_metrics.tsv", "per_page_source_metrics.tsv")}
    return {"variants": variants, "tables": tables, "source_order": summary["source_order"],
            "recommended": summary["recommended_variant"], "skipped": sorted(summary["skipped_variants"])}


def _run_case(tmp_path: Path, case: str) -> dict:
    config_name, sources = CASES[case]
    run = write_synthetic_run(tmp_path / case, sources, PAGES, seed=17)
    summary = run_fusion(run, PAGES, _fusion_section(config_name))
    assert summary["counts"] == {"ok": len(PAGES), "skipped": 0, "failed": 0}
    return _pinned_view(run, summary)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_output_is_pinned(tmp_path, case):
    got = _run_case(tmp_path, case)
    if os.environ.get("NEWSBAG_PIN_REGEN"):
        expected = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
        expected[case] = got
        EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"regenerated {EXPECTED.name}[{case}]")
    want = json.loads(EXPECTED.read_text())[case]
    changed = sorted(k for k in set(want["variants"]) | set(got["variants"])
                     if want["variants"].get(k) != got["variants"].get(k))
    assert not changed, f"fused regions changed for {changed[:8]}: first {want['variants'].get(changed[0])} -> " \
                        f"{got['variants'].get(changed[0])}"
    assert got == want


def test_the_synthetic_run_exercises_what_fusion_does(tmp_path):
    """The pinned pages are not trivial: every variant has regions of several classes, boxes
    are repaired on read, a page-sized box is present, and MinerU has no scores."""
    run = write_synthetic_run(tmp_path / "t", TORCH_SOURCES, PAGES, seed=17)
    mineru = json.loads((run / "outputs/sources/mineru/layout/page-a.json").read_text())
    assert all(r["score"] is None for r in mineru["regions"])
    page = read_page(run / "outputs/sources/dell/american_stories/page-a.json", "page-a")
    assert set(page["warnings"]) >= {"non_finite_box", "inverted_box", "clipped_box"}
    failed = json.loads((run / "outputs/sources/paddle_layout/pp_doclayout_v2/page-b.json").read_text())
    assert len(failed["regions"]) == 1
    expected = json.loads(EXPECTED.read_text())["torch"]
    assert not expected["skipped"]
    assert all(v["n"] > 20 and len(v["labels"]) >= 3 for v in expected["variants"].values())
