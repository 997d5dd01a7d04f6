"""Transcripts against ground truth: character error rate of the page text and reading-order agreement.

The ground truth (the nzz format, or PAGE-XML with TextEquiv; `newsbag.groundtruth`) gives every
text region its hand-corrected text and its reading-order index. The page's reference text is those regions' texts in that order; the
prediction is the transcript's regions in its reading order, each as its lines were read
(`read_text`: line-end hyphens where they were, as the ground truth keeps them). Whitespace is
collapsed on both sides (line breaks are layout, not text). The raw CER normalises nothing
else; the CER with the ground truth's conventions (`gt_conventions`) reads long s as s and
every line-end hyphen mark as "-" on both sides.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import rundir
from .errors import EnvError
from .evaluate import eval_classes, gt_scale, match_pages
from .groundtruth import GtPage
from .fusion.geometry import intersection_matrix
from .io import atomic_write_text, read_json
from .tables import aligned_lines, number_cell, tsv_text

__all__ = ["char_error_rate", "gt_conventions", "gt_regions", "read_text", "reference_text", "order_agreement",
           "evaluate_transcripts", "format_transcripts"]

_SPACE = re.compile(r"\s+")
_LINE_END_HYPHEN = re.compile(r"[¬⸗=](?=[ \t]*(?:\n|$))")


def gt_conventions(text: str) -> str:
    r"""`text` as the nzz ground truth's conventions compare it: long s as s, the line-end hyphen
    marks ¬, ⸗ and = as "-".

    >>> gt_conventions("Geſez und Zei¬\ntung=")
    'Gesez und Zei-\ntung-'
    """
    return _LINE_END_HYPHEN.sub("-", text.replace("ſ", "s"))


def _as_read(region: dict) -> str:
    """A transcript region's lines as they were read (without lines: its text)."""
    if region.get("lines"):
        return "\n".join(ln.get("text") or "" for ln in region["lines"])
    return region.get("text") or ""


def read_text(transcript: dict) -> str:
    """A transcript's regions in its reading order, each as its lines were read, apart by a blank line."""
    return "\n\n".join(_as_read(r) for r in transcript.get("regions", []))


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def char_error_rate(pred: str, ref: str) -> tuple[int, int]:
    """Levenshtein edits turning `pred` into `ref` and the reference length, after collapsing whitespace.

    >>> char_error_rate("a  b", "a b")
    (0, 3)
    """
    try:
        from rapidfuzz.distance import Levenshtein
    except ImportError as exc:  # a core dependency; only a broken install lacks it
        raise EnvError(f"rapidfuzz is needed to score transcripts: pip install rapidfuzz ({exc})") from exc
    pred, ref = _normalise(pred), _normalise(ref)
    return int(Levenshtein.distance(pred, ref)), len(ref)


def order_agreement(gt_rank: np.ndarray, pred_rank: np.ndarray) -> tuple[float, int]:
    """Share of ground-truth region pairs that the prediction reads in the same order.

    Args:
        gt_rank: (N,) ground-truth reading-order index of each region.
        pred_rank: (N,) predicted reading position of each region (equal ranks: the same
            predicted region holds both, which counts half).

    Returns:
        (agreement in [0, 1], number of pairs); (nan, 0) below two regions.
    """
    gt_rank, pred_rank = np.asarray(gt_rank, float), np.asarray(pred_rank, float)
    i, j = np.triu_indices(gt_rank.shape[0], k=1)
    if i.size == 0:
        return float("nan"), 0
    gt_sign = np.sign(gt_rank[j] - gt_rank[i])
    pred_sign = np.sign(pred_rank[j] - pred_rank[i])
    credit = np.where(pred_sign == 0, 0.5, (gt_sign == pred_sign).astype(float))
    return float(credit.mean()), int(i.size)


def gt_regions(gt: GtPage) -> list[dict]:
    """The ground truth's text regions in its reading order (those outside it left out), each
    {"bbox_xyxy", "text", "lines"}."""
    keep = [k for k in np.argsort(gt.order, kind="stable").tolist()
            if gt.order[k] >= 0 and eval_classes(gt)[k] == "text"]
    return [{"bbox_xyxy": gt.xyxy[k].tolist(), "text": gt.text[k], "lines": gt.lines[k]} for k in keep]


def reference_text(gt: GtPage) -> str:
    """The page text a transcript is scored against: the ground truth's text regions in its
    reading order, apart by a blank line."""
    return "\n\n".join(r.get("text") or "" for r in gt_regions(gt))


def page_edits(pred: str, ref: str) -> tuple[int, int, int]:
    """Edits as read, edits with the ground truth's conventions on both sides, and the reference length."""
    edits, length = char_error_rate(pred, ref)
    edits_conv, _ = char_error_rate(gt_conventions(pred), gt_conventions(ref))
    return edits, edits_conv, length


