"""`srun` inside a corral job: a step of the job, its tasks on the job's own allocation.

    srun python train.py                                 the batch script's launch line (the job's --ntasks tasks)
    srun -n 2 -l --gpus-per-task=1 python check.py       two tasks, a GPU each, their lines labelled `0: `
    srun --unbuffered --output=%j_%t.out python -u ...   what submitit writes

Each task gets Slurm's step variables (SLURM_STEP_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, ...) and,
with --gpus-per-task, its own share of the job's GPUs in CUDA_VISIBLE_DEVICES (never one outside the job's:
SLURM_JOB_GPUS). The defaults are the job's (SLURM_NTASKS, SLURM_CPUS_PER_TASK, SLURM_GPUS_PER_TASK), as
Slurm's srun reads them. The step is recorded on the server (`sacct` shows `12.0`): opened before its tasks
start, closed with their worst exit code, peak memory and CPU time. Its exit status is its worst task's.
Outside a job, `srun` starts an interactive job through the queue instead (`corral.cli.slurm.srun`).
"""

from __future__ import annotations

import os
import sys
import time

from corral.cli.slurm.argv import Option, parse
from corral.cli.slurm.command import Refused, answered, server
from corral.cli.slurm.step_tasks import Task, run_tasks
from corral.errors import CorralError

BUSY = "Requested nodes are busy"  # how the server refuses a step that must wait (corral.server.steps.BUSY)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

OPTIONS = [
    Option("output", "o", value=True), Option("error", "e", value=True), Option("input", "i", value=True),
    Option("unbuffered", "u"), Option("ntasks", "n", value=True), Option("nodes", "N", value=True),
    Option("ntasks-per-node", value=True), Option("cpus-per-task", "c", value=True), Option("job-name", "J", value=True),
    Option("label", "l"), Option("quiet", "Q"), Option("verbose", "v"), Option("chdir", "D", value=True),
    Option("export", value=True), Option("gres", value=True), Option("gpus", "G", value=True),
    Option("gpus-per-task", value=True), Option("gpus-per-node", value=True), Option("mem", value=True),
    Option("cpu-bind", value=True), Option("gpu-bind", value=True), Option("mpi", value=True),
    Option("kill-on-bad-exit", "K", value=True, optional=True), Option("overcommit", "O"),
    Option("wait", "W", value=True), Option("exclusive", value=True, optional=True), Option("overlap"),
    Option("open-mode", value=True), Option("distribution", "m", value=True), Option("help", "h"),
    Option("usage"), Option("version", "V"), Option("pty"), Option("signal", value=True),
    # Pyxis's: a step may only name its job's own container (`_check_container`)
    Option("container-image", value=True), Option("container-mounts", value=True),
    Option("container-workdir", value=True), Option("container-env", value=True),
    Option("container-name", value=True), Option("no-container-mount-home"), Option("container-remap-root"),
]
_CONTAINER = ("container_image", "container_mounts", "container_workdir", "container_env", "container_name",
              "no_container_mount_home", "container_remap_root")
USAGE = """Usage: srun [OPTIONS] command [args...]   (inside a corral job: a step on the job's allocation)
  -n, --ntasks=N            tasks [default: the job's]    -c, --cpus-per-task=N   CPUs of each task
  --gpus-per-task=N         GPUs of each task             -G, --gpus=N            GPUs of the step, shared
  --cpu-bind=none|cores|map_cpu:LIST                       --gpu-bind=none|closest|map_gpu:LIST
  -l, --label               prefix lines with the task    -K, --kill-on-bad-exit  stop all when one fails
  --export=ALL|NONE|VARS    -o/-e/-i FILE (%j %t %s %N)   -D, --chdir=DIR         -u, --unbuffered
"""


