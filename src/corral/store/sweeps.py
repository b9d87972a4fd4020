"""Reading and writing sweeps (`corral.core.tracking.sweeps`): one row per sweep, keyed by its array job's id."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from corral.store.schema import sweeps


class SweepStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def insert(self, job_id: int, *, user: str, method: str, seed: int | None, params: list[dict[str, Any]],
               command: list[str], tasks: list[dict[str, str]], metric: str | None, now: float) -> None:
        with self.engine.begin() as conn:
            conn.execute(sweeps.insert().values(job_id=job_id, user=user, method=method, seed=seed, params=params,
                                                command=command, tasks=tasks, metric=metric, created=now))

    def get(self, job_id: int) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(sweeps).where(sweeps.c.job_id == job_id)).first()
        return dict(row._mapping) if row else None
