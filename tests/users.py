"""Real OS accounts for the tests of a root server running jobs as their owners.

A pytest plugin: `os_users` gives two accounts (created once with useradd, reused
afterwards), `shared_dir` a scratch directory those accounts can pass through.
Both skip, saying why, when the tests do not run as root.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

ALICE = "corral-alice"
BOB = "corral-bob"
EXTRA_GROUP = "corral-extra"
"""A supplementary group of alice's only: a job must carry it, as `id -G` shows."""
USERS_HOME = "/tmp/corral-users"


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("running jobs as other users needs the tests to run as root (CI does)")
    if shutil.which("useradd") is None:
        pytest.skip("creating the test accounts needs useradd (the passwd package)")


def _admin(argv: list[str]) -> None:
    """Run a shadow-utils command, retrying while a concurrent one holds /etc/passwd's lock."""
    for attempt in range(20):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if result.returncode == 0 or "already exists" in result.stderr:  # made by a parallel worker
            return
        if "lock" not in result.stderr.lower():
            raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
        time.sleep(0.2 * (attempt + 1))
    raise RuntimeError(f"{' '.join(argv)}: /etc/passwd stayed locked")


def _ensure_group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        _admin(["groupadd", name])


def _ensure_user(name: str) -> pwd.struct_passwd:
    home = os.path.join(USERS_HOME, name)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _admin(["useradd", "--create-home", "--home-dir", home, "--shell", "/bin/sh", "--user-group", name])
        entry = pwd.getpwnam(name)
    if not os.path.isdir(entry.pw_dir):  # /tmp was cleaned since the account was made
        os.makedirs(entry.pw_dir, mode=0o700)
        os.chown(entry.pw_dir, entry.pw_uid, entry.pw_gid)
    return entry


def user_pids(uid: int) -> list[int]:
    """Processes whose real uid is `uid`, zombies included: until reaped they count against RLIMIT_NPROC."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        if int(uid_line.split()[1]) == uid:
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="session")
def os_users() -> tuple[str, str]:
    """(alice, bob): two real accounts with homes under /tmp/corral-users; alice is also in `corral-extra`."""
    _need_root()
    os.makedirs(USERS_HOME, exist_ok=True)
    os.chmod(USERS_HOME, 0o755)
    _ensure_group(EXTRA_GROUP)
    _ensure_user(ALICE)
    _ensure_user(BOB)
    if ALICE not in grp.getgrnam(EXTRA_GROUP).gr_mem:
        _admin(["usermod", "--append", "--groups", EXTRA_GROUP, ALICE])
    # Not removed afterwards, and nothing of theirs killed: another test run on this machine may be
    # using them (which also shares their RLIMIT_NPROC count). Jobs end by their tests or time limits.
    return ALICE, BOB


@pytest.fixture
def shared_dir() -> Iterator[str]:
    """A fresh directory under /tmp that every user may pass through (0711, root's), removed afterwards.

    pytest's tmp_path lies under a 0700 directory, which a job running as another
    user could not enter.
    """
    _need_root()
    path = tempfile.mkdtemp(prefix="corral-shared-", dir="/tmp")
    os.chmod(path, 0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)
