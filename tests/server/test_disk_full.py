"""The disk filling up under a running server: a clear error for what could not be saved, nothing
half-written, and everything works again once there is room (a real full filesystem: a small
tmpfs, which needs root, as CI has)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from corral.errors import CorralError
from tests.conftest import Server, _kill_leftover_supervisors
from tests.helpers import wait_for

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root (CI runs as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        _kill_leftover_supervisors(str(mount))
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path) -> None:
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass


def test_a_full_disk_is_a_clear_error_and_nothing_is_corrupted(small_disk):
    server = Server(home=str(small_disk / "home"), gpus=1).start()
    try:
        client = server.client()
        blocker = client.submit(SLEEP, gpus=1)["id"]  # holds the GPU: what is submitted next only waits
        # launched before the disk fills (supervisors start off the loop): a launch on a full disk fails its job
        wait_for(lambda: os.path.exists(os.path.join(server.home, "jobs", str(blocker), "started.json")))
        before = client.submit(SLEEP, gpus=1, name="before")["id"]
        run = client.create_run(project="p")
        client.log_metrics(run["id"], {"batch_id": "b1", "points": [{"key": "loss", "step": 1, "value": 1.0}]})

        fill(small_disk / "filler")
        refused = 0
        for i in range(20):  # SQLite may still find room in pages it has; keep going until the disk says no
            try:
                client.submit(SLEEP, gpus=1, name=f"during-{i}")
                client.log_metrics(run["id"], {"batch_id": f"d{i}", "points": [
                    {"key": "loss", "step": 2 + i, "value": 0.5}] * 1})
            except CorralError as exc:
                assert exc.status == 503 and "full" in exc.message and "nothing was saved" in exc.message, exc.message
                refused += 1
        assert refused, "the disk never filled up"

        os.unlink(small_disk / "filler")
        after = client.submit(SLEEP, gpus=1, name="after")["id"]  # room again: works again
        client.log_metrics(run["id"], {"batch_id": "b2", "points": [{"key": "loss", "step": 100, "value": 0.25}]})
        names = {j["name"] for j in client.queue()}
        assert {"before", "after"} <= names and client.get(before)["state"] == "PENDING"
        assert client.get_run(run["id"])["metrics"]["loss"]["last"] == 0.25
        for job in (blocker, before, after):
            client.cancel(job)
    finally:
        server.stop()
    with sqlite3.connect(small_disk / "home" / "corral.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# a chatty job gone wrong: about 12 MB a second, which the supervisor's checks (ten a second) keep up with
WRITE_FOREVER = [sys.executable, "-c", "import sys, time\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
                 "    sys.stdout.flush()\n    time.sleep(0.005)"]


def test_a_job_filling_the_disk_is_stopped_before_it_is_full_and_others_still_end_as_they_did(small_disk):
    home = small_disk / "home"
    home.mkdir()
    (home / "config.toml").write_text("[server]\nlog_reserve_mb = 6\n")
    server = Server(home=str(home), gpus=0).start()
    try:
        client = server.client()
        exits_3 = client.submit(["sh", "-c", "sleep 3; exit 3"], name="exits-3")["id"]
        flood = client.submit(WRITE_FOREVER, name="flood")["id"]
        ended = client.wait(flood, timeout=60)
        assert ended["state"] == "FAILED"
        assert "less than 6 MB free" in client.logs(flood, stream="stderr", tail=1)[0].decode()
        assert os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize > 2 << 20  # stopped short of full
        client.submit(["true"], name="still-accepted")  # no 503: the server still has room
        done = client.wait(exits_3, timeout=60)
        assert (done["state"], done["exit_code"]) == ("FAILED", 3)
    finally:
        server.stop()


def test_an_outcome_is_recorded_when_the_disk_filled_while_the_job_ran(small_disk):
    server = Server(home=str(small_disk / "home"), gpus=0).start()
    gate = small_disk / "go"
    try:
        client = server.client()
        began = small_disk / "began"
        job = client.submit(["sh", "-c", f"mkdir {began}; while [ ! -e {gate} ]; do sleep 0.1; done; exit 3"])["id"]
        wait_for(began.exists, timeout=30)
        os.mkdir(gate)  # made before the disk fills: the job ends once it is full
        fill(small_disk / "filler")
        # the supervisor writes the outcome into the space it reserved, on the full disk; whether the database
        # still finds a free page there for the server to save it depends on where SQLite's WAL stood, so the
        # test frees the disk once the outcome is written, and the server must then store it
        wait_for(lambda: os.path.exists(os.path.join(server.home, "jobs", str(job), "result.json")), timeout=60)
        os.unlink(small_disk / "filler")
        ended = client.wait(job, timeout=30)
        assert (ended["state"], ended["exit_code"]) == ("FAILED", 3), (ended["reason"], ended["signal"])  # not NODE_FAIL: its outcome was written
    finally:
        server.stop()
    server.start()  # and it was stored, not only held in memory
    try:
        ended = server.client().get(job)
        assert (ended["state"], ended["exit_code"]) == ("FAILED", 3)
    finally:
        server.stop()
