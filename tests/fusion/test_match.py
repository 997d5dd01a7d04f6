import numpy as np
import pytest

from newsbag.fusion.geometry import self_pairs
from newsbag.fusion.match import connected_groups, match_edges


@pytest.mark.parametrize("boxes, coarse, source, expected", [
    # same box, two sources -> match on IoU
    ([[0, 0, 10, 10], [1, 0, 10, 10]], [0, 0], [0, 1], [True]),
    # paragraph inside another source's column block: IoU small, IoA 1 -> match
    ([[0, 0, 100, 300], [0, 0, 100, 50]], [0, 0], [0, 1], [True]),
    # same geometry but text vs title -> no match
    ([[0, 0, 10, 10], [0, 0, 10, 10]], [0, 1], [0, 1], [False]),
    # same source never matches itself
    ([[0, 0, 10, 10], [0, 0, 10, 10]], [0, 0], [3, 3], [False]),
    # half overlap: IoU 1/3, IoA 0.5 -> no match
    ([[0, 0, 10, 10], [5, 0, 15, 10]], [0, 0], [0, 1], [False]),
])
def test_match_edges(boxes, coarse, source, expected):
    xyxy = np.array(boxes, float)
    p = self_pairs(xyxy)
    got = match_edges(xyxy, np.array(coarse), np.array(source), p, t_iou=0.5, t_ioa=0.8)
    assert got.tolist() == expected


@pytest.mark.parametrize("n, edges, expected", [
    (3, [], [0, 1, 2]),                                  # no edges
    (4, [(0, 1), (2, 3)], [0, 0, 1, 1]),                 # two pairs
    (5, [(4, 3), (3, 2), (2, 1), (1, 0)], [0] * 5),      # chain numbered backwards
    (4, [(0, 3)], [0, 1, 2, 0]),                         # gap in the middle
])
def test_connected_groups(n, edges, expected):
    i = np.array([e[0] for e in edges], int)
    j = np.array([e[1] for e in edges], int)
    assert connected_groups(n, i, j).tolist() == expected


def test_connected_groups_long_chain_is_one_group():
    n = 2000
    ids = connected_groups(n, np.arange(n - 1), np.arange(1, n))
    assert set(ids.tolist()) == {0}
