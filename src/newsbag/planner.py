"""What the next run does, stage after stage: the one plan `newsbag status`, ``run --dry-run``, the
Slurm helpers and the run itself read.

Each stage (`stage_protocol.Stage`) checks its outputs against their inputs as they are on disk
now, by the rule its run skips pages by. An input that is about to be redone (the fused pages of a
recipe whose options changed, the source pages of a runner whose revision was bumped) still looks
current to the stage reading it, where the run redoes it first: `plan_run` walks the stages in the
order a run runs them and hands each the pages the stages before it redo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from .config import PipelineConfig
from .stage_protocol import Outputs, Reading, Stage, has_work, redone
from .stages import stage_of

__all__ = ["StagePlan", "RunPlan", "plan_run"]


@dataclass(frozen=True)
class StagePlan:
    """One stage's plan: its outputs as the run finds them, done pages whose inputs are redone first
    counted stale; ``redo``: output key -> the pages the run redoes of it."""

    stage: Stage
    outputs: tuple[Outputs, ...]
    redo: Mapping[str, frozenset[str]]
    pages: int

    @property
    def work(self) -> bool:
        """Whether a call of the stage has work: a page to compute (a source's pages it holds failed
        are none), an output not made yet or not current, a run-level output that leaves pages out."""
        if self.stage.kind == "model":
            return any(self.redo.values())
        return has_work(list(self.outputs), self.pages)

    def todo(self) -> frozenset[str]:
        """The pages the run redoes of some output of the stage."""
        return frozenset().union(*self.redo.values())


@dataclass(frozen=True)
class RunPlan:
    """`plan_run`'s answer: the pages planned, and each stage's plan in run order."""

    page_ids: tuple[str, ...]
    stages: tuple[StagePlan, ...]

    def pending(self) -> list[str]:
        """The stages with work (`StagePlan.work`), in run order."""
        return [s.stage.name for s in self.stages if s.work]

    def todo(self, names: Iterable[str]) -> frozenset[str]:
        """The pages one of the stages `names` redoes."""
        wanted = set(names)
        return frozenset().union(*(s.todo() for s in self.stages if s.stage.name in wanted))


def plan_run(config: PipelineConfig, run_dir: Path, *, stages: Iterable | None = None, records: list | None = None,
             reading: Reading = Reading()) -> RunPlan:
    """What a run of `stages` (the config's stages, or a selection of them in config order; default:
    all of them) does over `records` (the run's pages, `manifest.PageRecord`s in manifest order;
    default: the manifest's) in `run_dir`, stage after stage: each stage plans given the pages the
    stages before it redo.

    ``reading``: as a call with --retry-failed, run reports read already.
    """
    if records is None:
        from .manifest import read_pages   # numpy and Pillow: only where a plan reads the manifest

        records = read_pages(run_dir)
    run_dir = Path(run_dir)
    ids = [r.page_id for r in records]
    redo: dict[str, set[str]] = {}
    plans = []
    for stage in config.stages if stages is None else stages:
        step = stage_of(stage)
        outputs = step.plan(run_dir, records, redo, reading)
        mine: dict[str, frozenset[str]] = {}
        for o in outputs:
            key = step.key(o)
            mine[key] = mine.get(key, frozenset()) | redone(o, ids)
            # two stages of a kind (two fusion stages) list each other's outputs, as not theirs to redo
            redo[key] = redo.get(key, set()) | mine[key]
        plans.append(StagePlan(step, tuple(outputs), mine, len(ids)))
    return RunPlan(tuple(ids), tuple(plans))
