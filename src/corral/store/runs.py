"""Reading and writing runs, their metric series and artifacts.

Write methods take an open connection: the tracking service groups many requests into one
transaction (one fsync for many batches). Each write method reads and checks everything it
needs before its first write, so a refused request leaves the shared transaction untouched.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, bindparam, delete, exists, func, insert, select, update

from corral.core import metric_series as S
from corral.core.metrics_batch import MetricsBatch, increasing_only
from corral.core.nonfinite import json_number
from corral.core.run_filters import RunFilter
from corral.core.run_names import default_name
from corral.core.run_requests import RunRequest
from corral.core.units import is_number
from corral.errors import Conflict, Forbidden, NotFound
from corral.store.db import inserted_id
from corral.store.schema import artifacts, metric_chunks, metric_series, projects, run_batches, run_tags, runs

_OTHER = metric_chunks.alias("other")
_LAST_CHUNK = select(func.max(_OTHER.c.first_step)).where(  # each key's last chunk: an index lookup
    _OTHER.c.run_id == metric_chunks.c.run_id, _OTHER.c.key == metric_chunks.c.key).scalar_subquery()
_RAW_FACTOR = 32  # read raw points while a range holds at most this many per point asked for
_STAT_COLUMN = {"last": metric_series.c.last_value, "min": metric_series.c.min_value, "max": metric_series.c.max_value}


@dataclass(frozen=True)
class Appended:
    accepted: int
    skipped: int
    duplicate: bool


class RunStore:
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

    def append(self, conn: Connection, run_id: int, batch: MetricsBatch) -> Appended:
        """Store a batch's points; steps that do not move a series forward are skipped."""
        if conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is None:
            raise NotFound(f"no run {run_id}")
        if batch.batch_id is not None:
            seen = conn.execute(select(run_batches.c.batch_id).where(
                run_batches.c.run_id == run_id, run_batches.c.batch_id == batch.batch_id)).first()
            if seen is not None:
                return Appended(0, 0, True)
        current = {row.key: row for row in conn.execute(_SERIES_OF, {"run_id": run_id, "keys": list(batch.series)})}
        accepted = skipped = 0
        kept_by_key: dict[str, S.Points] = {}
        for key, points in batch.series.items():
            meta = current.get(key)
            kept = increasing_only(points, None if meta is None else meta.last_step)
            skipped += len(points) - len(kept)
            if len(kept):
                kept_by_key[key] = kept
                accepted += len(kept)
        if kept_by_key:
            self._append_series(conn, run_id, kept_by_key, current)
        if batch.batch_id is not None:
            conn.execute(insert(run_batches).values(run_id=run_id, batch_id=batch.batch_id))
        return Appended(accepted, skipped, False)

    def _append_series(self, conn: Connection, run_id: int, kept: dict[str, S.Points], current: dict[str, Any]) -> None:
        """Append each key's points: every key of a batch in the same few statements (a batch of ten
        keys costs what one did), whatever the number of keys."""
        # Small appends are merged into the series' last chunk while it is small and no larger
        # than what comes in (a binary counter): each point is rewritten O(log) times, and a
        # long series ends up in chunks of at least MERGE_BELOW points whatever the batch size.
        merging = dict(kept)
        done: dict[str, S.Points] = {}
        while merging:
            tails = {row.key: row for row in conn.execute(_TAILS_OF, {"run_id": run_id, "keys": list(merging)})}
            taken = {}
            for key in list(merging):
                tail = tails.get(key)
                if (tail is None or tail.points >= S.MERGE_BELOW or tail.points > len(merging[key])
                        or tail.points + len(merging[key]) > S.CHUNK_TARGET):
                    done[key] = merging.pop(key)
                else:
                    taken[tail.id] = key
            if not taken:
                break
            data = {row.id: row.data for row in conn.execute(_CHUNK_DATA, {"ids": list(taken)})}
            conn.execute(_DELETE_CHUNKS, {"ids": list(taken)})
            for chunk_id, key in taken.items():
                merging[key] = S.concat([S.decode(data[chunk_id]), merging[key]])
        rows = []
        for key, merged in done.items():
            for lo in range(0, len(merged), S.CHUNK_TARGET):
                part = merged.take(slice(lo, lo + S.CHUNK_TARGET))
                rows.append({
                    "run_id": run_id, "key": key, "first_step": int(part.steps[0]), "last_step": int(part.steps[-1]),
                    "count": len(part), "first_value": _db_float(part.values[0]), "first_time": float(part.times[0]),
                    "last_value": _db_float(part.values[-1]), "last_time": float(part.times[-1]),
                    "lod2": S.encode(S.summarize(part, S.LOD2)), "lod1": S.encode(S.summarize(part, S.LOD1)),
                    "data": S.encode(part),
                })
        conn.execute(_INSERT_CHUNKS, rows)
        summaries = {key: _summary(points, current.get(key)) for key, points in kept.items()}
        new = [{"run_id": run_id, "key": key, "first_step": int(kept[key].steps[0]), **summary}
               for key, summary in summaries.items() if key not in current]
        if new:
            conn.execute(insert(metric_series), new)
        changed = [{"b_key": key, **{f"b_{name}": value for name, value in summary.items()}}
                   for key, summary in summaries.items() if key in current]
        if changed:
            conn.execute(_UPDATE_SERIES, [{"b_run_id": run_id, **row} for row in changed])

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

    def put_artifacts(self, conn: Connection, run_id: int, items: Sequence[dict[str, Any]], now: float) -> list[int]:
        self._require(conn, run_id)
        ids: list[int] = []
        for item in items:
            existing = conn.execute(select(artifacts.c.id, artifacts.c.stored).where(
                artifacts.c.run_id == run_id, artifacts.c.path == item["path"])).first()
            if existing is not None and existing.stored:  # its sha256 could point at anyone's blob, its size dodge the quota
                raise Conflict(f"artifact {item['path']!r} of run {run_id} was uploaded: registering a file cannot "
                               "change it (upload it again, or register the file under a path of its own)")
            found = existing.id if existing is not None else None
            if found is None:
                # what was not given stays NULL (and a column a newer field needs is named only when used)
                row = {k: v for k, v in item.items() if v is not None} | {
                    "type": item["type"] or "file", "deleted": bool(item["deleted"])}
                found = inserted_id(conn.execute(insert(artifacts).values(run_id=run_id, created=now, **row)))
            else:  # only what was given changes: marking a checkpoint deleted keeps its step and metric
                changes = {k: v for k, v in item.items() if v is not None}
                conn.execute(update(artifacts).where(artifacts.c.id == found).values(**changes))
            ids.append(found)
        return ids

    def link_blob(self, conn: Connection, run_id: int, *, path: str, type_: str, size: int, sha256: str,
                  now: float, step: int | None = None, caption: str | None = None) -> int:
        """Link an uploaded blob to the run under `path` (a path known already now names this content)."""
        self._require(conn, run_id)
        values = {"type": type_, "size": size, "sha256": sha256, "stored": True, "deleted": False, "created": now,
                  "step": step, "caption": caption}
        found = conn.execute(select(artifacts.c.id).where(
            artifacts.c.run_id == run_id, artifacts.c.path == path)).scalar()
        if found is None:
            return inserted_id(conn.execute(insert(artifacts).values(run_id=run_id, path=path, **values)))
        conn.execute(update(artifacts).where(artifacts.c.id == found).values(**values))
        return int(found)

    def unlink_uploaded(self, conn: Connection, run_id: int, path: str) -> list[str]:
        """Remove the run's uploaded artifact `path` and those under `path/`; the sha256 of the blobs
        they linked. Registered files (checkpoints) stay: they are the job's, not the store's."""
        self._require(conn, run_id)
        where = (artifacts.c.run_id == run_id, artifacts.c.stored.is_(True), _at_or_under(path))
        shas: list[str] = list(conn.execute(select(artifacts.c.sha256).distinct().where(*where)).scalars())
        conn.execute(delete(artifacts).where(*where))
        return shas

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

    def artifacts(self, conn: Connection, run_id: int, *, type_: str | None, deleted: bool) -> list[dict[str, Any]]:
        query = select(artifacts).where(artifacts.c.run_id == run_id)
        if type_ is not None:
            query = query.where(artifacts.c.type == type_)
        if not deleted:
            query = query.where(artifacts.c.deleted.is_(False))
        return [_artifact_dict(row) for row in conn.execute(query.order_by(artifacts.c.id))]

    def uploaded(self, conn: Connection, run_id: int, path: str) -> list[tuple[str, int]]:
        """(path, size) of the run's uploaded artifacts named `path` or under `path/` (all: `path` "")."""
        query = select(artifacts.c.path, artifacts.c.size).where(
            artifacts.c.run_id == run_id, artifacts.c.stored.is_(True), artifacts.c.deleted.is_(False))
        if path:
            query = query.where(_at_or_under(path))
        return [(row.path, int(row.size or 0)) for row in conn.execute(query.order_by(artifacts.c.path))]

    def artifacts_by_id(self, conn: Connection, ids: Sequence[int]) -> list[dict[str, Any]]:
        rows = {row.id: _artifact_dict(row) for row in conn.execute(select(artifacts).where(artifacts.c.id.in_(list(ids))))}
        return [rows[i] for i in ids]

    def artifact(self, conn: Connection, run_id: int, path: str) -> dict[str, Any]:
        """The run's artifact at `path` (an uploaded name, or a registered file's path).

        Raises:
            NotFound: the run has none there.
        """
        row = conn.execute(select(artifacts).where(artifacts.c.run_id == run_id, artifacts.c.path == path,
                                                   artifacts.c.deleted.is_(False))).first()
        if row is None:
            raise NotFound(f"run {run_id} has no artifact {path!r}; `corral artifacts list {run_id}` lists them")
        return _artifact_dict(row)

    def blob_linked(self, conn: Connection, sha256: str, *, user: str | None = None) -> bool:
        """Whether some run (of `user`'s, when given) links the uploaded blob."""
        query = select(artifacts.c.id).where(artifacts.c.sha256 == sha256, artifacts.c.stored.is_(True))
        if user is not None:
            query = query.join(runs, runs.c.id == artifacts.c.run_id).where(runs.c.user == user)
        return conn.execute(query.limit(1)).first() is not None

    def stored_bytes(self, conn: Connection, user: str) -> int:
        """The bytes of uploaded artifacts the user's runs link (each link counted: a quota is per user)."""
        total: int = conn.execute(select(func.coalesce(func.sum(artifacts.c.size), 0))
                             .join(runs, runs.c.id == artifacts.c.run_id)
                             .where(runs.c.user == user, artifacts.c.stored.is_(True))).scalar_one()
        return int(total)

    def series(self, conn: Connection, run_id: int, key: str, *, start: int | None, end: int | None,
               max_points: int) -> tuple[int, bool, S.Points]:
        """(points in range, downsampled?, the points): at most `max_points`, each bucket's
        extremes kept (core.metric_series.downsample)."""
        meta = conn.execute(select(metric_series.c.count).where(
            metric_series.c.run_id == run_id, metric_series.c.key == key)).first()
        if meta is None:
            keys: list[str] = sorted(conn.execute(select(metric_series.c.key).where(metric_series.c.run_id == run_id)).scalars())
            raise NotFound(f"run {run_id} has no metric {key!r}" + (f"; it has {', '.join(keys[:20])}" if keys else ""))
        c = metric_chunks.c
        query = select(c.id, c.first_step, c.last_step, c.count.label("points"), c.first_value, c.first_time, c.last_value,
                       c.last_time).where(c.run_id == run_id, c.key == key)
        if start is not None:
            query = query.where(c.last_step >= start)
        if end is not None:
            query = query.where(c.first_step <= end)
        chunks = list(conn.execute(query.order_by(c.first_step)))
        whole = [ch for ch in chunks if (start is None or ch.first_step >= start) and (end is None or ch.last_step <= end)]
        whole_ids = {ch.id for ch in whole}
        edges = {ch.id: self._raw(conn, [ch.id]).in_range(start, end) for ch in chunks if ch.id not in whole_ids}
        count = sum(ch.points for ch in whole) + sum(len(p) for p in edges.values())
        if count == 0:
            return 0, False, S.EMPTY
        if count <= _RAW_FACTOR * max_points:
            raw = self._raw(conn, [ch.id for ch in chunks]).in_range(start, end)
            if count <= max_points:
                return count, False, raw
            return count, True, S.downsample(raw, raw.take(slice(0, 1)), raw.take(slice(-1, None)), max_points)
        level = c.lod1 if count // S.LOD1 <= _RAW_FACTOR * max_points else c.lod2
        summaries = {row.id: S.decode(row[1]) for row in conn.execute(select(c.id, level).where(c.id.in_(list(whole_ids))))}
        parts = [edges[ch.id] if ch.id in edges else summaries[ch.id] for ch in chunks]
        first, last = chunks[0], chunks[-1]
        first_point = edges[first.id].take(slice(0, 1)) if first.id in edges else _point(first.first_step, first.first_value, first.first_time)
        last_point = edges[last.id].take(slice(-1, None)) if last.id in edges else _point(last.last_step, last.last_value, last.last_time)
        return count, True, S.downsample(S.concat(parts), first_point, last_point, max_points)

    def _raw(self, conn: Connection, ids: Sequence[int]) -> S.Points:
        rows = conn.execute(select(metric_chunks.c.data).where(metric_chunks.c.id.in_(list(ids)))
                            .order_by(metric_chunks.c.first_step))
        chunks: list[bytes] = list(rows.scalars())
        return S.concat([S.decode(data) for data in chunks])


