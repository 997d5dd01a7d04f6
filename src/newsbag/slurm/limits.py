"""Whether a job can ever start here: its request against its partition's nodes, and its stages' envs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .client import read_stdout

__all__ = ["Request", "read_cluster", "check_limits", "check_envs"]


@dataclass(frozen=True)
class Request:
    """One job's resource request, as the submit script would pass it to sbatch."""

    kind: str
    env_prefix: str  # L40S, H200 or CPU: the variables that set it (L40S_CPUS, ...)
    partition: str
    gres: str
    cpus: int
    mem: str
    time: str


_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _mem_mb(value: str) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", str(value), re.I)
    return float(m.group(1)) * _MEM_UNITS[(m.group(2) or "M").upper()] if m else None


def _minutes(value: str) -> float | None:
    """Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in minutes; None for UNLIMITED/INFINITE."""
    value = str(value).strip()
    if value.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days, _, rest = value.rpartition("-") if "-" in value else ("", "", value)
    try:
        parts = [int(p) for p in rest.split(":")]
        d = int(days) if days else 0
    except ValueError:
        return None
    if days:
        h, m, s = (parts + [0, 0])[:3]
    elif len(parts) == 1:
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]
    else:
        h, m, s = parts[:3]
    return d * 1440 + h * 60 + m + s / 60


def _gres_counts(text: str) -> dict[str, int]:
    """{"gpu:l40s": 1, "gpu": 2, ...} from a node's Gres string ("gpu:l40s:1(S:0),gpu:h200:1")."""
    out: dict[str, int] = {}
    for item in re.sub(r"\([^)]*\)", "", text or "").split(","):
        parts = item.strip().split(":")
        if not parts or parts[0] in ("", "(null)"):
            continue
        count = int(parts[-1]) if parts[-1].isdigit() else 1
        names = parts[:-1] if parts[-1].isdigit() else parts
        out[names[0]] = out.get(names[0], 0) + count
        if len(names) > 1:
            out[":".join(names[:2])] = out.get(":".join(names[:2]), 0) + count
    return out


def read_cluster() -> dict[str, dict] | None:
    """Partitions with their limits and nodes, from ``scontrol show partition`` and ``sinfo``.

    Returns:
        {partition: {"max_time_min": float|None, "max_mem_mb": float|None, "max_cpus_node": int|None,
        "state": str, "nodes": [{"name", "cpus", "mem_mb", "gres": {name: count}}]}}, or None
        when the Slurm tools are missing or answer nothing.
    """
    parts_out = read_stdout(["scontrol", "-o", "show", "partition"])
    nodes_out = read_stdout(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%m|%G"])
    if not parts_out.strip():
        return None
    cluster: dict[str, dict] = {}
    for line in parts_out.splitlines():
        rec = dict(tok.partition("=")[::2] for tok in line.split() if "=" in tok)
        name = rec.get("PartitionName")
        if not name:
            continue
        max_mem = rec.get("MaxMemPerNode", "UNLIMITED")
        max_cpus = rec.get("MaxCPUsPerNode", "UNLIMITED")
        cluster[name] = {"max_time_min": _minutes(rec.get("MaxTime", "UNLIMITED")),
                         "max_mem_mb": None if max_mem == "UNLIMITED" else _mem_mb(max_mem),
                         "max_cpus_node": int(max_cpus) if max_cpus.isdigit() else None,
                         "state": rec.get("State", "UP"), "nodes": []}
    for line in nodes_out.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        node, part, cpus, mem, gres = fields
        part = part.rstrip("*")
        if part in cluster:
            cluster[part]["nodes"].append({"name": node, "cpus": int(cpus) if cpus.isdigit() else 0,
                                           "mem_mb": _mem_mb(mem) or 0.0, "gres": _gres_counts(gres)})
    return cluster


def _fmt_mb(mb: float) -> str:
    return f"{mb / 1024:.0f}G" if mb >= 1024 else f"{mb:.0f}M"


def check_limits(requests: Sequence[Request], cluster: Mapping[str, dict]) -> list[str]:
    """One message per request that no node of its partition can ever satisfy, with the numbers.

    A request can never start when its partition does not exist, its time exceeds the
    partition's MaxTime, or no single node has the CPUs, memory (RealMemory, capped by
    MaxMemPerNode) and GPUs of that type it asks for. Busy nodes are not a reason: those jobs wait.
    """
    problems = []
    for r in requests:
        part = cluster.get(r.partition)
        head = f"{r.kind} job (-p {r.partition} --cpus-per-task={r.cpus} --mem={r.mem} --time={r.time}" + \
               (f" --gres={r.gres})" if r.gres else ")")
        if part is None:
            problems.append(f"{head}: partition {r.partition} does not exist (this cluster has: "
                            f"{', '.join(sorted(cluster))}); set {r.env_prefix}_PARTITION")
            continue
        why = []
        limit = part["max_time_min"]
        want = _minutes(r.time)
        if limit is not None and want is not None and want > limit:
            why.append(f"time {r.time} exceeds the partition's MaxTime of {limit:g} min "
                       f"(set {r.env_prefix}_TIME to at most {int(limit)})")
        want_mb = _mem_mb(r.mem)
        gres_parts = r.gres.split(":") if r.gres else []
        gres_key = ":".join(p for p in gres_parts[:2] if not p.isdigit()) if gres_parts else ""
        gres_n = int(gres_parts[-1]) if gres_parts and gres_parts[-1].isdigit() else (1 if gres_parts else 0)
        nodes = part["nodes"]
        if nodes:
            cpus_cap = [min(n["cpus"], part["max_cpus_node"] or n["cpus"]) for n in nodes]
            mem_cap = [min(n["mem_mb"], part["max_mem_mb"] or n["mem_mb"]) for n in nodes]
            fits = [c >= r.cpus and (want_mb is None or m >= want_mb) and n["gres"].get(gres_key, 0) >= gres_n
                    for n, c, m in zip(nodes, cpus_cap, mem_cap)] if gres_key else \
                   [c >= r.cpus and (want_mb is None or m >= want_mb) for c, m in zip(cpus_cap, mem_cap)]
            if not any(fits):
                if r.cpus > max(cpus_cap):
                    why.append(f"{r.cpus} CPUs asked but its largest node has {max(cpus_cap)} "
                               f"(set {r.env_prefix}_CPUS={max(cpus_cap)} or less)")
                if want_mb is not None and want_mb > max(mem_cap):
                    why.append(f"{r.mem} memory asked but its largest node has {_fmt_mb(max(mem_cap))} "
                               f"(set {r.env_prefix}_MEM={int(max(mem_cap) // 1024)}G or less)")
                if gres_key and not any(n["gres"].get(gres_key, 0) >= gres_n for n in nodes):
                    have = sorted({k for n in nodes for k in n["gres"] if ":" in k}) or ["none"]
                    why.append(f"no node has {gres_n} x {gres_key} (its nodes have: {', '.join(have)}; "
                               f"set {r.env_prefix}_GRES)")
                if not why:
                    why.append("no single node has the CPUs, memory and GPUs together")
        if why:
            problems.append(f"{head} can never start on this cluster: " + "; ".join(why))
    return problems


def check_envs(config, stage_names: Sequence[str]) -> list[str]:
    """One message per selected model stage whose env interpreter is missing or not executable."""
    problems = []
    for stage in config.select(list(stage_names) or None):
        if stage.kind != "model":
            continue
        python = stage.env.python
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            problems.append(
                f"stage {stage.name}: env {stage.env.name!r} interpreter {python} is missing or not executable;"
                f" create that env or fix envs.{stage.env.name}.python in {config.path}"
            )
    return problems
