"""sbatch's --signal=[B:]SIG@T, delivered as Slurm 22.05 delivers it: SIGCONT, then SIG, once each
(slurmctld's `send_job_warn_signal`, slurmd's `_kill_all_active_steps`, slurmstepd's `_handle_signal_container`).

- Without `B:`, every process of the job's srun steps: each task and what it started, as a step's container
  holds them. Not the batch shell, not what it runs outside a step, not the srun clients (which would pass
  it on to their tasks, a second time). A job with no step running gets nothing.
- With `B:`, the batch shell's own process, not its group. A job given as a command is its own batch shell.

A step's processes are told by their environment: srun starts each task with SLURM_TASK_PID set to the task's
own pid, and what a task starts inherits it. So a task is a process whose SLURM_TASK_PID is itself, a process
of its step one whose SLURM_TASK_PID names a task of this job, and the tasks' parents are srun clients, left
out (a task's nested srun too: its own tasks are reached directly). A value inherited from elsewhere (a job
submitted from another job's step) names no task of this job.

At most once: Slurm's WARN_SENT. A preemption sends it if it has not gone yet (Slurm's
preempt_send_user_signal), else SIGTERM; a requeue (`scontrol requeue`) never sends it: SIGTERM, as Slurm's.

Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING

from corral.executor.files import session_members

if TYPE_CHECKING:
    from corral.executor.cgroups import JobCgroup

_TASK_PID = b"SLURM_TASK_PID="


class WarningSignal:
    """A job's warning: when it is due, whom it reaches, and whether it went."""

    def __init__(self, number: int | None, before_s: float, batch: bool) -> None:
        self.number = number
        self.before_s = before_s
        self.batch = batch
        self.sent = False

    @property
    def pending(self) -> bool:
        """Whether the job has a warning that has not gone yet."""
        return bool(self.number) and not self.sent

    def due_at(self, deadline: float | None) -> float | None:
        """When it goes: `before_s` before the time limit (at once if that has passed); None without either."""
        return deadline - self.before_s if deadline is not None and self.number else None

    def send(self, job_pid: int, cgroup: JobCgroup | None) -> bool:
        """SIGCONT, then the warning, to the batch shell (`job_pid`) or to the step processes among the job's (its
        `cgroup`'s, else its session's); whether it reached any. Sent once: later calls send nothing."""
        if not self.pending or not job_pid:
            return False
        assert self.number is not None
        self.sent = True
        if self.batch:
            targets = [job_pid]
        else:
            targets = step_processes(cgroup.pids() if cgroup is not None else session_members(job_pid), job_pid)
        for number in (signal.SIGCONT, self.number) if targets else ():
            if cgroup is not None:
                cgroup.signal(number, targets)  # frozen meanwhile: none forks out of it
            else:
                kill_each(number, targets)
        return bool(targets)


def step_processes(pids: Iterable[int], batch_pid: int) -> list[int]:
    """The processes of the job's srun steps among its `pids` (`batch_pid`: the batch shell, never one of them)."""
    task_of: dict[int, int] = {}
    for pid in pids:
        if pid == batch_pid:
            continue
        task = _task_pid(pid)
        if task is not None:
            task_of[pid] = task
    tasks = {pid for pid, task in task_of.items() if task == pid}
    clients = {_parent(pid) for pid in tasks}
    return sorted(pid for pid, task in task_of.items() if task in tasks and pid not in clients)


def _task_pid(pid: int) -> int | None:
    """The SLURM_TASK_PID a process started with, if any."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:  # gone, or a process of another user's that a non-root supervisor may not read
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_TASK_PID):
            value = entry[len(_TASK_PID):]
            return int(value) if value.isdigit() and len(value) <= 10 else None
    return None


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def kill_each(number: int, pids: list[int]) -> None:
    """Signal each of `pids`, passing over those that are gone."""
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass
