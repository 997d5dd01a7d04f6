import numpy as np
import pytest

from newsbag import sweep
from newsbag.fusion import geometry as g


@pytest.mark.parametrize("a, b, expected", [
    ([[0, 0, 10, 10]], [[0, 0, 10, 10]], [[1.0]]),                      # identical
    ([[0, 0, 10, 10]], [[5, 0, 15, 10]], [[50 / (100 + 100 - 50)]]),    # half shifted
    ([[0, 0, 10, 10]], [[10, 0, 20, 10]], [[0.0]]),                     # touching edge
    ([[0, 0, 10, 10]], [[2, 2, 4, 4]], [[4 / 100]]),                    # nested
    ([[0, 0, 0, 0]], [[0, 0, 0, 0]], [[0.0]]),                          # degenerate pair
])
def test_iou_matrix(a, b, expected):
    np.testing.assert_allclose(g.iou_matrix(np.array(a, float), np.array(b, float)), expected)


def test_ioa_matrix_is_share_of_first_box():
    a = np.array([[2, 2, 4, 4], [0, 0, 10, 10]], float)
    b = np.array([[0, 0, 10, 10]], float)
    np.testing.assert_allclose(g.ioa_matrix(a, b), [[1.0], [1.0]])
    np.testing.assert_allclose(g.ioa_matrix(b, a), [[4 / 100, 1.0]])


@pytest.mark.parametrize("n", [0, 5, 400])  # empty, dense path, STRtree path
def test_candidate_pairs_dense_and_tree_agree(n):
    rng = np.random.default_rng(n)
    xy = rng.uniform(0, 1000, (n, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 80, (n, 2))], axis=1)
    got = g.candidate_pairs(boxes, boxes)
    assert got.shape[0] == 2
    ia, ib = np.nonzero(g.intersection_matrix(boxes, boxes) > 0)
    assert sorted(zip(*got.tolist())) == sorted(zip(ia.tolist(), ib.tolist()))


def test_self_pairs_and_subset_renumber():
    boxes = np.array([[0, 0, 10, 10], [5, 5, 15, 15], [100, 100, 110, 110], [8, 8, 9, 9]], float)
    p = g.self_pairs(boxes)
    assert sorted(zip(p.i.tolist(), p.j.tolist())) == [(0, 1), (0, 3), (1, 3)]
    np.testing.assert_allclose(p.inter[(p.i == 0) & (p.j == 1)], [25.0])
    sub = g.subset_pairs(p, np.array([False, True, True, True]))
    assert sorted(zip(sub.i.tolist(), sub.j.tolist())) == [(0, 2)]


@pytest.mark.parametrize("n", [0, 8, 600])  # empty, dense path, STRtree path
def test_pairs_between_are_the_cross_pairs_of_the_two_subsets(n):
    rng = np.random.default_rng(n)
    xy = rng.uniform(0, 1000, (n, 2)).round(2)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 80, (n, 2)).round(2)], axis=1)
    side = rng.integers(0, 3, n)           # 0: in a, 1: in b, 2: neither
    a, b = side == 0, side == 1
    got = g.pairs_between(g.self_pairs(boxes), a, b)
    fresh = g.cross_pairs(boxes[a], boxes[b])
    # The same pairs with bit-identical areas; only their order differs.
    assert sorted(zip(got.i.tolist(), got.j.tolist(), got.inter.tolist())) == \
        sorted(zip(fresh.i.tolist(), fresh.j.tolist(), fresh.inter.tolist()))
    assert n < 600 or len(fresh) > 100


@pytest.mark.parametrize("n, spread", [(150, 1000), (600, 1000), (600, 50), (1500, 1000)])   # sweep; sweep; too many: tree; large: tree
def test_self_pairs_sweep_and_tree_agree(n, spread):
    rng = np.random.default_rng(n + spread)
    xy = rng.uniform(0, spread, (n, 2))
    xyxy = np.concatenate([xy, xy + rng.uniform(-5, 80, (n, 2))], axis=1)
    xyxy[0] = np.nan   # no pairs, either way
    p = g.self_pairs(xyxy)
    diagonals = g.shapely.linestrings(np.stack([xyxy[:, :2], xyxy[:, 2:]], axis=1))
    ia, ib = g.shapely.STRtree(diagonals).query(diagonals)
    inter = sweep.pair_intersection(xyxy, xyxy, ia, ib)
    keep = (ia < ib) & (inter > 0)
    want = sorted(zip(ia[keep].tolist(), ib[keep].tolist(), inter[keep].tolist()))
    assert sorted(zip(p.i.tolist(), p.j.tolist(), p.inter.tolist())) == want
    assert len(want) > 0


@pytest.mark.parametrize("xyxy, expected", [
    ([], 0),                                                        # empty (0,4)
    ([[0, 0, 10, 10]], 0),                                          # single box
    ([[0, 0, 10, 10], [10, 0, 20, 10]], 0),                         # touching edge: no area
    ([[0, 0, 10, 10], [2, 2, 4, 4], [3, 3, 9, 9]], 3),              # nested and crossing
    ([[4 * i, 0, 4 * i + 3, 300] for i in range(500)], 0),          # side by side in one band
    ([[0, 0, 10, 10]] * 6, 6 * 5 // 2),                             # piled up: every pair
])
def test_count_pairs_counts_the_overlapping_pairs(xyxy, expected):
    assert sweep.count_pairs(np.array(xyxy, float).reshape(-1, 4), 10**9) == expected


@pytest.mark.parametrize("n, spread", [(60, 1000), (1500, 1000), (1500, 50)])  # sparse; dense page; piled
def test_count_pairs_is_the_number_of_self_pairs(n, spread):
    rng = np.random.default_rng(n + spread)
    xy = np.round(rng.uniform(0, spread, (n, 2)))
    boxes = np.concatenate([xy, xy + np.round(rng.uniform(0, 90, (n, 2)))], axis=1)
    assert sweep.count_pairs(boxes, 10**9) == len(g.self_pairs(boxes))


def test_count_pairs_stops_past_the_limit_in_bounded_memory():
    """30,000 boxes on one spot are 450 million pairs: `self_pairs` needed > 6 GB for them."""
    import tracemalloc

    piled = np.tile([10.0, 10.0, 500.0, 500.0], (30_000, 1))
    tracemalloc.start()
    try:
        assert 1_000_000 < sweep.count_pairs(piled, 1_000_000) < 30_000 * 29_999 // 2
        assert tracemalloc.get_traced_memory()[1] < 150e6
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("n, spread", [(60, 1000), (1500, 1000), (1500, 50)])
def test_pairs_exceed_answers_as_the_count_does_on_either_side_of_the_limit(n, spread):
    """The sweep's shortcut never answers otherwise than counting: at limits below, at and
    above the true count, and below the candidate count (where the shortcut cannot decide)."""
    rng = np.random.default_rng(n * spread)
    xy = np.round(rng.uniform(0, spread, (n, 2)))
    boxes = np.concatenate([xy, xy + np.round(rng.uniform(0, 90, (n, 2)))], axis=1)
    true = len(g.self_pairs(boxes))
    for limit in (0, true - 1, true, true + 1, 10 * true + 10):
        assert sweep.pairs_exceed(boxes, max(limit, 0)) is (true > max(limit, 0))
