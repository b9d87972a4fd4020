"""Sharing jobs held to their GPU memory budget (`corral.core.scheduling.sharing`), from the monitor's samples.

After each tick the monitor tells the job service what each running job's own processes hold on its GPUs
(NVML's per-process figures); a sharing job over its budget is warned (an event on its timeline, its reason
while it runs), and with `[node] gpu_share_over_budget = "stop"` stopped once it stayed over for
`gpu_share_grace_s`, FAILED with the reason (`GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem)`).
One that drops back within its budget is forgiven: its reason goes, and a later excess starts the grace again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING

from corral.core.jobspec.events import GPU_OVER_BUDGET, JobEvent
from corral.core.scheduling.sharing import BudgetWatch, OverBudget, SharingSettings, asked_as
from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.store.jobs import JobStore

log = logging.getLogger(__name__)


class ShareBudgets:
    def __init__(self, settings: SharingSettings, *, fail: Callable[[Job, str], None] | None, store: JobStore,
                 db_thread: Executor) -> None:
        """`fail`: ends a running job FAILED with a reason (None: the backend cannot, nothing is stopped);
        `store`, `db_thread`: where the jobs' changed reasons and the events are recorded, off the loop."""
        self.watch = BudgetWatch(settings)
        self.fail = fail
        self.store = store
        self.db_thread = db_thread
        self.stopped: set[int] = set()  # told to stop already: once is enough
        self.alerted: set[int] = set()  # whose owners heard of it: a job hovering at its budget is warned each time
        # it crosses (its reason says so), but alerted once while it runs

    def sampled(self, active: Mapping[int, Job], used: Mapping[int, float], now: float) -> list[tuple[Job, OverBudget]]:
        """A tick's GPU memory per running job (its processes' own, as NVML lists them). Returns the jobs warned
        just now for the first time in this run, each with what was found (the monitor alerts their owners: they
        have the grace to act in)."""
        budgets = {job.id: (job.spec.gpu_share_mb, asked_as(job.spec.gpu_shards)) for job in active.values()
                   if job.spec.gpu_share_mb and job.state is JobState.RUNNING}
        self.stopped &= budgets.keys()
        self.alerted &= budgets.keys()
        verdicts, within = self.watch.check(budgets, used, now)
        changed: list[Job] = []
        events: list[JobEvent] = []
        warned: list[tuple[Job, OverBudget]] = []
        for verdict in verdicts:
            job = active[verdict.job_id]
            if verdict.stop and self.fail is not None and job.id not in self.stopped:
                self.stopped.add(job.id)
                reason = verdict.reason()
                log.info("job %d stopped: %s", job.id, reason)
                events.append(_event(verdict, now, "stopped"))
                self.fail(job, reason)
            elif verdict.first:
                job.reason = verdict.warning()
                changed.append(job)
                events.append(_event(verdict, now, "warned"))
                if job.id not in self.alerted:
                    self.alerted.add(job.id)
                    warned.append((job, verdict))
        for job_id in within:
            job = active[job_id]
            if job.reason is not None:
                job.reason = None
                changed.append(job)
        if changed or events:
            self.db_thread.submit(self.store.save_states, changed, events).add_done_callback(_logged)
        return warned


def _logged(done: Future[None]) -> None:
    error = done.exception()
    if error is not None:
        log.error("could not record a sharing job's GPU memory over its budget: %s", error)


def _event(verdict: OverBudget, now: float, action: str) -> JobEvent:
    return JobEvent(verdict.job_id, now, GPU_OVER_BUDGET, {"used_mb": round(verdict.used_mb), "budget_mb": verdict.budget_mb,
                                                          "action": action, "reason": verdict.reason()})
