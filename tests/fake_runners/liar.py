"""A runner written by someone else: it prints malformed events and writes lying boxes.

Modes (params.mode): events (malformed `@@newsbag` lines around every page, then normal
output), lie (writes its page JSON itself, with NaN/inf coordinates, inverted corners and
boxes off the page, as bare NaN/Infinity tokens), chatty (prints a progress line to stdout
without a newline on every page, as model libraries do, so the next event shares its line),
skip (writes no page and reports every page `skipped`, as if it were done already), truncate
(writes every page but cuts each `done` event in half), ok.
"""

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runners"))

import _events  # noqa: E402
import _loop  # noqa: E402
import _regions  # noqa: E402
import _writes  # noqa: E402

GARBAGE = [
    "@@newsbag [1,2]",
    "@@newsbag {not json",
    "@@newsbag 42",
    '@@newsbag {"event": "done"}',
    '@@newsbag {"event": "done", "page_id": null, "status": "ok"}',
    '@@newsbag {"event": "done", "page_id": 7}',
    '@@newsbag {"event": "done", "page_id": "nope", "status": "exploded"}',
    '@@newsbag {"event": "start", "page_id": ["a"]}',
    '@@newsbag {"event": "done", "page_id": "x", "seconds": "fast"}',
    '@@newsbag {"event": 3}',
    '@@newsbag {}',
]

LIES = [
    [10, 10, 20, 20],                 # honest
    [math.nan, 0, 5, 5],              # NaN -> dropped
    [0, 0, math.inf, 5],              # inf -> dropped
    [30, 25, 12, 2],                  # inverted -> swapped to [12, 2, 30, 25]
    [-5, -5, 10, 1e9],                # off the page -> clipped to [0, 0, 10, H]
    [5000, 5000, 6000, 6000],         # wholly off the page -> dropped
]


class Detector:
    def __init__(self, params, device, allow_cpu_fallback):
        self.mode = params["mode"]
        self.device_used = "cpu"
        self.info = {"model": "liar-1"}
        if self.mode == "lie":
            _regions.clean_regions = lambda regions, w, h, label_map: (
                [{**r, "class": "text"} for r in regions], {})
            _writes.atomic_write_json = self._raw_writer(_writes.atomic_write_json)
        if self.mode == "truncate":
            _events.emit = self._done_truncator(_events.emit)
        if self.mode == "skip":
            _writes.atomic_write_json = self._no_page_writer(_writes.atomic_write_json)
            _events.emit = self._skip_claimer(_events.emit)

    @staticmethod
    def _raw_writer(real):
        def write(path, obj, **kwargs):
            if isinstance(obj, dict) and "regions" in obj:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(json.dumps(obj))  # allow_nan: bare NaN / Infinity tokens
            else:
                real(path, obj, **kwargs)
        return write

    @staticmethod
    def _no_page_writer(real):
        def write(path, obj, **kwargs):
            if not (isinstance(obj, dict) and "regions" in obj):
                real(path, obj, **kwargs)
        return write

    @staticmethod
    def _skip_claimer(real):
        def emit(event, **fields):
            real(event, **({**fields, "status": "skipped"} if event == "done" else fields))
        return emit

    @staticmethod
    def _done_truncator(real):
        def emit(event, **fields):
            if event != "done":
                return real(event, **fields)
            text = json.dumps({"event": event, **fields})
            print(_events.EVENT_PREFIX + text[:len(text) // 2], flush=True)
        return emit

    def detect(self, image_path, page):
        if self.mode == "events":
            for line in GARBAGE:
                print(line, flush=True)
        if self.mode == "chatty":
            print("\rpredict: 100%", end="", flush=True)
        if self.mode == "lie":
            return [{"bbox_xyxy": box, "label": "text", "score": math.nan if i == 0 else 0.5}
                    for i, box in enumerate(LIES)]
        w, h = page["width"], page["height"]
        return [{"bbox_xyxy": [1, 1, w / 2, h / 2], "label": "text", "score": 0.9}]

    def close(self):
        pass


if __name__ == "__main__":
    _loop.main(Detector)
