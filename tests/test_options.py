"""Declared options: one validator for every builtin stage, no key special-cased by its name."""

from dataclasses import dataclass

import pytest

from newsbag.options import markdown_table, option, parse


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
