"""A runner dies with the orchestrator that started it, and takes its process group along."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

_WATCHING = False


def terminate(*_args) -> None:
    """Stop now, with every process this runner started (it leads its own process group)."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    terminate()


def die_with_parent() -> None:
    """When the orchestrator (``NEWSBAG_PARENT_PID``) dies, by kill -9 or Ctrl-C, die too.

    Its SIGTERM (a stop, or Slurm's scancel) also takes the whole process group down at once:
    a model library's worker processes must not outlive the runner.
    """
    global _WATCHING
    parent = os.environ.get("NEWSBAG_PARENT_PID")
    if _WATCHING or not parent or not parent.isdigit() or threading.current_thread() is not threading.main_thread():
        return
    _WATCHING = True
    signal.signal(signal.SIGTERM, terminate)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != int(parent):  # the orchestrator died before the line above
        terminate()
    threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True, name="newsbag-parent").start()
