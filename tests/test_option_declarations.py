"""Declared options: one validator for every builtin stage, no key special-cased by its name."""

from dataclasses import dataclass

import pytest

from newsbag.options import REQUIRED, markdown_table, option, parse, values


@dataclass(frozen=True)
class _Toy:
    rounds: int = option("integer", 3, "how many times", minimum=1)
    share: float = option("number", 0.5, "how much", minimum=0, maximum=1)
    gap: float = option("number", 2.0, "how far", unit="text-line heights", minimum=0)
    order: tuple = option("strings", (), "in which order", literal="auto")


def test_a_new_parameter_is_checked_by_its_declaration_not_its_name():
    """A new integer parameter was refused as "a number in [0, 1]" until added to the parser by name."""
    assert parse(_Toy, {"rounds": 7, "gap": 12}, "toy") == _Toy(rounds=7, gap=12.0)
    assert parse(_Toy, {}, "toy") == _Toy()                        # defaults filled
    assert parse(_Toy, {"order": "auto"}, "toy").order == ("auto",)
    assert parse(_Toy, {"name": "t"}, "toy", frozenset({"name"})) == _Toy()


@pytest.mark.parametrize("given, message", [
    ({"round": 2}, "toy: unknown key 'round'; did you mean 'rounds'? (known: gap, order, rounds, share)"),
    ({"rounds": 0}, "toy: rounds must be a whole number >= 1, got 0"),
    ({"rounds": True}, "toy: rounds must be a whole number >= 1, got True"),     # JSON true is no count
    ({"rounds": 2.5}, "toy: rounds must be a whole number >= 1, got 2.5"),
    ({"share": 1.5}, "toy: share must be a number in [0, 1], got 1.5"),
    ({"gap": float("inf")}, "toy: gap must be a number >= 0 (text-line heights), got inf"),
    ({"order": "best"}, "toy: order must be a list of strings, or 'auto', got 'best'"),
])
def test_a_bad_value_is_one_line_naming_the_key_and_what_it_must_be(given, message):
    with pytest.raises(ValueError) as exc:
        parse(_Toy, given, "toy")
    assert str(exc.value) == message


def test_the_table_shows_each_option_its_default_range_and_unit():
    assert markdown_table(_Toy).splitlines() == [
        "| option | default | value | what it does |", "|---|---|---|---|",
        "| `rounds` | `3` | a whole number >= 1 | how many times |",
        "| `share` | `0.5` | a number in [0, 1] | how much |",
        "| `gap` | `2.0` | a number >= 0 (text-line heights) | how far |",
        "| `order` | `[]` | a list of strings, or 'auto' | in which order |"]


@dataclass(frozen=True, kw_only=True)
class _Entry:
    name: str = option("string", REQUIRED, "what it is called")
    vars: dict = option("scalars", {}, "names and their values")
    items: list = option("array", [], "anything in a list", min_items=1)
    ratio: float = option("number", 1, "as written", raw=True)
    many: dict = option("object", {"a": {}}, "a long default", shown="the shipped ones")


@pytest.mark.parametrize("given, message", [
    ({}, "entry: name is missing: it must be a string"),
    ({"name": "n", "vars": {"A": True}}, "entry: vars must be an object of strings or numbers, got {'A': True}"),
    ({"name": "n", "items": []}, "entry: items must be a list (at least 1), got []"),
    ({"name": "n", "ratio": "1"}, "entry: ratio must be a number, got '1'"),
])
def test_a_required_key_and_every_kind_of_value_are_checked_in_one_shape(given, message):
    with pytest.raises(ValueError) as exc:
        parse(_Entry, given, "entry")
    assert str(exc.value) == message


def test_a_long_bad_value_is_cut_in_the_message():
    with pytest.raises(ValueError) as exc:
        parse(_Entry, {"name": "n", "items": "x" * 500}, "entry")
    assert str(exc.value) == f"entry: items must be a list (at least 1), got {repr('x' * 500)[:117]}..."


def test_a_raw_option_keeps_the_value_as_written_and_values_lists_them_in_order():
    entry = parse(_Entry, {"name": "n", "ratio": 60, "vars": {"A": "x", "N": 2}, "items": [1, "b"]}, "entry")
    assert values(entry) == {"name": "n", "vars": {"A": "x", "N": 2}, "items": [1, "b"], "ratio": 60,
                             "many": {"a": {}}}
    assert type(entry.ratio) is int


def test_the_table_says_required_and_a_long_default_in_words_and_keeps_a_pipe_in_its_cell():
    rows = markdown_table(_Entry).splitlines()
    assert rows[2] == "| `name` | required | a string | what it is called |"
    assert rows[-1] == "| `many` | the shipped ones | an object | a long default |"

    @dataclass(frozen=True)
    class Piped:
        mode: str = option("string", "a|b", "x | y")

    assert markdown_table(Piped).splitlines()[-1] == '| `mode` | `"a\\|b"` | a string | x \\| y |'
