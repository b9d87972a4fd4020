"""Routes for a job's steps (`srun` inside it): the in-job srun opens one at its start and closes it at
its end; sacct, scontrol and the dashboard list them."""

from __future__ import annotations

import json

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from corral.api.identity import caller_of
from corral.api.jobs import JobRef
from corral.api.request_bodies import json_object
from corral.api.schemas import ErrorOut
from corral.core.jobspec.steps import job_ids
from corral.server.service import JobService

router = APIRouter(prefix="/api/v1/jobs", tags=["steps"],
                   responses={403: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}})
StepId = Path(ge=0, le=2**31 - 1, description="The step's number in its job, from 0.")


def _service(request: Request) -> JobService:
    return request.app.state.service


def _json(data: object, status: int = 200) -> Response:
    return Response(json.dumps(data), status_code=status, media_type="application/json")


MAX_JOBS = 10_000
many = APIRouter(prefix="/api/v1/steps", tags=["steps"], responses={422: {"model": ErrorOut}})


@many.get("", summary="The srun steps of many jobs at once (what sacct lists): ?jobs=12,13,14")
async def steps_of_jobs(request: Request, jobs: str = Query(description="Job ids, comma-separated")) -> Response:
    ids = job_ids(jobs, MAX_JOBS)
    found = await _service(request).steps_of(ids)
    return _json({"steps": {str(job_id): [step.to_dict() for step in steps] for job_id, steps in found.items()}})


@router.get("/{job_id}/steps", summary="A job's srun steps, in order (the batch step is the job itself)")
async def list_steps(request: Request, job_id: str = JobRef) -> Response:
    job, steps = await _service(request).job_steps(job_id)
    return _json({"job_id": job.id, "steps": [step.to_dict() for step in steps]})


@router.post("/{job_id}/steps", status_code=201, responses={409: {"model": ErrorOut}},
             summary="Open a step of a running job (its owner's srun, at its start): answers its number")
async def open_step(request: Request, job_id: str = JobRef) -> Response:
    step = await _service(request).open_step(job_id, caller_of(request), json_object(await request.body()))
    return _json(step.to_dict(), 201)


@router.post("/{job_id}/steps/{step_id}", summary="Close a step (its srun, at its end): state, exit code, usage")
async def close_step(request: Request, job_id: str = JobRef, step_id: int = StepId) -> Response:
    step = await _service(request).close_step(job_id, step_id, caller_of(request), json_object(await request.body()))
    return _json(step.to_dict())
