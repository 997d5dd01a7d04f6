"""The review gallery: RUN/review/index.html (jinja2 template in `templates/`) plus one small data file per page.

index.html carries the leaderboards and one row per page (metrics only); each page's boxes
live in ``review/pages/<page_id>/data.js``, loaded with a <script> tag when the page is opened,
so a 5,000-page run opens as fast as a 20-page one and everything works from file:// with no
server (browsers refuse fetch() of local files, not <script src>).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from .. import rundir
from ..export.layout import page_regions
from ..io import atomic_write_text
from ..labels import CANONICAL, LABELS
from .reading import transcript_links

__all__ = ["TEMPLATE", "ASSETS", "DATA_JS", "SCANS", "THUMB", "render_gallery", "write_gallery", "gallery_pages", "gallery_links_current", "page_layer",
           "write_page_data"]

TEMPLATE = "gallery.html.j2"
ASSETS = ("gallery.css", "gallery.js")
# Shipped inside the package, beside this module.
_TEMPLATES = Path(__file__).resolve().parent / "templates"
DATA_JS = "data.js"
# The page view's scan: a 1-bit PNG for a page that is black and white already (most old newspaper
# scans are binarised: ~0.1 MB where a JPEG of their sharp edges is ~0.4 MB), else a JPEG.
SCANS = ("scan.png", "scan.jpg")
THUMB = "thumb.jpg"
# The template's first lines say how many pages the gallery holds (reviewed + failed): `gallery_pages`,
# and which transcripts it links (`reading.transcript_links`): `gallery_links_current`.
_PAGES_META = re.compile(rb'<meta name="newsbag-pages" content="(\d+)">')
_LINKS_META = re.compile(rb'<meta name="newsbag-transcripts" content="(\d+:[0-9a-f]+)">')
_HEAD_BYTES = 1024
# Members listed one by one up to this many per source; more (text lines) are counted.
_MEMBERS_LISTED = 3


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _num(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render_gallery(context: dict) -> str:
    """HTML text of the gallery for `context` (keys the template reads: run, data, leaderboards, failed, ...).

    The CSS and JS are inlined so the page works from file:// and after the run is moved.
    """
    import jinja2   # here, not at the top: every command's config check imports this module

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = _pct
    env.filters["num"] = _num
    # CSS and JS are read as plain text (not templates) so their braces never meet jinja.
    css, js = ((_TEMPLATES / name).read_text(encoding="utf-8") for name in ASSETS)
    return env.get_template(TEMPLATE).render(**context, css=css, js=js)


def gallery_pages(path: Path) -> int | None:
    """How many pages the gallery at `path` holds (reviewed or failed; the rest of the run's pages
    it leaves out), from its first KB; None when there is none, or it does not say. Cheap for
    `status` at 100k pages: the page rows are never parsed."""
    found = _head_meta(path, _PAGES_META)
    return None if found is None else int(found)


def gallery_links_current(run_dir: Path, page_ids: list[str]) -> bool:
    """Whether the run's gallery links the transcripts of `page_ids` there are now (those it
    records, `reading.transcript_links`): a `newsbag transcribe` since may have made others. A
    gallery made before it recorded them counts while the run has no transcript."""
    made_with = _head_meta(rundir.gallery_path(run_dir), _LINKS_META)
    now = transcript_links(run_dir, page_ids)
    return made_with == now or made_with is None and now.startswith("0:")


def _head_meta(path: Path, meta: re.Pattern) -> str | None:
    try:
        with open(path, "rb") as f:
            found = meta.search(f.read(_HEAD_BYTES))
    except OSError:
        return None
    return found.group(1).decode() if found else None


def write_gallery(path: Path, context: dict) -> Path:
    """Render the gallery and write it atomically to `path` (image links are relative to it)."""
    atomic_write_text(path, render_gallery(context), keep_same=True)
    return path


def _members_text(members: tuple[dict, ...]) -> list[str]:
    """'source: label score' per member; sources with many members (text lines) as 'source: N boxes'."""
    counts = Counter(str(m.get("source")) for m in members)
    out, listed = [], Counter()
    for m in members:
        src = str(m.get("source"))
        if counts[src] > _MEMBERS_LISTED:
            if not listed[src]:
                out.append(f"{src}: {counts[src]} boxes")
            listed[src] += 1
            continue
        score = m.get("score")
        out.append(f"{src}: {m.get('label')}" + ("" if score is None else f" {score:.2f}"))
    return out


def page_layer(name: str, kind: str, page: dict | None, *, failed: bool = False, pending: bool = False,
               recommended: bool = False) -> dict:
    """One overlay of a page's data file: its boxes as compact rows; `failed` or `pending` (a fused
    variant not made for the page yet) when it has none for that reason.

    Each box is ``[x0, y0, x1, y1, label_code, score|null, order|null, raw_label, support,
    members]`` in original image pixels; `label_code` indexes `labels.LABELS`; `support` and
    `members` (short strings) are empty for source layers.
    """
    boxes = []
    for r in page_regions(page) if page is not None else []:
        boxes.append([*r.xyxy, LABELS.index(r.cls), None if r.score is None else round(r.score, 3), r.order,
                      r.raw_label, list(r.support), _members_text(r.members)])
    return {"name": name, "kind": kind, "failed": failed, "pending": pending, "recommended": recommended,
            "boxes": boxes}


def write_page_data(path: Path, page_id: str, width: int, height: int, layers: list[dict], scan: str) -> None:
    """Write ``newsbagPage({...});`` for the gallery's page view (`scan`, one of `SCANS`, sits beside it)."""
    data = {"page_id": page_id, "width": width, "height": height, "scan": scan,
            "labels": list(LABELS), "coarse": [CANONICAL[name] for name in LABELS], "layers": layers}
    # "</" never appears raw, so the JSON is also safe to inline in HTML.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    atomic_write_text(path, f"newsbagPage({text});\n")
