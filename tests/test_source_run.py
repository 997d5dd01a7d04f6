"""`source_run`'s decisions, apart from the orchestrator's I/O: which pages a call runs, what follows
each runner launch (blame, isolate, restart, stop, abort), the state it leaves, and the failure budget."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from newsbag.errors import EnvError, GpuPreflightError, RunDirError, RunnerError
from newsbag.source_run import (Abort, Blame, Continue, Ended, Isolate, Limits, OverBudget, SourceState, Stop, advance,
                                budget_error, describe_exit, plan_page, settle, setup_error)

LIMITS = Limits(page_timeout_s=2, timeout_s=60, max_restarts=2, max_failed_fraction=0.5)
STARTED = SourceState(todo=4, started=True)
NEW = SourceState(todo=4)
CRASH = f"runner {describe_exit(-signal.SIGSEGV)} while processing this page"
STALL = "no progress for 2s on this page; runner killed"


@pytest.mark.parametrize("before, retry_failed, expected", [
    (None, False, "fresh"),                                                          # never failed
    ({"error_class": "NotRun", "fingerprint": "f"}, False, "fresh"),                 # never tried: new
    ({"error_class": "ValueError", "fingerprint": "f"}, False, "retry"),             # its own error: after the fresh
    ({"error_class": "RunnerCrash", "fingerprint": "f"}, False, "hold"),             # crashed the runner: held
    ({"error_class": "Timeout", "fingerprint": "f"}, False, "hold"),                 # hung the runner: held
    ({"error_class": "RunnerCrash", "fingerprint": "f"}, True, "retry"),             # ... unless retried on purpose
    ({"error_class": "RunnerCrash", "fingerprint": "old"}, False, "retry"),          # new inputs: it may not crash
])
def test_plan_page(before, retry_failed, expected):
    assert plan_page(before, "f", retry_failed=retry_failed) == expected


@pytest.mark.parametrize("ended, state, expected", [
    # newsbag stopped the runner for the budget: the check before the next launch fails the rest
    (Ended("aborted", -15, in_flight=("a",), remaining=3), STARTED, OverBudget()),
    # stage timeout: the page in flight and the rest are not run, apart
    (Ended("job_timeout", -15, in_flight=("a",), remaining=3), STARTED,
     Stop("not run: stage timeout 60s reached", "NotRun",
          "stage timeout 60s reached while processing this page; runner killed")),
    # died on one page: that page is the culprit
    (Ended("exit", -signal.SIGSEGV, in_flight=("a",), remaining=3), STARTED, Blame(("a",), CRASH, "RunnerCrash")),
    # stalled on one page
    (Ended("page_timeout", -15, in_flight=("a",), remaining=3), STARTED, Blame(("a",), STALL, "Timeout")),
    # a page is blamed even before the source is known to have started: it was in flight
    (Ended("exit", -signal.SIGSEGV, set_up=True, in_flight=("a",), remaining=3), NEW, Blame(("a",), CRASH, "RunnerCrash")),
    # died during a batch: its pages run again one by one
    (Ended("exit", 137, in_flight=("a", "b"), remaining=3), STARTED, Isolate(("a", "b"), "exited 137 (out of memory?)")),
    (Ended("page_timeout", -15, in_flight=("a", "b"), remaining=3), STARTED, Isolate(("a", "b"), "stalled")),
    # some of the batch not run alone yet: isolate
    (Ended("exit", 137, in_flight=("a", "b"), remaining=3), SourceState(4, started=True, isolate=frozenset({"a"})),
     Isolate(("a", "b"), "exited 137 (out of memory?)")),
    # each page in flight already ran alone: blame them all
    (Ended("exit", -signal.SIGSEGV, in_flight=("a", "b"), remaining=3),
     SourceState(4, started=True, isolate=frozenset({"a", "b"})), Blame(("a", "b"), CRASH, "RunnerCrash")),
    # exited 0 yet left pages it was given: they have no output
    (Ended("exit", 0, reported=("ok",), remaining=2), STARTED,
     Stop("runner exited 0 without writing output for this page", "MissingOutput")),
    # died before its model was set up: the source never started
    (Ended("exit", 1, set_up=False, remaining=4), NEW, Abort("runner exited 1 before processing any page")),
    (Ended("page_timeout", -15, set_up=False, remaining=4), NEW,
     Abort("runner made no progress for 2s before processing any page")),
    # set up, then died before any page: restarted up to max_restarts times
    (Ended("exit", 1, remaining=4), NEW, Continue()),
    (Ended("exit", 1, remaining=4), SourceState(4, fruitless=2),
     Abort("runner exited 1 before processing any page (after loading its model)")),
    # started, then launches in a row that settle no page: stop after max_restarts
    (Ended("exit", 1, remaining=2), SourceState(4, started=True, fruitless=1), Continue()),
    (Ended("exit", 1, remaining=2), SourceState(4, started=True, fruitless=2),
     Stop("not run: runner exited 1 3 times in a row before finishing a page", "NotRun")),
    (Ended("page_timeout", -15, remaining=2), SourceState(4, started=True, fruitless=2),
     Stop("not run: newsbag stopped the runner after no progress for 2s on a page (page_timeout_s) "
          "3 times in a row before finishing a page", "NotRun")),
    # ... nothing left to stop: done
    (Ended("exit", 1, remaining=0), SourceState(4, started=True, fruitless=2), Continue()),
    # a page settled, even failed, is progress
    (Ended("exit", 1, reported=("failed",), remaining=2), SourceState(4, started=True, fruitless=2), Continue()),
    # ... but a lost CUDA context failing every page it tries is none
    (Ended("exit", 8, reported=("failed",), remaining=2), SourceState(4, started=True, fruitless=2),
     Stop("not run: runner exited 8 (its CUDA context was lost) 3 times in a row before finishing a page", "NotRun")),
    (Ended("exit", 8, reported=("failed", "ok"), remaining=2), SourceState(4, started=True, fruitless=2), Continue()),
])
def test_settle(ended, state, expected):
    assert settle(ended, state, LIMITS) == expected


@pytest.mark.parametrize("ended, state, expected", [
    # the budget or the stage timeout ends the call: the state stays
    (Ended("aborted", -15, reported=("ok",), in_flight=("a",)), NEW, NEW),
    (Ended("job_timeout", -15, reported=("ok",), in_flight=("a",)), NEW, NEW),
    # a page in flight: started, no longer fruitless
    (Ended("exit", -11, in_flight=("a",)), SourceState(4, fruitless=2), SourceState(4, started=True)),
    # a batch in flight: its pages run alone from now on
    (Ended("exit", 137, in_flight=("a", "b")), SourceState(4, isolate=frozenset({"c"})),
     SourceState(4, started=True, isolate=frozenset({"a", "b", "c"}))),
    # pages run alone already: none added
    (Ended("exit", 137, in_flight=("a", "b")), SourceState(4, fruitless=1, isolate=frozenset({"a", "b"})),
     SourceState(4, started=True, isolate=frozenset({"a", "b"}))),
    # pages settled: progress
    (Ended("exit", 1, reported=("ok",)), SourceState(4, fruitless=2), SourceState(4, started=True)),
    # nothing settled: one more fruitless launch
    (Ended("exit", 1), SourceState(4, fruitless=1), SourceState(4, fruitless=2)),
    # a lost CUDA context that only failed pages: started, yet fruitless
    (Ended("exit", 8, reported=("failed",)), NEW, SourceState(4, started=True, fruitless=1)),
])
def test_advance(ended, state, expected):
    assert advance(state, ended) == expected


@pytest.mark.parametrize("failed, todo, fraction, expected", [
    (3, 4, 1, None),                     # 1: no budget
    (2, 4, 0.5, None),                   # at the budget, not over it
    (3, 4, 0.5, "not run: source aborted after 3 of 4 pages failed (more than 0.5; --max-failed-fraction)"),
    (0, 0, 0, None),                     # nothing failed
    (1, 4, 0, "not run: source aborted after 1 of 4 pages failed (more than 0; --max-failed-fraction)"),
])
def test_budget_error(failed, todo, fraction, expected):
    limits = Limits(2, 60, 2, fraction)
    assert budget_error(SourceState(todo, failed=failed), limits) == expected


LOG = Path("run/logs/s.v.log")


@pytest.mark.parametrize("fatal, exit_code, reported, expected", [
    (None, 1, False, None),                                                     # a crash: the loop decides
    (None, 3, True, None),                                                      # exit 3 after pages: a crash too
    ({"error": "disk full", "error_class": "RunDirError"}, 7, False, RunDirError("W: disk full")),
    (None, 5, False, GpuPreflightError(f"W: runner exited 5; see {LOG}")),      # no usable device
    ({"error": "no fakelib"}, 3, False, EnvError(f"W: no fakelib; see {LOG}")),  # a library missing
    ({"error": "bad weights"}, 1, True, RunnerError(f"W: bad weights; see {LOG}")),   # its own reason
])
def test_setup_error(fatal, exit_code, reported, expected):
    error = setup_error(fatal, exit_code, reported, "W", LOG)
    assert (type(error), str(error)) == (type(expected), str(expected))


@pytest.mark.parametrize("code, expected", [
    (0, "exited 0"),
    (137, "exited 137 (out of memory?)"),
    (-signal.SIGKILL, "killed by SIGKILL (out of memory?)"),
    (8, "exited 8 (its CUDA context was lost)"),
    (-signal.SIGSEGV, "killed by SIGSEGV"),
    (-200, "killed by signal 200"),
])
def test_describe_exit(code, expected):
    assert describe_exit(code) == expected
