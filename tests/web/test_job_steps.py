"""The job page lists the steps srun ran in the job, as sacct does (12.0, 12.1), in the real browser."""

from __future__ import annotations

from tests.web.conftest import screenshot


def test_the_job_page_lists_each_srun_step_with_its_state_and_exit_code(server_factory, short_tmp, page):
    server = server_factory(gpus=0)
    with server.client() as client:
        job = client.submit(script="#!/bin/bash\n#SBATCH -n 2\nsrun -l hostname\nsrun -n 1 bash -c 'exit 3'\ntrue\n",
                            workdir=short_tmp)
        assert client.wait(job["id"], timeout=60)["state"] == "COMPLETED"

    page.goto(server.url + f"/jobs/{job['id']}")
    rows = page.locator("[data-testid=steps] [data-testid=step-row]")
    rows.nth(1).wait_for(timeout=15_000)
    cells = [[rows.nth(i).locator("td").nth(c).inner_text() for c in (0, 1, 2, 4)] for i in range(rows.count())]
    assert cells == [[f"{job['id']}.0", "hostname", "2", "0:0"], [f"{job['id']}.1", "bash", "1", "3:0"]], cells
    assert [rows.nth(i).get_attribute("data-state") for i in range(2)] == ["COMPLETED", "FAILED"]
    screenshot(page, "job-steps")
