"""Which recogniser the transcription stage reads with here: the configured one, or PP-OCRv6
(`recognize`, from pip wheels alone) where Tesseract's traineddata is not found.

Tesseract's traineddata comes from the system (``apt install tesseract-ocr-script-frak``), not
from pip: a config that names Tesseract must still transcribe on a machine set up with
``pip install`` only, and say in one line why it read with the other recogniser.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from .options import TranscriptionParams, parse_transcription_options

__all__ = ["usable_recognizer", "fallback", "FALLBACK_FAMILY"]

FALLBACK_FAMILY = "recognize"
# Recognisers whose weights come from outside pip, asked for them before a call reads with them.
_SYSTEM_WEIGHTS = frozenset({"recognize_tesseract"})


def usable_recognizer(options: Mapping[str, Any] | TranscriptionParams, timeout_s: float = 60.0
                      ) -> tuple[TranscriptionParams, str]:
    """The transcription options to read with, and a one-line note when they are not the
    configured ones (else "").

    Raises:
        ValueError: bad transcription options (one line).
    """
    params = options if isinstance(options, TranscriptionParams) else parse_transcription_options(options)
    # A bag leaves out a member that cannot start itself (`bag.read_lines`).
    if params.recognizers or params.recognizer_family not in _SYSTEM_WEIGHTS:
        return params, ""
    from ..resources import runners_dir
    from ..runner_probe import probe_weights
    from .bag import bag_stages

    (stage,) = [member.stage for member in bag_stages(params, Path())]
    found = probe_weights(stage, runners_dir(), dict(stage.variants["lines"]), timeout_s)
    if found.get("ok"):
        return params, ""
    reason = str(found.get("error") or "its weights were not found").rstrip(".")
    return fallback(params), f"transcription: {reason}; reading with {FALLBACK_FAMILY} (PP-OCRv6) instead"


def fallback(params: TranscriptionParams) -> TranscriptionParams | None:
    """What `usable_recognizer` reads with when the configured recogniser's weights are missing;
    None where it never falls back. Asks nothing of the machine: `newsbag status` counts a
    transcript read by either as current, and runs no interpreter of the config's to decide."""
    if params.recognizers or params.recognizer_family not in _SYSTEM_WEIGHTS:
        return None
    return dataclasses.replace(params, recognizer_family=FALLBACK_FAMILY, recognizer={}, read="auto")