def main(argv: Sequence[str]) -> int:
    given, command = parse(argv, OPTIONS, stop_at_first_operand=True)
    if answered(given, USAGE):
        return 0
    if given.get("pty"):
        raise Refused("--pty is not supported inside a job's step by corral yet")
    if not command:
        raise Refused("No command given to execute.")
    if given.get("signal") is not None:
        _check_signal(str(given["signal"]))
    environ = os.environ
    job_id = environ.get("CORRAL_JOB_ID", "")
    if any(key in given for key in _CONTAINER):
        _check_container(given, job_id)
    ntasks = _count(given, "ntasks", None)
    per_node = _count(given, "ntasks_per_node", None)
    nodes = str(given.get("nodes") or "1").partition("-")[0]
    if nodes != "1":
        raise Refused(f"--nodes={given['nodes']}: job {job_id} holds one node; a step runs on it (use -N 1)")
    if ntasks is None:
        ntasks = per_node or _number(environ.get("SLURM_NTASKS"), 1)
    cpus_per_task = _count(given, "cpus_per_task", None) or _number(environ.get("SLURM_CPUS_PER_TASK"), 1)
    job_cpus = _number(environ.get("SLURM_JOB_CPUS_PER_NODE") or environ.get("SLURM_CPUS_ON_NODE"), 0)
    if job_cpus and ntasks * cpus_per_task > job_cpus and not given.get("overcommit"):
        raise Refused(f"Unable to create step for job {job_id}: More processors requested than permitted "
                      f"({ntasks} tasks x {cpus_per_task} CPUs; the job holds {job_cpus})")
    wanted = gpu_request(given, environ, ntasks, job_id)
    cpus = task_cpus(str(given.get("cpu_bind") or "none"), ntasks, cpus_per_task)
    name = str(given.get("job_name") or os.path.basename(command[0]))
    kill_on_bad_exit = given.get("kill_on_bad_exit") not in (None, "0")
    append = (str(given.get("open_mode") or environ.get("SLURM_OPEN_MODE") or "t")).startswith("a")
    recorder = StepRecord(job_id, name, ntasks, command)
    step_id, granted = recorder.open(ntasks * cpus_per_task, wanted, bool(given.get("overlap")))
    gpus = share_gpus(wanted, granted, ntasks)
    base = step_environment(given, environ, step_id, ntasks, cpus_per_task, gpus)
    tasks = []
    for rank in range(ntasks):
        env = dict(base, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_GTIDS=",".join(map(str, range(ntasks))))
        if gpus.per_task is not None:
            own = ",".join(gpus.per_task[rank])
            visible = cuda_names(gpus.per_task[rank], environ)
            env.update(CUDA_VISIBLE_DEVICES=visible, GPU_DEVICE_ORDINAL=visible, SLURM_STEP_GPUS=own,
                       SLURM_GPUS_ON_NODE=str(len(gpus.per_task[rank])))
        outputs = {fd: _expand(str(given[key]), step_id, rank) for fd, key in ((1, "output"), (2, "error")) if given.get(key)}
        if 1 in outputs and 2 not in outputs:
            outputs[2] = outputs[1]  # as Slurm: --output alone takes both streams
        source = _expand(str(given["input"]), step_id, rank) if given.get("input") else None
        tasks.append(Task(rank, env, outputs, source, cpus[rank] if cpus else None))
    node = environ.get("SLURMD_NODENAME") or environ.get("SLURM_JOB_NODELIST") or "localhost"
    outcome = run_tasks(command, tasks, label=bool(given.get("label")), kill_on_bad_exit=kill_on_bad_exit,
                        append=append, chdir=str(given["chdir"]) if given.get("chdir") else None, node=node,
                        step_ref=f"{environ.get('SLURM_JOB_ID', job_id)}.{step_id}")
    recorder.close(outcome.state, outcome.exit_code, outcome.signal, outcome.max_rss_mb, outcome.cpu_time_s)
    return outcome.status


def _check_signal(text: str) -> None:
    """srun's --signal=[R:]SIG[@TIME], checked as Slurm's srun checks it and then, inside a job, unused: it
    applies to job allocations (a step gets the job's own --signal; sbatch's B: is not srun's).

    Raises:
        Refused: Slurm's words for a specification it cannot read.
    """
    import signal

    body = text[2:] if text[:2].upper() == "R:" else text
    name, at, when = body.partition("@")
    upper = name.upper()
    number = int(name) if name.isascii() and name.isdigit() else getattr(
        signal, upper if upper.startswith("SIG") else f"SIG{upper}", 0)
    late = at and not (when.isascii() and when.isdigit() and int(when) <= 0xffff)
    if not isinstance(number, int) or not 1 <= number <= 0xffff or late:
        raise Refused("Invalid --signal specification")


