"""The freshness rules: source pages checked with the runners' reports as their index, fingerprints, input records."""

import json
import os

import pytest

from newsbag import freshness
from newsbag.page_reader import read_page, read_valid_page


def _write_page(folder, fingerprint):
    path = folder / "p.json"
    path.write_text(json.dumps({"page_id": "p", "image": {"path": "p.png", "width": 10, "height": 10},
                                "source": {"stage": "s", "variant": "v", "family": "f", "fingerprint": fingerprint},
                                "regions": []}))
    return freshness.file_identity(path)


@pytest.mark.parametrize("made_with, recorded, rewritten_with, current, opened", [
    ("now", "now", None, True, False),            # the report says what the file is: checked by a stat
    ("before", "before", None, False, False),     # recorded with another fingerprint: stale by a stat
    ("before", "before", "now", True, True),      # rewritten since (a runner that records nothing): opened
    ("now", "now", "before", False, True),        # replaced since by an older page: opened, stale
    ("now", None, None, True, True),              # no report entry (pages of older runs): opened
    ("before", None, None, False, True),
])
def test_current_source_pages_agrees_with_the_page_itself(tmp_path, monkeypatch, made_with, recorded,
                                                          rewritten_with, current, opened):
    reads = []
    monkeypatch.setattr(freshness, "read_valid_page", lambda path, *a, **k: reads.append(path) or read_valid_page(path, *a, **k))
    identity = _write_page(tmp_path, made_with)
    if recorded:
        pages = {"p": {"status": "ok", "fingerprint": recorded, "identity": identity}}
        (tmp_path / "run_report.json").write_text(json.dumps({"pages": pages}))
    if rewritten_with:
        _write_page(tmp_path, rewritten_with)
        os.utime(tmp_path / "p.json", ns=(identity[1] + 10**9, identity[1] + 10**9))
    assert freshness.current_source_pages(tmp_path, {"p": "now"}) == ({"p"} if current else set())
    assert bool(reads) == opened


@pytest.mark.parametrize("entry", [
    {"status": "ok", "identity": None},                          # no fingerprint recorded: opened
    {"status": "ok", "fingerprint": "now", "identity": "big"},   # not an identity: opened
    {"status": "ok", "fingerprint": 7, "identity": None},
    "ok",
])
def test_a_report_entry_that_is_no_record_of_the_file_is_not_trusted(tmp_path, entry):
    identity = _write_page(tmp_path, "before")
    if isinstance(entry, dict) and entry["identity"] is None:
        entry = {**entry, "identity": identity}
    (tmp_path / "run_report.json").write_text(json.dumps({"pages": {"p": entry}}))
    assert freshness.current_source_pages(tmp_path, {"p": "now"}) == set()


def test_of_two_shardings_reports_the_newest_write_counts(tmp_path):
    """A run sharded one way, then another: both reports name the page; the file is the newer write."""
    identity = _write_page(tmp_path, "now")
    older = [identity[0], identity[1] - 10**9]
    (tmp_path / "run_report.json").write_text(json.dumps(
        {"pages": {"p": {"status": "ok", "fingerprint": "now", "identity": identity}}}))
    (tmp_path / "run_report.shard-0-of-2.json").write_text(json.dumps(
        {"pages": {"p": {"status": "ok", "fingerprint": "before", "identity": older}}}))
    assert freshness.current_source_pages(tmp_path, {"p": "now"}) == {"p"}
    assert freshness.current_source_pages(tmp_path, {"p": "before"}) == set()


def test_a_page_its_own_report_does_not_account_for_is_looked_up_in_the_others(tmp_path, monkeypatch):
    """A shard task reads its own report first; a page redone since by a --pages call (recorded in
    run_report.json) is still checked by a stat, from that report, not opened."""
    reads = []
    monkeypatch.setattr(freshness, "read_valid_page", lambda path, *a, **k: reads.append(path) or read_valid_page(path, *a, **k))
    identity = _write_page(tmp_path, "now")
    (tmp_path / "run_report.shard-0-of-2.json").write_text(json.dumps(
        {"pages": {"p": {"status": "ok", "fingerprint": "before", "identity": [identity[0], identity[1] - 10**9]}}}))
    (tmp_path / "run_report.json").write_text(json.dumps(
        {"pages": {"p": {"status": "ok", "fingerprint": "now", "identity": identity}}}))
    assert freshness.current_source_pages(tmp_path, {"p": "now"}, first="run_report.shard-0-of-2.json") == {"p"}
    assert reads == []


@pytest.mark.parametrize("head, last", [
    ((), "0" * 64),                                                     # the tool version alone before it
    (("source", "fake", 2, {"b": 1, "a": [1.5, None]}, {"x": "y"}), "ab" * 32),  # keys sorted in every part
    (("fusion-variant-fp",), {"s/b": [10, 20], "s/a": [3, 4]}),         # a page's input identities
    (("x", os.sep), {"path": __import__("pathlib").Path("a/b")}),       # not JSON: default=str, as before
])
def test_a_fingerprint_encoded_once_per_head_equals_the_one_made_whole(head, last):
    """Status and the stages make one fingerprint per page from a shared head: the values must be
    the ones every output already records (sha256 of the sorted, compact JSON list), or a rerun
    after this change would redo every page."""
    import hashlib

    whole = hashlib.sha256(json.dumps([freshness.FINGERPRINT_SCHEME, *head, last], sort_keys=True, separators=(",", ":"),
                                      default=str).encode("utf-8")).hexdigest()[:16]
    assert freshness.fingerprint(*head, last) == whole
    assert freshness.Fingerprint(*head)(last) == whole
    assert freshness.fingerprint_all([freshness.Fingerprint(*head), freshness.Fingerprint("other")], last) == [
        whole, freshness.fingerprint("other", last)]


