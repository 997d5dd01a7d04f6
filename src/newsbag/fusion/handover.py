"""The auto-order pre-pass's reading of a page, handed to the fusion pass of the same call.

The pre-pass reads, validates and pairs every page's sources before any page is fused; doing
that again in the fusion pass was ~15 % of a page at 6 sources x 300 boxes. The last pages a
one-process call scores stay in memory (`RECENT`: 64 pages, 64 MB); the others, those the
memory pushes out, and every page of a call with worker processes (another process may fuse
it) go through the call's private folder in the run directory (`folder`:
`rundir.scratch_folder`) as pickles of ~0.4 MB, each deleted when the fusion pass takes it;
the folder goes when the call ends. The hand-over only saves work: a page that is not there
(a disk nearly full, a file that cannot be read) is read again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, NamedTuple

from .. import rundir
from .memo import Recent

if TYPE_CHECKING:
    from .geometry import Pairs

__all__ = ["Entry", "RECENT", "folder", "put", "take", "key"]

# Left free on the folder's file system by a spill: the larger of 1 GB and this share of it.
_FREE_BYTES, _FREE_SHARE = 1e9, 0.1


class Entry(NamedTuple):
    """What the pre-pass made of one page."""

    pages: dict          # source name -> Boxes
    image: dict | None   # the pages' image record
    dropped: dict        # source name -> why it could not be read
    pairs: Pairs         # the overlapping pairs of their pool (the sources concatenated in this order)
    metrics: dict        # source name -> metrics, as the page's record stores them


def _entry_bytes(entry: Entry) -> int:
    """About the memory of one entry: its source pages and pairs (arrays)."""
    pairs = entry.pairs
    return sum(b.xyxy.nbytes + b.score.nbytes + b.label.nbytes + sum(c.nbytes for c in b.data.values())
               for b in entry.pages.values()) + pairs.i.nbytes + pairs.j.nbytes + pairs.inter.nbytes


RECENT = Recent(64, budget=64e6, cost=_entry_bytes)


def key(page_id: str, idents: dict) -> tuple:
    """A page's key: its id and the identity of every input file it was read from."""
    return page_id, repr(sorted(idents.items()))


@contextlib.contextmanager
def folder(run_dir: Path) -> Iterator[Path]:
    """One call's hand-over: its private folder for spilled pages; both it and the memory
    part are emptied when the call ends or fails."""
    RECENT.clear()
    try:
        with rundir.scratch_folder(run_dir, "fusion-handover-") as path:
            yield path
    finally:
        RECENT.clear()


def _file(spill: Path, page_key: tuple) -> Path:
    return spill / (hashlib.sha1(page_key[0].encode()).hexdigest() + ".pkl")


def put(page_key: tuple, entry: Entry, spill: Path, keep: bool) -> None:
    """Hand `entry` over: in memory when `keep`, else (and what memory pushes out) as a file in `spill`."""
    for gone_key, gone in RECENT.put(page_key, entry) if keep else [(page_key, entry)]:
        _spill(gone_key, gone, spill)


def _spill(page_key: tuple, entry: Entry, spill: Path) -> None:
    """`entry` as a file in `spill`, unless that would leave its disk nearly full."""
    blob = pickle.dumps((page_key, entry), protocol=pickle.HIGHEST_PROTOCOL)
    try:
        disk = shutil.disk_usage(spill)
        if disk.free - len(blob) < max(_FREE_BYTES, _FREE_SHARE * disk.total):
            return
        path = _file(spill, page_key)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        tmp.replace(path)
    except OSError:
        return


def take(page_key: tuple, spill: Path | None) -> Entry | None:
    """The entry handed over for `page_key` (removed), or None: nothing there, or what is there
    was read from other input files or cannot be read. `spill` None: a call without hand-over."""
    hit = RECENT.take(page_key)
    if hit is not None or spill is None:
        return hit
    path = _file(spill, page_key)
    try:
        stored_key, entry = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a torn or foreign file: the page is read again
        entry, stored_key = None, None
    path.unlink(missing_ok=True)
    return entry if stored_key == page_key else None
