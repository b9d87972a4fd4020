"""Routes for jobs: submit, list, show, cancel, wait, logs."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from corral.api.identity import caller_of
from corral.api.request_bodies import json_object
from corral.api.schemas import CancelBody, CancelOut, ErrorOut, JobList, JobOut, JobRequest
from corral.core.jobspec.cancel_requests import parse_cancel_request
from corral.core.jobspec.events import started_priority, timeline
from corral.core.access.identity import Caller
from corral.core.jobspec.job import Job
from corral.core.jobspec.job_fields import JobFields
from corral.core.jobspec.resubmit import CONFIRM_OWNER
from corral.core.jobspec.spec import UPDATE_FIELDS
from corral.core.jobspec.states import JobState
from corral.errors import Conflict, CorralError, InvalidRequest
from corral.server.service import JobService

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"], responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}})

MAX_PAGE = 10_000
MAX_ID = 2**31 - 1
# The CLI sends its environment; a variable holding bytes that are not UTF-8 reaches the job as those bytes.
SUBMITTED_ENVIRONMENT = frozenset({"environment", "env"})
JobRef = Path(pattern=r"^[0-9]{1,10}(_[0-9]{1,10})?$", description="A job's id, or ID_TASK for a task of an array.")


def _service(request: Request) -> JobService:
    return request.app.state.service


def owned_job(request: Request, ref: str, action: str) -> Job:
    """The job `ref`, if the caller may act on it (its owner, an admin, its account's coordinator).

    Raises:
        NotFound; Forbidden: naming who may.
    """
    service = _service(request)
    job = service.resolve(ref)
    service.access.check_manage(caller_of(request), job.spec.user, job.spec.account, f"{action} job {ref}")
    return job


def job_json(request: Request, job: Job, detail: bool = True) -> JobFields:
    """The job's fields, its `expected_end` brought forward to its tracked run's ETA where the monitor has
    one and it comes sooner (`corral.core.jobspec.expected_end`)."""
    return job.to_dict(detail, eta_end=request.app.state.monitor.eta_end(job.id))


def _json(data: object, status: int = 200) -> Response:
    return Response(json.dumps(data), status_code=status, media_type="application/json")


# The body is documented by JobRequest but parsed by hand: `corral.core.jobspec.spec` checks every
# field (types included) with messages that name the fix, and skipping a second validation
# pass is a fifth of the cost of a submit.
_SUBMIT_BODY = {"required": True, "content": {"application/json": {"schema": JobRequest.model_json_schema()}}}


@router.post("", response_model=JobOut, status_code=201, summary="Submit a job",
             openapi_extra={"requestBody": _SUBMIT_BODY})
async def submit_job(request: Request) -> Response:
    # Served by corral.api.submit_path (the hot path); this route documents it and answers if it is bypassed.
    return await submit(_service(request), await request.body(), caller_of(request))


async def submit(service: JobService, raw: bytes, caller: Caller) -> Response:
    """Validate and submit one job from a request body as `caller`; answers 201 with the job and its warnings."""
    service.access.require(caller, "submit", "submitting a job")
    body = json_object(raw, bytes_in=SUBMITTED_ENVIRONMENT)
    job = await service.submit({k: v for k, v in body.items() if v is not None}, user=caller.user,
                               privileged=caller.is_admin)
    view = job.to_dict()  # just queued: no tracked run, so no ETA to ask the monitor for
    view["warnings"] = list(job.spec.warnings)
    return _json(view, 201)


@router.get("", response_model=JobList, summary="List jobs: the queue, or finished ones")
async def list_jobs(
    request: Request,
    scope: Literal["active", "finished"] = Query("active", description="active: pending and running; finished: history"),
    state: list[str] = Query([], description="Only these states (repeatable)."),
    name: str | None = None,
    limit: int = Query(1000, ge=1, le=MAX_PAGE),
    after: int = Query(0, ge=0, le=MAX_ID, description="active: ids after this one"),
    before: int | None = Query(None, ge=1, le=MAX_ID, description="finished: ids before this one"),
    ended_after: float | None = Query(None, ge=0, le=1e11, description="finished: only jobs that ended at or after "
                                      "this time (epoch seconds), as sacct's --starttime selects them"),
    events: bool = Query(True, description="finished: each job's timeline (`events`); false leaves it out, for "
                         "callers that read only the records (sacct)"),
    order: Literal["id", "start"] = Query("id", description="finished: newest id first (pages with `before`), or "
                                          "latest start first (a job that never started: by its end), as `corral "
                                          "history` lists them; one page, no cursor"),
) -> Response:
    service = _service(request)
    _check_states(state)
    if order == "start" and before is not None:
        raise InvalidRequest("before", "pages only jobs in id order", "leave it out with order=start, or use order=id")
    if scope == "active":
        jobs = service.list_active(states=state, limit=limit, after_id=after, name=name)
        cursor = jobs[-1].id if len(jobs) == limit else None
        return _json({"jobs": [job_json(request, j, detail=False) for j in jobs], "next_cursor": cursor})
    # a database read of up to 10,000 rows: off the event loop, which serves everyone else meanwhile;
    # ended jobs expect no end, so no ETA is asked for
    jobs = await asyncio.to_thread(service.list_finished, states=state, limit=limit, before_id=before, name=name,
                                   ended_after=ended_after, by_start=order == "start")
    cursor = jobs[-1].id if len(jobs) == limit and order == "id" else None
    if not events:
        return _json({"jobs": [j.to_dict(detail=False) for j in jobs], "next_cursor": cursor})
    # history says when each job was preempted, and for which job
    stored = await asyncio.to_thread(service.store.events_of, [j.id for j in jobs])
    for j in jobs:
        j.priority = started_priority(j, stored.get(j.id, ()))
    return _json({"jobs": [j.to_dict(detail=False) | {"events": timeline(j, stored.get(j.id, ()))} for j in jobs],
                  "next_cursor": cursor})


@router.get("/{job_id}", response_model=JobOut, summary="Show one job, with its timeline (`events`)")
async def get_job(request: Request, job_id: str = JobRef) -> Response:
    service = _service(request)
    job = service.resolve(job_id)
    stored = await asyncio.to_thread(service.store.events_of, [job.id])
    job.priority = started_priority(job, stored.get(job.id, ()))  # read back from the database, it started with one
    return _json(_view(request, job) | {"events": timeline(job, stored.get(job.id, ())),
                                        "warnings": service.watchers.mail.unsent(job)})


@router.get("/{job_id}/tasks", summary="An array job's tasks, their states, and what they add up to")
async def array_tasks(request: Request, job_id: int = Path(ge=1, le=MAX_ID),
                      offset: int = Query(0, ge=0, le=10_000_000), limit: int = Query(500, ge=1, le=MAX_PAGE)) -> Response:
    """Tasks with records (started, or cancelled while waiting) by task id, a page of them; the summary
    counts all of them and names the tasks still waiting in the array's place."""
    from corral.core.jobspec.arrays import array_summary

    array, tasks = _service(request).array_tasks(job_id)
    return _json({"array": _view(request, array), "summary": array_summary((t.state for t in tasks), array.array_pending),
                  "total": len(tasks), "offset": offset, "limit": limit, "tasks": [job_json(request, t, detail=False) for t in tasks[offset:offset + limit]]})


def _view(request: Request, job: Job) -> JobFields:
    """A job as its caller may see it: as in Slurm, the batch script is for those who may manage the job."""
    view = job_json(request, job)
    if view.get("script") is not None and not _service(request).access.may_manage(
            caller_of(request), job.spec.user, job.spec.account):
        view["script"] = None
    return view


@router.post("/attach", response_model=JobOut, status_code=201, responses={409: {"model": ErrorOut}},
             summary="Track a job submitted with plain sbatch (Slurm backend)",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["slurm_job_id"], "properties": {"slurm_job_id": {"type": "string"}}}}}}})
