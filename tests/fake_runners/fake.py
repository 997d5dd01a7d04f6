"""Fault-injecting runner for orchestrator tests (OCR-D DummyProcessorWithOutputFailures).

Modes, applied to pages whose id contains one of `on`: ok (default), raise (exception in
detect), crash (SIGKILL itself), segv (SIGSEGV itself, as a native library would), die
(os._exit(1)), hang (sleep), slow (sleep `seconds`, then ok), garbage (writes invalid JSON
as output), exit0 (exits 0 mid-job), empty (the model answers, nothing parses), setupfail
(a CUDA error while loading), torn (SIGKILLs itself half-way through writing the page's
output: its temp file stays, as after an OOM kill mid-write), wait (touches `$FAKE_GATE.reached`, then waits until the
file FAKE_GATE exists: a test holds the runner mid-job while other calls run). Mode noop
exits 0 at once without any output or event; FAKE_MODES=importerror fails at import, before
any event (a broken env). With `batch_size` > 1 the detector offers detect_batch, which
runs the pages one after another inside one call (so a crash or hang anywhere kills the
whole batch, as a real batched predict() does); with `stream` it yields each page's regions
as it goes (PaddleOCRVL.predict_iter), so the pages of a batch before a crash are written first.
FAKE_PIDFILE names a file the runner writes its pid into (orphan tests); FAKE_BREAK_ON_RESTART
names a file a crashing page creates, after which every set-up fails (a runner that dies on restart).
"""

import os
import signal
import sys
import time
from pathlib import Path

if "importerror" in os.environ.get("FAKE_MODES", ""):
    raise ImportError("No module named 'fakelib' (FAKE_MODES=importerror)")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runners"))

import _errors  # noqa: E402
import _loop  # noqa: E402
import _regions  # noqa: E402
import _writes  # noqa: E402


class Detector:
    def __init__(self, params, device, allow_cpu_fallback):
        self.params = params
        self.device_used = "cpu"
        self.info = {"model": "fake-1"}
        if os.environ.get("FAKE_PIDFILE"):
            Path(os.environ["FAKE_PIDFILE"]).write_text(str(os.getpid()))
        if os.environ.get("FAKE_BREAK_ON_RESTART") and Path(os.environ["FAKE_BREAK_ON_RESTART"]).exists():
            raise RuntimeError("CUDA error: an illegal memory access was encountered (after a restart)")
        if params["mode"] == "missing":
            raise _errors.MissingDependency("fakelib is not installed")
        if params["mode"] == "nogpu" and not allow_cpu_fallback:
            raise _errors.DeviceUnavailable("no CUDA device")
        if params["mode"] == "setupfail":
            raise RuntimeError("CUDA error: initialization error")
        if params["mode"] == "garbage":
            _writes.atomic_write_json = self._garbage_writer(_writes.atomic_write_json)
        if params["mode"] == "torn":
            _writes.atomic_write_json = self._torn_writer(_writes.atomic_write_json)
        if int(params.get("batch_size") or 1) > 1:
            self.detect_batch = self._detect_batch

    def _garbage_writer(self, real):
        def write(path, obj, **kwargs):
            if isinstance(obj, dict) and "regions" in obj and self._hit(obj["page_id"]):
                Path(path).write_text("{not json")
            else:
                real(path, obj, **kwargs)
        return write

    def _torn_writer(self, real):
        def write(path, obj, **kwargs):
            if isinstance(obj, dict) and "regions" in obj and self._hit(obj["page_id"]):
                fd, _ = _writes._open_temp(Path(path))
                os.write(fd, b'{"page_id": ')
                os.kill(os.getpid(), signal.SIGKILL)
            real(path, obj, **kwargs)
        return write

    def _hit(self, page_id):
        return any(s in page_id for s in self.params["on"])

    def detect(self, image_path, page):
        mode = self.params["mode"]
        if self._hit(page["page_id"]):
            if mode == "raise":
                raise ValueError(f"bad page {page['page_id']}")
            if mode == "crash":
                if os.environ.get("FAKE_BREAK_ON_RESTART"):
                    Path(os.environ["FAKE_BREAK_ON_RESTART"]).touch()
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if mode == "die":
                os._exit(1)
            if mode == "hang":
                time.sleep(3600)
            if mode == "wait":
                gate = Path(os.environ["FAKE_GATE"])
                Path(f"{gate}.reached").touch()
                while not gate.exists():
                    time.sleep(0.05)
            if mode == "slow":
                time.sleep(float(self.params.get("seconds") or 1))
            if mode == "exit0":
                sys.exit(0)
            if mode == "empty":
                return _regions.NoRegions("no layout block in the answer 'I cannot read this page'")
        w, h = page["width"], page["height"]
        return [{"bbox_xyxy": [1, 1, w / 2, h / 2], "label": "text", "score": 0.9},
                {"bbox_xyxy": [w / 2, h / 2, w - 1, h - 1], "label": "mystery", "score": 0.5}]

    def _detect_batch(self, items):
        pages = (self.detect(path, page) for path, page in items)
        return pages if self.params.get("stream") else list(pages)

    def close(self):
        pass


if __name__ == "__main__":
    if "noop" in os.environ.get("FAKE_MODES", ""):
        sys.exit(0)
    _loop.main(Detector)
