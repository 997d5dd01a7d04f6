"""What the next run redoes, stage after stage: an output read from inputs that are redone first is
redone after them.

Each stage's status (`builtin.Outputs`) checks its outputs against their inputs as they are on
disk now. An input that is about to be redone itself (the fused pages of a recipe whose options
changed, the source pages of a runner whose revision was bumped) still looks current to the stage
reading it: that stage would count those pages done, where the real run redoes them once their
inputs changed. `carry_upstream` walks the stages in the order a run runs them and counts such
pages stale; `newsbag status`, ``run --dry-run`` and the Slurm planner (which reads status) all
count by it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from . import rundir
from .builtin import Outputs
from .config import ModelStage
from .failures import is_held, previous_failure

__all__ = ["stage_order", "source_redo", "carry_upstream"]


def stage_order(stages: Iterable, by_name: bool = False) -> list[tuple[str, str]]:
    """The order a run runs `stages` (a config's, `PipelineConfig.stages` or a selection) in, as
    `carry_upstream` reads it: ("source", "<stage>/<variant>") per model stage variant, (kind, the
    key of its outputs: the stage's name when `by_name`, else its kind) per builtin stage."""
    out: list[tuple[str, str]] = []
    for stage in stages:
        if isinstance(stage, ModelStage):
            out += [("source", f"{stage.name}/{v}") for v in stage.variants]
        else:
            out.append((stage.kind, stage.name if by_name else stage.kind))
    return out


def source_redo(out_dir: Path, prints: Mapping[str, str], done: set[str], retry_failed: bool = False) -> set[str]:
    """The pages of `prints` (page id -> the source page's fingerprint now) that a run computes for
    one source: those not `done` (current), less the failed ones it leaves failed (`is_held`: they
    crashed the runner) unless `retry_failed`. Only the pages with a failure record are read."""
    missing = prints.keys() - done
    failed = set() if retry_failed else rundir.page_files(Path(out_dir) / rundir.FAILED_DIR) & missing
    return missing - {page_id for page_id in failed if is_held(previous_failure(out_dir, page_id), prints[page_id])}


def carry_upstream(order: Sequence[tuple[str, str]], sources: Mapping[str, set[str]],
                   outputs: Mapping[str, list[Outputs]], page_ids: Iterable[str]) -> dict[str, list[Outputs]]:
    """`outputs` (builtin stage -> its `Outputs`) with the done pages whose inputs a run redoes
    before them counted stale, "its input X is redone first".

    Args:
        order: the stages in run order (`stage_order`); outputs not in it are left as they are.
        sources: "<stage>/<variant>" -> the pages a run computes for the source (`source_redo`).
        outputs: each builtin stage's outputs by its key in `order`, naming what they are read
            from (``inputs``) and their done pages (``done_pages``; None: outputs the run does not
            redo, such as a fused variant the config dropped, left as they are).
        page_ids: the pages counted.
    """
    every = set(page_ids)
    redo: dict[str, set[str]] = {}
    out = dict(outputs)
    for kind, key in order:
        if kind == "source":
            redo[f"source:{key}"] = set(sources.get(key, ()))
            continue
        out[key] = [_carried(o, redo) for o in outputs.get(key, [])]
        for o in out[key]:
            redo[f"{kind}:{o.name}"] = set() if o.done_pages is None else every - o.done_pages
    return out


def _carried(outputs: Outputs, redo: Mapping[str, set[str]]) -> Outputs:
    """`outputs` with each done page that one of its inputs redoes counted stale, by the first such input."""
    if outputs.done_pages is None:
        return outputs
    left, reasons = set(outputs.done_pages), dict(outputs.reasons)
    for name in outputs.inputs:
        moved = left & redo.get(name, set())
        if moved:
            why = f"its input {name.replace(':', '/', 1).removeprefix('source/')} is redone first"
            reasons[why] = reasons.get(why, 0) + len(moved)
            left -= moved
    n = len(outputs.done_pages) - len(left)
    if not n:
        return outputs
    return replace(outputs, done=outputs.done - n, stale=outputs.stale + n, reasons=reasons,
                   done_pages=frozenset(left))
