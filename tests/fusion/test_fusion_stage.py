import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from newsbag.fusion.stage import run_fusion
from newsbag.page_reader import read_page
from newsbag.rundir import discover_sources

from nbtest import run_cli, write_manifest

CFG = {
    "variants": {
        "S1": {"sources": ["paddle_layout/*"], "method": "best_single"},
        "S2": {"sources": ["dell/*"], "method": "best_single"},
        "C": {"sources": ["*"], "method": "consensus", "params": {"vote": 2, "split_columns": True}},
    },
    "line_source": "text_lines/lines",
    "exclude_from_variants": ["text_lines/lines"],
}


def _source_page(pid, stage, variant, family, regions):
    return {"page_id": pid, "image": {"path": f"img/{pid}.png", "width": 400, "height": 300},
            "source": {"stage": stage, "variant": variant, "family": family, "model": "m", "device": "cpu"},
            "regions": [{"bbox_xyxy": b, "label": lab, "class": cls, "score": 0.8, "order": None, "text": None}
                        for b, lab, cls in regions], "seconds": 0.1}


def _write_run(tmp_path, pids=("p1", "p2")):
    run = tmp_path / "run"
    cols = [[10, 10, 190, 290], [210, 10, 390, 290]]
    lines = [[x0 + 5, y, x1 - 5, y + 12] for x0, _, x1, _ in cols for y in range(15, 280, 20)]
    for pid in pids:
        pages = {
            ("paddle_layout", "cdla", "paddle_layout"): [(cols[0], "text", "text"), (cols[1], "text", "text")],
            ("tesseract", "blocks", "tesseract"): [([10, 10, 390, 290], "flowing_text", "text")],
            ("text_lines", "lines", "text_lines"): [(b, "text_line", "text_line") for b in lines],
        }
        for (stage, variant, fam), regions in pages.items():
            path = run / "outputs" / "sources" / stage / variant / f"{pid}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_source_page(pid, stage, variant, fam, regions)))
    (run / "outputs" / "sources" / "tesseract" / "blocks" / "_failed").mkdir()
    (run / "outputs" / "sources" / "tesseract" / "blocks" / "run_report.json").write_text("{}")
    return run


def test_run_fusion_writes_pages_tsvs_and_summary(tmp_path):
    run = _write_run(tmp_path)
    seen = []
    summary = run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "ok"), ("p2", "ok")]
    assert discover_sources(run) == ["paddle_layout/cdla", "tesseract/blocks", "text_lines/lines"]
    assert summary["skipped_variants"] == {"S2": "no source matching 'dell/*' ran"}
    assert summary["recommended_variant"] in {"S1", "C"} and summary["recommended_by"] == "score"
    fused = read_page(run / "outputs/fusion/C/p1.json", "p1")
    # the page-wide tesseract block is cut at the gutter; both columns carry two families
    boxes = sorted(r["bbox_xyxy"][0] for r in fused["regions"])
    assert len(boxes) == 2 and boxes[0] < 100 < boxes[1]
    assert all({"paddle_layout/cdla", "tesseract/blocks"} <= set(r["support"]) for r in fused["regions"])
    assert all(r["members"] for r in fused["regions"])
    for name in ("variant_leaderboard.tsv", "source_leaderboard.tsv", "per_page_variant_metrics.tsv",
                 "per_page_source_metrics.tsv", "summary.json"):
        assert (run / "outputs/fusion" / name).is_file()
    header, *rows = (run / "outputs/fusion/source_leaderboard.tsv").read_text().splitlines()
    assert header.split("\t")[:4] == ["rank", "name", "recommended", "score"]
    assert rows[0].split("\t")[1] == "paddle_layout/cdla"      # the column-true source ranks first
    assert not (run / "outputs/fusion/S2").exists()


def test_resume_skips_finished_pages_and_force_redoes(tmp_path):
    run = _write_run(tmp_path)
    run_fusion(run, ["p1", "p2"], CFG)
    seen = []
    again = run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append(st))
    assert seen == ["skipped", "skipped"] and again["counts"]["skipped"] == 2
    assert again["variant_leaderboard"]        # recomputed from the stored per-page metrics
    src = run / "outputs/sources/tesseract/blocks/p1.json"
    os.utime(src, (src.stat().st_mtime + 10, src.stat().st_mtime + 10))   # the same bytes: the same page
    seen.clear()
    run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "skipped"), ("p2", "skipped")]
    page = json.loads(src.read_text())
    page["regions"][0]["bbox_xyxy"] = [10, 10, 380, 290]
    src.write_text(json.dumps(page))
    seen.clear()
    run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "ok"), ("p2", "skipped")]
    seen.clear()
    run_fusion(run, ["p1", "p2"], CFG, force=True, progress=lambda pid, st: seen.append(st))
    assert seen == ["ok", "ok"]


def test_bad_source_page_drops_that_source_and_the_page_is_still_fused(tmp_path, caplog):
    run = _write_run(tmp_path)
    bad = run / "outputs/sources/tesseract/blocks/p2.json"
    bad.write_text("{not json")
    summary = run_fusion(run, ["p1", "p2"], CFG)
    assert summary["counts"] == {"ok": 2, "skipped": 0, "failed": 0}
    fused = json.loads((run / "outputs/fusion/C/p2.json").read_text())
    assert fused["source"]["sources"] == ["paddle_layout/cdla"]
    assert list(fused["source"]["dropped"]) == ["tesseract/blocks"] and str(bad) in fused["source"]["dropped"]["tesseract/blocks"]
    assert any("page p2: source tesseract/blocks dropped" in r.getMessage() for r in caplog.records)
    # once the source page is repaired, the page is fused again with it
    good = run / "outputs/sources/tesseract/blocks/p1.json"
    bad.write_text(good.read_text().replace('"p1"', '"p2"'))
    seen = []
    run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "skipped"), ("p2", "ok")]


