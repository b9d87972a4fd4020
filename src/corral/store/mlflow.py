"""What MLflow's clients keep beyond corral's runs: experiments' lifecycle and tags, runs' lifecycle
and key-value tags, and the raw points of a metric's history.

An MLflow experiment is a corral project and an MLflow run a corral run (`corral.tracking.compat.mlflow_tracking`
translates); the tables here (`mlflow_experiments`, `mlflow_runs`, `mlflow_run_tags`) hold only what
corral's own tables have no place for. Write methods take the caller's connection, inside the tracking
service's transaction, and check before they write, as `RunStore`'s do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from corral.core.tracking import metric_series as S
from corral.errors import NotFound
from corral.store.db import inserted_id
from corral.store.schema import (
    metric_chunks, mlflow_experiments, mlflow_run_tags, mlflow_runs, projects, runs,
)

ACTIVE, DELETED = "active", "deleted"


def experiments(conn: Connection, *, ids: Sequence[int] | None = None, name: str | None = None) -> list[dict[str, Any]]:
    """Projects as experiments (those given, or all), by id: name, created, lifecycle_stage,
    artifact_location, tags, last_update_time (defaults where MLflow never touched the project)."""
    query = (select(projects.c.id, projects.c.name, projects.c.created, mlflow_experiments.c.lifecycle_stage,
                    mlflow_experiments.c.artifact_location, mlflow_experiments.c.tags,
                    mlflow_experiments.c.last_update_time)
             .select_from(projects).outerjoin(mlflow_experiments, mlflow_experiments.c.project_id == projects.c.id))
    if ids is not None:
        query = query.where(projects.c.id.in_(list(ids)))
    if name is not None:
        query = query.where(projects.c.name == name)
    return [{
        "id": row.id, "name": row.name, "created": row.created, "lifecycle_stage": row.lifecycle_stage or ACTIVE,
        "artifact_location": row.artifact_location, "tags": row.tags or {},
        "last_update_time": row.last_update_time or row.created,
    } for row in conn.execute(query.order_by(projects.c.id))]


def project_id(conn: Connection, name: str) -> int | None:
    found = conn.execute(select(projects.c.id).where(projects.c.name == name)).scalar()
    return None if found is None else int(found)


def create_experiment(conn: Connection, name: str, artifact_location: str | None, tags: Mapping[str, str],
                      now: float) -> int:
    """A new project, with MLflow's extras; the caller has checked that the name is free."""
    pid = inserted_id(conn.execute(insert(projects).values(name=name, created=now)))
    conn.execute(insert(mlflow_experiments).values(project_id=pid, lifecycle_stage=ACTIVE,
                                                   artifact_location=artifact_location, tags=dict(tags),
                                                   last_update_time=now))
    return pid


def update_experiment(conn: Connection, pid: int, now: float, *, lifecycle_stage: str | None = None,
                      tags: Mapping[str, str] | None = None, name: str | None = None) -> None:
    found = experiments(conn, ids=[pid])
    if not found:
        raise NotFound(f"no experiment {pid}")
    row = found[0]
    values = {"lifecycle_stage": lifecycle_stage or row["lifecycle_stage"],
              "tags": {**row["tags"], **(tags or {})}, "last_update_time": now}
    if conn.execute(select(mlflow_experiments.c.project_id).where(mlflow_experiments.c.project_id == pid)).first():
        conn.execute(update(mlflow_experiments).where(mlflow_experiments.c.project_id == pid).values(**values))
    else:
        conn.execute(insert(mlflow_experiments).values(project_id=pid, artifact_location=None, **values))
    if name is not None:
        conn.execute(update(projects).where(projects.c.id == pid).values(name=name))
    if lifecycle_stage is not None:  # as MLflow: deleting (restoring) an experiment deletes (restores) its runs
        for run_id in run_ids(conn, [pid]):
            set_lifecycle(conn, run_id, lifecycle_stage)


def run_ids(conn: Connection, project_ids: Sequence[int]) -> list[int]:
    """The runs of these projects, newest first."""
    return list(conn.execute(select(runs.c.id).where(runs.c.project_id.in_(list(project_ids)))
                             .order_by(runs.c.id.desc())).scalars())


