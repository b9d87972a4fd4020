"""A root server runs each job as its owner: real accounts, real supervisors, real processes.

Needs root (CI runs as root); the `os_users` and `shared_dir` fixtures come from tests/users.py.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
import time
from dataclasses import replace

import pytest

from corral.backends.local import LaunchSettings, LocalBackend
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest
from corral.executor import files
from corral.executor.users import owned_dir, run_as_for, share_home_with_jobs
from tests.helpers import make_spec, wait_for
from tests.users import EXTRA_GROUP, user_pids

MAX_PROCESSES = 100
_next_id = iter(range(1, 10_000))


@pytest.fixture
def backend(os_users, shared_dir):
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    share_home_with_jobs(home)  # what the server does at start-up
    settings = LaunchSettings(kill_grace_s=1.0, server_env=dict(os.environ), server_url=lambda: None,
                              max_job_processes=MAX_PROCESSES)
    return LocalBackend(home, settings, owner_lookup=run_as_for)


def log_dir(backend: LocalBackend, user: str) -> str:
    return owned_dir(os.path.join(backend.home, "logs"), user)


def make_job(user: str, *, logs: str, workdir: str, **request) -> Job:
    spec = replace(make_spec(workdir=workdir, log_dir=logs, **request), user=user)
    return Job(id=next(_next_id), spec=spec, state=JobState.RUNNING, submit_time=time.time(),
               start_time=time.time(), node="n1", gpu_ids=())


def start(backend: LocalBackend, user: str, **request) -> Job:
    job = make_job(user, logs=log_dir(backend, user), workdir=pwd.getpwnam(user).pw_dir, **request)
    backend.start(job, Allocation(job.id, "n1", (), job.spec.cpus, job.spec.mem_mb))
    return job


def finish(backend: LocalBackend, job: Job, timeout: float = 30.0):
    ended = wait_for(lambda: backend.poll([job]), timeout=timeout)
    return ended[0][1]


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def checkpoint_dir(backend: LocalBackend, job: Job) -> str:
    return os.path.join(backend.checkpoints_dir, str(job.id))


def test_a_job_runs_as_its_owner_with_their_groups_home_and_umask(backend, os_users):
    alice = pwd.getpwnam(os_users[0])
    show = ('id -u; id -g; id -G; echo "$HOME"; echo "$USER"; echo "$LOGNAME"; echo "$SHELL"; umask; '
            'echo saved > "$CORRAL_CHECKPOINT_DIR/ckpt"; echo err >&2')
    job = start(backend, alice.pw_name, command=["sh", "-c", show], umask="027")
    outcome = finish(backend, job)
    assert outcome.state == "COMPLETED", read(job.log_path("stderr"))
    uid, gid, groups, home, user, logname, shell, umask = read(job.log_path("stdout")).splitlines()
    assert (int(uid), int(gid)) == (alice.pw_uid, alice.pw_gid)
    assert {int(g) for g in groups.split()} == set(os.getgrouplist(alice.pw_name, alice.pw_gid))
    assert grp.getgrnam(EXTRA_GROUP).gr_gid in {int(g) for g in groups.split()}
    assert (home, user, logname, shell) == (alice.pw_dir, alice.pw_name, alice.pw_name, "/bin/sh")
    assert umask == "0027"
    for stream in ("stdout", "stderr"):
        st = os.stat(job.log_path(stream))
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (alice.pw_uid, alice.pw_gid, 0o640), stream
    ckpt = os.stat(checkpoint_dir(backend, job))
    assert (ckpt.st_uid, ckpt.st_mode & 0o777) == (alice.pw_uid, 0o700)
    assert os.stat(os.path.join(checkpoint_dir(backend, job), "ckpt")).st_uid == alice.pw_uid
    launch = os.stat(os.path.join(backend.job_dir(job.id), files.LAUNCH))
    assert (launch.st_uid, launch.st_mode & 0o777) == (0, 0o600)


def test_a_batch_script_runs_as_its_owner_who_cannot_read_the_launch_file_nor_another_users_script(
        backend, os_users):
    alice, bob = os_users
    script = ('#!/bin/sh\nid -un\ncat "$(dirname "$0")/launch.json" || echo unreadable\n'
              'ls "$(dirname "$0")" || echo unlisted\n')
    job = start(backend, alice, command=None, script=script)
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")).splitlines() == [alice, "unreadable", "unlisted"]
    script_path = os.path.join(backend.job_dir(job.id), files.SCRIPT)
    prying = start(backend, bob, command=["cat", script_path])
    outcome = finish(backend, prying)
    assert outcome.state == "FAILED"
    assert "Permission denied" in read(prying.log_path("stderr"))
    assert read(prying.log_path("stdout")) == ""


def test_a_log_path_its_owner_cannot_write_fails_the_job_and_leaves_roots_file_untouched(
        backend, os_users, shared_dir):
    alice = pwd.getpwnam(os_users[0])
    locked = os.path.join(shared_dir, "root-only")
    os.mkdir(locked)
    os.chmod(locked, 0o755)
    victim = os.path.join(locked, "precious.txt")
    with open(victim, "w") as f:
        f.write("keep me\n")
    os.chmod(victim, 0o644)
    logs = log_dir(backend, alice.pw_name)
    link = os.path.join(logs, "innocent.log")
    os.symlink(victim, link)
    os.lchown(link, alice.pw_uid, alice.pw_gid)  # as if alice planted it in her own log directory
    attempts = {
        "stdout is root's file": {"stdout": victim},
        "stderr is root's file": {"stderr": victim},
        "a new file in root's directory": {"stdout": os.path.join(locked, "new.log")},
        "a directory under root's": {"stdout": os.path.join(locked, "sub", "x.log")},
        "her link to root's file": {"stdout": link},
    }
    for i, (attempt, paths) in enumerate(attempts.items()):
        ran = os.path.join(logs, f"ran-{i}")
        job = start(backend, alice.pw_name, command=["touch", ran], **paths)
        outcome = finish(backend, job)
        assert outcome.state == "FAILED", attempt
        assert f"cannot open log file as {alice.pw_name}" in outcome.error and "Permission denied" in outcome.error
        assert not os.path.exists(ran), attempt
    assert read(victim) == "keep me\n"
    st = os.stat(victim)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 0, 0o644)
    assert sorted(os.listdir(locked)) == ["precious.txt"]


def test_a_user_without_an_account_is_refused_and_nothing_is_launched(backend, shared_dir):
    with pytest.raises(InvalidRequest) as refused:
        run_as_for("corral-no-such-user")
    assert refused.value.field == "user"
    job = make_job("corral-no-such-user", logs=shared_dir, workdir=shared_dir, command=["true"])
    with pytest.raises(InvalidRequest) as refused:
        backend.start(job, Allocation(job.id, "n1", (), 1, None))
    assert refused.value.field == "user" and "corral-no-such-user" in refused.value.message
    assert not os.path.exists(backend.job_dir(job.id))


def test_root_jobs_run_as_root_unchanged(backend, shared_dir):
    assert run_as_for("root") is None
    base = os.path.join(shared_dir, "logs")
    assert owned_dir(base, "root") == base
    job = start(backend, "root", command=["id", "-u"])
    assert finish(backend, job).state == "COMPLETED"
    assert read(job.log_path("stdout")) == "0\n"
    assert files.read_json(os.path.join(backend.job_dir(job.id), files.LAUNCH))["run_as"] is None


def test_the_shared_home_is_passable_by_name_but_its_private_files_stay_private(shared_dir):
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    for name in ("corral.db", "server.json"):
        fd = os.open(os.path.join(home, name), os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
        os.chmod(os.path.join(home, name), 0o644)
    share_home_with_jobs(home)
    for name in ("", "jobs", "checkpoints", "logs"):
        assert os.stat(os.path.join(home, name)).st_mode & 0o777 == 0o711, name
    assert os.stat(os.path.join(home, "corral.db")).st_mode & 0o777 == 0o600  # every job's environment
    assert os.stat(os.path.join(home, "server.json")).st_mode & 0o777 == 0o644  # how the CLI finds the server


def test_a_fork_bomb_stops_at_its_owners_process_limit_and_only_its_own_job_fails(backend, os_users):
    alice, bob = (pwd.getpwnam(name) for name in os_users)
    logs = log_dir(backend, alice.pw_name)
    hold = os.path.join(logs, "hold")
    os.mkfifo(hold, 0o600)
    os.chown(hold, alice.pw_uid, alice.pw_gid)
    forked = os.path.join(logs, "forked")
    bomb = f'i=0; while [ $i -lt 1000 ]; do sleep 60 & i=$((i+1)); echo $i > {forked}; done'
    # the outer shell keeps the bomb's sleeps alive, without forking, until the test lets it go
    outer = 'sh -c "$0"; status=$?; read go < "$1"; exit $status'
    job = start(backend, alice.pw_name, command=["sh", "-c", outer, bomb, hold], time_limit_s=60)
    stderr = job.log_path("stderr")
    wait_for(lambda: os.path.exists(stderr) and "fork" in read(stderr).lower(), timeout=30)
    started = int(read(forked))
    assert started < MAX_PROCESSES  # the kernel refused the forks past the limit, long before the loop's end
    assert len(user_pids(alice.pw_uid)) <= MAX_PROCESSES
    # another user's job, and root, fork as usual while alice is at her limit
    neighbour = start(backend, bob.pw_name, command=["sh", "-c", "for i in $(seq 20); do sleep 0.1 & done; wait; echo ok"])
    assert finish(backend, neighbour).state == "COMPLETED"
    assert read(neighbour.log_path("stdout")) == "ok\n"
    assert subprocess.run(["true"], timeout=10).returncode == 0
    members = session_of(backend.job_pid(job.id))
    assert len(members) > started  # its sleeps
    with open(hold, "w") as f:
        f.write("go\n")
    outcome = finish(backend, job)
    assert outcome.state == "FAILED" and outcome.exit_code != 0
    wait_for(lambda: reaped(members), timeout=10)  # its sleeps died with it


def test_cancelling_a_job_run_as_its_owner_kills_all_its_processes(backend, os_users):
    alice = pwd.getpwnam(os_users[0])
    up = os.path.join(log_dir(backend, alice.pw_name), "up")
    job = start(backend, alice.pw_name, command=["sh", "-c", f"sleep 60 & sleep 60 & echo up > {up}; wait"])
    wait_for(lambda: os.path.exists(up))
    members = session_of(backend.job_pid(job.id))
    assert len(members) == 3 and all(os.stat(f"/proc/{pid}").st_uid == alice.pw_uid for pid, _ in members)
    backend.cancel(job)
    assert finish(backend, job).state == "CANCELLED"
    wait_for(lambda: reaped(members), timeout=10)


def session_of(job_pid: int) -> list[tuple[int, int | None]]:
    """The processes of a job's session, each as (pid, start ticks): that names it even after its pid is reused."""
    return [(pid, files.process_start_ticks(pid)) for pid in files.session_members(job_pid)]


