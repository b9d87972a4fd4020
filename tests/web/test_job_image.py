"""The job page shows the image a job ran in and what it mounted, in the real browser."""

from __future__ import annotations

import os

from tests.web.conftest import screenshot


def test_the_job_page_shows_a_container_jobs_image_and_mounts(server_factory, short_tmp, page, podman, busybox_image):
    data = os.path.join(short_tmp, "data")
    os.makedirs(data)
    server = server_factory(gpus=1)
    with server.client() as client:
        job = client.submit(["sh", "-c", "ls /data"], image=busybox_image, container_mounts=f"{data}:/data:ro",
                            workdir=short_tmp, gpus=1)
        assert client.wait(job["id"], timeout=60)["state"] == "COMPLETED"

    page.goto(server.url + f"/jobs/{job['id']}")
    page.get_by_text(busybox_image, exact=True).wait_for(timeout=15_000)
    page.get_by_text(f"{data}:/data:ro", exact=True).wait_for(timeout=5_000)
    screenshot(page, "job-image")
