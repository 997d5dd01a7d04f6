"""`newsbag status`: pages done / failed / pending per stage and source, read from the run dir."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from . import builtin, liveness, rundir, stages
from .builtin_entry import checked_builtin_options
from .config import DEFAULT_MAX_EMPTY_SHARE, PipelineConfig, load_config, read_config_json
from .errors import ConfigError
from .failures import not_started
from .io import read_json
from .rundir import FAILED_DIR, discover_sources, sources_root
from .manifest import read_pages, read_rejected, scan_changes
from .planner import RunPlan, plan_run
from .stage_protocol import Reading
from .reports import source_reports

__all__ = ["builtin_options", "collect_status", "status_lines"]

log = logging.getLogger(__name__)


def _empty_pages(folder: Path, reports: list[dict]) -> dict[str, str]:
    """Pages a runner reported ``empty`` (answered, nothing usable), with the reason, from the
    folder's run reports (`source_reports`).

    The run reports (one per shard, one for the other calls) are read instead of every page
    file: cheap at 100k pages. Where they disagree on a page (empty in a shard's report, ok in
    a later --pages call's), only the page file knows which call came last: it is opened.
    """
    empty: dict[str, str] = {}
    answered: set[str] = set()
    for pages in reports:
        for page_id, rec in pages.items():
            if isinstance(rec, dict) and rec.get("status") == "empty":
                empty.setdefault(page_id, rec.get("reason") or "")
            else:
                answered.add(page_id)
    for page_id in answered & set(empty):
        try:
            reason = read_json(folder / f"{page_id}.json").get("empty_reason")
        except (OSError, ValueError, AttributeError):
            reason = None
        if reason:
            empty[page_id] = reason
        else:
            del empty[page_id]
    return empty


def _devices(reports: list[dict], done: set[str]) -> dict[str, int]:
    """Done pages by the device their runner used, from the run reports (the first report that
    records a page's device wins; a runner that skipped a page records none for it)."""
    device: dict[str, str] = {}
    for pages in reports:
        for page_id, rec in pages.items():
            if page_id in done and isinstance(rec, dict) and rec.get("device"):
                device.setdefault(page_id, rec["device"])
    return dict(sorted(Counter(device.values()).items()))


def _recorded_stages(record: Path) -> list[dict]:
    """The stage entries of the run's config `record` ([] without one); a record that is no config
    fails in one line naming it, as a plain `newsbag fuse` would."""
    if not record.exists():
        return []
    raw = read_config_json(record)
    stages = raw.get("stages", []) if isinstance(raw, dict) else None
    if not isinstance(stages, list) or not all(isinstance(s, dict) for s in stages):
        raise ConfigError(f"config {record}: not a newsbag config record (a JSON object with a list of stages); "
                          f"rewrite it with newsbag run --config F")
    return stages


def builtin_options(run_dir: Path) -> dict[str, dict]:
    """kind -> the options `newsbag fuse` / `review` / `transcribe` / `export` run with: the first
    stage of the kind in the run's recorded config (`PipelineConfig.builtin`); a kind it has not
    is left out (its defaults)."""
    record = rundir.config_record(run_dir)
    return _first_options(record, _recorded_stages(record))


def _first_options(record: Path, recorded: list[dict]) -> dict[str, dict]:
    """`builtin_options` of the stage entries `recorded` that `record` holds (`_recorded_stages`)."""
    options: dict[str, dict] = {}
    for stage in recorded:
        if stage.get("kind") in builtin.REGISTRY and stage["kind"] not in options:
            options[stage["kind"]] = checked_builtin_options(stage, f"{record}: stage {stage.get('name')!r}")
    return options


def _recorded_config(record: Path) -> PipelineConfig | None:
    """The recorded config: what source pages' fingerprints are computed by, and the order its
    stages run in. None without a record, or with one that no longer loads (a runner or its
    tool.json gone): source pages then count as done by their file alone, and the log says why."""
    if not record.exists():
        return None
    try:
        return load_config(record)
    except ConfigError as exc:
        log.warning("status: source pages counted without checking their fingerprints: %s", exc)
        return None


def _builtin_status(run_dir: Path, records: list, options: dict[str, dict], plan: RunPlan | None) -> dict[str, list[dict]]:
    """Each builtin kind's outputs over `records` in manifest order (as the stages aggregate over
    them, `manifest.members`): the recorded config's first stage of the kind as `plan` (the run's
    plan, `planner.plan_run`) has it, pages whose inputs the next run redoes first counted stale;
    a kind the config lacks by its own rule (`stages.stage_outputs`, `options`: `builtin_options`),
    and left out unless a call of it made outputs (`_configured`)."""
    recorded = rundir.config_record(run_dir).exists()
    out: dict[str, list[dict]] = {}
    for kind in builtin.kinds():
        planned = next((s for s in plan.stages if s.stage.kind == kind), None) if plan is not None else None
        outputs = planned.outputs if planned else stages.stage_outputs(kind, run_dir, records, options.get(kind, {}))
        out[kind] = _configured([o.row() for o in outputs], kind in options or not recorded)
    return out


def _degenerate_sources(fusion: dict) -> dict[str, dict]:
    """source -> {"pages", "example"} where the last fusion found it degenerate
    (`fusion.degenerate`), from its summary: one file, not every page's metrics."""
    found = fusion.get("degenerate_sources")
    return found if isinstance(found, dict) else {}


def _not_started(run_dir: Path, source: str) -> dict | None:
    """`not_started` of a source ("<stage>/<variant>"), its log named from this run dir
    (a run may move); None while its last call ran it."""
    record = not_started(run_dir, *source.split("/"))
    if record is None:
        return None
    log_path = record.get("log")
    return {"error": str(record.get("error")), "error_class": record.get("error_class"),
            "log": str(run_dir / log_path) if isinstance(log_path, str) else None,
            "started": bool(record.get("started")), "at": record.get("at")}


def _configured(outputs: list[dict], configured: bool) -> list[dict]:
    """A builtin stage's `outputs` as status shows them: all of them when the run's config has the
    stage (or the run records none), else only those a call of it made (a `newsbag review` run on
    its own), said to be outside the config: a stage the config lacks has no pages pending."""
    if configured:
        return outputs
    note = "not in the run's config"
    return [{**o, "note": f"{o['note']}; {note}" if o["note"] else note}
            for o in outputs if o["done"] or o["stale"] or o["failed"]]


def _source_row(run_dir: Path, name: str, ids: set[str], present: set[str], done: set[str], by_name: dict,
                limit: float) -> dict:
    """A source's counts in `collect_status`: its `done` pages of the run's `ids` of those `present`,
    its failures (the first ones' errors), its empty pages and the devices that made them, from its
    run reports (`by_name`: `reports.source_reports`), flagged over the share `limit` of empty pages."""
    folder = sources_root(run_dir) / name
    reports = [r["pages"] for r in by_name.values()]
    failed_files = {p.stem: p for p in (folder / FAILED_DIR).glob("*.json") if not p.name.endswith(".invalid.json")}
    failed = {k: v for k, v in failed_files.items() if k in ids and k not in present}
    errors = {}
    for page_id, path in sorted(failed.items())[:20]:
        try:
            errors[page_id] = read_json(path).get("error")
        except (OSError, ValueError):
            errors[page_id] = "(unreadable failure record)"
    empty = {k: v for k, v in _empty_pages(folder, reports).items() if k in done}
    share = len(empty) / len(done) if done else None
    return {"source": name, "done": len(done), "stale": len(present - done), "failed": len(failed),
            "pending": len(ids - present - set(failed)), "errors": errors,
            "empty": len(empty), "empty_share": None if share is None else round(share, 4),
            "flagged": share is not None and share > limit,
            "empty_reasons": dict(sorted(empty.items())[:5]), "devices": _devices(reports, done)}


def collect_status(run_dir: Path) -> dict:
    """Counts per source, and per builtin stage kind of the registry its outputs (`stage_protocol.Outputs`:
    fused variants, review boards, transcripts, exports) under ``builtin``; failures with their
    one-line errors; the runners a source's reports say are running, alive or died
    (`liveness.runners_said_running`).

    Outputs count as done only while a run, `newsbag fuse` / `review` / `transcribe` / `export`
    would skip them (their stages' own rules, with the config the run recorded); the others are
    stale, with the reasons."""
    run_dir = Path(run_dir)
    records = read_pages(run_dir)
    ids = {p.page_id for p in records}
    expected: dict[str, str] = {}
    max_empty: dict[str, float] = {}
    record = rundir.config_record(run_dir)
    recorded = _recorded_stages(record)   # a record that is no config fails here, in one line
    options = _first_options(record, recorded)
    for stage in recorded:
        for variant in stage.get("variants", {}) if stage.get("kind", "model") == "model" else ():
            expected[f"{stage['name']}/{variant}"] = stage["name"]
            max_empty[f"{stage['name']}/{variant}"] = float(stage.get("max_empty_share", DEFAULT_MAX_EMPTY_SHARE))
    names = sorted(set(expected) | set(discover_sources(run_dir)))
    by_name = {name: source_reports(sources_root(run_dir) / name) for name in names}
    config = _recorded_config(record)
    # by the rule a run skips pages by, for the sources of the recorded config
    plan = None if config is None else plan_run(config, run_dir, records=records, reading=Reading(reports={
        name: [r["pages"] for r in found.values()] for name, found in by_name.items()}))
    done_by = {o.name: o.done_pages for s in (plan.stages if plan else ()) if s.stage.kind == "model" for o in s.outputs}
    fusion = rundir.fusion_summary(run_dir)
    degenerate = _degenerate_sources(fusion)
    now = time.time()
    sources = []
    for name in names:
        present = rundir.page_files(sources_root(run_dir) / name) & ids
        done = set(done_by[name]) if name in done_by else present
        sources.append({**_source_row(run_dir, name, ids, present, done, by_name[name],
                                      max_empty.get(name, DEFAULT_MAX_EMPTY_SHARE)),
                        "runners": liveness.runners_said_running(by_name[name], now),
                        "not_started": _not_started(run_dir, name),
                        "degenerate": degenerate.get(name, {}).get("pages", 0),
                        "degenerate_example": degenerate.get(name, {}).get("example")})
    outputs = _builtin_status(run_dir, records, options, plan)
    rejected = [asdict(r) for r in read_rejected(run_dir)]
    changed, missing = scan_changes(run_dir, records)
    by_kind: dict[str, int] = {}
    for r in rejected:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
    return {"run_dir": str(run_dir), "pages": len(ids), "rejected": rejected, "rejected_by_kind": by_kind,
            # a key of the `status --json` format, spelt as its readers parse it
            "judged_by_older_rule": sum(p.converted_by_older_rule for p in records),
            "scans_changed": len(changed), "scans_missing": len(missing),
            "sources": sources, "builtin": outputs, "recommended_variant": rundir.recommended_variant(run_dir, fusion)}


def status_lines(info: dict, job_note: Callable[[str], str]) -> list[str]:
    """The text of `newsbag status` for `collect_status`'s `info`: the run's inputs, then one line
    per source with what it has to say underneath, then one per builtin stage output (the Slurm
    jobs and the way out are the caller's). ``job_note(stage)``: what the run's Slurm jobs say of
    a stage with pages to do ("" when nothing)."""
    lines = [f"{info['run_dir']}: {info['pages']} page(s)", *_input_lines(info)]
    for s in info["sources"]:
        note = job_note(s["source"].split("/")[0]) if s["pending"] or s["stale"] or s["failed"] else ""
        lines += _source_lines(s, note)
    for kind, outputs in info["builtin"].items():
        lines += [_counts_line(f"{kind}/{o['name']}", o) for o in outputs]
        if builtin.get(kind).command and any(o["stale"] or not o["whole"] for o in outputs):
            lines.append(f"      run {builtin.update_command(kind, info['run_dir'])} to bring them up to date")
    return lines


def _input_lines(info: dict) -> list[str]:
    """Status lines of the run's inputs: rejected ones, pages converted by an older conversion rule,
    scans changed or missing since they were inspected."""
    lines = []
    if info["rejected"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(info["rejected_by_kind"].items()))
        lines.append(f"  rejected inputs {len(info['rejected'])} ({kinds}); see manifests/rejected.jsonl")
        lines += [f"      {r['error']}" for r in info["rejected"][:20]]
    if info["judged_by_older_rule"]:
        lines.append(f"  {info['judged_by_older_rule']} page(s) judged by an older conversion rule (newsbag upgraded): "
                     "the next `newsbag run` or `newsbag pages` judges them again and redoes those whose image changed")
    if info["scans_changed"]:
        lines.append(f"  scans changed since inspected: {info['scans_changed']} (rerun newsbag run / newsbag pages)")
    if info["scans_missing"]:
        lines.append(f"  scans missing since inspected: {info['scans_missing']} (outputs kept; boards, transcripts, "
                     "model passes and exports' image links need them: put them back where the manifest says)")
    return lines


def _source_lines(s: dict, note: str) -> list[str]:
    """A source's status line (``note``: its Slurm jobs' note), then its runners, why it did not
    run, its failed pages, its degenerate pages and, when flagged, its empty pages."""
    share = "" if s["empty_share"] is None else f" ({s['empty_share']:.0%})"
    flag = "  FLAGGED: model answers, nothing parses" if s["flagged"] else ""
    stale = f"  stale {s['stale']:>5}" if s["stale"] else ""
    devices = s["devices"]
    on = (f"  on {next(iter(devices))}" if len(devices) == 1
          else "  on " + ", ".join(f"{k} {v}" for k, v in devices.items()) if devices else "")
    lines = [f"  {s['source']:<36} done {s['done']:>6}  empty {s['empty']:>5}{share}  failed {s['failed']:>5}"
             f"{stale}  pending {s['pending']:>6}{on}{flag}" + (f"  ({note})" if note else "")]
    lines += [_runner_line(r) for r in s["runners"]]
    if s.get("not_started"):   # the source could not run: say why, and where its log is
        n = s["not_started"]
        seen = "" if not n["log"] or n["log"] in n["error"] else f"; log {n['log']}"
        lines.append(f"      {s['source']}: {'stopped' if n['started'] else 'not started'} ({n['at']}): "
                     f"{n['error']}{seen}")
    lines += [f"      {page_id}: {err}" for page_id, err in s["errors"].items()]
    if s["degenerate"]:
        lines.append(f"      degenerate on {s['degenerate']} page(s), e.g. {s['degenerate_example']}")
    if s["flagged"]:
        lines += [f"      {page_id}: empty: {reason}" for page_id, reason in s["empty_reasons"].items()]
    return lines


def _runner_line(r: dict) -> str:
    """A status line of a runner a source's report says is running (`liveness.runners_said_running`)."""
    return f"      runner pid {r['pid']} on {r['host']} " + (
        f"at work since {r['started']} ({r['report']})" if r["state"] == "running" else
        f"died without finishing ({r['report']} last written {r['updated']}; killed with newsbag?): "
        "its unfinished pages are pending; rerun to do them")


def _counts_line(label: str, outputs: dict) -> str:
    """A status line of a builtin stage's outputs (`stage_protocol.Outputs`: a fused variant, the review boards,
    transcripts, an export layer): done, failed, stale when any, pending, its note; then one line
    per reason its stale outputs are stale."""
    stale = f"  stale {outputs['stale']:>5}" if outputs["stale"] else ""
    note = f"  ({outputs['note']})" if outputs["note"] else ""
    why = "".join(f"\n      stale: {reason} ({n} page{'s' * (n != 1)})" for reason, n in outputs["reasons"].items())
    return (f"  {label:<36} done {outputs['done']:>6}  failed {outputs['failed']:>5}{stale}  "
            f"pending {outputs['pending']:>6}{note}{why}")
