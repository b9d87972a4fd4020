"""Job steps: what `srun` runs inside a job, numbered from 0 in each run of the job as Slurm numbers them (a
requeued job's next run begins at 0 again).

The batch script is the job's own step (`batch`), told by the job's row; `JobStep` is each `srun` step,
which the in-job `srun` (`corral.cli.slurm.step`) opens at its start and closes at its end through the API.
Here: the step's record, and the two requests' bodies checked, each fault naming its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.units.iso_times import iso_utc
from corral.errors import InvalidRequest

RUNNING = "RUNNING"
ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", "TIMEOUT"})
"""What a step ends as (Slurm's step states)."""
MAX_STEP_NAME = 200
MAX_STEP_COMMAND = 4000
MAX_TASKS = 100_000


@dataclass(frozen=True, slots=True)
class JobStep:
    """One `srun` step of a job: while it runs `state` is RUNNING and the end's fields are None."""

    job_id: int
    step_id: int
    name: str
    ntasks: int
    command: str
    state: str
    start_time: float
    cpus: int = 0
    """The job's CPUs it holds while it runs (its tasks x CPUs per task)."""
    gpu_ids: tuple[int, ...] = ()
    """The job's GPUs it holds while it runs."""
    overlap: bool = False
    """srun --overlap: it shares what other steps hold, and holds nothing from them."""
    restart: int = 0
    """The job's restart count in the run it ran in (0: the first run; sacct -D shows the runs before the last)."""
    end_time: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    max_rss_mb: float | None = None
    """The largest resident set of any of its tasks (wait4's ru_maxrss)."""
    cpu_time_s: float | None = None
    """User and system CPU time of all its tasks together."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id, "step_id": self.step_id, "name": self.name, "ntasks": self.ntasks,
            "command": self.command, "state": self.state, "exit_code": self.exit_code, "signal": self.signal,
            "cpus": self.cpus, "gpu_ids": list(self.gpu_ids), "overlap": self.overlap, "restart": self.restart,
            "start_time": iso_utc(self.start_time), "end_time": iso_utc(self.end_time) if self.end_time else None,
            "max_rss_mb": self.max_rss_mb, "cpu_time_s": self.cpu_time_s,
        }


@dataclass(frozen=True, slots=True)
class StepStart:
    """A step's opening: its name (srun's --job-name, else its program's), tasks, command line, and what of
    the job's allocation it needs: CPUs, a number of GPUs, and whether it overlaps the other steps."""

    name: str
    ntasks: int
    command: str
    cpus: int = 0
    gpus: int = 0
    overlap: bool = False


@dataclass(frozen=True, slots=True)
class StepEnd:
    """A step's closing: how it ended and what its tasks used."""

    state: str
    exit_code: int
    signal: int | None
    max_rss_mb: float | None
    cpu_time_s: float | None


def step_start(body: Mapping[str, Any]) -> StepStart:
    """The body of `POST /api/v1/jobs/{id}/steps`, checked.

    Raises:
        InvalidRequest: naming the bad field.
    """
    _only(body, {"name", "ntasks", "command", "cpus", "gpus", "overlap"})
    name = _text(body.get("name"), "name", MAX_STEP_NAME)
    command = _text(body.get("command", name), "command", MAX_STEP_COMMAND)
    overlap = body.get("overlap", False)
    if not isinstance(overlap, bool):
        raise InvalidRequest("overlap", f"must be true or false, got {overlap!r:.40}")
    return StepStart(name=name, ntasks=_count(body.get("ntasks", 1), "ntasks", 1, MAX_TASKS), command=command,
                     cpus=_count(body.get("cpus", 0), "cpus", 0, MAX_TASKS * 1000),
                     gpus=_count(body.get("gpus", 0), "gpus", 0, 100_000), overlap=overlap)


def claim(start: StepStart, job_ref: str, job_cpus: int, job_gpus: tuple[int, ...],
          running: list[JobStep]) -> tuple[int, ...] | None:
    """The GPUs a new step gets, or None while other steps hold what it needs (it waits, as Slurm's srun
    does: "step creation temporarily disabled"). A step holds its CPUs and GPUs until it ends; one with
    `overlap` takes the job's first GPUs and waits for nothing.

    Raises:
        InvalidRequest: it needs more than the job holds at all.
    """
    if start.gpus > len(job_gpus):
        raise InvalidRequest("gpus", f"the step asks for {start.gpus} GPUs; job {job_ref} holds {len(job_gpus)}")
    if start.cpus > job_cpus:
        raise InvalidRequest("cpus", f"the step asks for {start.cpus} CPUs; job {job_ref} holds {job_cpus}")
    if start.overlap:
        return job_gpus[:start.gpus]
    holding = [step for step in running if not step.overlap]
    taken = {gpu for step in holding for gpu in step.gpu_ids}
    free = [gpu for gpu in job_gpus if gpu not in taken]
    if len(free) < start.gpus or sum(step.cpus for step in holding) + start.cpus > job_cpus:
        return None
    return tuple(free[:start.gpus])


def step_end(body: Mapping[str, Any]) -> StepEnd:
    """The body of `POST /api/v1/jobs/{id}/steps/{step}`, checked.

    Raises:
        InvalidRequest: naming the bad field.
    """
    _only(body, {"state", "exit_code", "signal", "max_rss_mb", "cpu_time_s"})
    state = body.get("state")
    if state not in ENDED_STATES:
        raise InvalidRequest("state", f"{state!r} is not a step's end state", f"one of {', '.join(sorted(ENDED_STATES))}")
    signal = body.get("signal")
    return StepEnd(
        state=str(state), exit_code=_count(body.get("exit_code", 0), "exit_code", 0, 255),
        signal=None if signal is None else _count(signal, "signal", 1, 64),
        max_rss_mb=_amount(body.get("max_rss_mb"), "max_rss_mb"), cpu_time_s=_amount(body.get("cpu_time_s"), "cpu_time_s"),
    )


def _only(body: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise InvalidRequest(unknown[0], "unknown field", f"known fields: {', '.join(sorted(known))}")


def _text(value: Any, field: str, longest: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(field, "must be a non-empty text")
    return value[:longest]


def _count(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequest(field, f"must be a whole number from {low} to {high}, got {value!r:.40}")
    return value


def _amount(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e12:
        raise InvalidRequest(field, f"must be a number of at least 0, got {value!r:.40}")
    return float(value)


def job_ids(text: str, most: int) -> list[int]:
    """`?jobs=12,13,14` as ids, each a positive job id, at most `most` of them.

    Raises:
        InvalidRequest: field `jobs`, naming what is wrong.
    """
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise InvalidRequest("jobs", "names no job", "give job ids, comma-separated: ?jobs=12,13")
    if len(parts) > most:
        raise InvalidRequest("jobs", f"names {len(parts)} jobs; at most {most} at once", "ask in several pages")
    ids = []
    for part in parts:
        if not part.isdigit() or not 0 < int(part) < 2**31:
            raise InvalidRequest("jobs", f"{part!r} is not a job id", "give job ids, comma-separated: ?jobs=12,13")
        ids.append(int(part))
    return ids
