"""A recogniser bag read as a cascade, and noise lines: which lines a bag's later recognisers read, which are left out.

A cascade's first recogniser (PP-OCRv6) reads every line of a page; the others (Tesseract)
read only the lines where it is unsure (`unsure_lines`: a low score, nothing read, or a box
too short to read well), and the vote decides on those. The later recognisers' CPU is then
bounded by the share of lines sent (`Cascade.max_share`), not their whole page.

A line that no recogniser read with some confidence (`noise_lines`) is mostly not text: bleed-
through from the page's back, a masthead's ornament, specks between two paragraphs, read as
digits and letters at random. Its text is left out of the transcript and kept beside it.

Pure functions over line records; `bag` does the reading.
"""

from __future__ import annotations

from .options import Cascade

__all__ = ["unsure_lines", "cascade_plan", "noise_lines", "NOISE"]

# The key a line left out as noise keeps its reading under.
NOISE = "noise"


def _aspect(xyxy: list[float]) -> float:
    """A box's width in its heights."""
    return (xyxy[2] - xyxy[0]) / max(xyxy[3] - xyxy[1], 1e-9)


def unsure_lines(lines: list[dict], rule: Cascade) -> list[int]:
    """The crops (``order``) of a page's lines, as its first recogniser read them, that the later
    recognisers read: read as nothing, with a score under ``rule.score_below`` or a box narrower
    than ``rule.aspect_below`` heights; of those, at most ``rule.max_share`` of the page's lines
    (rounded down), the least confident first (ties: the first crop). In crop order.

    >>> rule = Cascade(score_below=0.9, aspect_below=0, max_share=1)
    >>> unsure_lines([{"order": 0, "text": "Zeit", "score": 0.95, "bbox_xyxy": [0, 0, 100, 10]},
    ...               {"order": 1, "text": "", "score": 0.0, "bbox_xyxy": [0, 10, 100, 20]},
    ...               {"order": 2, "text": "Zei1", "score": 0.7, "bbox_xyxy": [0, 20, 100, 30]}], rule)
    [1, 2]
    """
    def unsure(line: dict) -> bool:
        return (not line.get("text") or float(line.get("score") or 0.0) < rule.score_below
                or _aspect(line["bbox_xyxy"]) < rule.aspect_below)

    sent = sorted((line for line in lines if unsure(line)),
                  key=lambda line: (float(line.get("score") or 0.0) if line.get("text") else -1.0, line["order"]))
    return sorted(line["order"] for line in sent[:int(rule.max_share * len(lines) + 1e-9)])


def cascade_plan(plan: dict, orders: list[int]) -> dict:
    """A page's crop plan (runners/_plan.py) holding only the line crops `orders`, for a later
    recognizer; ``orders`` maps its crops back to the page's (a runner's ``order`` is the index
    of the crop in the plan it read)."""
    return {"crops": [plan["crops"][k] for k in orders], "units": [plan["units"][k] for k in orders],
            "size_wh": plan["size_wh"], "sample": [], "crop_lines": [[] for _ in orders], "orders": list(orders)}


def noise_lines(lines: list[dict], below: float) -> list[dict]:
    """The line records with the text of each line that no reading scored at least `below`
    (every member's reading for a bag's line, else the line's own score) left out and kept
    under `NOISE`; the lines as they are for `below` 0.

    >>> noise_lines([{"text": "2124< 039", "score": 0.41}, {"text": "Zeit", "score": 0.93}], 0.5)
    [{'text': '', 'score': 0.41, 'noise': '2124< 039'}, {'text': 'Zeit', 'score': 0.93}]
    """
    def best(line: dict) -> float:
        scores = [float(r.get("score") or 0.0) for r in line.get("readings") or ()] or [float(line.get("score") or 0.0)]
        return max(scores)

    return [{**line, "text": "", NOISE: line["text"]} if below > 0 and line.get("text") and best(line) < below
            else line for line in lines]
