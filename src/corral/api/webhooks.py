"""Events from outside: Slurm's epilog tells the server a job ended, so it is seen at once."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Header, Request
from starlette.responses import Response

from corral.api.schemas import ErrorOut
from corral.errors import Unauthenticated

router = APIRouter(prefix="/api/v1/webhooks", tags=["webhooks"], responses={401: {"model": ErrorOut}})


@router.post("/slurm", status_code=202, summary="A Slurm job ended (sent by scripts/slurm-epilog.sh)")
async def slurm_event(request: Request, authorization: str | None = Header(None)) -> Response:
    token = getattr(request.app.state, "webhook_token", None)
    given = (authorization or "").removeprefix("Bearer ").strip()
    if not token or not hmac.compare_digest(given.encode(), token.encode()):
        raise Unauthenticated("a valid webhook token is needed: Authorization: Bearer <the token in <home>/webhook.token>")
    request.app.state.service.poll_soon()  # what ended is read from Slurm itself: a nudge, never trusted as state
    return Response(status_code=202)
