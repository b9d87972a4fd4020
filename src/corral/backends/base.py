"""The interface every backend implements, and what it may declare it can do.

What differs between backends, and nothing else:

- who decides where and when a job runs: corral's scheduler (the backend offers a `Placement`:
  start a job on an allocation, poll for the ones that ended), or the backend itself (it offers
  a `ClusterQueue`: submit, hold, and a watcher that reports what became of the jobs);
- stopping (`cancel`, `preempt`) and finding jobs again after a restart (`recover`);
- optional capabilities, each a typed object or None: `accounting` (efficiency from the
  backend's own records), `foreign_jobs` (attach a job submitted without corral) and
  `processes` (a running job's processes to sample, an ended one's kernel usage).

`Capabilities` says the same in flags, for the API, monitor and dashboard to ask without
holding the objects. A backend is chosen by name (`corral.backends.registry`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from corral.core.jobspec.job import Job, JobProcesses, Outcome
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.spec_container import ContainerSpec


class Recovered(enum.Enum):
    RUNNING = "running"
    """Still running under its supervisor: keep tracking it."""
    ENDED = "ended"
    """Ended while the server was away: the outcome is recorded."""
    LOST = "lost"
    """Its supervisor died without recording an outcome."""
    NEVER_STARTED = "never_started"
    """The server went down between deciding to run it and launching it: queue it again."""


@dataclass(frozen=True, slots=True)
class Recovery:
    status: Recovered
    outcome: Outcome | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do, declared once; callers ask these, never `hasattr`."""

    name: str
    """What the server reports as its backend (`/health`): "local", "slurm"."""
    schedules_itself: bool = False
    """The backend decides where and when jobs run (Slurm): corral hands queued jobs over instead of
    running its own policy, and the backend's cluster checks partitions, QoS and what its nodes can run."""
    max_nodes: int = 1
    """The most nodes one job may span."""
    attach: bool = False
    """Jobs submitted without corral can be attached and tracked (`foreign_jobs`)."""
    efficiency_from_accounting: bool = False
    """A job's efficiency comes from the backend's accounting (`accounting`), not corral's samples."""
    samples_processes: bool = False
    """A running job's processes can be sampled on this machine, and an ended one's kernel usage read (`processes`)."""
    runs_jobs_here: bool = False
    """Jobs run on this machine under corral's own supervisors: as their owners (so a root server serves every
    user) and in corral's cgroups. Elsewhere (Slurm's nodes) root would submit as root for everybody."""


# -- how state comes back ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskOf:
    """An array task the backend started on its own; corral may have no record of it yet."""

    array: Job
    task_id: int
    backend_id: str
    stdout: str
    """Where the backend writes the task's logs (a corral pattern that names no job id)."""
    stderr: str | None


Target = Job | TaskOf


class Started(NamedTuple):
    """Running on a node (the backend placed it, or placed it again)."""

    job: Target
    node: str | None
    start_time: float | None


class Waiting(NamedTuple):
    """Pending at the backend, with its reason (requeued, if it was running)."""

    job: Target
    reason: str


class Ended(NamedTuple):
    """Ended with an outcome; a backend that kept its own record may say when and where it ran."""

    job: Target
    outcome: Outcome
    start_time: float | None = None
    node: str | None = None


class TaskAppeared(NamedTuple):
    """An array task the backend has started (or is finishing) that corral has no record of yet."""

    task: TaskOf


class ArrayDrained(NamedTuple):
    """An array left the backend's queue: every task has reported (it may end now)."""

    array: Job


JobUpdate = Started | Waiting | Ended | TaskAppeared | ArrayDrained


# -- the interface -------------------------------------------------------------------------------------


class Placement(Protocol):
    """Running jobs where corral's scheduler placed them (the local backend)."""

    def start(self, job: Job, allocation: Allocation) -> None:
        """Launch a job on the resources the scheduler gave it (may be called from several threads)."""

    def cancel(self, job: Job, by: str | None = None) -> None: ...

    def preempt(self, job: Job) -> None: ...

    def requeue(self, job: Job, node_failed: bool = False) -> None:
        """Stop a running job to queue it again (`scontrol requeue`; `node_failed`: its GPU failed): as a
        preemption, but SIGTERM, never its warning signal, and its stderr says DUE TO JOB REQUEUE (DUE TO NODE
        FAILURE), as Slurm's."""

    def fail(self, job: Job, reason: str) -> None:
        """End a running job FAILED at once (the server's verdict: a sharing job over its GPU memory budget),
        `reason` becoming its reason and a line of its stderr."""

    def fail_node(self, job: Job, reason: str) -> None:
        """Stop a running job whose GPU failed (`reason`: which and how): it ends NODE_FAIL, its stderr saying so
        in Slurm's words."""

    def poll(self, running: Iterable[Job]) -> list[Ended]:
        """Jobs among `running` that have ended, with their outcomes (blocking: run off the event loop)."""


