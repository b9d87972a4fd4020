"""A job as corral shows it outward: the fields of the REST API's job JSON, declared once and built once.

`JobFields` is the declaration: `corral.api.schemas.JobOut` extends it for the OpenAPI document, and the
MCP server's views (`corral.mcp.views`) are made from this JSON. `job_fields` is the one builder; mypy
holds it to the declaration (a key missing or extra is an error), so a new field is one edit here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typing_extensions import NotRequired, TypedDict

from corral.core.jobspec.arrays import MAX_REF, abbreviate_array
from corral.core.jobspec.checkpointing import recommended_checkpoint_interval_s
from corral.core.jobspec.expected_end import Source, expected_end
from corral.core.units.iso_times import iso_utc
from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.core.jobspec.spec_container import ContainerSpec


class ContainerFields(TypedDict):
    """The image a job runs in and Pyxis's companions, as `corral.core.jobspec.spec_container.ContainerSpec` holds them."""

    image: str
    mounts: list[str]
    """SRC:DST[:ro] each."""
    workdir: str | None
    env: list[str]
    mount_home: bool
    remap_root: bool


class JobFields(TypedDict):
    """A job as the API, the CLI's --json and the client show it."""

    id: int
    ref: str
    """How people name it: 12, 12_3 for task 3 of array 12, or 12_[4-9] for an array's waiting tasks."""
    array_job_id: int | None
    array_task_id: int | None
    array: str | None
    name: str
    user: str
    state: str
    reason: str | None
    exit_code: int | None
    signal: int | None
    command: list[str]
    script_args: list[str]
    gpus: int
    nodes: int
    ntasks: int
    """sbatch's --ntasks: the tasks a step (`srun`) starts by default."""
    ntasks_per_node: int | None
    gpus_per_task: int | None
    gpu_type: str | None
    gpu_mem_mb: int | None
    gpu_shards: int
    """sbatch's --gres=shard:N: shards of one GPU that it shares with others; 0: none."""
    gpu_share_mb: int
    """A sharing job's GPU memory budget on its one GPU (`--gpu-mem SIZE --gpu-share`, or its shards'); 0: whole GPUs."""
    requirements: str | None
    user_log: str | None
    gpu_ids: list[int]
    cpus: int
    mem_mb: int
    time_limit_s: int | None
    checkpoint_interval_s: int
    nice: int
    partition: str | None
    account: str | None
    qos: str | None
    held: bool
    preemptible: bool
    requeue: bool | None
    warn_signal: str | None
    restarts: int
    backend_id: str | None
    """The id its backend gave it (Slurm's job id); None for local jobs."""
    dependency: str | None
    node: str | None
    workdir: str
    submit_dir: str
    labels: dict[str, str]
    comment: str | None
    """sbatch's --comment."""
    begin_time: str | None
    """sbatch's --begin: not started before then (ISO 8601, UTC)."""
    deadline: str | None
    """sbatch's --deadline (ISO 8601, UTC)."""
    exclusive: bool
    """sbatch's --exclusive: it holds its whole node (Slurm's OverSubscribe=NO)."""
    features: str | None
    """sbatch's --constraint over node features."""
    nodelist: list[str]
    """sbatch's --nodelist (Slurm's ReqNodeList)."""
    exclude: list[str]
    """sbatch's --exclude (Slurm's ExcNodeList)."""
    mail_type: list[str]
    """sbatch's --mail-type, ALL spelled out; empty: no mail."""
    mail_user: str | None
    """sbatch's --mail-user (None: the job's user at the server's mail domain)."""
    time_min_s: int | None
    """sbatch's --time-min in seconds."""
    fixed_priority: int | None
    """sbatch's --priority, set by an admin; None: computed."""
    priority: int | None
    """Its priority: the one `sprio` and `GET /api/v1/priority` give while it waits (0 held), the one it started
    with once it runs; None: not known (a job waiting for its dependency, or one started before a restart)."""
    reservation: str | None
    """sbatch's --reservation: the reservation it runs in; None: none."""
    interactive: str | None
    """srun's or salloc's job: pty or stream; None for a batch job."""
    image: str | None
    """The container image it runs in (`--container-image`); None: on the host."""
    container: ContainerFields | None
    """That image with its mounts, working directory and settings; None: on the host."""
    parent: int | None
    """The job this one runs again (`corral resubmit`, "Run again"); None for a first submit."""
    submit_time: str
    start_time: str | None
    estimated_start: str | None
    end_time: str | None
    expected_end: str | None
    """When a running job should end: its start plus its time limit, or its tracked run's ETA where sooner; for a
    pending job with an estimated start, that plus its limit. None once it ended, or with neither limit nor ETA."""
    expected_end_source: Source | None
    """What `expected_end` comes from: "time_limit" or "eta" (the tracked run's estimate; None with no time)."""
    stdout_path: str
    stderr_path: str
    script: NotRequired[str | None]
    """The batch script's text: shown for one job (not in listings), to those who may manage it."""
    warnings: NotRequired[list[str]]
    """What submitting it noted (ignored or adjusted options): in the answer to a submit; for one job
    (`GET /api/v1/jobs/{id}`), what still holds of it: mail it asks for that this server will not send."""


