"""The paragraphs recipe on constructed pages: columns, indented paragraphs, a headline, noise."""

import numpy as np
import pytest

from nbtest import make_boxes
from newsbag import labels
from newsbag.contract import Boxes
from newsbag.fusion.fuse import fuse_paragraphs
from newsbag.fusion.paragraphs import gutter_cuts, join_pairs, noise_mask
from newsbag.fusion.variants import ParagraphParams

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
    out = fuse_paragraphs(Boxes.concat([blocks, lines]), ParagraphParams(granularity=(f"{family}/blocks",)))
    assert len(text_regions(out)) == n_kept
