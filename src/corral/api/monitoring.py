"""Routes for what the monitor knows: system metrics over time, and the live `top` view."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from corral.api.responses import json_response as _json
from corral.api.schemas import ErrorOut

router = APIRouter(prefix="/api/v1", tags=["monitoring"], responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}})


@router.get("/metrics", summary="A job's metric over time (the seed's metrics_query)")
async def metrics_query(
    request: Request,
    metric: str = Query(..., description="A system metric (gpu_utilization, gpu_memory_mb, gpu_power_w, "
                        "gpu_temperature_c, cpu_utilization, cpu_time_s, rss_mb, read_mb_s, write_mb_s, processes) "
                        "or a tracked metric of the job's run (loss)."),
    job: str = Query(..., pattern=r"^[0-9]{1,10}(_[0-9]{1,10})?$", description="The job's id (or ID_TASK)."),
    start: str | None = Query(None, description="-30m, -2h, now, ISO 8601 or epoch seconds"),
    end: str | None = Query(None, description="Same forms as start; default now."),
    max_points: int = Query(1000, ge=2, le=10_000, description="Longer series are thinned, each bucket's low and high kept."),
) -> Response:
    """Points are `[epoch_seconds, value]` in time order; `count` is how many samples the range held."""
    return _json(await request.app.state.monitor.metrics(job, metric, start=start, end=end, max_points=max_points))


@router.get("/top", summary="Each running job now: GPU utilization and memory, CPU, memory, training progress")
async def top(request: Request) -> Response:
    return _json(request.app.state.monitor.top())