_SUMMARY_COLUMNS = ("count", "last_step", "last_value", "last_time", "min_value", "min_step", "max_value", "max_step",
                    "first_nonfinite_step")

# An append's statements, built once: building a statement (its clauses, its cache key) costs more than SQLite
# takes to run it, and an append runs several for every batch a client sends.
_RUN_EXISTS = select(runs.c.id).where(runs.c.id == bindparam("run_id"))
_IDENTITY = select(runs.c.job_id, runs.c.uid).where(runs.c.id == bindparam("run_id"))
_SERIES_OF = select(metric_series).where(metric_series.c.run_id == bindparam("run_id"),
                                         metric_series.c.key.in_(bindparam("keys", expanding=True)))
_TAILS_OF = (select(metric_chunks.c.id, metric_chunks.c.key, metric_chunks.c.count.label("points"))  # Row.count is tuple's
             .where(metric_chunks.c.run_id == bindparam("run_id"), metric_chunks.c.key.in_(bindparam("keys", expanding=True)),
                    metric_chunks.c.first_step == _LAST_CHUNK))
_CHUNK_DATA = select(metric_chunks.c.id, metric_chunks.c.data).where(metric_chunks.c.id.in_(bindparam("ids", expanding=True)))
_DELETE_CHUNKS = delete(metric_chunks).where(metric_chunks.c.id.in_(bindparam("ids", expanding=True)))
_INSERT_CHUNKS = insert(metric_chunks)
_UPDATE_SERIES = (update(metric_series)
                  .where(metric_series.c.run_id == bindparam("b_run_id"), metric_series.c.key == bindparam("b_key"))
                  .values({name: bindparam(f"b_{name}") for name in _SUMMARY_COLUMNS}))


