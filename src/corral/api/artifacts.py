"""Routes for a run's artifacts: resumable uploads into the store, downloads with ranges.

    POST /api/v1/runs/{ref}/uploads                 {"path", "size", "sha256", "type"}: where to send from
    PUT  /api/v1/runs/{ref}/uploads/{id}?offset=N   raw bytes at N (each at most the body limit, 64 MB)
    GET  /api/v1/runs/{ref}/artifacts/content?path=P  the bytes (Range: bytes=A-B answered 206)

Only the run's owner or an admin upload and download (README, Security model); the work is
`corral.tracking.artifacts.ArtifactService`'s.
"""

from __future__ import annotations

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response, StreamingResponse

from corral.api.errors import error_response
from corral.api.identity import caller_of, policy_of
from corral.api.request_bodies import json_object
from corral.api.responses import json_response as _json
from corral.api.schemas import ErrorOut
from corral.core.dialects.byte_ranges import RangeNotSatisfiable, parse_range
from corral.errors import CorralError
from corral.tracking.artifacts import ArtifactService

router = APIRouter(prefix="/api/v1", tags=["artifacts"], responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}})

RunRef = Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="A run's id, or its uid.")
UploadId = Path(pattern=r"^[0-9a-f]{32}$", description="The id the upload's POST answered.")


async def _owned(request: Request, ref: str, action: str) -> tuple[int, str]:
    """(run id, owner) if the caller owns the run or is an admin.

    Raises:
        Forbidden; NotFound: an unknown run.
    """
    run_id, owner = await request.app.state.tracking.owner(ref)
    policy_of(request).check_manage(caller_of(request), owner, None, f"{action} run {ref}")
    return run_id, owner


class RangeRefused(CorralError):
    """A byte range wholly past the end of the file (416, with the file's size in Content-Range)."""

    status = 416
    code = "range_not_satisfiable"


def _artifacts(request: Request) -> ArtifactService:
    return request.app.state.artifacts


@router.post("/runs/{ref}/uploads", summary="Begin (or resume) an upload of one file to the run",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["path", "size", "sha256"], "properties": {
                     "path": {"type": "string", "description": "The artifact's name in the run, e.g. model/weights.bin"},
                     "size": {"type": "integer"}, "sha256": {"type": "string"}, "type": {"type": "string"}}}}}}})
async def begin_upload(request: Request, ref: str = RunRef) -> Response:
    """`{"complete": false, "upload_id", "offset", "size"}`: send the bytes from `offset`; or
    `{"complete": true, "artifact"}`: the content was stored already (deduplicated)."""
    run_id, owner = await _owned(request, ref, "uploading artifacts to")
    policy_of(request).require(caller_of(request), "submit", "uploading an artifact")
    return _json(await _artifacts(request).begin_upload(run_id, owner, json_object(await request.body())))


@router.put("/runs/{ref}/uploads/{upload_id}", summary="Send an upload's bytes from `offset`",
            openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {}}}})
async def send_upload(request: Request, ref: str = RunRef, upload_id: str = UploadId,
                      offset: int = Query(..., ge=0, lt=2**63, description="Where these bytes go.")) -> Response:
    """The upload as it stands; `409` names the offset to send from when `offset` is not it."""
    run_id, owner = await _owned(request, ref, "uploading artifacts to")
    policy_of(request).require(caller_of(request), "submit", "uploading an artifact")
    return _json(await _artifacts(request).append(run_id, owner, upload_id, offset, await request.body()))


@router.get("/runs/{ref}/artifacts/content", summary="An artifact's bytes (uploaded, or a registered checkpoint)",
            responses={206: {"description": "The range asked for"}, 416: {"description": "A range past the end"}})
async def download(request: Request, ref: str = RunRef,
                   path: str = Query(..., min_length=1, max_length=4096, description="The artifact's path, as listed.")) -> Response:
    run_id, owner = await _owned(request, ref, "reading the artifacts of")
    found = await _artifacts(request).open(run_id, owner, path)
    try:
        wanted = parse_range(request.headers.get("range"), found.size)
    except RangeNotSatisfiable:
        found.file.close()
        refused = error_response(RangeRefused(f"the range {request.headers.get('range')!r} starts past the end of "
                                              f"{path} ({found.size:,} bytes)"))
        refused.headers["Content-Range"] = f"bytes */{found.size}"
        return refused
    headers = {"Accept-Ranges": "bytes", "Content-Disposition": _attachment(found.name)}
    if found.sha256:
        headers["ETag"] = f'"{found.sha256}"'
    if wanted is None:
        headers["Content-Length"] = str(found.size)
        return StreamingResponse(found.chunks(None), media_type="application/octet-stream", headers=headers)
    headers |= {"Content-Range": wanted.content_range(found.size), "Content-Length": str(wanted.length)}
    return StreamingResponse(found.chunks(wanted), status_code=206, media_type="application/octet-stream", headers=headers)


def _attachment(name: str) -> str:
    from urllib.parse import quote

    ascii_name = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name) or "artifact"
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
