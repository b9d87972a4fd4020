"""Routes for API tokens: make one (its secret shown once), list them, revoke one.

Each route reads its request and calls one method of `TokenService` (`corral.server.tokens`) at
`app.state.tokens`, off the event loop.
"""

from __future__ import annotations

from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from corral.api.identity import caller_of, policy_of
from corral.api.request_bodies import json_object
from corral.api.responses import json_response as _json
from corral.api.schemas import ErrorOut
from corral.core.access.tokens import DEFAULT_EXPIRY, DEFAULT_NAME
from corral.server.tokens import TokenService

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"], responses={
    401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}})

_CREATE = {"type": "object", "additionalProperties": False, "properties": {
    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$", "default": DEFAULT_NAME},
    "scope": {"enum": ["read", "submit", "admin"], "default": "submit"},
    "expires": {"type": "string", "default": DEFAULT_EXPIRY, "description": "A lifetime of at most 365d.",
                "examples": ["90m", "12h", "30d", "8w"]},
    "user": {"type": "string", "description": "Whom the token speaks for (another user's needs admin); you by default."}}}


def _tokens(request: Request) -> TokenService:
    return request.app.state.tokens


@router.post("", status_code=201, summary="Make an API token; its secret is in the answer, and nowhere ever again",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _CREATE}}}})
async def create_token(request: Request) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    body = json_object(await request.body())
    return _json(await run_in_threadpool(_tokens(request).create, policy, caller, body), 201)


@router.get("", summary="Your API tokens, newest first (all users' with all=true, for admins)")
async def list_tokens(request: Request, all: bool = Query(False, description="Every user's tokens; needs admin.")) -> Response:
    return _json(await run_in_threadpool(_tokens(request).list, caller_of(request), all))


@router.delete("/{token_id}", summary="Revoke an API token: it stops working at once")
async def revoke_token(request: Request, token_id: int = Path(ge=1, le=2**31 - 1)) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    return _json(await run_in_threadpool(_tokens(request).revoke, policy, caller, token_id))
