"""Names of uploaded artifacts: relative paths inside a run, the same on every machine."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class ListedEntry:
    """One entry of a directory level of a run's artifacts: a file with its size, or a directory."""

    name: str  # within the directory listed
    is_dir: bool
    size: int | None  # None for a directory


def directory_level(files: Iterable[tuple[str, int]], path: str) -> list[ListedEntry]:
    """The entries right under `path` ("" the run's root) of the artifacts `files` ((name, size) each),
    sorted by name: each file there, and each directory once.

    Names are flat (an artifact `a` and an artifact `a/b` may both exist, as keys of an object store
    do), so a name can list as a file and as a directory. A `path` that names a file and nothing
    under it lists that file alone, as MLflow's artifact stores answer.
    """
    prefix = path + "/" if path else ""
    itself: int | None = None
    found: dict[tuple[str, bool], int | None] = {}
    for name, size in files:
        if path and name == path:
            itself = size
        elif name.startswith(prefix):
            head, sep, _ = name[len(prefix):].partition("/")
            found.setdefault((head, bool(sep)), None if sep else size)
    if not found and itself is not None:
        return [ListedEntry(path.rsplit("/", 1)[-1], False, itself)]
    return [ListedEntry(name, is_dir, size) for (name, is_dir), size in sorted(found.items())]


def check_sha256(value: object, field: str = "sha256") -> str:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise InvalidRequest(field, f"{value!r} is not a SHA-256", "give 64 lowercase hex digits")
    return value
