"""The job page's timeline says when a job was preempted, for which job, and when it was requeued
(issue 16, point 2), and when a running job should end (issue 18, point 2), in the real browser against a
live server."""

from __future__ import annotations

import os
import sys
import time

import pytest

from corral.core.units.iso_times import epoch_seconds
from tests.helpers import wait_for
from tests.server.test_endings import PREEMPTIBLE
from tests.web.conftest import screenshot


def test_the_job_page_shows_a_preemption_and_the_job_it_made_room_for(server_factory, short_tmp, page):
    server = server_factory()
    with server.client() as client:
        low = client.submit([sys.executable, "-c", PREEMPTIBLE], gpus=4, nice=100, preemptible=True, workdir=short_tmp)
        wait_for(lambda: os.path.exists(os.path.join(server.home, "checkpoints", str(low["id"]), "up")), timeout=30)
        high = client.submit(["sleep", "1"], gpus=2, workdir=short_tmp)
        assert client.wait(low["id"], timeout=60)["state"] == "COMPLETED"

    page.goto(server.url + f"/jobs/{low['id']}")
    timeline = page.locator("[data-testid=timeline]")
    timeline.locator("[data-event=ended]").wait_for(timeout=15_000)
    events = timeline.locator("[data-event]")
    kinds = [events.nth(i).get_attribute("data-event") for i in range(events.count())]
    assert kinds == ["submitted", "started", "preempted", "requeued", "started", "ended"], kinds
    preempted = timeline.locator("[data-event=preempted]")
    assert f"job #{high['id']}" in preempted.inner_text()
    assert preempted.locator("a").get_attribute("href") == f"/jobs/{high['id']}"
    assert preempted.locator("time").count() == 1 and timeline.locator("[data-event=requeued] time").count() == 1
    screenshot(page, "job-preempted")
    preempted.locator("a").click()
    page.wait_for_url(f"**/jobs/{high['id']}")
    page.locator("[data-testid=timeline] [data-event=ended]").wait_for(timeout=15_000)


def test_the_job_page_says_when_a_running_job_should_end_by_its_limit_or_its_runs_eta(server_factory, page):
    server = server_factory(extra=["--sample-interval", "0.3"])
    client = server.client()
    by_limit = client.submit(["sleep", "300"], time="1:00:00")["id"]
    tracked = client.submit(["sleep", "300"], time="1:00:00")["id"]
    wait_for(lambda: all(client.get(j)["state"] == "RUNNING" for j in (by_limit, tracked)))
    # a run of the second job: 100 of 1,000 steps in its first 10 s, so about 90 s to go, well inside its hour
    now = time.time()
    run = client.create_run(project="p", name="r", job_id=tracked, config={"total_steps": 1000}, start_time=now - 10)
    client.log_metrics(run["id"], {"points": [{"key": "loss", "step": s, "value": 1.0 / (s + 1), "time": now - 10 + s / 10}
                                              for s in range(101)]})
    wait_for(lambda: client.get(tracked)["expected_end_source"] == "eta", timeout=20)

    for job_id, source, grounds in ((by_limit, "time_limit", "its time limit"), (tracked, "eta", "tracked run's ETA")):
        expected = client.get(job_id)["expected_end"]
        page.goto(server.url + f"/jobs/{job_id}")
        end = page.locator("[data-testid=timeline] [data-event=running] [data-testid=expected-end]")
        end.wait_for(timeout=15_000)
        assert end.get_attribute("data-source") == source and grounds in end.inner_text()
        shown = end.locator("time").get_attribute("datetime")
        assert epoch_seconds(shown) == pytest.approx(epoch_seconds(expected), abs=0.002), (shown, expected)
    screenshot(page, "job-expected-end")
    for job_id in (by_limit, tracked):
        client.cancel(job_id)
