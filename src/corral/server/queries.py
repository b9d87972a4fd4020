"""Reading jobs, finished or not (`JobQueries`): by id or `12_3`, an array's tasks, the queue and the history.

Unfinished jobs come from the job table (with their pending reasons), the rest from the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Node
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest, NotFound
from corral.server.job_table import JobTable
from corral.store.jobs import JobStore


class JobQueries:
    def __init__(self, table: JobTable, store: JobStore, nodes: Sequence[Node]) -> None:
        self.table = table
        self.store = store
        self.nodes = tuple(nodes)

    def resolve(self, ref: str) -> Job:
        """A job by its id (`12`) or an array task by `12_3`.

        Raises:
            InvalidRequest: not an id; NotFound: no such job or task.
        """
        head, _, task = ref.partition("_")
        if not (head.isascii() and head.isdigit()) or (task and not (task.isascii() and task.isdigit())):
            raise InvalidRequest("job_id", f"{ref!r} is not a job id", "write 12, or 12_3 for task 3 of array 12")
        job_id = int(head)
        if not 0 < job_id < 2**31:
            raise NotFound(f"job {ref} does not exist")
        if not task:
            return self.get(job_id)
        task_id = int(task)
        for child_id in self.table.array_tasks.get(job_id, ()):
            if self.table.active[child_id].array_task_id == task_id:
                return self.table.current(self.table.active[child_id])
        found = self.store.get_task(job_id, task_id) if task_id < 2**31 else None
        if found is not None:
            return found
        array = self.get(job_id)
        if array.is_array and task_id in array.array_pending:
            return array
        raise NotFound(f"job {ref} does not exist")

    def array_tasks(self, job_id: int) -> tuple[Job, list[Job]]:
        """An array job and those of its tasks that have records, each as it is now, by task id.

        Raises:
            NotFound: no such job; InvalidRequest: the job is not an array.
        """
        array = self.get(job_id)
        if not array.is_array:
            raise InvalidRequest("job_id", f"job {job_id} is not an array job",
                                 "tasks belong to a job submitted with --array; a task is shown as ID_TASK")
        tasks = {t.array_task_id: t for t in self.store.tasks(job_id)}
        for child_id in self.table.array_tasks.get(job_id, ()):
            child = self.table.active.get(child_id)
            if child is not None:
                tasks[child.array_task_id] = self.table.current(child)
        return array, [tasks[k] for k in sorted(tasks, key=lambda k: -1 if k is None else k)]

    def job_info(self, job_id: int) -> dict[str, Any] | None:
        """Who ran a job and where (for a run that links to it), or None if there is no such job."""
        try:
            job = self.get(job_id)
        except NotFound:
            return None
        node = next((n for n in self.nodes if n.name == job.node), None)
        types = sorted({g.type for g in node.gpus if g.index in (job.gpu_ids or ())}) if node else []
        return {"id": job.id, "user": job.spec.user, "account": job.spec.account, "node": job.node,
                "gpu_type": ",".join(types) or None}

    def job_named(self, ref: str) -> int | None:
        """The corral job a job's own id names, as its environment shows it ($SLURM_JOB_ID): the Slurm
        backend's id of an unfinished job first (a self-scheduled backend's ids are not corral's),
        else a corral job id or `12_3`; None where it names none."""
        for job in self.table.active.values():
            if job.backend_id is not None and job.backend_id == ref:
                return job.id
        try:
            return self.resolve(ref).id
        except (InvalidRequest, NotFound):
            return None

    def get(self, job_id: int) -> Job:
        job = self.table.active.get(job_id)
        if job is not None:
            return self.table.current(job)
        job = self.store.get(job_id)
        if job is None:
            raise NotFound(f"job {job_id} does not exist")
        return job

    def list_active(self, *, states: Sequence[str] = (), limit: int = 10_000, after_id: int = 0,
                    name: str | None = None) -> list[Job]:
        wanted = {JobState(s) for s in states} if states else None
        out = []
        for job in self.table.active.values():
            if job.is_array and not job.array_pending:
                continue  # every task has its own record now
            if job.id > after_id and (wanted is None or job.state in wanted) and (name is None or job.spec.name == name):
                out.append(self.table.current(job))
                if len(out) >= limit:
                    break
        return out

    def list_finished(self, *, states: Sequence[str] = (), limit: int = 100, before_id: int | None = None,
                      name: str | None = None, ended_after: float | None = None, by_start: bool = False) -> list[Job]:
        return self.store.finished(limit=limit, before_id=before_id, states=states, name=name, ended_after=ended_after,
                                   by_start=by_start)
