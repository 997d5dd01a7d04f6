"""A source's restart loop decided apart from its I/O: why pages failed, which run again, when it stops."""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import EnvError, GpuPreflightError, NewsbagError, RunDirError, RunnerError
from .source_plan import plan_page   # the page rule the run and the planner share

__all__ = [
    "Abort", "Blame", "Continue", "Decision", "Ended", "Isolate", "Limits", "OverBudget", "SourceState", "Stop",
    "advance", "budget_error", "describe_exit", "how_it_ended", "plan_page", "settle", "setup_error",
]

EXIT_MISSING_DEPENDENCY = 3
EXIT_DEVICE_UNAVAILABLE = 5
EXIT_CONTEXT_LOST = 8  # runners/_errors.py: a sticky CUDA error; a fresh runner does the rest


def describe_exit(code: int) -> str:
    """How a runner process ended, from its exit code (negative: the signal that killed it)."""
    if code in (137, -signal.SIGKILL):  # what the kernel's OOM killer (and Slurm's) sends
        return f"{'exited 137' if code == 137 else 'killed by SIGKILL'} (out of memory?)"
    if code == EXIT_CONTEXT_LOST:
        return f"exited {code} (its CUDA context was lost)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited {code}"


def how_it_ended(reason: str, exit_code: int, page_timeout_s: float) -> str:
    """How a runner ended, for a log line: a runner newsbag killed for a stall is not said to have
    been killed by the kernel (``out of memory?`` sends Slurm users to raise --mem for a hang)."""
    if reason == "page_timeout":
        return f"newsbag stopped the runner after no progress for {page_timeout_s:g}s on a page (page_timeout_s)"
    return f"runner {describe_exit(exit_code)}"


@dataclass(frozen=True)
class Limits:
    """What a stage allows one source call: seconds without progress on a page, seconds in all,
    launches in a row that settle no page, and the share of its pages that may fail (1: any)."""

    page_timeout_s: float
    timeout_s: float
    max_restarts: int
    max_failed_fraction: float


@dataclass(frozen=True)
class SourceState:
    """What the decisions read of a call's history, besides how its last runner ended."""

    todo: int  # pages the call computes
    failed: int = 0  # failures among them so far
    started: bool = False  # some page was reported or in flight: the source did start
    fruitless: int = 0  # launches in a row that settled no page
    isolate: frozenset[str] = frozenset()  # pages to run alone: a batch they were in stopped the runner


@dataclass(frozen=True)
class Ended:
    """How one runner launch ended, once the outputs it wrote without saying so are settled."""

    reason: str  # exit | page_timeout | job_timeout | aborted
    exit_code: int
    set_up: bool = True  # it reported its model set up
    reported: tuple[str, ...] = ()  # the status of each page it settled
    in_flight: tuple[str, ...] = ()  # the pages it was on when it stopped, still unsettled
    remaining: int = 0  # pages left to do after it, those in flight included


@dataclass(frozen=True)
class Continue:
    """Restart a runner for the pages left."""


@dataclass(frozen=True)
class Isolate:
    """Restart, running these pages (a batch in flight when the runner stopped) one at a time."""

    pages: tuple[str, ...]
    how: str  # how the runner stopped, for the log line


@dataclass(frozen=True)
class Blame:
    """Fail these pages (the runner stopped on them alone), then restart for the pages left."""

    pages: tuple[str, ...]
    error: str
    error_class: str


@dataclass(frozen=True)
class OverBudget:
    """newsbag stopped the runner because too many pages failed: the budget check fails the rest."""


@dataclass(frozen=True)
class Stop:
    """Fail every page left with `error` (those in flight first, with `in_flight_error` when given); launch no more."""

    error: str
    error_class: str
    in_flight_error: str | None = None


@dataclass(frozen=True)
class Abort:
    """The source never started: stop it with a RunnerError saying `why`."""

    why: str


Decision = Continue | Isolate | Blame | OverBudget | Stop | Abort


def budget_error(state: SourceState, limits: Limits) -> str | None:
    """Why the pages left are not run once more than `max_failed_fraction` of the pages failed; else None."""
    fraction = limits.max_failed_fraction
    if fraction < 1 and state.failed > fraction * state.todo:
        return (f"not run: source aborted after {state.failed} of {state.todo} pages failed "
                f"(more than {fraction:g}; --max-failed-fraction)")
    return None


