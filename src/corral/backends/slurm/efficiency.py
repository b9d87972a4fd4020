"""How well a finished Slurm job used what it asked for, from sacct (what `seff` reports)."""

from __future__ import annotations

import re
from typing import Any

from corral.backends.slurm.parse import parse_slurm_duration, split_lines

__all__ = ["SACCT_EFFICIENCY_FIELDS", "cpu_seconds", "efficiency", "size_mb"]

SACCT_EFFICIENCY_FIELDS = ("JobID", "State", "Elapsed", "TotalCPU", "AllocCPUS", "MaxRSS", "ReqMem")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)")
_UNIT_MB = {"": 1 / 1024 / 1024, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def efficiency(sacct_text: str) -> dict[str, Any]:
    """CPU and memory efficiency from `sacct --parsable2 --noheader --delimiter=SEP
    --format=SACCT_EFFICIENCY_FIELDS -j ID` (the job's row and its steps' rows).

    Raises:
        ValueError: no row for the job.
    """
    width = len(SACCT_EFFICIENCY_FIELDS)
    rows = [dict(zip(SACCT_EFFICIENCY_FIELDS, fields)) for _, fields in split_lines(sacct_text, width, "sacct")]
    job = next((r for r in rows if "." not in r["JobID"]), None)
    if job is None:
        raise ValueError("sacct has no record of the job")
    elapsed = parse_slurm_duration(job["Elapsed"]) or 0
    cpus = int(job["AllocCPUS"] or 0)
    cpu_time = cpu_seconds(job["TotalCPU"])
    used_mb = max((size_mb(r["MaxRSS"]) or 0.0 for r in rows), default=0.0)  # steps carry MaxRSS
    requested_mb = size_mb(job["ReqMem"])
    if requested_mb is not None and job["ReqMem"].rstrip().endswith("c"):  # old per-CPU form: 4000Mc
        requested_mb *= max(cpus, 1)
    return {
        "state": job["State"], "elapsed_s": elapsed, "cpus": cpus, "cpu_time_s": cpu_time,
        "cpu_efficiency": round(cpu_time / (elapsed * cpus), 4) if elapsed and cpus else None,
        "max_rss_mb": round(used_mb, 1), "mem_requested_mb": requested_mb,
        "mem_efficiency": round(used_mb / requested_mb, 4) if requested_mb else None,
        "source": "sacct",
    }


def cpu_seconds(text: str) -> float:
    """sacct's TotalCPU (`MM:SS.mmm`, `HH:MM:SS`, `D-HH:MM:SS`) in seconds."""
    whole, _, fraction = text.strip().partition(".")
    seconds = parse_slurm_duration(whole) if ":" in whole else None
    if seconds is None:
        return 0.0
    return seconds + (float(f"0.{fraction}") if fraction.isdigit() else 0.0)


def size_mb(text: str) -> float | None:
    """`2048K`, `1.5G`, `4000Mn`, `4000Mc` in MB; empty -> None."""
    match = _SIZE.match(text.strip())
    if not match:
        return None
    return float(match.group(1)) * _UNIT_MB[match.group(2)]
