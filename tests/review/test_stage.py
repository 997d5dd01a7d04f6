"""run_review on a synthetic run directory: boards, failures, ranking, resume and the gallery."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest
from PIL import Image

import review_kit
from review_kit import review_run, run_kit  # noqa: F401  (fixtures)

from newsbag.manifest import read_pages
from newsbag.review.options import parse_review_cfg
from newsbag.review.stage import board_status, run_review

from nbtest import manifest_line

CFG = {"name": "review", "kind": "review", "top_n": 20, "max_board_width": 2400, "variants": None}
IDS = ["p1", "p2", "p3"]


def test_an_unreadable_source_page_is_dropped_from_its_board_named_and_mending_it_redraws(run_kit, monkeypatch, caplog):
    """Fusion drops an unreadable source page (broken JSON, or refused for its boxes: piled up,
    too many) and fuses the page from the rest; review failed the whole board for it, so the
    page a user most needs to look at had none. The board is drawn from the readable sources,
    the dropped one named on its panel, in info.json (with the reader's reason: a piled-up
    page is not called broken JSON) and in one log line; mending the file redraws the board."""
    monkeypatch.setattr("newsbag.contract.MAX_OVERLAPPING_PAIRS", 10)
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": None, "fusion/v1": [a]},
                               "p2": {"a/x": [a], "b/y": [a] * 6, "fusion/v1": [a]}})
    with caplog.at_level("WARNING", logger="newsbag.review.stage"):
        result = run_review(run, ["p1", "p2"], CFG)
    assert (result["ok"], result["failed"]) == (2, 0)
    sources = run / "outputs" / "sources" / "b" / "y"
    piled = f"{sources / 'p2.json'}: over 10 pairs of overlapping boxes (boxes piled on one another: a runaway " \
            "detector, or not one page's layout)"
    for page_id in ("p1", "p2"):
        info = json.loads((run / "review" / "pages" / page_id / "info.json").read_text())
        reason = info["dropped_sources"]["b/y"]
        assert reason == piled if page_id == "p2" else reason.startswith(f"{sources / 'p1.json'}: ")
        assert list(info["dropped_sources"]) == ["b/y"]
        assert {"name": "b/y", "regions": 0, "failed": True} in info["panels"]
        assert info["priority"]["failed_sources"] == ["b/y"]
        page = json.loads(re.fullmatch(r"newsbagPage\((.*)\);\n", (run / "review" / "pages" / page_id / "data.js")
                                       .read_text(), re.S).group(1))
        assert [(layer["name"], layer["failed"]) for layer in page["layers"]] == [
            ("a/x", False), ("b/y", True), ("fusion/v1", False)]
    dropped_lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped_lines) == 2
    assert dropped_lines[0].startswith(f"review: page p1: source b/y dropped: {sources / 'p1.json'}: ")
    assert dropped_lines[1] == f"review: page p2: source b/y dropped: {piled}"

    caplog.clear()
    again = run_review(run, ["p1", "p2"], CFG)
    assert (again["ok"], again["skipped"]) == (0, 2)  # still current: drawn from what is readable
    assert not [r for r in caplog.records if "dropped" in r.getMessage()]  # logged once, when drawn

    (sources / "p1.json").write_text(json.dumps(run_kit.page_json("p1", "b", "y", [a])))  # mended
    mended = run_review(run, ["p1", "p2"], CFG)
    assert (mended["ok"], mended["skipped"]) == (1, 1)
    info = json.loads((run / "review" / "pages" / "p1" / "info.json").read_text())
    assert info["dropped_sources"] == {} and info["priority"]["failed_sources"] == []


def test_boards_failures_ranking_and_gallery(review_run):
    seen = []
    result = run_review(review_run, IDS, CFG, progress=lambda pid, status: seen.append((pid, status)))
    assert seen == [("p1", "ok"), ("p2", "ok"), ("p3", "failed")]
    assert (result["pages"], result["ok"], result["skipped"], result["failed"]) == (3, 2, 0, 1)

    (failure,) = result["failures"]
    broken = review_run / "outputs" / "fusion" / "v1" / "p3.json"
    assert failure["page_id"] == "p3"
    assert failure["error"].startswith(f"unreadable page {broken}: ")
    assert "\n" not in failure["error"]

    review = review_run / "review"
    for page_id in ("p1", "p2"):
        with Image.open(review / "top20_informative" / "pages" / f"{page_id}.png") as board:
            assert board.format == "PNG" and board.width <= CFG["max_board_width"]
        with Image.open(review / "pages" / page_id / "thumb.jpg") as thumb:
            assert thumb.format == "JPEG" and thumb.size == (120, 80)
        # A run dir may move: what a page's review records holds no absolute path (info.json had the image's).
        for name in ("info.json", "data.js"):
            assert str(review_run) not in (review / "pages" / page_id / name).read_text(), name
        info = json.loads((review / "pages" / page_id / "info.json").read_text())
        assert [p["name"] for p in info["panels"]] == ["a/x", "b/y", "fusion/v1"]
        assert info["reference_fused"] == "fusion/v1"
    assert not (review / "pages" / "p3" / "data.js").exists()

    # p2's sources disagree completely, p1's agree: p2 ranks first.
    assert result["top"] == ["p2", "p1"]
    top_dir = review / "top20_informative" / "pages"
    assert sorted(p.name for p in top_dir.iterdir()) == ["p1.png", "p2.png"]
    assert not any(p.is_symlink() for p in top_dir.iterdir())

    rows = [line.split("\t") for line in (review / "scores.tsv").read_text().splitlines()]
    assert rows[0][:4] == ["rank", "page_id", "status", "review_priority"]
    assert [r[:3] for r in rows[1:]] == [["1", "p2", "ok"], ["2", "p1", "ok"], ["", "p3", "failed"]]
    assert float(rows[1][3]) > float(rows[2][3])

    html = (review / "index.html").read_text()
    data = json.loads(re.search(r'<script id="gallery-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    rows = [dict(zip(data["fields"], r)) for r in data["rows"]]
    assert [(r["page_id"], r["rank"]) for r in rows] == [("p2", 1), ("p1", 2)]
    assert "sources disagree: 100% of blocks unmatched between sources" in rows[0]["reasons"]
    assert 'class="failed-page" data-page="p3"' in html
    assert "unreadable page" in html
    # The page view's data: scan JPEG and one layer per source and fused variant, boxes in page pixels.
    page = json.loads(re.fullmatch(r"newsbagPage\((.*)\);\n", (review / "pages" / "p2" / "data.js").read_text(), re.S).group(1))
    assert [(layer["name"], layer["kind"], layer["recommended"]) for layer in page["layers"]] == [
        ("a/x", "source", False), ("b/y", "source", False), ("fusion/v1", "fused", True)]
    assert page["layers"][1]["boxes"][0][:5] == [*review_kit.BOX_B_FAR, page["labels"].index("text")]
    with Image.open(review / "pages" / "p2" / page["scan"]) as scan:   # a black-and-white page: 1-bit PNG
        assert (scan.format, scan.mode, scan.size) == ("PNG", "1", (review_kit.W, review_kit.H))


def test_workers_draw_the_same_boards_and_ranking_as_one_process(review_run, tmp_path):
    serial = run_review(review_run, IDS, CFG, force=True)
    top = review_run / "review" / "top20_informative" / "pages"
    boards = {p: (top / f"{p}.png").read_bytes() for p in ("p1", "p2")}
    scores = (review_run / "review" / "scores.tsv").read_text()
    seen = []
    parallel = run_review(review_run, IDS, CFG, force=True, workers=2,
                          progress=lambda pid, status: seen.append((pid, status)))
    assert sorted(seen) == [("p1", "ok"), ("p2", "ok"), ("p3", "failed")]
    assert {k: parallel[k] for k in ("ok", "failed", "top", "failures")} == \
        {k: serial[k] for k in ("ok", "failed", "top", "failures")}
    assert (review_run / "review" / "scores.tsv").read_text() == scores
    assert all((top / f"{p}.png").read_bytes() == b for p, b in boards.items())


def test_resume_skips_fresh_boards_and_redraws_changed_inputs(review_run):
    run_review(review_run, IDS, CFG)
    board = review_run / "review" / "pages" / "p1" / "data.js"
    stamp = board.stat().st_mtime_ns

    again = run_review(review_run, IDS, CFG)
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 2, 1)
    assert board.stat().st_mtime_ns == stamp
    assert again["top"] == ["p2", "p1"]  # scores come back from info.json

    source = review_run / "outputs" / "sources" / "a" / "x" / "p1.json"
    os.utime(source, ns=(stamp + 10**9, stamp + 10**9))   # the same bytes: the same board
    assert run_review(review_run, IDS, CFG)["skipped"] == 2 and board.stat().st_mtime_ns == stamp
    page = json.loads(source.read_text())
    page["regions"][0]["bbox_xyxy"] = [1, 1, 9, 9]
    source.write_text(json.dumps(page))
    changed = run_review(review_run, IDS, CFG)
    assert (changed["ok"], changed["skipped"]) == (1, 1)
    assert board.stat().st_mtime_ns > stamp

    assert run_review(review_run, IDS, CFG, force=True)["ok"] == 2
    # Other options redraw too (the board would differ).
    assert run_review(review_run, IDS, {**CFG, "max_board_width": 1200})["ok"] == 2


def test_top_n_keeps_only_the_best_and_removes_stale_copies(review_run):
    run_review(review_run, IDS, {**CFG, "top_n": 1})
    top_dir = review_run / "review" / "top1_informative" / "pages"
    assert [p.name for p in top_dir.iterdir()] == ["p2.png"]
    (top_dir / "p1.png").write_bytes(b"stale")
    run_review(review_run, IDS, {**CFG, "top_n": 1})
    assert [p.name for p in top_dir.iterdir()] == ["p2.png"]
    with Image.open(top_dir / "p2.png") as board:
        assert board.width <= CFG["max_board_width"]
    assert not list((review_run / "review" / "pages").glob("*/board.*"))  # boards for the top pages only


def test_missing_image_fails_that_page_only(review_run):
    image = review_run / "images" / "p1.png"
    image.unlink()
    result = run_review(review_run, ["p1", "p2"], CFG)
    assert result["failures"] == [{"page_id": "p1", "error": result["failures"][0]["error"]}]
    assert result["failures"][0]["error"].startswith(f"unreadable image {image}: ")
    assert result["top"] == ["p2"]


def test_unknown_page_id_is_a_failure(review_run):
    result = run_review(review_run, ["p1", "zz"], CFG)
    assert [f["page_id"] for f in result["failures"]] == ["zz"]
    assert "not in " in result["failures"][0]["error"]


def test_failed_source_is_a_panel_and_a_reason(run_kit):
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": [a], "fusion/v1": [a]},
                               "p2": {"a/x": [a], "fusion/v1": [a]}})
    failed = run / "outputs" / "sources" / "b" / "y" / "_failed" / "p2.json"
    failed.parent.mkdir(parents=True)
    failed.write_text(json.dumps({"page_id": "p2", "error": "boom"}))
    result = run_review(run, ["p1", "p2"], CFG)
    assert result["failed"] == 0 and result["top"] == ["p2", "p1"]
    info = json.loads((run / "review" / "pages" / "p2" / "info.json").read_text())
    assert {"name": "b/y", "regions": 0, "failed": True} in info["panels"]
    assert info["priority"]["failed_sources"] == ["b/y"]
    assert info["priority"]["reasons"][0] == "1/2 sources failed (b/y)"


@pytest.mark.parametrize("summary, variants, expected_panels", [
    ({"recommended_variant": "v1"}, None, ["fusion/v1"]),     # recommended only
    ({}, None, ["fusion/v1", "fusion/v2"]),                    # no summary: every fused variant
    ({"other": 1}, None, ["fusion/v1", "fusion/v2"]),          # summary without the key
    ({"recommended_variant": "v1"}, ["v2"], ["fusion/v2"]),    # config picks
])
def test_which_fused_variants_are_shown(run_kit, summary, variants, expected_panels):
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "fusion/v1": [a], "fusion/v2": [a]}}, summary=summary)
    run_review(run, ["p1"], {**CFG, "variants": variants})
    info = json.loads((run / "review" / "pages" / "p1" / "info.json").read_text())
    assert [p["name"] for p in info["panels"] if p["name"].startswith("fusion/")] == expected_panels


@pytest.mark.parametrize("cfg, message", [
    ({"top_n": 5, "colour": "red"}, "review stage: unknown key 'colour' (known: max_board_width, top_n, variants)"),
    ({"top_n": 0}, "review stage: top_n must be a whole number >= 1, got 0"),
    ({"top_n": True}, "review stage: top_n must be a whole number >= 1, got True"),
    ({"max_board_width": 100}, "review stage: max_board_width must be a whole number >= 960 (px), got 100"),
    ({"variants": "v1"}, "review stage: variants must be a list of strings, or null, got 'v1'"),
])
def test_bad_review_config_is_one_line_value_error(cfg, message):
    with pytest.raises(ValueError) as info:
        parse_review_cfg(cfg)
    assert str(info.value) == message


def test_bad_config_is_rejected_before_writing(review_run):
    with pytest.raises(ValueError):
        run_review(review_run, IDS, {"top": 3})
    assert not (review_run / "review").exists()


def test_a_no_change_rerun_after_fusion_rewrote_its_summary_redraws_nothing(review_run):
    run_review(review_run, IDS, CFG)
    summary = review_run / "outputs" / "fusion" / "summary.json"
    summary.write_text(summary.read_text())  # what every `newsbag fuse` call does: same content, new mtime
    again = run_review(review_run, IDS, CFG)
    assert (again["ok"], again["skipped"]) == (0, 2)
    summary.write_text(json.dumps({"recommended_variant": None}))  # a different recommendation does redraw
    assert run_review(review_run, IDS, CFG)["ok"] == 2


def test_a_subset_call_keeps_the_whole_runs_gallery_scores_and_top_n(review_run):
    full = run_review(review_run, IDS, {**CFG, "top_n": 2})
    top_dir = review_run / "review" / "top2_informative" / "pages"
    scores = (review_run / "review" / "scores.tsv").read_text()
    part = run_review(review_run, ["p1"], {**CFG, "top_n": 2}, force=True)
    assert (part["ok"], part["skipped"], part["pages"]) == (1, 0, 3)
    assert part["top"] == full["top"] == ["p2", "p1"]
    assert sorted(p.name for p in top_dir.iterdir()) == ["p1.png", "p2.png"]
    ranked = lambda text: [line.split("\t")[:3] for line in text.splitlines() if "\tok\t" in line]  # noqa: E731
    assert ranked((review_run / "review" / "scores.tsv").read_text()) == ranked(scores)
    assert "\tp3\tfailed\t" in (review_run / "review" / "scores.tsv").read_text()  # failed earlier, still listed
    assert part["failures"] == []  # ... but not counted as a failure of this call


def test_an_error_nobody_foresaw_fails_that_page_only(review_run, monkeypatch):
    """The page boundary holds for any error on a page (a bug, an input nobody thought of): that
    page fails with one line naming it and its board goes; the others are drawn. A full disk is
    not the page's fault and stops the stage."""
    import newsbag.review.stage as stage
    from newsbag.errors import RunDirError

    assert run_review(review_run, IDS, CFG)["ok"] == 2  # p3: a broken fused page (the kit's)
    draw = stage._review_page

    def flaky(run_dir, record, *args):
        if record.page_id == "p2":
            raise RuntimeError("cannot draw this\nsecond line")
        return draw(run_dir, record, *args)

    monkeypatch.setattr(stage, "_review_page", flaky)
    result = run_review(review_run, IDS, CFG, force=True)
    assert result["failures"][0] == {"page_id": "p2", "error": "page p2: RuntimeError: cannot draw this"}
    assert [f["page_id"] for f in result["failures"]] == ["p2", "p3"]
    assert not (review_run / "review" / "pages" / "p2" / "data.js").exists()
    assert json.loads((review_run / "review" / "pages" / "p2" / "failed.json").read_text())["error"] == \
        "page p2: RuntimeError: cannot draw this"
    assert result["top"] == ["p1"]

    def full(*args):
        raise RunDirError("disk full")

    monkeypatch.setattr(stage, "_review_page", full)
    with pytest.raises(RunDirError):
        run_review(review_run, IDS, CFG, force=True)


