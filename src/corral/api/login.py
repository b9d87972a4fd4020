"""The dashboard's login and logout: an API token in, a session's cookie and key out (`corral.core.access.sessions`).

`/api/v1/session` is open (`OPEN_PATHS`, handed to the middleware by `api/app.py`): logging in brings its
token in the body, logging out ends whatever session the request names. The sessions are opened and ended by
`Identifier` (`api/identity.py`), whose credential cache and rate limits are the middleware's too.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from starlette.responses import Response

from corral.api.identity import Identifier, peer_of
from corral.api.request_bodies import json_object
from corral.core.access.sessions import SESSION_COOKIE
from corral.errors import InvalidRequest

router = APIRouter(prefix="/api/v1", tags=["identity"])
OPEN_PATHS = (f"{router.prefix}/session",)
"""Logging in and out need no caller: the token comes in the body, the session in the cookie and key."""


@router.post("/session", summary="Log the dashboard in with an API token: a session's cookie (HttpOnly) and its key",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["token"], "properties": {"token": {"type": "string"}}}}}}})
async def log_in(request: Request) -> Response:
    """The session's cookie is set; its key is in the answer (`session_key`), for the page to send as
    `X-Corral-Session` with every request. Neither works without the other, nor as a Bearer token."""
    body = json_object(await request.body())
    token = body.get("token")
    if not isinstance(token, str) or not token.strip() or len(token) > 200:
        raise InvalidRequest("token", "is missing", "paste a token from `corral token create --scope read`")
    auth: Identifier = request.app.state.identifier
    session, cookie, key = await auth.open_session(token.strip(), peer_of(request.scope))
    answer = {**session.to_dict(), "session_key": key}
    response = Response(json.dumps(answer), media_type="application/json", headers={"Cache-Control": "no-store"})
    response.set_cookie(SESSION_COOKIE, cookie, max_age=max(1, int(session.expires - session.created)), httponly=True,
                        samesite="strict", secure=request.url.scheme == "https", path="/")
    return response


@router.delete("/session", status_code=204, summary="Log the dashboard out: its session ends on the server")
async def log_out(request: Request) -> Response:
    auth: Identifier = request.app.state.identifier
    await auth.end_session(dict(request.scope["headers"]))
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response

