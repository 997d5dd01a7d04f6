"""The face every stage shows the planner (`planner.plan_run`), model stages and builtin ones alike:
what its outputs are read from, which of their pages are current, and which a run redoes given
what the stages before it redo, and why a page is stale. Stdlib only (and the code revisions):
the config, the stages and the planner all read it.

An output is named by a key: ``"source:<stage>/<variant>"`` for a model source's pages,
``"<kind>:<output name>"`` for a builtin stage's (``"fusion:U"``, ``"review:boards"``). A plan
of the stages before (`Redo`) maps such keys to the pages the run redoes of them.
"""

from __future__ import annotations

from collections import Counter
from copy import deepcopy
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from .revisions import why_stale

__all__ = ["Outputs", "Tally", "Made", "Redo", "Reading", "Stage", "carried", "redone", "has_work", "input_changes",
           "stale_reason"]

# output key -> the pages a run redoes of that output
Redo = Mapping[str, "set[str] | frozenset[str]"]


@dataclass(frozen=True)
class Outputs:
    """One line of a stage's plan: its outputs of one kind (a source's pages, a fused variant, the
    boards) by state, as the stage's next call would find them; done, stale, failed and pending
    part the pages planned."""

    name: str
    done: int
    stale: int
    failed: int
    pending: int
    reasons: Mapping[str, int] = field(default_factory=dict)   # why the stale ones are stale: pages
    note: str = ""       # said after the counts ("recommended", "gallery yes")
    whole: bool = True   # its run-level outputs (gallery, COCO file) hold every page as it is now
    # For the planner, not for show: the outputs its pages are read from (keys, as above), its
    # done pages (None: not said, outputs a run does not redo, such as a fused variant the config
    # dropped) and the pages a run computes (None: every page not done; a source leaves the
    # pages it holds failed out).
    inputs: tuple[str, ...] = field(default=(), compare=False)
    done_pages: frozenset[str] | None = field(default=None, compare=False, repr=False)
    todo_pages: frozenset[str] | None = field(default=None, compare=False, repr=False)
    # done pages whose input records a call writes again (a run copied without its mtimes): work
    # that redoes no output, but that keeps the next call from reading the inputs again
    rerecord: int = field(default=0, compare=False)

    def row(self) -> dict:
        """The JSON-able status line of these outputs (`newsbag status --json`, ``run --dry-run``): its
        fields for show, copied one by one (`asdict` would copy the page sets first, 100k ids each)."""
        return {f.name: deepcopy(getattr(self, f.name)) for f in fields(self)
                if f.name not in ("inputs", "done_pages", "todo_pages", "rerecord")}


class Tally:
    """The pages of one output counted by state as a stage's plan checks them, one page at a time:
    the loop every stage's plan runs, kept once. A page not added is pending."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.stale = self.failed = self.rerecord = 0
        self.reasons: Counter = Counter()

    def add(self, page_id: str, state: str, why: str | None = None, *, rerecord: bool = False) -> None:
        """Count `page_id` "done", "stale" (`why`: the reason), "failed" or "pending"; ``rerecord``: a
        done page whose input record a call writes again."""
        if state == "done":
            self.done.add(page_id)
            self.rerecord += rerecord
        elif state == "stale":
            self.stale += 1
        elif state == "failed":
            self.failed += 1
        if why:
            self.reasons[why] += 1

    def outputs(self, name: str, pages: int, *, planned: bool = True, **said: Any) -> Outputs:
        """The `Outputs` line of these counts over `pages` pages; ``planned``: the run redoes these
        outputs (else, as for a fused variant the config dropped, its done pages are not said);
        ``said``: `Outputs`' note, whole and inputs."""
        done = len(self.done)
        return Outputs(name, done, self.stale, self.failed, pages - done - self.stale - self.failed,
                       dict(self.reasons.most_common()), done_pages=frozenset(self.done) if planned else None,
                       rerecord=self.rerecord, **said)


def redone(outputs: Outputs, page_ids: Iterable[str]) -> set[str]:
    """The pages of `page_ids` a run redoes of `outputs`, as the stages after it count them."""
    if outputs.todo_pages is not None:
        return set(outputs.todo_pages)
    return set() if outputs.done_pages is None else set(page_ids) - outputs.done_pages


