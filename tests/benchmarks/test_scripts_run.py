"""Every speed benchmark, run as its README command is, at the smallest size: each prints its
rows against today's code. Three of them had died on a private signature or a new stage of the
package while nothing ran them (nzz_eval, collection_bench, bag_bench), and run_overhead_bench
on an even `--shards 2`; a benchmark is read only when someone needs its number."""

import json
import os
import re
import subprocess
import sys

import pytest

from nbtest import REPO, write_fake_config, write_image

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}   # this checkout's newsbag

ROW = r"[\d.]+"
SCRIPTS = [
    (["fuse_stage_bench.py", "--pages", "2"],
     [rf"pages +2 +boxes/page +1800 +newsbag fuse +{ROW} ms/page CPU .* fused JSON {ROW} KB/page "
      r"+rerun \(nothing changed\)"]),
    (["fusion_bench.py", "--sources", "3", "--boxes", "50", "--pages", "2"],
     [rf"3 sources x 50 boxes x 2 pages, best of \d+: {ROW} ms/page fusion \+ metrics"]),
    (["postproc_bench.py", "--sizes", "200", "--repeat", "1"],
     [rf"{name} +200 +{ROW} +{ROW}" for name in ("_db.group_lines", "_picodet.nms_per_class", "order.reading_order")]),
    (["run_overhead_bench.py", "--pages", "20", "--shards", "2"],
     [rf"pages +20 +{step} +{ROW} s CPU" for step in ("pages", "pages-again", "task-done", "task-todo", "run-done",
                                                        "status")]),
    (["collection_bench.py", "--pages", "3"],
     [rf"pages +3 +{step} +{ROW} s CPU" for step in ("export", "review", "status")]),
]


@pytest.mark.parametrize("command, rows", SCRIPTS, ids=[c[0] for c, _ in SCRIPTS])
def test_each_benchmark_prints_its_rows(command, rows):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / command[0]), *command[1:]], env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("# machine: "), done.stdout[:200]
    for row in rows:
        assert re.search(row, done.stdout), f"no row {row!r} in:\n{done.stdout}"


def test_run_overhead_bench_refuses_a_single_shard():
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run_overhead_bench.py"), "--shards", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--shards must be at least 2" in done.stderr


def test_nzz_eval_prints_both_halves_of_a_run_with_ground_truth(tmp_path):
    """The quality benchmark end to end (`nzz_eval.py RUN --gt DIR --no-tune`) on four tiny pages
    the fake runner laid out, with ground truth in the nzz format."""
    gt = tmp_path / "gt"
    (gt / "annotations").mkdir(parents=True)
    for k in range(4):
        write_image(gt / "images" / f"p{k}.png", size=(200, 150))
        regions = [{"bbox_xyxy": [10, 10, 90, 140], "label": "text"}, {"bbox_xyxy": [110, 10, 190, 140], "label": "text"}]
        (gt / "annotations" / f"p{k}.json").write_text(json.dumps(
            {"page_id": f"gt{k}", "image": f"images/p{k}.png", "width": 200, "height": 150, "regions": regions}))
    config = write_fake_config(tmp_path / "c.json", {"a": {}, "b": {}})
    subprocess.run([sys.executable, "-m", "newsbag", "run", "--input-dir", str(gt / "images"), "--run-dir",
                    str(tmp_path / "run"), "--config", str(config)], env=ENV, check=True, capture_output=True, timeout=120)
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "nzz_eval.py"), str(tmp_path / "run"), "--gt",
                           str(gt), "--no-tune"], env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.startswith("4 pages, fused in memory")
    for half in ("B", "A"):
        assert f"## held-out half {half} (2 pages)" in out
    assert re.search(rf"\| fake/a \| {ROW} \| {ROW} \| {ROW} \| {ROW} \|", out)
    assert re.search(rf"\| paragraphs \| {ROW} \| {ROW} \| {ROW} \| {ROW} \|", out)
    assert out.count("bars: pixel F1 >= ") == 2 and out.count("no-GT score vs GT IoU F1, Spearman") == 2
