"""The GPU processes of one sample that belong to no corral job (`corral.core.monitoring.outside_use`).

A pid counts only where this machine can see it (/proc/<pid>): a server in a container reads the
host's pids from NVML, which it cannot tell from its jobs' own, so it marks nothing rather than every GPU.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Collection, Iterable

from corral.core.monitoring.outside_use import OutsideProcess
from corral.monitor.nvml import GpuReading

_PROC = "/proc"


def outside_processes(readings: Iterable[GpuReading], job_pids: Collection[int], now: float) -> list[OutsideProcess]:
    """Each (GPU, process) NVML lists whose pid is in no job's processes, with its owner; `since` is `now`."""
    out = []
    for reading in readings:
        for pid, mem_mb in reading.processes:
            if pid in job_pids:
                continue
            user = _owner(pid)
            if user is not None:
                out.append(OutsideProcess(gpu=reading.index, pid=pid, user=user, mem_mb=mem_mb, since=now))
    return out


def _owner(pid: int) -> str | None:
    """Who runs `pid`; None if it is gone or not visible here."""
    try:
        uid = os.stat(os.path.join(_PROC, str(pid))).st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
