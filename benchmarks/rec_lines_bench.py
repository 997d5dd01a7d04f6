"""PP-OCRv6 rec (the `recognize` runner) on the ground truth's line boxes: word gaps, long s, line height.

    nice -n 10 .venv/bin/python benchmarks/rec_lines_bench.py [--gt ../shared/eval/nzz] [--cache FILE]
                                                             [--scales 1,0.5,0.35,0.25] [--scale-pages 4]

Every ground-truth text line of ../shared/eval/nzz is read once (script latin, no word-gap
rule); per line the greedy CTC path after the script mask is kept (in `--cache`, outside the
repository: the data is CC BY-NC), so the rules below are tried without reading again:
  - the word-gap rule (`recognize`'s ``word_gap``): a run of blank frames wider than a share
    of the line height between two characters is a space. The share is tuned on half A (the
    ground truth's pages sorted by page id, even positions) and reported on half B, and the
    reverse;
  - the confusions left: spaces missing or extra, ſ read as f (and the reverse), counted on
    the raw text by Levenshtein alignment;
  - long s (`recognize`'s ``long_s``): an f before a letter, read in a frame where long s or s
    has more than a share of f's probability, is read as long s (tuned on one half, reported on
    the other; with ``--limit``, the first pages only);
  - line height: the first `--scale-pages` pages of half A scaled down (page and boxes), and the
    CER by the median line box height in pixels the recogniser then sees.
CER is micro over lines (edits / reference characters), whitespace collapsed, with the ground
truth's conventions (`evaluate_text.gt_conventions`: ſ as s, line-end ¬ ⸗ = as -).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from _gt_lines import halves, runner
from _machine import cpu_seconds, machine_line
from PIL import Image

from newsbag.groundtruth import GtPage, gt_root, read_ground_truth
from newsbag.evaluate_text import gt_regions, page_edits, reference_text
from newsbag.resources import runners_dir

REPO = Path(__file__).resolve().parents[1]
GAPS = (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 1.0)


def gt_pages(gt: Path) -> list[tuple[str, str, GtPage]]:
    """(page id, half, ground truth) of every ground-truth page, halves as text_bench.py and nzz_eval.py cut them."""
    pages = sorted(read_ground_truth(gt)[0], key=lambda g: g.page_id)
    half = halves(g.page_id for g in pages)
    return [(g.page_id, half[g.page_id], g) for g in pages]


def read_lines(reader, image: np.ndarray, boxes: np.ndarray) -> list[dict]:
    """Per line: its greedy CTC path (class per frame), the frames per line height, and the
    probabilities of f, long s and s in each frame (the long-s rule)."""
    from recognize import REC_HEIGHT

    fss = [reader.characters.index(c) + 1 for c in "fſs"]
    out: list[dict] = [{}] * len(boxes)
    for chunk, probs, width in reader.batches(image, boxes):
        best = probs.argmax(axis=2).astype(np.uint16)
        for i, path, p in zip(chunk, best, probs):
            out[i] = {"path": path, "frames_per_height": REC_HEIGHT * probs.shape[1] / width,
                      "p_fss": p[:, fss].astype(np.float16)}
    return out


def collect(gt: Path, scales: list[float], scale_pages: int, limit: int = 0) -> dict:
    """Read every GT line (of the first `limit` pages, 0: all) at scale 1, and the first
    `scale_pages` pages of half A at each of `scales`."""
    reader = runner("recognize", {"word_gap": 0, "long_s": 0}, "")   # the rules are tried on the paths
    lines, cpu = [], {}
    pages = gt_pages(gt)[:limit or None]
    scaled = {page_id for page_id, half, _ in pages if half == "A"}
    scaled = set(sorted(scaled)[:scale_pages])
    for page_id, half, ann in pages:
        gt_lines = [ln for r in gt_regions(ann) for ln in r.get("lines") or []]
        if not gt_lines:
            continue
        image = np.asarray(Image.open(gt_root(gt) / ann.image).convert("RGB"))
        boxes = np.array([ln["bbox_xyxy"] for ln in gt_lines], dtype=np.float64)
        for scale in [1.0] + [s for s in scales if s != 1] if page_id in scaled else [1.0]:
            t0 = cpu_seconds()
            img = image if scale == 1 else np.asarray(Image.fromarray(image).resize(
                (round(image.shape[1] * scale), round(image.shape[0] * scale)), Image.BILINEAR))
            read = read_lines(reader, img, boxes * scale)
            if scale == 1:
                cpu[page_id] = cpu_seconds() - t0
            for ln, box, r in zip(gt_lines, boxes * scale, read):
                lines.append({"page_id": page_id, "half": half, "scale": scale, "ref": ln["text"] or "",
                              "height": float(box[3] - box[1]), **r})
        print(f"{page_id} {half}: {len(gt_lines)} lines, {cpu[page_id]:.1f} CPU-s", file=sys.stderr, flush=True)
    return {"characters": reader.characters, "lines": lines, "cpu": cpu}


def decode(line: dict, characters: list[str], gap: float, long_s: float = 0.0) -> str:
    """The line's text by `recognize`'s decoding; `long_s` > 0: a frame read as f whose long s
    or s has more than that share of f's probability is read as long s."""
    from recognize import ctc_text, halfwidth_latin

    frames = None
    if long_s > 0:
        p = line["p_fss"].astype(np.float32)
        frames = np.maximum(p[:, 1], p[:, 2]) > long_s * p[:, 0]   # `recognize.long_s_frames`
    return halfwidth_latin(ctc_text(line["path"].astype(np.int64), characters, gap * line["frames_per_height"],
                                    frames)[0])


