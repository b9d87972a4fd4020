"""`WarningSignalDue`: sbatch's --signal=SIG@T, sent T seconds before the time limit (say, to checkpoint);
how it is sent, and to whom, is `corral.executor.warning_signal`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.executor.limits.base import Ending, Limit, WatchedJob

if TYPE_CHECKING:
    from corral.executor.warning_signal import WarningSignal


class WarningSignalDue(Limit):
    """Sends the job's warning when it is due, unless the job is being stopped already (a preemption sends it
    itself, `marks.PreemptMark`)."""

    def __init__(self, warning: WarningSignal, deadline: float | None) -> None:
        self.warning = warning
        self.at = warning.due_at(deadline)

    def next_look(self, job: WatchedJob) -> float | None:
        return self.at

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        if self.at is not None and now >= self.at:
            self.warning.send(job.pid, job.cgroup)
            self.at = None
        return None
