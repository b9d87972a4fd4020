"""The home a server holds: its lock (one server per home), the webhook's secret and users' log directories."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from typing import IO

from corral.errors import Conflict
from corral.home import HomeLayout, read_server_info


def acquire_home(home: str) -> IO[str]:
    """Hold the home's lock for the server's life: one server per home.

    Raises:
        Conflict: another server already runs on this home.
    """
    os.makedirs(home, mode=0o700, exist_ok=True)
    lock = open(HomeLayout(home).lock, "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        info = read_server_info(home) or {}
        raise Conflict(
            f"a corral server already runs for home {home} at {info.get('url', '?')} (pid {info.get('pid', '?')}); "
            "stop it with `corral down`, or pick another --home"
        ) from None
    return lock


def webhook_token(home: str) -> str:
    """The shared secret Slurm's epilog sends (`<home>/webhook.token`, made once, mode 600)."""
    import secrets

    path = HomeLayout(home).webhook_token
    try:
        with open(path) as f:
            token = f.read().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def user_log_dirs(home: str) -> Callable[[str], str]:
    """Where each user's job logs go on a shared server, their directories made once per user: a submit must not
    pay for pwd and mkdir each time."""
    from corral.executor.users import owned_dir, run_as_for

    log_dirs: dict[str, str] = {}

    def user_log_dir(user: str) -> str:
        if user not in log_dirs:
            log_dirs[user] = make_user_dirs(user)
        return log_dirs[user]

    def make_user_dirs(user: str) -> str:
        """A user's log directory (returned) and, for one whose jobs run as themselves, their spool."""
        layout = HomeLayout(home)
        base = layout.logs
        if run_as_for(user) is None:  # root's own jobs (an unknown user is refused here, at submit)
            path = layout.user_logs(user)
            os.makedirs(path, mode=0o700, exist_ok=True)  # the logs' names are guessable; their directory is not open
            return path
        owned_dir(layout.spool, user)  # where the SDK in their jobs spools (corral.sdk.places)
        return owned_dir(base, user)

    return user_log_dir
