"""One page as the review shows it (board panels, page-view layers, review priority) and the full
boards of the top pages, each recording the page review it shows."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, PngImagePlugin

from ..contract import Boxes, PageMeta, boxes_from_page
from .. import rundir
from ..errors import RunDirError, first_line
from ..io import atomic_write_bytes
from ..images import open_accepted_image
from ..page_reader import read_page
from .options import PANEL_MIN, ReviewParams
from .gallery import page_layer
from .render import render_board
from .scan import SCAN_WIDTH, black_and_white, fit_width, to_one_bit
from .score import PageScore, score_page
from .state import Inputs, Outcome, PageError, Plan, board_inputs

log = logging.getLogger(__name__)

# Board panels are as wide as one row allows, but never below PANEL_MIN (a box and its label must be
# checkable one by one) nor above 1000 px.
_PANEL_MAX = 1000
# Boards are drawn for the top pages only (every page has the scan and data.js, which the page
# view draws its boxes from): a black-and-white page's as PNG of a 64-colour palette (0.4-0.7 MB
# for seven NZZ panels, where a JPEG of the sharp edges is ~2 MB), a grey page's as JPEG. zlib
# level 3 encodes ~2.7x faster than the default 6, and smaller.
_BOARD_EXTS = (".png", ".jpg")
_BOARD_OF = "newsbag-review"   # a board's PNG text key: the fingerprint of the page review it shows
_BOARD_COLOURS = 64
_BOARD_QUALITY = 70
_PNG_LEVEL = 3


def _load_page(path: Path, page_id: str) -> dict:
    try:
        return read_page(path, page_id)
    except ValueError as exc:
        raise PageError(f"unreadable page {exc}") from None


def _read_sources(paths: dict[str, str], page_id: str) -> tuple[dict[str, dict], dict[str, str]]:
    """(readable source pages, one-line reason per unreadable one) by name: as in fusion, a bad
    source page is dropped from its board (and named), not the board failed with it."""
    pages, dropped = {}, {}
    for name, path in paths.items():
        try:
            pages[name] = read_page(path, page_id)
        except ValueError as exc:
            dropped[name] = first_line(exc)
    return pages, dropped


def _load_image(path: str, panel_width: int) -> Image.Image:
    try:
        with open_accepted_image(path) as im:
            # JPEG decodes at 1/2..1/8 scale for free; other formats ignore the hint.
            im.draft("RGB", (panel_width, max(1, panel_width * im.height // max(1, im.width))))
            # Box-reduce in the file's own mode before converting: an RGB copy of a full grey
            # broadsheet is 3x its pixels; the board's LANCZOS resize needs only ~2x panel width.
            factor = im.width // (2 * max(1, panel_width))
            if factor >= 2 and im.mode in ("L", "RGB", "RGBA"):
                return im.reduce(factor).convert("RGB")
            return im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise PageError(f"unreadable image {path}: {exc}") from None


def _panel_width(n_cells: int, max_board_width: int) -> int:
    one_row = (max_board_width - (n_cells + 1) * 10) // max(1, n_cells)
    return max(PANEL_MIN, min(_PANEL_MAX, one_row))


@dataclass(frozen=True)
class Content:
    """One page as the review shows it: the scan, board panels, page-view layers and its priority."""

    image: Image.Image
    panels: list[tuple[str, Boxes]]
    panel_rows: list[dict]
    panel_width: int
    layers: list[dict]
    dropped: dict[str, str]
    reference: str | None
    priority: PageScore


def page_content(record, plan: Plan, params: ReviewParams, inputs: Inputs) -> Content:
    """Read one page's source and fused outputs and its image; raises `PageError` on an unreadable
    image or fused page (an unreadable source page is dropped and named)."""
    page_id = record.page_id
    sources, failed_sources = inputs.sources, inputs.failed_sources
    fused, failed_fused = inputs.fused, inputs.failed_fused
    source_dirs, fused_dirs, gallery_dirs, recommended = (plan.source_dirs, plan.fused_dirs, plan.gallery_dirs,
                                                          plan.recommended)

    source_pages, dropped = _read_sources(sources, page_id)
    unusable = {*failed_sources, *dropped}  # sources that should have drawn the page and did not
    fused_pages = {name: _load_page(path, page_id) for name, path in fused.items()}
    source_boxes = {name: boxes_from_page(page, source=name) for name, page in source_pages.items()}
    fused_boxes = {name: boxes_from_page(page, source=f"fusion/{name}") for name, page in fused_pages.items()
                   if name in fused_dirs}
    panel_w = _panel_width(len(source_dirs) + len(fused_dirs), params.max_board_width)
    image = _load_image(str(inputs.image_path), max(panel_w, SCAN_WIDTH))

    meta = PageMeta(page_id=page_id, width=record.width, height=record.height)
    panels: list[tuple[str, Boxes]] = []
    panel_rows = []
    for name in source_dirs:
        if name in source_boxes:
            panels.append((name, source_boxes[name]))
        elif name in unusable:
            panels.append((f"{name} ({'UNREADABLE' if name in dropped else 'FAILED'})", Boxes.empty(meta)))
        else:
            continue
        panel_rows.append({"name": name, "regions": len(panels[-1][1]), "failed": name in unusable})
    pending = [name for name in fused_dirs if name not in fused_boxes and name not in failed_fused]
    for name in fused_dirs:
        tag = " (recommended)" if name == recommended else ""
        if name in fused_boxes:
            panels.append((f"fused {name}{tag}", fused_boxes[name]))
        else:
            state = "FAILED" if name in failed_fused else "NOT FUSED YET"
            panels.append((f"fused {name}{tag} ({state})", Boxes.empty(meta)))
        panel_rows.append({"name": f"fusion/{name}", "regions": len(panels[-1][1]), "failed": name in failed_fused}
                          | ({"pending": True} if name in pending else {}))

    reference = fused_boxes.get(recommended) if recommended else None
    if reference is None and fused_boxes:
        reference = fused_boxes[sorted(fused_boxes)[0]]
    score = score_page(source_boxes, reference, sorted(unusable),
                       fused_failed=[name for name in fused_dirs if name in failed_fused], fused_pending=pending)
    layers = [page_layer(name, "source", source_pages.get(name), failed=name in unusable)
              for name in source_dirs if name in sources or name in failed_sources]
    layers += [page_layer(f"fusion/{name}", "fused", fused_pages.get(name), failed=name in failed_fused,
                          pending=name not in fused and name not in failed_fused, recommended=name == recommended)
               for name in sorted(gallery_dirs)]
    return Content(image, panels, panel_rows, panel_w, layers, dropped,
                    None if reference is None else reference.meta.source, score)


def _write_board(run_dir: Path, record, plan: Plan, params: ReviewParams, outcome: Outcome, top_dir: Path) -> str:
    """The full board of one of the top pages: a panel per source and shown fused variant, and why
    it is worth a look (the page view draws the same boxes for every page from data.js). Returns
    its file name in `top_dir`: a palette PNG of a black-and-white page, else a JPEG; either
    records the page review's fingerprint (`_board_made_from`)."""
    inputs = board_inputs(record, plan, {})
    content = page_content(record, plan, params, inputs)
    image = content.image
    one_bit = black_and_white(image)
    if one_bit:   # drawn on the 1-bit page, the board's PNG is a third of the size
        image = to_one_bit(fit_width(image, content.panel_width)).convert("L")
    board = render_board(image, content.panels, max_panel_width=content.panel_width,
                         max_board_width=params.max_board_width, title=record.page_id,
                         note="why look: " + "; ".join(outcome.info["priority"]["reasons"]))
    made_from = outcome.info["fingerprint"]
    buf = io.BytesIO()
    if one_bit:
        note = PngImagePlugin.PngInfo()
        note.add_text(_BOARD_OF, made_from)
        board.quantize(_BOARD_COLOURS, method=Image.Quantize.FASTOCTREE).save(
            buf, format="PNG", compress_level=_PNG_LEVEL, pnginfo=note)
    else:
        fit_width(board, board.width).save(buf, format="JPEG", quality=_BOARD_QUALITY, comment=made_from)
    names = [f"{record.page_id}{ext}" for ext in _BOARD_EXTS]
    name = names[0] if one_bit else names[1]
    atomic_write_bytes(top_dir / name, buf.getvalue())
    for other in names:
        if other != name:
            (top_dir / other).unlink(missing_ok=True)
    return name


