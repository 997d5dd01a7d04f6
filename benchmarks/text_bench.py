"""Transcript CER and CPU on nzz: plain Tesseract, Tesseract on the ground-truth lines, newsbag per recogniser.

    nice -n 10 .venv/bin/python benchmarks/text_bench.py RUN [--gt ../shared/eval/nzz] [--model Fraktur]
                                                       [--recognizers recognize_tesseract,recognize] [--limit N]
                                                       [--gt-lines recognize_tesseract,recognize] [--no-baselines]

RUN is a run directory whose layout stages, text lines and fusion ran on the nzz pages, e.g.
``newsbag run --run-dir RUN --input-dir ../shared/eval/nzz/images --stages tesseract,paddle_layout,text_lines,fusion``.
Its recommended variant is transcribed once per recogniser, in place (the last one's
transcripts stay in RUN/outputs/transcripts), with the options of the transcription entry of
configs/pipeline.local.json (PP-OCRv6 rec, script latin; another family with its own defaults).

Per page and for each half (the ground truth's pages sorted by page id: A even positions, B
odd; nothing here is tuned, so both halves are held out):
  (a) ``tesseract IMAGE - -l MODEL``: Tesseract's own layout and text, as a user runs it;
  (b) each recogniser of ``--gt-lines`` on the ground-truth line boxes: Tesseract MODEL
      (runners/recognize_tesseract.py), PP-OCRv6 (runners/recognize.py, its defaults): no
      layout errors, the recogniser alone; (b') Tesseract on the ground truth's text regions,
      whose lines Tesseract finds: what its reading would give with a perfect layout;
  (c) newsbag's transcript with each recogniser (``family`` or ``family/read``, e.g.
      ``recognize_tesseract/lines``: the stage's ``read`` option).
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
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine_line

from newsbag.config import load_tool_spec
from newsbag.evaluate import match_pages
from newsbag.groundtruth import GtPage, gt_root
from newsbag.evaluate_text import evaluate_transcripts, gt_regions, page_edits, reference_text
from newsbag.resources import runners_dir
from newsbag.transcript import crop_plan
from newsbag.transcription import run_transcription

REPO = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _row(page_id: str, half: str, pred: str, ref: str) -> dict:
    edits, edits_conv, chars = page_edits(pred, ref)
    return {"page_id": page_id, "half": half, "edits": edits, "edits_conv": edits_conv, "ref_chars": chars}


def plain_tesseract(pages: list[tuple[str, str, Path, GtPage]], model: str) -> tuple[list[dict], float]:
    """(a): the tesseract command on each page image; rows and CPU seconds."""
    rows, t0 = [], _cpu()
    for page_id, half, image, ann in pages:
        text = subprocess.run(["tesseract", str(image), "-", "-l", model], capture_output=True, text=True,
                              check=True).stdout
        rows.append(_row(page_id, half, text, reference_text(ann)))
    return rows, _cpu() - t0


def _reader(family: str, model: str, plan_dir: str):
    """A recogniser runner of `family` with its tool.json defaults (Tesseract: `model` alone, no re-reading)."""
    sys.path.insert(0, str(runners_dir()))
    params = {name: decl["default"] for name, decl in load_tool_spec(family, runners_dir())["parameters"].items()}
    if family == "recognize_tesseract":
        from recognize_tesseract import TesseractRecognizer

        return TesseractRecognizer({**params, "models": [model], "sample_lines": 0, "recheck_below": 0,
                                    "plan_dir": plan_dir}, "cpu", True)
    from recognize import Recognizer

    return Recognizer({**params, "plan_dir": plan_dir}, "cpu", True)


def gt_lines(pages: list[tuple[str, str, Path, GtPage]], family: str, model: str, unit: str) -> tuple[list[dict], float]:
    """(b): a recogniser runner on the ground truth's line boxes (`unit` "line") or its text
    regions, whose lines Tesseract finds ("region"); rows and CPU seconds."""
    rows, t0 = [], _cpu()
    with tempfile.TemporaryDirectory(prefix="text_bench-") as plan_dir:
        reader = _reader(family, model, plan_dir)
        for page_id, half, image, ann in pages:
            regions = gt_regions(ann)
            if unit == "line":
                boxes = [ln["bbox_xyxy"] for r in regions for ln in r.get("lines") or []]
                of = [k for k, r in enumerate(regions) for _ in r.get("lines") or []]
            else:
                boxes, of = [r["bbox_xyxy"] for r in regions], list(range(len(regions)))
            plan = crop_plan(boxes, [unit] * len(boxes), [ann.width, ann.height])
            Path(plan_dir, f"{page_id}.json").write_text(json.dumps(plan))
            texts: list[list[str]] = [[] for _ in regions]
            for line in reader.detect(str(image), {"page_id": page_id}):
                texts[of[line["order"]]].append(line["text"])
            rows.append(_row(page_id, half, "\n\n".join("\n".join(t) for t in texts), reference_text(ann)))
        reader.close()
    return rows, _cpu() - t0


def newsbag_transcripts(run: Path, gt: Path, page_ids: list[str], halves: dict[str, str], family: str
                        ) -> tuple[list[dict], float, str]:
    """(c): the transcription stage with `family` on the run's recommended variant; rows, CPU seconds, variant."""
    config = json.loads((REPO / "configs" / "pipeline.local.json").read_text())
    options = next(s for s in config["stages"] if s.get("kind") == "transcription")
    options = {k: v for k, v in options.items() if k not in ("name", "kind", "default", "description")}
    family, _, read = family.partition("/")
    if family != options.get("recognizer_family"):
        options = {**options, "recognizer_family": family, "recognizer": {}}
    options = {**options, "read": read or "auto"}
    t0 = _cpu()
    summary = run_transcription(run, page_ids, options, force=True)
    cpu = _cpu() - t0
    if summary["failed"]:
        raise SystemExit(f"{family}: {summary['failed']} page(s) failed: {summary['failures'][0]['error']}")
    result = next(r for r in evaluate_transcripts(run, gt) if r["variant"] == summary["variant"])
    rows = [{**r, "half": halves[r["page_id"]]} for r in result["rows"] if r["page_id"] in halves]
    return rows, cpu, summary["variant"]


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
    parser.add_argument("run", type=Path)
    parser.add_argument("--gt", type=Path, default=REPO.parent / "shared" / "eval" / "nzz")
    parser.add_argument("--model", default="Fraktur", help="traineddata of (a) and (b)")
    parser.add_argument("--recognizers", default="recognize_tesseract,recognize_tesseract/lines,recognize")
    parser.add_argument("--limit", type=int, default=0, help="only the first N matched pages (0: all)")
    parser.add_argument("--gt-lines", default="recognize_tesseract,recognize",
                        help="recognisers of (b), on the ground-truth line boxes ('': none)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="no (a) or (b'): they run no newsbag code, so a change of newsbag leaves them as they were")
    args = parser.parse_args()
    os.environ["OMP_THREAD_LIMIT"] = "1"   # for the tesseract command (the runner sets it itself)
    print(machine_line(), flush=True)

    matched = sorted(match_pages(args.run, args.gt)[0], key=lambda m: m[1].page_id)
    # The halves are fixed over the whole ground truth, whichever of its pages the run holds.
    gt_ids = sorted(json.loads(p.read_text(encoding="utf-8"))["page_id"]
                    for p in (args.gt / "annotations").glob("*.json"))
    halves = {rec["page_id"]: "AB"[gt_ids.index(ann.page_id) % 2] for rec, ann in matched}
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
    for family in args.recognizers.split(","):
        rows, cpu, variant = newsbag_transcripts(args.run, args.gt, [p[0] for p in pages], halves, family)
        _print_row(f"(c) newsbag {family}, {variant} variant", rows, cpu, len(pages))
    print(f"\n{time.monotonic() - t0:.0f} s wall")


if __name__ == "__main__":
    main()
