"""The tracking service: every change to runs, metrics and artifacts, and the reads.

Writes go to one writer thread that commits whatever has arrived together in one transaction
(group commit: one fsync for many batches), so logging never waits on the scheduler's event
loop and the loop never waits on logging. A request is answered once its transaction has
committed. Reads run in the default thread pool on their own connections.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from sqlalchemy import Connection

from corral.core.tracking import run_requests as R
from corral.core.jobspec.job import Job
from corral.core.tracking.metric_series import Points
from corral.core.tracking.metrics_batch import MetricsBatch, check_key, parse_metrics_batch
from corral.core.tracking.nonfinite import json_number
from corral.core.tracking.run_filters import parse_filter
from corral.core.tracking.run_states import RUN_STATES
from corral.core.jobspec.states import JobState
from corral.errors import CorralError, InvalidRequest
from corral.store.runs import RunStore

log = logging.getLogger("corral.tracking")

MAX_SERIES_POINTS = 100_000
MAX_GROUP = 256  # requests committed together at most


@dataclass
class _Write:
    prepare: Callable[[], Any]  # pure work (parsing) done on the writer thread, outside the transaction
    apply: Callable[[Connection, Any], Any]
    future: Future[Any]
    prepared: Any = None


class TrackingService:
    def __init__(self, store: RunStore, *, user: str, job_info: Callable[[int], dict[str, Any] | None] = lambda _: None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.user = user
        self.job_info = job_info
        self.clock = clock
        # runs whose metrics or state changed (after the commit, on the loop): the dashboard's live view
        self.on_metrics: list[Callable[[list[dict[str, Any]]], None]] = []
        self._owners: dict[str, tuple[int, str]] = {}
        self._pending: list[_Write] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._writer, name="corral-tracking", daemon=True)
        self._thread.start()

    # -- writes -----------------------------------------------------------------------------------

    async def owner(self, ref: str) -> tuple[int, str]:
        """(id, owner) of the run `ref` names. A run never changes hands, so the answer is kept where
        the reference will always name the same run; act on the id, not on `ref`, after checking."""
        known = self._owners.get(ref)
        if known is None:
            run_id, user, stable = await self._read(lambda conn: self.store.owner(conn, ref))
            known = (run_id, user)
            if stable:
                if len(self._owners) > 100_000:
                    self._owners.clear()
                self._owners[ref] = known
        return known

    async def create_run(self, body: Any, user: str | None = None,
                         may_take: Callable[[str], bool] = lambda owner: True,
                         check_job: Callable[[dict[str, Any]], None] = lambda job: None) -> tuple[dict[str, Any], bool]:
        """(the run, created?): an existing run is returned for a known uid or resume key.

        `user`: who creates it (the caller), else the server's user; `may_take`: whether the caller
        may resume a run of that owner's; `check_job`: raises unless the caller may track a run of
        this job (given as `job_info` tells it). A run names only a job that exists: a job id not
        yet given out would otherwise be claimed for whoever gets it next.

        Raises:
            InvalidRequest: a bad field, or a job that does not exist. Forbidden: from `check_job`
            or `may_take`.
        """
        request = R.parse_run_request(body)
        job = None
        if request.job_id is not None:
            job = self.job_info(request.job_id)
            if job is None:
                raise InvalidRequest("job_id", f"job {request.job_id} does not exist",
                                     "name a job of yours that was submitted, or leave job_id out")
            check_job(job)

        def apply(conn: Connection, _: Any) -> tuple[dict[str, Any], bool]:
            run_id, resumed = self.store.create(conn, request, user=user or self.user, now=self.clock(), job=job,
                                                may_take=may_take)
            run = self.store.get(conn, run_id)
            run["resumed"] = resumed
            return run, not resumed

        run, created = await self._write(apply)
        if created:
            self._changed(run)
        return run, created

    async def log_metrics(self, ref: str, body: bytes) -> dict[str, Any]:
        def prepare() -> MetricsBatch:
            try:
                decoded = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise InvalidRequest("body", f"is not JSON: {exc}", "send a JSON object") from None
            return parse_metrics_batch(decoded, self.clock())

        def apply(conn: Connection, batch: MetricsBatch) -> dict[str, Any]:
            run_id = self.store.resolve(conn, ref)
            done = self.store.append(conn, run_id, batch)
            last = max((int(p.steps[-1]) for p in batch.series.values() if len(p)), default=None)
            job_id, uid = self.store.identity(conn, run_id)
            return {"accepted": done.accepted, "skipped": done.skipped, "duplicate": done.duplicate,
                    "_run": {"id": run_id, "uid": uid, "job_id": job_id, "last_step": last}}

        result = await self._write(apply, prepare)
        changed = result.pop("_run")
        if result["accepted"]:
            for listener in self.on_metrics:
                listener([changed])
        return result

    async def log_params(self, ref: str, body: Any) -> dict[str, Any]:
        params = R.parse_params(body)
        return await self._write(lambda conn, _: self._then_get(conn, ref, lambda i: self.store.merge_params(conn, i, params)))

    async def change_tags(self, ref: str, body: Any) -> dict[str, Any]:
        add, remove = R.parse_tag_change(body)
        return await self._write(lambda conn, _: self._then_get(conn, ref, lambda i: self.store.change_tags(conn, i, add, remove)))

    async def finish(self, ref: str, body: Any) -> dict[str, Any]:
        state, end, start = R.parse_finish(body)
        run = await self._write(lambda conn, _: self._then_get(
            conn, ref, lambda i: self.store.finish(conn, i, state, end if end is not None else self.clock(), start)))
        self._changed(run)
        return run

    def _changed(self, run: dict[str, Any]) -> None:
        for listener in self.on_metrics:
            listener([{"id": run["id"], "uid": run["uid"], "job_id": run["job_id"], "last_step": run["last_step"],
                       "state": run["state"]}])

    async def put_artifacts(self, ref: str, body: Any) -> list[dict[str, Any]]:
        items = R.parse_artifacts(body)

        def apply(conn: Connection, _: Any) -> list[dict[str, Any]]:
            ids = self.store.put_artifacts(conn, self.store.resolve(conn, ref), items, self.clock())
            return self.store.artifacts_by_id(conn, ids)

        return await self._write(apply)

    async def link_blob(self, run_id: int, *, path: str, type_: str, size: int, sha256: str, step: int | None = None,
                        caption: str | None = None) -> dict[str, Any]:
        """Link a blob of the artifact store to the run under `path` (corral.tracking.artifacts)."""
        def apply(conn: Connection, _: Any) -> dict[str, Any]:
            found = self.store.link_blob(conn, run_id, path=path, type_=type_, size=size, sha256=sha256, now=self.clock(),
                                         step=step, caption=caption)
            return self.store.artifacts_by_id(conn, [found])[0]

        return await self._write(apply)

    async def unlink_uploaded(self, run_id: int, path: str) -> list[str]:
        """Remove the run's uploaded artifact `path` and those under it; the sha256 of the blobs they
        linked (for the store to drop those nothing links any more)."""
        shas: list[str] = await self._write(lambda conn, _: self.store.unlink_uploaded(conn, run_id, path))
        return shas

    async def change_run(self, ref: str, body: Any) -> dict[str, Any]:
        """Rename, annotate, archive or restore the run (the fields given)."""
        changes = R.parse_run_change(body)
        run = await self._write(lambda conn, _: self._then_get(conn, ref, lambda i: self.store.change_run(conn, i, changes)))
        self._changed(run)
        return run

    async def delete_run(self, run_id: int) -> list[str]:
        """Delete the run and what it holds; the sha256 of the blobs it linked (for the store to drop
        those no other run links)."""
        shas: list[str] = await self._write(lambda conn, _: self.store.delete_run(conn, run_id))
        self._owners = {ref: known for ref, known in self._owners.items() if known[0] != run_id}
        return shas

    def job_ended(self, job: Job) -> None:
        """Called when a job ends: its runs still marked running ended with it (a script that
        never called finish, or was killed): finished if the job completed, else crashed."""
        state = "finished" if job.state is JobState.COMPLETED else "crashed"
        end = job.end_time or self.clock()
        write = _Write(lambda: None, lambda conn, _: self.store.end_job_runs(conn, job.id, state, end), Future())

        def report(done: Future[Any]) -> None:
            if done.exception():
                log.warning("could not end the runs of job %d: %s", job.id, done.exception())

        write.future.add_done_callback(report)
        self._enqueue(write)

    def append_system_metrics(self, batches: Mapping[int, MetricsBatch], timeout_s: float = 60.0) -> None:
        """Append the monitor's `system/...` points to runs by id, from the monitor's thread (not the
        event loop): it returns once they are committed, so the charts' `runs` event never comes early.

        Raises:
            CorralError: the server is shutting down, or the write failed; TimeoutError: not committed in time.
        """
        if not batches:
            return

        def apply(conn: Connection, _: Any) -> None:
            for run_id, batch in batches.items():
                self.store.append(conn, run_id, batch)

        write = _Write(lambda: None, apply, Future())
        self._enqueue(write)
        write.future.result(timeout_s)

    async def transact(self, apply: Callable[[Connection], Any]) -> Any:
        """Run `apply` in the writer's next group commit and return what it returns (the MLflow
        routes' writes: `corral.tracking.compat.mlflow_tracking`). It must check before it writes, as the
        store's methods do: a CorralError it raises leaves the shared transaction untouched."""
        return await self._write(lambda conn, _: apply(conn))

    async def read(self, fn: Callable[[Connection], Any]) -> Any:
        """`fn` on a connection of its own, off the event loop."""
        return await self._read(fn)

    def notify(self, changed: list[dict[str, Any]]) -> None:
        """Tell the live views that these runs changed (id, uid, job_id, last_step, state)."""
        for listener in self.on_metrics:
            listener(changed)

    def _then_get(self, conn: Connection, ref: str, change: Callable[[int], None]) -> dict[str, Any]:
        run_id = self.store.resolve(conn, ref)
        change(run_id)
        return self.store.get(conn, run_id)

    async def _write(self, apply: Callable[[Connection, Any], Any], prepare: Callable[[], Any] = lambda: None) -> Any:
        write = _Write(prepare, apply, Future())
        self._enqueue(write)
        return await asyncio.wrap_future(write.future)

    def _enqueue(self, write: _Write) -> None:
        with self._cond:
            if self._closed:
                write.future.set_exception(CorralError("the server is shutting down; try again"))
                return
            self._pending.append(write)
            self._cond.notify()

    def _writer(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
            ready = []
            for write in group:
                # a request whose client went away (its task was cancelled) is not applied
                if not write.future.set_running_or_notify_cancel():
                    continue
                try:
                    write.prepared = write.prepare()
                    ready.append(write)
                except BaseException as exc:  # noqa: BLE001 - the request's own answer
                    write.future.set_exception(exc)
            try:
                if ready:
                    self._commit(ready)
            except Exception:  # noqa: BLE001 - the writer must outlive any one group
                log.exception("tracking writer failed on a group of %d requests", len(ready))
                for write in ready:
                    if not write.future.done():
                        write.future.set_exception(CorralError("internal error while saving; try again"))

    def _commit(self, group: list[_Write]) -> None:
        results: list[tuple[_Write, bool, Any]] = []
        try:
            with self.store.engine.begin() as conn:
                for write in group:
                    try:
                        results.append((write, True, write.apply(conn, write.prepared)))
                    except CorralError as exc:  # raised before the request wrote anything
                        results.append((write, False, exc))
        except Exception as exc:  # noqa: BLE001
            if len(group) == 1:
                log.warning("tracking write failed: %s", exc)
                group[0].future.set_exception(exc)
                return
            for write in group:  # one bad request must not sink the others: each alone
                self._commit([write])
            return
        for write, ok, value in results:
            if ok:
                write.future.set_result(value)
            else:
                write.future.set_exception(value)

    def close(self) -> None:
        """Commit what was acknowledged-to-be and stop the writer."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=30)

    # -- reads ------------------------------------------------------------------------------------

    async def _read(self, fn: Callable[[Connection], Any]) -> Any:
        def run() -> Any:
            with self.store.engine.connect() as conn:
                return fn(conn)

        return await asyncio.to_thread(run)

    async def get_run(self, ref: str) -> dict[str, Any]:
        return await self._read(lambda conn: self.store.get(conn, self.store.resolve(conn, ref)))

    async def search(self, *, project: str | None, tag: str | None, state: str | None, job_id: int | None,
                     where: list[str], limit: int, archived: bool | None = False) -> list[dict[str, Any]]:
        if state is not None and state not in RUN_STATES:
            raise InvalidRequest("state", f"{state!r} is not a run state", f"use one of {', '.join(RUN_STATES)}")
        R.check_search_terms(project, tag)
        filters = [parse_filter(expr) for expr in where]
        return await self._read(lambda conn: self.store.search(
            conn, project=project, tag=tag, state=state, job_id=job_id, filters=filters, limit=limit, archived=archived))

    async def runs_of_jobs(self, job_ids: list[int]) -> list[dict[str, Any]]:
        """The runs these jobs logged (a sweep's tasks'), with their metrics' summaries."""
        return await self._read(lambda conn: self.store.of_jobs(conn, job_ids))

    async def projects(self) -> list[dict[str, Any]]:
        return await self._read(self.store.projects)

    async def artifacts(self, ref: str, *, type_: str | None, deleted: bool) -> list[dict[str, Any]]:
        return await self._read(lambda conn: self.store.artifacts(
            conn, self.store.resolve(conn, ref), type_=type_, deleted=deleted))

    async def artifact(self, run_id: int, path: str) -> dict[str, Any]:
        return await self._read(lambda conn: self.store.artifact(conn, run_id, path))

    async def uploaded(self, run_id: int, path: str) -> list[tuple[str, int]]:
        """(path, size) of the run's uploaded artifacts at `path` or under it ("": all of them)."""
        return await self._read(lambda conn: self.store.uploaded(conn, run_id, path))

    async def blob_linked(self, sha256: str, *, user: str | None = None) -> bool:
        return await self._read(lambda conn: self.store.blob_linked(conn, sha256, user=user))

    async def stored_bytes(self, user: str) -> int:
        return await self._read(lambda conn: self.store.stored_bytes(conn, user))

    async def series(self, ref: str, key: str, *, start: int | None, end: int | None, max_points: int) -> bytes:
        """The series as the JSON the API returns (built here, off the event loop)."""
        _check_series_request([key], start, end, max_points)

        def read(conn: Connection) -> bytes:
            count, downsampled, points = self.store.series(
                conn, self.store.resolve(conn, ref), key, start=start, end=end, max_points=max_points)
            return series_json(key, count, downsampled, points)

        return await self._read(read)

    async def series_many(self, ref: str, keys: list[str], *, start: int | None, end: int | None,
                          max_points: int) -> bytes:
        """Several series of one run in one answer (`{"series": [...]}`, in the order asked): a chart
        page needs one request, not one per chart queued behind the browser's six connections."""
        if not 1 <= len(keys) <= MAX_BATCH_KEYS:
            raise InvalidRequest("key", f"{len(keys)} keys given", f"ask for 1 to {MAX_BATCH_KEYS} keys at once")
        _check_series_request(keys, start, end, max_points)

        def read(conn: Connection) -> bytes:
            run_id = self.store.resolve(conn, ref)
            parts = []
            for key in dict.fromkeys(keys):
                count, downsampled, points = self.store.series(conn, run_id, key, start=start, end=end,
                                                               max_points=max_points)
                parts.append(series_json(key, count, downsampled, points))
            return b'{"series":[' + b",".join(parts) + b"]}"

        return await self._read(read)


MAX_BATCH_KEYS = 100


def _check_series_request(keys: list[str], start: int | None, end: int | None, max_points: int) -> None:
    for key in keys:
        check_key(key, "key")
    if not 2 <= max_points <= MAX_SERIES_POINTS:
        raise InvalidRequest("max_points", f"{max_points} is out of range", f"ask for 2 to {MAX_SERIES_POINTS:,} points")
    if start is not None and end is not None and start > end:
        raise InvalidRequest("start", f"{start} is after end {end}", "give start <= end")


def series_json(key: str, count: int, downsampled: bool, points: Points) -> bytes:
    values = points.values
    if np.isfinite(values).all():
        value_list: list[Any] = values.tolist()
    else:
        value_list = [json_number(v) for v in values.tolist()]
    return orjson.dumps({
        "key": key, "count": count, "downsampled": downsampled, "steps": points.steps.tolist(), "values": value_list,
        "times": points.times.tolist(),
    })
