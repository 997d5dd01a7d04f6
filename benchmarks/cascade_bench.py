"""A recogniser cascade and noise lines through newsbag's layout on nzz, from a bag's readings: rules tuned on one half, scored on the other.

    nice -n 10 .venv/bin/python benchmarks/cascade_bench.py RUN [--gt ../shared/eval/nzz]

RUN holds transcripts of the recommended variant read by the bag of PP-OCRv6 (``ppocr``) and
Tesseract (``tesseract``) on every line, e.g. made by
``benchmarks/text_bench.py RUN --recognizers bag/rover``: each member's line files are under
``outputs/transcripts/<variant>/_lines/<name>/``. Nothing is read again: each rule is applied
to those readings as the stage applies it (`transcription_cascade.unsure_lines`,
`transcription_bag.voted_lines`, `transcription_cascade.noise_lines`), the page's transcript
lines take the result, and the page CER (GT conventions) is counted per half (the ground
truth's pages sorted by page id: A even positions, B odd).

Rows: each member alone, the full vote, the cascade (Tesseract reads the lines PP-OCRv6 read
under a score, or as nothing, or shorter than some heights), and the noise rule (a line no
reading scored at least ``drop_below`` is left out), each tuned on one half (in-sample there)
and scored on the other (held out). The share of lines (and of line width, which Tesseract's
CPU follows) sent to Tesseract is printed with each cascade.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from _gt_lines import halves, relined_text
from _machine import machine_line

from newsbag import rundir
from newsbag.evaluate import match_pages
from newsbag.evaluate_text import page_edits, reference_text
from newsbag.groundtruth import read_ground_truth
from newsbag.transcription.bag import voted_lines
from newsbag.transcription.cascade import noise_lines, unsure_lines
from newsbag.transcription.options import BagMember, Cascade

REPO = Path(__file__).resolve().parents[1]
PPOCR, TESS = BagMember("recognize", "ppocr"), BagMember("recognize_tesseract", "tesseract")
SCORES = (0.0, 0.8, 0.9, 0.95, 0.97, 0.98)
ASPECTS = (0.0, 10.0, 20.0)
DROPS = (0.0, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7)


def load(run: Path, gt: Path) -> list[dict]:
    """Per matched page: its half, transcript record, each member's lines by crop and the reference text."""
    half = halves(g.page_id for g in read_ground_truth(gt)[0])
    variant = rundir.recommended_variant(run)
    out = rundir.transcript_dir(run, variant)
    pages = []
    for rec, ann in sorted(match_pages(run, gt)[0], key=lambda m: m[1].page_id):
        pid = rec["page_id"]
        lines = {m: json.loads((out / "_lines" / m / f"{pid}.json").read_text(encoding="utf-8"))["regions"]
                 for m in ("ppocr", "tesseract")}
        pages.append({"half": half[ann.page_id], "record": json.loads((out / f"{pid}.json").read_text()),
                      "lines": lines, "ref": reference_text(ann)})
    return pages


def _voted(page: dict, key: str, read: list) -> dict[int, dict]:
    """The page's lines voted from `read`, by crop, computed once per page (a rule only picks which)."""
    if key not in page:
        page[key] = {line["order"]: line for line in voted_lines(read, "rover")}
    return page[key]


def page_lines(page: dict, rule: Cascade | None, members: tuple[str, ...], drop: float) -> tuple[list[dict], int, float]:
    """The page's line records as the stage makes them under `rule` (None: the `members` read
    every line), the number of lines sent to Tesseract and their width."""
    first = page["lines"]["ppocr"]
    alone = _voted(page, "ppocr", [(PPOCR, first)])
    both = _voted(page, "both", [(PPOCR, first), (TESS, page["lines"]["tesseract"])])
    if rule is None:
        lines = list((both if len(members) == 2 else alone if members == ("ppocr",) else
                      _voted(page, "tesseract", [(TESS, page["lines"]["tesseract"])])).values())
        sent = {line["order"] for line in page["lines"]["tesseract"]} if "tesseract" in members else set()
    else:
        sent = set(unsure_lines(first, rule))
        lines = [both[o] if o in sent else line for o, line in alone.items()]
    width = sum(line["bbox_xyxy"][2] - line["bbox_xyxy"][0] for line in first if line["order"] in sent)
    return noise_lines(lines, drop), len(sent), width


