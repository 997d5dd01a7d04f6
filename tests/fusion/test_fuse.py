import numpy as np
import pytest
from nbtest import make_boxes

from newsbag.contract import Boxes
from newsbag.fusion.consensus import fuse_consensus
from newsbag.fusion.fuse import VARIANTS, describe
from newsbag.fusion.pooling import take_sources
from newsbag.fusion.options import METHODS, ConsensusParams


def pool(*parts):
    return Boxes.concat(list(parts))


def lines_in(x0, x1, y0, y1, step=20, height=10):
    return [[x0, y, x1, y + height] for y in range(y0, y1 - height + 1, step)]


@pytest.mark.parametrize("parts, vote, n_out", [
    # one family twice (blocks + paragraphs) is one vote: dropped at vote 2
    ([("tesseract/blocks", "tesseract"), ("tesseract/paragraphs", "tesseract")], 2, 0),
    # two families agree: kept once
    ([("tesseract/blocks", "tesseract"), ("paddle_layout/cdla", "paddle_layout")], 2, 1),
    # vote 1 keeps a lone source
    ([("tesseract/blocks", "tesseract")], 1, 1),
    # three families needed, two present
    ([("a/x", "a"), ("b/x", "b")], 3, 0),
])
def test_vote_counts_families(parts, vote, n_out):
    b = pool(*[make_boxes([[0, 0, 100, 100]], source=s, family=f) for s, f in parts])
    out = fuse_consensus(b, ConsensusParams(vote=vote))
    assert len(out) == n_out


def test_text_lines_are_a_vote_for_text():
    para = make_boxes([[0, 0, 100, 100]], source="tesseract/paragraphs")
    lines = make_boxes(lines_in(0, 100, 0, 100, step=12, height=11), label="text_line", source="text_lines/lines")
    out = fuse_consensus(pool(para, lines), ConsensusParams(vote=2))
    assert len(out) == 1
    assert set(describe(out, pool(para, lines), "fusion/C").data["support"][0]) == {
        "tesseract/paragraphs", "text_lines/lines"}


def test_solo_score_keeps_confident_single_source():
    b = make_boxes([[0, 0, 50, 50], [100, 0, 150, 50]], source="a/x", score=[0.95, 0.5])
    out = fuse_consensus(b, ConsensusParams(vote=2, solo_score=0.9))
    np.testing.assert_allclose(out.xyxy, [[0, 0, 50, 50]])


def test_matched_boxes_are_score_weighted():
    b = pool(make_boxes([[0, 0, 100, 100]], source="a/x", score=0.9),
             make_boxes([[10, 0, 110, 100]], source="b/x", score=0.6),
             make_boxes([[4, 0, 104, 100]], source="c/x"))       # no score: weight 0.5
    out = fuse_consensus(b, ConsensusParams(vote=1))
    x0 = (0 * 0.9 + 10 * 0.6 + 4 * 0.5) / (0.9 + 0.6 + 0.5)
    np.testing.assert_allclose(out.xyxy, [[x0, 0, x0 + 100, 100]])
    np.testing.assert_allclose(out.score, [(0.9 + 0.6) / 2], rtol=1e-6)
    assert sorted(out.data["member_idx"][0]) == [0, 1, 2]


def test_source_weights_shift_coordinates():
    b = pool(make_boxes([[0, 0, 100, 100]], source="a/x", score=0.5),
             make_boxes([[10, 0, 110, 100]], source="b/x", score=0.5))
    out = fuse_consensus(b, ConsensusParams(vote=1, weights=(("a/*", 3.0),)))
    x0 = (0 * 1.5 + 10 * 0.5) / 2.0
    np.testing.assert_allclose(out.xyxy[:, 0], [x0])


def _block_and_paragraphs():
    block = make_boxes([[0, 0, 100, 200]], source="a/blocks", family="a")
    paras = make_boxes([[0, 0, 100, 95], [0, 105, 100, 200]], source="b/paras", family="b")
    return pool(block, paras)