def _board_made_from(path: Path) -> str | None:
    """The page-review fingerprint a board records (PNG text chunk or JPEG comment); None when
    there is no board or it records none. Read from the header: no pixel is decoded."""
    try:
        with Image.open(path) as im:
            found = im.text.get(_BOARD_OF) if im.format == "PNG" else im.info.get("comment")
    except (OSError, ValueError, SyntaxError):
        return None
    return found.decode("ascii", "replace") if isinstance(found, bytes) else found


def _top_board(run_dir: Path, record, plan: Plan, params: ReviewParams, outcome: Outcome, top_dir: Path,
               force: bool) -> str | None:
    """A top page's board file name in `top_dir`, drawn unless one records the page's current review
    (current by that fingerprint, as every output is by its inputs, not by mtimes: a node whose
    clock runs ahead would stamp an old board newer); None, with one log line, when it cannot
    be drawn (its scan gone, say)."""
    for ext in _BOARD_EXTS:
        name = f"{outcome.page_id}{ext}"
        if not force and _board_made_from(top_dir / name) == outcome.info["fingerprint"]:
            return name
    try:
        if record is None:
            raise PageError(f"not in {run_dir / rundir.MANIFEST}")
        return _write_board(run_dir, record, plan, params, outcome, top_dir)
    except RunDirError:   # not the page's fault: stop the stage with one line
        raise
    except Exception as exc:  # noqa: BLE001 - a board is one page's extra, not worth the stage
        log.error("review: page %s: board not drawn: %s", outcome.page_id,
                  exc if isinstance(exc, PageError) else f"{type(exc).__name__}: {first_line(exc)}")
        return None


def top_boards(run_dir: Path, records: dict, plan: Plan, params: ReviewParams, top: list[Outcome],
               top_dir: Path, forced: set[str]) -> dict[str, str | None]:
    """Page id -> board file name (`_top_board`) of each `top` page, drawn again for the `forced`
    ones; `top_dir` keeps the boards of these pages only."""
    top_dir.mkdir(parents=True, exist_ok=True)
    keep = {f"{o.page_id}{ext}" for o in top for ext in _BOARD_EXTS}
    for old in top_dir.iterdir():
        if old.name not in keep:
            old.unlink()
    return {o.page_id: _top_board(run_dir, records.get(o.page_id), plan, params, o, top_dir, o.page_id in forced)
            for o in top}
