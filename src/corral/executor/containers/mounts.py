"""A path a container would see of the host, opened with the owner's rights (the supervisor calls this
under `as_owner`): a root runtime mounts whatever it is told, so the owner must be able to open it here,
and it may not be corral's own (its database, other jobs' files), but for the job's checkpoints and script.
What this opens is what the runtime is given (`containers.held`): never the path again."""

from __future__ import annotations

import os


class MountRefused(Exception):
    """The owner may not have this path in a container; the message says why and what to do."""


def open_checked(path: str, corral_home: str, allowed: tuple[str, ...] = ()) -> int:
    """`path` opened for this owner, every link followed as the owner: a descriptor the caller closes.

    Raises:
        MountRefused: the owner cannot open it, or it lies in corral's home outside `allowed`.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise MountRefused(f"{path}: {exc.strerror.lower() if exc.strerror else exc} (as the job's owner); "
                           "mount a path you may read") from None
    try:
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")  # what was opened, not what the path names now
        except OSError as exc:
            raise MountRefused(f"{path}: cannot tell what was opened ({exc.strerror}); is /proc mounted?") from None
        home = os.path.realpath(corral_home)
        if _within(real, home) and not any(_within(real, os.path.realpath(a)) for a in allowed if a):
            raise MountRefused(f"{path} is inside corral's home {home}, which holds other jobs' files and the "
                               "database; mount another path")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
