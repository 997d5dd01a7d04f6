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


def test_a_wide_blank_run_between_two_characters_is_a_space():
    # frames: a, blank x3, b, blank, c, blank x2, space, blank x4, d (blank = class 0)
    frames = [1, 0, 0, 0, 2, 0, 6, 0, 0, len(CHARS) + 1, 0, 0, 0, 0, 12]
    probs = np.zeros((1, len(frames), len(CHARS) + 2), dtype=np.float32)
    probs[0, np.arange(len(frames)), frames] = 1.0
    chars = CHARS + [" "]
    assert ctc_greedy(probs, chars)[0][0] == "ab1 α"
    # more than 2 blank frames: a space after "a"; the space already read gets no second one
    assert ctc_greedy(probs, chars, gap_frames=2)[0][0] == "a b1 α"
    assert ctc_greedy(probs, chars, gap_frames=0.5)[0][0] == "a b 1 α"


def _v6_characters():
    """PP-OCRv6's character list (ONNX metadata), with the space class PP-OCR appends."""
    ort = pytest.importorskip("onnxruntime")
    from recognize import default_rec_model
    from _loop import MissingDependency

    try:
        path = default_rec_model()
    except MissingDependency:
        pytest.skip("rapidocr 3.10 (PP-OCRv6 rec) is not installed")
    meta = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_modelmeta().custom_metadata_map
    return meta["character"].splitlines() + [" "]


def test_latin_keeps_no_other_script_of_the_v6_dictionary():
    import unicodedata

    chars = _v6_characters()
    assert len(chars) == 18709
    kept = [c for c, ok in zip(chars, script_classes(chars, "latin")[1:]) if ok]
    # the German and Fraktur letters stay: umlauts, sharp s, long s; the space class too
    assert set("äöüÄÖÜßſ ") <= set(kept) and set("abcxyzABCXYZ0123456789.,;:-¬=()") <= set(kept)
    # no letter, digit or mark of another script: no Han, kana, Greek
    others = [c for c in kept for ch in c
              if unicodedata.category(ch)[0] in "LMN" and "LATIN" not in unicodedata.name(ch, "")
              and not ("0" <= unicodedata.normalize("NFKC", ch) <= "9" or unicodedata.category(ch) == "No")]
    assert others == []
    assert not any(ord(ch) > 0xFFFF for c in kept for ch in c)   # no emoji
    for sample in "美のカα":   # Han, hiragana, katakana, Greek: all in the dictionary
        assert sample in chars and sample not in kept


def test_an_f_where_long_s_kept_some_probability_is_long_s_inside_a_word_only():
    chars = ["a", "f", "ſ", "s", "o", " "]
    # "afa of": frames a, f (s at 5 % of f), a, space, o, f (s at 5 % of f); a sure f stays
    frames = [1, 2, 1, 6, 5, 2]
    probs = np.full((1, len(frames), len(chars) + 1), 1e-4, dtype=np.float32)
    probs[0, np.arange(len(frames)), frames] = 0.9
    probs[0, [1, 5], 4] = 0.045
    assert ctc_greedy(probs, chars)[0][0] == "afa of"
    assert ctc_greedy(probs, chars, long_s=0.02)[0][0] == "aſa of"   # a word-final f stays: round s ends words
    assert ctc_greedy(probs, chars, long_s=0.1)[0][0] == "afa of"    # s under 10 % of f: f
