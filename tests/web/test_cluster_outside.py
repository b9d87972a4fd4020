"""The Cluster page marks a GPU in use outside corral with the process's user, pid and memory (issue 22, point 1)."""

from __future__ import annotations

import getpass

from tests.cli.slurm.test_outside_gpus import notebook, replaying  # noqa: F401 - the fixture, and the frames
from tests.helpers import wait_for
from tests.web.conftest import screenshot

ROOMY = ["--cpus", "16", "--mem", "64G", "--sample-interval", "0.3"]


def test_the_cluster_page_marks_a_gpu_in_use_outside_corral(server_factory, page, monkeypatch, tmp_path,
                                                            notebook):  # noqa: F811
    replaying(monkeypatch, tmp_path, notebook.pid)
    server = server_factory(gpus=1, extra=ROOMY)
    client = server.client()
    wait_for(lambda: client.nodes()[0]["gpus"][0]["outside"], timeout=30)

    page.goto(server.url + "/")
    card = page.locator("[data-testid=gpu-card][data-index='0']")
    card.wait_for()
    assert card.get_attribute("data-outside") == str(notebook.pid)
    mark = card.locator("[data-testid=gpu-outside]").inner_text()
    assert mark == f"in use outside corral by {getpass.getuser()} (pid {notebook.pid}, 2 GB)"
    assert "0 free · 1 in use outside corral" in page.locator(".total", has_text="GPUs").inner_text()
    screenshot(page, "cluster-outside")
