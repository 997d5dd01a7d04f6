"""Transcript geometry and article grouping on constructed pages."""

import json
from pathlib import Path

import numpy as np
import pytest

from newsbag.articles import group_articles
from newsbag.fusion.grid import spans_columns
from newsbag.fusion.order import reading_order
from newsbag.transcription.transcript import (assemble, column_pieces, join_hyphens, line_crops, line_rows, plan_page,
                                plan_regions)

# Two columns, x 0-100 and 120-220; lines 10 px tall.
LEFT, RIGHT = [0, 0, 100, 200], [120, 0, 220, 200]


@pytest.mark.parametrize("regions, lines, crops, region_of", [
    # empty (0,4) lines
    ([LEFT], [], [], []),
    # one line inside one region
    ([LEFT], [[5, 10, 95, 20]], [[5, 10, 95, 20]], [0]),
    # a line run across the gutter is read once per column, cut at the region edges
    ([LEFT, RIGHT], [[5, 10, 215, 20]], [[5, 10, 100, 20], [120, 10, 215, 20]], [0, 1]),
    # stacked overlapping regions: read once, in the region that holds more of it
    ([[0, 0, 100, 15], [0, 12, 100, 40]], [[5, 13, 95, 23]], [[5, 13, 95, 23]], [1]),
    # a line barely touching a region (2 of 10 px high) is not read there
    ([[0, 18, 100, 50]], [[5, 10, 95, 20]], [], []),
    # a speck line (1.5 x 1 px) cut at the region edge to a crop 0.5 px wide: nothing to read
    # there (the recogniser drops boxes under 1 px), so it is not planned
    ([LEFT], [[99.5, 10, 101, 11]], [], []),
    # ... and a speck 1 px wide but cut to 0.6 px high
    ([[0, 10.4, 100, 200]], [[5, 10, 6, 11]], [], []),
])
def test_line_crops(regions, lines, crops, region_of):
    got, region, line = line_crops(np.array(regions, float), np.array(lines, float).reshape(-1, 4))
    assert got.shape == (len(crops), 4)
    np.testing.assert_allclose(got, np.array(crops, float).reshape(-1, 4))
    assert region.tolist() == region_of


def test_line_rows_reads_rows_left_to_right():
    # two rows; the second row has its right word first in the input
    xyxy = np.array([[60, 22, 90, 31], [0, 0, 50, 10], [0, 21, 50, 30], [55, 1, 90, 11]], float)
    assert line_rows(xyxy).tolist() == [1, 3, 2, 0]
    assert line_rows(np.zeros((0, 4))).shape == (0,)


def test_plan_page_follows_reading_order_and_reads_small_unlined_regions():
    regions = np.array([RIGHT, LEFT, [0, 210, 220, 225]], float)  # rank: LEFT, RIGHT, then headline strip
    rank = np.array([1, 0, 2])
    lines = np.array([[125, 50, 215, 60], [5, 50, 95, 60], [5, 30, 95, 40]], float)
    crops, region = plan_page(regions, rank, lines)
    # LEFT (region 1) top to bottom, then RIGHT (region 0), then the unlined 15-px strip as one crop
    np.testing.assert_allclose(crops, [[5, 30, 95, 40], [5, 50, 95, 60], [125, 50, 215, 60], [0, 210, 220, 225]])
    assert region.tolist() == [1, 1, 0, 2]
    # a tall region with no line in it stays unread (not one giant crop)
    crops, region = plan_page(np.array([[0, 300, 100, 600]], float), np.array([0]), lines)
    assert crops.shape == (0, 4)


def test_assemble_joins_lines_per_region():
    assert assemble(3, np.array([1, 1, 0]), ["a", " b ", "c"]) == (["c", "a\nb", ""], [None, None, None])


def test_assemble_joins_hyphens_within_a_region_only():
    # line 0 and 2 are region 0, line 1 region 1: the hyphen of "Zei-" joins line 2, not line 1
    texts, joins = assemble(2, np.array([0, 1, 0]), ["die Zei-", "Bern", "tung ist da"])
    assert texts == ["die Zeitung\nist da", "Bern"]
    assert joins == ["dropped", None, None]


