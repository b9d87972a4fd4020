"""Fair share's usage ledger (`UsageLedger`): each user's decayed GPU-hours, kept across restarts.

Ended jobs are charged from their records; a preempted run, whose job waits again and forgets its
start, is charged in the store's ledger table, so a restart finds it too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from corral.core.scheduling.priority import charged_gpus, decay, usage_charge
from corral.store.jobs import JobStore
from corral.store.usage import UsageStore

HISTORY_HALF_LIVES = 10  # usage older than this many half-lives weighs nothing worth loading


class UsageLedger:
    def __init__(self, half_life_s: float, now: float, store: UsageStore | None = None) -> None:
        self.half_life_s = half_life_s
        self.store = store
        self._usage: dict[str, float] = {}  # decayed GPU-hours of ended and preempted runs, as of _at
        self._at = now

    def load(self, jobs: JobStore, now: float, gpu_mem_mb: Callable[[str | None, Sequence[int]], int]) -> None:
        """Charge the history a restart would otherwise forget: ended jobs, and the ledger's preempted runs.
        `gpu_mem_mb(node, gpu_ids)`: the memory of the GPU a sharing job ran on, of which it is charged its
        budget's part."""
        since = now - HISTORY_HALF_LIVES * self.half_life_s
        for user, gpus, cpus, share_mb, node, gpu_ids, start, end in jobs.usage_since(since):
            memory = gpu_mem_mb(node, gpu_ids or ()) if share_mb else 0
            self.charge(user, usage_charge(charged_gpus(gpus, share_mb, memory), cpus, end - start), end)
        if self.store is not None:
            for user, gpu_hours, at in self.store.since(since):
                self.charge(user, gpu_hours, at)

    def charge(self, user: str, gpu_hours: float, at: float) -> None:
        """Add usage that happened at time `at` (decayed to the present bookkeeping time)."""
        value = decay(gpu_hours, self._at - at, self.half_life_s) if at < self._at else gpu_hours
        self._usage[user] = self._usage.get(user, 0.0) + value

    def charge_interrupted(self, user: str, gpu_hours: float, at: float, job_id: int) -> None:
        """Charge a run that did not end its job (a preemption): written to the ledger, which outlives the run."""
        self.charge(user, gpu_hours, at)
        if self.store is not None:
            self.store.record(user, gpu_hours, at, job_id)

    def decayed(self, now: float) -> dict[str, float]:
        """Each user's charged usage decayed to `now` (a copy)."""
        factor = 0.5 ** (max(0.0, now - self._at) / self.half_life_s)
        self._usage = {user: value * factor for user, value in self._usage.items() if value * factor > 1e-9}
        self._at = now
        return dict(self._usage)
