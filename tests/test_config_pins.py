"""What a config resolves to is part of every run made with it: the record
(config.resolved.json) that later calls reload and check outputs by, and the source page
fingerprints that decide what is current. Declaring the config's keys in another way must
change neither, or every finished run would look stale (or another config's outputs current).

The digests below were computed with the hand-written config checks this project had before
its keys were declared as options (`python tests/test_config_pins.py` prints them), so a run
made then stays current now. A shipped config changed on purpose gets its new record digest
here (the embedded one's when its transcription stage became a cascade); its source
fingerprints must stay.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from newsbag import rundir
from newsbag.config import ModelStage, load_config, parse_config, to_jsonable
from newsbag.resources import default_config_path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"embedded": default_config_path(), **{p.name: p for p in sorted((ROOT / "configs").glob("*.json"))}}
IMAGE = "0" * 64   # a page's image hash: the part of a source fingerprint that is the page's own

# Runner parameters given in the forms the config may hold them: a whole number for a "number"
# parameter, a list, a string, a boolean; the fingerprint holds them as written.
WRITTEN_AS = {"runners_dir": str(ROOT / "runners"), "stages": [
    {"name": "lines", "family": "text_lines", "variants": {"int": {"bin_threshold": 1, "max_side": 1024},
                                                           "float": {"bin_threshold": 0.25, "group": True}}},
    {"name": "paddle", "family": "paddle_layout", "variants": {"list": {"mean": [1, 2.5, 3], "labels": ["a"],
                                                                       "threshold": 0}}},
    {"name": "rec", "family": "recognize", "variants": {"tail": {"max_ratio": 60, "script": "any"}}},
]}

RECORD_SHA256 = {
    "embedded": "beed2eccba0f1dc97aefb550309ef9886bcd4d84fe6b28e37d3f699096bf1ae4",
    "pipeline.local.json": "beed2eccba0f1dc97aefb550309ef9886bcd4d84fe6b28e37d3f699096bf1ae4",
    "pipeline.torch.json": "1157b94521f64b75ea07c83c2a2d36b50e26449b15aba7544a89424561e5848d",
    "slurm-try.json": "49ea52514ba70c6503f78d93210a68cd8fdc7475ebf39d1d4d6d7395592965a4",
}
FINGERPRINTS_SHA256 = {
    "embedded": "d6c47b89af3cc4b595521341c6275b9b67c0d8e62b8618e6e526f66f5c06815b",
    "pipeline.local.json": "d6c47b89af3cc4b595521341c6275b9b67c0d8e62b8618e6e526f66f5c06815b",
    "pipeline.torch.json": "b90b3145cbdbe43ba35019de1992b6201d793850eb3235e51c3252ab3b456a85",
    "slurm-try.json": "5c87c4ea04cb2aab601838e68e91d61e783e79d53e26dd116c0f6c254127d558",
    "written-as": "aff3f20f804fdb2c6e022700b914d735164e5926c4cebd664d665f7ad24ba00f",
}


def _fixed_environment(monkeypatch) -> None:
    """The variables the shipped configs expand, set as on no particular machine."""
    monkeypatch.setenv("USER", "nb")
    monkeypatch.delenv("BASE", raising=False)


def _record_sha256(config, run_dir: Path) -> str:
    """The digest of config.resolved.json as `newsbag run` writes it for `config`."""
    (run_dir / "manifests").mkdir(parents=True)
    rundir.update_config_record(run_dir, lambda _: to_jsonable(config.resolved))
    return hashlib.sha256(rundir.config_record(run_dir).read_bytes()).hexdigest()


def _fingerprints_sha256(config) -> str:
    """One digest of every model stage's page fingerprint of `IMAGE`, by stage and variant."""
    table = {f"{s.name}/{v}": s.page_fingerprint(v, IMAGE)
             for s in config.stages if isinstance(s, ModelStage) for v in s.variants}
    return hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()


def _configs():
    yield from ((name, load_config(path)) for name, path in CONFIGS.items())
    yield "written-as", parse_config(json.loads(json.dumps(WRITTEN_AS)), "written-as.json")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_resolved_record_of_a_shipped_config_is_unchanged(name, tmp_path, monkeypatch):
    _fixed_environment(monkeypatch)
    assert _record_sha256(load_config(CONFIGS[name]), tmp_path / "run") == RECORD_SHA256[name]


@pytest.mark.parametrize("name", [*sorted(CONFIGS), "written-as"])
def test_source_page_fingerprints_are_unchanged(name, monkeypatch):
    """A source page made before stays current: the same fingerprint for the same page."""
    _fixed_environment(monkeypatch)
    config = dict(_configs())[name]
    assert _fingerprints_sha256(config) == FINGERPRINTS_SHA256[name]


if __name__ == "__main__":   # print the digests of the code as it is, to pin them above
    import os
    import tempfile

    os.environ["USER"] = "nb"
    os.environ.pop("BASE", None)
    for name, config in _configs():
        if name in CONFIGS:
            with tempfile.TemporaryDirectory() as tmp:
                print("record", name, _record_sha256(config, Path(tmp) / "run"))
        print("fingerprints", name, _fingerprints_sha256(config))
    sys.exit(0)
