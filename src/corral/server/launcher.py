"""Launching jobs off the event loop.

A scheduling pass decides and records which jobs start; starting each one's
supervisor (files, a fork and an exec: milliseconds a job) happens here, in a small
pool of threads, so that a pass that starts a thousand jobs neither stalls the API
nor delays the next pass. What comes back (a launch that failed, a job cancelled
before its launch) is handed to the service on the event loop.

A job is "launching" from the moment the pass hands it over until its supervisor
has been spawned. A cancel or preemption that arrives meanwhile is held and carried
out right after the spawn (a cancel mark written before it would be cleared by the
launch); a cancel that arrives before the job's turn in the pool skips the launch.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from corral.backends.base import Placement
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation

log = logging.getLogger("corral.server")

LAUNCH_THREADS = min(32, max(8, os.cpu_count() or 1))  # supervisors starting up at once (see LocalBackend.start)


class Stop(enum.Enum):
    """What was asked of a job while it was launching."""

    CANCEL = "cancel"
    PREEMPT = "preempt"
    REQUEUE = "requeue"


class Launcher:
    """Starts jobs through `backend.start` in a pool of threads.

    Args:
        backend: whose `start` is called (it must be safe to call from several threads).
        loop: the event loop the callbacks run on.
        on_failed: called on the loop with a job whose launch raised, and the reason.
        on_skipped: called on the loop with a job cancelled before its launch began (never started).
        threads: how many launches run at once.
    """

    def __init__(self, backend: Placement, loop: asyncio.AbstractEventLoop, *, on_failed: Callable[[Job, str], None],
                 on_skipped: Callable[[Job], None], threads: int = LAUNCH_THREADS) -> None:
        self.backend = backend
        self._loop = loop
        self._on_failed = on_failed
        self._on_skipped = on_skipped
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="corral-launch")
        self._lock = threading.Lock()
        self._queued: set[int] = set()  # handed over, their turn in the pool not come yet
        self._starting: set[int] = set()  # backend.start running now
        self._stops: dict[int, Stop] = {}  # asked while launching, carried out after
        self._cancelled_by: dict[int, str] = {}  # who asked those cancels

    def hold(self, job_ids: Iterable[int]) -> None:
        """Count jobs as launching from now on, before their start is recorded (then `launch` them)."""
        with self._lock:
            self._queued.update(job_ids)

    def launch(self, job: Job, allocation: Allocation) -> None:
        """Start a job, recorded RUNNING, as soon as a thread is free."""
        with self._lock:
            self._queued.add(job.id)
        self._pool.submit(self._start, job, allocation)

    def abandon(self, job_ids: Iterable[int]) -> dict[int, Stop]:
        """Held jobs that will not be launched after all (their start could not be recorded);
        returns what was asked of them meanwhile."""
        with self._lock:
            stops = {}
            for job_id in job_ids:
                self._queued.discard(job_id)
                if job_id in self._stops:
                    stops[job_id] = self._stops.pop(job_id)
                self._cancelled_by.pop(job_id, None)
            return stops

    def launching(self, job_id: int) -> bool:
        """Whether a job's supervisor is not spawned yet (it cannot have ended; do not poll it)."""
        with self._lock:
            return job_id in self._queued or job_id in self._starting

    def launching_ids(self) -> frozenset[int]:
        """Every job being launched now (one look, for a caller that asks about many jobs)."""
        with self._lock:
            return frozenset(self._queued | self._starting)

    def pending_launches(self) -> int:
        with self._lock:
            return len(self._queued) + len(self._starting)

    def stop(self, job: Job, how: Stop, by: str | None = None) -> bool:
        """Ask a launching job to stop (`by`: who cancels it): returns False if it is not launching
        (stop it the usual way)."""
        with self._lock:
            if job.id not in self._queued and job.id not in self._starting:
                return False
            if self._stops.get(job.id) is not Stop.CANCEL:  # a cancel outranks a preemption
                self._stops[job.id] = how
                if how is Stop.CANCEL and by:
                    self._cancelled_by[job.id] = by
            return True

    def close(self) -> None:
        """Finish the launches under way; drop those whose turn has not come. Their jobs are recorded
        RUNNING without a supervisor, which the next start-up's recovery queues again."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- in a pool thread ---------------------------------------------------------------------------

    def _start(self, job: Job, allocation: Allocation) -> None:
        with self._lock:
            self._queued.discard(job.id)
            if self._stops.get(job.id) is Stop.CANCEL:
                del self._stops[job.id]
                self._cancelled_by.pop(job.id, None)
                self._call_soon(self._on_skipped, job)
                return
            self._starting.add(job.id)
        error: str | None = None
        try:
            self.backend.start(job, allocation)
        except Exception as exc:  # noqa: BLE001 - a job that cannot launch fails; the others go on
            log.exception("launch of job %d failed", job.id)
            error = f"launch failed: {exc}"
        self._call_soon(self._started, job, error)

    def _call_soon(self, callback: Callable[..., None], *args: object) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: the server is going down, recovery settles the job
            log.warning("job %d launched while the server was stopping", args[0].id if args else -1)  # type: ignore[attr-defined]

    # -- on the loop ----------------------------------------------------------------------------------

    def _started(self, job: Job, error: str | None) -> None:
        with self._lock:
            self._starting.discard(job.id)
            stop = self._stops.pop(job.id, None)
            by = self._cancelled_by.pop(job.id, None)
        if error is not None:
            self._on_failed(job, error)
        elif stop is Stop.CANCEL:
            self.backend.cancel(job, by)
        elif stop is Stop.PREEMPT:
            self.backend.preempt(job)
        elif stop is Stop.REQUEUE:
            self.backend.requeue(job)