def test_a_source_page_nested_too_deep_is_dropped_like_any_page_that_is_not_json(tmp_path, caplog):
    """100,000 nested brackets (valid JSON) made the parser's RecursionError escape the reader:
    the whole page failed, with no file named, instead of that one source being dropped."""
    run = _write_run(tmp_path)
    bad = run / "outputs/sources/tesseract/blocks/p2.json"
    bad.write_text('{"page_id": "p2", "regions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    summary = run_fusion(run, ["p1", "p2"], CFG)
    assert summary["counts"] == {"ok": 2, "skipped": 0, "failed": 0}
    dropped = json.loads((run / "outputs/fusion/C/p2.json").read_text())["source"]["dropped"]
    assert dropped == {"tesseract/blocks": f"{bad}: JSON nested too deep to read (over ~1,000 levels)"}


def test_degenerate_source_boxes_are_dropped_on_read_and_the_rest_fuses_as_without_them(tmp_path, caplog):
    clean = _write_run(tmp_path / "clean")
    run_fusion(clean, ["p1", "p2"], CFG)
    run = _write_run(tmp_path / "dirty")
    src = run / "outputs/sources/paddle_layout/cdla/p1.json"
    page = json.loads(src.read_text())
    degenerate = [[50, 50, 50, 120],      # x0 == x1 inside the page
                  [60, 100, 150, 100],    # y0 == y1
                  [400, 10, 400, 290],    # lying on the right page edge (width 400): nothing to clip
                  [-30, 0, 0, 300]]       # off the page, degenerate once clipped: outside_page_box
    page["regions"] = [dict(page["regions"][0], bbox_xyxy=b) for b in degenerate] + page["regions"]
    src.write_text(json.dumps(page))
    run_fusion(run, ["p1", "p2"], CFG)
    assert "page p1" in caplog.text and "repaired boxes: degenerate_box 3, outside_page_box 1" in caplog.text
    assert read_page(src, "p1")["warnings"] == {"outside_page_box": 1, "degenerate_box": 3}
    for want in sorted((clean / "outputs/fusion").glob("[!_]*/p*.json")):
        got = run / "outputs/fusion" / want.relative_to(clean / "outputs/fusion")
        regions = read_page(got, got.stem)["regions"]
        assert all(r["bbox_xyxy"][0] < r["bbox_xyxy"][2] and r["bbox_xyxy"][1] < r["bbox_xyxy"][3]
                   for r in regions + [m for r in regions for m in r["members"]]), got
        assert regions == read_page(want, want.stem)["regions"], got
    for name in ("source_leaderboard.tsv", "per_page_source_metrics.tsv"):
        assert (run / "outputs/fusion" / name).read_text() == (clean / "outputs/fusion" / name).read_text(), name


_FUSE_CAPPED = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # fail fast instead of taking the machine
from newsbag.fusion.stage import run_fusion
summary = run_fusion(sys.argv[1], ["p1", "p2"], json.loads(sys.argv[2]))
print(json.dumps({"counts": summary["counts"], "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _fuse_capped(run) -> dict:
    """run_fusion on p1, p2 in a child process under a 3 GB address-space cap, with its peak RSS."""
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _FUSE_CAPPED, str(run), json.dumps(CFG)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_source_page_of_boxes_piled_on_one_another_is_dropped_in_bounded_memory(tmp_path):
    """30,000 boxes on one spot (3 MB, under the region and size limits) are 450 million
    overlapping pairs: `self_pairs` took > 6 GB, an OOM kill of the whole `newsbag fuse` call.
    That source is dropped on read naming the count; the page fuses from its other sources."""
    from newsbag.contract import MAX_OVERLAPPING_PAIRS

    clean = _write_run(tmp_path / "clean")
    run_fusion(clean, ["p1", "p2"], CFG)
    run = _write_run(tmp_path / "piled")
    bad = run / "outputs/sources/tesseract/blocks/p2.json"
    bad.write_text(json.dumps(_source_page("p2", "tesseract", "blocks", "tesseract",
                                           [([20, 20, 380, 280], "flowing_text", "text")] * 30_000)))
    got = _fuse_capped(run)
    assert got["counts"] == {"ok": 2, "skipped": 0, "failed": 0}
    assert got["max_rss_mb"] < 1000, got
    fused = json.loads((run / "outputs/fusion/C/p2.json").read_text())
    assert fused["source"]["sources"] == ["paddle_layout/cdla"]
    assert fused["source"]["dropped"] == {"tesseract/blocks": (
        f"{bad}: over {MAX_OVERLAPPING_PAIRS:,} pairs of overlapping boxes "
        f"(boxes piled on one another: a runaway detector, or not one page's layout)")}
    # the page beside it, and its source pages, are fused as in a clean run
    want = read_page(clean / "outputs/fusion/C/p1.json", "p1")["regions"]
    assert read_page(run / "outputs/fusion/C/p1.json", "p1")["regions"] == want


def _strips(pid, stage, variant, family, n, across):
    """A source page of `n` 1-pixel strips on an n x n page, side by side: no two overlap."""
    boxes = [[0, k, n, k + 1] if across else [k, 0, k + 1, n] for k in range(n)]
    page = _source_page(pid, stage, variant, family, [(b, "text", "text") for b in boxes])
    return {**page, "image": {**page["image"], "width": n, "height": n}}


def test_sources_whose_boxes_cross_in_too_many_pairs_fail_their_page_naming_the_count(tmp_path):
    """Two sources of 5,000 strips each, one across and one down the page: neither has a pair
    of its own, but together they cross in 25 million pairs, which fusion needed gigabytes
    for. That page fails with one line naming the count; the page beside it fuses."""
    from newsbag.contract import MAX_OVERLAPPING_PAIRS

    run = _write_run(tmp_path)
    for (stage, variant, family), across in ((("paddle_layout", "cdla", "paddle_layout"), True),
                                             (("tesseract", "blocks", "tesseract"), False)):
        path = run / "outputs/sources" / stage / variant / "p2.json"
        path.write_text(json.dumps(_strips("p2", stage, variant, family, 5_000, across)))
    got = _fuse_capped(run)
    assert got["counts"] == {"ok": 1, "skipped": 0, "failed": 1}
    assert got["max_rss_mb"] < 1000, got
    assert [(r["page_id"], r["error"]) for r in _ledger(run) if r.get("stage") == "fusion"] == [(
        "p2", f"page p2: ValueError: the sources' boxes overlap in over {MAX_OVERLAPPING_PAIRS:,} pairs, too many "
              "to fuse (boxes per source: paddle_layout/cdla 5,000, tesseract/blocks 5,000, text_lines/lines 28); "
              "remove or redo the source page that piles up boxes")]
    assert (run / "outputs/fusion/C/p1.json").is_file() and not (run / "outputs/fusion/C/p2.json").exists()


def _ledger(run):
    path = run / "logs/failures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_failed_page_counts_and_its_stale_outputs_never_pass_as_current(tmp_path):
    run = _write_run(tmp_path)
    run_fusion(run, ["p1", "p2"], CFG)
    assert (run / "outputs/fusion/C/p2.json").is_file()
    for src in (run / "outputs/sources").glob("*/*/p2.json"):
        src.write_text("{not json")
    summary = run_fusion(run, ["p1", "p2"], CFG)
    assert summary["counts"] == {"ok": 0, "skipped": 1, "failed": 1} and summary["failed"] == 1
    assert not (run / "outputs/fusion/C/p2.json").exists() and not (run / "outputs/fusion/_metrics/p2.json").exists()
    record = json.loads((run / "outputs/fusion/C/_failed/p2.json").read_text())
    assert "no readable source page" in record["error"]
    (row,) = _ledger(run)
    assert row["stage"] == "fusion" and row["page_id"] == "p2" and "no readable source page" in row["error"]
    assert summary["recommended_variant"] is not None and summary["n_pages"] == 1


def test_changing_one_variants_parameters_redoes_that_variant_only(tmp_path):
    run = _write_run(tmp_path)
    run_fusion(run, ["p1", "p2"], CFG)
    fused = run / "outputs/fusion"
    before = {p.relative_to(fused).as_posix(): p.stat().st_mtime_ns for p in fused.glob("*/p*.json")}
    changed = json.loads(json.dumps(CFG))
    changed["variants"]["C"]["params"]["vote"] = 1
    seen = []
    summary = run_fusion(run, ["p1", "p2"], changed, progress=lambda pid, st: seen.append(st))
    assert seen == ["ok", "ok"]
    after = {p.relative_to(fused).as_posix(): p.stat().st_mtime_ns for p in fused.glob("*/p*.json")}
    redone = sorted(k for k in after if after[k] != before.get(k))
    assert redone == ["C/p1.json", "C/p2.json", "_metrics/p1.json", "_metrics/p2.json"]
    assert summary["variants"]["C"]["params"]["vote"] == 1
    assert json.loads((fused / "C/p1.json").read_text())["source"]["params"]["vote"] == 1
    # the variant metrics kept for S1 and the new ones for C both reach the leaderboard
    assert {r["name"]: r["n_pages"] for r in summary["variant_leaderboard"]} == {"S1": 2, "C": 2}
    seen.clear()
    run_fusion(run, ["p1", "p2"], changed, progress=lambda pid, st: seen.append(st))
    assert seen == ["skipped", "skipped"]


def _write_manifest(run, pids):
    write_manifest(run, [{"page_id": p, "path": f"img/{p}.png", "image_path": f"/x/{p}.png", "width": 400,
                          "height": 300, "sha256": "0"} for p in pids])


def test_a_subset_call_still_aggregates_over_the_whole_manifest(tmp_path):
    run = _write_run(tmp_path, pids=("p1", "p2", "p3"))
    _write_manifest(run, ["p1", "p2", "p3"])
    run_fusion(run, ["p1", "p2", "p3"], CFG)
    full = (run / "outputs/fusion/variant_leaderboard.tsv").read_text()
    seen = []
    summary = run_fusion(run, ["p2"], CFG, force=True, progress=lambda pid, st: seen.append(pid))
    assert seen == ["p2"] and summary["pages"] == 3 and summary["n_pages"] == 3
    assert (run / "outputs/fusion/variant_leaderboard.tsv").read_text() == full
    assert {r["n_pages"] for r in summary["source_leaderboard"]} == {3}


def test_parallel_matches_serial(tmp_path):
    run = _write_run(tmp_path)
    run_fusion(run, ["p1", "p2"], CFG)
    serial = (run / "outputs/fusion/C/p1.json").read_text()
    run_fusion(run, ["p1", "p2"], CFG, force=True, workers=2)
    parallel = json.loads((run / "outputs/fusion/C/p1.json").read_text())
    s = json.loads(serial)
    assert parallel["regions"] == s["regions"]


def test_bad_config_raises_before_writing(tmp_path):
    run = _write_run(tmp_path)
    with pytest.raises(ValueError, match="unknown key"):
        run_fusion(run, ["p1"], {"variants": {}, "bogus": 1})
    assert not (run / "outputs/fusion").exists()


def test_region_dicts_round_like_python():
    from newsbag.contract import regions_from_boxes
    from nbtest import make_boxes

    xyxy = [[1.005, 2.675, 0.285, 1234.5678], [0.125, 0.135, -0.001, 7.0]]   # near-half cases
    b = make_boxes(xyxy, score=[0.12345, float("nan")])
    regions = regions_from_boxes(b)
    assert [r["bbox_xyxy"] for r in regions] == [[round(v, 2) for v in row] for row in xyxy]
    assert [r["score"] for r in regions] == [round(float(np.float32(0.12345)), 4), None]
    assert [r["label"] for r in regions] == ["text", "text"] and regions[0]["order"] is None


AUTO_CFG = {**CFG, "variants": {"R": {"sources": ["*"], "method": "consensus",
                                      "params": {"vote": 1, "prefer": "rank", "granularity": "auto"}}}}


def test_auto_granularity_follows_the_source_leaderboard_and_reruns_when_it_changes(tmp_path):
    pids = ["p1", "p2", "p3"]
    run = _write_run(tmp_path, pids)
    summary = run_fusion(run, pids, AUTO_CFG)
    ranked = [r["name"] for r in summary["source_leaderboard"] if r["name"] != "text_lines/lines"]
    assert summary["source_order"] == ranked == ["paddle_layout/cdla", "tesseract/blocks"]
    fused = json.loads((run / "outputs/fusion/R/p1.json").read_text())
    assert fused["source"]["params"]["granularity"] == ranked
    # the column boxes rank first: the page-wide tesseract block gives way to them
    assert sorted(r["bbox_xyxy"][0] for r in fused["regions"]) == [10, 210]

    seen = []
    run_fusion(run, pids, AUTO_CFG, progress=lambda pid, st: seen.append(st))
    assert seen == ["skipped"] * 3
    # on p1 and p2 the two sources swap their boxes: tesseract now ranks first, so p3 is
    # fused again too although its own sources did not change
    for pid in ("p1", "p2"):
        paths = [run / "outputs/sources" / name / f"{pid}.json" for name in ("paddle_layout/cdla", "tesseract/blocks")]
        pages = [json.loads(p.read_text()) for p in paths]
        pages[0]["regions"], pages[1]["regions"] = pages[1]["regions"], pages[0]["regions"]
        for path, page in zip(paths, pages):
            path.write_text(json.dumps(page))
            os.utime(path, (path.stat().st_mtime + 10,) * 2)
    seen = []
    again = run_fusion(run, pids, AUTO_CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert again["source_order"][0] == "tesseract/blocks" and sorted(seen) == [(p, "ok") for p in pids]


def test_members_are_stored_once_per_page_and_resolved_by_the_page_reader(tmp_path):
    run = _write_run(tmp_path)
    run_fusion(run, ["p1", "p2"], CFG)
    fusion = run / "outputs" / "fusion"
    from newsbag.contract import member_table_records

    stored = json.loads((fusion / "_members" / "p1.json").read_text())
    table = member_table_records(stored, range(len(stored["source"])))   # columns, strings as codes
    assert stored["sources"] == ["paddle_layout/cdla", "tesseract/blocks", "text_lines/lines"]
    sources = json.loads((run / "outputs/sources/paddle_layout/cdla/p1.json").read_text())
    assert {"source": "paddle_layout/cdla", "bbox_xyxy": sources["regions"][0]["bbox_xyxy"], "label": "text",
            "score": 0.8} in table                        # every source box once, as its member record
    for variant in ("C", "S1"):
        text = (fusion / variant / "p1.json").read_text()
        assert "\n " not in text and ", " not in text     # compact JSON: no indent, no spaces
        raw = json.loads(text)
        assert raw["source"]["members_file"] == "../_members/p1.json"
        assert all(isinstance(m, int) for r in raw["regions"] for m in r["members"])
        # support: indices into the table's sources, not the names again in every region
        assert all(isinstance(k, int) for r in raw["regions"] for k in r["support"])
        page = read_page(fusion / variant / "p1.json", "p1")  # what review, evaluate and export read
        assert [r["members"] for r in page["regions"]] == [[table[m] for m in r["members"]] for r in raw["regions"]]
        assert [r["support"] for r in page["regions"]] == [[stored["sources"][k] for k in r["support"]]
                                                           for r in raw["regions"]]
        assert any(len(r["support"]) > 1 for r in page["regions"]) == (variant == "C")   # S1: one source
    # a broken reference is a one-line contract error, not a crash in a reader
    (fusion / "_members" / "p1.json").write_text(json.dumps({**stored, "source": []}))
    with pytest.raises(ValueError, match="member table p1.json: IndexError"):
        read_page(fusion / "C" / "p1.json", "p1")



def test_a_fused_page_is_not_read_with_a_member_table_made_from_other_inputs(tmp_path, monkeypatch):
    """Fusion writes a page's member table, then its variant pages. Interrupted in between after a
    source changed, the old variant pages index the new table: read with it, every region would
    carry another region's members and support (in the gallery, ALTO and COCO) as if good."""
    from newsbag.fusion import stage

    run = _write_run(tmp_path, pids=("p1",))
    run_fusion(run, ["p1"], CFG)
    src = run / "outputs/sources/tesseract/blocks/p1.json"
    page = json.loads(src.read_text())
    page["regions"].insert(0, {**page["regions"][0], "bbox_xyxy": [20, 20, 60, 40]})
    src.write_text(json.dumps(page))
    real = stage.write_json

    def interrupted(path, obj, **kwargs):  # Ctrl-C (or a kill) right after the member table
        real(path, obj, **kwargs)
        if "_members" in Path(path).parts:
            raise KeyboardInterrupt

    monkeypatch.setattr(stage, "write_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_fusion(run, ["p1"], CFG)
    with pytest.raises(ValueError, match="member table p1.json: ValueError: made from other source pages than this page"):
        read_page(run / "outputs/fusion/C/p1.json", "p1")
    monkeypatch.setattr(stage, "write_json", real)
    run_fusion(run, ["p1"], CFG)  # the rerun redoes the page; it reads with its own table again
    fused = read_page(run / "outputs/fusion/C/p1.json", "p1")
    assert any(m["bbox_xyxy"] == [20, 20, 60, 40] for r in fused["regions"] for m in r["members"])


def test_leaderboard_streams_running_means():
    from newsbag.fusion.leaderboard import Board

    board = Board("sources", ("score", "loo_pixel_f1"))
    board.add({"a/x": {"score": 0.5, "loo_pixel_f1": None, "family": "a"}, "b/y": {"score": 0.9, "loo_pixel_f1": 0.2}},
              True)
    board.add({"a/x": {"score": 0.7, "loo_pixel_f1": 0.4, "family": "a"}}, True)
    board.add({"a/x": {"score": None, "loo_pixel_f1": 0.6, "family": "a"}}, False)   # a page without text lines
    rows = {r["name"]: r for r in board.rows()}
    assert rows["a/x"]["n_pages"] == 3 and rows["a/x"]["family"] == "a"
    assert rows["a/x"]["score"] == pytest.approx((0.5 + 0.7) / 2)
    assert rows["a/x"]["loo_pixel_f1"] == pytest.approx(0.5)     # a null is left out of the mean
    # b/y gave nothing on pages 2 and 3: an empty page scores 0 on page 2 and, without text
    # lines, null on page 3; it has no leave-one-out agreement there either
    assert rows["b/y"]["n_pages"] == 1 and rows["b/y"]["score"] == pytest.approx(0.9 / 2)
    assert rows["b/y"]["loo_pixel_f1"] == pytest.approx(0.2)
    assert [r["name"] for r in board.rows()] == ["a/x", "b/y"] and rows["a/x"]["rank"] == 1


def test_a_rerun_with_nothing_changed_opens_no_fused_page(tmp_path, monkeypatch):
    from newsbag import freshness

    run = _write_run(tmp_path)
    run_fusion(run, ["p1", "p2"], CFG)
    opened = []
    real = freshness.read_valid_page
    monkeypatch.setattr(freshness, "read_valid_page", lambda path, *a, **k: opened.append(str(path)) or real(path, *a, **k))
    seen = []
    run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append(st))
    assert seen == ["skipped", "skipped"] and not [p for p in opened if "/outputs/fusion/" in p]
    # a fused page rewritten behind fusion's back is opened again: still current if it says so, else redone
    page = run / "outputs/fusion/C/p1.json"
    os.utime(page, ns=(page.stat().st_mtime_ns + 10**9, page.stat().st_mtime_ns + 10**9))
    seen.clear()
    run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "skipped"), ("p2", "skipped")] and str(page) in opened
    page.write_text(page.read_text().replace('"fingerprint":"', '"fingerprint":"x'))
    seen.clear()
    run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "ok"), ("p2", "skipped")]
    assert json.loads(page.read_text())["source"]["fingerprint"][0] != "x"


def test_variants_that_compute_the_same_thing_are_fused_once_with_the_same_output(tmp_path, monkeypatch):
    """Consensus variants over the same sources whose params differ only in a max_page_share
    that no box reaches ("union" and "P4" on most pages) are one consensus run; one that a box
    reaches runs its own. Each variant's regions equal those of a run with that variant alone."""
    from newsbag.fusion import fuse, page

    run = _write_run(tmp_path, pids=("p1",))
    # The tesseract block covers 89 % of the 400 x 300 page: 0.95 leaves nothing out, 0.5 does.
    cfg = {**CFG, "variants": {"P": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}},
                               "U95": {"sources": ["*"], "method": "consensus",
                                       "params": {"vote": 1, "max_page_share": 0.95}},
                               "U50": {"sources": ["*"], "method": "consensus",
                                       "params": {"vote": 1, "max_page_share": 0.5}}}}
    calls = []
    real = fuse.VARIANTS["consensus"]
    monkeypatch.setitem(page.VARIANTS, "consensus", lambda *a, **k: calls.append(1) or real(*a, **k))
    run_fusion(run, ["p1"], cfg)
    assert len(calls) == 2           # P (= U95), U50
    regions = {}
    for name in cfg["variants"]:
        alone = _write_run(tmp_path / name, pids=("p1",))
        run_fusion(alone, ["p1"], {**cfg, "variants": {name: cfg["variants"][name]}})
        regions[name] = json.loads((run / f"outputs/fusion/{name}/p1.json").read_text())["regions"]
        assert regions[name] == json.loads((alone / f"outputs/fusion/{name}/p1.json").read_text())["regions"]
    assert regions["P"] == regions["U95"] != regions["U50"]