def setup_error(fatal: dict | None, exit_code: int, reported: bool, where: str, log_path: Path) -> NewsbagError | None:
    """The error a runner that could not set up stops the source with (its ``fatal`` event, or an
    exit for a missing library or device before any page); None when it did not say so."""
    if not (fatal or (exit_code in (EXIT_MISSING_DEPENDENCY, EXIT_DEVICE_UNAVAILABLE) and not reported)):
        return None
    message = (fatal or {}).get("error") or f"runner {describe_exit(exit_code)}"
    if (fatal or {}).get("error_class") == "RunDirError":
        return RunDirError(f"{where}: {message}")
    if exit_code == EXIT_DEVICE_UNAVAILABLE:
        return GpuPreflightError(f"{where}: {message}; see {log_path}")
    if exit_code == EXIT_MISSING_DEPENDENCY:
        return EnvError(f"{where}: {message}; see {log_path}")
    # Set-up failed for its own reason (CUDA init, kernels, corrupt weights, a bug): say it as it is.
    return RunnerError(f"{where}: {message}; see {log_path}")


def _culprit_known(ended: Ended, state: SourceState) -> bool:
    """The runner stopped on one page alone, or on pages each already run alone."""
    return len(ended.in_flight) == 1 or all(p in state.isolate for p in ended.in_flight)


def _progressed(ended: Ended) -> bool:
    # A runner that lost its CUDA context on every page it tried is no progress either:
    # a broken GPU must not cost a model load per page until the failure budget ends.
    if ended.exit_code == EXIT_CONTEXT_LOST:
        return any(status != "failed" for status in ended.reported)
    return bool(ended.reported)


def advance(state: SourceState, ended: Ended) -> SourceState:
    """The state after a launch that ended as `ended` (`settle` decides from the one before)."""
    if ended.reason in ("aborted", "job_timeout"):  # the call launches no runner for pages after these
        return state
    started = state.started or bool(ended.reported) or bool(ended.in_flight)
    if not ended.in_flight:
        return replace(state, started=started, fruitless=0 if _progressed(ended) else state.fruitless + 1)
    isolate = state.isolate if _culprit_known(ended, state) else state.isolate | set(ended.in_flight)
    return replace(state, started=started, fruitless=0, isolate=isolate)


def settle(ended: Ended, state: SourceState, limits: Limits) -> Decision:
    """What follows a launch that ended as `ended`, given the state before it.

    A page alone in flight when the runner died or stalled is blamed; a batch in flight is rerun
    one page at a time, so only the culprit fails. A clean exit that left pages undone fails them
    as missing. A source whose runners settle no page stops after `max_restarts` such launches
    in a row, and aborts when it never started.
    """
    if ended.reason == "aborted":
        return OverBudget()
    if ended.reason == "job_timeout":
        return Stop(f"not run: stage timeout {limits.timeout_s:g}s reached", "NotRun",
                    f"stage timeout {limits.timeout_s:g}s reached while processing this page; runner killed")
    if ended.in_flight and _culprit_known(ended, state):
        if ended.reason == "page_timeout":
            return Blame(ended.in_flight, f"no progress for {limits.page_timeout_s:g}s on this page; runner killed",
                         "Timeout")
        return Blame(ended.in_flight, f"runner {describe_exit(ended.exit_code)} while processing this page",
                     "RunnerCrash")
    if ended.in_flight:
        return Isolate(ended.in_flight, "stalled" if ended.reason == "page_timeout" else describe_exit(ended.exit_code))
    if ended.exit_code == 0 and ended.reason == "exit":  # it skipped pages it was given: they have no output
        return Stop("runner exited 0 without writing output for this page", "MissingOutput")
    after = advance(state, ended)
    if not after.started and (not ended.set_up or after.fruitless > limits.max_restarts):
        # Died before processing any page (import error, broken env, crash at load): the
        # source never started, which is worse than some pages failing.
        how = (f"made no progress for {limits.page_timeout_s:g}s" if ended.reason == "page_timeout"
               else describe_exit(ended.exit_code))
        return Abort(f"runner {how} before processing any page{' (after loading its model)' if ended.set_up else ''}")
    if ended.remaining and after.fruitless > limits.max_restarts:
        how = how_it_ended(ended.reason, ended.exit_code, limits.page_timeout_s)
        return Stop(f"not run: {how} {after.fruitless} times in a row before finishing a page", "NotRun")
    return Continue()