def reaped(processes: list[tuple[int, int | None]]) -> bool:
    """Every process is gone for good: dead and reaped, so no longer counted against its owner's process limit."""
    return all(files.process_start_ticks(pid) != ticks for pid, ticks in processes)


def test_a_fifo_the_job_plants_as_its_log_delays_no_limit(backend, os_users):
    alice = pwd.getpwnam(os_users[0])
    err = os.path.join(log_dir(backend, alice.pw_name), "swapped.err")
    # The job swaps its stderr for a FIFO, then outgrows its memory limit. The supervisor's note about
    # the kill goes to stderr; opening a FIFO would wait for a reader forever, and the limit with it.
    swap_and_grow = ('rm -f "$0" && mkfifo "$0" && exec /usr/bin/python3 -c '
                     '"import time; x = bytearray(300 * 2**20); time.sleep(60)"')
    job = start(backend, alice.pw_name, command=["sh", "-c", swap_and_grow, err], stderr=err, mem="100M",
                time="1")
    began = time.monotonic()
    outcome = finish(backend, job, timeout=30)
    assert outcome.state == "OUT_OF_MEMORY" and time.monotonic() - began < 20
    assert os.path.exists(err) and not os.path.isfile(err)  # still the job's FIFO: nothing was written into it


def test_a_fifo_already_at_the_log_path_fails_the_job_instead_of_hanging_it(backend, os_users):
    alice = pwd.getpwnam(os_users[0])
    logs = log_dir(backend, alice.pw_name)
    fifo = os.path.join(logs, "planted.out")
    os.mkfifo(fifo, 0o600)
    os.chown(fifo, alice.pw_uid, alice.pw_gid)
    job = start(backend, alice.pw_name, command=["true"], stdout=fifo)
    outcome = finish(backend, job, timeout=20)
    assert outcome.state == "FAILED" and "cannot open log file" in (outcome.error or "")  # at once, not never
