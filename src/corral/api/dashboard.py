"""Routes the dashboard reads: the cluster with live GPU figures, and the queue by pages."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from corral.api.responses import json_response
from corral.api.schemas import ErrorOut
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest
from corral.web.views import cluster_view, queue_view

router = APIRouter(prefix="/api/v1", tags=["dashboard"], responses={422: {"model": ErrorOut}})


@router.get("/cluster", summary="Nodes and GPUs: who holds each, live utilization and memory; totals")
async def cluster(request: Request) -> Response:
    return json_response(cluster_view(request.app.state.service, request.app.state.monitor))


@router.get("/queue", summary="Running jobs, then pending ones in priority order, a page at a time")
async def queue(
    request: Request, state: str | None = Query(None, description="PENDING or RUNNING"),
    user: str | None = Query(None, max_length=64), label: str | None = Query(None, max_length=400, description="KEY=VALUE"),
    partition: str | None = Query(None, max_length=64), offset: int = Query(0, ge=0, le=10_000_000),
    limit: int = Query(100, ge=1, le=1000),
) -> Response:
    if state is not None and state not in (JobState.PENDING.value, JobState.RUNNING.value):
        raise InvalidRequest("state", f"must be PENDING or RUNNING, got {state!r}", "the queue holds only those")
    pair = None
    if label is not None:
        key, sep, value = label.partition("=")
        if not sep or not key:
            raise InvalidRequest("label", f"must be KEY=VALUE, got {label!r}", "e.g. team=vision")
        pair = (key, value)
    return json_response(queue_view(request.app.state.service, request.app.state.monitor, state=state, user=user,
                                    label=pair, partition=partition, offset=offset, limit=limit))
