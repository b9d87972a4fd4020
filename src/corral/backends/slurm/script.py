"""The sbatch call for a job: its options as an argv list and its batch script, built without I/O."""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.core.jobspec.spec_signals import parse_signal

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.core.jobspec.job_spec import JobSpec

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class SbatchRequest:
    argv: tuple[str, ...]
    """sbatch's options, each one `--option=value`; run as an argv list, never through a shell."""
    script: str
    """The batch script's text (sbatch reads it from stdin or a file)."""


def build_sbatch(
    job: Job, *, partition: str | None, account: str | None, dependency: str | None, env: Mapping[str, str],
    stdout: str, stderr: str | None, user_script_path: str | None, requeue: bool = True,
) -> SbatchRequest:
    """The sbatch options and batch script that run `job` on Slurm.

    Args:
        partition: the backend's default, used when the job names none.
        account: Slurm account to charge, or None for the user's default.
        dependency: the job's dependency with corral ids already replaced by Slurm ids.
        env: every variable the script exports (the job's own and corral's), in any order.
        stdout, stderr: absolute Slurm file patterns (`%j`, `%A`, `%a` left for Slurm); stderr None
            sends it to the stdout file.
        user_script_path: where the caller saved a batch-script job's script (mode 755); None for a command.
        requeue: whether Slurm may queue the job again after preemption or a node failure.
    """
    spec = job.spec
    # `--option=value`, never `--option value`: a value that starts with `-` stays a value.
    argv = [
        "--parsable",
        f"--job-name={spec.name}",
        f"--chdir={spec.workdir}",
        f"--output={stdout}",
    ]
    if stderr is not None:
        argv.append(f"--error={stderr}")
    # A requeued job appends to its logs, as the local backend does: the earlier runs' output stays.
    argv.append("--open-mode=append")
    if spec.nodes > 1:
        argv.append(f"--nodes={spec.nodes}")
        if spec.ntasks == spec.nodes and spec.ntasks_per_node is None:
            argv.append("--ntasks-per-node=1")  # one task per node: torchrun, started by srun on each, starts the workers
    if spec.ntasks > spec.nodes or spec.ntasks_per_node is not None:
        argv.append(f"--ntasks={spec.ntasks}")
        if spec.ntasks_per_node is not None:
            argv.append(f"--ntasks-per-node={spec.ntasks_per_node}")
    argv.append(f"--cpus-per-task={spec.cpus_per_task}")
    if spec.mem_mb:  # 0 asks for no limit; Slurm's --mem=0 would instead take all of the node's memory
        argv.append(f"--mem={spec.mem_mb}M")
    if spec.gpus_per_task:
        argv.append(f"--gpus-per-task={spec.gpu_type}:{spec.gpus_per_task}" if spec.gpu_type
                    else f"--gpus-per-task={spec.gpus_per_task}")
    elif spec.gpu_shards:  # shards of one GPU, which the cluster's gres/shard plugin sizes
        argv.append(f"--gres=shard:{spec.gpu_shards}")
    elif spec.gpus:
        # GRES type names are the cluster's own (case-sensitive), so the type passes as given.
        argv.append(f"--gres=gpu:{spec.gpu_type}:{spec.gpus}" if spec.gpu_type else f"--gres=gpu:{spec.gpus}")
    if spec.time_limit_s is not None:  # none: the partition's default limit applies
        argv.append(f"--time={format_time_limit(spec.time_limit_s)}")
    chosen_partition = spec.partition or partition
    if chosen_partition:
        argv.append(f"--partition={chosen_partition}")
    if account:
        argv.append(f"--account={account}")
    if spec.qos:
        argv.append(f"--qos={spec.qos}")
    if spec.nice:
        argv.append(f"--nice={spec.nice}")
    if job.is_array:
        argv.append(f"--array={spec.array}")  # with its %throttle
    if dependency:
        argv.append(f"--dependency={dependency}")
        if spec.kill_on_invalid_dep:
            argv.append("--kill-on-invalid-dep=yes")
    if spec.warn_signal:
        argv.append(f"--signal={warn_signal_option(spec.warn_signal, command=user_script_path is None)}")
    argv += placement_options(spec)
    argv += container_options(spec)
    if spec.comment:
        argv.append(f"--comment={spec.comment}")
    argv.append("--requeue" if requeue else "--no-requeue")
    argv.append("--export=ALL" if spec.inherit_env else "--export=NONE")
    launcher, command = "", spec.command
    if spec.nodes > 1 and user_script_path is None:
        launcher, command = torchrun_launcher(spec.command, spec.gpus)
    return SbatchRequest(tuple(argv), batch_script(command, spec.script_args, env, user_script_path, launcher=launcher))


RDZV_PORT = 29500


