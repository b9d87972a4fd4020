"""The job spec: frozen data built from a request (by `corral.core.jobspec.spec.build_spec`), and its limits.

Pure values: what a job runs and needs, the bounds each field is checked against, and the
fields a request may hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from corral.core.jobspec.dependency import Dependency, parse_dependency
from corral.core.jobspec.request import Request

if TYPE_CHECKING:
    from corral.core.jobspec.spec_container import ContainerSpec

MAX_NODES = 1024
MAX_GPUS = 1024
MAX_CPUS = 100_000
MAX_TIME_S = 365 * 86400
MAX_NICE = 10_000
MAX_NAME = 200
MAX_COMMENT = 1000
MAX_ENV_BYTES = 1 << 20
DEFAULT_MAX_SCRIPT_MB = 4  # Slurm's default max_script_size
MAX_SCRIPT_MB_RANGE = (1, 32)  # what [server] max_script_mb may be set to
MAX_MB = 2**31 - 1  # 2 PiB; the database stores megabytes in 32-bit integers
# A GPU type, partition, QoS or account name.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
# What a job started with --export=NONE still needs to find programs and its home.
MINIMAL_ENV_KEYS = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "SHELL", "TMPDIR")

# A container's fields (`corral.core.jobspec.spec_container`): the image and Pyxis's companions.
CONTAINER_FIELDS = frozenset({
    "image", "container_mounts", "container_workdir", "container_env", "container_mount_home",
    "container_remap_root",
})
# Every field a submit request may hold; build_spec refuses any other.
REQUEST_FIELDS = frozenset({
    "command", "script", "script_args", "name", "gpus", "gpus_per_node", "nodes", "gres", "gpu_type", "gpu_mem", "gpu_mem_mb", "cpus",
    "mem", "mem_mb", "mem_per_cpu", "mem_per_gpu", "time", "time_limit_s", "env", "export", "environment",
    "labels", "workdir", "submit_dir", "stdout", "stderr", "nice", "script_name", "partition", "qos",
    "dependency", "kill_on_invalid_dep", "array", "preemptible", "requeue", "signal", "condor", "account", "umask",
    "requirements", "user_log", "options", "hold", "open_mode", "comment", "begin", "deadline", "exclusive",
    "constraint", "nodelist", "exclude", "cpus_per_gpu", "mail_type", "mail_user", "time_min", "priority",
    "interactive", "gpu_share", "reservation",
    "ntasks", "ntasks_per_node", "gpus_per_task",
}) | CONTAINER_FIELDS

# What `corral update` may change on a pending job.
UPDATE_FIELDS = frozenset({
    "name", "gpus", "gres", "gpu_type", "gpu_mem", "cpus", "mem", "mem_mb", "mem_per_cpu", "mem_per_gpu", "time",
    "time_limit_s", "nice", "partition", "qos", "preemptible", "comment", "begin", "deadline", "constraint",
    "nodelist", "exclude", "mail_type", "mail_user", "time_min", "dependency", "priority",
})


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What to run and what it needs. Immutable once accepted."""

    name: str
    user: str
    command: tuple[str, ...]
    """argv; empty when `script` is set."""
    script: str | None
    script_args: tuple[str, ...]
    gpus: int
    gpu_type: str | None
    gpu_mem_mb: int | None
    """Each GPU must have at least this much memory."""
    cpus: int
    mem_mb: int
    """Host memory; 0 asks for none and sets no limit."""
    time_limit_s: int | None
    env: Mapping[str, str]
    inherit_env: bool
    """Start from the server's environment (True) or from `env` alone (False)."""
    labels: Mapping[str, str]
    workdir: str
    submit_dir: str
    """Where it was submitted from: the default working directory, and SLURM_SUBMIT_DIR."""
    stdout: str
    """Path pattern (`%j`, `%x`, `%A`, `%a`, ...), relative to `workdir` unless absolute."""
    stderr: str | None
    """None: stderr goes to the stdout file, as in sbatch with --output alone."""
    nice: int = 0
    partition: str | None = None
    """None until the server fills in its default."""
    qos: str | None = None
    dependency: str | None = None
    """sbatch's --dependency text, checked by corral.core.jobspec.dependency."""
    kill_on_invalid_dep: bool = False
    array: str | None = None
    """sbatch's --array text for an array job; None for a single job (and for each task)."""
    preemptible: bool = False
    """A job of higher priority may stop it (warning signal, grace period) and queue it again."""
    requeue: bool | None = None
    """sbatch's --requeue (True) or --no-requeue (False): whether it waits again when its GPU fails
    (`corral.core.monitoring.gpu_health`); None: Slurm's default (JobRequeue=1), a batch job does."""
    warn_signal: str | None = None
    """sbatch's --signal: `USR1@90` sends SIGUSR1 90 s before the time limit (and on preemption)."""
    nodes: int = 1
    """Nodes it spans; `gpus`, `cpus` and `mem_mb` are per node. More than one needs the Slurm backend."""
    account: str | None = None
    """sbatch's --account: its coordinators may manage the job (None until the server fills in the default)."""
    umask: int | None = None
    """The submitter's umask, applied to the job's files (None: the server's)."""
    requirements: str | None = None
    """A ClassAd expression (HTCondor's requirements) over the node and each GPU it gets; see corral.core.dialects.classad."""
    user_log: str | None = None
    """An HTCondor job event log to append to (submit, execute, terminate): an absolute path pattern (`%A`)."""
    open_mode: str = "truncate"
    """sbatch's --open-mode: `append` keeps what the log files hold; `truncate` empties them at the start."""
    comment: str | None = None
    """sbatch's --comment: the submitter's note, shown with the job."""
    begin_time: float | None = None
    """sbatch's --begin (epoch seconds): it waits, reason BeginTime, until then."""
    deadline: float | None = None
    """sbatch's --deadline (epoch seconds): removed (state DEADLINE) once it could not end by then."""
    exclusive: bool = False
    """sbatch's --exclusive: it holds its whole node (every GPU, CPU and all memory) while it runs."""
    features: str | None = None
    """sbatch's --constraint: node features joined by & and | (`corral.core.jobspec.features`)."""
    nodelist: tuple[str, ...] = ()
    """sbatch's --nodelist: the node it must run on."""
    exclude: tuple[str, ...] = ()
    """sbatch's --exclude: nodes it must not run on."""
    mail_type: tuple[str, ...] = ()
    """sbatch's --mail-type: the events mailed about (BEGIN, END, FAIL, REQUEUE, TIME_LIMIT_90...)."""
    mail_user: str | None = None
    """sbatch's --mail-user (None: its user, at the server's mail domain)."""
    time_min_s: int | None = None
    """sbatch's --time-min: the shortest limit it accepts, so that backfill may start it sooner with less."""
    priority: int | None = None
    """sbatch's --priority (admins): its priority, fixed, in place of the computed one."""
    reservation: str | None = None
    """sbatch's --reservation: it runs only in that reservation, on its GPUs inside its window
    (`corral.core.scheduling.reservations`)."""
    interactive: str | None = None
    """srun's or salloc's job: `pty` (a pseudo-terminal) or `stream` (pipes), relayed to the client that
    submitted it once it runs (`corral.executor.terminal`); None: a batch job."""
    ntasks: int = 1
    """sbatch's --ntasks: the tasks its steps (`srun`) start by default; the batch script itself runs once.
    `cpus` is all of them together (each task's --cpus-per-task times the tasks on its node)."""
    ntasks_per_node: int | None = None
    """sbatch's --ntasks-per-node, as given (None: not given); Slurm sets SLURM_NTASKS_PER_NODE only then."""
    gpus_per_task: int | None = None
    """sbatch's --gpus-per-task (None: not given): `gpus` is this times the tasks, and each step's task
    sees its own share of them."""
    container: ContainerSpec | None = None
    """The image it runs in (`--container-image`) and Pyxis's companions; None: on the host."""
    gpu_shards: int = 0
    """sbatch's --gres=shard:N: the shards of one GPU it shares with others (`corral.core.scheduling.sharing`); 0: none."""
    gpu_share_mb: int = 0
    """A sharing job's GPU memory budget on its one GPU (`--gpu-mem SIZE --gpu-share`, or its shards' worth,
    which the server fills in); 0: it holds whole GPUs."""
    parent: int | None = None
    """The job it is a rerun of (`corral resubmit`, the dashboard's "Run again"); set by the server, never by a
    request."""
    hold: bool = field(default=False, compare=False)
    """Submitted held (sbatch -H): the job's `held` starts so; not stored, since the job's `held` is."""
    warnings: tuple[str, ...] = field(default=(), compare=False)
    parsed_dependency: Dependency | None = field(default=None, compare=False, repr=False)
    """`dependency`, parsed: once at submit, carried through every `replace`, read by admission and the queue."""

    def __post_init__(self) -> None:
        parsed = self.parsed_dependency
        if self.dependency is None and parsed is not None:
            object.__setattr__(self, "parsed_dependency", None)
        elif self.dependency is not None and (parsed is None or parsed.text != self.dependency):
            object.__setattr__(self, "parsed_dependency", parse_dependency(self.dependency))  # as read from the store

    @property
    def tasks_per_node(self) -> int:
        """The most tasks on one of its nodes."""
        return min(self.ntasks_per_node or self.ntasks, -(-self.ntasks // self.nodes))

    @property
    def cpus_per_task(self) -> int:
        """Each task's CPUs (Slurm's --cpus-per-task): its node's CPUs shared among the tasks there."""
        return max(1, self.cpus // self.tasks_per_node)

    @property
    def request(self) -> Request:
        """The resources it needs, as the scheduler sees them."""
        return Request(self.gpus, self.gpu_type, self.gpu_mem_mb, self.cpus, self.mem_mb, self.requirements,
                       self.exclusive, self.features, self.nodelist, self.exclude, self.gpu_share_mb)
