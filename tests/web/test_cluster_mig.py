"""The Cluster page shows a GPU in MIG mode as a card holding its slices (issue 22, point 3), each with its
profile, its holder and its own memory, beside the whole GPUs."""

from __future__ import annotations

import sys

from tests.cli.slurm.test_mig import mig_server  # noqa: F401 - the fixture: a live server replaying a MIG A100
from tests.helpers import wait_for
from tests.web.conftest import screenshot

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_the_cluster_page_shows_slices_under_their_gpu(mig_server, page):  # noqa: F811
    client = mig_server.client()
    job = client.submit(SLEEP, gpus=1, gpu_type="1g.10gb", name="finetune")["id"]
    wait_for(lambda: client.get(job)["state"] == "RUNNING")

    page.goto(mig_server.url + "/")
    parent = page.locator("[data-testid=mig-gpu][data-index='0']")
    parent.wait_for()
    assert "GPU 0 A100-SXM4-80GB · MIG, 3 slices" in " ".join(parent.locator(".gpu-head").first.inner_text().split())
    slices = parent.locator("[data-testid=gpu-card]")
    assert [slices.nth(i).get_attribute("data-index") for i in range(slices.count())] == ["2", "3", "4"]
    held = parent.locator(f"[data-testid=gpu-card][data-job-id='{job}']")
    assert held.get_attribute("data-index") == "3"
    text = held.inner_text()
    assert "1g.10gb" in text and "finetune" in text
    # its own MIG device's memory (1 GB used of 10), sampled; NVML tells no utilization per slice
    wait_for(lambda: "1 GB / 10 GB" in held.inner_text(), timeout=15)
    assert "Util\nUtilization:\n—" in held.inner_text()
    wait_for(lambda: "38 °C · 90 W" in parent.locator(".gpu-head").first.inner_text(), timeout=15)  # the GPU's own
    whole = page.locator("[data-testid=gpu-card][data-index='1']")
    assert "A100" in whole.inner_text() and whole.locator("xpath=ancestor::*[@data-testid='mig-gpu']").count() == 0
    assert "3 / 4" not in page.locator(".total", has_text="GPUs").inner_text()
    assert "1 / 4" in page.locator(".total", has_text="GPUs").inner_text()  # four GPUs to schedule: 1 whole, 3 slices
    screenshot(page, "cluster-mig")
    assert page.errors == []
    client.cancel(job)
