"""A step's tasks as processes: started, their output relayed (labelled `0: ` with --label), signals
passed on, and their ends gathered into the step's outcome with Slurm's `srun: error:` lines.

Standard library only (it runs in every `srun` of every job): os, signal, select.
"""

from __future__ import annotations

import os
import select
import signal
import sys

from corral.cli.slurm.descriptors import write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGQUIT,
             signal.SIGCONT)
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
KILL_AFTER_S = 5.0  # --kill-on-bad-exit: the other tasks get SIGTERM, then SIGKILL this much later
DRAIN_S = 2.0  # output still coming after every task ended (a daemon they left holding the pipe): this long
_CHUNK = 65536


class Task:
    """One task to start: its rank, environment, output files (fd -> path), input file and CPUs."""

    __slots__ = ("rank", "env", "outputs", "source", "cpus", "pid")

    def __init__(self, rank: int, env: dict[str, str], outputs: dict[int, str], source: str | None,
                 cpus: set[int] | None) -> None:
        self.rank = rank
        self.env = env
        self.outputs = outputs
        self.source = source
        self.cpus = cpus
        self.pid = 0


class Outcome:
    """How the step ended: Slurm's step state, its worst task's exit code and signal, its usage, and
    srun's exit status."""

    __slots__ = ("state", "exit_code", "signal", "max_rss_mb", "cpu_time_s", "status")

    def __init__(self, state: str, exit_code: int, signal_number: int | None, max_rss_mb: float, cpu_time_s: float,
                 status: int) -> None:
        self.state = state
        self.exit_code = exit_code
        self.signal = signal_number
        self.max_rss_mb = max_rss_mb
        self.cpu_time_s = cpu_time_s
        self.status = status


def run_tasks(command: Sequence[str], tasks: Sequence[Task], *, label: bool, kill_on_bad_exit: bool, append: bool,
              chdir: str | None, node: str, step_ref: str) -> Outcome:
    """Start every task, relay and wait; the step's outcome."""
    width = len(str(len(tasks) - 1))
    pending: dict[int, Task] = {}
    stopped_by: list[int] = []

    def forward(received: int, frame: object) -> None:
        if received in STOPPING:
            stopped_by.append(received)
        for pid in pending:
            _kill(pid, received)

    # before any task starts, so that no end goes unnoticed: each SIGCHLD wakes the poll below
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda received, frame: None)
    for number in FORWARDED:
        signal.signal(number, forward)
    relays: dict[int, tuple[int, bytes]] = {}  # pipe's read end -> (where it goes, the label)
    for task in tasks:
        pipes: dict[int, int] = {}
        if label:
            for fd in (1, 2):
                if fd not in task.outputs:
                    read, write = os.pipe()
                    relays[read] = (fd, f"{task.rank:>{width}}: ".encode())
                    pipes[fd] = write
        task.pid = _start(command, task, pipes, append, chdir)
        pending[task.pid] = task
        for write in pipes.values():
            os.close(write)
    ended: dict[int, int] = {}  # rank -> wait status
    reported: set[int] = set()  # ranks whose end was told as it came (--kill-on-bad-exit)
    usage = [0.0, 0.0]  # peak RSS (MB), CPU seconds
    poller = select.poll()
    poller.register(wake_read, select.POLLIN)
    for read in relays:
        poller.register(read, select.POLLIN)
    partial: dict[int, bytes] = {}
    kill_at: float | None = None  # --kill-on-bad-exit: when the tasks still running get SIGKILL
    terminating = False
    drain_until: float | None = None
    try:
        bad = _reap(pending, ended, usage)  # a task may have ended already
        while pending or (relays and (drain_until is None or _now() < drain_until)):
            if not pending and drain_until is None:
                drain_until = _now() + DRAIN_S
            timeout = None
            if kill_at is not None:
                timeout = max(0, int((kill_at - _now()) * 1000))
            if drain_until is not None:
                timeout = max(0, int((drain_until - _now()) * 1000))
            for fd, _ in poller.poll(timeout if pending or relays else 0):
                if fd == wake_read:
                    try:
                        os.read(wake_read, 512)
                    except BlockingIOError:
                        pass
                    continue
                data = os.read(fd, _CHUNK)
                target, prefix = relays[fd]
                if not data:
                    poller.unregister(fd)
                    os.close(fd)
                    rest = partial.pop(fd, b"")
                    if rest:
                        write_all(target, prefix + rest + b"\n")
                    del relays[fd]
                    continue
                lines = (partial.pop(fd, b"") + data).split(b"\n")
                if lines[-1]:
                    partial[fd] = lines[-1]
                if len(lines) > 1:
                    write_all(target, b"".join(prefix + line + b"\n" for line in lines[:-1]))
            bad = _reap(pending, ended, usage) if bad is None else bad
            if bad is not None and kill_on_bad_exit and not terminating and pending:
                print(f"srun: error: {node}: task {bad}: {_fate(ended[bad])}", file=sys.stderr)
                print(f"srun: launch/slurm: _step_signal: Terminating StepId={step_ref}", file=sys.stderr)
                reported.add(bad)
                for pid in pending:
                    _kill(pid, signal.SIGTERM)
                kill_at = _now() + KILL_AFTER_S
                terminating = True
            bad = None
            if kill_at is not None and _now() >= kill_at:
                for pid in pending:
                    _kill(pid, signal.SIGKILL)
                kill_at = None
    finally:
        signal.set_wakeup_fd(-1)
        os.close(wake_read)
        os.close(wake_write)
        for read in relays:
            os.close(read)
    return _outcome(ended, usage, node, step_ref, bool(stopped_by), reported)


