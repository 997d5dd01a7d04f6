"""Which recogniser the transcription stage reads with here: the configured one, or PP-OCRv6
(`recognize`, from pip wheels alone) where Tesseract's traineddata is not found.

Tesseract's traineddata comes from the system (``apt install tesseract-ocr-script-frak``), not
from pip: a config that names Tesseract, alone or in a bag (the embedded config's cascade),
must still transcribe on a machine set up with ``pip install`` only, and say in one line why
it read with the other recogniser.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from .options import TranscriptionParams, bag_members, parse_transcription_options

__all__ = ["usable_recognizer", "fallback", "reads_without", "FALLBACK_FAMILY"]

FALLBACK_FAMILY = "recognize"
# Recognisers whose weights come from outside pip, asked for them before a call reads with them.
_SYSTEM_WEIGHTS = frozenset({"recognize_tesseract"})


def reads_without(params: TranscriptionParams, family: str) -> bool:
    """Whether a bag of `params` reads on where its member of `family` finds no weights (the
    others read, `fallback`): `newsbag doctor` then notes the missing weights instead of
    failing the stage. A recogniser named alone is what the config asked for: doctor fails it."""
    return bool(params.recognizers) and family in _SYSTEM_WEIGHTS


def usable_recognizer(options: Mapping[str, Any] | TranscriptionParams, timeout_s: float = 60.0
                      ) -> tuple[TranscriptionParams, str]:
    """The transcription options to read with, and a one-line note when they are not the
    configured ones (else ""): a recogniser, or a bag's member, whose weights come from the
    system and are not found is replaced by `fallback`.

    Raises:
        ValueError: bad transcription options (one line).
    """
    params = options if isinstance(options, TranscriptionParams) else parse_transcription_options(options)
    if fallback(params) is None:
        return params, ""
    from ..resources import runners_dir
    from ..runner_probe import probe_weights
    from .bag import bag_stages

    for member in bag_stages(params, Path()):
        if member.stage.family not in _SYSTEM_WEIGHTS:
            continue
        found = probe_weights(member.stage, runners_dir(), dict(member.stage.variants[member.variant]), timeout_s)
        if not found.get("ok"):
            reason = str(found.get("error") or "its weights were not found").rstrip(".")
            instead = fallback(params)
            reader = (f"{instead.recognizer_family} (PP-OCRv6)" if instead.recognizer_family == FALLBACK_FAMILY
                      and not instead.recognizers else "the other recognisers")
            return instead, f"transcription: {reason}; reading with {reader} instead"
    return params, ""


def fallback(params: TranscriptionParams) -> TranscriptionParams | None:
    """What `usable_recognizer` reads with when the weights of a configured recogniser are
    missing: PP-OCRv6 for one whose weights come from the system; for a bag, its members whose
    weights pip brings (one alone is read as the stage's recogniser, no bag; none: PP-OCRv6).
    None where it never falls back. Asks nothing of the machine: `newsbag status` counts a
    transcript read by either as current, and runs no interpreter of the config's to decide."""
    if not params.recognizers:
        if params.recognizer_family not in _SYSTEM_WEIGHTS:
            return None
        return dataclasses.replace(params, recognizer_family=FALLBACK_FAMILY, recognizer={}, read="auto")
    members = bag_members(params)
    keep = [k for k, m in enumerate(members) if m.family not in _SYSTEM_WEIGHTS]
    if len(keep) == len(members):
        return None
    if len(keep) > 1:
        return dataclasses.replace(params, recognizers=tuple(params.recognizers[k] for k in keep))
    alone = members[keep[0]] if keep else None
    return dataclasses.replace(params, recognizers=(), cascade={}, read="auto",
                               recognizer_family=alone.family if alone else FALLBACK_FAMILY,
                               recognizer=dict(alone.recognizer) if alone else {})
