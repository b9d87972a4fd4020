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