def test_checking_whether_a_page_is_current_neither_repairs_nor_logs_its_boxes(tmp_path, caplog):
    """A freshness check opens a page only for its fingerprint: `newsbag status` (or a rerun's
    skip check) over a run whose pages no run report accounts for logged one "repaired boxes"
    line per page and source it checked (e.g. 12,000 lines for 2,000 pages of 6 sources whose
    models draw boxes past the page edge), and paid the repair each time."""
    import logging

    page = {"page_id": "p", "image": {"path": "p.png", "width": 10, "height": 10},
            "source": {"stage": "s", "variant": "v", "family": "f", "fingerprint": "now"},
            "regions": [{"bbox_xyxy": [2, 2, 14, 8], "label": "text", "class": "text", "score": 0.9,
                         "order": None, "text": None}]}   # reaches past the right edge: read_page clips it
    (tmp_path / "p.json").write_text(json.dumps(page))
    assert read_page(tmp_path / "p.json", "p")["regions"][0]["bbox_xyxy"] == [2, 2, 10, 8]   # what readers get
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert freshness.page_is_current(tmp_path, "p", "now")
        assert not freshness.page_is_current(tmp_path, "p", "other")
        assert freshness.current_source_pages(tmp_path, {"p": "now"}) == {"p"}
    assert caplog.records == []


@pytest.mark.parametrize("change, known_as, hashed", [
    (None, "recorded", False),           # the stat recorded: known by it, not read
    ("touch", "recorded", True),         # the same bytes under a new mtime (a copy): read once, the same input
    ("rewrite", "now", True),            # other bytes of the same size: a new input
    ("grow", "now", False),              # another size: a new input, not read
])
def test_an_input_keeps_its_recorded_identity_while_its_bytes_do(tmp_path, monkeypatch, change, known_as, hashed):
    path = tmp_path / "p.json"
    path.write_text('{"regions": [1]}')
    made = freshness.file_identity(path)
    recorded = freshness.input_record({"p": str(path)}, {"p": made})
    stamp = made[1] + 10**9
    if change in ("rewrite", "grow"):
        path.write_text('{"regions": [2]}' if change == "rewrite" else '{"regions": [1, 2]}')
    if change:
        os.utime(path, ns=(stamp, stamp))
    reads = []
    real = freshness.file_digest
    monkeypatch.setattr(freshness, "file_digest", lambda p: reads.append(p) or real(p))
    identities = freshness.recorded_identities({"p": str(path), "gone": str(tmp_path / "gone.json")}, recorded)
    assert identities == {"p": made if known_as == "recorded" else freshness.file_identity(path)}
    assert bool(reads) == hashed
    # What the stage records now: the stat the file has, still known as before (no read when unchanged).
    reads.clear()
    again = freshness.input_record({"p": str(path)}, identities, recorded)
    assert again["p"][:2] == freshness.file_identity(path) and [again["p"][0], again["p"][3]] == identities["p"]
    assert bool(reads) == (change is not None)


@pytest.mark.parametrize("recorded", [None, {"p": "junk"}, {"p": [1, 2, 3]}, {"p": [1, 2, None, 4]}, "junk"])
def test_a_record_that_is_not_one_is_no_reason_to_trust_a_file(tmp_path, recorded):
    path = tmp_path / "p.json"
    path.write_text("{}")
    assert freshness.recorded_identities({"p": str(path)}, recorded) == {"p": freshness.file_identity(path)}


def test_an_input_replaced_after_it_was_identified_is_left_out_of_the_record(tmp_path):
    """Identified by one file, another there when the stage records: recording its digest under the
    identity it was known by would let that other content pass as the input the output was made from."""
    path = tmp_path / "p.json"
    path.write_text('{"regions": [1]}')
    identities = freshness.recorded_identities({"p": str(path)}, None)
    path.write_text('{"regions": [2]}')
    os.utime(path, ns=(identities["p"][1] + 10**9,) * 2)
    assert freshness.input_record({"p": str(path)}, identities) == {}


@pytest.mark.parametrize("size", [4, 64])   # a head shorter than the file, and one longer
def test_a_head_counts_only_while_its_file_ends_as_its_writer_ends_every_file(tmp_path, size):
    path = tmp_path / "f.xml"
    whole = b"<r>fingerprint" + b"x" * 40 + b"</r>\n"
    path.write_bytes(whole)
    assert freshness.head_of_whole(path, size, b"</r>\n") == whole[:size]
    path.write_bytes(whole[: len(whole) // 2])
    assert freshness.head_of_whole(path, size, b"</r>\n") is None
    assert freshness.head_of_whole(tmp_path / "gone.xml", size, b"</r>\n") is None


def test_sizes_hold_while_each_file_keeps_the_size_it_was_written_with(tmp_path):
    (tmp_path / "a").write_bytes(b"1234")
    (tmp_path / "b").write_bytes(b"12")
    sizes = freshness.file_sizes(tmp_path, ["a", "b", "missing"])
    assert sizes == {"a": 4, "b": 2}
    os.utime(tmp_path / "a", ns=(1, 1))   # a copy without its mtimes is whole
    assert freshness.sizes_hold(tmp_path, sizes)
    (tmp_path / "b").write_bytes(b"1")
    assert not freshness.sizes_hold(tmp_path, sizes)
    (tmp_path / "b").unlink()
    assert not freshness.sizes_hold(tmp_path, sizes) and not freshness.sizes_hold(tmp_path, None)
