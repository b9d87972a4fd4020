"""Events from outside: Slurm's epilog tells the server a job ended, so it is seen at once."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from starlette.responses import Response

from corral.api.schemas import ErrorOut
from corral.errors import Unauthenticated

router = APIRouter(prefix="/api/v1/webhooks", tags=["webhooks"], responses={401: {"model": ErrorOut}})
OPEN_PATHS = (f"{router.prefix}/",)
"""Need no caller (`api/identity.py`): each route checks the webhook secret itself."""


def webhook_secret_given(request: Request) -> bool:
    """Whether the request carries the webhook secret (`<home>/webhook.token`): as `Authorization: Bearer`,
    or as `X-API-Key` (what the course's epilog sends)."""
    token = getattr(request.app.state, "webhook_token", None)
    if not token:
        return False
    given = [request.headers.get("authorization", "").removeprefix("Bearer ").strip(),
             request.headers.get("x-api-key", "").strip()]
    return any(value and hmac.compare_digest(value.encode(), token.encode()) for value in given)


@router.post("/slurm", status_code=202, summary="A Slurm job ended (sent by scripts/slurm-epilog.sh)")
async def slurm_event(request: Request) -> Response:
    if not webhook_secret_given(request):
        raise Unauthenticated("a valid webhook token is needed: Authorization: Bearer <the token in <home>/webhook.token>")
    request.app.state.service.poll_soon()  # what ended is read from Slurm itself: a nudge, never trusted as state
    return Response(status_code=202)
