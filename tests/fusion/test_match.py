import numpy as np
import pytest

from newsbag.fusion.match import connected_groups


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
