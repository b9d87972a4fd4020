"""A submit's forecast: the request built and admitted exactly as a submit would be, then the pure forecast
(`corral.core.scheduling.forecast`) over a snapshot of the queue, the running jobs and the usage ledger. Nothing is
stored and nothing changes: the job is never queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from corral.backends.base import Backend
from corral.core.jobspec.dependency import Verdict, evaluate
from corral.core.scheduling.forecast import Forecast, forecast
from corral.core.units.iso_times import iso_utc
from corral.core.scheduling.pending import PendingJob
from corral.core.jobspec.spec import JobSpec
from corral.errors import Conflict, Unsatisfiable
from corral.server.job_table import JobTable
from corral.server.scheduling import SchedulingPass
from corral.server.submission import Submissions


@dataclass(frozen=True, slots=True)
class SubmitForecast:
    """What a forecast answers: the job as it would be admitted, the id it would get, and when it would start."""

    spec: JobSpec
    job_id: int
    now: float
    forecast: Forecast


class Forecasts:
    def __init__(self, backend: Backend, submissions: Submissions, table: JobTable,
                 scheduling: SchedulingPass, *, clock: Callable[[], float]) -> None:
        """`submissions`: how a submit is built and admitted; `scheduling`: the pass whose running jobs, usage,
        drains and reservations the forecast reads."""
        self.backend = backend
        self.submissions = submissions
        self.table = table
        self.scheduling = scheduling
        self.clock = clock

    async def forecast(self, request: Mapping[str, Any], user: str, privileged: bool) -> SubmitForecast:
        """When the job `request` describes would start if `user` submitted it now.

        Raises:
            InvalidRequest, Conflict: as the submit would (a bad field, a partition the user may not use, the QoS's
                submit limit); a request no node could ever run is answered, not raised (the forecast says why).
            Conflict: the backend schedules its jobs itself (Slurm): its own `sbatch --test-only` answers.
        """
        capabilities = self.backend.capabilities
        if capabilities.schedules_itself:
            raise Conflict(f"jobs here are scheduled by the {capabilities.name} backend, which corral cannot "
                           "forecast; ask it (sbatch --test-only)")
        submissions = self.submissions
        spec = submissions.prepare(request, user, privileged)
        unsatisfiable = None
        try:
            submissions.check_request(spec)
        except Unsatisfiable as exc:
            unsatisfiable = exc
        spec = submissions.place(spec)
        now = self.clock()
        table, scheduling = self.table, self.scheduling
        job_id = table.store.next_id()
        waiting, _ = table.waiting_on_dependencies()
        queue = [job for job in table.queue.values() if job.job_id not in waiting]
        running = list(scheduling.holding({**scheduling.running.allocations, **scheduling.rated(now)}.values()))
        usage = scheduling.usage(now)
        # its --begin is a note (below), not a wait: the forecast says when it could start once eligible
        job = PendingJob(job_id, spec.request, spec.user, spec.partition, spec.qos, spec.time_limit_s, False, now,
                         spec.nice, spec.preemptible, None, spec.priority, spec.time_min_s, spec.deadline,
                         spec.reservation)
        notes = self._conditions(spec)
        # the pass is pure and reads only this snapshot: off the event loop, which a long queue would hold up
        result = await asyncio.to_thread(forecast, job, nodes=scheduling.nodes, running=running, queue=queue,
                                         usage=usage, now=now, config=scheduling.config, unsatisfiable=unsatisfiable,
                                         drained=scheduling.drained, shareable=scheduling.shareable,
                                         reservations=scheduling.reservations)
        if notes:
            result = replace(result, notes=(*notes, *result.notes))
        return SubmitForecast(spec, job_id, now, result)

    def _conditions(self, spec: JobSpec) -> tuple[str, ...]:
        """What would keep the job waiting besides the machine: the forecast assumes them met."""
        notes = []
        if spec.begin_time is not None and spec.begin_time > self.clock():
            notes.append(f"--begin: it would not start before {iso_utc(spec.begin_time)}, waiting with reason "
                         "BeginTime until then: this is when it could start once that time has come")
        if spec.hold:
            notes.append("submitted held (--hold), it would wait until released: this is when it would start if "
                         "released now")
        dependency = spec.parsed_dependency
        if dependency is not None:
            alone = not any(job.spec.name == spec.name and job.spec.user == spec.user
                            for job in self.table.active.values())
            verdict = evaluate(dependency, self.table.state_of, alone)
            if verdict is Verdict.WAITING:
                notes.append(f"it would wait for its dependency ({dependency.text}) too: this is when it would start "
                             "if that were met now")
            elif verdict is Verdict.NEVER:
                notes.append(f"its dependency ({dependency.text}) can never be met: it would never start")
        if spec.array is not None:
            notes.append(f"an array ({spec.array}): this is its first task; the others follow as GPUs free up")
        return tuple(notes)
