"""Transcript CER and CPU on nzz: plain Tesseract, Tesseract on the ground-truth lines, newsbag per recogniser.

    nice -n 10 .venv/bin/python benchmarks/text_bench.py RUN [--gt ../shared/eval/nzz] [--model Fraktur]
                                                       [--recognizers recognize_tesseract,recognize] [--limit N]
                                                       [--gt-lines recognize_tesseract,recognize] [--no-baselines]
                                                       [--vote-lines [--readings FILE]] [--reuse]

RUN is a run directory whose layout stages, text lines and fusion ran on the nzz pages, e.g.
``newsbag run --run-dir RUN --input-dir ../shared/eval/nzz/images --stages tesseract,paddle_layout,text_lines,fusion``.
Its recommended variant is transcribed once per recogniser, in place (the last one's
transcripts stay in RUN/outputs/transcripts), with the options of the transcription entry of
configs/pipeline.local.json (PP-OCRv6 rec, script latin; another family with its own defaults).

Per page and for each half (the ground truth's pages sorted by page id: A even positions, B
odd; nothing but (c') and (e) is tuned, so both halves are held out elsewhere):
  (a) ``tesseract IMAGE - -l MODEL``: Tesseract's own layout and text, as a user runs it;
  (b) each recogniser of ``--gt-lines`` on the ground-truth line boxes: Tesseract MODEL
      (runners/recognize_tesseract.py), PP-OCRv6 (runners/recognize.py, its defaults): no
      layout errors, the recogniser alone; (b') Tesseract on the ground truth's text regions,
      whose lines Tesseract finds: what its reading would give with a perfect layout;
  (c) newsbag's transcript with the config's own options (``config``: the embedded default),
      or with each recogniser (``family`` or ``family/read``, e.g.
      ``recognize_tesseract/lines``: the stage's ``read`` option), or the recogniser bag of
      PP-OCRv6 and Tesseract MODEL (``bag/rover`` or ``bag/confident``: the stage's ``vote``),
      then each member alone on the bag's lines, and (c') the vote tuned on one half;
  (d) with ``--vote-lines``: PP-OCRv6 and Tesseract MODEL on the ground-truth line boxes, the
      better line of each by its ground truth (oracle) and the vote of the two; (e) the vote
      tuned on one half (its method, Tesseract's weight and min_score; in-sample there, held
      out on the other half).
Tesseract runs single-threaded (OMP_THREAD_LIMIT=1): its OpenMP threads spin on a loaded
machine and cost CPU without saving wall time.
CER is micro (edits / reference characters over the pages), whitespace collapsed; "raw"
compares as is, "GT conv." with the ground truth's conventions on both sides (long s as s,
line-end hyphen marks as "-"; `evaluate_text.gt_conventions`). CPU is user + system seconds
of this process and its children per page (model loads included). Reading order is the mean
pairwise agreement of `newsbag evaluate`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import _gt_lines
from _machine import cpu_seconds, machine_line

from newsbag.evaluate import match_pages
from newsbag import rundir
from newsbag.groundtruth import GtPage, gt_root, read_ground_truth
from newsbag.evaluate_text import evaluate_transcripts, gt_regions, reference_text
from newsbag.transcription.transcript import crop_plan
from newsbag.transcription.stage import run_transcription
from newsbag.transcription.bag import voted_lines
from newsbag.transcription.options import BagMember

REPO = Path(__file__).resolve().parents[1]


def plain_tesseract(pages: list[tuple[str, str, Path, GtPage]], model: str) -> tuple[list[dict], float]:
    """(a): the tesseract command on each page image; rows and CPU seconds."""
    rows, t0 = [], cpu_seconds()
    for page_id, half, image, ann in pages:
        text = subprocess.run(["tesseract", str(image), "-", "-l", model], capture_output=True, text=True,
                              check=True).stdout
        rows.append(_gt_lines.page_row(page_id, half, text, reference_text(ann)))
    return rows, cpu_seconds() - t0


def gt_lines(pages: list[tuple[str, str, Path, GtPage]], family: str, model: str, unit: str) -> tuple[list[dict], float]:
    """(b): a recogniser runner on the ground truth's line boxes (`unit` "line") or its text
    regions, whose lines Tesseract finds ("region"); rows and CPU seconds."""
    rows, t0 = [], cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="text_bench-") as plan_dir:
        # Tesseract: `model` alone, no re-reading
        params = {"models": [model], "sample_lines": 0, "recheck_below": 0} if family == "recognize_tesseract" else {}
        reader = _gt_lines.runner(family, params, plan_dir)
        for page_id, half, image, ann in pages:
            regions = gt_regions(ann)
            if unit == "line":
                boxes, of, _ = _gt_lines.gt_line_boxes(ann)
            else:
                boxes, of = [r["bbox_xyxy"] for r in regions], list(range(len(regions)))
            plan = crop_plan(boxes, [unit] * len(boxes), [ann.width, ann.height])
            Path(plan_dir, f"{page_id}.json").write_text(json.dumps(plan))
            texts: list[list[str]] = [[] for _ in regions]
            for line in reader.detect(str(image), {"page_id": page_id}):
                texts[of[line["order"]]].append(line["text"])
            rows.append(_gt_lines.page_row(page_id, half, "\n\n".join("\n".join(t) for t in texts), reference_text(ann)))
        reader.close()
    return rows, cpu_seconds() - t0


def newsbag_transcripts(run: Path, gt: Path, page_ids: list[str], halves: dict[str, str], family: str,
                        bag_members: dict[str, tuple[str, dict]], reuse: bool = False) -> tuple[list[dict], float, str]:
    """(c): the transcription stage with `family` on the run's recommended variant; rows, CPU seconds, variant."""
    config = json.loads((REPO / "configs" / "pipeline.local.json").read_text())
    options = next(s for s in config["stages"] if s.get("kind") == "transcription")
    options = {k: v for k, v in options.items() if k not in ("name", "kind", "default", "description")}
    family, _, read = family.partition("/")
    if family == "config":   # the config's transcription entry as it is (the embedded default: the cascade)
        read = options.get("read", "auto")
    else:   # one recogniser, or the bag of `bag_members` voted on every line, no noise rule
        options = {k: v for k, v in options.items() if k not in ("recognizers", "vote", "cascade", "drop_below")}
    if family == "bag":   # the recogniser bag of `bag_members`, voted by `read` (rover or confident)
        options = {**options, "recognizers": [{"family": f, "name": n, "recognizer": p}
                                              for n, (f, p) in bag_members.items()], "vote": read or "rover"}
        read = "lines"
    elif family != "config":
        options = {**options, "recognizer_family": family,
                   "recognizer": {"models": bag_members["tesseract"][1]["models"]} if family == "recognize_tesseract"
                   else {"script": "latin"}}
    options = {**options, "read": read or "auto"}
    t0 = cpu_seconds()
    # force=False with --reuse: the transcripts the run holds for these options are scored, none read again
    summary = run_transcription(run, page_ids, options, force=not reuse)
    cpu = cpu_seconds() - t0
    if summary["failed"]:
        raise SystemExit(f"{family}: {summary['failed']} page(s) failed: {summary['failures'][0]['error']}")
    result = next(r for r in evaluate_transcripts(run, gt) if r["variant"] == summary["variant"])
    rows = [{**r, "half": halves[r["page_id"]]} for r in result["rows"] if r["page_id"] in halves]
    return rows, cpu, summary["variant"]