@pytest.mark.parametrize("prefer, expected", [
    # paragraphs fully cover a supported block: the finer granularity is kept
    ("fine", [[0, 0, 100, 95], [0, 105, 100, 200]]),
    ("support", [[0, 0, 100, 95], [0, 105, 100, 200]]),
    # coarse keeps the block and absorbs the paragraphs as members
    ("coarse", [[0, 0, 100, 200]]),
])
def test_granularity_choice(prefer, expected):
    b = _block_and_paragraphs()
    out = fuse_consensus(b, ConsensusParams(vote=2, prefer=prefer))
    got = out.xyxy[np.lexsort((out.xyxy[:, 1], out.xyxy[:, 0]))]
    np.testing.assert_allclose(got, expected)
    if prefer == "coarse":
        assert sorted(out.data["member_idx"][0]) == [0, 1, 2]


def test_granularity_ranking_breaks_ties():
    b = _block_and_paragraphs()
    out = fuse_consensus(b, ConsensusParams(vote=2, granularity=("a/*", "b/*")))
    np.testing.assert_allclose(out.xyxy, [[0, 0, 100, 200]])


def test_split_columns_cuts_region_at_gutter():
    region = make_boxes([[0, 0, 210, 100]], source="t/p", family="t")
    lines = make_boxes(lines_in(0, 100, 0, 100) + lines_in(110, 210, 0, 100), label="text_line", source="l/l")
    b = pool(region, lines)
    no_split = fuse_consensus(b, ConsensusParams(vote=1))
    assert len(no_split) == 1
    out = fuse_consensus(b, ConsensusParams(vote=1, split_columns=True, col_gap=0.005))
    got = out.xyxy[np.argsort(out.xyxy[:, 0])]
    np.testing.assert_allclose(got, [[0, 0, 100, 90], [110, 0, 210, 90]])
    assert out.data["order"].tolist() == list(np.argsort(np.argsort(out.xyxy[:, 0])))


def test_fill_adds_rejected_box_holding_uncovered_lines():
    kept = pool(make_boxes([[0, 0, 100, 100]], source="t/p", family="t"),
                make_boxes([[0, 0, 100, 100]], source="c/x", family="c"))
    lonely = make_boxes([[300, 0, 400, 100]], source="l/blocks", family="l")
    lines = make_boxes(lines_in(305, 395, 5, 60, step=15), label="text_line", source="l/lines", family="l")
    b = pool(kept, lonely, lines)
    assert len(fuse_consensus(b, ConsensusParams(vote=2))) == 1
    out = fuse_consensus(b, ConsensusParams(vote=2, fill_lines=True))
    # the rejected box comes back as the extent of its uncovered lines
    got = out.xyxy[np.argsort(out.xyxy[:, 0])]
    np.testing.assert_allclose(got, [[0, 0, 100, 100], [305, 5, 395, 60]])


def _any_pool():
    return pool(
        make_boxes([[0, 0, 100, 100], [120, 0, 220, 100], [0, 120, 220, 200]], source="a/x", score=[0.9, 0.8, 0.7]),
        make_boxes([[2, 0, 98, 102], [0, 120, 220, 205]], source="b/x", label=["text", "title"]),
        make_boxes(lines_in(5, 95, 5, 95) + lines_in(125, 215, 5, 95), label="text_line", source="l/l"),
    )


@pytest.mark.parametrize("method", sorted(VARIANTS))
def test_variant_contract(method):
    fn, params = VARIANTS[method], METHODS[method]()
    b = _any_pool()
    before = {k: v.copy() for k, v in b.data.items()}, b.xyxy.copy()
    out1, out2 = fn(b, params), fn(b, params)
    assert out1.xyxy.dtype == np.float64 and out1.xyxy.shape[1] == 4
    assert len(out1) > 0
    np.testing.assert_array_equal(out1.xyxy, out2.xyxy)                 # deterministic
    np.testing.assert_array_equal(out1.label, out2.label)
    np.testing.assert_array_equal(b.xyxy, before[1])                     # input unchanged
    assert all(np.array_equal(b.data[k], v) for k, v in before[0].items())
    assert sorted(out1.data["order"].tolist()) == list(range(len(out1)))
    empty = Boxes.empty(b.meta, data_keys=("source", "family"))
    assert fn(empty, params).xyxy.shape == (0, 4)
    d = describe(out1, b, "fusion/x")
    assert all(len(m) >= 1 for m in d.data["members"]) and all(len(s) >= 1 for s in d.data["support"])


