"""Submits committed together (`GroupCommit`): one insert runs in the database thread at a time, and the
submits that arrive meanwhile go together in the next one. The loop keeps serving while SQLite (or
PostgreSQL) commits; one bad row never fails the others it shared a transaction with."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any

from corral.core.jobspec.job import Job
from corral.core.jobspec.spec import JobSpec
from corral.store.jobs import JobStore

log = logging.getLogger("corral.server")

Note = tuple[str, Mapping[str, Any]] | None
"""An event the new job's timeline starts with (`JobStore.insert`)."""
Pending = tuple[JobSpec, Note, "asyncio.Future[Job]"]


class GroupCommit:
    def __init__(self, store: JobStore, db_thread: Executor, *, clock: Callable[[], float],
                 inserted: Callable[[list[Job]], None]) -> None:
        """`inserted`: called on the loop with the jobs of each committed batch, before their submitters hear."""
        self.store = store
        self.db_thread = db_thread
        self.clock = clock
        self._inserted_jobs = inserted
        self._waiting: list[Pending] = []
        self._in_flight = False
        self._retry_alone: list[Pending] = []

    async def insert(self, spec: JobSpec, note: Note = None) -> Job:
        """The job once its row is committed (with `note`, in the same transaction)."""
        future: asyncio.Future[Job] = asyncio.get_running_loop().create_future()
        self._waiting.append((spec, note, future))
        if not self._in_flight:
            self._flush()
        return await future

    def _flush(self, batch: list[Pending] | None = None) -> None:
        if batch is None:
            batch, self._waiting = self._waiting, []
        self._in_flight = True
        specs = [spec for spec, _, _ in batch]
        notes = [note for _, note, _ in batch]
        done = asyncio.get_running_loop().run_in_executor(self.db_thread, self.store.insert, specs, self.clock(), notes)
        done.add_done_callback(lambda result: self._done(batch, result))

    def _done(self, batch: list[Pending], result: asyncio.Future[list[Job]]) -> None:
        self._in_flight = False
        error = result.exception()
        if error is not None and len(batch) > 1:
            self._retry_alone.extend(batch)  # each again, alone
        elif error is not None:
            log.error("insert failed: %s", error)
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(error)
        else:
            jobs = result.result()
            self._inserted_jobs(jobs)
            for job, (_, _, future) in zip(jobs, batch):
                if not future.done():
                    future.set_result(job)
        if self._retry_alone:
            self._flush([self._retry_alone.pop(0)])
        elif self._waiting:
            self._flush()
