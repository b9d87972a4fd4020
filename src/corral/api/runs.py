"""Routes for tracked runs: create, log (metrics, params, tags, artifacts), finish, search, read.

Bodies are parsed and checked by `corral.tracking` (messages that name the field and the fix);
the schemas here document them. The full contract is docs/tracking-api.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from corral.api.identity import caller_of, policy_of
from corral.api.request_bodies import json_object
from corral.api.responses import json_response as _json
from corral.api.schemas import ErrorOut
from corral.tracking.service import TrackingService

router = APIRouter(prefix="/api/v1", tags=["runs"], responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}})

RunRef = Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="A run's id, or its uid.")


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


_OBJ = {"type": "object"}
_SERIES = {"type": "object", "required": ["key"], "properties": {
    "key": {"type": "string"}, "steps": {"type": "array", "items": {"type": "integer"}},
    "values": {"type": "array", "items": {}}, "times": {"type": "array", "items": {"type": "number"}},
    "steps_i64": {"type": "string", "description": "base64 of int64 little-endian"},
    "values_f64": {"type": "string", "description": "base64 of float64 little-endian"},
    "times_f64": {"type": "string", "description": "base64 of float64 little-endian"}}}
_CREATE = {"type": "object", "properties": {
    "project": {"type": "string"}, "name": {"type": "string"}, "uid": {"type": "string"}, "resume_key": {"type": "string"},
    "config": _OBJ, "tags": {"type": "array", "items": {"type": "string"}}, "job_id": {"type": "integer"},
    "node": {"type": "string"}, "gpu_type": {"type": "string"}, "git_commit": {"type": "string"},
    "start_time": {"type": "number"}}}
_METRICS = {"type": "object", "properties": {
    "batch_id": {"type": "string", "description": "Makes the call idempotent."},
    "metrics": {"type": "array", "items": _SERIES},
    "points": {"type": "array", "items": {"type": "object", "required": ["key", "step", "value"]}}}}


async def owned_run(request: Request, ref: str, action: str) -> str:
    """The run's id, to act on, if the caller owns the run or is an admin.

    Raises:
        Forbidden; NotFound: an unknown run.
    """
    run_id, owner = await tracking_of(request).owner(ref)
    policy_of(request).check_manage(caller_of(request), owner, None, f"{action} run {ref}")
    return str(run_id)


def tracking_of(request: Request) -> TrackingService:
    return request.app.state.tracking




@router.post("/runs", status_code=201, summary="Create a run (or get the one its uid or resume_key names)",
             openapi_extra=_body(_CREATE))
async def create_run(request: Request) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    policy.require(caller, "submit", "creating a run")
    body = json_object(await request.body())

    def check_job(job: dict[str, Any]) -> None:  # a run of a job is its owner's to log
        policy.check_manage(caller, job["user"], job["account"], f"tracking a run of job {job['id']}")

    run, created = await tracking_of(request).create_run(
        body, user=caller.user, may_take=lambda owner: policy.may_manage(caller, owner), check_job=check_job)
    return _json(run, 201 if created else 200)


@router.get("/runs", summary="Search runs, newest first")
async def list_runs(
    request: Request,
    project: str | None = None,
    tag: str | None = None,
    state: str | None = None,
    job: int | None = Query(None, ge=1, lt=2**31, description="Runs of this job."),
    where: list[str] = Query([], description="config.KEY OP VALUE or metric.KEY[.last|.min|.max] OP NUMBER (repeatable)."),
    limit: int = Query(100, ge=1, le=10_000),
    archived: bool | None = Query(False, description="true: only archived runs; false (default): none of them."),
) -> Response:
    runs = await tracking_of(request).search(project=project, tag=tag, state=state, job_id=job, where=where, limit=limit,
                                             archived=archived)
    return _json({"runs": runs})


@router.get("/projects", summary="Projects and how many runs each has")
async def list_projects(request: Request) -> Response:
    return _json({"projects": await tracking_of(request).projects()})


@router.get("/runs/{ref}", summary="One run: config, tags, state, and a summary of each metric")
async def get_run(request: Request, ref: str = RunRef) -> Response:
    return _json(await tracking_of(request).get_run(ref))


@router.patch("/runs/{ref}", summary="Rename a run, set its notes (Markdown), archive or restore it",
              openapi_extra=_body({"type": "object", "properties": {
                  "name": {"type": "string"}, "notes": {"type": ["string", "null"]}, "archived": {"type": "boolean"}}}))
async def change_run(request: Request, ref: str = RunRef) -> Response:
    ref = await owned_run(request, ref, "changing")
    return _json(await tracking_of(request).change_run(ref, json_object(await request.body())))


@router.delete("/runs/{ref}", summary="Delete a run with its metrics and uploaded artifacts")
async def delete_run(request: Request, ref: str = RunRef) -> Response:
    """Blobs no other run links are removed from the store; a job's checkpoint files stay where
    it wrote them (they are its owner's files), only their registration goes."""
    run_id = int(await owned_run(request, ref, "deleting"))
    return _json(await request.app.state.artifacts.delete_run(run_id))


@router.post("/runs/{ref}/metrics", summary="Append a batch of metrics (many keys and steps)", openapi_extra=_body(_METRICS))
async def log_metrics(request: Request, ref: str = RunRef) -> Response:
    ref = await owned_run(request, ref, "logging metrics to")
    return _json(await tracking_of(request).log_metrics(ref, await request.body()))


@router.post("/runs/{ref}/params", summary="Merge parameters into the run's config",
             openapi_extra=_body({"type": "object", "required": ["params"], "properties": {"params": _OBJ}}))
async def log_params(request: Request, ref: str = RunRef) -> Response:
    ref = await owned_run(request, ref, "logging parameters to")
    return _json(await tracking_of(request).log_params(ref, json_object(await request.body())))


@router.post("/runs/{ref}/tags", summary="Add and remove tags", openapi_extra=_body({"type": "object", "properties": {
    "add": {"type": "array", "items": {"type": "string"}}, "remove": {"type": "array", "items": {"type": "string"}}}}))
async def change_tags(request: Request, ref: str = RunRef) -> Response:
    ref = await owned_run(request, ref, "tagging")
    return _json(await tracking_of(request).change_tags(ref, json_object(await request.body())))


@router.post("/runs/{ref}/finish", summary="Mark the run finished, failed or crashed",
             openapi_extra=_body({"type": "object", "properties": {
                 "state": {"type": "string", "enum": ["finished", "failed", "crashed"]}, "end_time": {"type": "number"},
                 "start_time": {"type": "number", "description": "corrects the run's start (an import of old logs)"}}}))
async def finish_run(request: Request, ref: str = RunRef) -> Response:
    ref = await owned_run(request, ref, "finishing")
    raw = await request.body()
    return _json(await tracking_of(request).finish(ref, json_object(raw) if raw.strip() else {}))


@router.post("/runs/{ref}/artifacts", summary="Register artifacts (checkpoints, files); a known path is updated",
             openapi_extra=_body({"type": "object", "required": ["artifacts"], "properties": {
                 "artifacts": {"type": "array", "items": {"type": "object", "required": ["path"]}}}}))
async def put_artifacts(request: Request, ref: str = RunRef) -> Response:
    ref = await owned_run(request, ref, "registering artifacts of")
    return _json({"artifacts": await tracking_of(request).put_artifacts(ref, json_object(await request.body()))})


@router.get("/runs/{ref}/artifacts", summary="A run's artifacts")
async def list_artifacts(request: Request, ref: str = RunRef, type: str | None = None,
                         deleted: bool = Query(False, description="Include those retention deleted.")) -> Response:
    ref = await owned_run(request, ref, "listing the artifacts of")
    return _json({"artifacts": await tracking_of(request).artifacts(ref, type_=type, deleted=deleted)})


@router.get("/runs/{ref}/series/batch", summary="Several metrics' points in one answer, each downsampled alike")
async def read_series_batch(
    request: Request,
    ref: str = RunRef,
    key: list[str] = Query(..., description="The metrics (repeatable, up to 100)."),
    max_points: int = Query(2000, description="At most this many points per series (2 to 100,000)."),
    start: int | None = Query(None, ge=0, lt=2**62, description="First step of the range."),
    end: int | None = Query(None, ge=0, lt=2**62, description="Last step of the range."),
) -> Response:
    """`{"series": [...]}`, each as `/series` answers it, in the order asked."""
    body = await tracking_of(request).series_many(ref, key, start=start, end=end, max_points=max_points)
    return Response(body, media_type="application/json")


@router.get("/runs/{ref}/series", summary="One metric's points, downsampled keeping each bucket's min and max")
async def read_series(
    request: Request,
    ref: str = RunRef,
    key: str = Query(..., description="The metric, e.g. train/loss."),
    max_points: int = Query(2000, description="At most this many points (2 to 100,000)."),
    start: int | None = Query(None, ge=0, lt=2**62, description="First step of the range."),
    end: int | None = Query(None, ge=0, lt=2**62, description="Last step of the range."),
) -> Response:
    body = await tracking_of(request).series(ref, key, start=start, end=end, max_points=max_points)
    return Response(body, media_type="application/json")