def test_temp_files_of_dead_writers_are_removed_where_the_call_writes(review_run):
    """A SIGKILL between an atomic write's temp file and its rename leaves the temp forever;
    the next call that writes into that folder removes it when its writer is gone (same host,
    pid not alive; another host's only when a day old), and keeps a live writer's."""
    import socket
    import subprocess
    import sys
    import time

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that was a writer and has ended
    host = socket.gethostname()
    folder = review_run / "review" / "pages" / "p1"
    folder.mkdir(parents=True)
    names = {"dead": f".data.js.{host}-{gone.pid}-3.tmp", "live": f".info.json.{host}-{os.getpid()}-99999.tmp",
             "other_host_old": ".board.png.node-7.cluster-4242-0.tmp", "other_host_new": ".board.png.node-7.cluster-4243-0.tmp",
             "not_a_temp": ".notes.txt"}
    for name in names.values():
        (folder / name).write_text("half a file")
    day_old = time.time() - 2 * 86400
    os.utime(folder / names["other_host_old"], (day_old, day_old))
    assert run_review(review_run, IDS, CFG)["ok"] == 2
    left = {k for k, name in names.items() if (folder / name).exists()}
    assert left == {"live", "other_host_new", "not_a_temp"}


_REVIEW_CAPPED = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # fail fast instead of taking the machine
from newsbag.review.stage import run_review
result = run_review(sys.argv[1], ["p1", "p2"], json.loads(sys.argv[2]))
print(json.dumps({"counts": [result["ok"], result["failed"]], "failures": result["failures"],
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def test_sources_whose_boxes_cross_in_too_many_pairs_are_drawn_unscored_in_bounded_memory(run_kit):
    """Two sources of 5,000 strips each, one across and one down the page, each pass the reader
    (no pair of their own) but cross in 25 million pairs: scoring them (match_rate) took review
    to gigabytes. The bound fusion puts on its pool holds here too: the board is drawn, its
    pair scores are not measured, and the reason says why; the page beside it is scored."""
    import subprocess
    import sys

    from newsbag.contract import MAX_OVERLAPPING_PAIRS

    n, a = 5_000, run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": [a]}, "p2": {"a/x": [a], "b/y": [a], "fusion/v1": [a]}})
    for name, across in (("a/x", True), ("b/y", False)):
        stage, variant = name.split("/")
        page = run_kit.page_json("p1", stage, variant, [[0, k, n, k + 1] if across else [k, 0, k + 1, n]
                                                        for k in range(n)])
        page["image"].update(width=n, height=n)
        (run / "outputs" / "sources" / stage / variant / "p1.json").write_text(json.dumps(page))
    Image.new("L", (n, n), 250).save(run / "images" / "p1.png")
    manifest = run / "manifests" / "pages.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0].update(width=n, height=n)
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))

    done = subprocess.run([sys.executable, "-c", _REVIEW_CAPPED, str(run), json.dumps(CFG)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["counts"] == [2, 0], got
    assert got["max_rss_mb"] < 1000, got
    score = json.loads((run / "review" / "pages" / "p1" / "info.json").read_text())["priority"]
    assert (score["source_disagreement"], score["fused_disagreement"], score["line_coverage"]) == (None, None, None)
    assert score["reasons"] == ["fused v1 not made yet for this page (fusion pending): scored without it",
                                f"not scored: the sources' boxes overlap in over {MAX_OVERLAPPING_PAIRS:,} pairs, "
                                f"too many to compare (boxes per source: a/x {n:,}, b/y {n:,})"]
    assert f"not scored: the sources' boxes overlap in over {MAX_OVERLAPPING_PAIRS:,} pairs" in done.stderr
    assert json.loads((run / "review" / "pages" / "p2" / "info.json").read_text())["priority"]["source_disagreement"] == 0


def test_a_page_whose_fused_page_failed_or_is_not_made_yet_says_so_in_its_row_board_and_page_view(run_kit):
    """A run reviewed while fusion was partial (p2 not fused yet) or after fusion failed on a page
    (p3): the row read 'no threshold crossed; ranked by review priority', the board and page view had
    no fused panel and nothing said why, so the page passed as a quiet, good one. Its reasons, its
    board panel and its page-view layer now say so; fusing the page later redraws it."""
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": [a], "fusion/v1": [a]},
                               "p2": {"a/x": [a], "b/y": [a]}, "p3": {"a/x": [a], "b/y": [a]}})
    failed = run / "outputs" / "fusion" / "v1" / "_failed" / "p3.json"
    failed.parent.mkdir(parents=True)
    failed.write_text(json.dumps({"page_id": "p3", "error": "boom"}))
    result = run_review(run, IDS, CFG)
    assert (result["ok"], result["failed"]) == (3, 0)

    review = run / "review"
    expected = {"p1": (None, {"name": "fusion/v1", "regions": 1, "failed": False}, (False, False)),
                "p2": ("fused v1 not made yet for this page (fusion pending): scored without it",
                       {"name": "fusion/v1", "regions": 0, "failed": False, "pending": True}, (False, True)),
                "p3": ("fused v1 failed on this page: scored without it",
                       {"name": "fusion/v1", "regions": 0, "failed": True}, (True, False))}
    html = (review / "index.html").read_text()
    data = json.loads(re.search(r'<script id="gallery-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    rows = {r[0]: dict(zip(data["fields"], r)) for r in data["rows"]}
    for page_id, (reason, panel, (layer_failed, layer_pending)) in expected.items():
        info = json.loads((review / "pages" / page_id / "info.json").read_text())
        assert info["panels"][-1] == panel
        if reason is None:
            assert info["priority"]["reasons"] == ["no threshold crossed; ranked by review priority"]
        else:
            assert info["priority"]["reasons"] == [reason]
            assert rows[page_id]["reasons"] == reason
        page = json.loads(re.fullmatch(r"newsbagPage\((.*)\);\n", (review / "pages" / page_id / "data.js").read_text(),
                                       re.S).group(1))
        fused = page["layers"][-1]
        assert (fused["name"], fused["failed"], fused["pending"]) == ("fusion/v1", layer_failed, layer_pending)

    folder = run / "outputs" / "fusion" / "v1"
    (folder / "p2.json").write_text(json.dumps(run_kit.page_json("p2", "fusion", "v1", [a])))  # fusion catches up
    again = run_review(run, IDS, CFG)
    assert (again["ok"], again["skipped"]) == (1, 2)
    info = json.loads((review / "pages" / "p2" / "info.json").read_text())
    assert info["priority"]["reasons"] == ["no threshold crossed; ranked by review priority"]
    assert info["panels"][-1] == {"name": "fusion/v1", "regions": 1, "failed": False}


def test_the_gallery_counts_the_pages_it_leaves_out_because_their_board_is_out_of_date_or_not_drawn(review_run):
    """A call that draws some pages lists the others from their current boards; a page whose
    board is out of date (its fused page changed) or not drawn yet was left out of index.html
    without a word, so a sharded or partial review's gallery read as the whole run."""
    run_review(review_run, IDS, CFG)
    fused = review_run / "outputs" / "fusion" / "v1" / "p1.json"
    fused.write_text(json.dumps(review_kit.page_json("p1", "fusion", "v1", [[0, 0, 50, 50]])))  # p1's board is stale
    with (review_run / "manifests" / "pages.jsonl").open("a") as fh:  # a page added to the run, never reviewed
        fh.write(manifest_line({"page_id": "p4", "path": "images/p4.png", "width": review_kit.W, "height": review_kit.H,
                                "image_path": str(review_run / "images" / "p1.png"), "sha256": ""}))
    run_review(review_run, ["p2"], CFG)
    html = (review_run / "review" / "index.html").read_text()
    stats = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", re.search(r'<p class="stats">(.*?)</p>', html, re.S).group(1)))
    assert [part.strip() for part in stats.split(" · ")][:3] == ["1 reviewed pages", "1 failed",
                         "2 not in this gallery: not reviewed yet or out of date (rerun newsbag review)"]
    run_review(review_run, IDS + ["p4"], CFG)
    html = (review_run / "review" / "index.html").read_text()
    assert "not in this gallery" not in html


def test_the_recommended_variants_page_metrics_are_read_without_holding_the_whole_table(tmp_path):
    """per_page_variant_metrics.tsv has one row per page and variant (1.2 M rows, ~130 MB at 100k
    pages and the Torch config's 12 variants); review read it whole and split it into lines to keep
    one variant's rows: ~5x the memory it keeps (56 MB peak for 11.5 MB kept at 20k pages)."""
    import tracemalloc

    from newsbag.review.reading import per_page_metrics

    fusion = tmp_path / "outputs" / "fusion"
    fusion.mkdir(parents=True)
    n_pages, n_variants = 2_000, 12
    with (fusion / "per_page_variant_metrics.tsv").open("w") as fh:
        fh.write("page_id\tname\tn_regions\tline_coverage\tscore\n")
        for p in range(n_pages):
            fh.writelines(f"page{p:05d}-0123abcd\tv{v}\t{p % 50}\t0.{p % 10}\t{'' if p % 7 else 'nan'}\n"
                          for v in range(n_variants))
    tracemalloc.start()
    try:
        metrics = per_page_metrics(tmp_path, "v3")
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(metrics) == n_pages
    assert metrics["page00007-0123abcd"] == {"n_regions": 7.0, "line_coverage": 0.7, "score": None}
    assert metrics["page00008-0123abcd"] == {"n_regions": 8.0, "line_coverage": 0.8, "score": None}
    assert metrics["page00009-0123abcd"]["score"] is None and metrics["page00014-0123abcd"]["score"] is None
    assert peak < 1.5 * kept, (peak, kept)


def test_a_call_keeps_only_what_the_listing_needs_of_each_page_not_its_whole_info(review_run, monkeypatch):
    """The ranking, scores.tsv and gallery need a page's score and path; the call kept each
    page's whole info.json (panels, params, fingerprint, sizes: ~5.7 KB a page parsed, ~0.6 GB at
    100k pages) until the end. Here each current page's info.json carries ~3 MB more (once
    parsed): when the listing is built, none of it is held."""
    import tracemalloc

    from newsbag.review import stage

    run_review(review_run, IDS, CFG)
    bloat = ["x" * 100] * 20_000  # ~3 MB of strings once parsed, like a page with very many panels
    for page_id in ("p1", "p2"):
        info_path = review_run / "review" / "pages" / page_id / "info.json"
        info_path.write_text(json.dumps(json.loads(info_path.read_text()) | {"bloat": bloat}))
    held = []
    listing = stage._gallery_context
    monkeypatch.setattr(stage, "_gallery_context",
                        lambda *a, **kw: held.append(tracemalloc.get_traced_memory()[0]) or listing(*a, **kw))
    tracemalloc.start()
    try:
        again = run_review(review_run, IDS, CFG)
    finally:
        tracemalloc.stop()
    assert (again["ok"], again["skipped"], again["top"]) == (0, 2, ["p2", "p1"])
    one_page = 20_000 * (100 + 49 + 8)  # the strings and the list's pointers
    assert held[0] < one_page / 4, (held, one_page)


def test_a_grey_page_gets_a_jpeg_scan_and_board_a_black_and_white_one_a_1_bit_png(review_run):
    """Review kept a 1.5 MB board PNG and a 1600-px JPEG scan of every page (3 MB a page on the
    README's run). Now a black-and-white (binarised) page's scan is a 1-bit PNG and its board a
    palette PNG; a grey page (a photograph of the page) keeps JPEGs; only the top pages get a board."""
    import numpy as np

    grey = np.tile(np.linspace(60, 200, review_kit.W, dtype=np.uint8), (review_kit.H, 1))
    Image.fromarray(grey).save(review_run / "images" / "p2.png")
    pages = review_run / "review" / "pages"
    run_review(review_run, IDS, {**CFG, "top_n": 1})
    scans = {p: json.loads((pages / p / "info.json").read_text())["scan"] for p in ("p1", "p2")}
    assert scans == {"p1": "scan.png", "p2": "scan.jpg"}
    assert sorted(f.name for f in (pages / "p2").iterdir()) == ["data.js", "info.json", "scan.jpg", "thumb.jpg"]
    with Image.open(pages / "p1" / "scan.png") as scan:
        assert scan.mode == "1"
    assert [f.name for f in (review_run / "review" / "top1_informative" / "pages").iterdir()] == ["p2.jpg"]


def test_a_top_board_is_drawn_again_only_when_its_page_is_reviewed_again(review_run):
    """A top page's board is current by the page review it records, not by mtimes: one stamped an
    hour ahead (a node whose clock runs ahead) is still drawn again when its page changes."""
    run_review(review_run, IDS, CFG)
    board = review_run / "review" / "top20_informative" / "pages" / "p1.png"
    stamp = board.stat().st_mtime_ns
    run_review(review_run, IDS, CFG)
    assert board.stat().st_mtime_ns == stamp                  # nothing changed: not drawn again
    ahead = stamp + 3600 * 10**9
    os.utime(board, ns=(ahead, ahead))
    old = board.read_bytes()
    source = review_run / "outputs" / "sources" / "a" / "x" / "p1.json"
    page = json.loads(source.read_text())
    page["regions"][0]["bbox_xyxy"] = [1, 1, 9, 9]
    source.write_text(json.dumps(page))
    run_review(review_run, IDS, CFG)
    assert board.read_bytes() != old                          # its page changed: drawn again
    stamp = board.stat().st_mtime_ns
    run_review(review_run, ["p1"], CFG, force=True)
    assert board.stat().st_mtime_ns > stamp                   # --force draws it again

def test_a_scan_gone_keeps_its_current_board_with_one_warning(review_run, caplog):
    """A scan removed after its board was drawn (scratch purge, archiving): the board, its scan.jpg
    and data.js were deleted and the page failed, though nothing it was drawn from had changed."""
    manifest = review_run / "manifests" / "pages.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    manifest.write_text("".join(json.dumps({**r, "sha256": "ab" * 32}) + "\n" for r in rows))  # hashed when inspected
    run_review(review_run, IDS, CFG)
    page_dir = review_run / "review" / "pages" / "p1"
    drawn = {p.name: p.read_bytes() for p in page_dir.iterdir()}
    image = review_run / "images" / "p1.png"
    image.unlink()
    with caplog.at_level("WARNING", logger="newsbag.review.stage"):
        again = run_review(review_run, IDS, CFG)
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 2, 1)   # p3 fails for its broken fused page
    assert {p.name: p.read_bytes() for p in page_dir.iterdir()} == drawn
    assert [m for m in caplog.messages if "scan is gone" in m] == [
        f"review: 1 board(s) kept as drawn though their scan is gone (p1: {image}); put the scans back "
        "where the manifest says to redraw them"]
    assert board_status(review_run, read_pages(review_run), CFG)[0].done == 2


def test_a_new_review_revision_redraws_every_board_and_status_says_why(review_run, monkeypatch):
    """An upgrade whose drawing code makes other boards: status shows the boards stale with the
    code revision as the reason, and the next review redraws them (the fingerprint held no code)."""
    from newsbag import revisions

    run_review(review_run, IDS, CFG)
    data = review_run / "review" / "pages" / "p1" / "data.js"
    stamp = data.stat().st_mtime_ns
    now = revisions.REVISIONS["review"]
    monkeypatch.setitem(revisions.REVISIONS, "review", dataclasses.replace(now, number=now.number + 1))
    (boards,) = board_status(review_run, read_pages(review_run), CFG)
    assert (boards.done, boards.stale) == (0, 2)
    assert boards.reasons == {f"made by review code revision {now.number}, now {now.number + 1}": 2}
    again = run_review(review_run, IDS, CFG)
    assert (again["ok"], again["skipped"]) == (2, 0) and data.stat().st_mtime_ns > stamp
    assert json.loads((data.parent / "info.json").read_text())["revision"] == now.number + 1
    assert board_status(review_run, read_pages(review_run), CFG)[0].done == 2


@pytest.mark.parametrize("pinned_rank, says", [(2, True), (1, False)])
def test_the_leaderboard_says_why_a_pinned_recipe_ranks_below_another_by_the_score(run_kit, pinned_rank, says):
    other = 3 - pinned_rank
    rows = sorted([{"rank": pinned_rank, "name": "v1", "recommended": "pinned", "score": 0.5},
                   {"rank": other, "name": "v9", "recommended": "", "score": 0.9 if other == 1 else 0.1}],
                  key=lambda r: r["rank"])
    run = run_kit.build(summary={"recommended_variant": "v1", "variant_leaderboard": rows})
    run_review(run, list(run_kit.pages), {"top_n": 1})
    html = (run / "review" / "index.html").read_text()
    line = f"<b>v1</b> is pinned, yet ranks {pinned_rank} by the"
    assert (line in html) is says
    assert html.count("is pinned, yet ranks") == int(says)
