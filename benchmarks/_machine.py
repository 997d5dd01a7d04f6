"""The machine a benchmark ran on: cores, load, CPU model, Python; printed at the head of every report."""

from __future__ import annotations

import os
import platform
import resource
import sys


def machine() -> dict:
    """Cores (online and usable by this process), 1/5/15-minute load, CPU model, Python."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "cpu": model or platform.processor(),
        "python": sys.version.split()[0],
    }


def machine_line() -> str:
    m = machine()
    return (f"# machine: {m['cores']} cores ({m['cores_usable']} usable), load {m['load_1_5_15']}, "
            f"{m['cpu']}, python {m['python']}")


def peak_rss_mb(children: bool = False) -> float:
    """Peak resident set size of this process (or of its waited-for children), MB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