def score(pages: list[dict], rule: Cascade | None, members=("ppocr", "tesseract"), drop: float = 0.0
          ) -> dict[str, float]:
    """CER (GT conventions) per half and in all, and the share of lines and line width sent."""
    edits, chars = {"A": 0, "B": 0}, {"A": 0, "B": 0}
    n_sent = n_lines = 0
    w_sent = w_all = 0.0
    for page in pages:
        lines, k, w = page_lines(page, rule, members, drop)
        n_sent, n_lines = n_sent + k, n_lines + len(page["lines"]["ppocr"])
        w_sent += w
        w_all += sum(line["bbox_xyxy"][2] - line["bbox_xyxy"][0] for line in page["lines"]["ppocr"])
        _, e, n = page_edits(relined_text(page["record"], lines), page["ref"])
        edits[page["half"]] += e
        chars[page["half"]] += n
    return {"A": edits["A"] / max(chars["A"], 1), "B": edits["B"] / max(chars["B"], 1),
            "all": sum(edits.values()) / sum(chars.values()), "lines": n_sent / max(n_lines, 1),
            "width": w_sent / max(w_all, 1.0)}


def _row(name: str, s: dict, tuned_on: str = "") -> None:
    mark = {h: (f"*{s[h]:.3f}*" if h == tuned_on else (f"**{s[h]:.3f}**" if tuned_on else f"{s[h]:.3f}"))
            for h in "AB"}
    print(f"| {name} | {mark['A']} | {mark['B']} | {s['all']:.3f} | {s['lines']:.2f} | {s['width']:.2f} |", flush=True)


def tuned(pages: list[dict], name: str, grid: list[tuple[Cascade | None, float]]) -> None:
    """Each setting of `grid` scored on each half; the best of each half scored on the other."""
    for half in "AB":
        mine = [p for p in pages if p["half"] == half]
        best = min(grid, key=lambda g: score(mine, g[0], drop=g[1])[half])
        rule, drop = best
        what = (f"score_below {rule.score_below:g}, aspect_below {rule.aspect_below:g}" if rule else "every line")
        _row(f"{name} tuned on {half}: {what}, drop_below {drop:g}", score(pages, rule, drop=drop), half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--gt", type=Path, default=REPO.parent / "shared" / "eval" / "nzz")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    pages = load(args.run, args.gt)
    print(f"{len(pages)} pages ({sum(p['half'] == 'A' for p in pages)} in half A)\n")
    print("| through newsbag's layout | CER A | B | all | lines sent | line width sent |")
    print("|---|---|---|---|---|---|")
    _row("PP-OCRv6 alone", score(pages, None, ("ppocr",)))
    _row("Tesseract alone", score(pages, None, ("tesseract",)))
    _row("vote rover, every line", score(pages, None))
    for s in (0.8, 0.9, 0.95, 0.98):
        _row(f"cascade score_below {s:g}", score(pages, Cascade(score_below=s)))
    cascades = [Cascade(score_below=s, aspect_below=a) for s, a in itertools.product(SCORES, ASPECTS)]
    tuned(pages, "noise rule, PP-OCRv6 alone", [(Cascade(score_below=0.0, max_share=0.0), d) for d in DROPS])
    tuned(pages, "vote, noise rule", [(None, d) for d in DROPS])
    tuned(pages, "cascade", [(c, 0.0) for c in cascades])
    tuned(pages, "cascade or vote, and noise rule", [(c, d) for c, d in itertools.product([None, *cascades], DROPS)])


if __name__ == "__main__":
    main()