def test_the_garbage_collector_is_back_as_it_was_after_each_page(tmp_path):
    import gc

    run = _write_run(tmp_path)
    assert gc.isenabled()
    run_fusion(run, ["p1"], CFG)
    assert gc.isenabled()
    gc.disable()
    try:
        run_fusion(run, ["p2"], CFG)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_per_page_files_skip_the_fsync_and_a_rerun_redoes_the_pages_a_power_cut_tore(tmp_path, monkeypatch):
    """Fused pages, member tables and metrics records are written without an fsync (the
    run-level files keep theirs); each page's record holds their identities, so a page whose
    file lost its data (zero length, half written) is computed again and nothing else is."""
    from newsbag import rundir

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    small = _write_run(tmp_path / "small", pids=("p1", "p2"))
    run_fusion(small, ["p1", "p2"], CFG)
    per_run = len(synced)
    synced.clear()
    pids = ["p1", "p2", "p3", "p4"]
    run = _write_run(tmp_path / "big", pids=pids)
    run_fusion(run, pids, CFG)
    assert len(synced) == per_run   # independent of the number of pages

    fused = sorted((run / "outputs" / "fusion").glob("[CS]*/*.json"))
    before = {p: json.loads(p.read_text()) for p in fused}
    (run / "outputs/fusion/C/p1.json").write_bytes(b"")
    table = rundir.members_table_path(run, "p2")
    table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])
    record = rundir.metrics_path(run, "p3")
    record.write_bytes(record.read_bytes()[:100])
    seen = []
    run_fusion(run, pids, CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "ok"), ("p2", "ok"), ("p3", "ok"), ("p4", "skipped")]
    for p, page in before.items():
        assert json.loads(p.read_text())["regions"] == page["regions"], p
    assert json.loads(table.read_text())["page_id"] == "p2"