def _page_scores(transcript: dict, gt: GtPage, sx: float, sy: float) -> dict:
    regions = gt_regions(gt)
    ref = "\n\n".join(r.get("text") or "" for r in regions)   # `reference_text`
    texts = [_as_read(r) for r in transcript.get("regions", [])]
    edits, edits_conv, length = page_edits("\n\n".join(texts), ref)   # `read_text`
    gt_xyxy = np.array([r["bbox_xyxy"] for r in regions], float).reshape(-1, 4)
    pred_xyxy = np.array([r["bbox_xyxy"] for r in transcript.get("regions", [])], float).reshape(-1, 4)
    pred_xyxy = pred_xyxy * np.array([sx, sy, sx, sy])
    inter = intersection_matrix(gt_xyxy, pred_xyxy)
    found = inter.max(axis=1, initial=0) > 0
    # Each ground-truth region is read where the transcript region holding most of it stands.
    pred_rank = inter.argmax(axis=1)[found] if pred_xyxy.shape[0] else np.zeros(0)
    agreement, pairs = order_agreement(np.arange(len(regions))[found], pred_rank)
    # The same text read in ground-truth order (each transcript region where the ground-truth
    # region it overlaps most stands): recognition and segmentation errors without order errors.
    if pred_xyxy.shape[0] and gt_xyxy.shape[0]:
        best_gt = inter.argmax(axis=0)
        place = np.where(inter.max(axis=0) > 0, best_gt, len(regions))
        in_gt_order = "\n\n".join(texts[k] for k in np.argsort(place, kind="stable"))
    else:
        in_gt_order = "\n\n".join(texts)
    edits_gt_order, _ = char_error_rate(in_gt_order, ref)
    return {"page_id": transcript["page_id"], "edits": edits, "ref_chars": length,
            "cer": edits / length if length else None, "edits_conv": edits_conv,
            "cer_conv": edits_conv / length if length else None, "edits_gt_order": edits_gt_order,
            "cer_gt_order": edits_gt_order / length if length else None, "order": agreement, "order_pairs": pairs,
            "regions_read": int(found.sum()), "gt_regions": len(regions)}


_ROW_COLUMNS = ["page_id", "cer", "cer_conv", "cer_gt_order", "edits", "edits_conv", "edits_gt_order", "ref_chars",
                "order", "order_pairs", "regions_read", "gt_regions"]


def evaluate_transcripts(run_dir: Path, gt_dir: Path) -> list[dict]:
    """Per transcribed variant: micro CER over matched pages (as read, with the ground truth's
    conventions, and with the transcript's regions put in ground-truth order), mean
    reading-order agreement, and per-page rows.

    Writes ``outputs/transcripts/<variant>/eval_transcripts.tsv`` (one row per page).

    Returns:
        [{"variant", "pages", "cer", "cer_conv", "cer_gt_order", "order", "rows": [...], "written": path}] (empty when
        nothing was transcribed).
    """
    matched = match_pages(run_dir, gt_dir)[0]
    root = Path(run_dir) / "outputs" / "transcripts"
    out = []
    for variant in sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        folder = rundir.transcript_dir(run_dir, variant)
        rows = []
        for rec, gt in matched:
            path = folder / f"{rec['page_id']}.json"
            if path.exists():
                rows.append(_page_scores(read_json(path), gt, *gt_scale(rec, gt)))
        if rows:
            edits, chars = sum(r["edits"] for r in rows), sum(r["ref_chars"] for r in rows)
            edits_gt_order = sum(r["edits_gt_order"] for r in rows)
            edits_conv = sum(r["edits_conv"] for r in rows)
            orders = [r["order"] for r in rows if r["order_pairs"]]
            written = folder / "eval_transcripts.tsv"
            atomic_write_text(written, tsv_text(rows, _ROW_COLUMNS))
            out.append({"variant": variant, "pages": len(rows), "cer": edits / chars if chars else None,
                        "cer_conv": edits_conv / chars if chars else None,
                        "cer_gt_order": edits_gt_order / chars if chars else None, "order": float(np.mean(orders)) if orders else None, "rows": rows, "written": str(written)})
    return out


def format_transcripts(results: list[dict]) -> str:
    """The transcript table `newsbag evaluate` prints: CER (micro) and reading-order agreement per variant."""
    table = [("transcripts of", "pages", "CER", "CER (GT conventions)", "CER in GT order", "reading order")]
    table += [(r["variant"], str(r["pages"]), number_cell(r["cer"]), number_cell(r["cer_conv"]),
               number_cell(r["cer_gt_order"]), number_cell(r["order"])) for r in results]
    return "\n".join(aligned_lines(table))
