"""Each user's running jobs share a quota of log space: one user's jobs cannot fill the disk everyone's logs share.

The supervisors hold it (`corral.executor.log_ledger`: each reserves in its owner's ledger what its job
writes, before it writes it, and gives it back when the job ends), so it holds however fast and however
many the jobs are, with or without a server. What a supervisor cannot do is give back after it died;
`LogQuota`, on the server, drops from the ledgers the jobs whose supervisor is gone, at its start (a
restarted server) and every few seconds after.
"""

from __future__ import annotations

import logging
import os
import threading

from corral.executor import log_ledger
from corral.executor.launch import supervisor_alive

log = logging.getLogger("corral.executor")

CHECK_INTERVAL_S = 5.0


class LogQuota:
    """The per-user quota's ledgers under a home, kept free of the dead (on a thread of its own)."""

    def __init__(self, quota_mb: int, ledgers_dir: str, jobs_dir: str, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.quota_mb = quota_mb
        self.ledgers_dir = ledgers_dir
        self.jobs_dir = jobs_dir
        self._interval_s = interval_s
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Make the ledgers' directory (root's alone: no job may read or lock a ledger) and start watching it."""
        os.makedirs(self.ledgers_dir, mode=0o700, exist_ok=True)
        os.chmod(self.ledgers_dir, 0o700)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="corral-log-quota", daemon=True)
                self._thread.start()

    def reconcile(self) -> dict[str, list[str]]:
        """One round: the jobs dropped from each user's ledger, by ledger name."""
        try:
            names = os.listdir(self.ledgers_dir)
        except FileNotFoundError:
            return {}
        dropped = {}
        for name in names:
            try:
                dead = log_ledger.drop_dead(os.path.join(self.ledgers_dir, name), self._alive)
            except OSError as exc:
                log.warning("cannot reconcile the log ledger %s: %s", name, exc)
                continue
            if dead:
                log.info("log ledger %s: dropped jobs %s, whose supervisors are gone", name, ", ".join(dead))
                dropped[name] = dead
        return dropped

    def _alive(self, key: str) -> bool:
        return key.isdigit() and supervisor_alive(os.path.join(self.jobs_dir, key))

    def _run(self) -> None:
        event = threading.Event()
        while True:
            try:
                self.reconcile()
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad round
                log.exception("log quota check failed")
            event.wait(self._interval_s)