def test_the_pre_pass_scores_each_page_once_and_the_fusion_pass_reuses_its_record(tmp_path, monkeypatch):
    """The auto-order pre-pass stores each page's source metrics as a record with no variants;
    the fusion pass of a page reuses them instead of scoring its sources again, and a manifest
    page outside the call keeps the sources-only record for the next call that fuses it."""
    from newsbag.fusion import page, stage

    run = _write_run(tmp_path, ("p1", "p2", "p3"))
    _write_manifest(run, ["p1", "p2", "p3"])
    scored, records = [], []
    real_measure, real_write = page.measure_sources, stage.write_json

    def measure(pages, cfg, known=None):
        if known is None:
            scored.append(next(iter(pages.values())).meta.page_id)
        return real_measure(pages, cfg, known)

    def write(path, obj, **kw):
        if Path(path).parent.name == "_metrics":
            records.append((Path(path).stem, sorted(obj["variants"])))
        return real_write(path, obj, **kw)

    monkeypatch.setattr(stage, "measure_sources", measure)   # the pre-pass
    monkeypatch.setattr(page, "measure_sources", measure)    # the fusion pass (`fuse_all`)
    monkeypatch.setattr(stage, "write_json", write)
    assert run_fusion(run, ["p1", "p2"], AUTO_CFG)["counts"]["ok"] == 2      # p3: in the manifest only
    assert sorted(scored) == ["p1", "p2", "p3"]
    assert sorted(records) == [("p1", []), ("p1", ["R"]), ("p2", []), ("p2", ["R"]), ("p3", [])]
    scored.clear(), records.clear()
    assert run_fusion(run, ["p3"], AUTO_CFG)["counts"]["ok"] == 1
    assert scored == [] and records == [("p3", ["R"])]


