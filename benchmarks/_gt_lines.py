"""Recognisers and their vote on the ground truth's line boxes: readings, page texts, the vote's tuning on one half.

Each recogniser runner reads the ground-truth line boxes of each page once; its readings
(text, score, word confidences per line) are kept in a JSON file, so the vote's methods and
weights are compared on the same readings without reading the pages again. The vote is the
stage's own (`transcription.bag.voted_lines`).
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from _machine import cpu_seconds
from nzz_eval import split_halves
from rapidfuzz.distance import Levenshtein

from newsbag.tool_spec import load_tool_spec, validate_params
from newsbag.evaluate_text import gt_conventions, gt_regions, page_edits, read_text, reference_text
from newsbag.resources import runners_dir
from newsbag.transcription.transcript import crop_plan
from newsbag.transcription.bag import voted_lines
from newsbag.transcription.options import BagMember
from newsbag.transcription.vote import METHODS

# The grid the vote is tuned on: the second member's weight (the first's is 1) and min_score, and the method.
WEIGHTS = (0.75, 1.0, 1.25, 1.5, 2.0)
MIN_SCORES = (0.0, 0.8, 0.9)


def halves(page_ids: Iterable[str]) -> dict[str, str]:
    """Each ground-truth page's half, "A" or "B", as `nzz_eval.split_halves` cuts them."""
    return {page_id: half for half, ids in zip("AB", split_halves(list(page_ids))) for page_id in ids}


def runner(family: str, params: dict, plan_dir: str):
    """A recogniser runner's class loaded in this process, with its tool.json defaults."""
    sys.path.insert(0, str(runners_dir()))
    spec = load_tool_spec(family, runners_dir())
    full = {**validate_params(family, params, spec), "plan_dir": plan_dir}
    if family == "recognize_tesseract":
        from recognize_tesseract import TesseractRecognizer

        return TesseractRecognizer(full, "cpu", True)
    from recognize import Recognizer

    return Recognizer(full, "cpu", True)


def gt_line_boxes(ann: dict) -> tuple[list, list[int], list[str]]:
    """The ground truth's line boxes in reading order, each one's region index, and its text."""
    regions = gt_regions(ann)
    lines = [(ln["bbox_xyxy"], k, ln.get("text") or "") for k, r in enumerate(regions) for ln in r.get("lines") or []]
    return [b for b, _, _ in lines], [k for _, k, _ in lines], [t for _, _, t in lines]


def read_gt_lines(pages: list, members: dict[str, tuple[str, dict]], keep: Path | None = None) -> dict:
    """{"lines": {member: {page_id: [line records]}}, "cpu": {member: seconds}}: each member's
    runner on every page's ground-truth line boxes. With `keep`, a JSON file: the members it
    holds for these pages are not read again, and it is written after each member (a long
    run stopped midway keeps what it read)."""
    out: dict = json.loads(keep.read_text()) if keep and keep.exists() else {"lines": {}, "cpu": {}}
    ids = sorted(p[0] for p in pages)
    members = {n: m for n, m in members.items() if sorted(out["lines"].get(n, {})) != ids}
    with tempfile.TemporaryDirectory(prefix="text_bench-") as plan_dir:
        for page_id, _, _, ann in pages:
            boxes = gt_line_boxes(ann)[0]
            Path(plan_dir, f"{page_id}.json").write_text(json.dumps(
                crop_plan(boxes, ["line"] * len(boxes), [ann.width, ann.height])))
        for name, (family, params) in members.items():
            t0 = cpu_seconds()
            reader = runner(family, params, plan_dir)
            out["lines"][name] = {page_id: reader.detect(str(image), {"page_id": page_id})
                                  for page_id, _, image, _ in pages}
            reader.close()
            out["cpu"][name] = cpu_seconds() - t0
            if keep:
                keep.write_text(json.dumps(out))
            print(f"  read the GT lines with {name}: {out['cpu'][name]:.0f} CPU s", file=sys.stderr, flush=True)
    return out


def page_text(ann: dict, lines: list[dict]) -> str:
    """A page's text of its line records (by crop order) laid out as the ground truth's regions."""
    _, of, _ = gt_line_boxes(ann)
    texts: list[list[str]] = [[] for _ in gt_regions(ann)]
    for line in sorted(lines, key=lambda ln: ln["order"]):
        texts[of[line["order"]]].append(line.get("text") or "")
    return "\n\n".join("\n".join(t) for t in texts)


def relined_text(record: dict, lines: list[dict]) -> str:
    """The text of a transcript `record` (`evaluate_text.read_text`) with each of its lines read
    as the line of `lines` with the same box ("" where none has): its layout, lines read otherwise."""
    text = {tuple(line["bbox_xyxy"]): line["text"] for line in lines}
    regions = [{**region, "lines": [{**line, "text": text.get(tuple(line["bbox_xyxy"]), "")}
                                    for line in region["lines"]]} for region in record["regions"]]
    return read_text({**record, "regions": regions})


def page_row(page_id: str, half: str, pred: str, ref: str) -> dict:
    """A page's row of the benchmarks' tables: its edits as read and with the ground truth's conventions."""
    edits, edits_conv, chars = page_edits(pred, ref)
    return {"page_id": page_id, "half": half, "edits": edits, "edits_conv": edits_conv, "ref_chars": chars}


def member_rows(pages: list, read: dict, name: str) -> list[dict]:
    return [page_row(pid, half, page_text(ann, read["lines"][name][pid]), reference_text(ann))
            for pid, half, _, ann in pages]


def vote_rows(pages: list, read: dict, members: list[BagMember], method: str) -> list[dict]:
    """Page rows of the stage's vote of the members' readings."""
    rows = []
    for pid, half, _, ann in pages:
        voted = voted_lines([(m, read["lines"][m.name][pid]) for m in members], method)
        rows.append(page_row(pid, half, page_text(ann, voted), reference_text(ann)))
    return rows


def oracle_rows(pages: list, read: dict, names: list[str]) -> list[dict]:
    """Page rows of the better reading of each line by its ground truth (the most any choice of whole lines gives)."""
    rows = []
    for pid, half, _, ann in pages:
        truth = gt_line_boxes(ann)[2]
        by_order = [{ln["order"]: ln for ln in read["lines"][n][pid]} for n in names]
        best = []
        for order in sorted(set().union(*by_order)):
            got = [b[order] for b in by_order if order in b]
            best.append(min(got, key=lambda ln: Levenshtein.distance(gt_conventions(ln.get("text") or ""),
                                                                     gt_conventions(truth[order]))))
        rows.append(page_row(pid, half, page_text(ann, best), reference_text(ann)))
    return rows


def cer(rows: list[dict]) -> float:
    """Micro CER with the ground truth's conventions."""
    return sum(r["edits_conv"] for r in rows) / max(sum(r["ref_chars"] for r in rows), 1)


def tune(rows: Callable[[list[BagMember], str], list[dict]], names: list[str], families: dict[str, str],
         min_scores: tuple[float, ...] = MIN_SCORES) -> tuple[str, list[BagMember], float]:
    """The method and the second member's weight and min_score whose `rows` (one half's pages,
    voted by those members and method) have the lowest CER: (method, members, that CER, in-sample)."""
    best = None
    for method, w, floor in itertools.product(METHODS, WEIGHTS, min_scores):
        members = [BagMember(families[names[0]], names[0]),
                   BagMember(families[names[1]], names[1], weight=w, min_score=floor)]
        score = cer(rows(members, method))
        if best is None or score < best[2]:
            best = (method, members, score)
    return best
