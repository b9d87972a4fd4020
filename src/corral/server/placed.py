"""The jobs corral placed, from a pass's decision to their end (`PlacedJobs`): launched by the
launcher's threads once their start is recorded, polled off the event loop for their outcomes,
stopped (cancel, preemption) through the launcher or the backend, and queued again when preempted.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import replace

from corral.backends.base import Ended, Placement
from corral.core.jobspec.events import JobEvent
from corral.core.jobspec.job import Job, Outcome
from corral.core.jobspec.states import JobState
from corral.server.job_table import CANCELLED_BY_USER, JobTable, apply_outcome, reset_to_pending
from corral.server.launcher import Launcher, Stop
from corral.server.poll_thread import PollThread
from corral.server.scheduling import RunningJobs, SchedulingPass
from corral.store.jobs import JobStore

log = logging.getLogger("corral.server")
HEALTH_BY = "corral"
"""Who drains a failed GPU and requeues the jobs on it: corral itself (Slurm's own reasons say `slurm`)."""


class PlacedJobs:
    def __init__(self, placement: Placement, table: JobTable, scheduling: SchedulingPass, store: JobStore,
                 db_thread: Executor, *, clock: Callable[[], float], forget: Callable[[Job], None],
                 changed: Callable[[], None]) -> None:
        """`db_thread`: where the starts and ends are recorded off the loop (shared with the submits);
        `forget`: let go of a job that ended; `changed`: the jobs changed (pass again, views refresh)."""
        self.placement = placement
        self.table = table
        self.scheduling = scheduling
        self.store = store
        self.db_thread = db_thread
        self.clock = clock
        self._forget = forget
        self._changed = changed
        self.poll_thread = PollThread(placement.poll)
        self.launcher: Launcher | None = None  # made when the loop runs; without it, jobs start inline

    @property
    def running(self) -> RunningJobs:
        """Their allocations, and who stopped them (the pass's own: it places into the same)."""
        return self.scheduling.running

    def start_launcher(self, loop: asyncio.AbstractEventLoop) -> None:
        self.launcher = Launcher(self.placement, loop, on_failed=self.launch_failed, on_skipped=self.launch_skipped)

    def close(self) -> None:
        if self.launcher is not None:
            self.launcher.close()
        self.poll_thread.close()

    def reap(self) -> None:
        """Read and apply ended jobs' outcomes, here and now."""
        running = self.running_jobs()
        if running:
            self._settle(self._node_failures(_outcomes(self.placement.poll(running))))

    async def reap_off_loop(self) -> None:
        """Read the outcomes of running jobs in the poll thread, record those that ended in the
        database thread (one transaction), then apply them here."""
        if not self.poll_thread.due():
            return
        running = self.running_jobs()
        if not running:
            return
        ended = self._node_failures(_outcomes(await self.poll_thread.poll(running)))
        if not ended:
            return
        rows, events = [], []
        for job, outcome in ended:
            row = copy.copy(job)
            if outcome.state == JobState.PREEMPTED.value:
                reset_to_pending(row)
            else:
                apply_outcome(row, outcome)
            rows.append(row)
            events += self.running.ending_events(job, outcome)
        await asyncio.get_running_loop().run_in_executor(self.db_thread, self.store.save_states, rows, events)
        self._settle(ended, saved=True)

    def running_jobs(self) -> list[Job]:
        """Jobs with a supervisor to ask (one still being launched has none yet)."""
        launching = self.launcher.launching_ids() if self.launcher is not None else frozenset()
        return [self.table.active[job_id] for job_id in self.running.allocations if job_id in self.table.active and job_id not in launching]

    def _settle(self, ended: Sequence[tuple[Job, Outcome]], saved: bool = False) -> None:
        """Apply outcomes read from the backend, recording them in one transaction unless `saved` already."""
        ended = [(job, outcome) for job, outcome in ended
                 if self.table.active.get(job.id) is job and job.state is JobState.RUNNING]  # still as when read
        if not ended:
            return
        preempted = [job for job, outcome in ended if outcome.state == JobState.PREEMPTED.value]
        events = [] if saved else [event for job, outcome in ended for event in self.running.ending_events(job, outcome)]
        for job, outcome in ended:
            if outcome.state == JobState.PREEMPTED.value:
                self.scheduling.requeue(job, outcome.end_time)
            else:
                apply_outcome(job, outcome)
        if not saved:
            self.store.save_states([job for job, _ in ended], events)
        for job, _ in ended:
            if job not in preempted:
                self._forget(job)
        self._changed()

    def launch_failed(self, job: Job, reason: str) -> None:
        """A launch raised (in a launcher thread): the job fails, saying why."""
        self._end_unlaunched(job, Outcome("FAILED", None, None, self.clock(), reason))

    def launch_skipped(self, job: Job) -> None:
        """A job cancelled before its launch began (or whose GPU failed meanwhile): it never ran."""
        failed = self.running.node_failed.get(job.id)
        self._end_unlaunched(job, Outcome("NODE_FAIL", None, None, self.clock(), failed) if failed is not None
                             else Outcome("CANCELLED", None, None, self.clock(), CANCELLED_BY_USER))

    def _end_unlaunched(self, job: Job, outcome: Outcome) -> None:
        if self.table.active.get(job.id) is not job or job.state is not JobState.RUNNING:
            return
        events = self.running.ending_events(job, outcome)
        apply_outcome(job, outcome)
        try:
            self.store.save_state(job, events)
        except Exception:  # noqa: BLE001 - it is over either way; recovery settles the record
            log.exception("could not record the end of job %d", job.id)
        self._forget(job)
        self._changed()

    def launch(self, started: list[Job], events: list[JobEvent]) -> None:
        """Record the starts a pass decided (RUNNING, before launch), then launch them."""
        if self.launcher is not None:
            # written in the database thread, launched once committed; meanwhile the jobs count
            # as launching (a cancel is carried out after, and the poll leaves them alone)
            self.launcher.hold(job.id for job in started)
            rows = [copy.copy(job) for job in started]
            done = asyncio.get_running_loop().run_in_executor(self.db_thread, self.store.save_states, rows, events)
            done.add_done_callback(lambda result: self._recorded(started, result))
            return
        try:
            self.store.save_states(started, events)
        except Exception:
            self.scheduling.requeue_unsaved(started)
            raise
        for job in started:
            try:
                self.placement.start(job, self.running.allocations[job.id])
            except Exception as exc:  # noqa: BLE001 - a job that cannot launch fails; the loop goes on
                log.exception("launch of job %d failed", job.id)
                self.launch_failed(job, f"launch failed: {exc}")

    def _recorded(self, started: list[Job], result: asyncio.Future[None]) -> None:
        """The starts of a pass are committed (launch them), or could not be (they wait again)."""
        assert self.launcher is not None
        error = result.exception()
        if error is None:
            for job in started:
                allocation = self.running.allocations.get(job.id)
                if allocation is None or self.table.active.get(job.id) is not job:
                    self.launcher.abandon([job.id])  # settled meanwhile (it cannot have been: defensive)
                    continue
                self.launcher.launch(job, allocation)
            return
        log.error("could not record the start of %d jobs: %s", len(started), error)
        stops = self.launcher.abandon(job.id for job in started)
        cancelled = [job for job in started if stops.get(job.id) is Stop.CANCEL]
        self.scheduling.requeue_unsaved([job for job in started if job not in cancelled])
        for job in cancelled:
            self.launch_skipped(job)
        self._changed()

    def preempt(self, victims: Sequence[int], for_job: int | None, now: float) -> None:
        """Tell preemptible jobs to make room for `for_job`: warning signal, grace period, then they are
        queued again (the requeue records when, and for which job)."""
        waiting = self.table.active.get(for_job) if for_job is not None else None
        for job_id in victims:
            job = self.table.active.get(job_id)
            allocation = self.running.allocations.get(job_id)
            if job is None or allocation is None or job_id in self.running.preempting:
                continue
            log.info("preempting job %d for job %s", job_id, waiting.ref if waiting is not None else "?")
            self.running.allocations[job_id] = replace(allocation, preempting=True)
            self.running.preempting.add(job_id)
            if waiting is not None:
                self.running.preempted_for[job_id] = (waiting.ref, now)
            if self.launcher is None or not self.launcher.stop(job, Stop.PREEMPT):
                self.placement.preempt(job)

    def requeue(self, job: Job, by: str | None, node_failed: bool = False) -> None:
        """Stop a running job to queue it again (scontrol requeue; `node_failed`: its GPU failed): SIGTERM, for no
        other job; its end comes back PREEMPTED and is requeued as one, its timeline saying who asked."""
        allocation = self.running.allocations.get(job.id)
        if allocation is None or job.id in self.running.preempting:
            return
        log.info("requeueing job %d (asked by %s)", job.id, by or "?")
        self.running.allocations[job.id] = replace(allocation, preempting=True)
        self.running.preempting.add(job.id)
        self.running.requeued_by[job.id] = by or ""
        if self.launcher is None or not self.launcher.stop(job, Stop.REQUEUE):
            self.placement.requeue(job, node_failed)

    def fail_node(self, job: Job, reason: str, requeue: bool) -> None:
        """Stop a running job whose GPU failed: it ends NODE_FAIL saying why, or (`requeue`) waits again,
        as Slurm does with a job on a node that failed."""
        if job.id in self.running.node_failed or job.id in self.running.preempting:
            return
        log.warning("job %d: %s", job.id, reason)
        if requeue:
            self.requeue(job, HEALTH_BY, node_failed=True)
            return
        self.running.node_failed[job.id] = reason
        if self.launcher is None or not self.launcher.stop(job, Stop.CANCEL):
            self.placement.fail_node(job, reason)

    def _node_failures(self, ended: list[tuple[Job, Outcome]]) -> list[tuple[Job, Outcome]]:
        """A job stopped for its GPU's failure ends NODE_FAIL, whatever its stop (or the failure) made of it;
        one that completed meanwhile stays COMPLETED."""
        failed = self.running.node_failed
        return [(job, replace(outcome, state=JobState.NODE_FAIL.value, error=failed[job.id]))
                if job.id in failed and outcome.state not in (JobState.COMPLETED.value, JobState.PREEMPTED.value)
                else (job, outcome) for job, outcome in ended]

    def stop(self, job: Job, by: str | None = None) -> None:
        """Tell a running job to stop (its outcome comes back through the backend's poll); one
        still launching stops once launched, or is never launched if its turn has not come."""
        if by:
            self.running.cancelled_by[job.id] = by
        if self.launcher is None or not self.launcher.stop(job, Stop.CANCEL, by):
            self.placement.cancel(job, by)


def _outcomes(ended: Sequence[Ended]) -> list[tuple[Job, Outcome]]:
    return [(update.job, update.outcome) for update in ended if isinstance(update.job, Job)]
