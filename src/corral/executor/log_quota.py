"""Each user's running jobs share a quota of log space: one user's jobs cannot fill the disk everyone's logs share.

A job's supervisor stops its own job whose logs pass the per-job cap (`max_log_mb`) or keep
growing into the last of the disk (`log_reserve_mb`); this watcher adds the per-user sum,
which no one supervisor sees. Once a second it sums the sizes of each user's running jobs'
logs; a user over the quota loses the job with the largest logs (FAILED, with the reason in
its stderr), one a round, until the user is under it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from corral.executor import files

log = logging.getLogger("corral.executor")

CHECK_INTERVAL_S = 1.0


@dataclass(frozen=True)
class WatchedLogs:
    user: str
    paths: tuple[str, ...]


class LogQuota:
    """The per-user quota over running jobs' logs, checked on a thread of its own."""

    def __init__(self, quota_mb: int, stop_job: Callable[[int, str], None], interval_s: float = CHECK_INTERVAL_S) -> None:
        """`stop_job(job_id, reason)` ends a job FAILED with `reason` (its supervisor writes it to the job's stderr)."""
        self.quota_bytes = quota_mb << 20
        self.quota_mb = quota_mb
        self._stop_job = stop_job
        self._interval_s = interval_s
        self._jobs: dict[int, WatchedLogs] = {}
        self._stopped: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def track(self, job_id: int, user: str, paths: tuple[str, ...]) -> None:
        with self._lock:
            self._jobs[job_id] = WatchedLogs(user, tuple(dict.fromkeys(paths)))
            self._stopped.discard(job_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="corral-log-quota", daemon=True)
                self._thread.start()

    def forget(self, job_id: int) -> None:
        with self._lock:
            self._jobs.pop(job_id, None)
            self._stopped.discard(job_id)

    def check(self) -> list[int]:
        """One round: the jobs stopped now (at most one per user over the quota)."""
        with self._lock:
            jobs = dict(self._jobs)
            stopped = set(self._stopped)
        by_user: dict[str, list[tuple[int, int]]] = {}
        for job_id, watched in jobs.items():
            if job_id not in stopped:
                by_user.setdefault(watched.user, []).append((files.total_size(watched.paths), job_id))
        victims = []
        for user, sizes in by_user.items():
            total = sum(size for size, _ in sizes)
            if total <= self.quota_bytes:
                continue
            size, job_id = max(sizes)
            reason = (f"{user}'s running jobs' logs hold {total >> 20} MB, over the server's per-user quota of "
                      f"{self.quota_mb} MB (user_log_quota_mb); this job, with the largest logs ({size >> 20} MB), "
                      "was stopped")
            log.warning("job %d: %s", job_id, reason)
            try:
                self._stop_job(job_id, reason)
            except OSError as exc:
                log.warning("could not stop job %d for its owner's log quota: %s", job_id, exc)
                continue
            victims.append(job_id)
        with self._lock:
            self._stopped.update(v for v in victims if v in self._jobs)
        return victims

    def _run(self) -> None:
        event = threading.Event()
        while not event.wait(self._interval_s):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad round
                log.exception("log quota check failed")