def test_auto_order_with_worker_processes_gives_the_serial_output(tmp_path):
    pids = ["p1", "p2", "p3"]
    regions = {}
    for workers in (1, 2):
        run = _write_run(tmp_path / str(workers), pids)
        assert run_fusion(run, pids, AUTO_CFG, workers=workers)["counts"]["ok"] == 3
        regions[workers] = {pid: json.loads((run / f"outputs/fusion/R/{pid}.json").read_text())["regions"]
                            for pid in pids}
    assert regions[2] == regions[1]


def test_a_stored_record_holding_nan_or_infinity_is_redone_and_never_reaches_the_leaderboards(tmp_path):
    # fusion writes strict JSON; NaN/Infinity tokens mean another writer (or a hand) changed the record
    from newsbag import rundir

    run = _write_run(tmp_path)
    clean = run_fusion(run, ["p1", "p2"], CFG)
    path = rundir.metrics_path(run, "p1")
    text = path.read_text()
    path.write_text(text.replace('"score":', '"score":NaN,"_was":', 1).replace('"line_coverage":', '"line_coverage":Infinity,"_was":', 1))
    seen = []
    again = run_fusion(run, ["p1", "p2"], CFG, progress=lambda pid, st: seen.append((pid, st)))
    assert sorted(seen) == [("p1", "ok"), ("p2", "skipped")]
    for name in ("variant_leaderboard.tsv", "source_leaderboard.tsv", "per_page_variant_metrics.tsv",
                 "per_page_source_metrics.tsv"):
        cells = (run / "outputs/fusion" / name).read_text().lower().split()
        assert "nan" not in cells and "inf" not in cells, name
    assert again["variant_leaderboard"] == clean["variant_leaderboard"]
    assert again["source_leaderboard"] == clean["source_leaderboard"]


