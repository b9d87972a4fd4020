"""Jobs' `srun` steps in the database (`StepStore`): opened, closed, listed, and ended with their job."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from corral.core.jobspec.steps import RUNNING, JobStep, StepEnd, StepStart, claim
from corral.errors import NotFound
from corral.store.schema import job_steps

_FIELDS = JobStep.__dataclass_fields__.keys()
_NUMBERING_TRIES = 20  # another server on the same database numbered one at once: try again


class StepStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._claiming = threading.Lock()

    def open(self, job_id: int, start: StepStart, now: float, *, job_ref: str, job_cpus: int,
             job_gpus: tuple[int, ...], restart: int = 0) -> JobStep | None:
        """A new RUNNING step of the job's run `restart`, numbered after that run's last, holding the CPUs and
        GPUs it asks for; None while the run's other steps hold them (`corral.core.jobspec.steps.claim`)."""
        with self._claiming:  # one server writes steps: what is free is read and taken at once
            for _ in range(_NUMBERING_TRIES):
                try:
                    with self.engine.begin() as conn:
                        rows = conn.execute(select(job_steps).where(job_steps.c.job_id == job_id,
                                                                    job_steps.c.restart == restart)).mappings().all()
                        steps = [_step(row) for row in rows]
                        gpus = claim(start, job_ref, job_cpus, job_gpus, [s for s in steps if s.state == RUNNING])
                        if gpus is None:
                            return None
                        step = JobStep(job_id=job_id, step_id=max((s.step_id for s in steps), default=-1) + 1,
                                       name=start.name, ntasks=start.ntasks, command=start.command, state=RUNNING,
                                       start_time=now, cpus=start.cpus, gpu_ids=gpus, overlap=start.overlap,
                                       restart=restart)
                        conn.execute(insert(job_steps).values(
                            job_id=job_id, restart=restart, step_id=step.step_id, name=step.name, ntasks=step.ntasks,
                            command=step.command, state=step.state, start_time=now, cpus=step.cpus,
                            gpu_ids=list(step.gpu_ids), overlap=step.overlap))
                        return step
                except IntegrityError:
                    continue
        raise RuntimeError(f"could not number a new step of job {job_id}")

    def close(self, job_id: int, step_id: int, end: StepEnd, now: float, restart: int = 0) -> JobStep:
        """The step of the job's run `restart`, ended as `end` says (a step ended already keeps its first end:
        the job's end may have cancelled it before its srun reported).

        Raises:
            NotFound: no such step.
        """
        with self.engine.begin() as conn:
            conn.execute(update(job_steps).where(
                job_steps.c.job_id == job_id, job_steps.c.restart == restart, job_steps.c.step_id == step_id,
                job_steps.c.state == RUNNING,
            ).values(state=end.state, exit_code=end.exit_code, signal=end.signal, end_time=now,
                     max_rss_mb=end.max_rss_mb, cpu_time_s=end.cpu_time_s))
            row = conn.execute(select(job_steps).where(job_steps.c.job_id == job_id, job_steps.c.restart == restart,
                                                       job_steps.c.step_id == step_id)).mappings().first()
        if row is None:
            raise NotFound(f"job {job_id} has no step {step_id}")
        return _step(row)

    def of_jobs(self, job_ids: Iterable[int]) -> dict[int, list[JobStep]]:
        """Each job's steps, in order (run by run)."""
        ids = list(job_ids)
        if not ids:
            return {}
        stmt = select(job_steps).where(job_steps.c.job_id.in_(ids)).order_by(job_steps.c.job_id, job_steps.c.restart,
                                                                          job_steps.c.step_id)
        out: dict[int, list[JobStep]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(stmt).mappings():
                out.setdefault(row["job_id"], []).append(_step(row))
        return out

    def end_running(self, job_id: int, now: float) -> int:
        """The job ended: its steps still running end CANCELLED (its cgroup took their processes with it).
        Returns how many did."""
        with self.engine.begin() as conn:
            return conn.execute(update(job_steps).where(job_steps.c.job_id == job_id, job_steps.c.state == RUNNING)
                                .values(state="CANCELLED", signal=9, exit_code=0, end_time=now)).rowcount


def _step(row: Mapping[Any, Any]) -> JobStep:  # a RowMapping
    values = {key: row[key] for key in _FIELDS}
    values["gpu_ids"] = tuple(values["gpu_ids"] or ())
    return JobStep(**values)
