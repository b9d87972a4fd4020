"""Request bodies: a JSON object, refused (422) when hostile."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from corral.core.access.bodies import decode_json
from corral.errors import InvalidRequest


def json_object(raw: bytes, *, bytes_in: Collection[str] = ()) -> dict[str, Any]:
    """A request body as a JSON object, refused (422) when hostile: too deep, lone surrogates, NUL, huge numbers
    (`bytes_in`: fields that may hold bytes that are not UTF-8, see `corral.core.access.bodies.decode_json`)."""
    body = decode_json(raw, bytes_in=bytes_in)
    if not isinstance(body, dict):
        raise InvalidRequest("body", f"must be a JSON object, got {type(body).__name__}")
    return body
