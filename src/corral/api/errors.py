"""The one place where errors become HTTP responses."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from corral.errors import CorralError, InvalidRequest, RateLimited

log = logging.getLogger("corral.api")


def error_response(error: CorralError) -> Response:
    response = Response(json.dumps({"error": error.to_dict()}), status_code=error.status, media_type="application/json")
    if isinstance(error, RateLimited):
        response.headers["Retry-After"] = str(max(1, round(error.retry_after + 0.5)))
    return response


def unexpected_response(exc: Exception) -> Response:
    """A 503 for a database that refused a change, else a 500 that names the error."""
    from sqlalchemy.exc import OperationalError

    if isinstance(exc, OperationalError):
        log.error("database error: %s", exc)
        error = CorralError(f"the database refused the change ({exc.orig}); nothing was saved, try again")
        error.status, error.code = 503, "database"
        return error_response(error)
    log.exception("unexpected error")
    return error_response(CorralError(f"internal error: {type(exc).__name__}: {exc}"))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CorralError)
    async def _corral_error(_: Request, exc: CorralError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0]
        loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        message = first.get("msg", "invalid value")
        if first.get("type") == "extra_forbidden":
            message = "unknown field"
        hint = "see /docs for the fields this endpoint takes" if field != "body" else "send a JSON object"
        return error_response(InvalidRequest(field, message, hint))

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> Response:
        error = CorralError(str(exc.detail))
        error.status, error.code = exc.status_code, "http"
        return error_response(error)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        return unexpected_response(exc)
