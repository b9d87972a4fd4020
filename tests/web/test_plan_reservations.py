"""The Plan page in a real browser draws each reservation as a band over its GPUs and its window, named, with who
may use it; a job in the reservation runs on those GPUs, a job outside beside them."""

from __future__ import annotations

import sys

from tests.helpers import wait_for
from tests.web.conftest import screenshot

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_the_plan_draws_a_reservation_over_its_gpus_with_its_name_and_users(server_factory, page):
    server = server_factory(gpus=4)
    client = server.client()
    client.create_reservation(name="demo", gpu_ids=[1, 2], users=["root"], accounts=None, start="now+30minutes",
                              duration="2h")
    outside = client.submit(SLEEP, gpus=1, time="1h", name="beside")["id"]
    wait_for(lambda: client.get(outside)["state"] == "RUNNING")

    page.goto(server.url + "/plan")
    page.locator("[data-testid=plan-gpu]").first.wait_for()
    bands = page.locator("[data-testid=plan-reservation][data-name=demo]")
    bands.first.wait_for()
    assert bands.count() == 2
    rows = {bands.nth(i).evaluate("el => el.closest('[data-testid=plan-gpu]').dataset.index") for i in range(2)}
    assert rows == {"1", "2"}
    assert bands.first.inner_text() == "demo · root"
    title = bands.first.get_attribute("title")
    assert title.startswith("reservation demo for root: ")
    left = float(bands.first.evaluate("el => parseFloat(el.style.left)"))
    assert 5 < left < 50  # it begins in half an hour, on a timeline of two and a half hours or more
    running = page.locator(f"[data-testid=plan-bar][data-kind=running][data-job-id='{outside}']")
    assert running.count() == 1  # a one-hour job on GPU 0 (the reserved GPUs begin before it would end)
    assert running.first.evaluate("el => el.closest('[data-testid=plan-gpu]').dataset.index") in ("0", "3")
    screenshot(page, "plan-reservation")
    client.cancel(outside)