def cer(lines: list[dict], texts: list[str]) -> float:
    edits = chars = 0
    for line, text in zip(lines, texts):
        _, e, n = page_edits(text, line["ref"])
        edits, chars = edits + e, chars + n
    return edits / max(chars, 1)


def page_rows(gt: Path, lines: list[dict], texts: list[str]) -> str:
    """text_bench.py's (b) row: page CER raw and with GT conventions per half, the lines of a page
    joined in the ground truth's order (line and region breaks are whitespace, which CER collapses)."""
    by_page: dict[str, list[str]] = {}
    for line, text in zip(lines, texts):
        by_page.setdefault(line["page_id"], []).append(text)
    totals = {h: [0, 0, 0] for h in "AB"}
    for page_id, half, ann in gt_pages(gt):
        if page_id in by_page:
            for k, v in enumerate(page_edits("\n".join(by_page[page_id]), reference_text(ann))):
                totals[half][k] += v
    raw = [t[0] / max(t[2], 1) for t in totals.values()]
    conv = [t[1] / max(t[2], 1) for t in totals.values()]
    every = [sum(t[k] for t in totals.values()) / max(sum(t[2] for t in totals.values()), 1) for k in (0, 1)]
    return (f"{raw[0]:.3f} | {raw[1]:.3f} | {every[0]:.3f} | {conv[0]:.3f} | {conv[1]:.3f} | {every[1]:.3f}")


