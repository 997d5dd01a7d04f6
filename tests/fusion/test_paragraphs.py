"""The paragraphs recipe on constructed pages: columns, indented paragraphs, a headline, noise."""

import numpy as np
import pytest

from nbtest import make_boxes
from newsbag import labels
from newsbag.contract import Boxes
from newsbag.fusion.paragraph_regions import fuse_paragraphs
from newsbag.fusion.paragraphs import gutter_cuts, join_pairs, matched_lines, noise_mask, unnest_blocks
from newsbag.fusion.options import ParagraphParams

LH = 12          # line height; lines 13 px apart (1 px leading), as printed body text
P = ParagraphParams(granularity=("t/blocks",))


def rows(x0, x1, y0, n, indent=0, last=None):
    """n text lines of one paragraph from y0: the first indented, the last ending at `last`."""
    out = [[x0 + (indent if k == 0 else 0), y0 + 13 * k, x1, y0 + 13 * k + LH] for k in range(n)]
    if last is not None:
        out[-1][2] = last
    return out


def page(blocks, lines, *extra):
    return Boxes.concat([make_boxes(blocks, source="t/blocks", family="t"),
                         make_boxes(lines, label="text_line", source="t/lines", family="t"), *extra])


def text_regions(out):
    keep = np.isin(out.coarse, ["text", "title"])
    xyxy = out.xyxy[keep]
    return xyxy[np.lexsort((xyxy[:, 1], xyxy[:, 0]))]


def test_two_columns_are_never_one_region():
    left, right = rows(50, 450, 100, 12), rows(550, 950, 100, 12)
    # the block detector ran one block over both columns
    out = fuse_paragraphs(page([[50, 100, 950, 255]], left + right), P)
    got = text_regions(out)
    assert len(got) == 2
    np.testing.assert_allclose(got[:, [0, 2]], [[50, 450], [550, 950]])


def test_gutter_from_other_family_cuts_block_when_lines_cross_it():
    # lines run across a narrow gutter (the line detector merged them), so the lines show no
    # gutter; Tesseract's two side-by-side columns do.
    lines = rows(50, 950, 100, 12)
    tess = make_boxes([[50, 100, 490, 255], [510, 100, 950, 255]], source="x/paragraphs", family="x")
    out = fuse_paragraphs(page([[50, 100, 950, 255]], lines, tess), P)
    got = text_regions(out)
    assert len(got) == 2 and got[0, 2] <= 500 <= got[1, 0]


def test_paragraph_cut_without_a_cue_is_joined_and_indents_and_short_lines_stay_cuts():
    p1 = rows(50, 450, 100, 8)                          # full-width lines, detector cut after line 5
    p2 = rows(50, 450, 204, 4, indent=24, last=300)     # first line indented, last line short
    p3 = rows(50, 450, 256, 3)                          # no indent, but p2 ends short
    lines = p1 + p2 + p3
    blocks = [[50, 100, 450, 100 + 13 * 4 + LH], [50, 165, 450, 203 - 1 + 1],
              [50, 204, 450, 204 + 13 * 3 + LH], [50, 256, 450, 256 + 13 * 2 + LH]]
    out = fuse_paragraphs(page(blocks, lines), P)
    got = text_regions(out)
    np.testing.assert_allclose(got[:, [1, 3]], [[100, 203], [204, 255], [256, 294]])
    a, b = join_pairs(np.array(blocks, float), np.array(lines, float), LH, 0.3, 0.6, 1.0)
    assert sorted(zip(a.tolist(), b.tolist())) == [(0, 1)]


def test_headline_is_a_title_and_not_joined_with_the_body():
    head = [[150, 60, 350, 96]]                         # one line 3x the body height, centred
    body = rows(50, 450, 100, 8)
    out = fuse_paragraphs(page([[150, 60, 350, 96], [50, 100, 450, 203]], head + body), P)
    got = [(labels.LABELS[k], tuple(b)) for k, b in zip(out.label, out.xyxy.tolist())]
    assert sorted(got, key=lambda g: g[1][1]) == [("headline", (150, 60, 350, 96)), ("text", (50, 100, 450, 203))]


def test_noise_no_other_family_sees_is_dropped():
    body = rows(50, 450, 100, 8)
    speck = [[600, 500, 700, 508]]                      # lower than a line: show-through or dirt
    blocks = make_boxes([[50, 100, 450, 203], [600, 500, 700, 508]], source="t/blocks", family="t",
                        score=[0.99, 0.99])
    b = Boxes.concat([blocks, make_boxes(body + speck, label="text_line", source="t/lines", family="t")])
    assert len(text_regions(fuse_paragraphs(b, P))) == 1
    seen = make_boxes([[590, 495, 710, 512]], source="x/paragraphs", family="x")
    assert len(text_regions(fuse_paragraphs(Boxes.concat([b, seen]), P))) == 2


@pytest.mark.parametrize("score, h, keep", [(0.99, 12, True), (0.9, 12, False), (0.99, 8, False), (np.nan, 12, True)])
def test_noise_mask(score, h, keep):
    got = noise_mask(np.array([[0, 0, 100, h]], float), np.array([score]), np.zeros((0, 4)), 12.0, 0.9, 0.96, 0.3)
    assert got.tolist() == [keep]


