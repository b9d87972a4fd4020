"""Request and response shapes, for validation of types and for the OpenAPI document.

Meaning (ranges, units, conflicts between fields) is checked by `corral.core.jobspec.spec`,
the same code that checks CLI and script input.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired

from corral.core.jobspec.job_fields import JobFields


class JobRequest(BaseModel):
    """A job to submit. Give `command` (argv) or `script` (a batch script's text, `#SBATCH` lines honoured)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = Field(None, examples=[["python", "train.py", "--lr", "3e-4"]])
    script: str | None = Field(None, description="A batch script; its #SBATCH lines set defaults for other fields.")
    condor: str | None = Field(None, description="An HTCondor submit description; `queue N` makes an array of N.")
    script_args: list[str] | None = None
    options: list[str] | None = Field(
        None, description="sbatch's command-line options as typed (SBATCH_* variables' options first), read as "
        "#SBATCH lines are: over the script's #SBATCH lines, under this request's own fields.",
        examples=[["-J", "prep", "--mem=4G", "--open-mode=append", "-H"]])
    script_name: str | None = Field(None, description="The script's file name; the job's default name.")
    name: str | None = None
    gpus: int | str | None = Field(None, description="A count, or TYPE:COUNT.", examples=[2, "a100:2"])
    gres: str | None = Field(None, description="Slurm style: gpu:N or gpu:TYPE:N; shard:N for N shards of one "
                             "GPU that other jobs share ([node] shards_per_gpu).")
    gpu_type: str | None = None
    gpu_mem: int | str | None = Field(None, description="Minimum memory per GPU: 40G, or MB.")
    gpu_mem_mb: int | None = None
    gpu_share: bool | str | None = Field(None, description="Share one GPU with other jobs, within gpu_mem (its "
                                         "budget); the monitor holds it to that ([node] gpu_share_over_budget).")
    cpus: int | None = Field(None, description="CPUs of each task (sbatch --cpus-per-task).")
    ntasks: int | None = Field(None, description="sbatch --ntasks: the tasks its steps (srun) start; the batch "
                               "script runs once.")
    ntasks_per_node: int | None = Field(None, description="sbatch --ntasks-per-node.")
    gpus_per_task: int | str | None = Field(None, description="sbatch --gpus-per-task: GPUs = this x tasks; each "
                                            "task of a step sees its own.")
    mem: int | str | None = Field(None, description="Host memory: 16G, or MB. Exceeding it ends the job OUT_OF_MEMORY.")
    mem_mb: int | None = None
    mem_per_cpu: int | str | None = None
    mem_per_gpu: int | str | None = None
    time: int | str | None = Field(None, description="Time limit in Slurm syntax: 90, 1:30:00, 2-00:00:00, 2h.")
    time_limit_s: int | None = None
    env: dict[str, str] | None = None
    export: str | None = Field(None, description="ALL (default), NONE, or a list such as ALL,VAR=value.")
    environment: dict[str, str] | None = Field(None, description="The submitter's environment, for --export.")
    labels: dict[str, str] | None = None
    workdir: str | None = Field(None, description="Working directory; relative to submit_dir.")
    submit_dir: str | None = Field(None, description="Where the job was submitted from (default: the server's home).")
    stdout: str | None = Field(None, description="Path pattern: %j id, %x name, %A/%a array job/task, %u user.")
    stderr: str | None = None
    nice: int | None = None
    partition: str | None = Field(None, description="Partition (default: the configured default).")
    qos: str | None = Field(None, description="Quality of service (default: the configured default).")
    account: str | None = Field(None, description="Account to charge (default: the first the user is in); "
                                "its coordinators may manage the job.")
    umask: str | int | None = Field(None, description='The submitter\'s umask, octal ("0022"); the CLI sends it.')
    dependency: str | None = Field(None, description="sbatch style: afterok:12:13, afterany:12, after:12, "
                                   "afternotok:12, singleton; joined by , (all) or ? (any).")
    kill_on_invalid_dep: bool | str | None = Field(None, description="Cancel the job if its dependency can never hold.")
    array: str | None = Field(None, description="A job array: 0-99, 1,3,5-9, 0-20:4; %4 runs at most 4 at once.")
    preemptible: bool | str | None = Field(None, description="Jobs of higher priority may preempt and requeue it.")
    requeue: bool | str | None = Field(None, description="sbatch --requeue (true) or --no-requeue (false): whether "
                                       "it waits again when its GPU fails; left out: a batch job does (Slurm's "
                                       "JobRequeue=1).")
    signal: str | None = Field(None, description="sbatch --signal: USR1@90 warns 90 s before the time limit.")
    requirements: str | None = Field(None, description="HTCondor's requirements: a ClassAd expression over the node "
                                     "and each GPU, e.g. (CUDACapability >= 8.0) && (CUDAGlobalMemoryMb >= 40000).")
    user_log: str | None = Field(None, description="An HTCondor job event log the job's execute and terminate "
                                 "events are appended to; relative to workdir; %A is the cluster.")
    hold: bool | str | None = Field(None, description="Submit it held (sbatch -H): it waits, JobHeldUser, until "
                                    "released.")
    open_mode: str | None = Field(None, description="sbatch --open-mode: append keeps what the log files hold; "
                                  "truncate (the default) empties them when the job starts.")
    comment: str | None = Field(None, description="sbatch --comment: a note shown with the job.")
    begin: str | float | None = Field(None, description="sbatch --begin: not before then (reason BeginTime); "
                                      "16:00, now+1hour, 2026-12-01T08:00 (the server's local time) or epoch seconds.")
    deadline: str | float | None = Field(None, description="sbatch --deadline: removed (state DEADLINE) once it could "
                                         "no longer end (start + time limit) by then; refused if it cannot already.")
    exclusive: bool | str | None = Field(None, description="sbatch --exclusive: it takes its whole node (every GPU, "
                                         "CPU and all memory); nothing runs beside it.")
    constraint: str | None = Field(None, description="sbatch --constraint: node features (config.toml [node] "
                                   "features), joined by & (all) or | (any): nvlink, a100&nvlink, a100|h100.")
    nodelist: str | list[str] | None = Field(None, description="sbatch --nodelist: the node to run on.")
    exclude: str | list[str] | None = Field(None, description="sbatch --exclude: nodes not to run on.")
    cpus_per_gpu: int | str | None = Field(None, description="sbatch --cpus-per-gpu: CPUs = this x GPUs.")
    mail_type: str | None = Field(None, description="sbatch --mail-type: NONE, ALL, or BEGIN, END, FAIL, REQUEUE, "
                                  "TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50, comma-separated.")
    mail_user: str | None = Field(None, description="sbatch --mail-user: where those mails go (default: the job's "
                                  "user at the server's mail domain).")
    time_min: int | str | None = Field(None, description="sbatch --time-min: the shortest limit it takes; backfill "
                                       "may start it sooner with a limit between this and its time limit.")
    priority: int | str | None = Field(None, description="sbatch --priority (admins only): the job's priority, "
                                       "fixed; 0 holds it.")
    interactive: str | None = Field(None, description="srun's or salloc's job: pty (a pseudo-terminal) or stream "
                                    "(pipes); its submitter connects to it once it runs (GET /jobs/{id}/terminal).")
    image: str | None = Field(None, description="Pyxis's --container-image: the image the job runs in (a registry "
                              "reference, docker://..., docker-archive:/path.tar, oci-archive:/path.tar or a .sif).",
                              examples=["nvcr.io#nvidia/pytorch:24.01-py3"])
    container_mounts: str | list[str] | None = Field(None, description="--container-mounts: SRC:DST[:ro],... host "
                                                     "paths seen inside (the working directory always is).")
    container_workdir: str | None = Field(None, description="--container-workdir: where it starts inside (default: "
                                          "its working directory).")
    container_env: str | list[str] | None = Field(None, description="--container-env: variables whose job value "
                                                  "wins over the image's, e.g. NCCL_DEBUG,WANDB_MODE.")
    container_mount_home: bool | str | None = Field(None, description="no: its owner's home is not mounted "
                                                    "(--no-container-mount-home); default yes.")
    container_remap_root: bool | str | None = Field(None, description="yes: its owner appears as root inside "
                                                    "(--container-remap-root); default no.")


class JobEventOut(BaseModel, extra="allow"):
    time: str
    kind: str = Field(description="submitted, started (node), preempted (by_job: the job it made room for), "
                      "requeued, cancelled (by_user), ended (state).")


# The job's fields are declared (and built) once, in `corral.core.jobspec.job_fields`; the API adds the timeline.
# (No docstring: it would become the OpenAPI schema's description.)
class JobOut(JobFields):
    events: NotRequired[Annotated[list[JobEventOut] | None, Field(
        description="The job's timeline, oldest first (one job, and history): submitted, started, preempted, "
                    "requeued, ended.")]]


class JobList(BaseModel):
    jobs: list[JobOut]
    next_cursor: int | None = Field(None, description="Pass as `after` (active) or `before` (finished) for the next page.")


class DrainOut(BaseModel):
    reason: str
    by: str
    """Who drained it."""
    at: str
    """When, in UTC (ISO 8601)."""


class OutsideOut(BaseModel):
    pid: int
    user: str
    """Who runs it (the owner of /proc/<pid>)."""
    mem_mb: int | None
    """The GPU memory it holds, where NVML says per process."""
    since: str
    """When a sample first showed it, in UTC (ISO 8601)."""


class SharingJobOut(BaseModel):
    job_id: int
    job_ref: str
    job_name: str | None
    user: str
    budget_mb: int
    """The GPU memory it may use (`--gpu-mem SIZE --gpu-share`, or its shards' worth)."""
    shards: int
    """Its `--gres=shard:N`; 0 where it asked with --gpu-share."""


class SharedGpuOut(BaseModel):
    budgeted_mb: int
    """Memory budgeted to the jobs sharing it."""
    outside_mb: int
    """Memory held outside corral, where `[node] outside_processes = "share"` lets sharing jobs beside it."""
    free_mb: int
    """What a new sharing job may still be given."""
    jobs: list[SharingJobOut]


class HealthEventOut(BaseModel):
    gpu: int
    severity: str
    """"fatal" (the GPU was drained, the jobs on it stopped) or "recorded" (shown only)."""
    what: str
    """`XID 79: GPU has fallen off the bus`, `uncorrectable ECC errors: 2 (was 0)`, `throttled: thermal (hardware)`."""
    at: str
    """When the monitor saw it, in UTC (ISO 8601)."""


class GpuHealthOut(BaseModel):
    ecc_uncorrected: int | None
    """Uncorrectable ECC errors since the driver loaded (NVML's volatile count); null where the board has no ECC."""
    throttled: list[str]
    """Thermal or power reasons its clocks are held down for now (`thermal (hardware)`, `power cap`)."""
    lost: bool
    """NVML says the GPU is lost (fallen off the bus)."""
    events: list[HealthEventOut]
    """Its latest health events (kept in memory: a fatal one lives on as its drain)."""


class GpuOut(BaseModel):
    index: int
    type: str
    mem_mb: int
    uuid: str | None
    capability: float | None = None
    """CUDA compute capability (8.0 for an A100): from NVML, or the table by type for declared GPUs."""
    device_name: str | None = None
    parent: int | None = None
    """A MIG slice's: the NVML index of the GPU it is cut from (its `type` is its profile, `3g.40gb`; its `uuid`
    `MIG-...`); null for a whole GPU."""
    job_id: int | None
    job_ref: str | None = Field(None, description="The job as `queue` names it: 12, or 12_3 for task 3 of array 12.")
    job_name: str | None
    user: str | None
    drained: DrainOut | None = None
    """Why no new job is placed on it (`corral drain`), or null."""
    drain_state: str | None = None
    """DRAINING while a job still runs on a drained GPU, DRAINED after; null when it is not drained."""
    outside: list[OutsideOut] = []
    """Processes on it that belong to no corral job (a notebook, a script run by hand), as the last sample
    found them; with `[node] outside_processes = "avoid"` (the default) no job is placed on it meanwhile."""
    shared: SharedGpuOut | None = None
    """Jobs sharing it (`--gres=shard:N`, `--gpu-share`) and its memory budgeted and free; null: not shared (a
    whole-GPU job never lands on a shared GPU)."""
    nvlink: list[int] = []
    """Its NVLink group: the GPUs all linked to each other with it, itself among them ([] without NVLink).
    A job asking for several GPUs gets one group's where it can; `--constraint=nvlink` insists."""
    features: list[str] = []
    """What --constraint can ask of it: `nvlink`, and GPU features (`[node] gpu_features`)."""
    health: GpuHealthOut | None = None
    """Its health as the monitor last read it from NVML; null where the monitor reads no GPUs."""


class NodeOut(BaseModel):
    name: str
    arch: str = "X86_64"
    """HTCondor's Arch: X86_64 or aarch64."""
    cpus: int
    cpus_alloc: int
    mem_mb: int
    mem_alloc_mb: int
    gpus: list[GpuOut]
    isolation: str = "none"
    """How jobs are held apart: "cgroup v1", "cgroup v2", or "none" (process group and session)."""
    isolation_detail: str = ""
    """What that guarantees, or why there are no cgroups."""
    state: str | None = None
    """"draining" or "drained" when the node is drained as a whole (Slurm's states), else null."""
    reason: str | None = None
    """Why it (or some GPU of it: `gpu 2: XID 79`) is drained."""
    reason_by: str | None = None
    """Who drained it (Slurm's reason user)."""
    reason_at: str | None = None
    """When, in UTC (ISO 8601)."""
    shards_per_gpu: int = 0
    """`[node] shards_per_gpu`: each GPU's shards for `--gres=shard:N` (0: none)."""
    shards_alloc: int = 0
    """Shards its running jobs hold."""
    features: list[str] = []
    """What --constraint can ask of it: its features (`[node] features`) and its GPUs' (`nvlink`, GPU features)."""
    gpu_features: dict[str, str] = {}
    """Features of some of its GPUs, and which (`fast`: `0-3`)."""
    links: list[list[str]] = []
    """How close each two of its GPUs are, as `nvidia-smi topo -m` says (NV: NVLink; PIX, PXB: over one or more
    PCIe switches; PHB: one host bridge; NODE: one NUMA node; SYS: across sockets; X: itself), rows and columns
    in the order of `gpus`; [] where unknown."""


class PriorityOut(BaseModel):
    """A pending job's priority and its factors (each in [0, 1]), like Slurm's sprio."""

    id: int
    ref: str = Field(description="The job as `queue` and `show` name it: 12, or 12_3 for task 3 of array 12.")
    name: str
    user: str
    partition: str
    priority: int
    age: float
    fairshare: float
    job_size: float
    partition_factor: float
    qos_factor: float
    nice: int
    reason: str | None


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None
    hint: str | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


class CancelBody(BaseModel):
    jobs: list[str] = Field(description="Jobs to cancel: 12, or 12_3 for task 3 of array 12 (an array: all its "
                            "tasks).", examples=[["14", "15", "21"]])
    pending_only: bool = Field(False, description="Only what has not started (scancel --state=PENDING): running jobs, "
                               "and the running tasks of the arrays named, go on.")


class CancelErrorBody(ErrorBody):
    status: int = Field(description="The HTTP status this error has on its own: 404 no such job, 403 not yours, "
                        "409 already ended.")


class CancelError(BaseModel):
    ref: str
    error: CancelErrorBody


class CancelOut(BaseModel):
    jobs: list[JobOut | CancelError] = Field(description="One entry per job named, in order: the job as it is "
                                             "afterwards (running ones stopping, or stopped), or why it was not.")
