"""Where a user's runs spool: a directory they can write, whoever runs the server.

    <chosen>/<user>                          a shared server's per-user spool (root makes it, 0700, theirs)
    <chosen>                                 `spool_dir`, else $CORRAL_SPOOL_DIR, else <home>/spool
    <cache>/corral/spool/<digest>            the user's cache ($XDG_CACHE_HOME or ~/.cache)
    <tmp>/corral-spool-<uid>-<digest>        the last resort, for an account without a writable home

A job of a shared (root) server runs as its owner, who cannot write root's `<home>/spool`: the
server makes `<home>/spool/<user>` for each user, and that comes first wherever it exists and is
the user's own. When the chosen directory cannot be written, a run spools in the first private
fallback that takes it and says so. The fallbacks are named for the chosen directory (`<digest>`),
so `corral sync` for one server never uploads runs spooled for another. Fallbacks and the
per-user directory are only used when they are directories of the user's that nobody else may
write: a name planted in /tmp by another user is skipped, never written through.
"""

from __future__ import annotations

import errno
import logging
import hashlib
import os
import pwd
import stat
import tempfile
from dataclasses import dataclass
from typing import Any

from corral.sdk.spool import RunSpool, spool_root

logger = logging.getLogger("corral.sdk")


@dataclass(frozen=True)
class SpoolPlaces:
    """The directories one user's runs may spool in for one chosen spool directory, best first."""

    chosen: str
    own: str | None
    """`<chosen>/<user>`: used (never made) when it is a private directory of the user's."""
    fallbacks: tuple[str, ...]
    """Private directories of the user's, made when needed, for when `chosen` cannot be written."""

    @classmethod
    def resolve(cls, spool_dir: str | None = None) -> SpoolPlaces:
        """The places for `spool_dir` (default `$CORRAL_SPOOL_DIR`, else `<home>/spool`) and this process's user."""
        chosen = spool_root(spool_dir)
        digest = hashlib.sha256(chosen.encode()).hexdigest()[:16]
        uid = os.geteuid()
        try:
            own: str | None = os.path.join(chosen, pwd.getpwuid(uid).pw_name)
        except KeyError:  # a uid without a passwd entry (a container): no per-user directory
            own = None
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        fallbacks = (os.path.join(os.path.abspath(cache), "corral", "spool", digest),
                     os.path.join(tempfile.gettempdir(), f"corral-spool-{uid}-{digest}"))
        return cls(chosen, own, fallbacks)

    def existing(self) -> list[str]:
        """The places that may hold this user's spooled runs now, best first; nothing is made."""
        own = [self.own] if self.own is not None and _private_dir(self.own) else []
        return own + [self.chosen] + [path for path in self.fallbacks if _private_dir(path)]

    def create(self, uid: str, request: dict[str, Any]) -> tuple[RunSpool, str | None]:
        """Spool a new run in the first place that takes it.

        Returns:
            The run's spool, and None, or when the chosen directory refused it, why (to tell the user).

        Raises:
            OSError: no place would take it; the message says why for each.
        """
        refused: list[str] = []
        if self.own is not None and _private_dir(self.own):
            try:
                return RunSpool.create(self.own, uid, request), None
            except OSError as exc:
                refused.append(_why(self.own, exc))
        try:
            return RunSpool.create(self.chosen, uid, request), "; ".join(refused) or None
        except OSError as exc:
            refused.append(_why(self.chosen, exc))
        for path in self.fallbacks:
            try:
                _make_private_dir(path)
                return RunSpool.create(path, uid, request), "; ".join(refused)
            except OSError as exc:
                refused.append(_why(path, exc))
        raise OSError(errno.EACCES, "no writable spool directory: " + "; ".join(refused))


def resume_spool(places: SpoolPlaces, key: str | None) -> tuple[RunSpool | None, int | None]:
    """The spool an earlier process of this job left under `key`, taken over; and its last step."""
    if key is None:
        return None, None
    try:
        spool = RunSpool.find(places.existing(), key)
        if spool is None:
            return None, None
        spool.remove_finish()  # the run goes on: its end is the one this process will record
        last = spool.last_step()
        return spool, -1 if last is None else last
    except OSError as exc:
        logger.warning("corral: cannot read the spool in %s: %s", places.chosen, exc)
        return None, None


def _private_dir(path: str) -> bool:
    """Whether `path` is a directory (not a link) of this user's that no one else may write."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _make_private_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    if not _private_dir(path):
        raise OSError(errno.EPERM, "exists, and is not a private directory of yours")


def _why(path: str, exc: OSError) -> str:
    return f"{path}: {exc.strerror or exc}"
