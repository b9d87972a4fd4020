"""The sweep page's read model (also `corral sweep show`): the sweep's definition, its tasks' states and their
runs' metrics, put together by `corral.core.tracking.sweeps.sweep_table`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.core.tracking.sweeps import sweep_table

if TYPE_CHECKING:
    from corral.server.service import JobService
    from corral.tracking.service import TrackingService


async def sweep_view(service: JobService, tracking: TrackingService, ref: str, metric: str | None) -> dict[str, Any]:
    """Sweep `ref` (its array job's id) with every task's values, state, and final and best `metric`.

    Raises:
        NotFound: no such job, or it is not a sweep.
    """
    array, definition, tasks = await service.sweep(ref)
    runs = await tracking.runs_of_jobs([t.id for t in tasks])
    fields = {**array.to_dict(detail=True), "pending_tasks": list(array.array_pending)}
    view = sweep_table(definition, fields, [dict(t.to_dict(detail=False)) for t in tasks], runs, metric)
    view["parent"] = array.spec.parent
    return view