async def attach_job(request: Request) -> Response:
    body = json_object(await request.body())
    service = _service(request)
    service.access.require(caller_of(request), "admin", "attaching a Slurm job")
    if not service.capabilities.attach:
        raise Conflict("this server runs jobs itself; attaching Slurm jobs needs `corral up --backend slurm`")
    if set(body) != {"slurm_job_id"}:
        raise InvalidRequest("slurm_job_id", "missing" if "slurm_job_id" not in body else "is the only field",
                             'send {"slurm_job_id": "123"}')
    job = await service.attach(str(body["slurm_job_id"]))
    return _json(job_json(request, job), 201)


@router.get("/{job_id}/efficiency", responses={409: {"model": ErrorOut}},
            summary="How well a job used its CPUs, memory and GPUs, with advice (like seff)")
async def job_efficiency(request: Request, job_id: str = JobRef) -> Response:
    """From Slurm's accounting on the Slurm backend, else from the job's samples and the kernel's count."""
    from corral.monitor.efficiency import advice

    service = _service(request)
    if service.capabilities.efficiency_from_accounting:
        report = service.efficiency(job_id)
        return _json(report | {"advice": advice(report)})
    return _json(await request.app.state.monitor.efficiency(job_id))


@router.get("/{job_id}/diagnosis", summary="Why a job failed or runs badly: likely causes, evidence and fixes")
async def job_diagnosis(request: Request, job_id: str = JobRef) -> Response:
    owned_job(request, job_id, "diagnosing (it quotes the logs of)")
    return _json(await request.app.state.monitor.diagnose(job_id))


