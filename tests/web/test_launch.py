"""Launching from the dashboard, in the real browser against a live server: the New job form (the API's
refusals beside the field they name), "Run again" and "Run again with changes" on the job and run pages,
and the sweep page (its table sorted, its parallel-coordinates chart, the best configuration named)."""

from __future__ import annotations

import os
import sys

import pytest

from corral.errors import NotFound
from tests.api.test_relaunch_api import SWEEP_TASK, owners_hostname_job
from tests.web.conftest import screenshot


def test_a_new_job_from_the_form_with_its_mistake_shown_beside_the_field(server_factory, short_tmp, page):
    server = server_factory(gpus=1)
    page.goto(server.url + "/new")
    form = page.locator("[data-testid=new-job-form]")
    form.wait_for(timeout=15_000)
    page.fill("[data-testid=field-command]", "sh -c 'echo from the form'")
    page.fill("[data-testid=field-workdir]", short_tmp)
    page.fill("[data-testid=field-mem]", "lots")
    page.click("[data-testid=new-job-submit]")
    error = page.locator("[data-testid=field-error-mem]")
    error.wait_for(timeout=10_000)
    assert "mem" in error.inner_text()
    assert page.locator("[data-testid=field-mem]").get_attribute("aria-invalid") == "true"
    screenshot(page, "new-job-error")
    page.fill("[data-testid=field-mem]", "100M")
    page.fill("[data-testid=field-time]", "10")
    page.click("[data-testid=new-job-submit]")
    page.wait_for_url("**/jobs/*", timeout=10_000)
    job_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    with server.client() as client:
        job = client.wait(job_id, timeout=60)
        assert (job["state"], job["command"], job["time_limit_s"]) == ("COMPLETED", ["sh", "-c", "echo from the form"], 600)

    # Run again: the same job at once, linked to this one
    page.locator("[data-testid=job-state][data-state=COMPLETED]").wait_for(timeout=15_000)
    page.click("[data-testid=rerun]")
    page.wait_for_url(lambda url: not url.endswith(f"/jobs/{job_id}"), timeout=10_000)
    parent = page.locator("[data-testid=job-parent]")
    parent.wait_for(timeout=10_000)
    assert parent.get_attribute("href") == f"/jobs/{job_id}"

    # Run again with changes: prefilled, only the change sent
    page.goto(server.url + f"/jobs/{job_id}")
    page.click("[data-testid=rerun-changes]")
    page.wait_for_url(f"**/new?from={job_id}")
    command = page.locator("[data-testid=field-command]")
    page.wait_for_function("document.querySelector('[data-testid=field-command]').value !== ''")
    assert command.input_value() == "sh -c 'echo from the form'"
    assert page.locator("[data-testid=field-workdir]").input_value() == short_tmp
    page.fill("[data-testid=field-time]", "20")
    page.fill("[data-testid=field-gpus]", "many")
    page.click("[data-testid=new-job-submit]")
    page.locator("[data-testid=field-error-gpus]").wait_for(timeout=10_000)
    page.fill("[data-testid=field-gpus]", "1")
    page.click("[data-testid=new-job-submit]")
    page.wait_for_url(lambda url: "/new" not in url, timeout=10_000)
    changed_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    with server.client() as client:
        changed = client.get(changed_id)
    assert (changed["parent"], changed["time_limit_s"], changed["gpus"]) == (job_id, 1200, 1)
    assert changed["command"] == ["sh", "-c", "echo from the form"]


