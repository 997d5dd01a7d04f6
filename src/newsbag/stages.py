"""The stages of a config as `stage_protocol.Stage`s, and the table of builtin stage kinds: kind ->
the functions that check (``status``) and make (``run``) its outputs, each kind's imported by a
function of its own here, so that a reader or a tool follows them and a call imports the stages
it plans or runs only (`newsbag fuse` loads no review, export or transcription code: a tenth of
a second of every call). `builtin` holds what the config needs of a kind (its options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from . import freshness, locks, rundir
from .config import BuiltinStage, ModelStage, to_jsonable
from .source_plan import source_pages
from .stage_protocol import Outputs, Reading, Redo, Stage, carried

__all__ = ["Kind", "KINDS", "Builtin", "ModelSources", "stage_of", "stage_outputs", "stage_status", "run_stage"]


@dataclass(frozen=True)
class Kind:
    """The work of one builtin stage kind.

    ``load()`` imports the stage's module and gives its two functions: ``status(run_dir, records,
    options) -> [Outputs]``: the stage's outputs over the run's pages
    (`manifest.PageRecord`) checked by the rule its ``run`` skips pages by. ``run(run_dir,
    page_ids, options, *, force, workers, progress) -> dict``: a result with at least
    ``ok``/``skipped``/``failed`` counts (``failed`` > 0 makes the run exit 4) and ``failures``
    [{page_id, error}]. ``planned``: ``status`` covers every output ``run`` writes, so a call of
    a run it finds nothing to do for is skipped. Fusion's summary and leaderboards (which follow
    the pins and the config's pick) are not in its status, nor review's ranking, top boards and
    evaluation data (which follow the ground truth), nor its warning for boards whose scan is
    gone: those two always run.
    """

    load: Callable[[], tuple[Callable[..., list[Outputs]], Callable[..., dict]]]   # imports (status, run)
    planned: bool = True

    @property
    def status(self) -> Callable[..., list[Outputs]]:
        return self.load()[0]

    @property
    def run(self) -> Callable[..., dict]:
        return self.load()[1]


def _fusion() -> tuple[Callable, Callable]:
    from .fusion.stage import fused_status, run_fusion
    return fused_status, run_fusion


def _review() -> tuple[Callable, Callable]:
    from .review.stage import board_status, run_review
    return board_status, run_review


def _export() -> tuple[Callable, Callable]:
    from .export.stage import export_status, run_export
    return export_status, run_export


def _transcription() -> tuple[Callable, Callable]:
    from .transcription.stage import run_transcription, transcript_status
    return transcript_status, run_transcription


KINDS: dict[str, Kind] = {
    "fusion": Kind(_fusion, planned=False),
    "review": Kind(_review, planned=False),
    "export": Kind(_export),
    "transcription": Kind(_transcription),
}


def stage_outputs(kind: str, run_dir: Path, records: list, options: Mapping[str, Any]) -> list[Outputs]:
    """The `Outputs` of one builtin stage over `records` (the run's pages), as its own rule finds them."""
    return KINDS[kind].status(Path(run_dir), records, options)


def stage_status(kind: str, run_dir: Path, records: list, options: Mapping[str, Any]) -> list[dict]:
    """`stage_outputs` as JSON-able dicts (`Outputs.row`)."""
    return [o.row() for o in stage_outputs(kind, run_dir, records, options)]


def run_stage(kind: str, run_dir: Path, page_ids: list[str], options: Mapping[str, Any], *,
              force: bool = False, workers: int = 1,
              progress: Callable[[str, str], None] | None = None,
              record: Callable[[dict | None], dict] | None = None) -> dict:
    """Run one builtin stage over `page_ids` (it aggregates over the whole manifest itself),
    one call per run dir and kind at a time (`locks.stage_lock`).

    ``record``: this call's change to the run's config record (`rundir.update_config_record`),
    made once it holds the lock: a call that waited for another runs after it, so the record
    names what made the outputs last, never the config of a call still waiting.
    """
    with locks.stage_lock(run_dir, kind):
        if record is not None:
            rundir.update_config_record(run_dir, record)
        return KINDS[kind].run(run_dir, page_ids, options, force=force, workers=workers, progress=progress)


@dataclass(frozen=True)
class Builtin:
    """A builtin stage of a config: its kind's functions over its options."""

    name: str
    kind: str
    options: Mapping[str, Any]

    def key(self, outputs: Outputs) -> str:
        return f"{self.kind}:{outputs.name}"

    def plan(self, run_dir: Path, records: list, upstream: Redo, reading: Reading = Reading()) -> list[Outputs]:
        return [carried(o, upstream) for o in stage_outputs(self.kind, run_dir, records, self.options)]

    def run(self, run_dir: Path, pages: list, **how: Any) -> dict:
        """`run_stage` over `pages` (page ids); ``how``: its keywords (force, workers, progress, record)."""
        return run_stage(self.kind, run_dir, pages, self.options, **how)


@dataclass(frozen=True)
class ModelSources:
    """A model stage: one source per variant, its pages computed by a runner."""

    stage: ModelStage

    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def kind(self) -> str:
        return self.stage.kind

    def key(self, outputs: Outputs) -> str:
        return f"source:{outputs.name}"

    def plan(self, run_dir: Path, records: list, upstream: Redo, reading: Reading = Reading()) -> list[Outputs]:
        """One `Outputs` per source, named "<stage>/<variant>", by `source_plan.source_pages`: its
        ``todo_pages`` leave out the pages a call holds failed."""
        ids = {r.page_id for r in records}
        out = []
        for variant in self.stage.variants:
            source = f"{self.name}/{variant}"
            folder = rundir.source_dir(run_dir, self.name, variant)
            prints = {r.page_id: self.stage.page_fingerprint(variant, r.image_sha256) for r in records}
            now = freshness.page_identities(folder, prints)   # stat calls: a shard task lists no folder of pages
            pages = source_pages(folder, prints, retry_failed=reading.retry_failed,
                                 reports=(reading.reports or {}).get(source), now=now)
            present = set(now)
            failed = pages.failed - present
            out.append(Outputs(source, len(pages.current), len(present - pages.current), len(failed),
                               len(ids - present - failed), done_pages=pages.current, todo_pages=pages.todo))
        return out

    def run(self, run_dir: Path, pages: list, *, variant: str = "", **how: Any) -> Any:
        """One source, `variant`: `orchestrator.run_source` over `pages` (`PageRecord`s); ``how``: its keywords."""
        from .orchestrator import run_source   # runner subprocesses: only where a model stage runs

        return run_source(Path(run_dir), self.stage, variant, pages, **how)


def stage_of(stage: ModelStage | BuiltinStage) -> Stage:
    """The `Stage` of a config's stage."""
    if isinstance(stage, ModelStage):
        return ModelSources(stage)
    return Builtin(stage.name, stage.kind, to_jsonable(stage.options))
