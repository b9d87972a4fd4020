"""Reading and writing runs and their projects; `RunStore` also holds a run's metric series
(`run_metrics.RunMetrics`) and artifacts (`run_artifacts.RunArtifacts`).

Write methods take an open connection: the tracking service groups many requests into one
transaction (one fsync for many batches). Each write method reads and checks everything it
needs before its first write, so a refused request leaves the shared transaction untouched.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, delete, exists, func, insert, select, update

from corral.core.tracking.nonfinite import json_number
from corral.core.tracking.run_filters import RunFilter
from corral.core.tracking.run_names import default_name
from corral.core.tracking.run_requests import RunRequest
from corral.core.units.units import is_number
from corral.errors import Forbidden, NotFound
from corral.store.db import inserted_id
from corral.store.run_artifacts import RunArtifacts
from corral.store.run_metrics import RunMetrics
from corral.store.schema import artifacts, metric_chunks, metric_series, projects, run_batches, run_tags, runs

_STAT_COLUMN = {"last": metric_series.c.last_value, "min": metric_series.c.min_value, "max": metric_series.c.max_value}


class RunStore(RunMetrics, RunArtifacts):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- writes (inside the caller's transaction) -------------------------------------------------

    def create(self, conn: Connection, request: RunRequest, *, user: str, now: float,
               job: dict[str, Any] | None, may_take: Callable[[str], bool] = lambda owner: True) -> tuple[int, bool]:
        """The run's id and whether it was resumed: an existing run with this uid is returned as
        is, the owner's run with this resume key is set running again, else a new run is made.

        The run's owner is its job's (`job`), else `user`. A resume key is its owner's alone: the
        same key of two owners names two runs.

        Raises:
            Forbidden: the uid names a run whose owner `may_take` refuses.
        """
        if request.uid is not None:
            found = conn.execute(select(runs.c.id, runs.c.user).where(runs.c.uid == request.uid)).first()
            if found is not None:
                _check_taken(found, may_take, user)
                return found.id, True
        job = job or {}
        owner = job.get("user") or user
        if request.resume_key is not None:
            found = conn.execute(select(runs.c.id, runs.c.user).where(
                runs.c.user == owner, runs.c.resume_key == request.resume_key)).first()
            if found is not None:
                _check_taken(found, may_take, user)
                conn.execute(update(runs).where(runs.c.id == found.id).values(
                    state="running", end_time=None, resumes=runs.c.resumes + 1))
                return found.id, True
        project_id = self._project_id(conn, request.project, now)
        uid = request.uid or secrets.token_hex(8)
        values = {
            "uid": uid, "project_id": project_id, "name": request.name or self._default_name(conn, project_id, request, uid),
            "user": owner,
            "state": "running", "config": request.config, "tags": list(request.tags), "job_id": request.job_id,
            "node": request.node or job.get("node"), "gpu_type": request.gpu_type or job.get("gpu_type"),
            "git_commit": request.git_commit, "resume_key": request.resume_key,
            "start_time": request.start_time if request.start_time is not None else now, "end_time": None,
        }
        run_id = inserted_id(conn.execute(insert(runs).values(**values)))
        if request.tags:
            conn.execute(insert(run_tags), [{"run_id": run_id, "tag": t} for t in request.tags])
        return run_id, False

    def _default_name(self, conn: Connection, project_id: int, request: RunRequest, uid: str) -> str:
        recent: list[Any] = list(conn.execute(select(runs.c.config).where(runs.c.project_id == project_id)
                                   .order_by(runs.c.id.desc()).limit(20)).scalars())
        count = conn.execute(select(func.count()).select_from(runs).where(runs.c.project_id == project_id)).scalar_one()
        return default_name(request.config, [c for c in recent if isinstance(c, dict)], seed=uid, number=int(count) + 1)

    def _project_id(self, conn: Connection, name: str, now: float) -> int:
        found = conn.execute(select(projects.c.id).where(projects.c.name == name)).scalar()
        if found is not None:
            return int(found)
        return inserted_id(conn.execute(insert(projects).values(name=name, created=now)))

    def merge_params(self, conn: Connection, run_id: int, params: dict[str, Any]) -> None:
        config = self._require(conn, run_id).config
        conn.execute(update(runs).where(runs.c.id == run_id).values(config={**config, **params}))

    def change_tags(self, conn: Connection, run_id: int, add: Sequence[str], remove: Sequence[str]) -> None:
        tags = list(self._require(conn, run_id).tags)
        new = [t for t in tags if t not in remove] + [t for t in add if t not in tags and t not in remove]
        if new == tags:
            return
        conn.execute(update(runs).where(runs.c.id == run_id).values(tags=new))
        conn.execute(delete(run_tags).where(run_tags.c.run_id == run_id))
        if new:
            conn.execute(insert(run_tags), [{"run_id": run_id, "tag": t} for t in new])

    def finish(self, conn: Connection, run_id: int, state: str, end_time: float, start_time: float | None = None) -> None:
        """End a run; `start_time` corrects its start (an import knows the real one only at the end).

        The end is never before the start: a client's clock behind the server's (which stamped the
        start) would otherwise give the run a negative duration.
        """
        self._require(conn, run_id)
        if start_time is None:
            start_time = conn.execute(select(runs.c.start_time).where(runs.c.id == run_id)).scalar_one()
        conn.execute(update(runs).where(runs.c.id == run_id).values(
            state=state, start_time=start_time, end_time=max(end_time, start_time)))

    def end_job_runs(self, conn: Connection, job_id: int, state: str, end_time: float) -> list[int]:
        """Runs of a job that ended while they were still running take `state` (ended no earlier than
        they started); their ids."""
        rows: list[tuple[int, float]] = [(row.id, row.start_time) for row in conn.execute(
            select(runs.c.id, runs.c.start_time).where(runs.c.job_id == job_id, runs.c.state == "running"))]
        for run_id, start_time in rows:
            conn.execute(update(runs).where(runs.c.id == run_id).values(state=state, end_time=max(end_time, start_time)))
        return [run_id for run_id, _ in rows]

    def change_run(self, conn: Connection, run_id: int, changes: dict[str, Any]) -> None:
        """Set the run's name, notes or archived flag (those given)."""
        self._require(conn, run_id)
        if changes:
            conn.execute(update(runs).where(runs.c.id == run_id).values(**changes))

    def delete_run(self, conn: Connection, run_id: int) -> list[str]:
        """Delete the run with its metrics, tags and artifact links; the sha256 of the blobs it linked."""
        self._require(conn, run_id)
        shas: list[str] = list(conn.execute(select(artifacts.c.sha256).distinct().where(
            artifacts.c.run_id == run_id, artifacts.c.stored.is_(True))).scalars())
        # children first: SQLite enforces the foreign keys only where the pragma is on
        for table in (metric_chunks, metric_series, run_batches, run_tags, artifacts):
            conn.execute(delete(table).where(table.c.run_id == run_id))
        conn.execute(delete(runs).where(runs.c.id == run_id))
        return shas

    def _require(self, conn: Connection, run_id: int) -> Any:
        row = conn.execute(select(runs.c.id, runs.c.config, runs.c.tags).where(runs.c.id == run_id)).first()
        if row is None:
            raise NotFound(f"no run {run_id}")
        return row

    # -- reads ------------------------------------------------------------------------------------

    def resolve(self, conn: Connection, ref: str) -> int:
        """A run's id from its id or its uid.

        Raises:
            NotFound: no such run.
        """
        if is_number(ref) and int(ref) < 2**31:  # ASCII digits: int("²") raises
            found = conn.execute(select(runs.c.id).where(runs.c.id == int(ref))).scalar()
            if found is not None:
                return found
        found = conn.execute(select(runs.c.id).where(runs.c.uid == ref)).scalar()
        if found is None:
            raise NotFound(f"no run {ref}; list runs with `corral runs`")
        return found

    def owner(self, conn: Connection, ref: str) -> tuple[int, str, bool]:
        """(id, user) of the run `ref` names, and whether `ref` will always name it: an id, or a uid
        that is not all digits (a digit uid names another run once a run has that id).

        Raises:
            NotFound: no such run.
        """
        run_id = self.resolve(conn, ref)
        user = str(conn.execute(select(runs.c.user).where(runs.c.id == run_id)).scalar_one())
        return run_id, user, not is_number(ref) or str(run_id) == ref

    def identity(self, conn: Connection, run_id: int) -> tuple[int | None, str]:
        """A run's job and uid."""
        row = conn.execute(_IDENTITY, {"run_id": run_id}).one()
        return row.job_id, row.uid

    def get(self, conn: Connection, run_id: int) -> dict[str, Any]:
        found = self._rows(conn, [run_id])
        if not found:
            raise NotFound(f"no run {run_id}")
        return found[0]

    def search(self, conn: Connection, *, project: str | None = None, tag: str | None = None,
               state: str | None = None, job_id: int | None = None, filters: Sequence[RunFilter] = (),
               limit: int = 100, archived: bool | None = False) -> list[dict[str, Any]]:
        """Runs matching everything given, newest first; `archived`: only those (True), none (False), all (None)."""
        query = select(runs.c.id)
        if archived is not None:
            query = query.where(runs.c.archived.is_(archived))
        if project is not None:
            query = query.join(projects, projects.c.id == runs.c.project_id).where(projects.c.name == project)
        if tag is not None:
            query = query.where(exists().where(run_tags.c.run_id == runs.c.id, run_tags.c.tag == tag))
        if state is not None:
            query = query.where(runs.c.state == state)
        if job_id is not None:
            query = query.where(runs.c.job_id == job_id)
        for f in filters:
            if f.scope == "metric":
                compare = _sql_compare(_STAT_COLUMN[f.stat], f.op, f.value)
                query = query.where(exists().where(
                    metric_series.c.run_id == runs.c.id, metric_series.c.key == f.path[0], compare))
        query = query.order_by(runs.c.id.desc())
        config_filters = [f for f in filters if f.scope == "config"]
        found: list[dict[str, Any]] = []
        offset, page = 0, max(limit, 200)
        while len(found) < limit:
            ids: list[int] = list(conn.execute(query.limit(page).offset(offset)).scalars())
            if not ids:
                break
            rows = self._rows(conn, ids)
            found += [r for r in rows if all(f.matches_config(r["config"]) for f in config_filters)]
            if not config_filters:
                break
            offset += page
        return found[:limit]

    def of_jobs(self, conn: Connection, job_ids: Sequence[int]) -> list[dict[str, Any]]:
        """The runs of these jobs (a sweep's tasks), with their metrics' summaries, oldest first."""
        ids: list[int] = []
        for at in range(0, len(job_ids), 500):  # well under SQLite's bound-parameter limit
            chunk = list(job_ids[at:at + 500])
            ids += conn.execute(select(runs.c.id).where(runs.c.job_id.in_(chunk))).scalars()
        found: list[dict[str, Any]] = []
        for at in range(0, len(ids), 500):
            found += self._rows(conn, sorted(ids)[at:at + 500])
        return found

    def many(self, conn: Connection, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The runs of these ids (those that exist), in the order given, as `get` shows each."""
        return self._rows(conn, ids)

    def _rows(self, conn: Connection, ids: Sequence[int]) -> list[dict[str, Any]]:
        query = (select(runs, projects.c.name.label("project"))
                 .join(projects, projects.c.id == runs.c.project_id).where(runs.c.id.in_(list(ids))))
        by_id = {row.id: _run_dict(row) for row in conn.execute(query)}
        for row in conn.execute(select(metric_series).where(metric_series.c.run_id.in_(list(ids)))):
            run = by_id[row.run_id]
            run["metrics"][row.key] = {
                "count": row.count, "first_step": row.first_step, "last_step": row.last_step,
                "last": _json_float(row.last_value), "last_time": row.last_time, "min": row.min_value,
                "min_step": row.min_step, "max": row.max_value, "max_step": row.max_step,
            }
            run["last_step"] = max(run["last_step"] if run["last_step"] is not None else -1, row.last_step)
        return [by_id[i] for i in ids if i in by_id]

    def projects(self, conn: Connection) -> list[dict[str, Any]]:
        query = (select(projects.c.name, func.count(runs.c.id).label("runs"), func.max(runs.c.start_time).label("last_start"))
                 .select_from(projects).outerjoin(runs, runs.c.project_id == projects.c.id)
                 .group_by(projects.c.id, projects.c.name).order_by(projects.c.name))
        return [{"name": r.name, "runs": r.runs, "last_start": r.last_start} for r in conn.execute(query)]


# Built once, as an append's statements are (run_metrics): the tracking service asks it for every batch.
_IDENTITY = select(runs.c.job_id, runs.c.uid).where(runs.c.id == bindparam("run_id"))


def _json_float(value: float | None) -> float | str:
    return "NaN" if value is None else json_number(value)  # NaN is stored as NULL (see run_metrics._db_float)


def _sql_compare(column: Any, op: str, value: float) -> Any:
    return {"=": column == value, "!=": column != value, "<": column < value, "<=": column <= value,
            ">": column > value, ">=": column >= value}[op]


def _run_dict(row: Any) -> dict[str, Any]:
    return {
        "id": row.id, "uid": row.uid, "project": row.project, "name": row.name, "user": row.user, "state": row.state,
        "config": row.config, "tags": row.tags, "job_id": row.job_id, "node": row.node, "gpu_type": row.gpu_type,
        "git_commit": row.git_commit, "resume_key": row.resume_key, "start_time": row.start_time,
        "end_time": row.end_time, "resumes": row.resumes, "resumed": row.resumes > 0, "notes": row.notes,
        "archived": bool(row.archived), "metrics": {}, "last_step": None,
    }


def _check_taken(found: Any, may_take: Callable[[str], bool], user: str) -> None:
    if found.user != user and not may_take(found.user):
        raise Forbidden(f"run {found.id} is {found.user}'s; only its owner or an admin may resume it (use another "
                        "resume key or uid)")
