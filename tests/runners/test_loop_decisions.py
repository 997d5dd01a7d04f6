"""`_loop`'s decisions, apart from its I/O: the order pages run in, batching and the exit code."""

from __future__ import annotations

import pytest


def _pages(*ids: str) -> list[dict]:
    return [{"page_id": pid} for pid in ids]


def _units(units) -> list[tuple[list[str], bool]]:
    return [([p["page_id"] for p in u.pages], u.batch) for u in units]


@pytest.mark.parametrize("todo, isolate, batch_size, expected", [
    ((), set(), None, []),                                                          # nothing to do
    (("a", "b", "c"), set(), None, [(["a"], False), (["b"], False), (["c"], False)]),   # one by one, in order
    (("a", "b", "c"), set(), 2, [(["a", "b"], True), (["c"], True)]),               # batches; the last one short
    (("a", "b", "c"), {"b"}, None, [(["a"], False), (["c"], False), (["b"], False)]),   # isolated page last
    (("a", "b", "c", "d"), {"a"}, 2, [(["b", "c"], True), (["d"], True), (["a"], False)]),  # isolated: never in a batch
    (("a", "b"), {"a", "b"}, 2, [(["a"], False), (["b"], False)]),                 # all isolated: no batch
])
def test_work_units_run_batches_of_the_pages_together_then_each_isolated_page_alone(todo, isolate, batch_size,
                                                                                    expected):
    import _loop

    assert _units(_loop.work_units(_pages(*todo), isolate, batch_size)) == expected


class _Batching:
    def detect_batch(self, items):
        return []


class _Single:
    pass


@pytest.mark.parametrize("job, cls, shared, expected", [
    ({"batch_size": 4}, _Batching, None, 4),                        # the job's batch size
    ({"params": {"batch_size": 3}}, _Batching, None, 3),            # else the params'
    ({"batch_size": 2, "params": {"batch_size": 8}}, _Batching, None, 2),   # the job's first
    ({}, _Batching, None, None),                                    # none asked: one by one
    ({"batch_size": 1}, _Batching, None, None),                     # a batch of one is no batch
    ({"batch_size": 4}, _Single, None, None),                       # no detect_batch
    ({"batch_size": 4}, _Batching, object(), None),                 # a shared pass is read page by page
])
def test_batch_size_of(job, cls, shared, expected):
    import _loop

    assert _loop.batch_size_of(job, cls, shared) == expected


@pytest.mark.parametrize("refused, full, lost, failed, expected", [
    (None, False, False, 0, 0),                  # every page ok, empty or skipped
    (None, False, False, 2, 4),                  # some pages failed
    (None, False, True, 2, 8),                   # CUDA context lost: a fresh runner does the rest
    (None, True, False, 2, 7),                   # run dir cannot be written
    (3, False, False, 0, 3),                     # a late model load refused: its own code
    (5, False, False, 1, 5),                     # ... whatever failed before it
])
def test_exit_code(refused, full, lost, failed, expected):
    import _loop

    assert _loop.exit_code(refused, full, lost, failed) == expected
