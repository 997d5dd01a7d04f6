"""PP-OCR rec's output limited to the page's script: no CJK character on a Latin or Fraktur page."""

import sys

import numpy as np
import pytest

from newsbag.resources import runners_dir

sys.path.insert(0, str(runners_dir()))
from recognize import ctc_greedy, script_classes  # noqa: E402  (runners/ is not a package)

CHARS = ["a", "b", "美", "ü", "ſ", "1", ",", "，", "の", "한", "ß", "α"]


@pytest.mark.parametrize("script, expected", [
    # blank, then: Latin letters (umlaut, long s, sharp s) digits and punctuation kept; Han, kana,
    # hangul and a Greek letter dropped; the full-width comma kept (halfwidth_latin maps it)
    ("latin", [True, True, True, False, True, True, True, True, True, False, False, True, False]),
    ("any", [True] * (len(CHARS) + 1)),
])
def test_script_classes(script, expected):
    assert script_classes(CHARS, script).tolist() == expected


def test_a_cjk_frame_falls_to_its_most_probable_latin_reading():
    # three frames: "a" sure; "美" 0.6 over "b" 0.3; "ü" sure (class = index + 1, blank 0)
    probs = np.zeros((1, 3, len(CHARS) + 1), dtype=np.float32)
    probs[0, 0, 1] = 1.0
    probs[0, 1, 3], probs[0, 1, 2], probs[0, 1, 0] = 0.6, 0.3, 0.1
    probs[0, 2, 4] = 1.0
    assert ctc_greedy(probs, CHARS)[0][0] == "a美ü"
    masked = probs * script_classes(CHARS, "latin")
    text, score = ctc_greedy(masked, CHARS)[0]
    assert text == "abü"
    assert score == pytest.approx((1.0 + 0.3 + 1.0) / 3)