def test_best_single_picks_source_with_best_line_score():
    lines = make_boxes(lines_in(0, 100, 0, 100) + lines_in(200, 300, 0, 100), label="text_line", source="l/l")
    page_box = make_boxes([[0, 0, 300, 100]], source="p/page")                    # crosses the gutter
    columns = make_boxes([[0, 0, 100, 100], [200, 0, 300, 100]], source="c/cols")
    out = VARIANTS["best_single"](pool(lines, page_box, columns), METHODS["best_single"]())
    np.testing.assert_allclose(out.xyxy[np.argsort(out.xyxy[:, 0])], columns.xyxy)


def test_container_over_side_by_side_children_gives_way_to_them_and_its_lines():
    container = [[0, 0, 300, 200]]
    children = [[0, 0, 140, 60], [160, 0, 300, 60]]       # cover 28% of it, side by side
    b = pool(make_boxes(container, source="a/x"), make_boxes(container, source="b/x"),
             make_boxes(children, source="c/x"), make_boxes(children, source="d/x"),
             make_boxes(lines_in(0, 140, 0, 200, step=15) + lines_in(160, 300, 0, 200, step=15),
                        label="text_line", source="l/l"))
    kept = fuse_consensus(b, ConsensusParams(vote=2, prefer="fine"))
    np.testing.assert_allclose(kept.xyxy, container)
    out = fuse_consensus(b, ConsensusParams(vote=2, prefer="fine", split_columns=True))
    got = out.xyxy[np.lexsort((out.xyxy[:, 0], out.xyxy[:, 1]))]
    # the children, then the container's uncovered lines as one block per column
    np.testing.assert_allclose(got, [[0, 0, 140, 60], [160, 0, 300, 60], [0, 60, 140, 190], [160, 60, 300, 190]])
    names = ["a/x", "b/x", "c/x", "d/x", "l/l"]
    blocks = out.data["member_idx"][np.argsort(np.lexsort((out.xyxy[:, 0], out.xyxy[:, 1])))[2:]]
    assert all(sorted({names[0] if m == 0 else names[1] for m in mi}) == ["a/x", "b/x"] for mi in blocks)


def test_children_stacked_in_one_column_do_not_split_container():
    container = [[0, 0, 300, 200]]
    children = [[0, 0, 300, 40], [0, 100, 300, 140]]      # one above the other, 40% coverage
    b = pool(make_boxes(container, source="a/x"), make_boxes(container, source="b/x"),
             make_boxes(children, source="c/x"), make_boxes(children, source="d/x"))
    out = fuse_consensus(b, ConsensusParams(vote=2, prefer="fine", split_columns=True))
    np.testing.assert_allclose(out.xyxy, container)


def _ranked(children, container=((0, 0, 300, 200),)):
    """A coarse box from c/blocks and finer boxes from t/lines-blocks (ranked first)."""
    return pool(make_boxes(list(container), source="c/blocks", family="c"),
                make_boxes(list(children), source="t/blocks", family="t"))


RANK = dict(vote=1, prefer="rank", granularity=("t/*", "c/*"))


def test_rank_better_children_covering_the_container_replace_it():
    children = [[0, 0, 300, 95], [0, 105, 300, 200]]
    out = fuse_consensus(_ranked(children), ConsensusParams(**RANK))
    np.testing.assert_allclose(out.xyxy[np.argsort(out.xyxy[:, 1])], children)


def test_rank_better_container_absorbs_worse_children():
    children = [[0, 0, 300, 95], [0, 105, 300, 200]]
    out = fuse_consensus(_ranked(children), ConsensusParams(**{**RANK, "granularity": ("c/*", "t/*")}))
    np.testing.assert_allclose(out.xyxy, [[0, 0, 300, 200]])
    assert sorted(out.data["member_idx"][0]) == [0, 1, 2]