def test_a_source_with_output_on_few_pages_counts_empty_pages_and_ranks_below(tmp_path):
    """cdla's column boxes (a perfect page) on p1 only, tesseract's decent boxes (the lower rows
    of lines left out) on all three: averaged over its own page cdla ranked first; the run fused
    three pages, and on two of them cdla gave nothing. Its row still says where it ran."""
    pids = ["p1", "p2", "p3"]
    run = _write_run(tmp_path, pids)
    sources = run / "outputs" / "sources"
    for pid in pids:
        path = sources / "tesseract/blocks" / f"{pid}.json"
        page = json.loads(path.read_text())
        page["regions"] = [{**page["regions"][0], "bbox_xyxy": b} for b in ([10, 10, 190, 230], [210, 10, 390, 230])]
        path.write_text(json.dumps(page))
    for pid in ("p2", "p3"):
        (sources / "paddle_layout/cdla" / f"{pid}.json").unlink()
    summary = run_fusion(run, pids, AUTO_CFG)
    rows = {r["name"]: r for r in summary["source_leaderboard"]}
    cdla, tess = rows["paddle_layout/cdla"], rows["tesseract/blocks"]
    assert (cdla["n_pages"], tess["n_pages"]) == (1, 3)
    per_page = [line.split("\t") for line in (run / "outputs/fusion/per_page_source_metrics.tsv").read_text().splitlines()]
    score = per_page[0].index("score")
    own = {(r[0], r[1]): float(r[score]) for r in per_page[1:]}
    assert own[("p1", "paddle_layout/cdla")] > own[("p1", "tesseract/blocks")]   # cdla's one page is the best
    assert cdla["score"] == pytest.approx(own[("p1", "paddle_layout/cdla")] / 3)  # two empty pages score 0
    header, *lines = (run / "outputs/fusion/source_leaderboard.tsv").read_text().splitlines()
    table = [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]
    order = [r["name"] for r in table]
    assert order.index("tesseract/blocks") < order.index("paddle_layout/cdla")
    assert table[order.index("paddle_layout/cdla")]["n_pages"] == "1"
    # the same order feeds "granularity": "auto"
    assert summary["source_order"] == ["tesseract/blocks", "paddle_layout/cdla"]


