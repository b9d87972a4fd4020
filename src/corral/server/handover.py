"""Jobs handed to a backend that schedules them itself (Slurm): `BackendHandover`.

The scheduling pass submits every queued job that may go (its dependency mapped to the backend's
ids once all its targets are there); the watcher's updates are applied to the job table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from corral.backends.base import (
    ArrayDrained, ClusterQueue, Ended, Started, SubmitRefused, TaskAppeared, TaskOf, Target, Waiting,
)
from corral.core.jobspec.dependency import render
from corral.core.jobspec.job import Job, Outcome
from corral.core.jobspec.states import JobState, PendingReason
from corral.server.job_table import JobTable, apply_outcome
from corral.store.jobs import JobStore

SUBMITS_PER_PASS = 16  # jobs handed over in one turn of the loop (sbatch takes 10-50 ms each)


class BackendHandover:
    def __init__(self, queue: ClusterQueue, table: JobTable, store: JobStore, *, clock: Callable[[], float],
                 forget: Callable[[Job], None], finish_array: Callable[[int], None],
                 check_dependencies: Callable[[], dict[int, PendingReason]]) -> None:
        """`forget`: let go of an ended job; `finish_array`: end an array whose tasks all have;
        `check_dependencies`: the jobs whose dependencies corral still evaluates, and why they wait."""
        self.queue = queue
        self.table = table
        self.store = store
        self.clock = clock
        self._forget = forget
        self._finish_array = finish_array
        self._check_dependencies = check_dependencies
        self._dependency: dict[int, str] = {}  # jobs about to be handed over with these backend dependencies

    def hand_over(self) -> tuple[float, bool]:
        """Submit to the backend every queued job that may go now (the scheduling is the backend's).

        Returns:
            the seconds spent waiting on the backend, and whether jobs are left for the next pass.
        """
        waiting = self._map_dependencies()
        submitted, waited = 0, 0.0
        for job_id in list(self.table.queue) + [a for a in self.table.arrays if self.table.arrays[a].backend_id is None]:
            job = self.table.active.get(job_id)
            if job is None or job.backend_id is not None or job.held or job_id in waiting:
                continue
            if submitted == SUBMITS_PER_PASS:
                return waited, True  # the rest in the next pass: the API is served in between
            started = time.monotonic()
            self._submit(job, self._dependency.pop(job_id, None))
            waited += time.monotonic() - started
            submitted += 1
        return waited, False

    def _map_dependencies(self) -> dict[int, PendingReason]:
        """Dependencies whose targets are all at the backend become the backend's; the rest corral
        evaluates as on one machine (a target that already ended, or is not submitted yet)."""
        for job_id, dependency in list(self.table.dependencies.items()):
            targets = [self.table.active.get(target) for target in dependency.job_ids]
            if all(t is not None and t.backend_id is not None and not t.state.is_terminal() for t in targets):
                ids = {t.id: t.backend_id for t in targets if t is not None and t.backend_id is not None}
                self._dependency[job_id] = render(dependency, ids.__getitem__)
                del self.table.dependencies[job_id]
        return self._check_dependencies()

    def _submit(self, job: Job, dependency: str | None) -> None:
        try:
            job.backend_id = self.queue.submit(job, dependency)
        except SubmitRefused as exc:  # the job fails with the backend's words
            apply_outcome(job, Outcome("FAILED", None, None, self.clock(), exc.message))
            self.store.save_state(job)
            self._forget(job)
            return
        self.table.backend_reasons[job.id] = PendingReason.NONE.value
        self.store.save_state(job)

    def reap(self) -> bool:
        """Apply what the backend's watcher found since the last call: jobs placed, waiting (again), ended;
        array tasks given records. Returns whether a read came back."""
        submitted = {j.backend_id: j for j in self.table.active.values() if j.backend_id is not None}
        updates = self.queue.watch(submitted)
        if updates is None:
            return False
        changed, ended, drained = [], [], []
        tasks: dict[str, Job] = {}  # given records in this batch
        for update in updates:
            if isinstance(update, ArrayDrained):
                drained.append(update.array)
                continue
            job = self._target(update.task if isinstance(update, TaskAppeared) else update.job, tasks)
            if job is None or isinstance(update, TaskAppeared):
                continue
            if isinstance(update, Ended):
                job.start_time = job.start_time or update.start_time
                job.node = job.node or update.node
                apply_outcome(job, update.outcome)
                ended.append(job)
            elif self._placed_at_backend(job, update):
                changed.append(job)
        self.store.save_states(changed)
        self.store.save_states(ended)
        for job in ended:
            self.table.backend_reasons.pop(job.id, None)
            self._forget(job)
        for array in drained:
            if self.table.active.get(array.id) is array:
                self._finish_array(array.id)
        return True

    def _target(self, target: Target, tasks: dict[str, Job]) -> Job | None:
        """The job an update is about, if corral still has it; an array task gets its record now."""
        if isinstance(target, Job):
            return target if self.table.active.get(target.id) is target else None  # ended or cancelled meanwhile
        if self.table.active.get(target.array.id) is not target.array:
            return None
        if target.backend_id not in tasks:
            tasks[target.backend_id] = self._task_record(target)
        return tasks[target.backend_id]

    def _task_record(self, task: TaskOf) -> Job:
        spec = replace(task.array.spec, dependency=None, stdout=task.stdout, stderr=task.stderr)
        (record,) = self.store.add_tasks(task.array, spec, [task.task_id])
        record.backend_id = task.backend_id
        self.store.save_state(record)
        self.table.track(record)
        self.table.queue.pop(record.id, None)
        return record

    def _placed_at_backend(self, job: Job, update: Started | Waiting) -> bool:
        """Running where the backend placed it, or waiting at the backend (again); whether that changed it."""
        before = (job.state, job.node, job.start_time)
        if isinstance(update, Started):
            job.state, job.node = JobState.RUNNING, update.node or job.node
            job.start_time = job.start_time or update.start_time or self.clock()
            self.table.queue.pop(job.id, None)
            self.table.backend_reasons.pop(job.id, None)
        else:
            if job.state is JobState.RUNNING:  # requeued by the backend
                job.restarts += 1
                job.start_time, job.node = None, None
            job.state = JobState.PENDING
            self.table.backend_reasons[job.id] = update.reason
        return (job.state, job.node, job.start_time) != before