@pytest.mark.parametrize("lines, joined, joins", [
    # none; one line; empty
    (["a b", "c"], ["a b", "c"], [None, None]),
    (["Zei-"], ["Zei-"], [None]),
    ([], [], []),
    # a word the printer broke, with each hyphen mark the recognisers and the GT use: dropped
    (["die Zei-", "tung"], ["die Zeitung", ""], ["dropped", None]),
    (["die Zei¬", "tung ist"], ["die Zeitung", "ist"], ["dropped", None]),
    (["die Zei⸗", "tung ist"], ["die Zeitung", "ist"], ["dropped", None]),
    (["die Zei=", "tung, ist"], ["die Zeitung,", "ist"], ["dropped", None]),
    # the next part starts upper-case (a compound or a name): the hyphen is kept as "-"
    (["Zürich¬", "Stadt"], ["Zürich-Stadt", ""], ["kept", None]),
    # not a broken word: a dash after a space, a number, or a next line that starts with no letter
    (["sagte er -", "und ging"], ["sagte er -", "und ging"], [None, None]),
    (["1848-", "1850"], ["1848-", "1850"], [None, None]),
    (["Zei-", "— tung"], ["Zei-", "— tung"], [None, None]),
    # a chain: the moved part is itself broken at its line end
    (["Ver-", "fas-", "sung ist"], ["Verfassung", "", "ist"], ["dropped", "dropped", None]),
])
def test_join_hyphens(lines, joined, joins):
    assert join_hyphens(lines) == (joined, joins)


H = True
T = False


@pytest.mark.parametrize("xyxy, is_title, rank, expected", [
    # empty
    ([], [], [], []),
    # headline, then two bodies below it in its column: one article
    ([[0, 0, 100, 20], [0, 25, 100, 100], [0, 105, 100, 200]], [H, T, T], [0, 1, 2], [0, 0, 0]),
    # a headline deck (two stacked headlines) opens one article
    ([[0, 0, 100, 20], [0, 22, 100, 35], [0, 40, 100, 100]], [H, H, T], [0, 1, 2], [0, 0, 0]),
    # the article continues at the top of the next column to the right
    ([[0, 0, 100, 20], [0, 25, 100, 400], [120, 0, 220, 150]], [H, T, T], [0, 1, 2], [0, 0, 0]),
    # a second headline below the first article opens a new one
    ([[0, 0, 100, 20], [0, 25, 100, 100], [0, 110, 100, 130], [0, 135, 100, 200]],
     [H, T, H, T], [0, 1, 2, 3], [0, 0, 1, 1]),
    # body text before any headline is an article of its own; reading order, not input order, counts
    ([[0, 110, 100, 130], [0, 0, 100, 100], [0, 135, 100, 200]], [H, T, T], [1, 0, 2], [1, 0, 1]),
    # a body region back in a column to the left (not a continuation) opens a new article
    ([[120, 0, 220, 20], [120, 25, 220, 100], [0, 300, 100, 400]], [H, T, T], [0, 1, 2], [0, 0, 1]),
])
def test_group_articles(xyxy, is_title, rank, expected):
    got = group_articles(np.array(xyxy, float).reshape(-1, 4), np.array(is_title, bool), np.array(rank))
    assert got.tolist() == expected


def test_fused_pages_carry_article_ids_of_their_text_and_title_regions():
    from newsbag import labels
    from newsbag.contract import Boxes, PageMeta, boxes_from_page, regions_from_boxes
    from newsbag.fusion.fuse import articles

    xyxy = np.array([[0, 0, 100, 20], [0, 25, 100, 100], [120, 0, 220, 80], [0, 110, 100, 130]], float)
    names = ["headline", "text", "image", "text"]
    fused = Boxes(xyxy=xyxy, score=np.ones(4), label=[labels.label_code(n) for n in names],
                  meta=PageMeta("p", 300, 200), data={"order": np.array([0, 1, -1, 2])})
    # the image has no article; the body below the headline's article joins it
    assert articles(fused).tolist() == [0, 0, -1, 0]
    described = Boxes(xyxy=xyxy, score=fused.score, label=fused.label, meta=fused.meta,
                      data={**fused.data, "article": articles(fused)})
    regions = regions_from_boxes(described)
    assert [r["article"] for r in regions] == [0, 0, None, 0]
    page = {"page_id": "p", "image": {"path": "x.png", "width": 300, "height": 200},
            "source": {"stage": "fusion", "variant": "C"}, "regions": regions}
    assert boxes_from_page(page).data["article"].tolist() == [0, 0, -1, 0]
    assert articles(fused[np.zeros(0, np.intp)]).shape == (0,)


