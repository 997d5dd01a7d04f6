"""recognize_tesseract runner: Tesseract LSTM recognition (tesserocr) of the transcription stage's line boxes.

It reads the same line plan as the PP-OCR ``recognize`` runner (``<plan_dir>/<page_id>.json``,
written by src/newsbag/transcription.py) and returns one region per line, in the plan's order,
with ``text``, a score (mean word confidence, 0..1), its ``words`` (box, text, confidence) and
the ``model`` (traineddata) that read it.

A runner like the others, rather than a call inside newsbag: the traineddata load happens
once per job, a page that crashes Tesseract fails alone, and newsbag imports no model library.

Each model is one ``PyTessBaseAPI`` (loaded once per job); a page image is handed over once
per model and each line is a rectangle of it (no per-line image copy). With several
``models`` a page is read by the one most confident on a sample of its lines (Fraktur against
Antiqua, say); the other models read only that sample.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _loop
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
        raise _loop.MissingDependency("recognize_tesseract: params.models is empty; name a traineddata, e.g. Fraktur")
    found = {}
    for model in params["models"]:
        path = folder / f"{model}.traineddata"
        if not path.is_file() or path.stat().st_size == 0:
            raise _loop.MissingDependency(
                f"recognize_tesseract: {model}.traineddata not found in {folder}; "
                f"apt-get install {package_for(model)}, or set params.tessdata to a folder holding {model}.traineddata")
        found[model] = path
    return found


def sample_indices(n: int, k: int) -> list[int]:
    """`k` line indices spread evenly over `n` lines (all of them when n <= k).

    >>> sample_indices(10, 3), sample_indices(2, 5)
    ([0, 3, 6], [0, 1])
    """
    if n <= k:
        return list(range(n))
    return [i * n // k for i in range(k)]


def more_confident(scores: dict[str, list[float]]) -> str:
    """The model with the highest mean line score (the first one listed on a tie).

    >>> more_confident({"Fraktur": [0.9, 0.8], "eng": [0.6, 0.95]})
    'Fraktur'
    """
    return max(scores, key=lambda m: sum(scores[m]) / max(len(scores[m]), 1))


class TesseractRecognizer:
    """One tesserocr API per model, loaded once per job; lines are rectangles of the page image."""

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        try:
            import tesserocr
        except ImportError as exc:
            raise _loop.MissingDependency(
                f"tesserocr is not installed in {sys.executable}: {exc}; pip install tesserocr") from exc
        if device == "gpu" and not allow_cpu_fallback:
            raise _loop.DeviceUnavailable("Tesseract recognises on CPU only; allow CPU fallback")
        paths = locate_weights(params)
        folder = str(next(iter(paths.values())).parent)
        self.tesserocr = tesserocr
        # Page segmentation: each rectangle is one text line.
        self.apis = {m: tesserocr.PyTessBaseAPI(path=folder + os.sep, lang=m, psm=tesserocr.PSM.SINGLE_LINE,
                                                oem=tesserocr.OEM.LSTM_ONLY) for m in paths}
        self.plan_dir = params["plan_dir"]
        self.sample_lines = int(params["sample_lines"])
        version = tesserocr.tesseract_version().split()[1]
        self.device_used = "cpu"
        self.info = {"model": f"tesseract-{version} {'|'.join(paths)} (LSTM, tesserocr)", "tesseract_version": version,
                     "traineddata": {m: str(p) for m, p in paths.items()}}

    def _read(self, api, xyxy) -> dict:
        """One line: its text, score and words, read in the rectangle `xyxy` of the page set on `api`."""
        tesserocr = self.tesserocr
        x0, y0 = max(int(xyxy[0]), 0), max(int(xyxy[1]), 0)
        x1, y1 = int(-(-xyxy[2] // 1)), int(-(-xyxy[3] // 1))
        api.SetRectangle(x0, y0, max(x1 - x0, 1), max(y1 - y0, 1))
        api.Recognize()
        words = []
        level = tesserocr.RIL.WORD
        iterator = api.GetIterator()
        for word in tesserocr.iterate_level(iterator, level) if iterator is not None else ():
            try:
                text = word.GetUTF8Text(level).strip()
            except RuntimeError:   # tesserocr's answer for a word with no text (specks, a blank crop)
                continue
            box = word.BoundingBox(level)
            if text and box is not None:
                words.append({"bbox_xyxy": list(box), "text": text, "score": round(word.Confidence(level) / 100, 4)})
        score = sum(w["score"] for w in words) / len(words) if words else 0.0
        return {"text": " ".join(w["text"] for w in words), "score": score, "words": words}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        with open_page(image_path) as im:
            image = im.convert("L")   # Tesseract binarises itself; grey keeps the copy small
        boxes = read_plan(self.plan_dir, page["page_id"], image.width, image.height)
        if not boxes:
            return []
        models = list(self.apis)
        read: dict[str, dict[int, dict]] = {m: {} for m in models}
        if len(models) > 1:
            sample = sample_indices(len(boxes), self.sample_lines)
            for m in models:
                self.apis[m].SetImage(image)
                read[m] = {i: self._read(self.apis[m], boxes[i]) for i in sample}
            chosen = more_confident({m: [line["score"] for line in read[m].values()] for m in models})
        else:
            chosen = models[0]
            self.apis[chosen].SetImage(image)
        api, done = self.apis[chosen], read[chosen]
        out = []
        for k, box in enumerate(boxes):
            line = done.get(k) or self._read(api, box)
            out.append({"bbox_xyxy": box, "label": "text_line", "order": k, "model": chosen, **line})
        for m in models:
            self.apis[m].Clear()
        return out

    def close(self) -> None:
        for api in self.apis.values():
            api.End()


if __name__ == "__main__":
    _loop.main(TesseractRecognizer)
