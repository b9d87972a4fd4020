"""MLflow's artifact proxy (`/api/2.0/mlflow-artifacts/artifacts/...`) on corral's artifact store.

A run's `artifact_uri` is `mlflow-artifacts:/<experiment>/<run>/artifacts`, so the mlflow client
sends every artifact through the server: `PUT` a file, `GET` it back, `GET ?path=` a listing. The
routes (`api.compat.mlflow`) check the run's owner and keep the files with `ArtifactService`, as
corral's own uploads are kept: one listing, deduplicated, within the same limits and quota. This
module reads the proxy's paths, and takes in the files an older corral kept apart.

Before, each run's MLflow files lay under `<home>/artifacts/mlflow/<run uid>/`. `import_legacy_files`
moves them into the store once, at the server's start: each file is linked to its run, then removed
from there; run again, it finds nothing left to do (what it could not take stays, and is tried again).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
from collections.abc import Iterator
from corral.core.tracking.artifact_names import check_artifact_name
from corral.errors import CorralError, InvalidRequest, NotFound
from corral.tracking.artifact_store import hash_file
from corral.tracking.artifacts import STREAM_CHUNK, ArtifactService

log = logging.getLogger("corral.tracking")

_UID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OLD_TEMP_PREFIX = ".corral-upload-"  # an older corral's upload cut short: never a whole file


def artifact_target(path: str) -> tuple[str, str]:
    """(run uid, path within the run's artifacts, "" for their root) of
    `<experiment>/<run uid>/artifacts[/<path>]`, the form of every run's `artifact_uri`
    (`corral.tracking.compat.mlflow_tracking`).

    Raises:
        InvalidRequest: another form, or a path that would leave the run (`..`, absolute, empty parts).
    """
    parts = path.split("/")
    if len(parts) < 3 or not parts[0].isascii() or not parts[0].isdigit() or parts[2] != "artifacts" \
            or not _UID.fullmatch(parts[1]):
        raise InvalidRequest("path", f"{path[:200]!r} is not under a run's artifacts",
                             "use the run's artifact_uri: <experiment>/<run id>/artifacts/<path>")
    rest = "/".join(parts[3:])
    if rest:
        check_artifact_name(rest)
    return parts[1], rest


async def import_legacy_files(root: str, artifacts: ArtifactService) -> int:
    """Move the MLflow files an older corral kept under `root/<run uid>/` into the artifact store, each
    as its run's artifact of that name; how many were taken in.

    A file is removed from `root` once its run links it. A name the run has already for other content
    (uploaded through corral's own API, kept apart before) is not overwritten: that file stays where it
    is, with a warning. So do the files of runs that are gone. Links are never followed.
    """
    try:
        runs = sorted(os.listdir(root))
    except FileNotFoundError:
        return 0
    taken = 0
    for uid in runs:
        base = os.path.join(root, uid)
        if not _UID.fullmatch(uid) or not stat.S_ISDIR(os.lstat(base).st_mode):
            continue
        try:
            run_id, owner = await artifacts.tracking.owner(uid)
        except NotFound:
            log.warning("MLflow artifacts of run %s stay in %s: there is no such run", uid, base)
            continue
        for name, path in _files_under(base):
            try:
                if await _import_one(artifacts, run_id, owner, name, path):
                    taken += 1
            except (OSError, CorralError) as exc:
                log.warning("MLflow artifact %s stays in %s: %s", name, base, exc)
        _remove_empty_dirs(base)
    _remove_empty_dirs(root)
    return taken


async def _import_one(artifacts: ArtifactService, run_id: int, owner: str, name: str, path: str) -> bool:
    try:
        known = await artifacts.tracking.artifact(run_id, name)
    except NotFound:
        known = None
    if known is None:
        await artifacts.take_in(run_id, owner, name, _chunks(path))
    elif not known["stored"] or known["sha256"] != await asyncio.to_thread(hash_file, path):
        log.warning("MLflow artifact %s of run %d stays in %s: the run has another artifact of that name",
                    name, run_id, path)
        return False
    # else: linked already (an import cut short before it removed the file)
    os.unlink(path)
    return known is None


def _files_under(base: str) -> Iterator[tuple[str, str]]:
    """(artifact name, file) of each regular file under `base`, whose name is an artifact name."""
    for directory, dirs, files in os.walk(base):  # os.walk follows no links to directories
        dirs.sort()
        for file in sorted(files):
            path = os.path.join(directory, file)
            name = os.path.relpath(path, base).replace(os.sep, "/")
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            if file.startswith(_OLD_TEMP_PREFIX):  # half a file: nothing to keep
                os.unlink(path)
                continue
            try:
                check_artifact_name(name)
            except InvalidRequest:
                log.warning("%s is no artifact name: it stays in %s", name, base)
                continue
            yield name, path


def _chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(STREAM_CHUNK):
            yield chunk


def _remove_empty_dirs(top: str) -> None:
    for directory, _, _ in os.walk(top, topdown=False):
        try:
            os.rmdir(directory)  # only an empty one goes
        except OSError:
            pass
