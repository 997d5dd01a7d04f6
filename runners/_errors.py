"""The exceptions a runner raises, how it quotes them, and the exit codes its job ends with."""

from __future__ import annotations

# The runner's exit codes besides 0 (every page ok, empty or skipped), as newsbag reads them
# (`source_run`): the `_loop` module docstring says when each is given.
EXIT_SETUP_FAILED = 1
EXIT_MISSING = 3
EXIT_PAGES_FAILED = 4
EXIT_DEVICE = 5
EXIT_RUN_DIR = 7
EXIT_CONTEXT_LOST = 8


class DeviceUnavailable(RuntimeError):
    """The requested accelerator cannot be used and CPU fallback is not allowed."""


class MissingDependency(RuntimeError):
    """A library or model file the family needs is not installed."""


class RunDirFull(RuntimeError):
    """The output folder cannot be written (disk full, quota, read-only): not a page's fault.

    The job stops at once with a ``fatal`` event (error_class RunDirError) and exit 7; the
    orchestrator ends the run with one line and the rerun resumes.
    """


class SetupRefused(RuntimeError):
    """The model could not be set up; the ``fatal`` event is out and ``code`` is the exit code."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class ContextLost(RuntimeError):
    """The process's CUDA context is unusable after a sticky error: the job stops (exit 8) and the
    orchestrator starts a fresh runner for the pages left."""


# CUDA's sticky errors (cudaErrorIllegalAddress, LaunchFailure, Assert, MisalignedAddress,
# IllegalInstruction, HardwareStackError): "any further CUDA work will return the same error;
# the process must be terminated and relaunched" (CUDA runtime API). Matched in the library's
# message, which torch, paddle and onnxruntime all pass through.
_STICKY_CUDA_ERRORS = ("illegal memory access", "unspecified launch failure", "device-side assert",
                       "misaligned address", "illegal instruction", "hardware stack error")


def error_line(exc: BaseException, limit: int = 500) -> str:
    """``<ExceptionType>: <message>``, its first line cut at `limit`: how page records, events
    and probes quote an error."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:limit]


def context_lost(exc: BaseException) -> bool:
    """Whether `exc` is a CUDA error that leaves this process unable to use the GPU again."""
    text = str(exc).lower()
    return any(needle in text for needle in _STICKY_CUDA_ERRORS)
