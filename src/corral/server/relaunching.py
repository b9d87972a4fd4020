"""Running a job again (`corral resubmit`, the dashboard's "Run again"): its spec as a request, the caller's
changes over it, submitted as the job's owner, linked to the job it came from (`parent`).

A rerun is the owner's job, whoever asks: it runs their command in their environment (their `PATH`), so it runs
as them, never as an admin or root who pressed the button; their accounts, limits, fair share and directories
apply, built from scratch by `build_spec` so that nothing the first submit was allowed carries over unchecked.
Only its owner or an admin may run a job again (`AccessPolicy.check_rerun`), an admin only after naming the owner
(`check_owner_confirmed`), and the new job's timeline says who asked (`RUN_AGAIN`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from corral.core.access.identity import AccessPolicy, Caller
from corral.core.jobspec.job import Job
from corral.core.jobspec.resubmit import check_owner_confirmed, request_of, with_changes
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.errors import InvalidRequest
from corral.server.queries import JobQueries
from corral.server.submission import Submissions
from corral.server.sweeping import Sweeps

_COMMAND_FIELDS = ("command", "script", "script_args", "options", "condor")


class Relaunches:
    def __init__(self, queries: JobQueries, submissions: Submissions, sweeps: Sweeps, *, access: AccessPolicy,
                 config: SchedulerConfig, clock: Callable[[], float]) -> None:
        """`access`: who may run whose job again; `config`: the defaults a rerun gets again."""
        self.queries = queries
        self.submissions = submissions
        self.sweeps = sweeps
        self.access = access
        self.config = config
        self.clock = clock

    async def resubmit(self, ref: str, changes: Mapping[str, Any], caller: Caller, confirm_owner: object = None) -> Job:
        """Submit job `ref` again as its owner, for `caller`, with `changes` (request fields) laid over its own;
        `confirm_owner`: the owner's name, which a caller other than the owner must send.

        A task of an array (`12_3`) runs again alone, as an array of that one task; a sweep run again whole,
        with its command unchanged, is a sweep again (its parameters copied).

        Raises:
            NotFound; Forbidden: not the owner or an admin; InvalidRequest: a bad change, named by its field, or
            another's job without `confirm_owner`.
        """
        if not isinstance(changes, Mapping):
            raise InvalidRequest("changes", "must be an object of request fields", 'send {} or {"time": "2h"}')
        original = self.queries.resolve(ref)
        owner = original.spec.user
        self.access.check_rerun(caller, owner, f"running job {ref} again")
        check_owner_confirmed(ref, owner, caller.user, confirm_owner)
        _, _, task = ref.partition("_")
        task_id = int(task) if task else original.array_task_id
        base = request_of(original.spec, task_id=task_id)
        for key, default in (("partition", self.config.default_partition), ("qos", self.config.default_qos)):
            if base.get(key) == default:  # filled in by admission: the rerun gets today's default again
                del base[key]
        parent_id = original.array_job_id if original.array_job_id is not None and task_id is None else original.id
        job = await self.submissions.submit(with_changes(base, changes), owner, caller.is_admin, parent_id, caller.user)
        if task_id is None and not any(field in changes for field in _COMMAND_FIELDS):
            self.sweeps.copy(parent_id, job, self.clock())
        return job
