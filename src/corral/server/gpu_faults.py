"""What a fatal GPU fault (`corral.core.monitoring.gpu_health`) does: the GPU is drained, by corral, with the fault as its
reason (kept in the store like an admin's drain, until an admin resumes it), and each job running on it is
stopped: it ends NODE_FAIL saying which GPU failed and how, or, where the job may be run again (a batch job
not submitted with --no-requeue), waits again and later runs on a healthy GPU, as Slurm requeues a job from a
failed node."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from corral.core.monitoring.gpu_health import HealthEvent, drain_reason, fatal
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.server.draining import Drains
from corral.server.job_table import JobTable
from corral.server.placed import HEALTH_BY, PlacedJobs
from corral.server.scheduling import RunningJobs

log = logging.getLogger("corral.server")


class GpuFaults:
    def __init__(self, node: str | None, drains: Drains, table: JobTable, running: RunningJobs,
                 placed: PlacedJobs | None) -> None:
        """`node`: this machine's, whose GPUs the monitor samples; `running`: who holds which GPUs; `placed`: the
        jobs corral placed, stopped when their GPU fails."""
        self.node = node
        self.drains = drains
        self.table = table
        self.running = running
        self.placed = placed

    def act_on(self, events: Sequence[HealthEvent]) -> bool:
        """Drain each GPU of this machine with a fatal event and stop the jobs on it; whether any was drained."""
        node = next((n for n in self.drains.nodes if n.name == self.node), None)
        if node is None:
            return False
        by_gpu: dict[int, list[HealthEvent]] = {}
        for event in fatal(events):
            by_gpu.setdefault(event.gpu, []).append(event)
        have = {gpu.index for gpu in node.gpus}
        drained = False
        for gpu, faults in sorted(by_gpu.items()):
            # NVML's index, as the fault names it: a GPU in MIG mode is held (and drained) through its slices
            held = {g.index for g in node.gpus if g.parent == gpu} or ({gpu} & have)
            reason = drain_reason(faults)
            if not held:
                log.warning("GPU %d of %s: %s (not one of the node's declared GPUs: not drained)", gpu, node.name,
                            reason)
                continue
            log.error("GPU %d of %s failed: %s; drained", gpu, node.name, reason)
            self.drains.drain(node.name, [gpu], reason, HEALTH_BY)
            drained = True
            why = f"GPU {gpu} of {node.name} failed: {reason}"
            for job_id, allocation in list(self.running.allocations.items()):
                job = self.table.active.get(job_id)
                if allocation.node == node.name and held & set(allocation.gpu_ids) and job is not None \
                        and job.state is JobState.RUNNING and self.placed is not None:
                    self.placed.fail_node(job, why, requeues(job))
        return drained


def requeues(job: Job) -> bool:
    """Whether a job on a failed GPU waits again rather than ending NODE_FAIL, as Slurm decides for a job on a
    failed node with JobRequeue=1 (what `scontrol show config` says of corral): a batch job does unless it
    was submitted with --no-requeue; an interactive one (srun, salloc) never: its client would have nothing
    to come back to."""
    return job.spec.interactive is None and job.spec.requeue is not False
