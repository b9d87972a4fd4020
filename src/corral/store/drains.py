"""Reading and writing drained GPUs (`corral.core.scheduling.drains`). Every method is one transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine, delete, insert, select

from corral.core.scheduling.drains import Drain
from corral.store.schema import gpu_drains


class DrainStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def all(self) -> list[Drain]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(gpu_drains).order_by(gpu_drains.c.node, gpu_drains.c.gpu_index)).all()
        return [Drain(r.node, int(r.gpu_index), r.reason, r.by_user, float(r.at)) for r in rows]

    def put(self, drains: Sequence[Drain]) -> None:
        """Record drains, each in place of one of the same node and GPU."""
        if not drains:
            return
        with self.engine.begin() as conn:
            for drain in drains:
                conn.execute(delete(gpu_drains).where(gpu_drains.c.node == drain.node,
                                                      gpu_drains.c.gpu_index == drain.gpu))
            conn.execute(insert(gpu_drains), [{"node": d.node, "gpu_index": d.gpu, "reason": d.reason,
                                                "by_user": d.by, "at": d.at} for d in drains])

    def remove(self, node: str, gpus: Sequence[int] | None) -> None:
        """Forget the drains of these GPUs of `node` (None: all of the node's, itself included)."""
        query = delete(gpu_drains).where(gpu_drains.c.node == node)
        if gpus is not None:
            query = query.where(gpu_drains.c.gpu_index.in_(list(gpus)))
        with self.engine.begin() as conn:
            conn.execute(query)
