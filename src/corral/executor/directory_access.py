"""Whether a job's owner can enter a directory, asked of the kernel as that owner.

A root server that checked a submitter's working directory with its own rights would tell
anyone whether a path exists inside another user's 0700 home. The shared service instead
checks with the submitter's filesystem uid, gid and groups: the lookup succeeds only where
the submitter could `cd`, and "does not exist" and "not yours to see" give the same answer.

Linux keeps credentials per thread. The ids are changed with the raw system calls
(`setfsuid`, `setfsgid`, `setgroups`), never glibc's `setgroups`, which changes every thread
of the process; and only on one thread of this module's own, which puts them back before it
takes the next check. The event loop and every other thread keep root's throughout. On a
machine whose system call numbers this module does not know, a short-lived `test -d` runs
as the user instead.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from corral.executor.users import RunAs, run_as_for

# (setfsuid, setfsgid, setgroups) by machine: the 32-bit-id calls (x86_64's setgroups is 116, not 81).
_SYSCALLS = {"x86_64": (122, 123, 116), "aarch64": (151, 152, 159)}
OWNER_CACHE_S = 30.0  # a user's groups are looked up again after this long (a new group counts soon)
ENTERED_CACHE_S = 5.0  # a directory a user could enter is taken as enterable by them this long (a loop of submits)
CHECK_TIMEOUT_S = 2.0  # the longest a submit waits for a directory to answer
_UNCHANGED = -1  # an id no call accepts: setfsuid(-1) changes nothing and says what the id is


def can_enter(path: str) -> bool:
    """Whether this thread, with its current credentials, can enter `path` (a directory it can search,
    reached through directories it can search)."""
    try:
        # "path/." is looked up inside path: that needs search permission on path itself, and
        # fails with ENOTDIR for anything but a directory
        return stat.S_ISDIR(os.stat(os.path.join(path, ".")).st_mode)
    except (OSError, ValueError):
        return False


class DirectoryAccess:
    """Answers "can this user enter this directory?" as the user; one per server."""

    def __init__(self, owner_lookup: Callable[[str], RunAs | None] = run_as_for,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`owner_lookup`: the account a user's jobs run as (None: they run as this process)."""
        self._lookup = owner_lookup
        self._clock = clock
        self._owners: dict[str, tuple[RunAs | None, float]] = {}
        self._entered: dict[tuple[int, str], float] = {}  # (uid, path) -> when the uid could enter it
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-directory-access")
        self._calls = _SYSCALLS.get(platform.machine())
        self._libc = ctypes.CDLL(None, use_errno=True) if self._calls else None
        if self._libc is not None:
            self._libc.syscall.restype = ctypes.c_long  # setfsuid answers the previous id: above 2**31 for some
        self._lock = threading.Lock()

    def checker(self, user: str) -> Callable[[str], bool]:
        """A `can_enter` for `user`'s paths: as the user when jobs run as their owners, else as this process.

        Raises:
            InvalidRequest: a root server has no account for `user`.
        """
        owner = self._owner(user)
        if owner is None:
            return can_enter
        return lambda path: self._can_owner_enter(path, owner)

    def close(self) -> None:
        self._thread.shutdown(wait=True)

    def _can_owner_enter(self, path: str, owner: RunAs) -> bool:
        # Only what the user could enter is remembered, and only for that user: nothing learned
        # as one user ever answers for another.
        key, now = (owner.uid, path), self._clock()
        entered = self._entered.get(key)
        if entered is not None and now - entered < ENTERED_CACHE_S:
            return True
        try:
            entered = self._thread.submit(self._as_owner, path, owner).result(timeout=CHECK_TIMEOUT_S)
        except TimeoutError:
            # a path that hangs (a dead NFS mount): answer no, and check on a fresh thread from now on
            self._thread.shutdown(wait=False)
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-directory-access")
            return False
        if not entered:
            return False
        if len(self._entered) > 10_000:
            self._entered.clear()
        self._entered[key] = now
        return True

    def _owner(self, user: str) -> RunAs | None:
        now = self._clock()
        with self._lock:
            known = self._owners.get(user)
            if known is not None and now - known[1] < OWNER_CACHE_S:
                return known[0]
        owner = self._lookup(user)
        with self._lock:
            if len(self._owners) > 10_000:
                self._owners.clear()
            self._owners[user] = (owner, now)
        return owner

    def _as_owner(self, path: str, owner: RunAs) -> bool:
        """On this module's thread only: switch to the owner's filesystem ids, look, switch back."""
        if self._calls is None or self._libc is None:
            return _can_enter_in_a_process(path, owner)
        setfsuid, setfsgid, setgroups = self._calls
        syscall = self._libc.syscall
        own_groups = os.getgroups()
        own_uid, own_gid = os.geteuid(), os.getegid()
        try:
            groups = (ctypes.c_uint * max(1, len(owner.groups)))(*owner.groups)
            if syscall(setgroups, len(owner.groups), groups) != 0:
                return False  # no right to change groups (a container without CAP_SETGID): never answer as root
            syscall(setfsgid, owner.gid)
            syscall(setfsuid, owner.uid)
            if syscall(setfsuid, _UNCHANGED) != owner.uid or syscall(setfsgid, _UNCHANGED) != owner.gid:
                return False  # not switched: answer as if it could not be entered, never as root
            return can_enter(path)
        finally:
            syscall(setfsuid, own_uid)  # first: with it come back the capabilities to change the rest
            syscall(setfsgid, own_gid)
            restored = (ctypes.c_uint * max(1, len(own_groups)))(*own_groups)
            syscall(setgroups, len(own_groups), restored)
            if syscall(setfsuid, _UNCHANGED) != own_uid or syscall(setfsgid, _UNCHANGED) != own_gid or \
                    sorted(os.getgroups()) != sorted(own_groups):
                os.abort()  # a thread left with a user's ids would do root's later work as them: never go on


def _can_enter_in_a_process(path: str, owner: RunAs) -> bool:
    """The same question, asked by `test -d` running as the owner (machines without known system call numbers)."""
    try:
        done = subprocess.run(["test", "-d", os.path.join(path, ".")], user=owner.uid, group=owner.gid,
                              extra_groups=list(owner.groups), env={"PATH": "/usr/bin:/bin"}, cwd="/",
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30)
    except (OSError, subprocess.SubprocessError, ValueError):
        return False
    return done.returncode == 0
