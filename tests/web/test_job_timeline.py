"""The job page's timeline says when a job was preempted, for which job, and when it was requeued
(issue 16, point 2), in the real browser against a live server."""

from __future__ import annotations

import os
import sys

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
