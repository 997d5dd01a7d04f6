"""The recogniser's text clean-up: full-width punctuation of PP-OCR's Chinese character set in Latin text."""

import pytest

from recognize import halfwidth_latin  # runners/ is on sys.path via conftest


@pytest.mark.parametrize("text, expected", [
    # Latin line (real nzz/US output): full-width forms become their ASCII ones
    ("month：that", "month:that"),
    ("Zürich， den 3. Mai； heute！", "Zürich, den 3. Mai; heute!"),
    ("（1781）", "(1781)"),
    # full-width letters and digits in Latin text too (U+FF21 'Ａ', U+FF11 '１')
    ("\uff21bc \uff11", "Abc 1"),
    # Chinese text keeps its full-width punctuation: the form's neighbour is CJK
    ("中国，北京：", "中国，北京："),
    # Japanese (kana) and Korean (hangul) likewise
    ("ひらがな、カタカナ！", "ひらがな、カタカナ！"),
    ("한국어，문장", "한국어，문장"),
    # the neighbour decides, across spaces and runs of full-width forms: a spurious CJK glyph
    # for a smudged letter does not keep a Latin clause's comma full-width, nor the reverse
    ("the 国 month， that", "the 国 month, that"),
    ("中文 ！！ abc", "中文 ！！ abc"),
    ("abc ！！ 中文", "abc ！！ 中文"),
    # nothing to map; a line of full-width forms only (no script around it) is mapped
    ("", ""),
    ("plain ASCII, text.", "plain ASCII, text."),
    ("；：", ";:"),
])
def test_halfwidth_latin(text, expected):
    assert halfwidth_latin(text) == expected
