"""benchmarks/bag_bench.py's fresh run on two tiny pages with the fake runner: it runs against
today's pipeline (it once passed the opt-in transcription stage to its model pass, which then
died asking for a fused recommendation that did not exist yet)."""

import argparse

import pytest

from nbtest import REPO, write_fake_config, write_image

FUSION = {"name": "fusion", "kind": "fusion", "variants": {
    "S": {"sources": ["fake/*"], "method": "best_single"},
    "C": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}}}}
REVIEW = {"name": "review", "kind": "review", "top_n": 3}
TRANSCRIPTION = {"name": "transcription", "kind": "transcription", "default": False}   # as the shipped configs have it


@pytest.fixture
def bag_bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import bag_bench
    return bag_bench


def test_fresh_run_times_the_model_stages_then_fuses_reviews_and_reruns_doing_nothing(bag_bench, tmp_path, capsys):
    for name in ("p1.png", "p2.png"):
        write_image(tmp_path / "pages" / name, size=(40, 30))
    config = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[FUSION, REVIEW, TRANSCRIPTION])
    args = argparse.Namespace(input_dir=tmp_path / "pages", config=config, limit=None, workers=1,
                              keep=tmp_path / "run")
    bag_bench.fresh_run(args)
    out = capsys.readouterr().out
    assert "pages: 2" in out and "fake/v" in out
    assert "model pages run 0, fused 0, boards drawn 0" in out
