"""Routes for reservations (`corral.core.scheduling.reservations`): listed by anyone, made and deleted by admins."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from starlette.responses import Response

from corral.api.identity import caller_of
from corral.api.request_bodies import json_object
from corral.api.schemas import ErrorOut
from corral.core.scheduling.reservations import wanted_from

router = APIRouter(prefix="/api/v1", tags=["cluster"])

_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "node": {"type": "string", "description": "left out: the one node with GPUs"},
        "gpus": {"type": "integer", "description": "how many GPUs (the lowest-numbered free over the window)"},
        "gpu_ids": {"type": "array", "items": {"type": "integer"}, "description": "which GPUs"},
        "cpus": {"type": "integer"}, "mem": {"type": "string", "description": "left out: the GPUs' share"},
        "users": {"type": "array", "items": {"type": "string"}},
        "accounts": {"type": "array", "items": {"type": "string"}},
        "start": {"type": "string", "description": "Slurm's StartTime: now, now+1hour, 2026-12-01T08:00, epoch"},
        "end": {"type": "string"}, "duration": {"type": "string", "description": "4:00:00, 240 (minutes), 4h"},
    }}}}}}


@router.get("/reservations", summary="Reservations: GPUs kept for some users or accounts over a window")
async def list_reservations(request: Request) -> Response:
    return Response(json.dumps(request.app.state.service.list_reservations()), media_type="application/json")


@router.post("/reservations", status_code=201, responses={403: {"model": ErrorOut}, 409: {"model": ErrorOut}},
             summary="Make a reservation (admins only)", openapi_extra=_BODY)
async def create_reservation(request: Request) -> Response:
    service = request.app.state.service
    wanted = wanted_from(json_object(await request.body()), service.clock())
    made = service.create_reservation(caller_of(request), wanted)
    return Response(json.dumps(made), status_code=201, media_type="application/json")


@router.patch("/reservations/{name}", responses={403: {"model": ErrorOut}, 404: {"model": ErrorOut},
                                                 409: {"model": ErrorOut}},
              summary="Change a reservation's window, GPUs or users (admins only); what is left out stays")
async def update_reservation(request: Request, name: str) -> Response:
    changed = request.app.state.service.update_reservation(caller_of(request), name,
                                                           json_object(await request.body()))
    return Response(json.dumps(changed), media_type="application/json")


@router.delete("/reservations/{name}", responses={403: {"model": ErrorOut}, 404: {"model": ErrorOut}},
               summary="Delete a reservation (admins only); jobs waiting for it are held (ReservationDeleted)")
async def delete_reservation(request: Request, name: str) -> Response:
    gone = request.app.state.service.delete_reservation(caller_of(request), name)
    return Response(json.dumps(gone), media_type="application/json")
