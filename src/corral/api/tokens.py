"""Routes for API tokens: make one (its secret shown once), list them, revoke one.

Who may do what is decided by `corral.core.tokens`; the records come from `TokenStore`
at `app.state.tokens`.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from corral.api.identity import caller_of, policy_of
from corral.api.jobs import json_object
from corral.api.responses import json_response as _json
from corral.api.schemas import ErrorOut
from corral.core.tokens import (
    DEFAULT_EXPIRY, DEFAULT_NAME, authorize_create, authorize_revoke, check_name, check_token_scope, check_user,
    parse_expiry,
)
from corral.errors import Forbidden, InvalidRequest
from corral.store.tokens import TokenStore

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"], responses={
    401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}})

_CREATE = {"type": "object", "additionalProperties": False, "properties": {
    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$", "default": DEFAULT_NAME},
    "scope": {"enum": ["read", "submit", "admin"], "default": "submit"},
    "expires": {"type": "string", "default": DEFAULT_EXPIRY, "description": "A lifetime of at most 365d.",
                "examples": ["90m", "12h", "30d", "8w"]},
    "user": {"type": "string", "description": "Whom the token speaks for (another user's needs admin); you by default."}}}
_FIELDS = ("name", "scope", "expires", "user")


def _tokens(request: Request) -> TokenStore:
    return request.app.state.tokens


def _forget_cached(request: Request) -> None:
    getattr(request.app.state, "token_cache_clear", lambda: None)()


@router.post("", status_code=201, summary="Make an API token; its secret is in the answer, and nowhere ever again",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _CREATE}}}})
async def create_token(request: Request) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    body = json_object(await request.body())
    for key in body:
        if key not in _FIELDS:
            raise InvalidRequest(key, "unknown field", f"a token takes {', '.join(_FIELDS)}")
    now = time.time()
    name = check_name(body.get("name", DEFAULT_NAME))
    scope = check_token_scope(body.get("scope", "submit"))
    expires = parse_expiry(body.get("expires", DEFAULT_EXPIRY), now)
    user = check_user(body.get("user", caller.user))
    authorize_create(policy, caller, user, scope)
    token, secret = await run_in_threadpool(_tokens(request).create, user, name, scope, expires, caller.user, now)
    _forget_cached(request)
    return _json({**token.to_dict(now), "token": secret}, 201)


@router.get("", summary="Your API tokens, newest first (all users' with all=true, for admins)")
async def list_tokens(request: Request, all: bool = Query(False, description="Every user's tokens; needs admin.")) -> Response:
    caller = caller_of(request)
    if all and not caller.is_admin:
        raise Forbidden(f"listing every user's tokens needs admin scope; this credential ({caller.via}) has {caller.scope}")
    tokens = await run_in_threadpool(_tokens(request).list, None if all else caller.user)
    now = time.time()
    return _json({"tokens": [t.to_dict(now) for t in tokens]})


@router.delete("/{token_id}", summary="Revoke an API token: it stops working at once")
async def revoke_token(request: Request, token_id: int = Path(ge=1, le=2**31 - 1)) -> Response:
    caller, policy = caller_of(request), policy_of(request)
    store = _tokens(request)
    authorize_revoke(policy, caller, await run_in_threadpool(store.get, token_id))
    now = time.time()
    token = await run_in_threadpool(store.revoke, token_id, now)
    _forget_cached(request)
    return _json(token.to_dict(now))
