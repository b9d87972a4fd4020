"""What the local backend keeps of the supervisors it spawned and of the jobs they run.

`start` may be called from several threads at once (the server launches off its event loop) and `poll`
from another: the state they share is behind one lock, held only to read or change it, never while a
supervisor is spawned.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

from corral.core.jobspec.job import JobProcesses
from corral.executor import files

LIVENESS_CHECK_S = 2.0
PROCESSES_RECHECK_S = 1.0  # how often job_processes looks again for a job whose supervisor has not started it


class Supervisors:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the maps below but _last_liveness, which only poll's thread uses
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._exiting: list[subprocess.Popen[bytes]] = []  # supervisors that recorded an outcome, to reap
        self._last_liveness: dict[int, float] = {}
        self._processes: dict[int, JobProcesses] = {}  # running job -> its processes, read once from started.json
        self._not_started: dict[int, float] = {}  # job -> when started.json was last found missing

    def starting(self, job_id: int) -> None:
        """The job is launched again: what was read of its last run is stale."""
        with self._lock:
            self._processes.pop(job_id, None)
            self._not_started.pop(job_id, None)

    def spawned(self, job_id: int, child: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._children[job_id] = child

    def child(self, job_id: int) -> subprocess.Popen[bytes] | None:
        """The job's supervisor, if this backend spawned it (not one from before the server restarted)."""
        with self._lock:
            return self._children.get(job_id)

    def job_processes(self, job_id: int, job_dir: str) -> JobProcesses | None:
        """The running job's main process and cgroup, once its supervisor has started it."""
        cached = self._processes.get(job_id)
        if cached is not None:
            return cached
        now = time.monotonic()
        if now - self._not_started.get(job_id, -PROCESSES_RECHECK_S) < PROCESSES_RECHECK_S:
            return None  # looked a moment ago (the monitor asks for every running job, on the server's loop)
        started = files.read_json(os.path.join(job_dir, files.STARTED))
        if started is None or not started.get("pid"):
            with self._lock:
                self._not_started[job_id] = now
            return None
        processes = JobProcesses(int(started["pid"]), started.get("cgroup_procs"))
        with self._lock:
            self._processes[job_id] = processes
            self._not_started.pop(job_id, None)
        return processes

    def liveness_due(self, job_id: int, now: float) -> bool:
        """Whether it is time to look whether the job's supervisor still lives; a yes counts as the look."""
        if now - self._last_liveness.get(job_id, 0.0) < LIVENESS_CHECK_S:
            return False
        self._last_liveness[job_id] = now
        return True

    def ended(self, job_id: int) -> None:
        """The job has an outcome: forget it, and reap its supervisor once it has exited."""
        self._last_liveness.pop(job_id, None)
        with self._lock:
            self._processes.pop(job_id, None)
            self._not_started.pop(job_id, None)
            child = self._children.pop(job_id, None)
        if child is not None:
            self._exiting.append(child)

    def reap(self) -> None:
        self._exiting = [c for c in self._exiting if c.poll() is None]