def job_fields(job: Job, detail: bool = True, eta_end: float | None = None) -> JobFields:
    """The job's outward fields.

    Listings leave out the script's text (`detail=False`) and shorten an array's task list; the
    environment is never shown, since it may hold secrets and the queue is visible to all.
    `eta_end`: when the job's tracked run expects to finish, where the monitor knows (`expected_end`).
    """
    s = job.spec
    end = expected_end(job, eta_end)
    fields: JobFields = {
        "id": job.id,
        "ref": job.ref,
        "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id,
        "array": s.array if detail or s.array is None else abbreviate_array(s.array, MAX_REF),
        "name": s.name,
        "user": s.user,
        "state": job.state.value,
        "reason": job.reason,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "command": list(s.command),
        "script_args": list(s.script_args),
        "gpus": s.gpus,
        "nodes": s.nodes,
        "ntasks": s.ntasks,
        "ntasks_per_node": s.ntasks_per_node,
        "gpus_per_task": s.gpus_per_task,
        "gpu_type": s.gpu_type,
        "gpu_mem_mb": s.gpu_mem_mb,
        "gpu_shards": s.gpu_shards,
        "gpu_share_mb": s.gpu_share_mb,
        "requirements": s.requirements,
        "user_log": s.user_log,
        "gpu_ids": list(job.gpu_ids) if job.gpu_ids is not None else [],
        "cpus": s.cpus,
        "mem_mb": s.mem_mb,
        "time_limit_s": s.time_limit_s,
        "checkpoint_interval_s": recommended_checkpoint_interval_s(s.time_limit_s),
        "nice": s.nice,
        "partition": s.partition,
        "account": s.account,
        "qos": s.qos,
        "held": job.held,
        "preemptible": s.preemptible,
        "requeue": s.requeue,
        "warn_signal": s.warn_signal,
        "restarts": job.restarts,
        "backend_id": job.backend_id,
        "dependency": s.dependency,
        "node": job.node,
        "workdir": s.workdir,
        "submit_dir": s.submit_dir,
        "labels": dict(s.labels),
        "comment": s.comment,
        "begin_time": iso_utc(s.begin_time, milliseconds=True),
        "deadline": iso_utc(s.deadline, milliseconds=True),
        "exclusive": s.exclusive,
        "features": s.features,
        "nodelist": list(s.nodelist),
        "exclude": list(s.exclude),
        "mail_type": list(s.mail_type),
        "mail_user": s.mail_user,
        "time_min_s": s.time_min_s,
        "fixed_priority": s.priority,
        "priority": job.priority,
        "reservation": s.reservation,
        "interactive": s.interactive,
        "image": s.container.image if s.container is not None else None,
        "container": container_fields(s.container),
        "parent": s.parent,
        "submit_time": iso_utc(job.submit_time, milliseconds=True),
        "start_time": iso_utc(job.start_time, milliseconds=True),
        "estimated_start": (iso_utc(job.estimated_start, milliseconds=True)
                            if job.state is JobState.PENDING else None),
        "end_time": iso_utc(job.end_time, milliseconds=True),
        "expected_end": None if end is None else iso_utc(end.time, milliseconds=True),
        "expected_end_source": None if end is None else end.source,
        "stdout_path": job.log_path("stdout"),
        "stderr_path": job.log_path("stderr"),
    }
    if detail:
        fields["script"] = s.script
    return fields


def container_fields(container: ContainerSpec | None) -> ContainerFields | None:
    if container is None:
        return None
    return {"image": container.image, "mounts": [m.text() for m in container.mounts], "workdir": container.workdir,
            "env": list(container.env), "mount_home": container.mount_home, "remap_root": container.remap_root}