def confusions(lines: list[dict], texts: list[str]) -> Counter:
    """Counts of the edits of interest (raw text, Levenshtein alignment) and all edits."""
    from rapidfuzz.distance import Levenshtein

    counts: Counter = Counter()
    for line, text in zip(lines, texts):
        pred, ref = " ".join(text.split()), " ".join(line["ref"].split())
        for op, i, j in Levenshtein.editops(pred, ref):
            counts["all"] += 1
            if op == "insert" and ref[j] == " ":
                counts["space missing"] += 1
            elif op == "delete" and pred[i] == " ":
                counts["space extra"] += 1
            elif op == "replace" and {pred[i], ref[j]} in ({"f", "s"}, {"f", "ſ"}, {"s", "ſ"}):
                counts[f"{pred[i]} read for {ref[j]}"] += 1
        counts["ſ read"] += pred.count("ſ")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gt", type=Path, default=REPO.parent / "shared" / "eval" / "nzz")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "newsbag-rec-lines.pkl",
                        help="the CTC paths read (outside the repository: the ground truth is CC BY-NC)")
    parser.add_argument("--scales", default="1,0.7,0.5,0.4,0.3,0.25")
    parser.add_argument("--scale-pages", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0, help="only the first N pages by page id (0: all)")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.cache.exists():
        data = pickle.loads(args.cache.read_bytes())
    else:
        data = collect(args.gt, [float(s) for s in args.scales.split(",")], args.scale_pages, args.limit)
        args.cache.write_bytes(pickle.dumps(data))
    sys.path.insert(0, str(runners_dir()))
    chars, full = data["characters"], [ln for ln in data["lines"] if ln["scale"] == 1]
    halves = {h: [ln for ln in full if ln["half"] == h] for h in "AB"}
    print(f"{len(full)} lines on {len(data['cpu'])} pages; {sum(data['cpu'].values()) / len(data['cpu']):.1f} "
          "CPU-s/page (batches of 32, one thread budget: onnxruntime's default)")
    print("\n| word_gap (line heights) | CER A | CER B |\n|---|---|---|")
    table = {g: {h: cer(ls, [decode(ln, chars, g) for ln in ls]) for h, ls in halves.items()} for g in GAPS}
    for g, row in table.items():
        print(f"| {g or 'off'} | {row['A']:.4f} | {row['B']:.4f} |")
    cpu = sum(data["cpu"].values()) / len(data["cpu"])
    print("\ntext_bench.py's (b) rows (page CER):\n| what | CER raw A | B | all | CER GT conv. A | B | all | "
          "reading order | CPU s/page |\n|---|---|---|---|---|---|---|---|---|")
    for g in sorted({0.0, *(min(GAPS, key=lambda g: table[g][h]) for h in "AB")}):
        name = "(b) PP-OCRv6 (recognize) on the GT line boxes" + (f", word_gap {g}" if g else "")
        print(f"| {name} | {page_rows(args.gt, full, [decode(ln, chars, g) for ln in full])} | - | {cpu:.1f} |")
    for tune, test in ("AB", "BA"):
        best = min(GAPS, key=lambda g: table[g][tune])
        print(f"tuned on {tune}: word_gap {best or 'off'}; held-out {test}: {table[best][test]:.4f} "
              f"against {table[0.0][test]:.4f} without")
    print("\nconfusions (raw text), without the rule:")
    for h, ls in halves.items():
        counts = confusions(ls, [decode(ln, chars, 0.0) for ln in ls])
        print(f"  half {h}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    if "p_fss" in full[0]:
        print("\n| long s over f (share of p(f)), no word-gap rule | CER A | CER B |\n|---|---|---|")
        shares = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
        rows = {r: {h: cer(ls, [decode(ln, chars, 0.0, r) for ln in ls]) for h, ls in halves.items()}
                for r in shares}
        for r, row in rows.items():
            print(f"| {r or 'off'} | {row['A']:.4f} | {row['B']:.4f} |")
        for tune, test in ("AB", "BA"):
            best = min(shares, key=lambda r: rows[r][tune])
            print(f"tuned on {tune}: long s share {best or 'off'}; held-out {test}: {rows[best][test]:.4f} "
                  f"against {rows[0.0][test]:.4f} without")
    scaled = [ln for ln in data["lines"] if ln["page_id"] in {x["page_id"] for x in data["lines"] if x["scale"] != 1}]
    print("\n| scale | median line box height px | CER |\n|---|---|---|")
    for scale in sorted({ln["scale"] for ln in scaled}, reverse=True):
        ls = [ln for ln in scaled if ln["scale"] == scale]
        print(f"| {scale} | {np.median([ln['height'] for ln in ls]):.1f} | "
              f"{cer(ls, [decode(ln, chars, 0.0) for ln in ls]):.4f} |")


if __name__ == "__main__":
    main()
