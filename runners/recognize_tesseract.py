"""recognize_tesseract runner: Tesseract LSTM recognition (tesserocr) of the transcription stage's crops.

It reads the crop plan the transcription stage writes (``<plan_dir>/<page_id>.json``, see
runners/_plan.py): text lines, read one line each (page segmentation mode 7), and regions or
column parts, each read as a block whose lines Tesseract finds (mode 6); the stage plans
single-column regions whole for this runner by default, because Tesseract's own line finding
inside one column reads better than a line detector's boxes cut to it. It returns one region per line read, in the
plan's order (``order``: the crop's index), with ``text``, a score (mean word confidence,
0..1), its ``words`` (box, text, confidence) and the ``model`` (traineddata) that read it.

A runner like the others, rather than a call inside newsbag: the traineddata load happens
once per job, a page that crashes Tesseract fails alone, and newsbag imports no model library.

Each model is one ``PyTessBaseAPI`` (loaded once per job); a page image is handed over once
per model and each crop is a rectangle of it (no per-crop image copy). With several
``models`` a page is read by the one most confident on a sample of its lines (crops spread
over the page, until ``sample_lines`` lines; Fraktur against Antiqua, say); the other models
read only that sample.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from pathlib import Path

import _loop
from _errors import DeviceUnavailable, MissingDependency
from _image import open_page
from _plan import read_plan

# Where Debian's (and Ubuntu's) tesseract-ocr packages put their traineddata, newest first.
DEBIAN_TESSDATA = ("/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata")
# The Debian package of a model whose package name is not tesseract-ocr-<model>.
_PACKAGES = {"Fraktur": "tesseract-ocr-script-frak", "Latin": "tesseract-ocr-script-latn"}


def package_for(model: str) -> str:
    """The Debian package that installs ``<model>.traineddata``.

    >>> package_for("Fraktur"), package_for("frk"), package_for("script/Latin")
    ('tesseract-ocr-script-frak', 'tesseract-ocr-frk', 'tesseract-ocr-script-latn')
    """
    name = model.rsplit("/", 1)[-1]
    return _PACKAGES.get(name, f"tesseract-ocr-{name.lower()}")


def tessdata_dir(params: dict) -> str:
    """The tessdata folder: the parameter, else $TESSDATA_PREFIX, else the first Debian folder that exists."""
    if params["tessdata"]:
        return params["tessdata"]
    if os.environ.get("TESSDATA_PREFIX"):
        return os.environ["TESSDATA_PREFIX"]
    return next((d for d in DEBIAN_TESSDATA if os.path.isdir(d)), DEBIAN_TESSDATA[0])


def locate_weights(params: dict) -> dict[str, Path]:
    """The traineddata file of each model (no tesserocr import; `newsbag doctor` lists them).

    Raises:
        MissingDependency: a model is not in the tessdata folder (one line naming the package).
    """
    folder = Path(tessdata_dir(params)).expanduser()
    if not params["models"]:
        raise MissingDependency("recognize_tesseract: params.models is empty; name a traineddata, e.g. Fraktur")
    found = {}
    for model in params["models"]:
        path = folder / f"{model}.traineddata"
        if not path.is_file() or path.stat().st_size == 0:
            raise MissingDependency(
                f"recognize_tesseract: {model}.traineddata not found in {folder}; "
                f"apt-get install {package_for(model)}, or set params.tessdata to a folder holding {model}.traineddata")
        found[model] = path
    return found


def spread_order(n: int) -> list[int]:
    """0..n-1 with each index in the middle of the largest gap the ones before it left: the
    first few of it are a sample spread evenly over the page's crops.

    >>> spread_order(7), spread_order(2)
    ([3, 1, 5, 0, 2, 4, 6], [1, 0])
    """
    out, gaps = [], deque([(0, n)])
    while gaps:
        lo, hi = gaps.popleft()
        if lo < hi:
            mid = (lo + hi) // 2
            out.append(mid)
            gaps.extend(((lo, mid), (mid + 1, hi)))
    return out


def more_confident(scores: dict[str, list[float]]) -> str:
    """The model with the highest mean score (the first one listed on a tie).

    >>> more_confident({"Fraktur": [0.9, 0.8], "eng": [0.6, 0.95]})
    'Fraktur'
    """
    return max(scores, key=lambda m: sum(scores[m]) / max(len(scores[m]), 1))


class TesseractRecognizer:
    """One tesserocr API per model, loaded once per job; lines are rectangles of the page image."""

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        # One thread: Tesseract's OpenMP threads spin on a busy node (a Slurm CPU job, the
        # other stages' workers) and cost more CPU than they save time; set it to use more.
        os.environ.setdefault("OMP_THREAD_LIMIT", "1")
        try:
            import tesserocr
        except ImportError as exc:
            raise MissingDependency(
                f"tesserocr is not installed in {sys.executable}: {exc}; pip install tesserocr") from exc
        if device == "gpu" and not allow_cpu_fallback:
            raise DeviceUnavailable("Tesseract recognises on CPU only; allow CPU fallback")
        paths = locate_weights(params)
        folder = str(next(iter(paths.values())).parent)
        self.tesserocr = tesserocr
        # A line crop is read as one text line; a region as a block whose lines Tesseract finds.
        self.modes = {"line": tesserocr.PSM.SINGLE_LINE, "region": tesserocr.PSM.SINGLE_BLOCK}
        self.apis = {m: tesserocr.PyTessBaseAPI(path=folder + os.sep, lang=m, oem=tesserocr.OEM.LSTM_ONLY)
                     for m in paths}
        for api in self.apis.values():
            # Tesseract reads every line it is unsure of a second time as white on black; a
            # newspaper's text is black on white, and the second reading costs ~12 % of the CPU.
            api.SetVariable("tessedit_do_invert", "0")
        self.plan_dir = params["plan_dir"]
        self.sample_lines = int(params["sample_lines"])
        self.recheck_below = float(params["recheck_below"])
        version = tesserocr.tesseract_version().split()[1]
        self.device_used = "cpu"
        self.info = {"model": f"tesseract-{version} {'|'.join(paths)} (LSTM, tesserocr)", "tesseract_version": version,
                     "traineddata": {m: str(p) for m, p in paths.items()}}

    def _read(self, api, xyxy, unit: str) -> list[dict]:
        """The lines read in the rectangle `xyxy` of the page set on `api`: the crop itself for a
        line (text "" where Tesseract finds none), each line Tesseract finds for a region."""
        tesserocr = self.tesserocr
        x0, y0 = max(int(xyxy[0]), 0), max(int(xyxy[1]), 0)
        x1, y1 = int(-(-xyxy[2] // 1)), int(-(-xyxy[3] // 1))
        api.SetPageSegMode(self.modes[unit])
        api.SetRectangle(x0, y0, max(x1 - x0, 1), max(y1 - y0, 1))
        api.Recognize()
        lines: list[tuple[list[int] | None, list[dict]]] = []
        word_level, line_level = tesserocr.RIL.WORD, tesserocr.RIL.TEXTLINE
        iterator = api.GetIterator()
        for word in tesserocr.iterate_level(iterator, word_level) if iterator is not None else ():
            if not lines or word.IsAtBeginningOf(line_level):
                lines.append((word.BoundingBox(line_level), []))
            try:
                text = word.GetUTF8Text(word_level).strip()
            except RuntimeError:   # tesserocr's answer for a word with no text (specks, a blank crop)
                continue
            box = word.BoundingBox(word_level)
            if text and box is not None:
                lines[-1][1].append({"bbox_xyxy": list(box), "text": text,
                                     "score": round(word.Confidence(word_level) / 100, 4)})
        if unit == "line":
            return [_line(list(xyxy), [w for _, words in lines for w in words])]
        return [_line(list(box), words) for box, words in lines if box is not None and words]

    def detect(self, image_path: str, page: dict) -> list[dict]:
        with open_page(image_path) as im:
            image = im.convert("L")   # Tesseract binarises itself; grey keeps the copy small
        plan = read_plan(self.plan_dir, page["page_id"], image.width, image.height)
        crops, units, sample = plan["crops"], plan["units"], plan["sample"]
        if not crops:
            return []
        if len(self.apis) > 1:
            chosen, sampled = self._choose(image, crops, units, sample)
        else:
            chosen, sampled = next(iter(self.apis)), {}
            self.apis[chosen].SetImage(image)
        # What the choice read with the chosen model is not read again: crops, or sample lines.
        done, lines_done = ({}, sampled) if sample else (sampled, {})
        api, out = self.apis[chosen], []
        for k, box in enumerate(crops):
            lines = done[k] if k in done else self._read(api, box, units[k])
            if units[k] == "region" and plan["crop_lines"][k] and _score(lines) < self.recheck_below:
                by_line = [(lines_done.get(i) or self._read(api, sample[i], "line"))[0]
                           for i in plan["crop_lines"][k]]
                if _score(by_line) > _score(lines):
                    lines = [line for line in by_line if line["text"]]
            for line in lines:
                out.append({"label": "text_line", "order": k, "model": chosen, **line})
        for other in self.apis.values():
            other.Clear()
        return out

    def _choose(self, image, crops: list, units: list[str], sample: list) -> tuple[str, dict[int, list[dict]]]:
        """The model most confident on a sample of the page's lines, spread over the page until
        `sample_lines` lines, and what it read, by index: of the plan's sample lines where it
        has them (a page read as regions, where a few whole regions would be a narrow sample,
        often an advertisement's), else of the crops."""
        boxes, kinds = (sample, ["line"] * len(sample)) if sample else (crops, units)
        read: dict[str, dict[int, list[dict]]] = {m: {} for m in self.apis}
        for m, api in self.apis.items():
            api.SetImage(image)
            n_lines = 0
            for k in spread_order(len(boxes)):
                if n_lines >= self.sample_lines:
                    break
                read[m][k] = self._read(api, boxes[k], kinds[k])
                n_lines += len(read[m][k])
        # Word confidences, not line means: a sample crop where a model finds no word scores 0
        # as a line and would outweigh many lines read well.
        chosen = more_confident({m: [w["score"] for lines in read[m].values() for line in lines for w in line["words"]]
                                 for m in read})
        return chosen, read[chosen]

    def close(self) -> None:
        for api in self.apis.values():
            api.End()


def _score(lines: list[dict]) -> float:
    """Mean line score of a reading (0 for none)."""
    return sum(line["score"] for line in lines) / len(lines) if lines else 0.0


def _line(xyxy: list, words: list[dict]) -> dict:
    """A line record: its box, its words' text, and their mean confidence as its score."""
    score = sum(w["score"] for w in words) / len(words) if words else 0.0
    return {"bbox_xyxy": xyxy, "text": " ".join(w["text"] for w in words), "score": score, "words": words}


if __name__ == "__main__":
    _loop.main(TesseractRecognizer)