def torchrun_launcher(command: tuple[str, ...], gpus_per_node: int) -> tuple[str, tuple[str, ...]]:
    """How a multi-node job starts: `srun torchrun` on every node with a c10d rendezvous on the first
    (the seed's Slurm multi-GPU recipe). Returns the launcher's words (corral's own, with variables
    for bash to fill in) and the command it runs: `python train.py ...` becomes `train.py ...`,
    any other program runs under `--no-python`."""
    launcher = (
        'srun --ntasks-per-node=1 torchrun --nnodes="$SLURM_NNODES" '
        f'--nproc_per_node={max(1, gpus_per_node)} --rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d '
        '--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"'
    )
    if len(command) > 1 and os.path.basename(command[0]).startswith("python") and not command[1].startswith("-"):
        return launcher, command[1:]
    return launcher + " --no-python", command


def batch_script(
    command: tuple[str, ...], script_args: tuple[str, ...], env: Mapping[str, str], user_script_path: str | None,
    *, launcher: str = "",
) -> str:
    """`#!/bin/bash`, one quoted `export` per variable, then `exec` of the command or the user's script.

    With a `launcher` (torchrun_launcher's), MASTER_ADDR (the job's first host) and MASTER_PORT are
    set first and the command runs under it; only the command's words are the user's, all quoted.
    """
    lines = ["#!/bin/bash"]
    odd: list[str] = []
    for key in sorted(env):
        assert "=" not in key and "\0" not in key and "\0" not in env[key], f"bad variable {key!r}"
        if _NAME.fullmatch(key):
            lines.append(f"export {key}={shlex.quote(env[key])}")
        else:
            # bash cannot `export` names such as BASH_FUNC_module%% (an exported shell function,
            # common on clusters); env(1) can still put them into the command's environment.
            odd.append(f"{key}={env[key]}")
    if launcher:
        lines.append('export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"')
        lines.append(f'export MASTER_PORT="${{MASTER_PORT:-{RDZV_PORT}}}"')
    if user_script_path is not None:
        target = shlex.join((user_script_path, *script_args))
    else:
        assert command, "a job has a command or a script"
        target = shlex.join(command)
    if launcher:
        target = f"{launcher} {target}"
    # exec: the command replaces the batch shell, so Slurm's signals and exit status are its own.
    lines.append(f"exec env -- {shlex.join(odd)} {target}" if odd else f"exec {target}")
    return "\n".join(lines) + "\n"


def format_time_limit(seconds: int) -> str:
    """Seconds as sbatch's D-HH:MM:SS, rounded up to whole minutes (Slurm's granularity)."""
    minutes = -(-seconds // 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:00"


def warn_signal_option(text: str, *, command: bool) -> str:
    """corral's --signal as sbatch's: as given for a batch script (Slurm's own rule: without `B:` its srun steps
    get it, not the batch shell); with `B:` added for a command, which the script `exec`s, so that the command
    *is* the batch shell and has no steps of its own. Slurm sends it before the time limit; at preemption only
    where the cluster sets PreemptParameters=send_user_signal.
    """
    warning = parse_signal(text)
    body = text.strip()
    _, colon, rest = body.partition(":")
    if colon:
        body = rest
    letters = ("R" if warning.reservation else "") + ("B" if warning.batch or command else "")
    return f"{letters}:{body}" if letters else body


def placement_options(spec: JobSpec) -> list[str]:
    """sbatch's --begin, --deadline, --exclusive, --constraint, --nodelist, --exclude, --time-min, --priority and
    --mail-type/--mail-user, as the job asked: Slurm honours them itself (and sends its own mail)."""
    argv = []
    for name, moment in (("begin", spec.begin_time), ("deadline", spec.deadline)):
        if moment is not None:  # Slurm reads a date without a zone in its own (the cluster's) local time
            argv.append(f"--{name}={time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(moment))}")
    if spec.exclusive:
        argv.append("--exclusive")
    if spec.features:
        argv.append(f"--constraint={spec.features}")
    if spec.nodelist:
        argv.append(f"--nodelist={','.join(spec.nodelist)}")
    if spec.exclude:
        argv.append(f"--exclude={','.join(spec.exclude)}")
    if spec.time_min_s is not None:
        argv.append(f"--time-min={format_time_limit(spec.time_min_s)}")
    if spec.priority is not None:
        argv.append(f"--priority={spec.priority}")
    if spec.reservation is not None:  # the cluster's own reservation, by name
        argv.append(f"--reservation={spec.reservation}")
    if spec.mail_type:
        argv.append(f"--mail-type={','.join(spec.mail_type)}")
        if spec.mail_user:
            argv.append(f"--mail-user={spec.mail_user}")
    return argv


def container_options(spec: JobSpec) -> list[str]:
    """Pyxis's sbatch options for a job in a container image: the cluster's Pyxis plugin runs the batch
    script in it. Each is one argv element (no shell); `corral.core.jobspec.spec_container` has already refused
    an image that starts with `-` and paths holding a comma, which would change their meaning here."""
    container = spec.container
    if container is None:
        return []
    argv = [f"--container-image={container.image}"]
    if container.mounts:
        argv.append(f"--container-mounts={','.join(mount.text() for mount in container.mounts)}")
    if container.workdir is not None:
        argv.append(f"--container-workdir={container.workdir}")
    if container.env:
        argv.append(f"--container-env={','.join(container.env)}")
    if not container.mount_home:
        argv.append("--no-container-mount-home")
    if container.remap_root:
        argv.append("--container-remap-root")
    return argv
