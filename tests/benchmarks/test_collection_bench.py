"""benchmarks/collection_bench.py's set-up on a tiny synthetic run: the boards it makes current
are ones `newsbag review` skips (it once called review's `_inputs` without the `recorded`
argument it had gained, and the benchmark died before its first row)."""

import json

import pytest

from nbtest import REPO
from newsbag.config import load_config
from newsbag.fusion.stage import run_fusion
from newsbag.manifest import read_pages
from newsbag.review.stage import run_review

CONFIG = REPO / "configs" / "pipeline.torch.json"


@pytest.fixture
def collection_bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import collection_bench
    return collection_bench


def test_current_boards_leaves_every_board_current_for_review(collection_bench, tmp_path):
    run = collection_bench.build_run(tmp_path, 3, 2, 20, old_layout=False)
    (tmp_path / "images").mkdir(exist_ok=True)
    collection_bench.current_sources(run, CONFIG)
    page_ids = [r.page_id for r in read_pages(run)]
    # in process, not through the CLI: its logging set-up would outlive this test
    assert run_fusion(run, page_ids, dict(load_config(CONFIG).stage("fusion").options))["failed"] == 0
    collection_bench.current_boards(run, CONFIG)
    options = next(s for s in json.loads(CONFIG.read_text())["stages"] if s.get("kind") == "review")
    result = run_review(run, page_ids, options)
    assert (result["pages"], result["skipped"], result["ok"], result["failed"]) == (3, 3, 0, 0)
