"""A job that forks without end, on a live shared server: its own forks fail, its job fails,
and the server and everybody else's jobs carry on (issue 9: a fork bomb)."""

from __future__ import annotations

import os
import time

import pytest

from corral.client import Client

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process cap guards jobs run as their (non-root) owner")

# dash reports "Cannot fork" and gives up once the kernel refuses a fork (RLIMIT_NPROC)
BOMB = "i=0; while [ $i -lt 1000 ]; do sleep 5 & i=$((i+1)); done; wait"


def test_a_fork_bomb_fails_its_own_job_while_the_server_answers(server_factory, os_users, shared_dir):
    alice, bob = os_users
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[server]\nmax_job_processes = 64\n")
    server = server_factory(gpus=0, home=home)
    with Client(home=server.home) as root:
        tokens = {user: root.create_token(user=user, expires="1h")["token"] for user in (alice, bob)}
        with Client(server.url, token=tokens[alice]) as as_alice, Client(server.url, token=tokens[bob]) as as_bob:
            bomb = as_alice.submit(["sh", "-c", BOMB], submit_dir="/tmp", time="2m")
            neighbour = as_bob.submit(["sh", "-c", "for i in $(seq 20); do sleep 0.2 & done; wait; echo ok"],
                                      submit_dir="/tmp", time="2m")
            slowest = 0.0
            while root.get(bomb["id"])["state"] in ("PENDING", "RUNNING"):
                began = time.monotonic()
                assert root.health()["ok"] is True
                slowest = max(slowest, time.monotonic() - began)
                time.sleep(0.1)
            ended = root.wait(bomb["id"], timeout=60)
            assert ended["state"] == "FAILED" and ended["exit_code"] != 0
            assert "fork" in root.logs(bomb["id"], stream="stderr")[0].decode().lower()
            assert root.wait(neighbour["id"], timeout=60)["state"] == "COMPLETED"
            assert as_bob.logs(neighbour["id"])[0] == b"ok\n"
    assert slowest < 5.0  # answered throughout: no request waited behind the bomb


# (the system's python3: the tests' virtualenv lies under /root, which the accounts cannot read)
# writes `mb` MB to its log, says so on stderr, then holds on
WRITE_AND_HOLD = ("import sys, time\nfor _ in range({mb}): sys.stdout.write('x' * (1 << 20))\nsys.stdout.flush()\n"
                  "print('written', file=sys.stderr, flush=True)\ntime.sleep(120)")


def test_one_users_logs_are_capped_together_and_others_are_untouched(server_factory, os_users, shared_dir):
    from tests.helpers import wait_for

    alice, bob = os_users
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[server]\nuser_log_quota_mb = 20\n")
    server = server_factory(gpus=0, home=home, extra=["--cpus", "8"])
    with Client(home=server.home) as root:
        tokens = {user: root.create_token(user=user, expires="1h")["token"] for user in (alice, bob)}
        with Client(server.url, token=tokens[alice]) as as_alice, Client(server.url, token=tokens[bob]) as as_bob:
            def run(client: Client, mb: int) -> int:
                return client.submit(["python3", "-c", WRITE_AND_HOLD.format(mb=mb)], submit_dir="/tmp",
                                     time="3m")["id"]

            small = run(as_alice, 8)
            wait_for(lambda: b"written" in as_alice.logs(small, stream="stderr")[0], timeout=60)
            bobs = run(as_bob, 15)  # 8 + 15 would pass 20, but the quota is each user's own
            wait_for(lambda: b"written" in as_bob.logs(bobs, stream="stderr")[0], timeout=60)
            large = run(as_alice, 15)  # alice's two: 23 MB
            ended = as_alice.wait(large, timeout=60)
            assert ended["state"] == "FAILED"
            assert "per-user quota of 20 MB" in as_alice.logs(large, stream="stderr")[0].decode()
            assert root.get(small)["state"] == root.get(bobs)["state"] == "RUNNING"
            as_alice.cancel(small)
            as_bob.cancel(bobs)
