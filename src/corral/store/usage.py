"""Fair share's ledger in the database: usage charged for runs that did not end their job (`UsageStore`).

Ended jobs' usage is read from the jobs themselves (`JobStore.usage_since`); a preempted run leaves
no such trace (its job waits again, its start forgotten), so its charge is written here.
"""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from corral.store.schema import usage_charges


class UsageStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, user: str, gpu_hours: float, at: float, job_id: int | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(usage_charges).values(user=user, gpu_hours=gpu_hours, at=at, job_id=job_id))

    def since(self, since: float) -> list[tuple[str, float, float]]:
        """(user, GPU-hours, when) of the charges made after `since`."""
        stmt = select(usage_charges.c.user, usage_charges.c.gpu_hours, usage_charges.c.at).where(
            usage_charges.c.at >= since)
        with self.engine.connect() as conn:
            return [(row.user, row.gpu_hours, row.at) for row in conn.execute(stmt)]
