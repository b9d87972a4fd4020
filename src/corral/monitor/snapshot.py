"""What one monitoring tick looks at, copied from the jobs on the event loop: `Snapshot`, `SnapshotTaker`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.core.monitoring import alerts as A
from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.monitor.jobs import JobReader

Watched = tuple[int, int, tuple[int, ...], int, float, "str | None"]  # id, pid, GPUs, cpus, start, cgroup.procs


@dataclass(frozen=True)
class Snapshot:
    now: float
    facts: list[A.JobFacts]  # every job the rules may look at
    watched: list[Watched]  # the running jobs to sample
    logs: dict[int, tuple[str, ...]]  # running job -> its log files
    ended: tuple[Job, ...] = ()  # jobs that ended since the last tick


class SnapshotTaker:
    """Makes a tick's `Snapshot`, keeping what is costly to work out again (facts, log paths) per job."""

    def __init__(self, jobs: JobReader) -> None:
        self.jobs = jobs
        self._log_paths: dict[int, tuple[str | None, tuple[str, ...]]] = {}  # running job -> (its node, its logs)
        self._facts: dict[int, tuple[object, A.JobFacts]] = {}  # job -> (what its facts were made from, the facts)

    def take(self, now: float, rules: Sequence[A.Rule], ended: Iterable[Job]) -> Snapshot:
        """Everything the tick needs from the jobs, copied on the loop thread."""
        ended = tuple(ended)
        wants_pending = any(r.condition.kind == "queue_wait" or
                            (r.condition.kind == "state" and "PENDING" in r.condition.states) for r in rules)
        facts, watched, logs = [], [], {}
        current = {job.id: job for job in self.jobs.active_jobs()} | {job.id: job for job in ended}
        for job in current.values():
            if job.is_array or (job.state is JobState.PENDING and not wants_pending):
                continue
            facts.append(self._facts_of(job))
            if job.state is JobState.RUNNING:
                logs[job.id] = self._logs_of(job)
                processes = self.jobs.job_processes(job.id)
                if processes is not None and job.start_time is not None:
                    watched.append((job.id, processes.pid, tuple(job.gpu_ids or ()), job.spec.cpus, job.start_time,
                                    processes.procs_file))
        if len(self._log_paths) > 2 * len(logs) + 64:
            self._log_paths = {job_id: paths for job_id, paths in self._log_paths.items() if job_id in logs}
        if len(self._facts) > 2 * len(current) + 64:
            self._facts = {job_id: made for job_id, made in self._facts.items() if job_id in current}
        return Snapshot(now, facts, watched, logs, ended)

    def _facts_of(self, job: Job) -> A.JobFacts:
        """A job's facts for the rules, made again only when its state, start or spec changed."""
        key = (job.state, job.start_time, job.spec)
        cached = self._facts.get(job.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        facts = job_facts(job)
        self._facts[job.id] = (key, facts)
        return facts

    def _logs_of(self, job: Job) -> tuple[str, ...]:
        """A running job's log files, worked out once per start (a snapshot of a thousand running jobs
        runs on the event loop, and filling in patterns is most of its cost)."""
        cached = self._log_paths.get(job.id)
        if cached is not None and cached[0] == job.node:
            return cached[1]
        paths = tuple({job.log_path("stdout"), job.log_path("stderr")})
        self._log_paths[job.id] = (job.node, paths)
        return paths


def job_facts(job: Job) -> A.JobFacts:
    s = job.spec
    return A.JobFacts(
        job_id=job.id, name=s.name, user=s.user, state=job.state.value, submit_time=job.submit_time,
        labels=dict(s.labels), array_job_id=job.array_job_id, start_time=job.start_time, time_limit_s=s.time_limit_s,
    )
