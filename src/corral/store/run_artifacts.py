"""A run's artifacts: uploaded blobs linked under a path, and registered files (checkpoints).

Part of `RunStore` (corral.store.runs); its writes run inside the caller's transaction, as the store's do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from corral.errors import Conflict, NotFound
from corral.store.db import inserted_id
from corral.store.schema import artifacts, runs


class RunArtifacts:
    """The artifacts of `RunStore`'s runs."""

    # RunStore's (a run's row; NotFound where there is none): an artifact's run is checked as its other writes check it
    _require: Callable[[Connection, int], Any]

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