def _gt_line_rows(pages: list, members: dict[str, tuple[str, dict]], readings: Path | None) -> None:
    """(d) and (e): the members' readings of the GT line boxes (from `readings` where it holds
    these pages), each member alone, the better line of each (oracle), and the vote."""
    read = _gt_lines.read_gt_lines(pages, members, readings)
    n = len(pages)
    names = list(members)
    families = {name: family for name, (family, _) in members.items()}
    for name in names:
        _print_row(f"(d) {name} on the GT line boxes", _gt_lines.member_rows(pages, read, name), read["cpu"][name], n)
    _print_row("(d) oracle: the better line of each by its GT", _gt_lines.oracle_rows(pages, read, names), 0, n)
    bag = [BagMember(families[name], name) for name in names]
    cpu = sum(read["cpu"].values())
    for method in _gt_lines.METHODS:
        _print_row(f"(d) vote {method}, weights 1", _gt_lines.vote_rows(pages, read, bag, method), cpu, n)
    _tuned_rows("(e)", pages, lambda some, members, method: _gt_lines.vote_rows(some, read, members, method),
                names, families, cpu)


def _tuned_rows(key: str, pages: list, rows, names: list[str], families: dict[str, str], cpu: float,
                min_scores: tuple[float, ...] = _gt_lines.MIN_SCORES) -> None:
    """The vote tuned on each half, scored on all pages: `rows(pages, members, method)`."""
    for half in sorted({p[1] for p in pages}):
        mine = [p for p in pages if p[1] == half]
        method, tuned, cer = _gt_lines.tune(lambda members, method: rows(mine, members, method), names, families,
                                            min_scores)
        m = tuned[1]
        _print_row(f"{key} vote tuned on {half} ({cer:.3f} there, in-sample): {method}, {m.name} weight "
                   f"{m.weight:g} min_score {m.min_score:g}", rows(pages, tuned, method), cpu, len(pages))


