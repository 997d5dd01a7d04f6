"""newsbag.summary.summary_lines: the lines a call ends with, from its facts."""

import pytest

from newsbag.summary import DEGENERATE_MEANS, summary_lines

_BASE = {"command": "run", "pages": 3, "ok": 2, "failed": 1, "skipped": 0, "rejected": 0, "nothing_to_do": False,
         "seconds": 75.25, "stage_seconds": {"a/x": 70.0, "fusion": 5.25}, "recommended": None, "best_source": None,
         "look_at": {}}


@pytest.mark.parametrize("facts,expected", [
    # counts, per-stage times (minutes past 60 s), no fusion yet: nothing recommended, nowhere to look
    ({}, ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)"]),
    # rejected inputs are counted on the first line
    ({"rejected": 2}, ["run: 3 page(s): 2 ok, 1 failed, 0 skipped, 2 input(s) rejected in 1m15.2s "
                       "(a/x 1m10.0s, fusion 5.2s)"]),
    # chosen by score, with the best source and its score
    ({"recommended": {"variant": "vote", "by": "score", "score": 0.71234},
      "best_source": {"name": "a/x", "score": 0.5}},
     ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)",
      "recommended: vote (highest score, score 0.712); best source: a/x (score 0.500)"]),
    # a pinned variant that was skipped: fusion's own reason, as it wrote it
    ({"recommended": {"variant": "vote", "by": "score (pinned 'P1' was skipped)", "score": None}},
     ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)",
      "recommended: vote (score (pinned 'P1' was skipped))"]),
    # no variant scored (no line source): says so
    ({"recommended": {"variant": None, "by": "none", "score": None}, "best_source": {"name": "a/x", "score": None}},
     ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)",
      "recommended: none (no fused variant has a score); best source: a/x"]),
    # nothing to do: one line, then where to look (gallery first, then exports and transcripts)
    ({"nothing_to_do": True, "recommended": {"variant": "vote", "by": "config", "score": 0.7},
      "look_at": {"transcripts": "R/outputs/transcripts/vote", "gallery": "R/review/index.html"}},
     ["nothing to do: 3 pages current", "look at: R/review/index.html; transcripts in R/outputs/transcripts/vote"]),
    # pinned by `newsbag recommend`, and by `newsbag tune` with its evidence
    ({"recommended": {"variant": "union", "by": "user", "score": 0.6}},
     ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)",
      "recommended: union (pinned by the user, score 0.600)"]),
    ({"recommended": {"variant": "tuned", "by": "tuned on 9 pages: held-out gain +0.020 (95% CI +0.004..+0.031)",
                      "score": None}},
     ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)",
      "recommended: tuned (tuned on 9 pages: held-out gain +0.020 (95% CI +0.004..+0.031))"]),
    # a degenerate member is named, with an example page and what it means
    ({"degenerate": {"c/d": {"pages": 2, "example": "page p1: one page-sized box (98% of the page)"}}},
     ["run: 3 page(s): 2 ok, 1 failed, 0 skipped in 1m15.2s (a/x 1m10.0s, fusion 5.2s)",
      "degenerate member c/d on 2 of 3 page(s), e.g. page p1: one page-sized box (98% of the page): "
      + DEGENERATE_MEANS]),
])
def test_summary_lines(facts, expected):
    assert summary_lines({**_BASE, **facts}) == expected
