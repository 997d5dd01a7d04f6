"""recognize runner: PP-OCR text recognition (CTC) of given line boxes, for the transcription stage.

The transcription stage (src/newsbag/transcription/stage.py) decides which line boxes to read and
writes them to ``<plan_dir>/<page_id>.json`` as ``{"crops": [[x0, y0, x1, y1], ...]}`` in
original page pixels, ``"units"`` (``"line"`` each) and ``"size_wh": [W, H]``, the page size they are in (other keys are
the stage's own); this runner crops, recognises and returns one region per line, in the
plan's order, with ``text`` and a score (mean probability of the decoded characters).

Default model: PP-OCRv6 small rec (``PP-OCRv6_rec_small.onnx``, 18,708 characters: Chinese,
Latin with its accents, ß and ſ, Greek, Cyrillic and more) shipped inside the rapidocr 3.10
wheel; only the file is read, rapidocr is never imported. Any PP-OCR rec ONNX with its
character list in the model metadata (``character``) or in ``dict_path`` works, e.g.
PP-OCRv4's ``ch_PP-OCRv4_rec_infer.onnx`` from rapidocr-onnxruntime.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata

import numpy as np

import _loop
import _picodet
from _errors import MissingDependency
from _image import load_page_array
from _plan import read_plan
from _ort import make_session
from _weights import packaged_file

REC_PACKAGE, REC_MODEL = "rapidocr", "PP-OCRv6_rec_small.onnx"
REC_HEIGHT = 48
PPOCR_MEAN = PPOCR_STD = (0.5, 0.5, 0.5)


def default_rec_model() -> str:
    """The PP-OCRv6 rec model inside the installed rapidocr package (not imported: it pulls in OpenCV)."""
    return packaged_file(REC_PACKAGE, f"models/{REC_MODEL}",
                         "pip install rapidocr==3.10.0 or set params.model_path to a PP-OCR rec .onnx file")


SCRIPTS = ("latin", "any")


def script_classes(characters: list[str], script: str) -> np.ndarray:
    """(C + 1,) bool: the network's classes (blank first) a page in `script` may hold.

    "latin" keeps every character whose letters are Latin (Fraktur is Latin script) and the
    digits, punctuation and symbols of the Basic Multilingual Plane outside the CJK blocks:
    most of PP-OCR's classes are Han (and, in PP-OCRv6's, kana, Greek, circled numbers,
    emoji...), and on a Latin page a smudged word comes out as one ("... 美 ..."). Masking the
    classes, rather than deleting characters afterwards, lets such a frame fall to its most
    probable Latin reading. "any" keeps them all.

    >>> script_classes(["a", "美", "1", "，", "я", "\U0001F600"], "latin").tolist()
    [True, True, False, True, True, False, False]
    """
    if script == "any":
        return np.ones(len(characters) + 1, dtype=bool)

    def latin(char: str) -> bool:
        return all(ord(c) <= 0xFFFF and (not unicodedata.category(c).startswith(("L", "M", "N"))
                                         or _LATIN_NAME.search(unicodedata.name(c, "")) or _WESTERN_DIGIT.match(c))
                   for c in char) and not _CJK.search(char)

    return np.array([True] + [latin(c) for c in characters], dtype=bool)


def ctc_greedy(probs: np.ndarray, characters: list[str], gap_frames: float = 0.0,
               long_s: float = 0.0) -> list[tuple[str, float]]:
    """Greedy CTC decoding of (N, T, C) class probabilities; class 0 is the blank.

    Returns one (text, score) per row (`ctc_text`, with `long_s_frames`); score is the mean
    probability of the kept steps (0 when empty).
    """
    best = probs.argmax(axis=2)
    best_p = probs.max(axis=2)
    out = []
    for idx, p, row in zip(best, best_p, probs):
        text, keep = ctc_text(idx, characters, gap_frames, long_s_frames(row, characters, long_s))
        out.append((text, float(p[keep].mean()) if keep.any() else 0.0))
    return out


def long_s_frames(probs: np.ndarray, characters: list[str], share: float) -> np.ndarray | None:
    """(T,) bool: the frames of (T, C) probabilities where long s or s has more than `share` of
    f's probability (None: `share` 0, or the model has no f, ſ or s).

    PP-OCRv6 reads Fraktur's long s as f (about one edit in eight on the NZZ pages) and never
    writes ſ, but leaves it, or s, a little probability there, which a real f rarely has.
    """
    if share <= 0 or not {"f", "ſ", "s"} <= set(characters):
        return None
    f, ls, s = (characters.index(c) + 1 for c in "fſs")
    return np.maximum(probs[:, ls], probs[:, s]) > share * probs[:, f]


def ctc_text(idx: np.ndarray, characters: list[str], gap_frames: float = 0.0,
             long_s: np.ndarray | None = None) -> tuple[str, np.ndarray]:
    """The text of a (T,) greedy CTC path (a class per frame, 0 the blank) and its kept frames.

    `gap_frames` > 0: a run of more than that many blank frames between two characters, neither
    a space, is read as a space (PP-OCRv6 drops many word gaps: "behandeltgegen").
    `long_s` (T,) bool: an f read in such a frame before a letter is read as ſ (Fraktur sets a
    round s at a word's end, so a word-final f stays: "of", "auf").
    """
    keep = idx != 0
    keep[1:] &= idx[1:] != idx[:-1]
    pos = np.flatnonzero(keep)
    chars = [characters[c - 1] if c <= len(characters) else "" for c in idx[pos]]
    if long_s is not None:
        chars = [("ſ" if c == "f" and long_s[k] and nxt.isalpha() else c)
                 for c, k, nxt in zip(chars, pos, chars[1:] + [""])]
    if gap_frames > 0 and len(pos) > 1:
        blanks = np.concatenate([[0], np.cumsum(idx == 0)])   # blank frames before each frame
        wide = (blanks[pos[1:]] - blanks[pos[:-1]]) > gap_frames
        chars = [chars[0]] + [(" " + c if w and c != " " and prev != " " else c)
                              for c, prev, w in zip(chars[1:], chars[:-1], wide)]
    return "".join(chars), keep


# Full-width ASCII forms (U+FF01-FF5E) and the scripts that use them: Han, kana, hangul and CJK punctuation.
_FULLWIDTH = re.compile("[\uff01-\uff5e]+")
_CJK = re.compile("[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf"
                  "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# A letter, number or mark of the Latin script: a Latin letter, a combining (generic) diacritic.
_LATIN_NAME = re.compile(r"\bLATIN\b|^COMBINING ")
_WESTERN_DIGIT = re.compile("[0-9\uff10-\uff19\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u2079\u2080-\u2089]")
_TO_ASCII = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}


def halfwidth_latin(text: str) -> str:
    """`text` with its full-width forms as ASCII where they stand in Latin text.

    PP-OCR's Chinese character set reads a Latin colon, comma or semicolon as its full-width
    form ("month：that"), which search and CER count as another character. A run of full-width
    forms is kept where the nearest character on either side (past spaces) is CJK, kana or
    hangul, the text that uses them; a spurious CJK glyph elsewhere in the line (a smudged
    letter) does not keep the rest of the line full-width.
    """
    def to_ascii(m: re.Match) -> str:
        left, right = text[:m.start()].rstrip()[-1:], text[m.end():].lstrip()[:1]
        return m.group() if _CJK.match(left) or _CJK.match(right) else m.group().translate(_TO_ASCII)

    return _FULLWIDTH.sub(to_ascii, text)


def crop_tensor(page: np.ndarray, xyxy, width: int) -> np.ndarray:
    """(3, 48, width) network input of one line crop, right-padded with zeros like PP-OCR's rec."""
    h_img, w_img = page.shape[:2]
    x0, y0 = max(int(math.floor(xyxy[0])), 0), max(int(math.floor(xyxy[1])), 0)
    x1, y1 = min(int(math.ceil(xyxy[2])), w_img), min(int(math.ceil(xyxy[3])), h_img)
    crop = page[y0:max(y1, y0 + 1), x0:max(x1, x0 + 1)]
    ch, cw = crop.shape[:2]
    resized_w = max(1, min(width, int(math.ceil(REC_HEIGHT * cw / max(ch, 1)))))
    tensor = _picodet.to_input_tensor(crop, (REC_HEIGHT, resized_w), PPOCR_MEAN, PPOCR_STD)[0]
    out = np.zeros((3, REC_HEIGHT, width), dtype=np.float32)
    out[:, :, :resized_w] = tensor
    return out


class Recognizer:
    """PP-OCR rec session loaded once; lines of a page are read in width-sorted batches."""

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        model_path = params["model_path"] or default_rec_model()
        self.session, ort_info = make_session(model_path, device, allow_cpu_fallback, int(params["threads"]))
        self.input_name = self.session.get_inputs()[0].name
        self.characters = self._characters(params["dict_path"])
        self.plan_dir = params["plan_dir"]
        self.batch_lines = int(params["batch_lines"])
        self.max_ratio = float(params["max_ratio"])
        self.word_gap = float(params["word_gap"])
        self.long_s = float(params["long_s"])
        if params["script"] not in SCRIPTS:
            raise ValueError(f"recognize: unknown script {params['script']!r}; choose one of {list(SCRIPTS)}")
        self.allowed = script_classes(self.characters, params["script"])
        self.device_used = ort_info["device_used"]
        self.info = {"model": f"{os.path.basename(model_path)} (PP-OCR rec, onnxruntime)",
                     "model_path": os.path.abspath(model_path), "characters": len(self.characters), **ort_info}

    def _characters(self, dict_path: str) -> list[str]:
        if dict_path:
            with open(dict_path, encoding="utf-8") as fh:
                chars = [line.rstrip("\r\n") for line in fh]
        else:
            meta = self.session.get_modelmeta().custom_metadata_map
            if "character" not in meta:
                raise MissingDependency("the rec model has no 'character' metadata; set params.dict_path")
            chars = meta["character"].splitlines()
        return chars + [" "]  # PP-OCR's use_space_char: the last class is a space

    def detect(self, image_path: str, page: dict) -> list[dict]:
        image = load_page_array(image_path)
        plan = read_plan(self.plan_dir, page["page_id"], image.shape[1], image.shape[0])
        lines = plan["crops"]
        if set(plan["units"]) - {"line"}:   # the stage plans lines for this runner (`transcription/options.py`, `crop_unit`)
            raise ValueError("recognize reads one text line per crop, the plan holds regions")
        if not lines:
            return []
        boxes = np.asarray(lines, dtype=np.float64).reshape(-1, 4)
        texts: list[tuple[str, float]] = [("", 0.0)] * len(boxes)
        for chunk, probs, width in self.batches(image, boxes):
            # word_gap line heights, in frames: the network's input is REC_HEIGHT px high and `width` wide
            gap_frames = self.word_gap * REC_HEIGHT * probs.shape[1] / width
            for i, (text, score) in zip(chunk, ctc_greedy(probs, self.characters, gap_frames, self.long_s)):
                texts[i] = (halfwidth_latin(text), score)
        return [{"bbox_xyxy": box.tolist(), "label": "text_line", "score": score, "order": k, "text": text}
                for k, (box, (text, score)) in enumerate(zip(boxes, texts))]

    def batches(self, image: np.ndarray, boxes: np.ndarray):
        """(line indices, (n, T, C) class probabilities with the script's classes only, input width)
        per batch of `batch_lines` lines of similar width/height ratio (less padding)."""
        ratio = (boxes[:, 2] - boxes[:, 0]) / np.maximum(boxes[:, 3] - boxes[:, 1], 1.0)
        order = np.argsort(ratio, kind="stable")
        for start in range(0, len(order), self.batch_lines):
            chunk = order[start:start + self.batch_lines]
            width = int(math.ceil(REC_HEIGHT * min(max(ratio[chunk].max(), 320 / REC_HEIGHT), self.max_ratio)))
            batch = np.stack([crop_tensor(image, boxes[i], width) for i in chunk])
            probs = self.session.run(None, {self.input_name: batch})[0]
            probs[:, :, :self.allowed.size] *= self.allowed[:probs.shape[2]]
            yield chunk, probs, width

    def close(self) -> None:
        self.session = None


if __name__ == "__main__":
    _loop.main(Recognizer)
