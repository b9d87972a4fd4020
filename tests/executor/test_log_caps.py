"""Log caps that hold however fast a job writes: the supervisor relays the job's output into its logs
(`corral.executor.log_relay`), writing no more than the job's cap (`max_log_mb`) and its owner's share of
the per-user quota (`user_log_quota_mb`, `corral.executor.log_ledger`), then stops the job."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import pytest

from corral.backends.base import Recovered
from corral.backends.local import LaunchSettings, LocalBackend
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.executor import files
from tests.helpers import make_spec, wait_for

MB = 1 << 20
_next_id = iter(range(1, 10_000))

# as fast as the machine lets it: two `yes` and two `dd` at once, on stdout and on stderr
FLOOD = ("yes out & yes err >&2 & dd if=/dev/zero bs=1M count={mb} status=none & "
         "dd if=/dev/zero bs=1M count={mb} status=none >&2; wait")
# one process, one line on stdout then one on stderr, in turn
INTERLEAVED = 'i=1; while [ $i -le 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done'


def backend_with(home: str, **limits: int) -> LocalBackend:
    quota = limits.pop("user_log_quota_mb", None)
    settings = LaunchSettings(kill_grace_s=1.0, server_env=dict(os.environ), server_url=lambda: None, **limits)
    return LocalBackend(home, settings, user_log_quota_mb=quota)


def start(backend: LocalBackend, command: str, user: str = "tester", **request) -> Job:
    log_dir = os.path.join(backend.home, "logs")
    spec = make_spec(workdir=backend.home, log_dir=log_dir, command=["sh", "-c", command], **request)
    spec = replace(spec, user=user)
    job = Job(id=next(_next_id), spec=spec, state=JobState.RUNNING, submit_time=time.time(), start_time=time.time(),
              node="n1", gpu_ids=())
    backend.start(job, Allocation(job.id, "n1", (), spec.cpus, spec.mem_mb))
    return job


def finish(backend: LocalBackend, job: Job, timeout: float = 60.0):
    return wait_for(lambda: backend.poll([job]), timeout=timeout)[0][1]


def log_bytes(job: Job) -> int:
    return files.total_size({job.log_path("stdout"), job.log_path("stderr")})


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("one_file", [True, False], ids=["stdout-and-stderr-one-file", "separate-files"])
def test_a_job_writing_as_fast_as_it_can_is_held_to_its_log_cap(short_tmp, one_file):
    backend = backend_with(short_tmp, max_log_mb=5)
    request = {"stdout": os.path.join(short_tmp, "flood.log")} if one_file else {}
    flood = start(backend, FLOOD.format(mb=2000), **request)
    quiet = start(backend, INTERLEAVED, stdout=os.path.join(short_tmp, "quiet.log"))
    into_null = start(backend, "dd if=/dev/zero bs=1M count=50 status=none; echo done >&2", stdout=os.devnull,
                      stderr=os.path.join(short_tmp, "null.err"))
    outcome = finish(backend, flood)
    assert (outcome.state, outcome.signal) == ("FAILED", 9)
    written = log_bytes(flood)
    assert 4.5 * MB <= written <= 5.5 * MB, written  # within 10% of the cap, for all four writers together
    reason = "the job's logs reached the server's limit of 5 MB (max_log_mb); the job was stopped"
    assert read(flood.log_path("stderr")).endswith(f"corral: {reason}\n")  # after a dd's last bytes, no newline
    assert outcome.error == reason
    # the job writing little is untouched, its lines all there and in the order it wrote them
    assert finish(backend, quiet).state == "COMPLETED"
    expected = [f"{stream} {i}" for i in range(1, 2001) for stream in ("out", "err")]
    assert read(quiet.log_path("stdout")).splitlines() == expected
    assert finish(backend, into_null).state == "COMPLETED"  # 50 MB into /dev/null fill no disk
    assert read(into_null.log_path("stderr")) == "done\n"


def test_an_appending_job_keeps_what_its_log_held_and_adds_no_more_than_its_cap(short_tmp):
    backend = backend_with(short_tmp, max_log_mb=5)
    shared = os.path.join(short_tmp, "shared.log")
    with open(shared, "w") as f:
        f.write("earlier run\n" * 100_000)  # 1.2 MB, none of it this job's
    before = os.path.getsize(shared)
    flood = start(backend, FLOOD.format(mb=2000), stdout=shared, open_mode="append")
    neighbour = start(backend, 'i=1; while [ $i -le 3000 ]; do echo "neighbour $i"; i=$((i+1)); done',
                      stdout=shared, open_mode="append")
    assert finish(backend, flood).state == "FAILED"
    assert finish(backend, neighbour).state == "COMPLETED"
    with open(shared, "rb") as f:
        data = f.read()
    assert data.startswith(b"earlier run\n" * 100_000)
    added = len(data) - before
    assert 4.5 * MB <= added <= 5.5 * MB + 100_000, added  # the neighbour's 40 kB besides
    lines = data.decode(errors="replace").splitlines()
    # appended, not written over: every line of the job sharing the file is there, whole
    assert [line for line in lines if line.startswith("neighbour")] == [f"neighbour {i}" for i in range(1, 3001)]


def test_a_users_jobs_writing_at_once_are_held_to_the_users_quota_together(short_tmp):
    backend = backend_with(short_tmp, user_log_quota_mb=8)
    gate = os.path.join(short_tmp, "go")
    ready = [os.path.join(short_tmp, f"ready{i}") for i in range(3)]
    # started one after another, they flood at once: the quota holds for the user's running jobs together
    floods = [start(backend, f"touch {ready[i]}; while [ ! -e {gate} ]; do sleep 0.01; done; " + FLOOD.format(mb=64),
                    user="ada") for i in range(3)]
    wait_for(lambda: all(os.path.exists(path) for path in ready))
    others = start(backend, "dd if=/dev/zero bs=1M count=6 status=none; echo written >&2; sleep 120", user="bob")
    os.mkdir(gate)
    outcomes = [finish(backend, job) for job in floods]
    assert [o.state for o in outcomes] == ["FAILED"] * 3
    total = sum(log_bytes(job) for job in floods)
    assert total <= 8.8 * MB, total
    for job, outcome in zip(floods, outcomes):
        assert "ada's running jobs' logs reached the server's per-user quota of 8 MB (user_log_quota_mb)" in (
            outcome.error or ""), outcome.error
        assert read(job.log_path("stderr")).endswith(f"corral: {outcome.error}\n")
    # the quota is each user's own: bob's job wrote its 6 MB and runs on
    wait_for(lambda: "written" in read(others.log_path("stderr")), timeout=30)
    assert os.path.getsize(others.log_path("stdout")) == 6 * MB
    assert backend.poll([others]) == []
    # ada's stopped jobs count no more: her next job writes all it has to, in order
    after = start(backend, INTERLEAVED, user="ada", stdout=os.path.join(short_tmp, "after.log"))
    assert finish(backend, after).state == "COMPLETED"
    assert read(after.log_path("stdout")).splitlines() == [f"{s} {i}" for i in range(1, 2001) for s in ("out", "err")]
    backend.cancel(others)
    finish(backend, others)
    assert os.listdir(backend.layout.log_ledgers) and all(  # every supervisor gave its share back
        read(os.path.join(backend.layout.log_ledgers, name)).strip() in ("", "{}")
        for name in os.listdir(backend.layout.log_ledgers))


def test_a_supervisor_that_died_leaks_none_of_its_owners_quota(short_tmp):
    backend = backend_with(short_tmp, user_log_quota_mb=8)
    held = start(backend, "dd if=/dev/zero bs=1M count=6 status=none; echo written >&2; sleep 300", user="ada")
    wait_for(lambda: os.path.exists(held.log_path("stderr")) and "written" in read(held.log_path("stderr")), timeout=30)
    started = files.read_json(os.path.join(backend.job_dir(held.id), files.STARTED))
    os.kill(started["supervisor_pid"], signal.SIGKILL)  # gone without giving its 6 MB back
    assert finish(backend, held).state == "NODE_FAIL"
    dropped = backend.log_quota.reconcile()  # what the server does every few seconds
    assert dropped == {"ada": [str(held.id)]}
    after = start(backend, "dd if=/dev/zero bs=1M count=7 status=none", user="ada")
    assert finish(backend, after).state == "COMPLETED"
    assert os.path.getsize(after.log_path("stdout")) == 7 * MB


def test_the_caps_hold_for_a_job_that_runs_on_across_a_server_restart(short_tmp):
    gate = os.path.join(short_tmp, "go")
    first = backend_with(short_tmp, max_log_mb=5, user_log_quota_mb=50)
    job = start(first, f"echo started; while [ ! -e {gate} ]; do sleep 0.05; done; " + FLOOD.format(mb=2000),
                user="ada")
    wait_for(lambda: os.path.exists(job.log_path("stdout")) and "started" in read(job.log_path("stdout")))
    second = backend_with(short_tmp, max_log_mb=5, user_log_quota_mb=50)  # the server, restarted
    assert second.recover(job).status is Recovered.RUNNING
    os.mkdir(gate)
    outcome = finish(second, job)
    assert outcome.state == "FAILED" and "limit of 5 MB" in (outcome.error or "")
    assert log_bytes(job) <= 5.5 * MB


def test_a_container_writing_as_fast_as_it_can_is_held_to_its_cap(os_users, shared_dir, podman, busybox_image):
    import pwd

    from corral.backends.local.containers import LocalContainers
    from corral.executor.cgroups.placement import find_layout
    from corral.executor.users import owned_dir, run_as_for, share_home_with_jobs

    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    share_home_with_jobs(home)
    settings = LaunchSettings(kill_grace_s=2.0, server_env=dict(os.environ), server_url=lambda: None, max_log_mb=5,
                              cgroup_layout=find_layout(home).layout)
    containers = LocalContainers("podman", podman, rootless=False, home_key=f"l{os.getpid()}")
    backend = LocalBackend(home, settings, owner_lookup=run_as_for, containers=containers)
    alice = os_users[0]
    flood = "dd if=/dev/zero bs=1M count=500 & dd if=/dev/zero bs=1M count=500 >&2; wait"
    spec = replace(make_spec(workdir=pwd.getpwnam(alice).pw_dir, log_dir=owned_dir(os.path.join(home, "logs"), alice),
                             command=["sh", "-c", flood], image=busybox_image), user=alice)
    job = Job(id=next(_next_id), spec=spec, state=JobState.RUNNING, submit_time=time.time(), start_time=time.time(),
              node="n1", gpu_ids=())
    backend.start(job, Allocation(job.id, "n1", (), spec.cpus, spec.mem_mb))
    outcome = finish(backend, job, timeout=120)  # what the runtime passes on from inside goes through the relay
    assert 4.5 * MB <= log_bytes(job) <= 5.5 * MB, log_bytes(job)
    assert outcome.state == "FAILED" and "limit of 5 MB" in (outcome.error or ""), outcome


def test_a_process_that_escaped_the_job_writes_nothing_to_its_log_once_the_job_ended(short_tmp):
    from tests.helpers import alive

    backend = backend_with(short_tmp, max_log_mb=5)  # no cgroup: a new session gets away from the kill
    pidfile = os.path.join(short_tmp, "escaped.pid")
    job = start(backend, f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo tick; sleep 0.2; done' & "
                         f"while [ ! -s {pidfile} ]; do sleep 0.01; done; echo main done")
    escaped = int(wait_for(lambda: os.path.exists(pidfile) and read(pidfile).strip()))
    try:
        began = time.monotonic()
        assert finish(backend, job).state == "COMPLETED"
        assert time.monotonic() - began < 15  # the job's end waits for its pipe a few seconds at most
        wait_for(lambda: not alive(escaped), timeout=10)  # its next write met a closed pipe
        size = log_bytes(job)
        time.sleep(0.5)
        assert log_bytes(job) == size
        assert "main done\ntick\n" in read(job.log_path("stdout"))  # what it wrote while the job ran is kept
    finally:
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)
