"""Match ground-truth pages to a run's pages, and leave out those drawn on another image."""

from __future__ import annotations

import os
from pathlib import Path

from .. import rundir
from ..errors import InputError
from ..manifest import manifest_rows
from .model import GtPage
from .read import gt_root, read_ground_truth

__all__ = ["match_pages", "aspect_problem", "ASPECT_TOLERANCE"]

# How far a ground truth's width/height ratio may differ from its scan's (relative): scaled
# ground truth keeps the ratio up to rounding (0.05 % for a 2,000 px page drawn at a third);
# a crop or another scan does not, and stretching it onto the scan scored 0.84 as 0.32.
ASPECT_TOLERANCE = 0.01


def _parts(path: str) -> tuple[str, ...]:
    """The folders and file name of a path; ``..`` and ``.`` say nothing about which page it is."""
    return tuple(p for p in Path(path).as_posix().split("/") if p not in ("", ".", ".."))


def _stem(parts: tuple[str, ...]) -> tuple[str, ...]:
    return (*parts[:-1], parts[-1].rsplit(".", 1)[0] if "." in parts[-1][1:] else parts[-1]) if parts else parts


def _tail_tables(records: list[dict]) -> tuple[dict, dict]:
    """Every tail of every page's path (file name, folder/file name, ...) -> its page, or None
    where pages share it; the same of the paths without extension. An image then finds its
    longest common tail in one lookup per part of its path (comparing it with every page took
    26 s for 50 annotations over 100k pages)."""
    by_tail: dict[tuple[str, ...], dict | None] = {}
    by_stem: dict[tuple[str, ...], dict | None] = {}
    for rec in records:
        have = _parts(rec["path"])
        for table, parts in ((by_tail, have), (by_stem, _stem(have))):
            for n in range(1, len(parts) + 1):
                table[parts[-n:]] = None if parts[-n:] in table else rec
    return by_tail, by_stem


def _longest(want: tuple[str, ...], table: dict) -> dict | None:
    """The page whose path shares the longest tail with `want`; None when pages tie at it."""
    for n in range(len(want), 0, -1):
        if want[-n:] in table:
            return table[want[-n:]]
    return None


def aspect_problem(rec: dict, gt: GtPage) -> str | None:
    """Why `gt` was drawn on another image than the run page `rec` (its width/height ratio off
    by more than `ASPECT_TOLERANCE`), or None; unknown when the manifest lacks the page's size."""
    w, h = rec.get("width"), rec.get("height")
    if not (w and h):
        return None
    off = (gt.width / gt.height) / (float(w) / float(h)) - 1.0
    if abs(off) <= ASPECT_TOLERANCE:
        return None
    return (f"drawn on a {gt.width:g}x{gt.height:g} image, whose aspect ratio differs from the scan's "
            f"{float(w):g}x{float(h):g} by {100 * abs(off):.1f} % (over {100 * ASPECT_TOLERANCE:g} %): "
            "a crop or another scan? left out rather than stretched")


def _find(gt: GtPage, root: Path, by_file: dict, by_id: dict, tables: tuple[dict, dict]) -> dict | None:
    image = gt.image
    rec = (by_file.get(os.path.realpath(root / image)) if image else None) or by_id.get(gt.page_id)
    if rec is None and image:
        rec = _longest(_parts(image), tables[0])
    if rec is None and gt.stem_path:
        rec = _longest(_parts(gt.stem_path), tables[1])
    return rec


def match_pages(run_dir: Path, gt_path: Path) -> tuple[list[tuple[dict, GtPage]], list[str], dict[str, str]]:
    """(manifest record, ground-truth page) of each run page with ground truth, the names of the
    ground-truth pages no run page matches, and each unusable ground-truth file or page's name ->
    why in one line (it is left out; the others are still matched). Names are relative to `gt_root`.

    A page matches ground truth when it is the image file the ground truth names, when their
    page ids are equal (nzz, newsbag's COCO), or else by the longest common tail of the named
    image's path and the page's path: whole file names (extension included) and the folders
    above them, and only when exactly one page has that longest tail. Failing that, a PAGE,
    ALTO or COCO page matches by the same rule on paths without extensions (`GtPage.stem_path`:
    a PAGE file named after its image). Never by a name that two pages share: ``a/p1.png``
    and ``b/p1.png`` are different pages, and ground truth both match equally well matches
    neither. Two ground-truth pages of one run page, and one whose aspect ratio is not the
    page's (`aspect_problem`), are left out and named.

    Raises:
        InputError: missing manifest or ground truth, or no page matches.
    """
    run_dir, gt_path = Path(run_dir), Path(gt_path)
    manifest = run_dir / rundir.MANIFEST
    if not manifest.is_file():
        raise InputError(f"{manifest}: no page manifest; is {run_dir} a newsbag run directory?")
    pages, bad = read_ground_truth(gt_path)
    records = manifest_rows(run_dir)   # page ids checked: each names files under outputs/evaluation
    by_id = {rec["page_id"]: rec for rec in records}
    by_file = {os.path.realpath(run_dir / rec["path"]): rec for rec in records}
    tables, root = _tail_tables(records), gt_root(gt_path)
    matched, unmatched = [], []
    for gt in pages:
        rec = _find(gt, root, by_file, by_id, tables)
        (matched.append((rec, gt)) if rec else unmatched.append(gt.name))
    # Two ground truths of one page would score it twice in every mean, and which one is right
    # is not ours to guess: the page is left out and both are named.
    names: dict[str, list[str]] = {}
    for rec, gt in matched:
        names.setdefault(rec["page_id"], []).append(gt.name)
    for rec, gt in matched:
        if len(twins := names[rec["page_id"]]) > 1:
            others = " and ".join(n for n in twins if n != gt.name)
            bad[gt.name] = f"matches run page {rec['page_id']} ({rec['path']}) as {others} does; keep one of them"
        elif why := aspect_problem(rec, gt):
            bad[gt.name] = why
    matched = [(rec, gt) for rec, gt in matched if gt.name not in bad]
    if not matched:
        first = next(iter(bad.items()), None)
        unreadable = f"; {len(bad)} ground-truth file(s) unusable, e.g. {first[0]}: {first[1]}" if first else ""
        raise InputError(f"no run page matches a ground-truth image in {gt_path} (matched by image file, page id, "
                         f"relative path, or file name without extension){unreadable}")
    return matched, unmatched, bad