def owners(conn: Connection, pid: int) -> set[str]:
    """Whose runs a project holds."""
    return set(conn.execute(select(runs.c.user).where(runs.c.project_id == pid).distinct()).scalars())


def run_project_ids(conn: Connection, ids: Sequence[int]) -> dict[int, int]:
    return {row.id: row.project_id for row in conn.execute(select(runs.c.id, runs.c.project_id).where(runs.c.id.in_(list(ids))))}


def lifecycles(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """Each run's lifecycle stage (active unless MLflow deleted it)."""
    found = {row.run_id: row.lifecycle_stage for row in conn.execute(_LIFECYCLES, {"ids": list(ids)})}
    return {i: found.get(i, ACTIVE) for i in ids}


def lifecycle(conn: Connection, run_id: int) -> str:
    """One run's lifecycle stage: what every MLflow write checks first (a plain equality, cheaper to run than the
    expanding IN of `lifecycles`, on each of a training loop's batches)."""
    stage: str | None = conn.execute(_LIFECYCLE, {"id": run_id}).scalar()
    return stage if stage is not None else ACTIVE


# built once
_LIFECYCLES = select(mlflow_runs).where(mlflow_runs.c.run_id.in_(bindparam("ids", expanding=True)))
_LIFECYCLE = select(mlflow_runs.c.lifecycle_stage).where(mlflow_runs.c.run_id == bindparam("id"))


def set_lifecycle(conn: Connection, run_id: int, stage: str) -> None:
    if conn.execute(select(mlflow_runs.c.run_id).where(mlflow_runs.c.run_id == run_id)).first():
        conn.execute(update(mlflow_runs).where(mlflow_runs.c.run_id == run_id).values(lifecycle_stage=stage))
    else:
        conn.execute(insert(mlflow_runs).values(run_id=run_id, lifecycle_stage=stage))


def tags(conn: Connection, ids: Sequence[int]) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {i: {} for i in ids}
    for row in conn.execute(select(mlflow_run_tags).where(mlflow_run_tags.c.run_id.in_(list(ids)))
                            .order_by(mlflow_run_tags.c.key)):
        out[row.run_id][row.key] = row.value
    return out


def set_tags(conn: Connection, run_id: int, values: Iterable[tuple[str, str]]) -> None:
    """Set each tag (the last value of a key given twice wins)."""
    wanted = dict(values)
    if not wanted:
        return
    conn.execute(delete(mlflow_run_tags).where(mlflow_run_tags.c.run_id == run_id,
                                               mlflow_run_tags.c.key.in_(list(wanted))))
    conn.execute(insert(mlflow_run_tags), [{"run_id": run_id, "key": k, "value": v} for k, v in wanted.items()])


def delete_tag(conn: Connection, run_id: int, key: str) -> bool:
    """Whether the run had the tag."""
    return bool(conn.execute(delete(mlflow_run_tags).where(
        mlflow_run_tags.c.run_id == run_id, mlflow_run_tags.c.key == key)).rowcount)


def set_run(conn: Connection, run_id: int, *, state: str | None, end_time: float | None, name: str | None) -> None:
    """MLflow's update: a status (back to running clears the end), an end time, a new name."""
    values: dict[str, Any] = {}
    if state is not None:
        values["state"] = state
        if state == "running":
            values["end_time"] = None
    if end_time is not None and state != "running":
        start: float = conn.execute(select(runs.c.start_time).where(runs.c.id == run_id)).scalar_one()
        values["end_time"] = max(end_time, start)  # never before its start, as RunStore.finish
    if name is not None:
        values["name"] = name
    if values:
        conn.execute(update(runs).where(runs.c.id == run_id).values(**values))


def history(conn: Connection, run_id: int, key: str) -> S.Points:
    """Every stored point of one metric, in step order (empty for a key the run never logged)."""
    chunks: list[bytes] = list(conn.execute(
        select(metric_chunks.c.data).where(metric_chunks.c.run_id == run_id, metric_chunks.c.key == key)
        .order_by(metric_chunks.c.first_step)).scalars())
    return S.concat([S.decode(data) for data in chunks])