def _check_container(given: dict[str, object], job_id: str) -> None:
    """Accept a step's Pyxis options only where they name what its job already runs in.

    A step runs where its job does (in the job's container, or on the host): a step in an image of its
    own is not supported. A Pyxis script that repeats the job's image on its srun line still runs; a
    companion option left out is the job's.

    Raises:
        Refused: the step asks for another image, other mounts or settings, or a named container.
    """
    if given.get("container_name"):
        raise Refused(f"--container-name={given['container_name']}: named containers are not supported by corral "
                      "(remove it)")
    try:
        job = server().ask("GET", f"/api/v1/jobs/{job_id}")
    except (CorralError, OSError) as exc:
        raise Refused(f"--container-image: cannot read job {job_id}'s container to compare ({exc})") from None
    own = job.get("container")
    fix = ("steps in their own images are not supported by corral: submit the job with sbatch --container-image "
           "(its steps run in it), or drop the option from srun")
    if not own or not given.get("container_image"):
        raise Refused(f"--container-image: job {job_id} runs "
                      + (f"in {own['image']}" if own else "on the host") + f"; {fix}")
    from corral.core.jobspec.spec_container import container_spec
    from corral.errors import InvalidRequest

    fields = {"image": given["container_image"], "container_mounts": given.get("container_mounts"),
              "container_workdir": given.get("container_workdir"), "container_env": given.get("container_env"),
              "container_mount_home": "no" if given.get("no_container_mount_home") else None,
              "container_remap_root": "yes" if given.get("container_remap_root") else None}
    try:
        asked = container_spec({k: v for k, v in fields.items() if v is not None}, os.getcwd())
    except InvalidRequest as exc:
        raise Refused(exc.message) from None
    assert asked is not None
    mine = asked.to_dict()
    # each setting the step names, with its option (an option left out is the job's)
    named = {"image": "--container-image", "mounts": "--container-mounts", "workdir": "--container-workdir",
             "env": "--container-env", "mount_home": "--no-container-mount-home",
             "remap_root": "--container-remap-root"}
    for key, option in named.items():
        if given.get(option[2:].replace("-", "_")) and mine[key] != own.get(key):
            raise Refused(f"{option}: this step asks for {mine[key]!r}, job {job_id}'s container has "
                          f"{own.get(key)!r}; {fix}")


class StepGpus:
    """The step's GPUs (the job's global ids) and, when each task has its own, each task's."""

    __slots__ = ("step", "per_task")

    def __init__(self, step: list[str], per_task: list[list[str]] | None) -> None:
        self.step = step
        self.per_task = per_task


class GpuRequest:
    """What of the job's GPUs a step asks for: how many, each task's (None: shared by all), and the binding."""

    __slots__ = ("held", "count", "each", "bind", "mapped")

    def __init__(self, held: list[str], count: int, each: int | None, bind: str, mapped: list[int]) -> None:
        self.held = held
        self.count = count
        self.each = each
        self.bind = bind
        self.mapped = mapped


