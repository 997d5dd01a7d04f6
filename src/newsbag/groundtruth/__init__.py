"""Ground truth as users have it: PAGE-XML, ALTO, COCO and the nzz format, read to one `GtPage` per page.

`read_ground_truth(path) -> (pages, problems)` reads every file under a path (problems: name ->
why, one line each; those files are left out); `match_pages(run_dir, path)` pairs the pages with
a run's pages. Region types map to newsbag's labels through one table (`labels`,
docs/ground-truth.md). Every reader refuses what the fusion refuses of a page (more than
`contract.MAX_REGIONS` regions, `contract.MAX_OVERLAPPING_PAIRS` overlapping pairs, or
`contract.MAX_PAGE_BYTES` bytes) before any array is made, and parses XML without entities,
DTDs or network.
"""

from __future__ import annotations

from .match import ASPECT_TOLERANCE, aspect_problem, match_pages
from .model import GtError, GtPage, gt_page
from .read import FORMATS_HELP, gt_root, read_ground_truth

__all__ = ["GtPage", "GtError", "gt_page", "read_ground_truth", "gt_root", "match_pages", "aspect_problem",
           "ASPECT_TOLERANCE", "FORMATS_HELP"]
