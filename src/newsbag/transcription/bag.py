"""The transcription stage's recognisers: one runner, or a bag whose members read the same lines, voted line by line.

A bag (the stage's ``recognizers``) runs each member's runner over the pages the stage
planned, on the same crops: the text lines of the plan, the one line unit every member reads
(`options.crop_unit`). Each page's lines are then paired by their crop index and
voted (`vote`); the voted lines, with who won and every member's reading, are what the
stage's transcript is made of. A member whose runner cannot start (its library or model is
missing: no traineddata) is left out with a one-line warning and the others go on; the bag
fails only when none can start.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..config import EnvSpec, ModelStage
from ..tool_spec import load_tool_spec, validate_params, volatile_params
from ..errors import EnvError, first_line
from ..io import read_json, write_json
from ..page_reader import read_page
from ..resources import runners_dir
from .vote import Reading, vote_line
from .cascade import cascade_plan, unsure_lines
from .options import BagMember, Cascade, TranscriptionParams, bag_members, cascade_rule

if TYPE_CHECKING:
    from ..page_outcomes import PageOutcome

__all__ = ["BagStage", "bag_stages", "recognizer_record", "read_lines", "voted_lines"]

log = logging.getLogger(__name__)

# The variant a single recogniser's runner reads under: its logs and run report keep their names.
_SINGLE = "lines"
# The folder, inside the stage's plan folder, of the plans a cascade's later recognisers read.
_CASCADE = "_cascade"


@dataclass(frozen=True)
class BagStage:
    """A recogniser and its runner as a model stage, whose one variant is named `variant`."""

    member: BagMember
    stage: ModelStage
    variant: str


def _member_stage(params: TranscriptionParams, member: BagMember, variant: str, plan_dir: Path) -> ModelStage:
    spec = load_tool_spec(member.family, runners_dir())
    recognizer = validate_params(f"transcription stage: recognizer {member.name}", dict(member.recognizer), spec)
    return ModelStage(
        name="transcription", family=member.family, env=EnvSpec("transcription", params.python or sys.executable),
        device=params.device, allow_cpu_fallback=params.allow_cpu_fallback,
        timeout_s=params.timeout_s, page_timeout_s=params.page_timeout_s, max_restarts=params.max_restarts,
        variants={variant: {**recognizer, "plan_dir": str(plan_dir.resolve())}}, revision=spec["revision"],
        volatile=volatile_params(spec),
    )


def bag_stages(params: TranscriptionParams, plan_dir: Path = Path()) -> list[BagStage]:
    """Each recogniser of the stage as a model stage, so it gets the orchestrator's launch,
    resume and crash handling (and `newsbag doctor`'s checks); one for a stage without a bag.

    Raises:
        ValueError: a member's recogniser parameters do not fit its family's tool.json.
    """
    members = bag_members(params)
    single = not params.recognizers
    later = plan_dir / _CASCADE if cascade_rule(params) else plan_dir   # a cascade's later members read its subsets
    return [BagStage(m, _member_stage(params, m, _SINGLE if single else m.name, later if k else plan_dir),
                     _SINGLE if single else m.name)
            for k, m in enumerate(members)]


def recognizer_record(params: TranscriptionParams, stages: list[BagStage]) -> dict:
    """What of the recognisers a transcript's fingerprint holds: a runner whose output changed
    for the same crops (its revision, a parameter) reads them again. A stage without a bag
    records what it always did, so its transcripts stay current."""
    def one(b: BagStage) -> dict:
        return {"revision": b.stage.revision, "family": b.stage.family,
                "recognizer": {k: v for k, v in b.stage.variants[b.variant].items() if k not in b.stage.volatile}}

    if not params.recognizers:
        return one(stages[0])
    record = {"recognizers": [{"name": b.member.name, **one(b), "weight": b.member.weight,
                               "min_score": b.member.min_score} for b in stages], "vote": params.vote}
    rule = cascade_rule(params)
    return {**record, "cascade": dataclasses.asdict(rule)} if rule else record


def _char_scores(line: dict) -> tuple[float, ...] | None:
    """A confidence per character of a line whose words the recogniser scored (Tesseract): each
    word's for its characters, the mean of its neighbours' for the space between two words."""
    words = line.get("words")
    if not words or " ".join(w["text"] for w in words) != line.get("text"):
        return None
    out: list[float] = []
    for k, w in enumerate(words):
        if k:
            out.append((words[k - 1]["score"] + w["score"]) / 2)
        out.extend([w["score"]] * len(w["text"]))
    return tuple(out)


def voted_lines(read: list[tuple[BagMember, list[dict]]], method: str) -> list[dict]:
    """One line record per crop any member read: the voted text and score, ``won`` (a member's
    name, "vote" or "" where no reading voted) and every member's reading; the winner's word
    boxes and model where it gave them (the exports' word boxes).

    Args:
        read: each member and the line records its runner returned for a page, one per crop
            at most, paired by ``order`` (the crop's index in the plan).
    """
    by_order: dict[int, dict[str, dict]] = {}
    for member, lines in read:
        for line in lines:
            by_order.setdefault(line["order"], {})[member.name] = line
    out = []
    for order in sorted(by_order):
        got = by_order[order]
        readings = [Reading(m.name, got[m.name].get("text") or "", float(got[m.name].get("score") or 0.0),
                            _char_scores(got[m.name]), m.weight, m.min_score) for m, _ in read if m.name in got]
        vote = vote_line(readings, method)
        winner = got.get(vote.won, {})
        out.append({"bbox_xyxy": next(iter(got.values()))["bbox_xyxy"], "label": "text_line", "score": vote.score,
                    "order": order, "text": vote.text,
                    **{k: winner[k] for k in ("words", "model") if k in winner}, "won": vote.won,
                    "readings": [{"recognizer": r.name, "text": r.text, "score": round(r.score, 4)}
                                 for r in readings]})
    return out


def _run_members(run_dir: Path, stages: list[BagStage], todo: list, lines_dir: Path) -> tuple[list, list[str], Exception | None]:
    """Each member's runner over `todo`, into ``lines_dir/<name>/``: (member, outcome) of those
    that started, a note for each left out, and the first one's error."""
    from ..orchestrator import run_source

    done, notes, first_error = [], [], None
    for b in stages:
        try:
            done.append((b, run_source(run_dir, b.stage, b.variant, todo, runners=runners_dir(), force=True,
                                       out_dir=lines_dir / b.variant, ledger=False)))
        except EnvError as exc:
            first_error = first_error or exc
            notes.append(f"transcription: recogniser {b.member.name} left out of the bag: {first_line(exc)}")
            log.warning(notes[-1])
    return done, notes, first_error


def _plan_cascade(first: tuple | None, todo: list, lines_dir: Path, plan_dir: Path, rule: Cascade) -> list:
    """Write each page's plan for a cascade's later members (`cascade.cascade_plan`):
    the lines the first member read unsure, or every line of a page it did not read; the pages
    with a line to read."""
    later = []
    for record in todo:
        page_id = record.page_id
        plan = read_json(plan_dir / f"{page_id}.json")
        outcome = first[1].pages.get(page_id) if first else None
        if outcome is not None and outcome.status == "ok":
            orders = unsure_lines(read_page(lines_dir / first[0].variant / f"{page_id}.json", page_id)["regions"], rule)
        else:
            orders = list(range(len(plan["crops"])))
        write_json(plan_dir / _CASCADE / f"{page_id}.json", cascade_plan(plan, orders), compact=True)
        if orders:
            later.append(record)
    return later


def _member_lines(b: BagStage, page_id: str, lines: list[dict], cascade: bool) -> list[dict]:
    """The `lines` a member read on a page, each ``order`` the crop's in the page's plan: a
    cascade's later member read a subset plan, whose ``orders`` map its crops back."""
    if not cascade:
        return lines
    plan_dir = Path(b.stage.variants[b.variant]["plan_dir"])
    orders = read_json(plan_dir / f"{page_id}.json")["orders"]
    return [{**line, "order": orders[line["order"]]} for line in lines]


def read_lines(run_dir: Path, stages: list[BagStage], method: str, todo: list, lines_dir: Path,
               on_read: Callable[[PageOutcome], None], cascade: Cascade | None = None) -> dict[str, Any]:
    """Have the recognisers read the planned pages; each page's lines go to
    ``lines_dir/<page_id>.json`` and `on_read` is called with its outcome.

    One recogniser: its runner writes there itself, each page handed on as it comes. A bag:
    each member's runner writes to ``lines_dir/<name>/``; then each page's lines are voted. A
    bag read as a `cascade`: its first member reads every line, the others only the lines it
    read unsure (every line of a page it could not read).

    Returns:
        ``device_used`` (the members', joined by "+") and ``notes``: a line for each member left out.

    Raises:
        EnvError: no recogniser could start (the first one's error).
    """
    from ..orchestrator import run_source
    from ..page_outcomes import PageOutcome

    if len(stages) == 1 and stages[0].variant == _SINGLE:
        outcome = run_source(run_dir, stages[0].stage, _SINGLE, todo, runners=runners_dir(), force=True,
                             out_dir=lines_dir, on_page=on_read, ledger=False)
        return {"device_used": outcome.device_used, "notes": []}
    if cascade is None:
        done, notes, first_error = _run_members(run_dir, stages, todo, lines_dir)
    else:
        done, notes, first_error = _run_members(run_dir, stages[:1], todo, lines_dir)
        plan_dir = Path(stages[0].stage.variants[stages[0].variant]["plan_dir"])
        later = _plan_cascade(done[0] if done else None, todo, lines_dir, plan_dir, cascade)
        more = _run_members(run_dir, stages[1:], later, lines_dir)
        done, notes, first_error = done + more[0], notes + more[1], first_error or more[2]
    if not done:
        raise first_error or EnvError("transcription: no recogniser in the bag")
    for record in todo:
        page_id = record.page_id
        got = [(b, o.pages.get(page_id)) for b, o in done]
        ok = [b for b, o in got if o is not None and o.status == "ok"]
        if not ok:
            on_read(next((o for _, o in got if o is not None), PageOutcome(page_id, "failed", "no recogniser read it")))
            continue
        pages = [read_page(lines_dir / b.variant / f"{page_id}.json", page_id) for b in ok]
        read = [(b.member, _member_lines(b, page_id, page["regions"], cascade is not None and b is not stages[0]))
                for b, page in zip(ok, pages)]
        write_json(lines_dir / f"{page_id}.json", {**pages[0], "regions": voted_lines(read, method)})   # a page as its runners write
        on_read(PageOutcome(page_id, "ok"))
    return {"device_used": "+".join(sorted({str(o.device_used) for _, o in done})), "notes": notes}
