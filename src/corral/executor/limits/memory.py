"""The memory limit: `MemoryLimit`, looked at every `MEMORY_CHECK_INTERVAL_S`; `over_memory` and `oom_killed`,
what it asks of the job's cgroup or processes; `note_memory_kill`, what the job's stderr says of its kill."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.executor import endings, files
from corral.executor.limits.base import Ending, Limit, WatchedJob

if TYPE_CHECKING:
    from corral.executor.cgroups import JobCgroup

MEMORY_CHECK_INTERVAL_S = 0.5


class MemoryLimit(Limit):
    """OUT_OF_MEMORY, killed at once, when the job went over `limit_mb` (0: none but the machine's, which only a
    cgroup tells of). `oom_kills_before`: its cgroup's count of OOM kills before the job ran."""

    while_stopping = True  # its clock runs on, every half second, though it ends nothing then

    def __init__(self, limit_mb: float, began: float, cgroup: JobCgroup | None, oom_kills_before: int) -> None:
        self.limit_mb = limit_mb
        self.oom_kills_before = oom_kills_before
        self.next_check = began + MEMORY_CHECK_INTERVAL_S if limit_mb or cgroup else None

    def next_look(self, job: WatchedJob) -> float | None:
        return self.next_check

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        if self.next_check is None or now < self.next_check:
            return None
        self.next_check = now + MEMORY_CHECK_INTERVAL_S
        if job.ending is None and over_memory(self.limit_mb, job.pid, job.cgroup, self.oom_kills_before):
            return Ending("OUT_OF_MEMORY", at_once=True)
        return None


def over_memory(limit_mb: float, pid: int, cgroup: JobCgroup | None, oom_kills_before: int) -> bool:
    """Whether the job went over its memory: an OOM kill in its cgroup (its limit's, or the machine's
    when it has none), else its processes' summed RSS over its limit."""
    if cgroup is not None and cgroup.holds_memory:
        return oom_killed(cgroup, oom_kills_before)
    if not limit_mb:
        return False
    if cgroup is not None:
        return files.pids_rss_mb(cgroup.pids()) > limit_mb
    return files.session_rss_mb(pid) > limit_mb


def oom_killed(cgroup: JobCgroup | None, oom_kills_before: int) -> bool:
    return cgroup is not None and cgroup.holds_memory and cgroup.oom_kills() > oom_kills_before


def note_memory_kill(note: Callable[[str], None], limit_mb: int | None, job_ref: str, cgroup: JobCgroup | None,
                     oom_kills_before: int) -> None:
    note(f"corral: job exceeded its memory limit of {limit_mb} MB; killed" if limit_mb else
         "corral: the kernel's out-of-memory killer killed a process of the job (the machine ran out "
         "of memory); the job was stopped")
    kills = 1
    if cgroup is not None and cgroup.holds_memory:
        kills = max(1, cgroup.oom_kills() - oom_kills_before)
    note(endings.oom_line(job_ref, kills))
