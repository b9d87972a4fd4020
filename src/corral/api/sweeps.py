"""Routes for sweeps: start one (a job array over parameters), show one."""

from __future__ import annotations

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from corral.api.identity import caller_of
from corral.api.jobs import SUBMITTED_ENVIRONMENT
from corral.api.request_bodies import json_object
from corral.api.responses import json_response
from corral.api.schemas import ErrorOut
from corral.web.sweep_view import sweep_view

router = APIRouter(prefix="/api/v1/sweeps", tags=["sweeps"],
                   responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}})


@router.post("", status_code=201, responses={403: {"model": ErrorOut}},
             summary="Start a sweep: a submit request's fields plus params, method, samples, seed, concurrency, metric")
async def start_sweep(request: Request) -> Response:
    body = json_object(await request.body(), bytes_in=SUBMITTED_ENVIRONMENT)
    job, definition = await request.app.state.service.submit_sweep(body, caller_of(request))
    view = job.to_dict()
    view["warnings"] = list(job.spec.warnings)
    return json_response({"id": job.id, "job": view, **definition}, 201)


@router.get("/{sweep_id}", summary="A sweep: each task's parameters, state, and its run's final and best metric")
async def show_sweep(request: Request, sweep_id: str = Path(pattern=r"^[0-9]{1,10}$"),
                     metric: str | None = Query(None, max_length=200)) -> Response:
    return json_response(await sweep_view(request.app.state.service, request.app.state.tracking, sweep_id, metric))