def test_rank_small_better_child_leaves_the_container_to_the_shadow_rule():
    child = [[0, 0, 60, 20]]                   # 2% of the container: not a replacement
    b = _ranked(child)
    both = fuse_consensus(b, ConsensusParams(**RANK))
    np.testing.assert_allclose(both.xyxy[np.argsort(area_of(both.xyxy))], [child[0], [0, 0, 300, 200]])
    # the container is covered 2% by the better-ranked child: kept at t_shadow 0.3, dropped at 0.01
    assert len(fuse_consensus(b, ConsensusParams(**RANK, t_shadow=0.3))) == 2
    np.testing.assert_allclose(fuse_consensus(b, ConsensusParams(**RANK, t_shadow=0.01)).xyxy, child)


def test_shadow_drops_worse_ranked_partial_overlaps_and_keeps_new_regions():
    b = pool(make_boxes([[0, 0, 100, 100]], source="t/blocks", family="t"),
             make_boxes([[50, 0, 150, 100], [400, 0, 500, 100]], source="c/blocks", family="c"))
    out = fuse_consensus(b, ConsensusParams(**RANK, t_shadow=0.3))
    # [50, 0, 150, 100] is half under the better-ranked box; [400, ...] adds a region
    np.testing.assert_allclose(out.xyxy[np.argsort(out.xyxy[:, 0])], [[0, 0, 100, 100], [400, 0, 500, 100]])
    assert len(fuse_consensus(b, ConsensusParams(**RANK))) == 3          # t_shadow 1: never


def test_solo_min_size_keeps_large_single_family_boxes_in_line_heights():
    big, small = [0, 0, 400, 100], [500, 0, 530, 10]
    lines = make_boxes(lines_in(600, 700, 0, 100), label="text_line", source="l/lines", family="l")
    b = pool(make_boxes([big, small], source="a/x"), lines)      # median line height 10
    assert len(fuse_consensus(b, ConsensusParams(vote=2))) == 0
    out = fuse_consensus(b, ConsensusParams(vote=2, solo_min_size=(4.0, 1.0)))
    np.testing.assert_allclose(out.xyxy, [big])                  # small is 3 lines wide: < 4
    # without text lines there is no line height: the rule keeps nothing
    assert len(fuse_consensus(make_boxes([big, small], source="a/x"),
                              ConsensusParams(vote=2, solo_min_size=(4.0, 1.0)))) == 0


def area_of(xyxy):
    return (xyxy[:, 2] - xyxy[:, 0]) * (xyxy[:, 3] - xyxy[:, 1])


def test_split_container_keeps_its_lines_when_another_box_is_shadowed():
    # The page of the test above, plus a worse-ranked box below, half under a better-ranked
    # one (shadowed at t_shadow 0.3). Dropping it must not lose the lines of the container that gave way: the
    # shadow step's `take` dropped the record of replaced containers (4 -> 2 regions).
    container = [[0, 0, 300, 200]]
    children = [[0, 0, 140, 60], [160, 0, 300, 60]]
    b = pool(make_boxes(container, source="a/x"), make_boxes(container, source="b/x"),
             make_boxes(children, source="c/x"), make_boxes(children, source="d/x"),
             make_boxes([[0, 300, 300, 400]], source="c/x"), make_boxes([[0, 300, 300, 400]], source="d/x"),
             make_boxes([[0, 350, 300, 450]], source="a/x"), make_boxes([[0, 350, 300, 450]], source="b/x"),
             make_boxes(lines_in(0, 140, 0, 200, step=15) + lines_in(160, 300, 0, 200, step=15)
                        + lines_in(0, 300, 300, 400, step=15), label="text_line", source="l/l"))
    params = ConsensusParams(vote=2, prefer="rank", granularity=("c/*", "d/*", "a/*", "b/*"), t_iou=0.9,
                             split_columns=True, t_shadow=0.3)
    out = fuse_consensus(b, params)
    got = out.xyxy[np.lexsort((out.xyxy[:, 0], out.xyxy[:, 1]))]
    np.testing.assert_allclose(got, [[0, 0, 140, 60], [160, 0, 300, 60], [0, 60, 140, 190], [160, 60, 300, 190],
                                     [0, 300, 300, 400]])


