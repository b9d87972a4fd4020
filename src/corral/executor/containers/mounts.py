"""A path a container would see of the host, checked with the owner's rights (the supervisor calls this
under `as_owner`): a root runtime mounts whatever it is told, so the owner must be able to open it here,
and it may not be corral's own (its database, other jobs' files), but for the job's checkpoints and script."""

from __future__ import annotations

import os


def refused_mount(path: str, corral_home: str, allowed: tuple[str, ...] = ()) -> str | None:
    """Why `path` may not be mounted for this owner, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        return f"{path}: {exc.strerror.lower() if exc.strerror else exc} (as the job's owner); mount a path you may read"
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")  # what was opened, every link followed as the owner
    except OSError:
        real = os.path.realpath(path)
    finally:
        os.close(fd)
    home = os.path.realpath(corral_home)
    if _within(real, home) and not any(_within(real, os.path.realpath(a)) for a in allowed if a):
        return f"{path} is inside corral's home {home}, which holds other jobs' files and the database; mount another path"
    return None


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
