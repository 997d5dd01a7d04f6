"""The tuning protocol's pure parts: issues, folds by issue, the bootstrap interval, the adoption rule."""

import numpy as np
import pytest

from newsbag.tuning.protocol import PIXEL_GUARD, Interval, bootstrap_interval, decide, fold_split, issue_key


@pytest.mark.parametrize("path, issue", [
    ("0002_nzz_17810901_0_0_a1_p1_1.tif", "1781-09-01"),          # a date in the file name
    ("scans/1921-03-03/p1.png", "1921-03-03"),                    # a dashed date in a folder
    ("gazette/1921_03_03_p2.png", "1921-03-03"),                  # underscores
    ("paper/vol2/p3.png", "paper/vol2"),                          # no date: the folder
    ("p4.png", "p4"),                                             # alone: the page itself
    ("x/123456789012.png", "x"),                                  # digits that are no date
])
def test_issue_key(path, issue):
    assert issue_key(path) == issue


@pytest.mark.parametrize("groups, k", [
    ({f"p{i}": f"i{i}" for i in range(7)}, 3),                    # one page per issue
    ({"a1": "A", "a2": "A", "a3": "A", "b1": "B", "c1": "C", "c2": "C", "d1": "D"}, 2),   # issues of several pages
    ({"a1": "A", "b1": "B"}, 5),                                  # more folds asked than issues: one per issue
])
def test_folds_keep_issues_whole_and_cover_every_page_once(groups, k):
    folds = fold_split(groups, k, seed=1)
    assert len(folds) == min(k, len(set(groups.values())))
    assert sorted(p for f in folds for p in f) == sorted(groups)
    for f in folds:
        for g in f:
            assert all(groups[g] != groups[h] for other in folds if other is not f for h in other)
    sizes = [len(f) for f in folds]
    assert max(sizes) - min(sizes) <= max(list(groups.values()).count(g) for g in groups.values())
    assert fold_split(groups, k, seed=1) == folds              # deterministic in the seed


def test_folds_need_two_issues():
    with pytest.raises(ValueError, match="at least 2 issues, got 1"):
        fold_split({"a": "X", "b": "X"}, 2, 0)


def test_bootstrap_interval_brackets_the_mean_and_resamples_whole_issues():
    values = np.array([0.1, 0.3, -0.1, 0.2, 0.0, 0.1])
    groups = ["a", "a", "b", "c", "d", "e"]
    iv = bootstrap_interval(values, groups, seed=0, n=4000)
    assert iv.mean == pytest.approx(values.mean())
    assert iv.low <= iv.mean <= iv.high
    # a draw takes whole issues, so no bootstrap mean lies outside the issue means' range
    issue_means = [values[:2].mean(), -0.1, 0.2, 0.0, 0.1]
    assert min(issue_means) <= iv.low and iv.high <= max(issue_means)
    assert bootstrap_interval(values, groups, seed=0, n=4000) == iv
    same = bootstrap_interval(np.full(5, 0.02), list("abcde"), seed=3)
    assert (same.low, same.high) == pytest.approx((0.02, 0.02))   # no spread, no width


@pytest.mark.parametrize("gain, pixel_change, adopt, says", [
    (Interval(0.03, 0.01, 0.05), 0.0, True, "tuned on 9 pages: held-out gain +0.030 (95% CI +0.010..+0.050)"),
    (Interval(0.03, -0.01, 0.05), 0.0, False, "does not lie above 0"),          # interval reaches 0
    (Interval(0.03, 0.0, 0.05), 0.0, False, "does not lie above 0"),           # touching 0 is not above it
    (Interval(0.03, 0.01, 0.05), -PIXEL_GUARD - 0.001, False, "pixel F1 falls 0.006"),   # the guard
    (Interval(0.03, 0.01, 0.05), -PIXEL_GUARD, True, "tuned on 9 pages"),      # at the guard: allowed
])
def test_adoption_rule(gain, pixel_change, adopt, says):
    d = decide(gain, pixel_change, 9)
    assert d.adopt is adopt
    assert says in d.reason
    assert "\n" not in d.reason
    if not adopt:
        assert d.reason.startswith("kept the current recommendation: ")
