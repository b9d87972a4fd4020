"""The shapes of the tools' structured results, published to MCP clients as output schemas."""

from __future__ import annotations

from typing import Any

from typing_extensions import NotRequired, TypedDict


class LogTail(TypedDict):
    """The end of one log file, bounded."""

    path: str | None
    lines: list[str]
    omitted_lines: int
    """Earlier lines of the tail left out to stay within the byte budget."""
    cut_lines: int
    """Lines shortened to the per-line limit (each ends with a marker)."""


# Not a copy of the API's job JSON (`corral.core.jobspec.job_fields.JobFields`, declared and built once): views.job_view
# makes this from that JSON, renamed and formatted for an agent (time_limit, gpu_memory, memory as text), bounded,
# with what an agent needs added (checkpoint_dir, next_step). Which job fields agents see is chosen here.
# (The docstrings are the tools' published output schema: notes for corral's developers stay comments.)
class JobView(TypedDict):
    """A job as view_gpu_job and create_gpu_job describe it."""

    job_id: int | str
    """The id to pass back: as the agent gave it, else 12, or "12_3" for task 3 of array 12."""
    ref: str
    """How corral names the job: "12", "12_3", or "12_[4-9]" for an array's waiting tasks."""
    name: str
    user: str
    state: str
    reason: str | None
    exit_code: int | None
    signal: int | None
    submit_time: str | None
    start_time: str | None
    end_time: str | None
    estimated_start: str | None
    expected_end: str | None
    """When it should end (ISO 8601, UTC): while it runs, its start plus its time limit, or its tracked run's ETA
    where that is sooner; while it waits, its estimated start plus its time limit. None when ended or unknown."""
    expected_end_source: str | None
    """"time_limit" (the latest it can run) or "eta" (its tracked run's estimate from its recent pace)."""
    time_limit: str
    gpus: int
    gpu_type: str | None
    gpu_memory: str
    gpu_ids: list[int]
    cpus: int
    memory: str
    node: str | None
    working_directory: str
    image: str | None
    """The container image it runs in; None: directly on the machine."""
    stdout_path: str | None
    stderr_path: str | None
    checkpoint_dir: str | None
    restarts: int
    labels: dict[str, str]
    next_step: str
    warnings: NotRequired[list[str]]
    stdout_tail: NotRequired[LogTail]
    stderr_tail: NotRequired[LogTail]


class StopResult(TypedDict):
    job_id: int | str
    ref: str
    state: str
    already_ended: bool
    message: str


# views.workload_view makes this from the API's job JSON too, in the seed's camelCase names.
class Workload(TypedDict):
    """A job in the seed's workload shape."""

    workloadId: str
    name: str
    image: str | None
    """The container image it runs in; None: directly on the machine (or in a Slurm batch script's srun)."""
    state: str
    reason: str | None
    exitCode: int | None
    submitTime: str | None
    startTime: str | None
    endTime: str | None
    gpus: int
    gpuType: str | None
    gpuMemoryMb: int | None
    labels: dict[str, str]
    preemptible: bool
    maxRuntimeSeconds: int | None
    logs: dict[str, str | None]
    checkpointDir: str | None
    nextStep: str
    warnings: NotRequired[list[str]]


class WorkloadLogs(TypedDict):
    workloadId: str
    stream: str
    state: str
    lines: list[str]
    nextOffset: int
    """Pass as `since` to read on from here."""
    omittedLines: int
    cutLines: int
    complete: bool
    """The job has ended and everything up to nextOffset has been read."""


class MetricSeries(TypedDict):
    workloadId: str
    metric: str
    source: str
    """samples (system metrics corral measured) or run (a metric the job's run tracked)."""
    count: int
    """Points the range held before thinning."""
    points: list[list[float | str | None]]
    """[epoch_seconds, value] in time order; NaN and infinities as "NaN", "Infinity", "-Infinity"."""
    summary: dict[str, float | int | str | None]
    """first, last (as they are), last_finite, min, max, mean (finite values), nonfinite (a count)."""


class AlertRule(TypedDict):
    name: str
    condition: str
    severity: str
    scope: str
    message: str
    channels: list[str]
    note: str


class GpuList(TypedDict):
    total: int
    free: int
    busy: int
    by_type: list[dict[str, Any]]
    gpus: list[dict[str, Any]]
    truncated: bool
    note: str


class QueueView(TypedDict):
    total: int
    running: int
    pending: int
    jobs: list[dict[str, Any]]
    truncated: bool
    """Fewer jobs shown than total: past `limit`, or left out to keep the answer short."""


class RunList(TypedDict):
    runs: list[dict[str, Any]]
    total: int
    """Runs that matched, counted up to `limit`; `more` says whether others match past it."""
    more: bool
    truncated: bool
    """Not every matching run is shown: past `limit`, or left out to keep the answer short."""


class RunMetrics(TypedDict):
    run: str
    series: list[dict[str, Any]]
    available_keys: list[str]


class ForecastBlocker(TypedDict):
    """A job that holds what the forecast job needs until it starts."""

    job_id: int
    user: str
    kind: str
    """running; starting (starts now, ahead of it); reserved (a waiting job ahead); waiting (ahead, with no start)."""
    gpu_ids: list[int]
    cpus: int
    """The CPUs it holds on its node."""
    until: str | None
    """When it gives them back (its time limit's end); None: no time limit, or not known."""


class ForecastAlternative(TypedDict):
    """The same job changed one way, where that starts it sooner: pass these arguments to create_gpu_job."""

    change: str
    """time_limit (shorter) or gpus (fewer)."""
    create_gpu_job_arguments: dict[str, Any]
    starts: str
    """"now", or the time (ISO 8601 UTC)."""
    starts_in: str


class ForecastView(TypedDict):
    """When a job would start if created now (nothing is created), and why."""

    would_start: str | None
    """ISO 8601 UTC; None: never, as things stand (reason says why)."""
    starts_in: str | None
    """"now", or how long from now (H:MM:SS)."""
    node: str | None
    gpu_ids: list[int]
    reason: str
    code: str
    """Slurm's reason it would wait (Resources, Priority, ...), Unsatisfiable, or None (starts now)."""
    waits_for: list[str]
    """What decides a later start: of gpus, cpus and memory, those too few until then ([] when it starts now)."""
    jobs_ahead: int
    time_limit: str
    blockers: list[ForecastBlocker]
    alternatives: list[ForecastAlternative]
    notes: list[str]
    next_step: str
