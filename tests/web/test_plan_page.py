"""The dashboard's Plan page in a real browser: each GPU's timeline, and a what-if forecast drawn in."""

from __future__ import annotations

import sys

from tests.helpers import wait_for
from tests.web.conftest import screenshot

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_the_plan_draws_running_jobs_reservations_and_the_what_if(server_factory, page):
    server = server_factory(gpus=4)
    client = server.client()
    running = client.submit(SLEEP, gpus=2, time="1h", name="train")["id"]
    wait_for(lambda: client.get(running)["state"] == "RUNNING")
    waiting = client.submit(SLEEP, gpus=4, time="1h", name="sweep")["id"]  # reserved from the first job's end
    wait_for(lambda: client.get(waiting).get("estimated_start"))

    page.goto(server.url + "/plan")
    page.locator("[data-testid=plan-gpu]").first.wait_for()
    assert page.locator("[data-testid=plan-gpu]").count() == 4
    assert page.locator(f"[data-testid=plan-bar][data-kind=running][data-job-id='{running}']").count() == 2
    assert page.locator(f"[data-testid=plan-bar][data-kind=reserved][data-job-id='{waiting}']").count() == 4

    page.fill("[data-testid=plan-gpus]", "2")
    page.fill("[data-testid=plan-time]", "30m")
    page.click("[data-testid=plan-submit]")
    page.locator("[data-testid=plan-forecast] .plan-when").wait_for()
    assert "Would start now" in page.locator("[data-testid=plan-forecast]").inner_text()
    whatif = page.locator("[data-testid=plan-bar][data-kind=whatif]")
    assert whatif.count() == 2
    assert {whatif.nth(i).evaluate("el => el.closest('[data-testid=plan-gpu]').dataset.index") for i in range(2)} == {"2", "3"}

    page.fill("[data-testid=plan-time]", "2h")
    page.click("[data-testid=plan-submit]")
    page.wait_for_function("!document.querySelector('[data-testid=plan-forecast]').innerText.includes('Would start now')")
    blockers = page.locator("[data-testid=plan-blocker]")
    assert {blockers.nth(i).get_attribute("data-job-id") for i in range(blockers.count())} == {str(running), str(waiting)}
    assert page.locator("[data-testid=plan-alternative][data-change=time]").count() == 1
    screenshot(page, "plan")
    assert client.queue(states=["PENDING"])[0]["id"] == waiting and len(client.queue()) == 2  # nothing submitted


def test_the_what_if_says_cpus_decide_its_start_and_who_holds_them(server_factory, page):
    """Its GPUs are free at +60 min; the job holding the CPUs it needs keeps them until +65: the page says CPUs."""
    server = server_factory(gpus=4, extra=["--cpus", "2"])
    client = server.client()
    gpus = client.submit(SLEEP, gpus=4, cpus=1, time="60", name="gpus")["id"]
    cpus = client.submit(SLEEP, cpus=1, time="65", name="cpus")["id"]
    wait_for(lambda: {client.get(gpus)["state"], client.get(cpus)["state"]} == {"RUNNING"})

    page.goto(server.url + "/plan")
    page.locator("[data-testid=plan-gpu]").first.wait_for()
    page.fill("[data-testid=plan-gpus]", "1")
    page.fill("[data-testid=plan-cpus]", "2")
    page.fill("[data-testid=plan-time]", "10m")
    page.click("[data-testid=plan-submit]")
    waits = page.locator("[data-testid=plan-waits-for]")
    waits.wait_for()
    assert waits.get_attribute("data-waits-for") == "cpus" and waits.inner_text().startswith("Waits for CPUs on ")
    answer = page.locator("[data-testid=plan-forecast]").inner_text()
    assert f"the CPUs it needs are held by running job {cpus}" in answer
    last = page.locator("[data-testid=plan-blocker]").last
    assert last.get_attribute("data-job-id") == str(cpus) and ", 1 CPU, until " in last.inner_text()
    assert page.locator("[data-testid=plan-bar][data-kind=whatif]").count() == 1  # drawn as "your job", no id