def test_a_variant_fused_on_few_pages_counts_the_others_as_empty_pages(tmp_path):
    """A variant added to the config and fused on p1 only (a `--pages p1` call) has no current
    page on p2 and p3: like a source without output there, they count as empty pages, so it is
    not ranked (or recommended) by its one page."""
    pids = ["p1", "p2", "p3"]
    run = _write_run(tmp_path, pids)
    _write_manifest(run, pids)
    run_fusion(run, pids, CFG)
    added = {**CFG, "variants": {**CFG["variants"], "N": {"sources": ["paddle_layout/*"], "method": "best_single"}}}
    summary = run_fusion(run, ["p1"], added)
    rows = {r["name"]: r for r in summary["variant_leaderboard"]}
    assert (rows["N"]["n_pages"], rows["S1"]["n_pages"]) == (1, 3)
    # N fuses exactly what S1 does: S1's mean is N's score on its page
    assert rows["N"]["score"] == pytest.approx(rows["S1"]["score"] / 3) and rows["N"]["rank"] > rows["S1"]["rank"]


def test_a_page_where_no_variant_is_current_still_counts_as_an_empty_page_with_text_lines(tmp_path):
    """C's recipe changed and was fused on p1 only, and no other variant is current on p2 and p3:
    those pages still have text lines (the sources say so), so C scores 0 there, as its other
    means (n_regions) already count them, rather than being ranked by p1 alone."""
    pids = ["p1", "p2", "p3"]
    run = _write_run(tmp_path, pids)
    _write_manifest(run, pids)
    run_fusion(run, pids, CFG)
    changed = {**CFG, "variants": {"C": {**CFG["variants"]["C"], "params": {"vote": 1, "split_columns": True}}}}
    summary = run_fusion(run, ["p1"], changed)
    (c,) = summary["variant_leaderboard"]
    per_page = [line.split("\t") for line in (run / "outputs/fusion/per_page_variant_metrics.tsv").read_text().splitlines()]
    own = {(r[0], r[1]): dict(zip(per_page[0], r)) for r in per_page[1:]}
    assert c["n_pages"] == 1 and list(own) == [("p1", "C")]
    assert c["score"] == pytest.approx(float(own[("p1", "C")]["score"]) / 3)
    assert c["n_regions"] == pytest.approx(float(own[("p1", "C")]["n_regions"]) / 3)


def _tsv(path):
    header, *lines = path.read_text().splitlines()
    return header.split("\t"), [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]


@pytest.mark.parametrize("pinned, mark", [(None, "chosen"), ("S1", "pinned")])   # by the score / by the config
def test_leaderboards_lead_with_rank_name_recommended_score(tmp_path, pinned, mark):
    run = _write_run(tmp_path)
    summary = run_fusion(run, ["p1", "p2"], {**CFG, **({"recommended": pinned} if pinned else {})})
    header, rows = _tsv(run / "outputs/fusion/variant_leaderboard.tsv")
    assert header[:5] == ["rank", "name", "recommended", "score", "line_coverage"]
    assert [r["recommended"] for r in rows if r["recommended"]] == [mark]
    assert next(r["name"] for r in rows if r["recommended"]) == summary["recommended_variant"]
    assert [r["rank"] for r in rows] == [str(k) for k in range(1, len(rows) + 1)]
    header, rows = _tsv(run / "outputs/fusion/source_leaderboard.tsv")
    assert header[:4] == ["rank", "name", "recommended", "score"] and "degenerate_pages" in header
    # the best region source is marked; the text-line evidence is no candidate
    assert [r["name"] for r in rows if r["recommended"] == "yes"] == ["paddle_layout/cdla"]
    assert summary["best_source"] == "paddle_layout/cdla"
    # summary rows carry the mark too, in the table's column order
    assert list(summary["variant_leaderboard"][0])[:4] == ["rank", "name", "recommended", "score"]


