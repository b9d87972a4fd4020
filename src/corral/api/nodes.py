"""Routes for the machine: nodes and their GPUs, server info."""

from __future__ import annotations

import json
import os

from fastapi import APIRouter, Request
from starlette.responses import Response

from corral import __version__
from corral.api.schemas import NodeOut, PriorityOut

router = APIRouter(prefix="/api/v1", tags=["cluster"])


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
