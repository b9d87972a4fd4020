"""Routes for alerts: rules (the seed's alert_create), channels, and the firing history.

Who may do what: admins set up channels and share them with named users (or all); a user's
rule names only channels shared with them and watches only their own jobs; a user sees and
acknowledges only the firings about their own jobs. Admins see and do everything.
"""

from __future__ import annotations

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from corral.api.identity import caller_of, policy_of
from corral.api.jobs import owned_job
from corral.api.request_bodies import json_object
from corral.api.responses import json_response as _json
from corral.api.schemas import ErrorOut
from corral.errors import Forbidden

router = APIRouter(prefix="/api/v1/alerts", tags=["alerts"],
                   responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}})

Name = Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="A rule's or channel's name.")
_RULE = {"type": "object", "required": ["name", "condition"], "properties": {
    "name": {"type": "string"}, "severity": {"enum": ["info", "warning", "critical"], "default": "warning"},
    "condition": {"type": "string", "examples": ["state == FAILED", "gpu_utilization < 10 for 15m", "metric.loss is nan",
                                                   "no_progress for 30m", "time_left < 10m", "queue_wait > 1h"]},
    "message": {"type": "string", "description": "Placeholders: {job} {name} {user} {state} {value} {rule} {condition}"},
    "job": {"type": "integer"}, "label": {"type": "string", "description": "KEY=VALUE"}, "user": {"type": "string"},
    "channels": {"type": "array", "items": {"type": "string"}}}}
_CHANNEL = {"type": "object", "required": ["name", "type"], "properties": {
    "name": {"type": "string"}, "type": {"enum": ["webhook", "slack", "email", "command"]},
    "url": {"type": "string"}, "headers": {"type": "object"}, "to": {}, "smtp_host": {"type": "string"},
    "smtp_port": {"type": "integer"}, "sender": {"type": "string"}, "argv": {"type": "array", "items": {"type": "string"}},
    "command": {"type": "string"}}}
_SHARING = {"type": "object", "description": 'Give one: {"users": [...]} (empty: nobody) or {"all": true}.',
            "properties": {"users": {"type": "array", "items": {"type": "string"}}, "all": {"type": "boolean"}}}


def _body(schema: dict) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@router.post("/rules", status_code=201, summary="Create an alert rule", openapi_extra=_body(_RULE))
async def create_rule(request: Request) -> Response:
    monitor = request.app.state.monitor
    caller, policy = caller_of(request), policy_of(request)
    policy.require(caller, "submit", "creating an alert rule")
    body = json_object(await request.body())
    if not caller.is_admin:
        # a user's rule watches their own jobs: notifications about others' are theirs (or an admin's) to set up
        if body.get("user") is not None and body.get("user") != caller.user:
            raise Forbidden(f"creating an alert rule for user {body.get('user')}: only an admin may; you are {caller.user}")
        if isinstance(body.get("job"), int) and not isinstance(body.get("job"), bool):
            owned_job(request, str(body["job"]), "watching")
        else:
            body["user"] = caller.user  # a label alone would watch everybody's jobs that carry it
    return _json(await monitor.create_rule(body, owner=caller.user, admin=caller.is_admin), 201)


@router.get("/rules", summary="The alert rules")
async def list_rules(request: Request) -> Response:
    return _json(await request.app.state.monitor.rules())


@router.delete("/rules/{name}", status_code=204, summary="Delete a rule (its open firings resolve)")
async def delete_rule(request: Request, name: str = Name) -> Response:
    monitor = request.app.state.monitor
    rule = next((r for r in await monitor.rules() if r.get("name") == name), None)
    if rule is not None:
        policy_of(request).check_manage(caller_of(request), str(rule.get("owner")), None, f"deleting alert rule {name}")
    await monitor.delete_rule(name)
    return Response(status_code=204)


@router.post("/channels", status_code=201, summary="Create or replace a channel", openapi_extra=_body(_CHANNEL))
async def put_channel(request: Request) -> Response:
    _channels_admin(request, "setting up an alert channel")
    return _json(await request.app.state.monitor.put_channel(json_object(await request.body()),
                                                             owner=caller_of(request).user), 201)


@router.put("/channels/{name}/sharing", summary="Share a channel with named users, or all (admins only)",
            openapi_extra=_body(_SHARING))
async def share_channel(request: Request, name: str = Name) -> Response:
    _channels_admin(request, f"sharing alert channel {name}")
    return _json(await request.app.state.monitor.share_channel(name, json_object(await request.body())))


@router.get("/channels", summary="The channels (secrets redacted): all for admins, those shared with them for others")
async def list_channels(request: Request) -> Response:
    caller = caller_of(request)
    return _json(await request.app.state.monitor.channels(user=None if caller.is_admin else caller.user))


@router.delete("/channels/{name}", status_code=204, summary="Delete a channel no rule uses")
async def delete_channel(request: Request, name: str = Name) -> Response:
    _channels_admin(request, f"deleting alert channel {name}")
    await request.app.state.monitor.delete_channel(name)
    return Response(status_code=204)


@router.post("/channels/{name}/test", summary="Send a test notification through a channel now")
async def test_channel(request: Request, name: str = Name) -> Response:
    _channels_admin(request, f"testing alert channel {name}")
    return _json(await request.app.state.monitor.test_channel(name))


@router.get("", summary="Alert firings, newest first, with their deliveries: about the caller's jobs (all for admins)")
async def list_firings(
    request: Request, status: str | None = Query(None, description="firing (open), fired (about a job that ended) or resolved; all when absent"),
    job: int | None = Query(None, ge=1, le=2**31 - 1), unacknowledged: bool = False,
    limit: int = Query(100, ge=1, le=10_000),
) -> Response:
    caller = caller_of(request)
    return _json(await request.app.state.monitor.firings(status=status, job_id=job, unacknowledged=unacknowledged,
                                                         limit=limit, user=None if caller.is_admin else caller.user))


@router.post("/{firing_id}/ack", summary="Acknowledge a firing (its job's owner, or an admin)")
async def acknowledge(request: Request, firing_id: int = Path(ge=1, le=2**31 - 1)) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    policy.require(caller, "submit", "acknowledging an alert")

    def check_owner(owner: str | None) -> None:
        if owner is None:
            policy.require(caller, "admin", f"acknowledging alert {firing_id} (about no user's job)")
        else:
            policy.check_manage(caller, owner, None, f"acknowledging alert {firing_id}")

    return _json(await request.app.state.monitor.acknowledge(firing_id, caller.user, check_owner))


def _channels_admin(request: Request, action: str) -> None:
    # A channel runs a program or posts to a URL as the server's user: that is an admin's decision.
    policy_of(request).require(caller_of(request), "admin", action)