def test_gutter_cuts_shrink_pieces_to_their_lines():
    blocks = np.array([[0, 0, 1000, 200]], float)
    ev = np.array([[0, 0, 480, 200], [520, 0, 1000, 200]], float)
    lines = np.array(rows(10, 990, 0, 10), float)
    cut, (parent, pieces) = gutter_cuts(blocks, ev, lines, 12.0, 4.0)
    assert cut.tolist() == [0] and parent.tolist() == [0, 0]
    np.testing.assert_allclose(pieces, [[10, 0, 500, 129], [500, 0, 990, 129]])


@pytest.mark.parametrize("family, n_kept", [("t", 0), ("p", 1)])
def test_score_rule_applies_to_text_line_blocks_only(family, n_kept):
    # a DB block's score is its lines' text probability; a layout model's 0.5 is a fine box
    blocks = make_boxes([[50, 100, 450, 112]], source=f"{family}/blocks", family=family, score=0.5)
    lines = make_boxes(rows(50, 450, 100, 1), label="text_line", source="t/lines", family="t")
    # noise_tall 0: the score rule at every height (a one-line block is 1 line tall)
    out = fuse_paragraphs(Boxes.concat([blocks, lines]), ParagraphParams(granularity=(f"{family}/blocks",), noise_tall=0.0))
    assert len(text_regions(out)) == n_kept


def _two_column_page(header_blocks, header_lines, *extra):
    """Two 12-line columns (gutter at x 500) under a header band at y 20..50."""
    body = rows(50, 450, 100, 12) + rows(550, 950, 100, 12)
    return page([[50, 100, 450, 255], [550, 100, 950, 255], *header_blocks], header_lines + body, *extra)


# A dateline: the detector ran one line through show-through over the whole width (y 20..32)
# and built one block around it, the left item (date) and the right item (price), which it
# also boxed on its own.
HEADER_LINES = [[50, 20, 950, 32], [60, 36, 300, 48], [600, 36, 940, 48]]


def test_block_around_another_block_across_a_gutter_becomes_its_lines():
    out = fuse_paragraphs(_two_column_page([[50, 20, 950, 50], [600, 36, 940, 48]], HEADER_LINES), P)
    header = text_regions(out)
    header = header[header[:, 1] < 100]
    # the outer block's own lines, and the inner block (its line stays with it)
    assert sorted(map(tuple, header.tolist())) == [(50, 20, 950, 32), (60, 36, 300, 48), (600, 36, 940, 48)]


@pytest.mark.parametrize("blocks, n_header", [
    ([[50, 20, 950, 50]], 1),                                    # no block inside it: one item
    ([[50, 20, 950, 50], [600, 36, 940, 48]], 2),                # unnesting off (nest_share 0)
])
def test_block_kept_whole_without_a_nested_block_or_with_the_rule_off(blocks, n_header):
    params = P if len(blocks) == 1 else ParagraphParams(granularity=("t/blocks",), nest_share=0.0)
    header = text_regions(fuse_paragraphs(_two_column_page(blocks, HEADER_LINES), params))
    assert len(header[header[:, 1] < 100]) == n_header


def test_unnest_blocks_needs_a_gutter_it_crosses_and_a_low_block():
    blocks = np.array([[50, 20, 950, 50], [600, 36, 940, 48]], float)
    lines = np.array(HEADER_LINES, float)
    cut, (parent, pieces) = unnest_blocks(blocks, lines, np.array([500.0]), 12.0, 0.8, 4.0, 2.0)
    assert cut.tolist() == [0] and parent.tolist() == [0, 0]
    np.testing.assert_allclose(pieces, [[50, 20, 950, 32], [60, 36, 300, 48]])
    # the gutter lies within 2 lines of its right edge: not across it
    assert unnest_blocks(blocks, lines, np.array([930.0]), 12.0, 0.8, 4.0, 2.0)[0].tolist() == []
    # 30 px is 2.5 lines: a block at least 2 lines tall is no longer low
    assert unnest_blocks(blocks, lines, np.array([500.0]), 12.0, 0.8, 2.0, 2.0)[0].tolist() == []
    assert unnest_blocks(blocks, lines, np.zeros(0), 12.0, 0.8, 4.0, 2.0)[0].tolist() == []


def test_a_line_the_blocks_leave_out_comes_back_when_another_family_boxes_it_too():
    body = rows(50, 450, 100, 8)
    mark = [[240, 205, 260, 225]]                       # a mark under the paragraph, no block
    tess = make_boxes([[242, 207, 258, 223]], source="x/paragraphs", family="x")
    b = page([[50, 100, 450, 203]], body + mark)
    assert len(text_regions(fuse_paragraphs(b, P))) == 1
    out = fuse_paragraphs(Boxes.concat([b, tess]), P)
    got = [(labels.LABELS[k], tuple(x)) for k, x in zip(out.label, out.xyxy.tolist())]
    assert ("text", (240, 205, 260, 225)) in got and len(got) == 2
    # a large box of another family covers the mark too, but does not match it
    big = make_boxes([[40, 90, 460, 240]], source="x/paragraphs", family="x")
    assert len(text_regions(fuse_paragraphs(Boxes.concat([b, big]), P))) == 1


def test_matched_lines():
    regions = np.array([[0, 0, 100, 50]], float)
    lines = np.array([[10, 10, 90, 20], [10, 60, 30, 80], [10, 45, 90, 58], [200, 0, 220, 20]], float)
    ev = np.array([[12, 62, 28, 78], [10, 44, 90, 58], [0, 0, 400, 400]], float)
    # 0: inside a region; 1: matched (IoU 0.64); 2: matched, but 5/13 inside the region (kept
    # out: less than half); 3: only inside a large box (IoU 0.0025)
    assert matched_lines(regions, lines, ev, 0.25).tolist() == [1, 2]
