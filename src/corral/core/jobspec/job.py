"""A job: its frozen spec plus the state the server tracks for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from corral.core.jobspec.arrays import MAX_REF, abbreviate_ranges, throttle_of
from corral.core.jobspec.job_fields import JobFields, job_fields
from corral.core.jobspec.paths import expand_pattern
from corral.core.jobspec.request import Request
from corral.core.jobspec.spec import JobSpec
from corral.core.jobspec.states import JobState


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a job ended, as its supervisor (or the backend) recorded it."""

    state: str
    exit_code: int | None
    signal: int | None
    end_time: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class JobProcesses:
    """Where a running local job's processes are: its main process, and its cgroup's process list (a backend finds
    them, the monitor samples them)."""

    pid: int
    """The main process, also its session id."""
    procs_file: str | None = None
    """The job's `cgroup.procs`: every process it started, however detached; None without cgroups."""


@dataclass(slots=True)
class Job:
    id: int
    spec: JobSpec
    state: JobState
    submit_time: float
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    start_time: float | None = None
    end_time: float | None = None
    node: str | None = None
    gpu_ids: tuple[int, ...] | None = None
    held: bool = False
    restarts: int = 0
    """How many times it was preempted (or lost its node) and queued again."""
    array_job_id: int | None = None
    """For a task of an array: the array job's id (and `array_task_id` its number)."""
    array_task_id: int | None = None
    array_pending: list[int] = field(default_factory=list)
    """For an array job: the task numbers not started yet."""
    estimated_start: float | None = None
    """For a pending job with a reservation: when the scheduler expects it to start (not stored)."""
    priority: int | None = None
    """Its priority, as Slurm keeps it: the latest pass's while it waits (0 while held), the one it started with
    once it runs (Slurm recomputes only pending jobs'); None: not known. Not stored: a job read back from the
    database has its start's from its started event, where that is read (`corral.core.jobspec.events.started_priority`)."""
    backend_id: str | None = None
    """The id its backend gave it (Slurm's job id, `123` or `123_4`); None for local jobs."""

    @property
    def request(self) -> Request:
        return self.spec.request

    def log_path(self, stream: str) -> str:
        """The file a stream goes to (`stdout` or `stderr`), with its pattern filled in."""
        pattern = self.spec.stdout if stream == "stdout" or self.spec.stderr is None else self.spec.stderr
        s = self.spec
        return expand_pattern(
            pattern, job_id=self.id, name=s.name, user=s.user, node=self.node or "", workdir=s.workdir,
            array_job_id=self.array_job_id, array_task_id=self.array_task_id,
        )

    def user_log_path(self) -> str | None:
        """The HTCondor event log this job appends to (the submit file's `log`), or None."""
        s = self.spec
        if s.user_log is None:
            return None
        return expand_pattern(
            s.user_log, job_id=self.id, name=s.name, user=s.user, node=self.node or "", workdir=s.workdir,
            array_job_id=self.array_job_id, array_task_id=self.array_task_id,
        )

    @property
    def is_array(self) -> bool:
        """An array job: the record of its tasks, never run itself."""
        return self.spec.array is not None and self.array_job_id is None

    @property
    def ref(self) -> str:
        """How people name it: `12`, a task `12_3`, an array's waiting tasks `12_[4-99%4]`, at most 64
        characters (`12_[0,2,4,...+99997]`: an array of 100,000 listed tasks is one row of the queue)."""
        if self.array_job_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        if self.is_array and self.array_pending:
            throttle = throttle_of(self.spec.array or "")
            suffix = f"%{throttle}]" if throttle else "]"
            head = f"{self.id}_["
            return head + abbreviate_ranges(self.array_pending, MAX_REF - len(head) - len(suffix)) + suffix
        return str(self.id)

    def to_dict(self, detail: bool = True, eta_end: float | None = None) -> JobFields:
        """The job as the API, the CLI's --json and the client show it (see `corral.core.jobspec.job_fields`);
        `eta_end`: its tracked run's ETA, where the monitor has one (`corral.core.jobspec.expected_end`)."""
        return job_fields(self, detail, eta_end)