def _write_degenerate_run(tmp_path, pids=("p1", "p2")):
    """cdla answers p1 with one page-sized figure; tesseract and text_lines/blocks find 24
    text regions on both pages; on p2 cdla finds them too."""
    run = tmp_path / "run"
    cells = [[10 + 48 * c, 10 + 45 * r, 50 + 48 * c, 50 + 45 * r] for c in range(8) for r in range(3)]
    lines = [[x0 + 2, y0 + 5, x1 - 2, y0 + 15] for x0, y0, x1, _ in cells]
    for pid in pids:
        cdla = ([([0, 0, 400, 300], "figure", "image")] if pid == "p1" else [(b, "text", "text") for b in cells])
        pages = {("paddle_layout", "cdla", "paddle_layout"): cdla,
                 ("tesseract", "blocks", "tesseract"): [(b, "flowing_text", "text") for b in cells],
                 ("text_lines", "blocks", "text_lines"): [(b, "text", "text") for b in cells],
                 ("text_lines", "lines", "text_lines"): [(b, "text_line", "text_line") for b in lines]}
        for (stage, variant, fam), regions in pages.items():
            path = run / "outputs" / "sources" / stage / variant / f"{pid}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_source_page(pid, stage, variant, fam, regions)))
    _write_manifest(run, list(pids))
    return run


def test_a_source_answering_one_page_sized_box_is_flagged_per_page_on_the_board_and_in_status(tmp_path, capsys):
    from newsbag.status import collect_status

    run = _write_degenerate_run(tmp_path)
    summary = run_fusion(run, ["p1", "p2"], CFG)
    reason = "one page-sized box (100% of the page) where the other sources find 24 text regions (median)"
    p1 = json.loads((run / "outputs/fusion/_metrics/p1.json").read_text())
    assert {s: m["degenerate"] for s, m in p1["sources"].items()} == {
        "paddle_layout/cdla": reason, "tesseract/blocks": "", "text_lines/blocks": "", "text_lines/lines": ""}
    p2 = json.loads((run / "outputs/fusion/_metrics/p2.json").read_text())
    assert not any(m["degenerate"] for m in p2["sources"].values())
    _, rows = _tsv(run / "outputs/fusion/source_leaderboard.tsv")
    assert {r["name"]: r["degenerate_pages"] for r in rows} == {
        "paddle_layout/cdla": "1", "tesseract/blocks": "0", "text_lines/blocks": "0", "text_lines/lines": "0"}
    assert summary["degenerate_sources"] == {"paddle_layout/cdla": {"pages": 1, "example": f"page p1: {reason}"}}
    status = {s["source"]: s for s in collect_status(run)["sources"]}
    assert (status["paddle_layout/cdla"]["degenerate"], status["paddle_layout/cdla"]["degenerate_example"]) == (
        1, f"page p1: {reason}")
    assert (status["tesseract/blocks"]["degenerate"], status["tesseract/blocks"]["degenerate_example"]) == (0, None)
    from nbtest import run_cli   # the real entry point: a CliRunner's log handler would outlive the test

    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    assert code == 0, err
    assert f"      degenerate on 1 page(s), e.g. page p1: {reason}" in out.splitlines()


def test_a_new_fusion_method_revision_redoes_exactly_its_variants_and_status_says_why(tmp_path, monkeypatch, capsys):
    """A finished run after an upgrade whose consensus code makes other boxes: status shows the
    consensus variant stale with the code revision as the reason, and `newsbag fuse` redoes its
    pages only (the best_single variant's files are left as they are)."""
    from newsbag import revisions

    run = _write_run(tmp_path)
    _write_manifest(run, ["p1", "p2"])
    (run / "config.resolved.json").write_text(json.dumps({"stages": [{"name": "fusion", "kind": "fusion", **CFG}]}))
    run_fusion(run, ["p1", "p2"], CFG)
    fused = run / "outputs/fusion"
    before = {p.relative_to(fused).as_posix(): p.stat().st_mtime_ns for p in fused.glob("[!_]*/p*.json")}
    now = revisions.REVISIONS["fusion/consensus"]
    monkeypatch.setitem(revisions.REVISIONS, "fusion/consensus", dataclasses.replace(now, number=now.number + 1))

    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert code == 0, err
    by_variant = {f["name"]: f for f in json.loads(out)["builtin"]["fusion"]}
    reason = f"made by fusion/consensus code revision {now.number}, now {now.number + 1}"
    assert by_variant["C"]["stale"] == 2 and by_variant["C"]["reasons"] == {reason: 2}
    assert by_variant["S1"]["done"] == 2 and by_variant["S1"]["reasons"] == {}
    assert f"stale: {reason} (2 pages)" in run_cli(capsys, "status", "--run-dir", run)[1]

    code, _, err = run_cli(capsys, "fuse", "--run-dir", run)
    assert code == 0, err
    after = {p.relative_to(fused).as_posix(): p.stat().st_mtime_ns for p in fused.glob("[!_]*/p*.json")}
    assert sorted(k for k in after if after[k] != before[k]) == ["C/p1.json", "C/p2.json"]
    again = json.loads(run_cli(capsys, "status", "--run-dir", run, "--json")[1])["builtin"]["fusion"]
    again = {f["name"]: f for f in again}
    assert again["C"]["done"] == 2 and again["C"]["stale"] == 0
