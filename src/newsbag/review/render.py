"""Draw a review board: the page plus one panel of outlined boxes per source or fused variant."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..contract import Boxes
from ..labels import COARSE_CLASSES

__all__ = ["CLASS_COLORS", "ARTICLE_COLOR", "render_board"]

# One colour per coarse class (RGB). Text is red so a reviewer's eye goes to text first;
# text lines are thin cyan so 1,000+ of them stay readable under the blocks.
CLASS_COLORS: dict[str, tuple[int, int, int]] = {
    "text": (220, 30, 30),
    "title": (30, 90, 230),
    "image": (20, 150, 60),
    "table": (235, 130, 0),
    "other": (150, 60, 190),
    "line": (0, 170, 200),
}
# Articles (a headline with its body regions) get one dark outline around all their regions.
ARTICLE_COLOR = (60, 60, 60)
_FILL_ALPHA = 40
_BACKGROUND = (246, 246, 246)
_INK = (25, 25, 25)
_GAP = 10
_FONT_PX = 15


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    # Pillow's bundled font needs no system fonts (clusters often have none installed).
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):
        return ImageFont.load_default()


def _fit(text: str, font, width: int) -> str:
    """`text` cut with "..." so it fits `width` pixels."""
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "...") > width:
        text = text[:-1]
    return text + "..."


def _counts_line(boxes: Boxes) -> str:
    coarse = boxes.coarse
    parts = [f"{name} {int(np.sum(coarse == name))}" for name in COARSE_CLASSES if np.any(coarse == name)]
    n = len(boxes)
    head = f"{n} region{'s' if n != 1 else ''}"
    return head + (": " + " · ".join(parts) if parts else "")


def _draw_boxes(page: Image.Image, boxes: Boxes, scale_xy: tuple[float, float]) -> Image.Image:
    """A new RGB image: `page` with translucent fills and solid outlines per coarse class."""
    if len(boxes) == 0:
        return page.copy()
    sx, sy = scale_xy
    xyxy = boxes.xyxy * np.array([sx, sy, sx, sy])
    xyxy[:, [0, 2]] = np.clip(xyxy[:, [0, 2]], 0, page.width - 1)
    xyxy[:, [1, 3]] = np.clip(xyxy[:, [1, 3]], 0, page.height - 1)
    xyxy = np.round(xyxy).astype(np.int64)
    # Pillow refuses x1 < x0; a degenerate box still gets a visible 1-px mark.
    xyxy[:, 2:] = np.maximum(xyxy[:, 2:], xyxy[:, :2])
    coarse = boxes.coarse
    # Big boxes first so small ones stay on top and clickable by eye.
    order = np.argsort(-boxes.area, kind="stable")
    block_width = max(2, round(page.width / 450))

    fill_layer = Image.new("RGBA", page.size, (0, 0, 0, 0))
    fill_draw = ImageDraw.Draw(fill_layer)
    for i in order:
        if coarse[i] != "line":
            fill_draw.rectangle(xyxy[i].tolist(), fill=CLASS_COLORS[coarse[i]] + (_FILL_ALPHA,))
    out = Image.alpha_composite(page.convert("RGBA"), fill_layer).convert("RGB")
    draw = ImageDraw.Draw(out)
    for i in order:
        width = 1 if coarse[i] == "line" else block_width
        draw.rectangle(xyxy[i].tolist(), outline=CLASS_COLORS[coarse[i]], width=width)
    if "article" in boxes.data:
        _draw_articles(draw, xyxy, boxes.data["article"], block_width, page.size)
    return out


def _draw_articles(draw: ImageDraw.ImageDraw, xyxy: np.ndarray, article: np.ndarray, width: int,
                   size: tuple[int, int]) -> None:
    """One outline around the regions of each article of two or more regions, numbered at its top left."""
    font = _font(max(10, 4 * width + 6))
    pad = 2 * width
    for a in np.unique(article[article >= 0]):
        mine = xyxy[article == a]
        if len(mine) < 2:
            continue
        box = [max(int(mine[:, 0].min()) - pad, 0), max(int(mine[:, 1].min()) - pad, 0),
               min(int(mine[:, 2].max()) + pad, size[0] - 1), min(int(mine[:, 3].max()) + pad, size[1] - 1)]
        draw.rectangle(box, outline=ARTICLE_COLOR, width=width)
        draw.text((box[0] + pad, box[1] + pad), f"A{int(a)}", fill=ARTICLE_COLOR, font=font)


def _legend_entries() -> list[tuple[str, tuple[int, int, int], tuple[int, int, int]]]:
    """(name, outline, fill) of every mark a panel can hold: the coarse classes and the article outline."""
    entries = [(name, CLASS_COLORS[name], tuple(int(c * .3 + 255 * .7) for c in CLASS_COLORS[name]))
               for name in COARSE_CLASSES]
    return entries + [("article A<n> (its regions)", ARTICLE_COLOR, _BACKGROUND)]


def _legend(width: int, title: str, note: str, font, small) -> Image.Image:
    """The bar over the panels: the title and every mark's colour on one line (wrapped when
    narrow), then `note` (why the page is worth a look) cut to the board's width."""
    line_h = _FONT_PX + _GAP
    rows: list[list[tuple[str, tuple, tuple, int]]] = [[]]
    x = _GAP + (int(font.getlength(title)) + 3 * _GAP if title else 0)
    start = x
    for name, outline, fill in _legend_entries():
        step = 24 + int(small.getlength(name)) + 2 * _GAP
        if x + step > width and rows[-1]:
            rows.append([])
            x = start
        rows[-1].append((name, outline, fill, x))
        x += step
    height = _GAP + line_h * (len(rows) + bool(note)) + _GAP // 2
    img = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(img)
    if title:
        draw.text((_GAP, _GAP - 2), _fit(title, font, max(40, width // 2)), fill=_INK, font=font)
    for k, row in enumerate(rows):
        y = _GAP + k * line_h
        for name, outline, fill, x in row:
            draw.rectangle([x, y, x + 18, y + _FONT_PX - 1], fill=fill, outline=outline, width=2)
            draw.text((x + 24, y - 1), name, fill=_INK, font=small)
    if note:
        draw.text((_GAP, _GAP + len(rows) * line_h - 1), _fit(note, small, width - 2 * _GAP), fill=_INK, font=small)
    return img


def render_board(
    image: Image.Image,
    panels: list[tuple[str, Boxes]],
    *,
    max_panel_width: int = 640,
    max_board_width: int = 2400,
    title: str = "",
    note: str = "",
) -> Image.Image:
    """Side-by-side board: the page, then each (title, boxes) panel, wrapped into rows.

    Args:
        image: the page (any PIL mode, possibly already downscaled); never modified.
        panels: (panel title, boxes) per source or fused variant. Boxes are in original page
            pixels and are scaled by their ``meta.width``/``meta.height`` (the image size when
            the meta has none), so a pre-downscaled image is fine.
        max_panel_width: width in pixels of each panel (smaller when the image is smaller).
        max_board_width: columns are added while the board stays within this width.
        title: text at the left of the legend bar (e.g. the page id).
        note: a line under the legend (e.g. why the page is worth a look).

    Returns:
        A new RGB image: legend bar on top, then panels each with a two-line header
        (title; region count per coarse class).
    """
    if image.width < 1 or image.height < 1:
        raise ValueError(f"image must be non-empty, got size {image.size}")
    if max_panel_width < 16 or max_board_width < 16:
        raise ValueError(f"panel and board widths must be >= 16 px, got {max_panel_width}, {max_board_width}")
    panel_w = min(max_panel_width, max_board_width, image.width)
    panel_h = max(1, round(image.height * panel_w / image.width))
    page = image.convert("RGB").resize((panel_w, panel_h), Image.Resampling.LANCZOS, reducing_gap=3.0)

    font, small = _font(_FONT_PX + 1), _font(_FONT_PX - 1)
    header_h = 2 * _FONT_PX + 14
    cells: list[tuple[str, str, Image.Image]] = [("input", f"{image.width}x{image.height} px", page)]
    for name, boxes in panels:
        w = boxes.meta.width or image.width
        h = boxes.meta.height or image.height
        cells.append((name, _counts_line(boxes), _draw_boxes(page, boxes, (panel_w / w, panel_h / h))))

    cols = max(1, min(len(cells), (max_board_width + _GAP) // (panel_w + _GAP)))
    rows = math.ceil(len(cells) / cols)
    cols = math.ceil(len(cells) / rows)  # balanced rows: 5 cells as 3 + 2, not 4 + 1
    board_w = cols * panel_w + (cols + 1) * _GAP
    legend = _legend(board_w, title, note, font, small)
    cell_h = header_h + panel_h
    board_h = legend.height + rows * cell_h + rows * _GAP
    board = Image.new("RGB", (board_w, board_h), _BACKGROUND)
    board.paste(legend, (0, 0))
    draw = ImageDraw.Draw(board)
    for k, (name, counts, img) in enumerate(cells):
        r, c = divmod(k, cols)
        x = _GAP + c * (panel_w + _GAP)
        y = legend.height + r * (cell_h + _GAP)
        draw.text((x, y + 2), _fit(name, font, panel_w), fill=_INK, font=font)
        draw.text((x, y + _FONT_PX + 6), _fit(counts, small, panel_w), fill=(90, 90, 90), font=small)
        board.paste(img, (x, y + header_h))
        draw.rectangle([x - 1, y + header_h - 1, x + panel_w, y + header_h + panel_h], outline=(200, 200, 200))
    return board