@router.post("/cancel", response_model=CancelOut, summary="Cancel many jobs as one request",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": CancelBody.model_json_schema()}}}})
async def cancel_jobs(request: Request) -> Response:
    """None of the jobs named starts on what the running ones named free. One entry per job named, in order:
    the job as it is afterwards, or `{"ref", "error"}` for one that could not be cancelled (the others are)."""
    asked = parse_cancel_request(json_object(await request.body()))
    answers = await _service(request).cancel(asked.refs, caller_of(request), pending_only=asked.pending_only)
    return _json({"jobs": [job_json(request, answer) if isinstance(answer, Job) else
                           {"ref": ref, "error": answer.to_dict() | {"status": answer.status}}
                           for ref, answer in zip(asked.refs, answers)]})


@router.post("/{job_id}/cancel", response_model=JobOut, responses={409: {"model": ErrorOut}}, summary="Cancel a job")
async def cancel_job(request: Request, job_id: str = JobRef) -> Response:
    (answer,) = await _service(request).cancel([job_id], caller_of(request))
    if isinstance(answer, CorralError):
        raise answer
    return _json(job_json(request, answer))


@router.patch("/{job_id}", response_model=JobOut, responses={409: {"model": ErrorOut}},
              summary="Change a pending job: time limit, nice, partition, QoS, resources",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                  "type": "object", "properties": {k: {} for k in sorted(UPDATE_FIELDS)}}}}}})
async def update_job(request: Request, job_id: str = JobRef) -> Response:
    owned_job(request, job_id, "updating")
    body = json_object(await request.body())
    return _json(job_json(request, _service(request).update(job_id, body, privileged=caller_of(request).is_admin)))


@router.get("/{job_id}/terminal", responses={409: {"model": ErrorOut}},
            summary="Where an interactive job's client (srun, salloc) connects: its owner's, while it runs")
async def job_terminal(request: Request, job_id: str = JobRef) -> Response:
    caller = caller_of(request)
    return _json({"socket": _service(request).terminal(job_id, caller.user, caller.is_admin)})


@router.post("/{job_id}/resubmit", response_model=JobOut, status_code=201, responses={403: {"model": ErrorOut}},
             summary="Run a job again, with changes, as its owner (for its owner or an admin, who sends "
                     '`"confirm_owner": "<owner>"`); the new job\'s `parent` is it')
async def resubmit_job(request: Request, job_id: str = JobRef) -> Response:
    raw = await request.body()
    changes = json_object(raw, bytes_in=SUBMITTED_ENVIRONMENT) if raw.strip() else {}
    confirm_owner = changes.pop(CONFIRM_OWNER, None)
    job = await _service(request).resubmit(job_id, changes, caller_of(request), confirm_owner)
    view = job.to_dict()
    view["warnings"] = list(job.spec.warnings)
    return _json(view, 201)


@router.post("/{job_id}/hold", response_model=JobOut, responses={409: {"model": ErrorOut}}, summary="Hold a pending job")
async def hold_job(request: Request, job_id: str = JobRef) -> Response:
    owned_job(request, job_id, "holding")
    return _json(job_json(request, _service(request).hold(job_id)))


@router.post("/{job_id}/release", response_model=JobOut, responses={409: {"model": ErrorOut}},
             summary="Release a held job")
async def release_job(request: Request, job_id: str = JobRef) -> Response:
    owned_job(request, job_id, "releasing")
    return _json(job_json(request, _service(request).release(job_id)))


@router.post("/{job_id}/requeue", response_model=JobOut, responses={409: {"model": ErrorOut}},
             summary="Queue a running or ended job again (like scontrol requeue); hold=true leaves it held")
async def requeue_job(request: Request, job_id: str = JobRef, hold: bool = Query(False)) -> Response:
    owned_job(request, job_id, "requeueing")
    job = await _service(request).requeue(job_id, by=caller_of(request).user, hold=hold)
    return _json(job.to_dict())


@router.get("/{job_id}/wait", response_model=JobOut, summary="Wait (long poll) until the job ends")
async def wait_job(request: Request, job_id: str = JobRef, timeout: float = Query(30.0, ge=0, le=300)) -> Response:
    job = await _service(request).wait(job_id, timeout)
    return _json(_view(request, job))


@router.get(
    "/{job_id}/logs", summary="Read a job's stdout or stderr",
    response_class=Response, responses={200: {"content": {"application/octet-stream": {}}}},
)
async def job_logs(
    request: Request, job_id: str = JobRef, stream: str = "stdout", offset: int = Query(0, ge=0, le=2**62),
    limit: int = Query(1 << 20, ge=1, le=1 << 20), tail: int | None = Query(None, ge=0, le=100_000),
) -> Response:
    """Bytes from `offset`; the `X-Corral-Offset` header is where the next read starts,
    and `X-Corral-State` the job's state (follow until it is final and no bytes come)."""
    owned_job(request, job_id, "reading the logs of")
    # off the event loop: a slow disk (or a log on a network filesystem) must not stall every other request
    data, next_offset, job = await asyncio.to_thread(_service(request).read_log, job_id, stream, offset, limit, tail)
    headers = {"X-Corral-Offset": str(next_offset), "X-Corral-State": job.state.value}
    return Response(data, media_type="application/octet-stream", headers=headers)


def _check_states(states: list[str]) -> None:
    known = {s.value for s in JobState}
    for s in states:
        if s not in known:
            raise InvalidRequest("state", f"unknown state {s!r}", f"use one of {', '.join(sorted(known))}")
