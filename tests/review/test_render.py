"""render_board: layout of panels, box colours per coarse class, purity."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from newsbag import labels
from newsbag.contract import Boxes, PageMeta
from newsbag.review.render import ARTICLE_COLOR, CLASS_COLORS, render_board

MAGENTA = (255, 0, 255)


def boxes(xyxy, label="text", width=200, height=100) -> Boxes:
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    n = len(xyxy)
    return Boxes(xyxy=xyxy, score=np.full(n, 0.9), label=np.full(n, labels.label_code(label)),
                 meta=PageMeta("p", width, height))


def runs(mask_1d: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) runs of True."""
    padded = np.concatenate([[False], mask_1d, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def panels_by_row(board: Image.Image, color=MAGENTA) -> list[list[tuple[int, int, int, int]]]:
    """Rectangles (x0, y0, x1, y1) of pixels close to `color`, grouped by row of panels."""
    arr = np.asarray(board).astype(int)
    mask = np.all(np.abs(arr - np.array(color)) <= 3, axis=-1)
    out = []
    for y0, y1 in runs(mask.any(axis=1)):
        out.append([(x0, y0, x1, y1) for x0, x1 in runs(mask[y0:y1].any(axis=0))])
    return out


@pytest.mark.parametrize(
    "n_panels, max_panel_width, max_board_width, expected_per_row",
    [
        (0, 100, 1000, [1]),           # input only
        (1, 100, 1000, [2]),           # input + one source, one row
        (3, 100, 1000, [4]),           # all fit in one row
        (4, 100, 350, [3, 2]),         # 3 fit per row: 5 cells as 3 + 2
        (6, 100, 250, [2, 2, 2, 1]),   # 2 per row
    ],
)
def test_panels_wrap_into_rows(n_panels, max_panel_width, max_board_width, expected_per_row):
    image = Image.new("RGB", (200, 100), MAGENTA)
    panels = [(f"s{k}/v", boxes(np.zeros((0, 4)))) for k in range(n_panels)]
    board = render_board(image, panels, max_panel_width=max_panel_width, max_board_width=max_board_width)
    rows = panels_by_row(board)
    assert [len(r) for r in rows] == expected_per_row
    # Every panel is the page scaled to the panel width, aspect kept (200x100 -> 100x50).
    sizes = {(x1 - x0, y1 - y0) for row in rows for x0, y0, x1, y1 in row}
    assert sizes == {(100, 50)}
    assert board.width <= max_board_width


def test_panel_never_wider_than_the_page():
    image = Image.new("RGB", (60, 30), MAGENTA)
    board = render_board(image, [("a/x", boxes(np.zeros((0, 4)), width=60, height=30))], max_panel_width=500)
    assert {(x1 - x0, y1 - y0) for row in panels_by_row(board) for x0, y0, x1, y1 in row} == {(60, 30)}


def red_bbox(board: Image.Image, region) -> tuple[int, int, int, int] | None:
    """Bounding box of red-ish (text outline) pixels inside `region` (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = region
    arr = np.asarray(board)[y0:y1, x0:x1].astype(int)
    mask = (arr[..., 0] > 180) & (arr[..., 1] < 80) & (arr[..., 2] < 80)
    if not mask.any():
        return None
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


@pytest.mark.parametrize("image_size", [(200, 100), (100, 50)])  # full size; pre-downscaled by 2
def test_text_box_outline_is_red_where_the_box_is(image_size):
    image = Image.new("RGB", image_size, (255, 255, 0))
    # Page is 200x100; panel width 100 -> scale 0.5: box [40,20,160,80] -> [20,10,80,40].
    board = render_board(image, [("a/x", boxes([[40, 20, 160, 80]]))], max_panel_width=100)
    (input_rect, source_rect), = panels_by_row(board, color=(255, 255, 0))
    assert red_bbox(board, input_rect) is None
    x0, y0, x1, y1 = red_bbox(board, source_rect)
    assert abs(x0 - 20) <= 1 and abs(y0 - 10) <= 1 and abs(x1 - 80) <= 1 and abs(y1 - 40) <= 1


@pytest.mark.parametrize("label, coarse", [
    ("text", "text"),
    ("headline", "title"),
    ("image", "image"),
    ("table", "table"),
    ("separator", "other"),
    ("text_line", "line"),
])
def test_outline_colour_follows_coarse_class(label, coarse):
    image = Image.new("RGB", (200, 100), (255, 255, 255))
    board = render_board(image, [("a/x", boxes([[40, 20, 160, 80]], label=label))], max_panel_width=200)
    (_, (x0, y0, x1, y1)), = panels_by_row(board, color=(255, 255, 255))
    arr = np.asarray(board)[y0:y1, x0:x1].reshape(-1, 3)
    colours = {tuple(c) for c in np.unique(arr, axis=0).tolist()}
    assert CLASS_COLORS[coarse] in colours
    others = {c for name, c in CLASS_COLORS.items() if name != coarse}
    assert not (others & colours)


def test_empty_boxes_and_counts_title():
    image = Image.new("L", (120, 80), 200)
    board = render_board(image, [("a/x", boxes(np.zeros((0, 4)), width=120, height=80))], title="page-1")
    assert board.mode == "RGB"
    assert board.width > 2 * 120


def test_inputs_are_not_mutated():
    image = Image.new("RGB", (200, 100), (10, 200, 30))
    before = image.tobytes()
    b = boxes([[0, 0, 50, 50], [100, 10, 190, 90]])
    xyxy_before = b.xyxy.copy()
    out = render_board(image, [("a/x", b)])
    assert out is not image
    assert image.tobytes() == before and image.size == (200, 100) and image.mode == "RGB"
    np.testing.assert_array_equal(b.xyxy, xyxy_before)


def test_boxes_outside_the_page_are_clipped_not_fatal():
    image = Image.new("RGB", (200, 100), (255, 255, 255))
    board = render_board(image, [("a/x", boxes([[-50, -50, 500, 500], [30, 30, 30, 30]]))], max_panel_width=200)
    assert board.size[0] > 200


@pytest.mark.parametrize("kwargs, message", [
    ({"max_panel_width": 4}, "must be >= 16 px"),
    ({"max_board_width": 0}, "must be >= 16 px"),
])
def test_bad_widths_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        render_board(Image.new("RGB", (20, 20)), [], **kwargs)


def test_articles_get_one_outline_around_their_regions():
    image = Image.new("RGB", (200, 100), (255, 255, 0))
    # article 0 = headline + body in the left half; article 1 is a single region (no outline)
    page = boxes([[10, 10, 90, 20], [10, 30, 90, 90], [110, 10, 190, 90]])
    page = Boxes(xyxy=page.xyxy, score=page.score, label=page.label, meta=page.meta,
                 data={"article": np.array([0, 0, 1])})
    board = render_board(image, [("fusion/C", page)], max_panel_width=200)
    (_, rect), = panels_by_row(board, color=(255, 255, 0))
    x0, y0, x1, y1 = rect
    arr = np.asarray(board)[y0:y1, x0:x1]
    dark = np.all(arr == ARTICLE_COLOR, axis=-1)
    ys, xs = np.nonzero(dark)
    # the outline spans both regions of article 0 (x 10-90, y 10-90, padded) and nothing of article 1
    assert xs.min() <= 10 and xs.max() >= 90 and xs.max() < 105
    assert ys.min() <= 10 and ys.max() >= 90
    no_articles = render_board(image, [("fusion/C", boxes(page.xyxy))], max_panel_width=200)
    assert not np.all(np.asarray(no_articles)[y0:y1, x0:x1] == ARTICLE_COLOR, axis=-1).any()


def test_the_legend_names_article_outlines_and_the_note_says_why_look():
    """Article outlines (A5 ...) had no legend entry, and a board said nothing of why it was worth a look."""
    image = Image.new("RGB", (200, 100), (255, 255, 0))
    plain = render_board(image, [("a/x", boxes([[10, 10, 90, 90]]))], max_panel_width=200)
    noted = render_board(image, [("a/x", boxes([[10, 10, 90, 90]]))], max_panel_width=200,
                         note="why look: sources disagree")
    (_, (_, top, _, _)), = panels_by_row(plain, color=(255, 255, 0))
    legend = np.asarray(plain)[:top]
    assert np.all(legend == ARTICLE_COLOR, axis=-1).sum() > 20      # the article swatch's outline
    for name, color in CLASS_COLORS.items():
        assert np.all(legend == color, axis=-1).sum() > 20, name
    (_, (_, noted_top, _, _)), = panels_by_row(noted, color=(255, 255, 0))
    assert noted_top > top                                            # a line more for the note
    header = 2 * 15 + 14                                              # a panel's title and counts lines
    note_band = np.asarray(noted)[noted_top - header - (noted_top - top):noted_top - header]
    assert (note_band.max(axis=2) < 80).sum() > 30                    # the note's dark text
