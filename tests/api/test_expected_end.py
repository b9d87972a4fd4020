"""Each job's expected end (issue 18, point 2): start + time limit, or its tracked run's ETA when sooner,
in the job JSON of a live server, its listing and the dashboard's queue."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from corral.core.units.iso_times import epoch_seconds
from tests.helpers import wait_for

FAST = ["--sample-interval", "0.3"]
SLEEP = ["sleep", "300"]

# A training loop through the real SDK: 3,000 steps at about 50 a second, so its ETA is a minute or so away,
# well before its 30-minute limit.
TRAINING = """
import corral, time
run = corral.init(project="eta", name="steady", config={"total_steps": 3000}, flush_interval_s=0.2)
for step in range(3000):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
    time.sleep(0.02)
run.finish()
"""


def dashboard_queue(server) -> dict[int, dict]:
    return {j["id"]: j for j in json.loads(server.client()._raw("GET", "/api/v1/queue")[2])["jobs"]}


def test_running_jobs_end_by_start_plus_limit_pending_ones_by_estimated_start_plus_limit_and_no_limit_says_none(
        server_factory):
    server = server_factory(extra=FAST)
    client = server.client()
    limited = client.submit(SLEEP, gpus=2, time="10:00")["id"]
    unlimited = client.submit(SLEEP, gpus=0)["id"]
    wait_for(lambda: all(client.get(j)["state"] == "RUNNING" for j in (limited, unlimited)))
    waiting = client.submit(SLEEP, gpus=4, time="5:00")["id"]  # after `limited`, whose GPUs it needs

    job = client.get(limited)
    assert job["expected_end_source"] == "time_limit"
    assert epoch_seconds(job["expected_end"]) == pytest.approx(epoch_seconds(job["start_time"]) + 600, abs=0.002)
    assert (client.get(unlimited)["expected_end"], client.get(unlimited)["expected_end_source"]) == (None, None)

    pending = wait_for(lambda: (j := client.get(waiting))["estimated_start"] and j)
    assert pending["expected_end_source"] == "time_limit"
    assert epoch_seconds(pending["expected_end"]) == pytest.approx(epoch_seconds(pending["estimated_start"]) + 300,
                                                                   abs=0.002)

    listed = {j["id"]: j for j in client.queue()}  # the listing, and the dashboard's queue, say the same
    shown = dashboard_queue(server)
    for job_id in (limited, unlimited, waiting):
        one = client.get(job_id)
        assert listed[job_id]["expected_end"] == shown[job_id]["expected_end"] == one["expected_end"]
    client.cancel(limited)
    ended = client.wait(limited, timeout=30)
    assert (ended["expected_end"], ended["expected_end_source"]) == (None, None)
    for job_id in (unlimited, waiting):
        client.cancel(job_id)


def test_a_job_whose_tracked_run_will_finish_before_its_limit_shows_the_runs_eta(server_factory, short_tmp):
    server = server_factory(extra=FAST)
    client = server.client()
    job_id = client.submit([sys.executable, "-c", TRAINING], time="30:00", workdir=short_tmp,
                           env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})["id"]
    job = wait_for(lambda: (j := client.get(job_id))["expected_end_source"] == "eta" and j, timeout=60)
    asked = time.time()
    end = epoch_seconds(job["expected_end"])
    progress = next(r["progress"] for r in client.top() if r["id"] == job_id)
    assert progress["total"] == 3000 and 0 < progress["step"] < 3000
    assert end < epoch_seconds(job["start_time"]) + 1800  # sooner than the limit: that is why it shows
    # about a minute away at ~50 steps/s; a loaded machine trains slower and its ETA moves out, but not past the
    # half hour of the limit (asserted above)
    assert asked - 5 < end
    listed = next(j for j in client.queue() if j["id"] == job_id)
    assert listed["expected_end_source"] == dashboard_queue(server)[job_id]["expected_end_source"] == "eta"
    client.cancel(job_id)
