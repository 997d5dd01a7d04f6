"""One line's text from several recognisers' readings of it: a character vote (ROVER) or the more confident line.

Pure functions over strings and confidences; the transcription stage's recogniser bag
(`bag`) calls them once per line.

The vote (ROVER, Fiscus 1997, at character level): every reading is aligned to the pivot,
the most confident reading, by Levenshtein opcodes (a progressive alignment to one pivot:
readings are never aligned to each other, so two readings inserting different text at one
place of the pivot compete as whole insertions). Each aligned place then takes the candidate
(a character, an inserted string, or nothing) with the most weight, a reading adding
``weight × confidence`` to what it read there; for a place where a reading has nothing (a gap)
its confidence is its line score. Ties go to the reading first in the pivot-first order (the
pivot, then readings by falling weighted score, then as listed), so the result never depends
on dictionary order.

An empty reading, or one scoring under its member's ``min_score``, does not vote: Tesseract
returns nothing for some lines, and its empty line would otherwise vote to delete the other
readings' text. Where no reading votes, the line is empty and nobody won (`NOBODY`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

from .options import VOTE_METHODS as METHODS

__all__ = ["Reading", "Vote", "METHODS", "NOBODY", "VOTED", "vote_line", "more_confident_line", "rover_line"]

VOTED = "vote"      # `Vote.won` of a text no single reading has
NOBODY = ""         # `Vote.won` where no reading voted (all empty or under their min_score)


@dataclass(frozen=True)
class Reading:
    """One recogniser's reading of a line.

    name: the recogniser (the bag member); text; score: its line confidence, 0..1;
    char_scores: a confidence per character of `text` where the recogniser gives them (None:
    `score` for each); weight: how much the member's confidence counts; min_score: a reading
    scoring under it does not vote.
    """

    name: str
    text: str
    score: float
    char_scores: tuple[float, ...] | None = None
    weight: float = 1.0
    min_score: float = 0.0

    def __post_init__(self):
        if self.char_scores is not None and len(self.char_scores) != len(self.text):
            raise ValueError(f"{self.name}: {len(self.char_scores)} character scores for {len(self.text)} characters")

    def confidences(self) -> tuple[float, ...]:
        return self.char_scores if self.char_scores is not None else (self.score,) * len(self.text)


@dataclass(frozen=True)
class Vote:
    """A line's voted text, its confidence (0..1) and who won: a member's name where the text is
    its reading, `VOTED` where it is no single reading, `NOBODY` where no reading voted."""

    text: str
    score: float
    won: str


def _voters(readings: list[Reading]) -> list[Reading]:
    """The readings that vote, pivot first: by falling ``weight × score``, then as listed."""
    voting = [r for r in readings if r.text and r.score >= r.min_score]
    order = sorted(range(len(voting)), key=lambda i: (-voting[i].weight * voting[i].score, i))
    return [voting[i] for i in order]


def more_confident_line(readings: list[Reading]) -> Vote:
    """The reading with the highest ``weight × score`` (the first listed on a tie), whole.

    >>> more_confident_line([Reading("a", "Zeit", 0.7), Reading("b", "Zeil", 0.9)])
    Vote(text='Zeil', score=0.9, won='b')
    """
    voting = _voters(readings)
    if not voting:
        return Vote("", 0.0, NOBODY)
    best = voting[0]
    return Vote(best.text, best.score, best.name)


def _align(pivot: str, text: str, conf: tuple[float, ...], gap: float
           ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """`text` aligned to `pivot`: what it has at each pivot character, (char or "", confidence),
    and what it inserts before each pivot character and at the end (len(pivot) + 1 places)."""
    at = [("", gap)] * len(pivot)
    ins = [("", gap)] * (len(pivot) + 1)
    for op in Levenshtein.opcodes(pivot, text):
        if op.tag in ("equal", "replace"):   # rapidfuzz's replace blocks pair one character each
            for k in range(op.src_end - op.src_start):
                at[op.src_start + k] = (text[op.dest_start + k], conf[op.dest_start + k])
        elif op.tag == "insert":
            span = conf[op.dest_start:op.dest_end]
            ins[op.src_start] = (text[op.dest_start:op.dest_end], sum(span) / len(span))
    return at, ins


def _winner(votes: list[tuple[str, float, float]]) -> tuple[str, float]:
    """The candidate with the most weight and its best confidence among its voters; `votes` are
    (candidate, weight × confidence, confidence) in pivot-first order, which breaks ties."""
    total: dict[str, float] = {}
    best: dict[str, float] = {}
    for cand, w, c in votes:
        total[cand] = total.get(cand, 0.0) + w
        best[cand] = max(best.get(cand, 0.0), c)
    top = max(total.values())
    cand = next(c for c in total if total[c] == top)   # dicts keep first-vote order
    return cand, best[cand]


def rover_line(readings: list[Reading]) -> Vote:
    """The character vote of the readings (module docstring).

    Returns:
        The voted text; its score, the mean over its characters of the best confidence of a
        reading that voted for each; who won.

    >>> rover_line([Reading("a", "behandeltgegen", 0.9), Reading("b", "behandelt gegen", 0.6),
    ...             Reading("c", "behandelt gegcn", 0.5)]).text
    'behandelt gegen'
    """
    voting = _voters(readings)
    if not voting:
        return Vote("", 0.0, NOBODY)
    pivot = voting[0].text
    aligned = [_align(pivot, r.text, r.confidences(), r.score) for r in voting]
    out: list[str] = []
    confs: list[float] = []
    for place in range(2 * len(pivot) + 1):   # insertion places and pivot characters, interleaved
        side, k = (1, place // 2) if place % 2 == 0 else (0, place // 2)
        cand, conf = _winner([(al[side][k][0], r.weight * al[side][k][1], al[side][k][1])
                              for r, al in zip(voting, aligned)])
        out.append(cand)
        confs.extend([conf] * len(cand))
    text = "".join(out)
    won = next((r.name for r in voting if r.text == text), VOTED)
    return Vote(text, round(sum(confs) / len(confs), 4) if confs else 0.0, won)


def vote_line(readings: list[Reading], method: str = "rover") -> Vote:
    """One line's text by `method`, one of `METHODS` (`options.VOTE_METHODS`).

    Raises:
        ValueError: an unknown method.
    """
    if method == "rover":
        return rover_line(readings)
    if method == "confident":
        return more_confident_line(readings)
    raise ValueError(f"unknown vote method {method!r}; choose one of {', '.join(METHODS)}")
