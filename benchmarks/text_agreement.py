"""A recogniser bag's transcripts without ground truth: each member's and the vote's share of clean lines, and agreement.

    nice -n 10 .venv/bin/python benchmarks/text_agreement.py RUN [--variant V]

RUN holds transcripts made by a bag (`recognizers`), whose lines keep every member's reading.
A line is *clean* when every word of it is plausible: letters only (a capital first, or all
capitals, or all small), or a number, with its punctuation stripped; at least 3 characters of
text. No dictionary: it counts the noise a misread line is (``tbe ,,Tl1e``), not spelling.
*Agreement* is the share of lines where two members read the same text (whitespace
collapsed), and their mean character agreement (1 - edits / longer length).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from _machine import machine_line
from newsbag import rundir

_WORD = re.compile(r"^[\"'‘“(\[]*(?:[A-Z]?[a-z]+|[A-Z]+|[0-9]+(?:[.,:/-][0-9]+)*[%$]?|\$[0-9.,]+|&)"
                   r"(?:['’]s)?[\"'’”).,;:!?\]-]*$")


def clean(text: str) -> bool:
    """Whether every word of a line is plausible (module docstring).

    >>> clean("The ships came home,"), clean("tbe sh1ps"), clean("It's $4.50 (net)."), clean("a")
    (True, False, True, False)
    """
    words = text.split()
    return len(text.strip()) >= 3 and all(_WORD.match(w) for w in words)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _agreement(a: str, b: str) -> float:
    return 1 - Levenshtein.distance(a, b) / max(len(a), len(b), 1)


def summarise(lines: list[dict]) -> dict:
    """Per member and for the vote: lines, share clean; per pair of members: share identical, mean agreement."""
    names = list(dict.fromkeys(r["recognizer"] for line in lines for r in line.get("readings", [])))
    texts = {n: [next((r["text"] for r in line["readings"] if r["recognizer"] == n), "") for line in lines]
             for n in names}
    texts["vote"] = [line["text"] for line in lines]
    out = {"lines": len(lines), "clean": {n: sum(map(clean, t)) / max(len(t), 1) for n, t in texts.items()},
           "won": {n: sum(line.get("won") == n for line in lines) / max(len(lines), 1) for n in [*names, "vote"]}}
    out["pairs"] = {f"{a}~{b}": (sum(map(_same, texts[a], texts[b])) / max(len(lines), 1),
                                 sum(map(_agreement, texts[a], texts[b])) / max(len(lines), 1))
                    for a, b in itertools.combinations(names, 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--variant", default="", help="the transcribed variant (default: the only one)")
    args = parser.parse_args()
    root = args.run / "outputs" / "transcripts"
    variant = args.variant or next(p.name for p in root.iterdir() if p.is_dir())
    lines = [line for path in sorted(rundir.transcript_dir(args.run, variant).glob("*.json"))
             if path.name != "transcripts.jsonl"
             for region in json.loads(path.read_text(encoding="utf-8")).get("regions", [])
             for line in region.get("lines", []) if "readings" in line]
    print(machine_line())
    result = summarise(lines)
    print(f"{result['lines']} lines")
    print("| reading | clean lines | lines won |\n|---|---|---|")
    for name, share in result["clean"].items():
        print(f"| {name} | {share:.3f} | {result['won'].get(name, 0):.3f} |")
    for pair, (same, agree) in result["pairs"].items():
        print(f"{pair}: identical {same:.3f}, character agreement {agree:.3f}")


if __name__ == "__main__":
    main()