def _summary(points: S.Points, meta: Any) -> dict[str, Any]:
    """A series' summary columns once `points` are appended to what `meta` (None: nothing yet) summed up."""
    values = points.values
    finite = np.isfinite(values)
    summary: dict[str, Any] = {
        "count": (meta.count if meta else 0) + len(points), "last_step": int(points.steps[-1]),
        "last_value": _db_float(values[-1]), "last_time": float(points.times[-1]),
        "min_value": meta.min_value if meta else None, "min_step": meta.min_step if meta else None,
        "max_value": meta.max_value if meta else None, "max_step": meta.max_step if meta else None,
        "first_nonfinite_step": meta.first_nonfinite_step if meta else None,
    }
    if not finite.all() and summary["first_nonfinite_step"] is None:
        summary["first_nonfinite_step"] = int(points.steps[int(np.argmin(finite))])
    if finite.any():
        i = int(np.argmin(np.where(finite, values, np.inf)))
        if summary["min_value"] is None or values[i] < summary["min_value"]:
            summary["min_value"], summary["min_step"] = float(values[i]), int(points.steps[i])
        i = int(np.argmax(np.where(finite, values, -np.inf)))
        if summary["max_value"] is None or values[i] > summary["max_value"]:
            summary["max_value"], summary["max_step"] = float(values[i]), int(points.steps[i])
    return summary


