"""The Cluster page marks a drained GPU and a drained node with their reason (issue 22, point 4), live."""

from __future__ import annotations

import sys

from tests.helpers import wait_for
from tests.web.conftest import screenshot

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]

ROOMY = ["--cpus", "16", "--mem", "64G"]  # a CPU for each job: the machine may have two


def test_the_cluster_page_marks_drained_gpus_and_a_drained_node_with_their_reason(server_factory, page):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    job = client.submit(SLEEP, gpus=1, name="train")["id"]
    wait_for(lambda: client.get(job)["state"] == "RUNNING")
    client.drain(node, "XID 79", [2])

    page.goto(server.url + "/")
    card = page.locator("[data-testid=gpu-card][data-index='2']")
    card.wait_for()
    assert card.get_attribute("data-drain") == "DRAINED"
    assert "DRAINED: XID 79 (root," in card.locator("[data-testid=gpu-drain]").inner_text()
    assert page.locator("[data-testid=gpu-drain]").count() == 1
    assert page.locator("[data-testid=node-drain]").count() == 0
    assert "2 free · 1 drained" in page.locator(".total", has_text="GPUs").inner_text()

    client.drain(node, "fan failure")  # the whole node, while job runs on GPU 0: the page follows by itself
    badge = page.locator("[data-testid=node-drain]")
    badge.wait_for()
    assert badge.inner_text() == "DRAINING: fan failure"
    held = page.locator(f"[data-testid=gpu-card][data-job-id='{job}']")
    assert held.get_attribute("data-drain") == "DRAINING" and "train" in held.inner_text()
    screenshot(page, "cluster-drained")
    client.cancel(job)