class SubmitRefused(Exception):
    """The backend refused a job at submission; `message` says why in its words."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ClusterQueue(Protocol):
    """Handing jobs to a backend that schedules them itself (Slurm)."""

    default_partition: str | None
    """Where a job that names no partition goes ("" or None: the cluster's default)."""

    def submit(self, job: Job, dependency: str | None) -> str:
        """Hand a job over; returns its id at the backend.

        Args:
            dependency: the job's dependency with corral's ids replaced by the backend's.

        Raises:
            SubmitRefused: the backend refused it.
        """

    def hold(self, job: Job, held: bool) -> None:
        """Hold a job the backend has (or let it go)."""

    def cancel_task(self, array: Job, task_id: int) -> None:
        """Cancel one task of an array, which may have no record yet."""

    def cancel_waiting_tasks(self, array: Job) -> None:
        """Cancel the tasks of an array that have not started; those running go on (`scancel --state=PENDING`)."""

    def watch(self, submitted: Mapping[str, Job]) -> list[JobUpdate] | None:
        """What became of the jobs handed over (by backend id), as a read that has come back since the last
        call found it (None: none has); never blocks (the backend reads its state in a thread of its own)."""

    def nudge(self) -> None:
        """Look again soon, and a few times in quick succession (a job's end was announced)."""


class Accounting(Protocol):
    def efficiency(self, job: Job) -> dict[str, Any]:
        """The job's CPU and memory efficiency from the backend's records.

        Raises:
            Conflict: the backend has no record of it yet.
        """


class ForeignJobs(Protocol):
    def check_id(self, backend_id: str) -> None:
        """Raises InvalidRequest for what is not a job id of this backend."""

    def describe(self, backend_id: str) -> dict[str, Any]:
        """A job submitted without corral, as the fields of a submit request (and `partition`).

        Raises:
            NotFound: the backend does not know it.
        """


class ProcessView(Protocol):
    def job_processes(self, job_id: int) -> JobProcesses | None:
        """The running job's main process and cgroup, once it has started."""

    def final_usage(self, job_id: int) -> dict[str, float] | None:
        """CPU seconds and peak memory of an ended job, as the kernel counted them."""


class Terminals(Protocol):
    def terminal_socket(self, job_id: int) -> str:
        """Where an interactive job's client (srun, salloc) connects once the job runs."""


class Containers(Protocol):
    @property
    def runtime(self) -> str:
        """What runs jobs' images: `podman`, `apptainer`, `singularity`, `docker`, or `pyxis` (Slurm's plugin)."""

    def check(self, container: ContainerSpec) -> None:
        """Refuse at submit an image this runtime cannot run.

        Raises:
            InvalidRequest: naming the field.
        """


class Backend(Protocol):
    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def placement(self) -> Placement | None:
        """Set where corral schedules (`capabilities.schedules_itself` is False)."""

    @property
    def queue(self) -> ClusterQueue | None:
        """Set where the backend schedules (`capabilities.schedules_itself`)."""

    @property
    def accounting(self) -> Accounting | None: ...

    @property
    def foreign_jobs(self) -> ForeignJobs | None: ...

    @property
    def processes(self) -> ProcessView | None: ...

    @property
    def terminals(self) -> Terminals | None:
        """Set where interactive jobs (srun, salloc from a login shell) run through corral."""

    @property
    def containers(self) -> Containers | None:
        """Set where jobs may run in container images (`--container-image`)."""

    def cancel(self, job: Job, by: str | None = None) -> None:
        """Ask a running job to stop (SIGTERM, grace, SIGKILL); its outcome comes back as an update.
        `by`: who asked, for the job's log to say."""

    def preempt(self, job: Job) -> None:
        """Stop a running job to make room (warning signal, grace, SIGKILL); it ends PREEMPTED."""

    def recover(self, job: Job) -> Recovery:
        """On start-up: what became of a job that was running when the server stopped."""

    def close(self) -> None:
        """Stop the backend's own threads (a slow command must not hold up a server's stop)."""
