"""What the monitor reads of the jobs: `JobReader`, the one narrow interface between them.

The monitor never reaches into the job service's tables or its backend: it asks these questions, and
the job service (`server.service.JobService`) answers them. Everything here is read on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job, JobProcesses
    from corral.core.scheduling.sharing import OverBudget
    from corral.core.monitoring.gpu_health import HealthEvent, HealthFigures
    from corral.core.monitoring.outside_use import OutsideProcess


@runtime_checkable
class JobReader(Protocol):
    """The jobs as the monitor sees them."""

    user: str  # the server's own user (a test notification is sent as from them)

    def active_jobs(self) -> Iterable[Job]:
        """Every job not yet ended (pending, running, array parents), in no set order."""
        ...

    def resolve(self, ref: str) -> Job:
        """The job `ref` names (`12`, `12_3`), ended or not; raises NotFound."""
        ...

    def log_owner_uid(self, job: Job) -> int | None:
        """Whose the job's log files must be for the server to read them (None: no check)."""
        ...

    def is_admin(self, user: str) -> bool:
        """Whether `user` may use every alert channel."""
        ...

    def checkpoint_dir(self, job_id: int) -> str:
        """Where the job's checkpoints are kept in the home."""
        ...

    def job_processes(self, job_id: int) -> JobProcesses | None:
        """The running job's process (`pid`) and cgroup (`procs_file`) to sample, if the backend samples."""
        ...

    def final_usage(self, job_id: int) -> dict[str, float] | None:
        """The kernel's count of an ended job's CPU time and peak memory, if the backend keeps it."""
        ...

    def gpus_in_use_outside(self, processes: Sequence[OutsideProcess]) -> None:
        """What the last sample found on this machine's GPUs that belongs to no job (`corral.core.monitoring.outside_use`):
        told the jobs after each tick, on the event loop."""
        ...

    def gpu_memory_sampled(self, used: Mapping[int, float]) -> list[tuple[Job, OverBudget]]:
        """Each sampled running job's own GPU memory (its processes', as NVML lists them per process), after each
        tick, on the event loop: what holds sharing jobs to their budgets (`corral.server.share_budgets`).
        Returns the sharing jobs warned just now of going over theirs, each with the warning."""
        ...

    def gpu_health(self, figures: Mapping[int, HealthFigures], at: float) -> list[HealthEvent]:
        """The last sample's health figures of this machine's GPUs, by index (`corral.core.monitoring.gpu_health`): a fatal
        fault drains its GPU and stops the jobs on it. Returns what happened (the monitor alerts of the faults)."""
        ...
