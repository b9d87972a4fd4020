"""Sweeps submitted and read: parameters expanded into one job array (`corral.core.tracking.sweeps`), and the sweep's
definition stored beside the array, so that every task's values can be shown with its state and its run."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from corral.core.tracking import sweeps as S
from corral.core.access.identity import AccessPolicy, Caller
from corral.core.jobspec.job import Job
from corral.errors import InvalidRequest, NotFound
from corral.server.submission import Submissions
from corral.store.sweeps import SweepStore

SWEEP_FIELDS = frozenset({"params", "method", "samples", "seed", "concurrency", "metric"})
# what a sweep writes itself: its script runs each task's command, as an array of its tasks
_WRITTEN = ("script", "script_args", "options", "condor", "array", "interactive")
MAX_METRIC = 200


class Sweeps:
    def __init__(self, store: SweepStore, submissions: Submissions, *, access: AccessPolicy,
                 clock: Callable[[], float]) -> None:
        """`submissions`: where a sweep's array is submitted; `access`: who may start one."""
        self.store = store
        self.submissions = submissions
        self.access = access
        self.clock = clock

    async def submit(self, body: Mapping[str, Any], caller: Caller) -> tuple[Job, dict[str, Any]]:
        """Submit a sweep as `caller`: the job request's fields plus `params`, `method`, `samples`, `seed`,
        `concurrency` (the array's %N) and `metric` (the one `sweep show` ranks by; else the first logged).

        Returns:
            The array job, and the sweep's definition as stored.

        Raises:
            InvalidRequest: naming the field (a parameter, the command's `{name}`, the job's own fields).
        """
        self.access.require(caller, "submit", "starting a sweep")
        request = {k: v for k, v in body.items() if k not in SWEEP_FIELDS and v is not None}
        for field in _WRITTEN:
            if field in request:
                raise InvalidRequest(field, "a sweep writes its own batch script and array",
                                     "give the command to run (with {name} for each parameter) in `command`")
        command = request.pop("command", None)
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise InvalidRequest("command", "must be the command to run, as a list of words",
                                 'e.g. ["python", "train.py", "--lr", "{lr}"]')
        params = S.parse_params(body.get("params") or [], "params")
        S.check_template(command, params, "command")
        samples = body.get("samples")
        if samples is not None:
            samples = _whole(samples, "samples")
        method = S.choose_method(params, body.get("method"), samples)
        seed = _whole(body["seed"], "seed") if body.get("seed") is not None else secrets.randbelow(2**31)
        concurrency = _whole(body["concurrency"], "concurrency") if body.get("concurrency") is not None else None
        metric = body.get("metric")
        if metric is not None and (not isinstance(metric, str) or not 0 < len(metric) <= MAX_METRIC):
            raise InvalidRequest("metric", f"must be a metric's name, up to {MAX_METRIC} characters")
        tasks = S.expand(params, method, samples, seed)
        request["script"] = S.task_script(command, tasks, params)
        request["array"] = S.array_text(len(tasks), concurrency)
        request.setdefault("name", f"sweep-{_program(command)}")
        job = await self.submissions.submit(request, caller.user, caller.is_admin)
        definition: dict[str, Any] = {"user": caller.user, "method": method, "seed": seed if method == "random" else None,
                      "params": [p.to_dict() for p in params], "command": list(command), "tasks": tasks,
                      "metric": metric}
        await asyncio.to_thread(lambda: self.store.insert(job.id, now=self.clock(), **definition))
        return job, definition

    def copy(self, from_job: int, to: Job, now: float) -> None:
        """A sweep run again whole is the same sweep: its definition copied to the new array."""
        found = self.store.get(from_job)
        if found is None or not to.is_array:
            return
        self.store.insert(to.id, user=to.spec.user, method=found["method"], seed=found["seed"],
                          params=found["params"], command=found["command"], tasks=found["tasks"],
                          metric=found["metric"], now=now)

    def get(self, job_id: int) -> dict[str, Any]:
        """The sweep whose array is job `job_id`.

        Raises:
            NotFound: no such sweep.
        """
        found = self.store.get(job_id)
        if found is None:
            raise NotFound(f"no sweep {job_id} (a sweep's id is its array job's)")
        return found


def _program(command: list[str]) -> str:
    words = [a for a in command if "{" not in a]
    name = os.path.basename(words[-1] if words and command[0] in ("python", "python3") and len(words) > 1
                            else command[0])
    return name[:60] or "task"


def _whole(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidRequest(field, f"must be a whole number, got {value!r:.30}")
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequest(field, f"must be a whole number, got {value!r:.30}") from None
    if not 0 <= number < 2**63:
        raise InvalidRequest(field, f"must be between 0 and 2**63-1, got {number}")
    return number
