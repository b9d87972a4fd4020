"""Routes for the machine: nodes and their GPUs, server info."""

from __future__ import annotations

import json
import os

from fastapi import APIRouter, Request
from starlette.responses import Response

from corral import __version__
from corral.api.identity import caller_of
from corral.api.request_bodies import json_object
from corral.api.schemas import ErrorOut, NodeOut, PriorityOut
from corral.errors import InvalidRequest

router = APIRouter(prefix="/api/v1", tags=["cluster"])
OPEN_PATHS = (f"{router.prefix}/health",)
"""Need no caller (`api/identity.py`): whether the server is up, asked before anyone has a token."""


@router.get("/nodes", response_model=list[NodeOut], summary="Nodes, their GPUs, and which job holds each")
async def list_nodes(request: Request) -> Response:
    return Response(json.dumps(request.app.state.service.nodes_view()), media_type="application/json")


@router.get("/priority", response_model=list[PriorityOut], summary="Pending jobs' priorities and their factors")
async def priority(request: Request) -> Response:
    rows = [
        {"id": job.id, "ref": job.ref, "name": job.spec.name, "user": job.spec.user, "partition": job.spec.partition,
         "priority": f.priority, "age": round(f.age, 6), "fairshare": round(f.fairshare, 6),
         "job_size": round(f.job_size, 6), "partition_factor": round(f.partition, 6), "qos_factor": round(f.qos, 6),
         "nice": f.nice, "reason": job.reason}
        for job, f in request.app.state.service.priorities()
    ]
    return Response(json.dumps(rows), media_type="application/json")


@router.get("/partitions", summary="Partitions (their limits and who may use them) and the priority weights")
async def partitions(request: Request) -> Response:
    config = request.app.state.service.scheduler_config
    rows = [{"name": p.name, "default": p.name == config.default_partition, "max_time_s": p.max_time_s,
             "default_time_s": p.default_time_s, "tier": p.tier, "priority_factor": p.priority_factor,
             "allowed_users": sorted(p.allowed_users) if p.allowed_users is not None else None,
             "allowed_groups": sorted(p.allowed_groups) if p.allowed_groups is not None else None}
            for p in config.partitions.values()]
    weights = config.weights
    return Response(json.dumps({"partitions": rows, "weights": {
        "age": weights.age, "fairshare": weights.fairshare, "job_size": weights.job_size,
        "partition": weights.partition, "qos": weights.qos, "max_age_s": weights.max_age_s}}),
        media_type="application/json")


@router.get("/health", summary="Liveness and identity of the server")
async def health(request: Request) -> dict[str, object]:
    service = request.app.state.service
    return {"ok": True, "version": __version__, "pid": os.getpid(), "home": request.app.state.home,
            "backend": service.capabilities.name, "user": service.user}


@router.post("/nodes/{node}/drain", response_model=list[NodeOut], responses={403: {"model": ErrorOut}},
             summary="Drain GPUs of a node, or the whole node (admins only): no new job lands there; jobs on them run on",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["reason"], "properties": {
                     "reason": {"type": "string"},
                     "gpus": {"type": "array", "items": {"type": "integer"},
                              "description": "GPU indexes; left out or null: the whole node"}}}}}}})
async def drain(request: Request, node: str) -> Response:
    body = json_object(await request.body())
    _only(body, {"reason", "gpus"}, '{"reason": "XID 79", "gpus": [2]}')
    service = request.app.state.service
    service.drain(caller_of(request), node, _gpus(body.get("gpus")), body.get("reason"))
    return Response(json.dumps(service.nodes_view()), media_type="application/json")


@router.post("/nodes/{node}/resume", response_model=list[NodeOut], responses={403: {"model": ErrorOut}},
             summary="Give drained GPUs of a node, or the whole node, back to scheduling (admins only)",
             openapi_extra={"requestBody": {"required": False, "content": {"application/json": {"schema": {
                 "type": "object", "properties": {
                     "gpus": {"type": "array", "items": {"type": "integer"},
                              "description": "GPU indexes; left out or null: the node and all its GPUs"}}}}}}})
async def resume(request: Request, node: str) -> Response:
    raw = await request.body()
    body = json_object(raw) if raw.strip() else {}
    _only(body, {"gpus"}, '{"gpus": [2]}')
    service = request.app.state.service
    service.resume(caller_of(request), node, _gpus(body.get("gpus")))
    return Response(json.dumps(service.nodes_view()), media_type="application/json")


def _only(body: dict[str, object], fields: set[str], example: str) -> None:
    unknown = sorted(set(body) - fields)
    if unknown:
        raise InvalidRequest(unknown[0], "is no field of this request", f"send {example}")


def _gpus(value: object) -> list[int] | None:
    if value is None:
        return None
    if (not isinstance(value, list) or not value
            or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in value)):
        raise InvalidRequest("gpus", f"must be a non-empty list of GPU indexes (0, 1, ...), got {value!r}",
                             "leave it out for the whole node")
    return value
