"""Start-up: load the unfinished jobs and settle those that were running when the server stopped.

The backend says what became of each running job (`Backend.recover`): still running, never started
(queued again), preempted (queued again, its run charged) or ended (its outcome applied).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from corral.backends.base import Recovered
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation, Node
from corral.core.jobspec.states import JobState
from corral.server.job_table import apply_outcome

if TYPE_CHECKING:
    from corral.server.service import JobService

log = logging.getLogger("corral.server")


def recover(service: JobService) -> None:
    """Load unfinished jobs and settle the ones that were running when the server stopped."""
    now = service.clock()
    service.scheduling.ledger.load(service.store, now, service.scheduling.gpu_mem_mb)
    changed, ended, events = [], [], []
    for job in service.store.active():
        if job.state is JobState.RUNNING:
            recovery = service.backend.recover(job)
            if recovery.status is Recovered.RUNNING:
                service.allocations[job.id] = _allocation_of(job, service.nodes)
            elif recovery.status is Recovered.NEVER_STARTED:
                job.state, job.start_time, job.node, job.gpu_ids = JobState.PENDING, None, None, None
                changed.append(job)
            elif recovery.outcome is not None and recovery.outcome.state == JobState.PREEMPTED.value:
                service.allocations[job.id] = _allocation_of(job, service.nodes)
                events += service.scheduling.running.ending_events(job, recovery.outcome)
                service.scheduling.requeue(job, recovery.outcome.end_time)
                changed.append(job)
            else:
                assert recovery.outcome is not None
                if job.start_time is not None:
                    # ended while the server was away: the history loaded above did not hold it yet
                    charge = service.scheduling.charge(_allocation_of(job, service.nodes),
                                                       recovery.outcome.end_time - job.start_time)
                    service.scheduling.ledger.charge(job.spec.user, charge, recovery.outcome.end_time)
                apply_outcome(job, recovery.outcome)
                changed.append(job)
                ended.append(job)
                continue
        service.table.track(job)
    service.store.save_states(changed, events)
    for job in ended:
        for listener in service.on_job_ended:
            listener(job)
    for array_id in list(service.table.arrays):
        service.finish_array_if_done(array_id)  # its last task may have ended while the server was away
    log.info("recovered %d unfinished jobs (%d running)", len(service.active), len(service.allocations))


def _allocation_of(job: Job, nodes: Sequence[Node]) -> Allocation:
    spec = job.spec
    end = job.start_time + spec.time_limit_s if job.start_time is not None and spec.time_limit_s else None
    cpus, mem = spec.cpus, spec.mem_mb
    node = next((n for n in nodes if n.name == job.node), None)
    if spec.exclusive and node is not None:  # it holds the whole node, as when it started
        cpus, mem = node.cpus, node.mem_mb
    return Allocation(job.id, job.node or "", tuple(job.gpu_ids or ()), cpus, mem, spec.user, spec.qos, end,
                      spec.preemptible, gpu_share_mb=spec.gpu_share_mb)