def test_page_sized_box_is_neither_region_nor_vote():
    # CDLA on an old scan: one "figure" over the whole page; other members find two columns.
    page = make_boxes([[0, 0, 1000, 1000]], label="image", source="p/cdla")
    page_text = make_boxes([[5, 5, 995, 995]], source="p/cdla")
    cols = make_boxes([[0, 0, 480, 1000], [520, 0, 1000, 1000]], source="t/blocks")
    b = pool(page, page_text, cols)
    assert (area_of(fuse_consensus(b, ConsensusParams(vote=1)).xyxy) >= 0.6e6).any()   # without the rule
    out = fuse_consensus(b, ConsensusParams(vote=1, max_page_share=0.6))
    np.testing.assert_allclose(out.xyxy[np.argsort(out.xyxy[:, 0])], cols.xyxy)
    assert sorted(int(m[0]) for m in out.data["member_idx"]) == [2, 3]   # indices into the full input
    # at vote 2 the page-sized text box no longer votes for the columns
    assert len(fuse_consensus(b, ConsensusParams(vote=2, max_page_share=0.6))) == 0


def _shipped_variants():
    """(config file, variant) for every variant of every shipped parameter set."""
    import json
    from pathlib import Path

    from newsbag.fusion.options import DEFAULT_FUSION_CFG, parse_fusion_config

    out = []
    for path in sorted((Path(__file__).resolve().parents[2] / "configs").glob("pipeline.*.json")):
        stage = [s for s in json.loads(path.read_text())["stages"] if s.get("kind") == "fusion"][0]
        section = {k: v for k, v in stage.items() if k not in ("name", "kind")}
        out += [(path.name, v) for v in parse_fusion_config({**DEFAULT_FUSION_CFG, **section}).variants]
    return out


@pytest.mark.parametrize("config, variant", _shipped_variants(), ids=lambda x: getattr(x, "name", x))
def test_shipped_variant_contract(config, variant):
    from newsbag.fusion.options import with_order

    from newsbag.fusion.options import FusionConfig

    variant = with_order(FusionConfig((variant,)), ["b/x", "a/x"]).variants[0]   # "auto" -> a fixed order
    fn, params = VARIANTS[variant.method], variant.params
    b = _any_pool()
    before = {k: v.copy() for k, v in b.data.items()}, b.xyxy.copy()
    out1, out2 = fn(b, params), fn(b, params)
    assert out1.xyxy.dtype == np.float64 and out1.xyxy.shape == (len(out1), 4) and len(out1) > 0
    assert out1.score.dtype == np.float32 and out1.label.dtype == np.int8
    np.testing.assert_array_equal(out1.xyxy, out2.xyxy)                 # deterministic
    np.testing.assert_array_equal(out1.label, out2.label)
    np.testing.assert_array_equal(b.xyxy, before[1])                     # input unchanged
    assert all(np.array_equal(b.data[k], v) for k, v in before[0].items())
    assert sorted(out1.data["order"].tolist()) == list(range(len(out1)))
    assert all(len(m) >= 1 and max(m) < len(b) for m in out1.data["member_idx"])
    empty = Boxes.empty(b.meta, data_keys=("source", "family"))
    assert fn(empty, params).xyxy.shape == (0, 4)


@pytest.mark.parametrize("extra, expected", [
    ([], ["text", "text"]),                                                     # no heading evidence
    ([make_boxes([[0, 0, 300, 40]], label="headline", source="t/blocks", family="t")],
     ["headline", "text"]),                                                     # a source's heading covers it
])
def test_titles_from_heading_boxes(extra, expected):
    regions = make_boxes([[0, 0, 300, 40], [0, 50, 300, 250]], source="b/blocks", family="b")
    lines = make_boxes([[0, 5, 300, 20]] + lines_in(0, 300, 50, 250), label="text_line", source="l/l", family="l")
    out = fuse_consensus(pool(regions, lines, *extra), ConsensusParams(vote=1, titles=True, t_ioa=0.99,
                                                                       granularity=("b/*",), prefer="rank",
                                                                       t_shadow=0.3))
    from newsbag import labels
    got = [labels.LABELS[k] for k in out.label[np.argsort(out.xyxy[:, 1])]]
    assert got == expected