def test_a_region_whose_line_is_read_in_a_bigger_overlapping_region_is_not_read_again():
    """US sample, `paragraphs`: a one-line region inside a bigger region read the headline twice."""
    line = [30.0, 787.0, 154.0, 803.0]
    regions = np.array([[8, 701, 167, 805], line, [300, 300, 400, 316]], float)
    lines = np.array([[10, 710, 160, 726], line], float)
    crops, region = plan_page(regions, np.array([0, 1, 2]), lines)
    assert sum(np.allclose(c, line) for c in crops) == 1  # the headline once
    assert sorted(region.tolist()) == [0, 0, 2]  # the unlined small region elsewhere is still read alone


def test_us_sample_regions_fused_across_the_gutter_are_read_in_their_columns():
    # The US sample's paragraphs regions (tests/fusion/data): two regions hold the news
    # column's text and an advertisement's ("Further notice ..." with "small, accessible timber
    # tracts"; "FOSTER-PERKINS" with "If you have never bought from me"). The transcript reads
    # each part in its own column: no piece right of the gutter at x 737 between the news
    # column's first and last piece, and the ads' parts among the ads.
    data = json.loads((Path(__file__).parents[1] / "fusion" / "data" / "port_gibson_paragraphs.json").read_text())
    xyxy = np.array([r[1:] for r in data["regions"]], float)
    is_text = np.array([r[0] == "text" for r in data["regions"]])
    read = np.arange(len(xyxy))
    lines = np.array(data["lines"], float)
    rank = reading_order(xyxy, data["width"], data["height"], lines=lines, text=is_text)
    pieces, of, piece_rank, is_part = column_pieces(xyxy, is_text, read, rank, lines, data["width"], data["height"])
    assert sorted(set(of[is_part].tolist())) == [52, 70, 79]   # the three fused across a gutter, two parts each
    assert is_part.sum() == 6 and len(pieces) == len(xyxy) + 3
    news = (pieces[:, 0] >= 588) & (pieces[:, 2] <= 740) & (pieces[:, 1] > 210) & (pieces[:, 3] < 1430)
    ads = (pieces[:, 0] >= 730) & (pieces[:, 1] > 210)
    first, last = piece_rank[news].min(), piece_rank[news].max()
    assert not (ads & (piece_rank > first) & (piece_rank < last)).any()
    assert (ads & is_part).sum() == 2 and (piece_rank[ads & is_part] > last).all()
    # no cut region: the regions and their rank as they are
    same = column_pieces(xyxy[:5], is_text[:5], np.arange(5), np.arange(5), lines, data["width"], data["height"])
    assert same[1].tolist() == [0, 1, 2, 3, 4] and not same[3].any()


def test_group_articles_equals_the_region_by_region_walk():
    # The vectorised walk gives the article ids of the one-region-at-a-time walk it replaced:
    # random columns, headlines, decks, ties in rank, touching and NaN boxes.
    from reference.article_walk import group_articles_walk

    rng = np.random.default_rng(5)
    for _ in range(500):
        n = int(rng.integers(0, 60))
        col = rng.integers(0, 4, n) * 100.0
        y = rng.integers(0, 20, n) * 25.0
        xyxy = np.stack([col + rng.integers(-30, 30, n), y, col + rng.integers(40, 140, n), y + rng.integers(5, 80, n)], 1)
        if n and rng.random() < 0.1:
            xyxy[rng.integers(0, n)] = np.nan
        is_title = rng.random(n) < rng.random()
        rank = rng.integers(0, max(n, 1), n) if rng.random() < 0.3 else rng.permutation(n)
        np.testing.assert_array_equal(group_articles(xyxy, is_title, rank), group_articles_walk(xyxy, is_title, rank))


def test_a_block_reader_reads_single_column_regions_whole_and_a_region_across_columns_by_its_lines():
    # Two columns of 20 lines; the lower halves fused into one region across the gutter: read
    # whole by a block reader, each of its lines would run from one column into the other.
    lines = np.array([[x0, y, x0 + 100, y + 10] for x0 in (0, 120) for y in range(0, 400, 20)], float)
    regions = np.array([[0, 0, 100, 195], [120, 0, 220, 195], [0, 200, 220, 400]], float)
    whole = ~spans_columns(regions, 220, lines)
    assert whole.tolist() == [True, True, False]
    rank = np.array([0, 1, 2])
    crops, region_of, is_region = plan_regions(regions, rank, *plan_page(regions, rank, lines), whole)
    assert region_of.tolist() == [0, 1] + [2] * 20 and is_region.tolist() == [True, True] + [False] * 20
    assert crops[:2].tolist() == regions[:2].tolist()
    assert sorted(map(tuple, crops[2:].tolist())) == sorted(map(tuple, lines[lines[:, 1] >= 200].tolist()))
    # without lines there are no columns to tell: every region whole
    assert not spans_columns(regions, 220, None).any()
