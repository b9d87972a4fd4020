"""Who watches the jobs (`JobWatchers`): the live views, which look for a change count that goes
up; the parts told when a job ends (tracking, the monitor); the requests waiting for one to end
(`corral wait`); and the mailer of sbatch's --mail-type. The job service tells them; they never change a job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from corral.core.jobspec.job import Job
from corral.server.job_mail import JobMail


class JobWatchers:
    def __init__(self, mail: JobMail) -> None:
        self.mail = mail  # started, ended, requeued and near their limits: the job's owner is told
        self.generation = 0  # goes up whenever jobs change: the dashboard's live view watches it
        self.on_job_ended: list[Callable[[Job], None]] = []  # e.g. tracking ends the job's runs
        self._waiters: dict[int, list[asyncio.Future[Job]]] = {}

    def changed(self) -> None:
        self.generation += 1

    async def wait_for_end(self, job_id: int, timeout: float, current: Callable[[int], Job]) -> Job:
        """The job once it has ended, or `current(job_id)` after `timeout` seconds."""
        future: asyncio.Future[Job] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(future)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return current(job_id)
        finally:
            waiters = self._waiters.get(job_id)
            if waiters and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._waiters[job_id]

    def let_go(self, job: Job) -> None:
        """The service let go of `job`: if it ended, its listeners hear of it; its waiters get it as it is."""
        if job.state.is_terminal():
            for listener in self.on_job_ended:
                listener(job)
        for future in self._waiters.pop(job.id, []):
            if not future.done():
                future.set_result(job)
