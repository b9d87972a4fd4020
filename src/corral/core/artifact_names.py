"""Names of uploaded artifacts: relative paths inside a run, the same on every machine."""

from __future__ import annotations

import re

from corral.errors import InvalidRequest

MAX_NAME = 1000
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def check_artifact_name(name: object, field: str = "path") -> str:
    """`name` if it is a relative path of printable parts (no `..`, no empty part); else refused.

    Raises:
        InvalidRequest: naming the field, with an example.
    """
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
        raise InvalidRequest(field, f"{name!r} is not an artifact name", f"give a relative path of 1-{MAX_NAME} characters, "
                                                                         "e.g. model/weights.bin")
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts) or not name.isprintable() or "\\" in name:
        raise InvalidRequest(field, f"{name!r} is not an artifact name",
                             "a relative path without '..', '.' or empty parts, e.g. model/weights.bin")
    return name


def check_sha256(value: object, field: str = "sha256") -> str:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise InvalidRequest(field, f"{value!r} is not a SHA-256", "give 64 lowercase hex digits")
    return value
