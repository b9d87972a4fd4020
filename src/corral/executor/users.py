"""Whom a job runs as: its owner's account when the server runs as root, the server's own otherwise.

A server started by a person is that person's queue: every job is theirs and runs
as them, unchanged. A server run as root (the shared service, deploy/corral.service)
runs each job as the user who submitted it, never as root for anyone else; these
functions turn a user name into the identity its supervisor takes on, and prepare
the directories that identity must own or pass through.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import asdict, dataclass
from typing import Any

from corral.errors import InvalidRequest
from corral.home import SERVER_FILE, HomeLayout

# Files a user of the shared service reads from its home: the address file is how the CLI finds it.
PUBLIC_HOME_FILES = frozenset({SERVER_FILE})


@dataclass(frozen=True, slots=True)
class RunAs:
    """An account a job runs as: ids, every group it belongs to, and its login settings."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    """The primary group and every supplementary one, as `id -G` shows them."""
    home: str
    shell: str

    @classmethod
    def from_passwd(cls, entry: pwd.struct_passwd) -> RunAs:
        groups = (entry.pw_gid, *(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid))
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid, groups=tuple(dict.fromkeys(groups)),
                   home=entry.pw_dir, shell=entry.pw_shell or "/bin/sh")

    def to_dict(self) -> dict[str, Any]:
        """The form launch.json carries to the supervisor (which reads it without importing this module)."""
        data = asdict(self)
        data["groups"] = list(self.groups)
        return data


def serves_other_users() -> bool:
    """True when this process runs as root: the shared service, whose jobs run as their owners."""
    return os.geteuid() == 0


def run_as_for(user: str) -> RunAs | None:
    """The account a job of `user` must run as, or None when it runs as this process.

    None when this process is not root (a personal queue: every job is its user's)
    or when the owner is root itself.

    Raises:
        InvalidRequest: root serves a user this machine has no account for; running
            the job as root instead would hand that caller root.
    """
    if not serves_other_users():
        return None
    try:
        entry = pwd.getpwnam(user)
    except (KeyError, ValueError, TypeError):  # ValueError: a NUL in the name
        raise InvalidRequest(
            "user", f"there is no account named {user!r} on this machine",
            "the shared service runs each job as its owner: submit as a user with a login here",
        ) from None
    if entry.pw_uid == 0:
        return None
    return RunAs.from_passwd(entry)


def owned_dir(base: str, user: str) -> str:
    """`base/<user>`, owned by the user and private (0700), when jobs run as their owners; else `base`.

    `base` itself becomes 0711: each user reaches their own directory by name but
    cannot list whose else are there.

    Raises:
        InvalidRequest: root serves a user this machine has no account for.
        OSError: `base/<user>` exists and is not a directory.
    """
    owner = run_as_for(user)
    if owner is None:
        return base
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o711)
    path = os.path.join(base, owner.name)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    give_dir(path, owner, 0o700)
    return path


def give_dir(path: str, owner: RunAs, mode: int) -> None:
    """Make the existing directory `path` the owner's, with `mode`.

    Opened without following a symlink, then changed through the descriptor: a link
    planted at `path` cannot turn root's chown onto some other file.

    Raises:
        OSError: `path` is missing, a symlink or not a directory.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, owner.uid, owner.gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def share_home_with_jobs(home: str) -> None:
    """Let jobs running as their owners reach their files under a root server's home; keep the rest private.

    The home and its jobs, checkpoints and logs directories become 0711: a job
    reaches its own batch script, checkpoint dir and log dir by name, but nobody
    lists the home or another job's files. Because a name is now enough, every
    plain file directly in the home (the SQLite database, which holds every job's
    environment; the server's log) loses its group and world bits, except the
    address file the CLI reads. Job directories keep launch.json at 0600 (root's).
    Nothing changes when this process is not root.
    """
    if not serves_other_users():
        return
    for path in (home, *HomeLayout(home).job_facing_dirs):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o711)
    with os.scandir(home) as entries:
        for entry in entries:
            if entry.name in PUBLIC_HOME_FILES or not entry.is_file(follow_symlinks=False):
                continue
            mode = entry.stat(follow_symlinks=False).st_mode & 0o7777
            if mode & 0o077:
                os.chmod(entry.path, mode & ~0o077)