def revote_rows(run: Path, variant: str, pages: list, members: list[BagMember], method: str) -> list[dict]:
    """Page rows of a bag's transcripts with each line voted again by `members` and `method`
    from the members' line files the bag left (``_lines/<name>/``): the same lines and layout."""
    rows = []
    out = rundir.transcript_dir(run, variant)
    for page_id, half, _, ann in pages:
        read = [(m, json.loads((out / "_lines" / m.name / f"{page_id}.json").read_text(encoding="utf-8"))["regions"])
                for m in members]
        record = json.loads((out / f"{page_id}.json").read_text(encoding="utf-8"))
        rows.append(_gt_lines.page_row(page_id, half, _gt_lines.relined_text(record, voted_lines(read, method)),
                                       reference_text(ann)))
    return rows


def _bag_rows(run: Path, variant: str, pages: list, members: dict[str, tuple[str, dict]], cpu: float) -> None:
    """(c) each member of a bag alone on the bag's lines, and (c') the vote tuned on each half."""
    names = list(members)
    families = {name: family for name, (family, _) in members.items()}
    for name in names:
        _print_row(f"(c) ... its member {name} alone (the same lines)",
                   revote_rows(run, variant, pages, [BagMember(families[name], name)], "rover"), 0, len(pages))
    # min_score 0 only: a whole page's transcript is voted again for each setting (minutes a half)
    _tuned_rows("(c')", pages, lambda some, bag, method: revote_rows(run, variant, some, bag, method), names,
                families, cpu, (0.0,))


def _cer(rows: list[dict], key: str) -> str:
    chars = sum(r["ref_chars"] for r in rows)
    return f"{sum(r[key] for r in rows) / chars:.3f}" if chars else "-"


def _order(rows: list[dict]) -> str:
    orders = [r["order"] for r in rows if r.get("order_pairs")]
    return f"{sum(orders) / len(orders):.3f}" if orders else "-"



