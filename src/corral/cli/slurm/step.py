"""`srun` inside a corral job: run a command as the job's step, on the job's own allocation.

    srun python train.py                                 the batch script's launch line
    srun --unbuffered --output=%j_%t.out python -u ...   what submitit writes

The step is the job's one task (corral runs one task per job): the command runs with the job's
environment (SLURM_PROCID=0, ...), its output where --output/--error say (Slurm's %j %A %a %t %N %x %u
patterns), signals passed on to it, and its exit status as srun's. Outside a job, `srun` starts an
interactive job through the queue instead (`corral.cli.slurm.srun`).
"""

from __future__ import annotations

import os
import signal
import sys

from corral.cli.slurm.argv import Option, parse
from corral.cli.slurm.command import Refused, answered

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

OPTIONS = [
    Option("output", "o", value=True), Option("error", "e", value=True), Option("input", "i", value=True),
    Option("unbuffered", "u"), Option("ntasks", "n", value=True), Option("nodes", "N", value=True),
    Option("ntasks-per-node", value=True), Option("cpus-per-task", "c", value=True), Option("job-name", "J", value=True),
    Option("label", "l"), Option("quiet", "Q"), Option("verbose", "v"), Option("chdir", "D", value=True),
    Option("export", value=True), Option("gres", value=True), Option("gpus", "G", value=True),
    Option("gpus-per-task", value=True), Option("gpus-per-node", value=True), Option("mem", value=True),
    Option("cpu-bind", value=True), Option("mpi", value=True), Option("kill-on-bad-exit", "K", value=True, optional=True),
    Option("wait", "W", value=True), Option("exclusive", value=True, optional=True), Option("overlap"),
    Option("open-mode", value=True), Option("distribution", "m", value=True), Option("help", "h"),
    Option("usage"), Option("version", "V"), Option("pty"),
]
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGQUIT,
             signal.SIGCONT)


def main(argv: Sequence[str]) -> int:
    given, command = parse(argv, OPTIONS, stop_at_first_operand=True)
    if answered(given, "Usage: srun [--output=FILE] [--error=FILE] [--unbuffered] [-D DIR] command [args...]"):
        return 0
    for key in ("ntasks", "nodes", "ntasks_per_node"):
        if given.get(key) not in (None, "1"):
            raise Refused(f"--{key.replace('_', '-')}={given[key]}: corral runs one task per job, on one node "
                          "(use 1, or torchrun inside the step for several processes)")
    if given.get("pty"):
        raise Refused("--pty is not supported by corral yet")
    if not command:
        raise Refused("No command given to execute.")
    append = (str(given.get("open_mode") or os.environ.get("SLURM_OPEN_MODE") or "t")).startswith("a")
    return _run(command, given, append)


def _run(command: list[str], given: dict[str, object], append: bool) -> int:
    paths = {fd: _expand(str(given[key])) for fd, key in ((1, "output"), (2, "error")) if given.get(key)}
    if 1 in paths and 2 not in paths:
        paths[2] = paths[1]  # as Slurm: --output alone takes both streams
    child = os.fork()
    if child == 0:
        try:
            if given.get("chdir"):
                os.chdir(str(given["chdir"]))
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
            opened: dict[str, int] = {}
            for fd, path in sorted(paths.items()):
                if path not in opened:
                    opened[path] = os.open(path, flags if path not in opened else os.O_WRONLY | os.O_APPEND, 0o666)
                os.dup2(opened[path], fd)
            if given.get("input"):
                os.dup2(os.open(_expand(str(given["input"])), os.O_RDONLY), 0)
            os.environ.update(SLURM_STEP_ID="0", SLURM_STEPID="0", SLURM_STEP_NUM_TASKS="1", SLURM_STEP_NUM_NODES="1")
            if given.get("unbuffered"):
                os.environ["PYTHONUNBUFFERED"] = "1"
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"slurmstepd: error: execve(): {command[0]}: {exc.strerror}\n".encode())
            os._exit(2)
    for number in FORWARDED:
        signal.signal(number, lambda received, frame: os.kill(child, received))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        print(f"srun: error: task 0: {signal.Signals(os.WTERMSIG(status)).name.title()}", file=sys.stderr)
        return 128 + os.WTERMSIG(status)
    code = os.WEXITSTATUS(status)
    if code:
        print(f"srun: error: task 0: Exited with exit code {code}", file=sys.stderr)
    return code


def _expand(pattern: str) -> str:
    """Slurm's filename pattern for this step's one task."""
    environ = os.environ
    values = {"j": environ.get("SLURM_JOB_ID", ""), "J": environ.get("SLURM_JOB_ID", "") + ".0",
              "A": environ.get("SLURM_ARRAY_JOB_ID") or environ.get("SLURM_JOB_ID", ""),
              "a": environ.get("SLURM_ARRAY_TASK_ID", "4294967294"), "s": "0", "t": "0", "n": "0",
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
