"""Whether what shows a run's text holds its transcripts as they are now: the PAGE-XML and ALTO
exports (their text regions' lines) and the gallery's transcript links.

`newsbag transcribe` refreshes neither (each is its own stage's output, made when that stage
runs); a call that transcribed ends by saying which of them it left stale, and the command that
brings each up to date, as `newsbag status` does.
"""

from __future__ import annotations

from pathlib import Path

from .. import builtin, rundir
from ..stages import stage_status
from ..export.stage import TEXT_CHANGED
from ..manifest import read_pages
from ..review.gallery import gallery_links_current, gallery_pages
from ..status import builtin_options

__all__ = ["stale_text_views"]


def stale_text_views(run_dir: Path) -> list[dict]:
    """{"output", "pages" (None: a run-level output), "command"} of each output showing the run's
    text that does not hold its transcripts as they are: an export layer whose pages' transcripts
    changed since it was written, then the gallery when it links other transcripts than there are."""
    run_dir = Path(run_dir)
    records = read_pages(run_dir)
    options = builtin_options(run_dir)
    stale = [{"output": f"export/{o['name']}", "pages": o["reasons"][TEXT_CHANGED],
              "command": builtin.update_command("export", run_dir)}
             for o in stage_status("export", run_dir, records, options.get("export", {}))
             if o["reasons"].get(TEXT_CHANGED)]
    if (gallery_pages(rundir.gallery_path(run_dir)) is not None
            and not gallery_links_current(run_dir, [r.page_id for r in records])):
        stale.append({"output": "review/gallery", "pages": None, "command": builtin.update_command("review", run_dir)})
    return stale
