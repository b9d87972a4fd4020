"""Starting a job's supervisor, and reading back what it recorded."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace

from corral.core.jobspec.job import Outcome
from corral.executor import files
from corral.executor.launch_config import LaunchConfig

PREVIOUS_RUN_EXIT_S = 10.0  # an interactive job's supervisor passes on the last output after its outcome


def spawn_supervisor(job_dir: str, config: LaunchConfig) -> subprocess.Popen[bytes]:
    """Write launch.json and start the supervisor in its own session, holding the job's lock.

    The lock is taken here and its descriptor handed over, so there is no moment
    between "the server decided to run it" and "the supervisor owns it" at which
    a restarted server could find the lock free and run the job a second time.
    """
    os.makedirs(job_dir, exist_ok=True)
    lock_fd = os.open(os.path.join(job_dir, files.LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # a requeued job starts again in its own directory: its previous run's supervisor records the
        # outcome as its last act and may still be on its way out, its lock held a moment longer
        if not files.lock_within(lock_fd, PREVIOUS_RUN_EXIT_S):
            raise BlockingIOError(f"job directory {job_dir} is still held by a supervisor of the job")
        launch = replace(config, lock_fd=lock_fd).to_json()
        files.write_json_atomic(os.path.join(job_dir, files.LAUNCH), launch, mode=0o600)
        # 0600: a root server's job directories are 0711, and a traceback here may quote the job's environment
        log_fd = os.open(os.path.join(job_dir, files.SUPERVISOR_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(log_fd, "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "corral.executor.supervisor", job_dir],
                pass_fds=(lock_fd,), start_new_session=True, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd="/",
            )
    finally:
        os.close(lock_fd)


def read_outcome(job_dir: str) -> Outcome | None:
    data = files.read_json(os.path.join(job_dir, files.RESULT))
    if data is None:
        return None
    state = data["state"]
    if state == "PREEMPTED" and os.path.exists(os.path.join(job_dir, files.CANCEL)):
        state = "CANCELLED"  # cancelled during its preemption's grace period: the user's word wins
    return Outcome(state, data.get("exit_code"), data.get("signal"), data["end_time"], data.get("error"))


def supervisor_alive(job_dir: str) -> bool:
    """True while some supervisor holds the job's lock."""
    return files.lock_held(os.path.join(job_dir, files.LOCK))


def was_started(job_dir: str) -> bool:
    return os.path.exists(os.path.join(job_dir, files.STARTED))


def request_cancel(job_dir: str, mark: str = files.CANCEL, content: str = "") -> None:
    """Leave the cancel (preempt, fail) mark, read by the supervisor even if it is not started yet; wake it."""
    with open(os.path.join(job_dir, mark), "w") as f:
        f.write(content)
    started = files.read_json(os.path.join(job_dir, files.STARTED))
    if started is None:
        return
    pid = started["supervisor_pid"]
    if files.process_start_ticks(pid) == started["supervisor_start"]:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def kill_orphaned_job(job_dir: str) -> None:
    """After a supervisor died on its own, make sure its job does not keep the GPUs, nor its container's
    binds of its owner's directories."""
    from corral.executor.containers.held import release_left  # rare: a lost job's cleanup alone needs it

    try:
        release_left(job_dir)
    except OSError as exc:
        logging.getLogger("corral.executor").warning(
            "could not unmount what job directory %s holds for its container: %s", job_dir, exc)
    started = files.read_json(os.path.join(job_dir, files.STARTED))
    if started is None:
        return
    if started.get("cgroup"):
        # the cgroup holds all of it, detached processes too; it is this job's alone (the home's key and its id)
        from corral.executor.cgroups import open_job_cgroup

        cgroup = open_job_cgroup(started["cgroup"]["layout"], started["cgroup"]["name"])
        cgroup.kill_until_empty()
        cgroup.remove()
        return
    pid = started["pid"]
    # After a reboot the old pid may lead someone else's session: kill only the job's own.
    if started.get("boot_id") != files.boot_id():
        return
    if files.process_start_ticks(pid) not in (None, started.get("pid_start")):
        return
    for member in files.session_members(pid):
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
