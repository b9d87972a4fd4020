"""The Backend interface on Slurm: stopping and recovering jobs Slurm runs.

Submitting and watching are the Slurm job service's (corral.server.slurm_service): Slurm
decides where and when a job runs, so there is no allocation to start a job on.
"""

from __future__ import annotations

from collections.abc import Iterable

from corral.backends.base import Recovered, Recovery
from corral.backends.slurm.cluster import SlurmCluster
from corral.core.job import Job, Outcome
from corral.core.resources import Allocation


class SlurmBackend:
    def __init__(self, cluster: SlurmCluster) -> None:
        self.cluster = cluster

    def start(self, job: Job, allocation: Allocation) -> None:
        raise NotImplementedError("on Slurm, jobs are submitted with sbatch, not started on an allocation")

    def cancel(self, job: Job, by: str | None = None) -> None:  # slurmstepd writes the job's line itself
        if job.backend_id:
            self.cluster.cancel([job.backend_id])

    def preempt(self, job: Job) -> None:
        if job.backend_id:
            self.cluster.requeue([job.backend_id])

    def poll(self, running: Iterable[Job]) -> list[tuple[Job, Outcome]]:
        return []  # the service polls Slurm for all jobs at once

    def recover(self, job: Job) -> Recovery:
        # Slurm kept running it while the server was away; the next poll says what became of it
        return Recovery(Recovered.RUNNING)
