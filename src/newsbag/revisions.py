"""The code revision of each builtin stage's output: what makes a finished output stale when the code changes.

Every output fingerprint of a builtin stage holds the revision of the code that makes it, per
stage and, where finer, per fusion method or export format. Bump a revision by one when a change
to its code files (``code``, relative to ``src/newsbag``) makes that output differ for the same
inputs and options: the next run redoes exactly the outputs of that revision, and `newsbag
status` says why ("made by fusion/consensus code revision 1, now 2").

Revisions are explicit numbers, not a hash of the source files: a hash would redo 100k fused
pages for a comment or a speed-up that changes no output. The guard test
(tests/test_revisions.py) keeps them honest instead: it stores each entry's code hash next to
its number and fails when the code changed while the number did not. The package version is
no part of any fingerprint, so a release redoes only what its code changed. Stdlib only: the
config and the registry read this without importing any stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Revision", "REVISIONS", "revision", "why_stale"]


@dataclass(frozen=True)
class Revision:
    """One output's code revision and the code files (relative to src/newsbag) that make it."""

    number: int
    code: tuple[str, ...]


_FUSION_METHOD = ("fusion/fuse.py", "fusion/order.py", "articles.py")
_EXPORT = ("export/stage.py", "export/layout.py")

# One entry per output a builtin stage makes. "fusion" is what every fused variant shares (the
# pooling, the source and variant metrics, the page records); "fusion/<method>" one method's boxes.
REVISIONS: dict[str, Revision] = {
    "fusion": Revision(1, ("fusion/stage.py", "fusion/metrics.py", "fusion/geometry.py", "fusion/match.py")),
    # 2: a box that is not text and nearly as tall as the page (the scan's edge) is read last and
    # no longer stops the cuts across the page. 3: a rule across the columns is cut first (the
    # feuilleton read after the body); columns whose paragraphs end on one line read as one body.
    "fusion/best_single": Revision(3, _FUSION_METHOD),
    "fusion/consensus": Revision(3, _FUSION_METHOD),
    "fusion/paragraphs": Revision(3, (*_FUSION_METHOD, "fusion/paragraphs.py")),
    "review": Revision(2, ("review/stage.py", "review/render.py", "review/score.py", "review/gallery.py",
                           "review/reading.py")),
    # 2: hyphens joined, articles marked, word boxes and confidences, the recogniser family.
    # 3: regions read whole by a recogniser that finds their lines (crop plans with a unit).
    # 4: a text region fused over a rule across the columns is read as its parts above and below;
    # text more than half inside a larger region read is not read again.
    # 5: a recogniser bag: its members read the same lines, each line voted, with its winner and
    # every member's reading.
    # The reading order's parts are the crops, so its code is this output's too.
    "transcription": Revision(5, ("transcription.py", "transcript.py", "transcription_bag.py", "text_vote.py",
                                  "fusion/order.py")),
    # 1: XML-safe text, transcripts of an earlier layout dropped (page-xml, alto); unreadable
    # pages left out of the fingerprint (coco). 2: integer boxes cover the float box. 3 (alto):
    # String elements with their word boxes and WC.
    "export/page-xml": Revision(2, (*_EXPORT, "export/pagexml.py", "export/serialize.py")),
    "export/alto": Revision(3, (*_EXPORT, "export/alto.py", "export/serialize.py")),
    "export/coco": Revision(2, (*_EXPORT, "export/coco.py")),
}


def revision(key: str) -> int:
    """The code revision of output `key` ("fusion/consensus", "review", "export/alto"...) now."""
    return REVISIONS[key].number


def why_stale(key: str, made: Any) -> str | None:
    """Why an output recording code revision `made` (None: it records none) is stale by its
    code: "made by <key> code revision <made>, now <now>"; None while `made` is the revision now."""
    now = revision(key)
    if made == now:
        return None
    if made is None:
        return f"made before {key} code revisions were recorded, now {now}"
    return f"made by {key} code revision {made}, now {now}"
