"""Fault-injecting runner for orchestrator tests (OCR-D DummyProcessorWithOutputFailures).

Modes, applied to pages whose id contains one of `on`: ok (default), raise (exception in
detect), crash (SIGKILL itself), hang (sleep), garbage (writes invalid JSON as output),
exit0 (exits 0 mid-job). Mode noop exits 0 at once without any output or event.
"""

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runners"))

import _loop  # noqa: E402


class Detector:
    def __init__(self, params, device, allow_cpu_fallback):
        self.params = params
        self.device_used = "cpu"
        self.info = {"model": "fake-1"}
        if params["mode"] == "missing":
            raise _loop.MissingDependency("fakelib is not installed")
        if params["mode"] == "nogpu" and not allow_cpu_fallback:
            raise _loop.DeviceUnavailable("no CUDA device")
        if params["mode"] == "garbage":
            _loop.atomic_write_json = self._garbage_writer(_loop.atomic_write_json)

    def _garbage_writer(self, real):
        def write(path, obj):
            if isinstance(obj, dict) and "regions" in obj and self._hit(obj["page_id"]):
                Path(path).write_text("{not json")
            else:
                real(path, obj)
        return write

    def _hit(self, page_id):
        return any(s in page_id for s in self.params["on"])

    def detect(self, image_path, page):
        mode = self.params["mode"]
        if self._hit(page["page_id"]):
            if mode == "raise":
                raise ValueError(f"bad page {page['page_id']}")
            if mode == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "hang":
                time.sleep(3600)
            if mode == "exit0":
                sys.exit(0)
        w, h = page["width"], page["height"]
        return [{"bbox_xyxy": [1, 1, w / 2, h / 2], "label": "text", "score": 0.9},
                {"bbox_xyxy": [w / 2, h / 2, w - 1, h - 1], "label": "mystery", "score": 0.5}]

    def close(self):
        pass


if __name__ == "__main__":
    if "noop" in os.environ.get("FAKE_MODES", ""):
        sys.exit(0)
    _loop.main(Detector)
