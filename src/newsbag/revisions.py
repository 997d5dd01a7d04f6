"""The code revision of each builtin stage's output: what makes a finished output stale when the code changes.

Every output fingerprint of a builtin stage holds the revision of the code that makes it, per
stage and, where finer, per fusion method or export format. Bump a revision by one when a change
to its code makes that output differ for the same inputs and options: the next run redoes
exactly the outputs of that revision, and `newsbag status` says why ("made by fusion/consensus
code revision 1, now 2").

An entry names the modules that make its output (`entries`, relative to ``src/newsbag``); its code
is every package module they import, directly or through others (`code_files`), less the
`INFRASTRUCTURE` modules, which decide where and whether an output is written but never what it
holds. So no module a stage imports can change without a decision. Revisions are explicit
numbers, not a hash of the code: a hash would redo 100k fused pages for a comment or a speed-up
that changes no output. The guard test (tests/test_revisions.py) keeps them honest instead: it
stores each entry's code hash next to its number and fails when the code changed while the
number did not. The package version is no part of any fingerprint, so a release redoes only what
its code changed. Stdlib only: the config and the registry read this without importing any stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .codegraph import SRC, import_closure

__all__ = ["Revision", "REVISIONS", "INFRASTRUCTURE", "code_files", "revision", "why_stale"]


@dataclass(frozen=True)
class Revision:
    """One output's code revision and the modules (relative to src/newsbag) whose imports make it."""

    number: int
    entries: tuple[str, ...]


_FUSION_METHOD = ("fusion/fuse.py",)
_EXPORT = ("export/stage.py",)

# One entry per output a builtin stage makes. "fusion" is what every fused variant shares (the
# pooling, the source and variant metrics, the page records); "fusion/<method>" one method's boxes.
REVISIONS: dict[str, Revision] = {
    "fusion": Revision(1, ("fusion/stage.py",)),
    # 2: a box that is not text and nearly as tall as the page (the scan's edge) is read last and
    # no longer stops the cuts across the page. 3: a rule across the columns is cut first (the
    # feuilleton read after the body); columns whose paragraphs end on one line read as one body.
    # 4: only single lines running over a rule keep a region fused over it whole (a column's last
    # line boxed with the rule under it does not).
    "fusion/best_single": Revision(4, _FUSION_METHOD),
    "fusion/consensus": Revision(4, _FUSION_METHOD),
    "fusion/paragraphs": Revision(4, (*_FUSION_METHOD, "fusion/paragraphs.py")),
    "review": Revision(2, ("review/stage.py",)),
    # 2: hyphens joined, articles marked, word boxes and confidences, the recogniser family.
    # 3: regions read whole by a recogniser that finds their lines (crop plans with a unit).
    # 4: a text region fused over a rule across the columns is read as its parts above and below;
    # text more than half inside a larger region read is not read again.
    # 5: a recogniser bag: its members read the same lines, each line voted, with its winner and
    # every member's reading.
    "transcription": Revision(5, ("transcription/stage.py",)),
    # 1: XML-safe text, transcripts of an earlier layout dropped (page-xml, alto); unreadable
    # pages left out of the fingerprint (coco). 2: integer boxes cover the float box. 3 (alto):
    # String elements with their word boxes and WC.
    "export/page-xml": Revision(2, (*_EXPORT, "export/pagexml.py")),
    "export/alto": Revision(3, (*_EXPORT, "export/alto.py")),
    "export/coco": Revision(2, (*_EXPORT, "export/coco.py")),
}

# Modules a stage imports that decide where, when and whether its outputs are written, never what
# they hold; each with the reason. Nothing else may be left out of an entry's code: the guard test
# checks that every name here is a module some entry imports.
INFRASTRUCTURE: dict[str, str] = {
    "__init__.py": "the package version, which is in no fingerprint",
    "errors.py": "exception classes and exit codes",
    "io.py": "atomic writes and reading JSON",
    "locks.py": "record locks on the run directory",
    "liveness.py": "whether a writer process has ended",
    "rundir.py": "where each output lives in the run directory",
    "folder_names.py": "which names may name an output folder",
    "freshness.py": "whether an output is current (fingerprints hold the revisions)",
    "failures.py": "the failure ledger",
    "reports.py": "reading runners' run reports",
    "parallel.py": "spreading page tasks over processes",
    "manifest.py": "reading and writing the page manifest",
    "inputs.py": "listing inputs and giving page ids",
    "resources.py": "where runner scripts and configs live",
    "builtin.py": "the registry of builtin stages",
    "config.py": "loading the pipeline config (option values are in the fingerprints)",
    "config_fields.py": "declaring the pipeline config's own keys (their values are in the fingerprints)",
    "tool_spec.py": "checking runner parameters (their values and the family revision are in the fingerprints)",
    "builtin_entry.py": "checking a builtin stage's config entry (its option values are in the fingerprints)",
    "anchoring.py": "taking config paths from the config's folder",
    "options.py": "declaring and validating options (their values are in the fingerprints)",
    "orchestrator.py": "starting runner subprocesses (runners have their own revisions)",
    "runner_events.py": "reading the events runners print",
    "page_outcomes.py": "recording and checking runners' page outcomes (runners have their own revisions)",
    "source_run.py": "a runner's restart decisions",
    "revisions.py": "this table",
    "codegraph.py": "reading imports for this table",
}


def code_files(key: str) -> tuple[str, ...]:
    """The modules (relative to src/newsbag) whose code makes output `key`: the import closure of its
    entries less `INFRASTRUCTURE`, sorted.

    >>> "fusion/degenerate.py" in code_files("fusion"), "fusion/degenerate.py" in code_files("review")
    (True, False)
    """
    return tuple(m for m in import_closure(REVISIONS[key].entries, SRC) if m not in INFRASTRUCTURE)


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
