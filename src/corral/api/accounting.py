"""Routes for Slurm's accounting view: the associations (accounts and their users) and their fair share."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from starlette.responses import Response

from corral.api.identity import caller_of
from corral.server.associations import associations_view

router = APIRouter(prefix="/api/v1", tags=["cluster"])


@router.get("/associations", summary="Accounts, their users and each one's fair share (what sacctmgr and sshare show)")
async def associations(request: Request) -> Response:
    return Response(json.dumps(associations_view(request.app.state.service, caller_of(request))),
                    media_type="application/json")
