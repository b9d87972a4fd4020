"""The SDK in jobs of a shared (root) server, running as their owner: kill -9 of the server and a
restart on the same port or a new one lose and duplicate no step; the spool is its owner's alone.

Needs root (CI runs as root); real accounts come from tests/users.py. The jobs run the system's
Python on a copy of the package: the checkout and its virtualenv may lie where the accounts
cannot read (the SDK needs the standard library only).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import textwrap

import pytest

import corral
from corral.client import Client
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")

SYSTEM_PYTHON = "/usr/bin/python3"

LOGGER = textwrap.dedent("""
    import corral, os, sys, time
    run = corral.init(project="restart", flush_interval_s=0.2)
    print(run.id, flush=True)
    i = 0
    while not os.path.exists(sys.argv[1]):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
        i += 1
        time.sleep(0.01)
    run.finish(timeout=120)
    print("logged", i, flush=True)
""")


@pytest.fixture
def shared(server_factory, os_users, shared_dir, db_url):
    """(a shared server whose home the accounts pass through, a copy of the package they can read)."""
    lib = os.path.join(shared_dir, "lib")
    shutil.copytree(os.path.dirname(corral.__file__), os.path.join(lib, "corral"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return server_factory(gpus=0, db=db_url, home=os.path.join(shared_dir, "home")), lib


def submit_as(server, user: str, lib: str, *argv: str) -> dict:
    with server.client() as root:
        token = root.create_token(user=user, expires="1h")["token"]
    with Client(server.url, token=token) as as_user:
        return as_user.submit([SYSTEM_PYTHON, "-c", *argv], env={"PYTHONPATH": lib}, submit_dir="/tmp", time="10m")


def spooled_records(spool: str) -> list[str]:
    return sorted(os.path.join(root, name) for root, _, names in os.walk(spool) for name in names
                  if os.path.basename(root) == "batches")


@pytest.mark.parametrize("port", ["same port", "new port"])
def test_a_job_logging_through_a_kill_9_and_restart_of_the_server_stores_every_step_once(shared, os_users,
                                                                                          shared_dir, port):
    server, lib = shared
    alice = os_users[0]
    stop = os.path.join(shared_dir, "stop")
    job = submit_as(server, alice, lib, LOGGER, stop)
    root = server.client()
    run_id = int(wait_for(lambda: root.logs(job["id"])[0].split(), timeout=60)[0])
    wait_for(lambda: (root.get_run(run_id)["last_step"] or 0) >= 50, timeout=60)  # sending live

    old_url = server.url
    server.kill9()
    spool = os.path.join(server.home, "spool", alice)
    wait_for(lambda: spooled_records(spool), timeout=60)  # the job spools while nothing answers
    if port == "same port":
        server.extra = [*server.extra, "--port", old_url.rsplit(":", 1)[1]]
    server.start()
    assert (server.url == old_url) == (port == "same port")
    root = server.client()
    spooled_up_to = root.get_run(run_id)["last_step"]
    # the spool drains, and live sending resumes, while the job goes on
    wait_for(lambda: not spooled_records(spool) and root.get_run(run_id)["last_step"] > spooled_up_to + 50, timeout=90)

    open(stop, "w").close()
    ended = root.wait(job["id"], timeout=180)
    out = root.logs(job["id"])[0].decode()
    assert ended["state"] == "COMPLETED", out
    total = int(out.split()[-1])
    series = root.series(run_id, "loss", max_points=100_000)
    assert not series["downsampled"]
    assert series["steps"] == list(range(total)) and series["values"] == [1.0 / (i + 1) for i in range(total)]
    run = root.get_run(run_id)
    assert (run["state"], run["metrics"]["loss"]["count"]) == ("finished", total)
    err = root.logs(job["id"], stream="stderr")[0].decode()
    assert err.count("cannot reach the corral server") == 1 and "dropping data" not in err, err
    assert spooled_records(spool) == []


OFFLINE = textwrap.dedent("""
    import corral
    run = corral.init(project="private", mode="offline", flush_interval_s=0.05)
    for i in range(100):
        run.log({"loss": float(i)}, step=i)
    run.finish()
""")

SYNC = textwrap.dedent("""
    import os, sys
    from corral.client import Client
    from corral.sdk.sync import sync_spool
    with Client(home=sys.argv[1]) as client:
        for report in sync_spool(os.path.join(sys.argv[1], "spool"), client=client):
            print(report.run_id, report.points, report.state, report.error)
""")


def as_user(user: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `argv` as `user`, with that account's groups only (runuser drops root's)."""
    pairs = [f"{k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(["runuser", "-u", user, "--", "env", *pairs, *argv], capture_output=True, text=True,
                          timeout=60)


def test_a_jobs_spool_is_its_owners_to_write_nobody_elses_to_read_and_its_owner_syncs_it(shared, os_users):
    server, lib = shared
    alice, bob = os_users
    job = submit_as(server, alice, lib, OFFLINE)
    root = server.client()
    ended = root.wait(job["id"], timeout=60)
    err = root.logs(job["id"], stream="stderr")[0].decode()
    assert ended["state"] == "COMPLETED", err
    assert "data will be lost" not in err and "cannot write" not in err, err
    spooled = re.search(r"is spooled in (\S+);", err).group(1)
    mine = os.path.join(server.home, "spool", alice)
    assert os.path.dirname(spooled) == mine
    assert (os.stat(mine).st_uid, os.stat(mine).st_mode & 0o777) == (pwd.getpwnam(alice).pw_uid, 0o700)

    for argv in (["ls", mine], ["cat", os.path.join(spooled, "run.json")], ["ls", os.path.join(server.home, "spool")]):
        peek = as_user(bob, *argv)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, (argv, peek.stdout)

    synced = as_user(alice, SYSTEM_PYTHON, "-c", SYNC, server.home, env={"PYTHONPATH": lib})
    assert synced.returncode == 0, synced.stderr
    run_id, points, state, error = synced.stdout.split()
    assert (points, state, error) == ("100", "finished", "None")
    assert root.series(int(run_id), "loss")["steps"] == list(range(100))
    assert root.get_run(int(run_id))["user"] == alice
    assert os.listdir(mine) == []
