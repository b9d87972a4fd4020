"""The account each job runs as: its owner's under a root server with an owner lookup (the shared service)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from corral.executor.users import RunAs, share_home_with_jobs


class JobOwners:
    """Jobs run as their owner where `lookup` is given (`corral.executor.users.run_as_for` in a server; it
    refuses unknown users); without it every job runs as this process, as a personal queue's do."""

    def __init__(self, home: str, lookup: Callable[[str], RunAs | None] | None) -> None:
        self._home = home
        self._lookup = lookup
        self._home_shared = False
        self._lock = threading.Lock()  # jobs start in several threads at once: the home is opened once

    def of(self, user: str) -> RunAs | None:
        """The account `user`'s job runs as, None for this process's own. The first time it is another's,
        the home is opened for jobs first, so that the owner reaches their job's files by name.

        Raises:
            InvalidRequest: the lookup refuses the user (no account on this machine).
        """
        owner = self._lookup(user) if self._lookup is not None else None
        if owner is not None and not self._home_shared:
            with self._lock:
                if not self._home_shared:
                    share_home_with_jobs(self._home)
                    self._home_shared = True
        return owner
