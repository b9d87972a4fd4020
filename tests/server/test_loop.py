"""The scheduling loop never stalls and never blocks the API (issue 15, item 3), on a live server.

Before, a pass that started many jobs spawned their supervisors one by one on the event
loop, and the next pass waited 19 times as long as that took: CPUs freed by the first
wave stayed idle for tens of seconds, and `GET /api/v1/health` waited for the launches.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime

from tests.helpers import wait_for


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _started(home: str, job_id: int) -> bool:
    return os.path.exists(os.path.join(home, "jobs", str(job_id), "started.json"))


def _behind_a_blocker(server_factory, short_tmp, cpus: int, command: list[str], count: int):
    """A server of `cpus` CPUs, all held by a running blocker, with `count` one-CPU jobs queued behind it."""
    server = server_factory(gpus=0, extra=["--cpus", str(cpus), "--mem", "1000G"])
    client = server.client()
    blocker = client.submit(["sleep", "600"], cpus=cpus, workdir=short_tmp)
    wait_for(lambda: client.get(blocker["id"])["state"] == "RUNNING")
    jobs = [client.submit(command, cpus=1, workdir=short_tmp)["id"] for _ in range(count)]
    return server, client, blocker, jobs


def test_cpus_freed_by_a_large_first_wave_are_reused_within_seconds(server_factory, short_tmp):
    cpus = 60
    _, client, blocker, jobs = _behind_a_blocker(server_factory, short_tmp, cpus, ["sleep", "1"], 2 * cpus)
    client.cancel(blocker["id"])  # one pass starts the first wave of 60 at once
    first, second = jobs[:cpus], jobs[cpus:]
    wait_for(lambda: any(client.get(j)["state"] != "PENDING" for j in second), timeout=60)
    ends = [_epoch(client.get(j)["end_time"]) for j in first if client.get(j)["end_time"]]
    start = min(_epoch(client.get(j)["start_time"]) for j in second if client.get(j)["start_time"])
    # the old loop left the freed CPUs idle for 19 times the first pass (tens of seconds here)
    assert ends and start - min(ends) < 8.0, f"the first CPU freed at {min(ends):.1f} was reused at {start:.1f}"


def test_health_answers_while_a_large_pass_launches(server_factory, short_tmp):
    cpus = 200
    server, client, blocker, jobs = _behind_a_blocker(server_factory, short_tmp, cpus, ["sleep", "120"], cpus)
    waits: list[float] = []
    done = threading.Event()

    def probe() -> None:
        prober = server.client()
        while not done.is_set():
            sent = time.monotonic()
            prober.health()
            waits.append(time.monotonic() - sent)
            time.sleep(0.01)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        client.cancel(blocker["id"])  # one pass starts all 200
        wait_for(lambda: all(_started(server.home, j) for j in jobs), timeout=120, interval=0.2)
    finally:
        done.set()
        thread.join(timeout=120)
    # the old loop spawned the 200 supervisors on the event loop: seconds without an answer
    assert waits and max(waits) < 2.0, f"health waited {max(waits):.2f} s while the pass launched"
