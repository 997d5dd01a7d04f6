"""Write the review gallery (RUN/review/index.html) from the jinja2 template in the `review/` folder."""

from __future__ import annotations

from pathlib import Path

import jinja2

from ..errors import EnvError
from ..io import atomic_write_text
from ..resources import review_dir

__all__ = ["TEMPLATE", "ASSETS", "render_gallery", "write_gallery"]

TEMPLATE = "gallery.html.j2"
ASSETS = ("gallery.css", "gallery.js")


def _folder() -> Path:
    try:
        folder = review_dir()
    except FileNotFoundError as exc:
        raise EnvError(f"{exc}; reinstall newsbag (the wheel ships it as newsbag/_review)") from None
    for name in (TEMPLATE, *ASSETS):
        if not (folder / name).is_file():
            raise EnvError(f"review template file {folder / name} is missing; reinstall newsbag")
    return folder


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def render_gallery(context: dict) -> str:
    """HTML text of the gallery for `context` (keys the template reads: run, pages, failed, ...).

    The CSS and JS are inlined so the page works from file:// and after the run is moved.
    """
    folder = _folder()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = _pct
    # CSS and JS are read as plain text (not templates) so their braces never meet jinja.
    css, js = ((folder / name).read_text(encoding="utf-8") for name in ASSETS)
    return env.get_template(TEMPLATE).render(**context, css=css, js=js)


def write_gallery(path: Path, context: dict) -> Path:
    """Render the gallery and write it atomically to `path` (image links are relative to it)."""
    atomic_write_text(path, render_gallery(context))
    return path