def _print_row(name: str, rows: list[dict], cpu: float, n_pages: int) -> None:
    by = {h: [r for r in rows if r["half"] == h] for h in "AB"}
    print(f"| {name} | {_cer(by['A'], 'edits')} | {_cer(by['B'], 'edits')} | {_cer(rows, 'edits')} "
          f"| {_cer(by['A'], 'edits_conv')} | {_cer(by['B'], 'edits_conv')} | {_cer(rows, 'edits_conv')} "
          f"| {_order(rows)} | {cpu / max(n_pages, 1):.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, nargs="?", help="none: only the rows on the GT boxes, (a), (b), (d), (e)")
    parser.add_argument("--gt", type=Path, default=REPO.parent / "shared" / "eval" / "nzz")
    parser.add_argument("--model", default="Fraktur", help="traineddata of (a) and (b)")
    parser.add_argument("--recognizers", default="recognize_tesseract,recognize_tesseract/lines,recognize")
    parser.add_argument("--limit", type=int, default=0, help="only the first N matched pages (0: all)")
    parser.add_argument("--gt-lines", default="recognize_tesseract,recognize",
                        help="recognisers of (b), on the ground-truth line boxes ('': none)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="no (a) or (b'): they run no newsbag code, so a change of newsbag leaves them as they were")
    parser.add_argument("--vote-lines", action="store_true",
                        help="(d) each bag member, their oracle and their vote on the GT line boxes, (e) the vote tuned "
                             "on one half and scored on the other")
    parser.add_argument("--reuse", action="store_true",
                        help="(c): score the run's current transcripts; read only pages that are not (CPU: theirs)")
    parser.add_argument("--readings", type=Path, help="(d): keep the members' readings in this JSON file, and reuse it")
    args = parser.parse_args()
    # The bag's members: PP-OCRv6 (the recognize family's defaults) and Tesseract MODEL.
    members = {"ppocr": ("recognize", {}),
               "tesseract": ("recognize_tesseract", {"models": [args.model], "sample_lines": 0, "recheck_below": 0})}
    os.environ["OMP_THREAD_LIMIT"] = "1"   # for the tesseract command (the runner sets it itself)
    print(machine_line(), flush=True)

    gt_pages = read_ground_truth(args.gt)[0]
    matched = sorted(match_pages(args.run, args.gt)[0] if args.run else [({"page_id": g.page_id}, g) for g in gt_pages],
                     key=lambda m: m[1].page_id)
    # The halves are fixed over the whole ground truth, whichever of its pages the run holds.
    half_of = _gt_lines.halves(g.page_id for g in gt_pages)
    halves = {rec["page_id"]: half_of[ann.page_id] for rec, ann in matched}
    if args.limit:
        matched = matched[:args.limit]
        halves = {rec["page_id"]: halves[rec["page_id"]] for rec, _ in matched}
    pages = [(rec["page_id"], halves[rec["page_id"]], gt_root(args.gt) / ann.image, ann) for rec, ann in matched]
    print(f"{len(pages)} pages ({sum(h == 'A' for h in halves.values())} in half A): "
          f"{', '.join(ann.page_id for _, ann in matched)}", flush=True)

    print("| what | CER raw A | B | all | CER GT conv. A | B | all | reading order | CPU s/page |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    t0 = time.monotonic()
    if not args.no_baselines:
        _print_row(f"(a) tesseract -l {args.model}, its own layout", *plain_tesseract(pages, args.model), len(pages))
        _print_row(f"(b') Tesseract {args.model} on the GT regions",
                   *gt_lines(pages, "recognize_tesseract", args.model, "region"), len(pages))
    for family in filter(None, args.gt_lines.split(",")):
        name = f"Tesseract {args.model}" if family == "recognize_tesseract" else "PP-OCRv6 (recognize)"
        _print_row(f"(b) {name} on the GT line boxes", *gt_lines(pages, family, args.model, "line"), len(pages))
    for family in [f for f in args.recognizers.split(",") if f] if args.run else ():
        rows, cpu, variant = newsbag_transcripts(args.run, args.gt, [p[0] for p in pages], halves, family, members,
                                                 args.reuse)
        _print_row(f"(c) newsbag {family}, {variant} variant", rows, cpu, len(pages))
        if family.startswith("bag"):
            _bag_rows(args.run, variant, pages, members, cpu)
    if args.vote_lines:
        _gt_line_rows(pages, members, args.readings)
    print(f"\n{time.monotonic() - t0:.0f} s wall")


if __name__ == "__main__":
    main()
