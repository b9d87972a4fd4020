"""Watching Slurm: what became of the jobs corral handed over (`SlurmWatcher`).

One read is one `squeue` for every job, then one `sacct` for those that left the queue; it runs
in a thread of its own, so a slow slurmctld never holds up the API. A failed read backs off
(doubling up to MAX_BACKOFF_S); an epilog's nudge reads again at once and a few times more in
quick succession. What a read found comes back as typed updates (`corral.backends.base`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from corral.backends.base import (
    ArrayDrained, Ended, JobUpdate, Started, TaskAppeared, TaskOf, Target, Waiting,
)
from corral.backends.slurm.cluster import SlurmCluster, SlurmError
from corral.backends.slurm.parse import SacctRow, SqueueRow, outcome_from_sacct
from corral.backends.slurm.submit import task_log
from corral.core.jobspec.job import Job, Outcome
from corral.core.jobspec.states import JobState

log = logging.getLogger("corral.slurm")

POLL_INTERVAL_S = 2.0
MAX_BACKOFF_S = 60.0
BURST_S, BURST_INTERVAL_S = 3.0, 0.1  # after an epilog's nudge
ACCOUNTING_LAG_S = 30.0  # how long a job may be gone from the queue with no accounting record yet
SUBMITTED_POLL_S = 0.5  # a job just submitted is looked at within this long

Read = tuple[list[SqueueRow], dict[str, SacctRow]]


class SlurmWatcher:
    def __init__(self, cluster: SlurmCluster, *, poll_interval_s: float = POLL_INTERVAL_S,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`clock`: the wall clock outcomes are dated by; `monotonic`: the one reads are timed by."""
        self.cluster = cluster
        self.poll_interval_s = poll_interval_s
        self.clock = clock
        self.monotonic = monotonic
        self._next_poll = 0.0
        self._backoff = poll_interval_s
        self._burst_until = 0.0
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-slurm")
        self._reading: Future[Read] | None = None
        self._read_for: Mapping[str, Job] = {}

    def nudge(self) -> None:
        """Read Slurm's state now and a few times more in quick succession (a job's epilog said it
        ended: it may still be COMPLETING for a moment, and its record not yet written)."""
        self._next_poll = 0.0
        self._burst_until = self.monotonic() + BURST_S

    def soon(self) -> None:
        """A job was just submitted: look within SUBMITTED_POLL_S."""
        self._next_poll = min(self._next_poll, self.monotonic() + SUBMITTED_POLL_S)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)  # a slow squeue must not hold up a stop

    def watch(self, submitted: Mapping[str, Job]) -> list[JobUpdate] | None:
        """Start a read of Slurm's state when one is due; return what a read that has come back found
        (None: none has)."""
        if self._reading is not None:
            return self._finish_read() if self._reading.done() else None
        if self.monotonic() < self._next_poll:
            return None
        if not submitted:
            self._next_poll = self.monotonic() + self.poll_interval_s
            return None
        arrays = {bid for bid, j in submitted.items() if j.is_array}
        self._reading = self._thread.submit(self._read, set(submitted), arrays)
        self._read_for = dict(submitted)
        return None

    def _read(self, ids: set[str], arrays: set[str]) -> Read:
        """In the Slurm thread: the queue (one squeue), then accounting for what left it (one sacct)."""
        rows = self.cluster.queue()
        present = {row.job_id for row in rows if not row.settling}
        present |= {str(row.array_job_id) for row in rows if row.array_job_id is not None}
        gone = sorted(i for i in ids if i not in present or (i in arrays and not _array_has_rows(i, rows)))
        try:
            records = {r.job_id: r for r in self.cluster.accounting(gone)} if gone else {}
        except SlurmError as exc:
            log.warning("sacct failed (%s); jobs that left the queue are settled without it", exc.message)
            records = {}
        return rows, records

    def _finish_read(self) -> list[JobUpdate] | None:
        assert self._reading is not None
        reading, submitted, self._reading = self._reading, self._read_for, None
        try:
            rows, records = reading.result()
        except SlurmError as exc:
            self._backoff = min(MAX_BACKOFF_S, self._backoff * 2)
            log.warning("polling Slurm failed (next try in %.0f s): %s", self._backoff, exc.message)
            self._next_poll = self.monotonic() + self._backoff
            return None
        updates = self.updates(submitted, rows, records)
        self._backoff = self.poll_interval_s
        now = self.monotonic()
        self._next_poll = now + (BURST_INTERVAL_S if now < self._burst_until else self.poll_interval_s)
        return updates

    def updates(self, submitted: Mapping[str, Job], rows: Sequence[SqueueRow],
                records: Mapping[str, SacctRow]) -> list[JobUpdate]:
        """What the queue's rows and accounting's records say of the submitted jobs (by Slurm id)."""
        queued: set[str] = set()
        arrays_seen: set[str] = set()
        updates: list[JobUpdate] = []
        for row in rows:
            array = submitted.get(str(row.array_job_id)) if row.array_job_id is not None else None
            target: Target | None
            if array is not None and array.is_array:
                arrays_seen.add(array.backend_id or "")
                if row.is_range or not row.array_task_ids:
                    continue  # tasks not started yet: they stay in the array's pending list
                backend_id = f"{array.backend_id}_{row.array_task_ids[0]}"
                target = submitted.get(backend_id) or _task_of(array, row.array_task_ids[0])
            else:
                backend_id, target = row.job_id, submitted.get(row.job_id)
                if target is None:
                    continue
            if row.settling:
                if isinstance(target, TaskOf):
                    updates.append(TaskAppeared(target))  # settled from accounting once that has it
                continue
            queued.add(backend_id)
            if row.state is JobState.RUNNING:
                updates.append(Started(target, row.node, row.start_time))
            elif row.state in (JobState.PENDING, JobState.PREEMPTED):
                updates.append(Waiting(target, row.reason or "None"))
        gone = [j for bid, j in submitted.items() if bid not in queued and bid not in arrays_seen]
        for job in gone:
            updates += self._settle_array(job, records) if job.is_array else self._settle(job, records)
        return updates

    def _settle(self, job: Job, records: Mapping[str, SacctRow]) -> list[JobUpdate]:
        """A job that left Slurm's queue: its outcome from accounting (read with the queue)."""
        record = records.get(job.backend_id or "")
        now = self.clock()
        if record is None:
            if now - (job.start_time or job.submit_time) < ACCOUNTING_LAG_S:
                return []  # accounting lags the queue by a moment: ask again at the next read
            return [Ended(job, Outcome("COMPLETED", None, None, now, "Slurm has no record of how it ended"))]
        if not record.state.is_terminal():
            return []
        return [Ended(job, outcome_from_sacct(record, now=now), start_time=record.start_time)]

    def _settle_array(self, array: Job, records: Mapping[str, SacctRow]) -> list[JobUpdate]:
        """An array that left the queue: its tasks not seen running get their records now."""
        tasks = {t: r for r in records.values() if str(r.array_job_id) == array.backend_id and r.state.is_terminal()
                 for t in r.array_task_ids}
        updates: list[JobUpdate] = []
        now = self.clock()
        for task_id in list(array.array_pending):
            record = tasks.get(task_id)
            task = _task_of(array, task_id)
            if record is not None:
                updates.append(Ended(task, outcome_from_sacct(record, now=now), record.start_time, record.node))
            else:
                state = "CANCELLED" if array.reason == "CancelledByUser" else "COMPLETED"
                updates.append(Ended(task, Outcome(state, None, None, now, "Slurm has no record of this task")))
        updates.append(ArrayDrained(array))
        return updates


def _task_of(array: Job, task_id: int) -> TaskOf:
    return TaskOf(array, task_id, f"{array.backend_id}_{task_id}", task_log(array, "stdout", task_id),
                  task_log(array, "stderr", task_id) if array.spec.stderr else None)


def _array_has_rows(array_id: str, rows: Sequence[SqueueRow]) -> bool:
    return any(str(row.array_job_id) == array_id and not row.settling for row in rows)