def _start(command: Sequence[str], task: Task, pipes: dict[int, int], append: bool, chdir: str | None) -> int:
    child = os.fork()
    if child:
        return child
    try:
        for number in (*FORWARDED, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        if chdir:
            os.chdir(chdir)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        opened: dict[str, int] = {}
        for fd, path in sorted(task.outputs.items()):
            if path not in opened:
                opened[path] = os.open(path, flags, 0o666)
            os.dup2(opened[path], fd)
        for fd, write in pipes.items():
            os.dup2(write, fd)
        if task.source is not None:
            os.dup2(os.open(task.source, os.O_RDONLY), 0)
        elif task.rank > 0:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # stdin is task 0's
        if task.cpus:
            os.sched_setaffinity(0, task.cpus)
        env = dict(task.env, SLURM_TASK_PID=str(os.getpid()))
        os.execvpe(command[0], list(command), env)
    except OSError as exc:
        os.write(2, f"slurmstepd: error: execve(): {command[0]}: {exc.strerror}\n".encode())
        os._exit(2)
    return 0  # not reached


def _reap(pending: dict[int, Task], ended: dict[int, int], usage: list[float]) -> int | None:
    """Collect the tasks that ended; the rank of one that failed, if any did."""
    bad = None
    while pending:
        try:
            pid, status, rusage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        task = pending.pop(pid, None)
        if task is None:
            continue
        ended[task.rank] = status
        usage[0] = max(usage[0], rusage.ru_maxrss / 1024)  # Linux counts kilobytes
        usage[1] += rusage.ru_utime + rusage.ru_stime
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            bad = task.rank
    return bad


def _outcome(ended: dict[int, int], usage: list[float], node: str, step_ref: str, stopped: bool,
             reported: set[int]) -> Outcome:
    """The step's outcome as Slurm 22.05 makes it, and its lines for the tasks that failed (tasks with one fate
    grouped: `tasks 0-1`). A task killed by a signal makes the step CANCELLED with that signal (0:9), whatever
    the others' exit codes; else the largest exit code, FAILED; srun exits 128+signal or that code."""
    exit_code, killed_by = 0, 0
    fates: dict[str, list[int]] = {}
    for rank, status in sorted(ended.items()):
        if os.WIFSIGNALED(status):
            killed_by = max(killed_by, os.WTERMSIG(status))
        else:
            exit_code = max(exit_code, os.WEXITSTATUS(status))
        if (os.WIFSIGNALED(status) or os.WEXITSTATUS(status)) and rank not in reported:
            fates.setdefault(_fate(status), []).append(rank)
    for fate, ranks in fates.items():
        which = f"task {ranks[0]}" if len(ranks) == 1 else f"tasks {_ranges(ranks)}"
        print(f"srun: error: {node}: {which}: {fate}", file=sys.stderr)
    if killed_by:
        print(f"srun: Force Terminated StepId={step_ref}", file=sys.stderr)
        state = "CANCELLED"
        code, signal_number, status = 0, killed_by, 128 + killed_by
    else:
        state = "FAILED" if exit_code else "COMPLETED"
        code, signal_number, status = exit_code, None, exit_code
    if stopped:
        state = "CANCELLED"
    return Outcome(state, code, signal_number, round(usage[0], 3), round(usage[1], 3), status)


def _fate(status: int) -> str:
    if os.WIFSIGNALED(status):
        return _signal_name(status)
    return f"Exited with exit code {os.WEXITSTATUS(status)}"


def _signal_name(status: int) -> str:
    return signal.strsignal(os.WTERMSIG(status)) or f"Signal {os.WTERMSIG(status)}"


def _ranges(ranks: list[int]) -> str:
    """`0-2,5`."""
    parts, start = [], ranks[0]
    for previous, current in zip(ranks, [*ranks[1:], None]):
        if current != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = current if current is not None else start
    return ",".join(parts)


def _kill(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass



def _now() -> float:
    return os.times().elapsed