def gpu_request(given: dict[str, object], environ: Mapping[str, str], ntasks: int, job_id: str) -> GpuRequest:
    """The step's GPUs, checked against the job's (SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES): --gpus-per-task
    (or the job's SLURM_GPUS_PER_TASK) gives each task its own; -G/--gres gives the step N, shared; neither
    gives it all of the job's, shared. --gpu-bind: none shares them; closest (the default) keeps each task's
    own; map_gpu:I,J,... gives task k the step's GPU number list[k] (reused round).

    Raises:
        Refused: more GPUs than the job holds, or a binding corral cannot make.
    """
    held = [gpu for gpu in (environ.get("SLURM_JOB_GPUS") or environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")
            if gpu.strip()]
    holding = f"job {job_id} holds {len(held)} GPU(s)" + (f" ({','.join(held)})" if held else "")
    per_task_text = given.get("gpus_per_task")
    step_text = given.get("gpus") or given.get("gres") or given.get("gpus_per_node")
    if str(step_text).startswith("shard"):  # shards of the job's one GPU: the step shares that GPU
        step_text = None
    if per_task_text is None and step_text is None:
        per_task_text = environ.get("SLURM_GPUS_PER_TASK")
    each = None
    if per_task_text is not None and step_text is None:
        each = _gpu_count(str(per_task_text), "--gpus-per-task")
        count = each * ntasks
        if count > len(held):
            raise Refused(f"--gpus-per-task={each} with {ntasks} tasks asks for {count} GPUs; {holding}")
    else:
        count = len(held) if step_text is None else _gpu_count(str(step_text), "--gpus")
        if count > len(held):
            raise Refused(f"--gpus={count} asks for more GPUs than the job holds: {holding}")
    bind = str(given.get("gpu_bind") or "closest")
    for prefix in ("verbose,", "verbose"):
        if bind.startswith(prefix):
            bind = bind[len(prefix):] or "closest"
    mapped: list[int] = []
    if bind.startswith("map_gpu:") and count:
        mapped = [_number(item, -1) for item in bind[len("map_gpu:"):].split(",")]
        if not mapped or any(not 0 <= index < count for index in mapped):
            raise Refused(f"--gpu-bind={bind}: give indexes of the step's GPUs, 0 to {count - 1}")
    elif bind not in ("closest", "single:1", "none") and not bind.startswith("map_gpu:"):
        raise Refused(f"--gpu-bind={bind} is not supported by corral (use none, closest or map_gpu:LIST)")
    return GpuRequest(held, count, each, bind, mapped)


def share_gpus(request: GpuRequest, granted: list[str], ntasks: int) -> StepGpus:
    """The step's GPUs (those the server granted it) shared out among its tasks as `request` binds them."""
    each = request.each
    shares = None if each is None else [granted[rank * each:(rank + 1) * each] for rank in range(ntasks)]
    if request.mapped and granted:
        shares = [[granted[request.mapped[rank % len(request.mapped)]]] for rank in range(ntasks)]
    elif request.bind == "none" and shares is not None:
        shares = [granted] * ntasks
    return StepGpus(granted, shares)


def cuda_names(gpus: Sequence[str], environ: Mapping[str, str]) -> str:
    """CUDA_VISIBLE_DEVICES for some of the job's GPUs (corral's indexes): as the job's own names them, which for
    a MIG slice is its `MIG-<uuid>` (the job's CUDA_VISIBLE_DEVICES lists its GPUs in SLURM_JOB_GPUS's order)."""
    held = [gpu.strip() for gpu in environ.get("SLURM_JOB_GPUS", "").split(",") if gpu.strip()]
    names = [name.strip() for name in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if name.strip()]
    # only UUIDs are translated: a job's own numbers (or ones its script set) stay as the step has always used them
    by_index = {gpu: name for gpu, name in zip(held, names) if not name.isdigit()} if len(held) == len(names) else {}
    return ",".join(by_index.get(gpu, gpu) for gpu in gpus)


def task_cpus(bind: str, ntasks: int, cpus_per_task: int) -> list[set[int]] | None:
    """Each task's CPUs for --cpu-bind (None: no binding): cores/threads/rank give task k its own
    cpus_per_task of the CPUs this process may use, in order; map_cpu:LIST gives task k CPU list[k]."""
    # Slurm's verbosity comes first, alone or before the type: q[uiet] or v[erbose] (snakemake's --cpu-bind=q)
    head, _, rest = bind.partition(",")
    if head in ("q", "quiet", "v", "verbose"):
        bind = rest or "none"
    if bind in ("none", "no"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if bind in ("cores", "threads", "rank"):
        if ntasks * cpus_per_task > len(allowed):
            raise Refused(f"--cpu-bind={bind}: {ntasks} tasks x {cpus_per_task} CPUs, but the job may use "
                          f"{len(allowed)} CPU(s)")
        return [set(allowed[rank * cpus_per_task:(rank + 1) * cpus_per_task]) for rank in range(ntasks)]
    if bind.startswith("map_cpu:"):
        chosen = [_number(item, -1) for item in bind[len("map_cpu:"):].split(",")]
        if not chosen or any(cpu not in allowed for cpu in chosen):
            raise Refused(f"--cpu-bind={bind}: give CPUs the job may use ({','.join(map(str, allowed))})")
        return [{chosen[rank % len(chosen)]} for rank in range(ntasks)]
    raise Refused(f"--cpu-bind={bind} is not supported by corral (use none, cores, threads, rank or map_cpu:LIST)")


def step_environment(given: dict[str, object], environ: Mapping[str, str], step_id: int, ntasks: int,
                     cpus_per_task: int, gpus: StepGpus) -> dict[str, str]:
    """What every task of the step starts with (its rank's variables are added per task)."""
    export = str(given.get("export") or "ALL")
    items = [item for item in export.split(",") if item]
    if items and items[0].upper() == "ALL":
        env = dict(environ)
        items = items[1:]
    else:  # NONE or a list of names: Slurm's variables and the ones named
        env = {key: value for key, value in environ.items() if key.startswith("SLURM_")}
        if items and items[0].upper() in ("NONE", "NIL"):
            items = items[1:]
    for item in items:
        key, equals, value = item.partition("=")
        if equals:
            env[key] = value
        elif key in environ:
            env[key] = environ[key]
    node = environ.get("SLURMD_NODENAME") or environ.get("SLURM_JOB_NODELIST") or "localhost"
    env.update(
        SLURM_STEP_ID=str(step_id), SLURM_STEPID=str(step_id), SLURM_NODEID="0", SLURM_NTASKS=str(ntasks),
        SLURM_NPROCS=str(ntasks), SLURM_STEP_NUM_TASKS=str(ntasks), SLURM_STEP_NUM_NODES="1",
        SLURM_STEP_NODELIST=node, SLURM_STEP_TASKS_PER_NODE=str(ntasks), SLURM_TASKS_PER_NODE=str(ntasks),
        SLURM_DISTRIBUTION="cyclic", SLURM_LAUNCH_NODE_IPADDR="127.0.0.1", SLURM_SRUN_COMM_HOST="127.0.0.1",
        SLURM_UMASK=_umask(), SLURM_CPUS_PER_TASK=str(cpus_per_task),
    )
    if given.get("ntasks_per_node"):
        env["SLURM_NTASKS_PER_NODE"] = str(given["ntasks_per_node"])
    if gpus.step:
        step_gpus = ",".join(gpus.step)
        visible = cuda_names(gpus.step, environ)
        env.update(CUDA_VISIBLE_DEVICES=visible, GPU_DEVICE_ORDINAL=visible, SLURM_STEP_GPUS=step_gpus,
                   SLURM_GPUS_ON_NODE=str(len(gpus.step)))
    elif environ.get("SLURM_JOB_GPUS"):  # a step asked for no GPU sees none
        env.update(CUDA_VISIBLE_DEVICES="", GPU_DEVICE_ORDINAL="")
    if given.get("unbuffered"):
        env["PYTHONUNBUFFERED"] = "1"
    return env


class StepRecord:
    """The step on the server: opened for its number and GPUs before the tasks start (waiting, as Slurm's
    srun does, while the job's other steps hold what it needs), closed with their outcome. Without a server
    to answer (it restarts), the step still runs, as step 0 on the job's first GPUs, unrecorded."""

    def __init__(self, job_id: str, name: str, ntasks: int, command: Sequence[str]) -> None:
        self.job_id = job_id
        self.name = name
        self.ntasks = ntasks
        self.command = " ".join(command)
        self.step_id: int | None = None

    def open(self, cpus: int, gpus: GpuRequest, overlap: bool) -> tuple[int, list[str]]:
        """(the step's number, its GPUs)."""
        body = {"name": self.name, "ntasks": self.ntasks, "command": self.command, "cpus": cpus, "gpus": gpus.count,
                "overlap": overlap}
        job = os.environ.get("SLURM_JOB_ID") or self.job_id
        pause, waited = 0.05, False
        while True:
            try:
                answer = server().ask("POST", f"/api/v1/jobs/{self.job_id}/steps", body)
                break
            except CorralError as exc:
                if exc.status == 409 and exc.message.startswith(BUSY):
                    if not waited:
                        print(f"srun: Job {job} step creation temporarily disabled, retrying ({BUSY})",
                              file=sys.stderr)
                    waited = True
                    time.sleep(pause)
                    pause = min(pause * 2, 1.0)
                    continue
                if exc.status == 422:
                    raise Refused(f"Unable to create step for job {job}: {exc.message}") from None
                print(f"srun: warning: the step is not recorded: {exc.message}", file=sys.stderr)
                return 0, gpus.held[:gpus.count]
            except OSError as exc:
                print(f"srun: warning: the step is not recorded: {exc}", file=sys.stderr)
                return 0, gpus.held[:gpus.count]
        self.step_id = int(answer["step_id"])
        if waited:
            print(f"srun: Step created for StepId={job}.{self.step_id}", file=sys.stderr)
        return self.step_id, [str(gpu) for gpu in answer.get("gpu_ids") or ()]

    def close(self, state: str, exit_code: int, signal: int | None, max_rss_mb: float | None,
              cpu_time_s: float | None) -> None:
        if self.step_id is None:
            return
        try:
            server().ask("POST", f"/api/v1/jobs/{self.job_id}/steps/{self.step_id}", {
                "state": state, "exit_code": exit_code, "signal": signal, "max_rss_mb": max_rss_mb,
                "cpu_time_s": cpu_time_s})
        except (CorralError, OSError) as exc:
            message = exc.message if isinstance(exc, CorralError) else str(exc)
            print(f"srun: warning: the step's end is not recorded: {message}", file=sys.stderr)


def _count(given: dict[str, object], key: str, default: int | None) -> int | None:
    if given.get(key) is None:
        return default
    value = _number(str(given[key]), 0)
    if value < 1:
        raise Refused(f"--{key.replace('_', '-')}={given[key]}: give a whole number of at least 1")
    return value


def _gpu_count(text: str, option: str) -> int:
    count = text.rpartition(":")[2]  # gpu:2, a100:2, 2
    if not count.isdigit():
        raise Refused(f"{option}={text}: give a count of GPUs (N or TYPE:N)")
    return int(count)


def _number(text: str | None, default: int) -> int:
    text = (text or "").strip().partition("(")[0]  # `2(x3)`, Slurm's per-node counts
    return int(text) if text.isdigit() else default


def _umask() -> str:
    mask = os.umask(0o022)
    os.umask(mask)
    return f"{mask:04o}"


def _expand(pattern: str, step_id: int, rank: int) -> str:
    """Slurm's filename pattern for one task of the step."""
    environ = os.environ
    job_id = environ.get("SLURM_JOB_ID", "")
    values = {"j": job_id, "J": f"{job_id}.{step_id}",
              "A": environ.get("SLURM_ARRAY_JOB_ID") or job_id, "a": environ.get("SLURM_ARRAY_TASK_ID", "4294967294"),
              "s": str(step_id), "t": str(rank), "n": "0",
              "N": environ.get("SLURMD_NODENAME") or environ.get("SLURM_JOB_NODELIST", ""),
              "x": environ.get("SLURM_JOB_NAME", ""), "u": environ.get("SLURM_JOB_USER") or environ.get("USER", "")}
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and i + 1 < len(pattern):
            j = i + 1
            width = ""
            while j < len(pattern) and pattern[j].isdigit():
                width += pattern[j]
                j += 1
            code = pattern[j] if j < len(pattern) else ""
            if code == "%":
                out.append("%")
            elif code in values:
                value = values[code]
                out.append(value.zfill(int(width)) if width and value.isdigit() else value)
            else:
                out.append(pattern[i:j + 1])
            i = j + 1
            continue
        out.append(char)
        i += 1
    return "".join(out)
