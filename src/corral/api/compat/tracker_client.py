"""The tracker client's routes, so the course's client logs into corral unchanged (`TRACKER_API=http://host:8765/tracker`).

The same routes are served under `/tracker` and at the server's root (`TRACKER_API=http://host:8765`):
they are all POSTs, and the root's GET pages (the dashboard's `/runs/{id}`) stay the dashboard's.
Each route translates the client's body (`corral.core.dialects.tracker_client`) and calls the tracking
service, with the same owner/admin rules as corral's own run routes (`api/runs.py`). The key the
client sends as `X-API-Key` is a corral API token (`api/identity.py`).

The Slurm epilog's form-encoded `POST /webhooks/slurm` (`job_id=...&status=...&exit_code=...`) is
the nudge corral's own epilog gives (`api/webhooks.py`): the server reads the job's end from Slurm
itself, never from the request.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import orjson

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from corral.api.identity import caller_of, policy_of
from corral.api.request_bodies import json_object
from corral.api.responses import json_response
from corral.api.runs import owned_run, tracking_of
from corral.api.schemas import ErrorOut
from corral.api.webhooks import webhook_secret_given
from corral.core.dialects import tracker_client as tracker
from corral.errors import InvalidRequest

TRACKER_PREFIX = "/tracker"
"""`TRACKER_API=http://host:8765/tracker`."""
BARE_PATHS = ("/experiments/", "/runs/", "/webhooks/")
"""The same routes at the root (`TRACKER_API=http://host:8765`): POSTs only, so they need a caller
where the dashboard's GET pages (`/runs/{id}`) need none."""
OPEN_PATHS = (f"{TRACKER_PREFIX}/webhooks/", "/webhooks/")
"""The epilog's routes check their own credential: the webhook secret, or a caller as any route's."""

router = APIRouter(tags=["course tracker"], responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut},
                                                        404: {"model": ErrorOut}, 422: {"model": ErrorOut}})

ExperimentId = Path(min_length=1, max_length=tracker.MAX_EXPERIMENT, description="The experiment: a corral project.")
RunId = Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="The run_id its creation answered.")


def _body(example: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"example": example}}}}


@router.post("/experiments/{experiment_id}/runs", status_code=201, summary="Start a run of an experiment (a project)",
             openapi_extra=_body({"slurm_job_id": "123", "slurm_node": "gpu01", "config": {"lr": 0.001},
                                  "gpu_type": "A100"}))
async def create_run(request: Request, experiment_id: str = ExperimentId) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    policy.require(caller, "submit", "creating a run")
    wanted = tracker.tracker_run(experiment_id, json_object(await request.body()))
    body = dict(wanted.body)
    if wanted.slurm_job_id is not None:
        job_id = request.app.state.service.job_named(wanted.slurm_job_id)
        if job_id is None:
            raise InvalidRequest("slurm_job_id", f"no job {wanted.slurm_job_id} is known to this corral server",
                                 "send the id of the job this script runs in ($SLURM_JOB_ID), or null outside a job")
        body["job_id"] = job_id

    def check_job(job: dict[str, Any]) -> None:  # a run of a job is its owner's to log
        policy.check_manage(caller, job["user"], job["account"], f"tracking a run of job {job['id']}")

    run, created = await tracking_of(request).create_run(
        body, user=caller.user, may_take=lambda owner: policy.may_manage(caller, owner), check_job=check_job)
    return json_response({"run_id": run["id"], "uid": run["uid"], "experiment_id": experiment_id,
                          "job_id": run["job_id"], "resumed": not created}, 201 if created else 200)


@router.post("/runs/{run_id}/metrics", summary="Log one metric point",
             openapi_extra=_body({"name": "train_loss", "value": 0.42, "step": 100}))
async def log_metric(request: Request, run_id: str = RunId) -> Response:
    return await _log(request, run_id, tracker.metric_body(json_object(await request.body())))


@router.post("/runs/{run_id}/metrics/batch", summary="Log several metrics at one step",
             openapi_extra=_body({"step": 100, "metrics": {"train_loss": 0.42, "lr": 0.001},
                                  "timestamp": "2026-01-15T08:00:00Z"}))
async def log_metrics_batch(request: Request, run_id: str = RunId) -> Response:
    return await _log(request, run_id, tracker.batch_body(json_object(await request.body())))


async def _log(request: Request, ref: str, body: dict[str, Any]) -> Response:
    run = await owned_run(request, ref, "logging metrics to")
    result = await tracking_of(request).log_metrics(run, orjson.dumps(body))
    return json_response({"status": "ok", **result})


@router.post("/runs/{run_id}/artifacts", status_code=201, summary="Record an artifact (a path, as checkpoints are)",
             openapi_extra=_body({"path": "/scratch/ckpt/epoch10.pt", "type": "checkpoint", "size_bytes": 104857600}))
async def log_artifact(request: Request, run_id: str = RunId) -> Response:
    body = tracker.artifact_body(json_object(await request.body()))
    run = await owned_run(request, run_id, "registering artifacts of")
    recorded = await tracking_of(request).put_artifacts(run, body)
    return json_response({"status": "ok", "artifact": recorded[0] if recorded else None}, 201)


@router.post("/webhooks/slurm", status_code=202, summary="A Slurm job ended (the course's epilog, form-encoded)")
async def slurm_event(request: Request) -> Response:
    if not webhook_secret_given(request):
        request.app.state.identifier.admit(request.scope)  # else a caller as any route's: token, X-API-Key, local peer
    raw = await request.body()
    if len(raw) > 4096:
        raise InvalidRequest("body", "is too long for an epilog's notice", "send job_id, status and exit_code")
    if raw.lstrip().startswith(b"{"):
        fields = {key: str(value) for key, value in json_object(raw).items()}
    else:
        fields = {key: values[-1] for key, values in parse_qs(raw.decode("utf-8", "replace")).items()}
    job = fields.get("job_id", fields.get("slurm_job_id", "")).strip()
    if job and not tracker.is_job_id(job):
        raise InvalidRequest("job_id", f"{job!r} is not a job id", "send $SLURM_JOB_ID")
    request.app.state.service.poll_soon()  # a nudge: what ended is read from Slurm itself, never from this body
    return json_response({"status": "accepted", "job_id": job or None}, 202)