def test_run_again_on_another_users_job_names_its_owner_asks_and_runs_it_as_them(server_factory, os_users,
                                                                                   shared_dir, page):
    alice = os_users[0]
    server = server_factory(gpus=1, home=os.path.join(shared_dir, "home"))
    first = owners_hostname_job(server, shared_dir, alice)
    with server.client() as client:
        page.goto(server.url + f"/jobs/{first.job_id}")  # this browser is root's, on the server's machine: an admin
        again = page.locator(f"[data-testid=rerun][data-owner={alice}]")
        again.wait_for(timeout=15_000)
        assert again.inner_text() == f"Run again as {alice}…"
        again.click()
        confirm = page.locator("[data-testid=rerun-confirm]")
        confirm.wait_for(timeout=10_000)
        assert page.locator("[data-testid=rerun-owner]").inner_text() == alice
        assert f"runs again as {alice}" in confirm.inner_text() and "not as you (root)" in confirm.inner_text()
        screenshot(page, "rerun-confirm-owner")
        with pytest.raises(NotFound):
            client.get(first.job_id + 1)  # asked, not sent
        page.click("[data-testid=rerun-confirm-no]")
        again.click()
        page.click("[data-testid=rerun-confirm-yes]")
        page.wait_for_url(server.url + f"/jobs/{first.job_id + 1}", timeout=10_000)
        asked = page.locator("[data-testid=timeline] [data-event=run_again]")
        asked.wait_for(timeout=10_000)
        assert "by root" in asked.inner_text() and asked.locator("a").get_attribute("href") == f"/jobs/{first.job_id}"
        job = client.wait(first.job_id + 1, timeout=60)
        assert (job["state"], job["user"], job["parent"]) == ("COMPLETED", alice, first.job_id)
        assert first.ran_as() == [first.uid] * 2  # the owner's fake hostname ran as the owner, never as uid 0

        # Run again with changes: the form says whose job it is, and sends nothing until the box is ticked
        page.goto(server.url + f"/new?from={first.job_id}")
        box = page.locator("[data-testid=field-confirm-owner]")
        box.wait_for(timeout=15_000)
        submit = page.locator("[data-testid=new-job-submit]")
        assert submit.inner_text() == f"Run again as {alice}"
        page.fill("[data-testid=field-time]", "7")
        submit.click()
        error = page.locator("[data-testid=field-error-confirm-owner]")
        error.wait_for(timeout=10_000)
        assert alice in error.inner_text()
        with pytest.raises(NotFound):
            client.get(first.job_id + 2)
        box.check()
        submit.click()
        page.wait_for_url(server.url + f"/jobs/{first.job_id + 2}", timeout=10_000)
        job = client.wait(first.job_id + 2, timeout=60)
        assert (job["state"], job["user"], job["time_limit_s"]) == ("COMPLETED", alice, 420)
        assert first.ran_as() == [first.uid] * 3


def test_the_sweep_page_ranks_tasks_draws_them_and_names_the_best(server_factory, short_tmp, page):
    server = server_factory(gpus=2)
    with server.client() as client:
        answer = client.sweep([sys.executable, "-c", SWEEP_TASK, "{lr}", "{bs}"], {"lr": "0.1,0.3", "bs": "32,64"},
                              concurrency=2, workdir=short_tmp)
        client.wait(answer["id"], timeout=120)
        runs = {t["run"]["uid"]: t["task"] for t in client.get_sweep(answer["id"])["tasks"]}
    page.goto(server.url + f"/sweeps/{answer['id']}")
    rows = page.locator("[data-testid=sweep-row]")
    rows.first.wait_for(timeout=15_000)
    assert rows.count() == 4
    assert page.locator("[data-testid=sweep-parallel]").get_attribute("data-lines") == "4"
    assert page.locator("[data-testid=sweep-parallel] polyline").count() == 4
    best = page.locator("[data-testid=sweep-best]").inner_text()
    assert "lr=0.1" in best and "loss 0.1" in best
    page.click("[data-testid=sweep-sort-best]")
    page.click("[data-testid=sweep-sort-best]")  # descending: the worst first
    assert rows.first.locator("td").nth(1).inner_text() == "0.3"
    screenshot(page, "sweep")

    # a task's run page offers a rerun of its task, and the rerun's run names the run it came from
    run_uid = sorted(runs)[0]
    page.goto(server.url + f"/runs/{run_uid}")
    page.locator("[data-testid=rerun]").wait_for(timeout=15_000)
    page.click("[data-testid=rerun]")
    page.wait_for_url("**/jobs/*", timeout=10_000)
    new_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.locator("[data-testid=job-parent]").wait_for(timeout=10_000)
    with server.client() as client:
        assert client.wait(new_id, timeout=60)["state"] == "COMPLETED"
        task = client.get(f"{new_id}_{runs[run_uid]}")  # the task run again alone, as itself
        new_run = client.runs(job=task["id"])[0]
    page.goto(server.url + f"/runs/{new_run['uid']}")
    parent = page.locator("[data-testid=run-parent]")
    parent.wait_for(timeout=15_000)
    assert parent.get_attribute("href") == f"/runs/{run_uid}"