def carried(outputs: Outputs, redo: Redo) -> Outputs:
    """`outputs` with each done page that one of its inputs redoes first (`redo`) counted stale,
    "its input X is redone first", by the first such input: such an input still looks current to
    the stage reading it, where the run redoes it before."""
    if outputs.done_pages is None:
        return outputs
    left, reasons = set(outputs.done_pages), dict(outputs.reasons)
    for name in outputs.inputs:
        moved = left & set(redo.get(name, ()))
        if moved:
            why = f"its input {name.replace(':', '/', 1).removeprefix('source/')} is redone first"
            reasons[why] = reasons.get(why, 0) + len(moved)
            left -= moved
    n = len(outputs.done_pages) - len(left)
    if not n:
        return outputs
    return replace(outputs, done=outputs.done - n, stale=outputs.stale + n, reasons=reasons,
                   done_pages=frozenset(left))


def has_work(outputs: list[Outputs], pages: int) -> bool:
    """Whether a call of a stage whose plan is `outputs` has work on `pages` pages: it made nothing
    yet, a page is not current or its input record is out of date, or a run-level output leaves
    pages out."""
    return not outputs or any(o.done < pages or not o.whole or o.rerecord for o in outputs)


def input_changes(recorded: Mapping[str, Any], now: Mapping[str, Any],
                  named: Callable[[str], str] = str) -> str | None:
    """Why an output is stale, read from its stage's record of it: which of its inputs changed
    ("its input fake/w changed", "its inputs fake/v, fake/w changed"), came or went since
    (``recorded``: input -> its identity when the output was made; ``now``: the same as they are,
    each named for the reader by `named`); None when they are the same."""
    said = []
    for keys, one, several in ((sorted(k for k in recorded.keys() & now.keys() if recorded[k] != now[k]),
                                "changed", "changed"),
                               (sorted(recorded.keys() - now.keys()), "is gone", "are gone"),
                               (sorted(now.keys() - recorded.keys()), "is new", "are new")):
        if keys:
            said.append(f"its input{'s' * (len(keys) > 1)} {', '.join(map(named, keys))} "
                        f"{several if len(keys) > 1 else one}")
    return "; ".join(said) or None


@dataclass(frozen=True)
class Made:
    """How a stage made one page's output, as the record it keeps of the page says (its ledger
    entry): the output's fingerprint, each input's identity then, and the code revision then of
    each `revisions` key it was made by."""

    fingerprint: Any
    inputs: Mapping[str, Any]
    revisions: Mapping[str, Any] = field(default_factory=dict)


def stale_reason(made: Made, fingerprint: Any, inputs: Mapping[str, Any], *, named: Callable[[str], str] = str,
                 options: str = "its options changed", files: str = "its files are missing or cut short") -> str:
    """Why an output `made` so is stale now that its fingerprint would be `fingerprint` and its
    inputs are `inputs` (identities as `made.inputs` holds them): the code revision it was made by,
    else the inputs that changed (`input_changes`), else what else its fingerprint holds
    (`options`), else its own files (`files`: the fingerprint is the same, its files are not)."""
    return (next((why for key, then in made.revisions.items() if (why := why_stale(key, then))), None)
            or input_changes(made.inputs, inputs, named)
            or (options if made.fingerprint != fingerprint else files))


@dataclass(frozen=True)
class Reading:
    """How a plan reads a run: as a call with --retry-failed (a source's pages that crashed its
    runner count as work); ``reports``: source -> its run reports' pages, when the caller read
    them (status)."""

    retry_failed: bool = False
    reports: Mapping[str, list[dict]] | None = None


@runtime_checkable
class Stage(Protocol):
    """A stage of a run as the planner walks it (`stages.stage_of` gives one per config stage).

    ``key`` names its outputs (`Redo`'s keys) from one of its `Outputs`; ``plan`` checks its
    outputs over `records` (`manifest.PageRecord`, in manifest order) by the rule its ``run``
    skips pages by, and counts stale the done pages whose inputs `upstream` redoes first
    (`carried`), reading the run as `reading` says; ``run`` computes what is not current (``how``: the stage's own keywords, such as
    force and workers, a model stage's variant).
    """

    name: str
    kind: str

    def key(self, outputs: Outputs) -> str: ...

    def plan(self, run_dir: Path, records: list, upstream: Redo, reading: Reading = Reading()) -> list[Outputs]: ...

    def run(self, run_dir: Path, pages: list, **how: Any) -> Any: ...
