"""Start-up: load the unfinished jobs and settle those that were running when the server stopped.

The backend says what became of each running job (`Backend.recover`): still running, never started
(queued again), preempted (queued again, its run charged) or ended (its outcome applied).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from corral.backends.base import Backend, Recovered
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation, Node
from corral.core.jobspec.states import JobState
from corral.server.job_table import JobTable
from corral.server.scheduling import SchedulingPass
from corral.server.transitions import JobTransitions

log = logging.getLogger("corral.server")


class Recovery:
    def __init__(self, backend: Backend, table: JobTable, scheduling: SchedulingPass, transitions: JobTransitions, *,
                 clock: Callable[[], float], on_job_ended: Sequence[Callable[[Job], None]]) -> None:
        """`scheduling`: whose ledger is loaded and charged, and whose allocations the running jobs get back;
        `on_job_ended`: told of each job that ended while the server was away."""
        self.backend = backend
        self.table = table
        self.scheduling = scheduling
        self.transitions = transitions
        self.clock = clock
        self.on_job_ended = on_job_ended

    def recover(self) -> None:
        """Load unfinished jobs and settle the ones that were running when the server stopped."""
        now = self.clock()
        scheduling, store = self.scheduling, self.table.store
        allocations, nodes = scheduling.running.allocations, scheduling.nodes
        scheduling.ledger.load(store, now, scheduling.gpu_mem_mb)
        changed, ended, events = [], [], []
        for job in store.active():
            if job.state is JobState.RUNNING:
                recovery = self.backend.recover(job)
                if recovery.status is Recovered.RUNNING:
                    allocations[job.id] = _allocation_of(job, nodes)
                elif recovery.status is Recovered.NEVER_STARTED:
                    self.transitions.set(job, JobState.PENDING, start_time=None, node=None, gpu_ids=None)
                    changed.append(job)
                elif recovery.outcome is not None and recovery.outcome.state == JobState.PREEMPTED.value:
                    allocations[job.id] = _allocation_of(job, nodes)
                    events += scheduling.running.ending_events(job, recovery.outcome)
                    scheduling.requeue(job, recovery.outcome.end_time)
                    changed.append(job)
                else:
                    assert recovery.outcome is not None
                    if job.start_time is not None:
                        # ended while the server was away: the history loaded above did not hold it yet
                        charge = scheduling.charge(_allocation_of(job, nodes),
                                                   recovery.outcome.end_time - job.start_time)
                        scheduling.ledger.charge(job.spec.user, charge, recovery.outcome.end_time)
                    self.transitions.ended_as(job, recovery.outcome)
                    changed.append(job)
                    ended.append(job)
                    continue
            self.table.track(job)
        store.save_states(changed, events)
        for job in ended:
            for listener in self.on_job_ended:
                listener(job)
        for array_id in list(self.table.arrays):
            self.transitions.finish_array_if_done(array_id)  # its last task may have ended while the server was away
        log.info("recovered %d unfinished jobs (%d running)", len(self.table.active), len(allocations))


def _allocation_of(job: Job, nodes: Sequence[Node]) -> Allocation:
    spec = job.spec
    end = job.start_time + spec.time_limit_s if job.start_time is not None and spec.time_limit_s else None
    cpus, mem = spec.cpus, spec.mem_mb
    node = next((n for n in nodes if n.name == job.node), None)
    if spec.exclusive and node is not None:  # it holds the whole node, as when it started
        cpus, mem = node.cpus, node.mem_mb
    return Allocation(job.id, job.node or "", tuple(job.gpu_ids or ()), cpus, mem, spec.user, spec.qos, end,
                      spec.preemptible, gpu_share_mb=spec.gpu_share_mb)