def _point(step: int, value: float | None, time_: float) -> S.Points:
    return S.Points(np.array([step], np.int64), np.array([math.nan if value is None else value]), np.array([time_]))


def _db_float(value: float) -> float | None:
    """NaN has no place in a FLOAT column that both SQLite and PostgreSQL read back alike."""
    value = float(value)
    return value if not math.isnan(value) else None


def _json_float(value: float | None) -> float | str:
    return "NaN" if value is None else json_number(value)  # NaN is stored as NULL (see _db_float)


def _sql_compare(column: Any, op: str, value: float) -> Any:
    return {"=": column == value, "!=": column != value, "<": column < value, "<=": column <= value,
            ">": column > value, ">=": column >= value}[op]


def _at_or_under(path: str) -> Any:
    # a prefix compared as text, not LIKE: SQLite's LIKE ignores case (`Model/` would match `model/`), and `%`
    # and `_` in a name would be wildcards
    prefix = path + "/"
    return (artifacts.c.path == path) | (func.substr(artifacts.c.path, 1, len(prefix)) == prefix)


def _artifact_dict(row: Any) -> dict[str, Any]:
    return {
        "id": row.id, "run_id": row.run_id, "path": row.path, "type": row.type, "size": row.size, "sha256": row.sha256,
        "step": row.step, "metric": row.metric, "metric_value": row.metric_value, "goal": row.goal,
        "deleted": row.deleted, "created": row.created, "stored": bool(row.stored), "caption": row.caption,
    }


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
