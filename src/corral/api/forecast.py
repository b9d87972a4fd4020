"""Routes for planning: the start-time forecast (POST the body a submit would send, learn when the job would
start, what holds it back and what would start it sooner; nothing is submitted: `sbatch --test-only`,
`corral plan`), and the plan the dashboard draws (each GPU's timeline)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from corral.api.identity import caller_of
from corral.api.jobs import SUBMITTED_ENVIRONMENT
from corral.api.request_bodies import json_object
from corral.api.schemas import ErrorOut, JobRequest
from corral.core.scheduling.forecast import Alternative, Holder
from corral.core.units.iso_times import iso_utc
from corral.server.forecasting import SubmitForecast

router = APIRouter(prefix="/api/v1", tags=["jobs"])


class BlockerOut(BaseModel):
    job_id: int
    user: str
    kind: str = Field(description="running; starting (ahead of it, starts now); reserved (a waiting job ahead, "
                      "from `start`); waiting (a job ahead that can be given no start: the queue stops there).")
    node: str | None
    gpus: list[int] = Field(description="The GPUs it holds (indexes on its node).")
    start: str | None = Field(description="From when it holds them in the forecast: now for running and starting "
                              "jobs, a reserved job's expected start.")
    end: str | None = Field(description="When it gives them back (its time limit's end); null: no time limit.")
    ends_in_s: float | None
    cpus: int = Field(description="The CPUs it holds on its node.")
    mem_mb: int = Field(description="The memory it holds on its node (MB).")


class AlternativeOut(BaseModel):
    change: str = Field(description="time (a shorter --time) or gpus (fewer GPUs).")
    time_limit_s: int | None
    gpus: int = Field(description="GPUs asked for.")
    start: str
    start_in_s: float
    node: str | None
    gpu_ids: list[int]
    option: str = Field(description="The submit option that makes the change, e.g. --time=120 or --gpus=2.")


class ForecastOut(BaseModel):
    job_id: int = Field(description="The id the job would get if submitted now, which `sbatch --test-only` prints as "
                        "Slurm's does; another submit may take it first, so corral's own views do not show it.")
    now: str
    start: str | None = Field(description="When it would start; null: never, as things stand (`reason` says why).")
    start_in_s: float | None
    node: str | None
    gpus: list[int] = Field(description="The GPUs it would get (indexes on `node`).")
    cpus: int
    partition: str | None
    qos: str | None
    time_limit_s: int | None
    code: str = Field(description="Slurm's reason it would wait (Resources, Priority, QOSMaxGRESPerUser, ...), "
                      "Unsatisfiable, or None when it would start now.")
    reason: str
    waits_for: list[str] = Field(description="What decides a later start: of gpus, cpus and memory, those too few on "
                                 "its node until then (all three for an exclusive job); empty when it starts now or "
                                 "never.")
    ahead: int = Field(description="Pending jobs ahead of it in the queue.")
    priority: int
    blockers: list[BlockerOut] = Field(description="The jobs that hold what it needs until it starts, soonest "
                                       "end first.")
    alternatives: list[AlternativeOut] = Field(description="The same job with a shorter time limit or fewer GPUs, "
                                               "each where it starts sooner.")
    preempts: list[int]
    notes: list[str]
    warnings: list[str]


_BODY = {"required": True, "content": {"application/json": {"schema": JobRequest.model_json_schema()}}}


@router.post("/forecast", response_model=ForecastOut, summary="When a job would start if submitted now (nothing "
             "is submitted)", responses={409: {"model": ErrorOut}, 422: {"model": ErrorOut}},
             openapi_extra={"requestBody": _BODY})
async def forecast(request: Request) -> Response:
    """The body is a submit's (POST /api/v1/jobs), checked and admitted as a submit would be: a bad field, a
    partition you may not use or the QoS's submit limit are refused the same way. A request no node could
    ever run is answered, with `start` null, code Unsatisfiable and the most GPUs that would run."""
    service = request.app.state.service
    caller = caller_of(request)
    service.access.require(caller, "submit", "forecasting a job")
    body = json_object(await request.body(), bytes_in=SUBMITTED_ENVIRONMENT)
    answer = await service.forecast({k: v for k, v in body.items() if v is not None}, user=caller.user,
                                    privileged=caller.is_admin)
    return Response(json.dumps(forecast_view(answer)), media_type="application/json")


@router.get("/plan", summary="Each GPU's timeline: running jobs to their time limits, reservations of pending ones")
async def plan(request: Request) -> Response:
    """As the last scheduling pass left it: what the dashboard's Plan page draws (a what-if comes from the forecast)."""
    return Response(json.dumps(request.app.state.service.plan_view()), media_type="application/json")


def forecast_view(answer: SubmitForecast) -> dict[str, Any]:
    result, spec, now = answer.forecast, answer.spec, answer.now
    return {
        "job_id": answer.job_id, "now": iso_utc(now), "start": iso_utc(result.start),
        "start_in_s": _after(result.start, now), "node": result.node, "gpus": list(result.gpu_ids),
        "cpus": spec.cpus, "partition": spec.partition, "qos": spec.qos, "time_limit_s": spec.time_limit_s,
        "code": result.code, "reason": result.reason, "waits_for": list(result.waits_for), "ahead": result.ahead,
        "priority": result.priority,
        "blockers": [_blocker(b, now) for b in result.blockers],
        "alternatives": [_alternative(a, now, spec.gpu_type) for a in result.alternatives],
        "preempts": list(result.preempts), "notes": list(result.notes), "warnings": list(spec.warnings),
    }


def _after(moment: float | None, now: float) -> float | None:
    return None if moment is None else round(max(0.0, moment - now), 3)


def _blocker(holder: Holder, now: float) -> dict[str, Any]:
    return {"job_id": holder.job_id, "user": holder.user, "kind": holder.kind, "node": holder.node,
            "gpus": list(holder.gpu_ids), "start": iso_utc(holder.start), "end": iso_utc(holder.end),
            "ends_in_s": _after(holder.end, now), "cpus": holder.cpus, "mem_mb": holder.mem_mb}


def _alternative(alternative: Alternative, now: float, gpu_type: str | None) -> dict[str, Any]:
    if alternative.change == "time":
        option = f"--time={(alternative.time_limit_s or 0) // 60}"  # minutes, as sbatch and corral submit read it
    else:
        option = f"--gpus={gpu_type}:{alternative.gpus}" if gpu_type else f"--gpus={alternative.gpus}"
    return {"change": alternative.change, "time_limit_s": alternative.time_limit_s, "gpus": alternative.gpus,
            "start": iso_utc(alternative.start), "start_in_s": _after(alternative.start, now),
            "node": alternative.node, "gpu_ids": list(alternative.gpu_ids), "option": option}
