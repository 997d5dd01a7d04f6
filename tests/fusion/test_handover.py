"""The pre-pass's hand-over only saves work: whatever cannot be handed over or read back
makes the fusion pass read the page again, never use something else."""

import numpy as np

from newsbag.contract import Boxes, PageMeta
from newsbag.fusion import handover
from newsbag.fusion.geometry import self_pairs


def _entry():
    xyxy = np.array([[0, 0, 10, 10], [5, 5, 15, 15], [20, 0, 30, 10.0]])
    boxes = Boxes(xyxy, np.array([0.9, 0.8, 0.7], np.float32), np.zeros(3, np.int8),
                  PageMeta("p", 40, 20, "a/b", "p.png"), {"source": np.full(3, "a/b", object)})
    return handover.Entry({"a/b": boxes}, {"width": 40, "height": 20}, {}, self_pairs(xyxy),
                          {"a/b": {"score": 0.5, "family": "a"}})


def _same(a, b) -> bool:
    (pa, ia, da, pairs_a, ma), (pb, ib, db, pairs_b, mb) = a, b
    return (ia == ib and da == db and ma == mb and list(pa) == list(pb) and np.array_equal(pa["a/b"].xyxy, pb["a/b"].xyxy)
            and np.array_equal(pairs_a.i, pairs_b.i) and np.array_equal(pairs_a.inter, pairs_b.inter)
            and list(pb["a/b"].data["source"]) == ["a/b"] * 3)


def test_a_spilled_page_comes_back_once_and_only_for_the_same_inputs(tmp_path):
    key = handover.key("p", {"a/b": [1, 2]})
    handover.put(key, _entry(), tmp_path, keep=False)
    assert len(list(tmp_path.iterdir())) == 1
    assert _same(handover.take(key, tmp_path), _entry())
    assert handover.take(key, tmp_path) is None and not list(tmp_path.iterdir())
    handover.put(key, _entry(), tmp_path, keep=False)
    assert handover.take(handover.key("p", {"a/b": [1, 3]}), tmp_path) is None   # its input changed since
    assert not list(tmp_path.iterdir())


def test_a_torn_spill_file_is_read_again_not_trusted(tmp_path):
    key = handover.key("p", {"a/b": [1, 2]})
    handover.put(key, _entry(), tmp_path, keep=False)
    (spilled,) = tmp_path.iterdir()
    spilled.write_bytes(spilled.read_bytes()[:100])
    assert handover.take(key, tmp_path) is None and not spilled.exists()


def test_nothing_is_spilled_onto_a_nearly_full_disk(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(100e9, 91e9, 9e9))   # 9 % free
    key = handover.key("p", {"a/b": [1, 2]})
    handover.put(key, _entry(), tmp_path, keep=False)
    assert not list(tmp_path.iterdir()) and handover.take(key, tmp_path) is None
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(100e9, 80e9, 20e9))
    handover.put(key, _entry(), tmp_path, keep=False)
    assert _same(handover.take(key, tmp_path), _entry())


def test_an_unwritable_spill_folder_hands_nothing_over(tmp_path):
    key = handover.key("p", {"a/b": [1, 2]})
    handover.put(key, _entry(), tmp_path / "gone", keep=False)
    assert handover.take(key, tmp_path / "gone") is None


def test_the_folder_is_private_in_the_run_directory_and_emptied_with_the_call(tmp_path):
    with handover.folder(tmp_path) as spill:
        assert spill.parent == tmp_path / "cache" / "scratch" and spill.stat().st_mode & 0o077 == 0
        handover.put(handover.key("p", {}), _entry(), spill, keep=False)
        handover.put(handover.key("q", {}), _entry(), spill, keep=True)
        assert handover.RECENT.items and len(list(spill.glob("*.pkl"))) == 1
    assert not spill.exists() and not handover.RECENT.items


def test_what_the_memory_pushes_out_is_spilled_not_lost(tmp_path, monkeypatch):
    """Large pages fill the memory budget before its 64 pages (6 x 1,500 boxes: ~12 fit)."""
    monkeypatch.setattr(handover.RECENT, "budget", 1.5 * handover._entry_bytes(_entry()))
    keys = [handover.key(p, {}) for p in "abc"]
    for k in keys:
        handover.put(k, _entry(), tmp_path, keep=True)
    assert list(handover.RECENT.items) == keys[2:] and len(list(tmp_path.glob("*.pkl"))) == 2
    assert all(_same(handover.take(k, tmp_path), _entry()) for k in keys)
    assert not handover.RECENT.items and not list(tmp_path.iterdir())