def test_titles_from_line_height():
    # one line 3x the body line height: a headline; one body line alone stays text
    regions = make_boxes([[0, 0, 300, 40], [0, 50, 300, 250], [0, 260, 300, 272]], source="b/blocks")
    lines = make_boxes([[0, 5, 300, 35]] + lines_in(0, 300, 50, 250) + [[0, 261, 300, 271]],
                       label="text_line", source="l/l")
    from newsbag import labels
    out = fuse_consensus(pool(regions, lines), ConsensusParams(vote=1, titles=True))
    got = [labels.LABELS[k] for k in out.label[np.argsort(out.xyxy[:, 1])]]
    assert got == ["headline", "text", "text"]
    out = fuse_consensus(pool(regions, lines), ConsensusParams(vote=1))
    assert [labels.LABELS[k] for k in out.label] == ["text"] * 3


@pytest.mark.parametrize("sources", [("paddle_layout/", "text_lines/"), ("paddle_layout/", "dell/", "text_lines/"),
                                     ("mineru/", "paddle_vl15/"), ("",)])   # "": every source, the pool itself
def test_consensus_on_take_sources_boxes_is_the_consensus_on_fresh_copies(tmp_path, sources):
    """A variant over some of the pool's sources (`take_sources`): every output column equals
    a run on fresh copies of those sources' boxes."""
    from synthetic_run import TORCH_SOURCES, write_synthetic_run

    from newsbag.fusion.geometry import self_pairs, subset_pairs
    from newsbag.page_reader import read_source_boxes

    run = write_synthetic_run(tmp_path, TORCH_SOURCES, ["p"])
    parts = [read_source_boxes(f, "p", f"{f.parts[-3]}/{f.parts[-2]}")[0]
             for f in sorted(run.glob("outputs/sources/*/*/p.json"))]
    whole = Boxes.concat(parts)
    pairs = self_pairs(whole.xyxy)
    mask = np.array([s.startswith(sources) for s in whole.data["source"].tolist()])
    params = ConsensusParams(vote=2, split_columns=True, fill_lines=True, titles=True)
    boxes, sub_pairs = take_sources(whole, pairs, mask)
    shared = fuse_consensus(boxes, params, sub_pairs)
    fresh = whole[mask]
    alone = fuse_consensus(Boxes(fresh.xyxy.copy(), fresh.score, fresh.label, fresh.meta,
                                 {k: v.copy() for k, v in fresh.data.items()}), params, subset_pairs(pairs, mask))
    assert len(alone) > 10
    np.testing.assert_array_equal(shared.xyxy, alone.xyxy)
    np.testing.assert_array_equal(shared.score, alone.score)
    np.testing.assert_array_equal(shared.label, alone.label)
    for key in ("support_bits", "order"):
        np.testing.assert_array_equal(shared.data[key], alone.data[key])
    assert shared.data["member_idx"].tolist() == alone.data["member_idx"].tolist()


@pytest.mark.parametrize("gid, w, expected", [
    ([0, 0, 1], [0.2, 0.9, 0.5], [1, 2]),                       # the heaviest member of each group
    ([0, 0, 0], [0.7, 0.7, 0.1], [0]),                          # tie -> the first
    ([1, 0, 1, 0], [0.0, -0.0, 0.0, 0.3], [3, 0]),              # -0.0 ties 0.0
    ([0, 0, 1, 1], [float("nan"), 0.1, float("nan"), float("nan")], [1, 2]),   # NaN weighs least
    ([0, 0], [-float("inf"), -float("inf")], [0]),              # -inf is a weight too
])
def test_heaviest_is_the_head_of_each_group_in_lexsort_order(gid, w, expected):
    from newsbag.fusion.consensus import _heaviest

    gid, w = np.array(gid), np.array(w)
    top = np.lexsort((-w, gid))
    heads = top[np.r_[True, gid[top][1:] != gid[top][:-1]]]
    assert _heaviest(gid, w, int(gid.max()) + 1).tolist() == expected == heads[np.argsort(gid[heads])].tolist()
