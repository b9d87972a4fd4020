"""The Cluster page shows a shared GPU (issue 22, point 2) with its jobs, each one's budget and what it uses of
it (NVML's per-process figure, from replayed frames naming the job's real process), and the memory left."""

from __future__ import annotations

import json
import os

from tests.helpers import wait_for
from tests.web.conftest import screenshot

GIB = 1 << 30


def test_the_cluster_page_shows_a_shared_gpu_with_its_jobs_and_their_budgets(server_factory, page, monkeypatch,
                                                                             tmp_path, short_tmp):
    frames = tmp_path / "frames.jsonl"

    def replay(processes: list[dict]) -> None:
        frame = [{"index": i, "uuid": f"GPU-{i}", "utilization": {"gpu": 20, "memory": 5},
                  "memory": {"total": 80 * GIB, "used": 6 * GIB, "free": 74 * GIB}, "power_mw": 100000,
                  "temperature_c": 40, "processes": processes if i == 0 else []} for i in range(2)]
        frames.write_text(json.dumps(frame) + "\n")
        stamp = os.stat(frames).st_mtime_ns + 1_000_000
        os.utime(frames, ns=(stamp, stamp))

    replay([])
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(frames))
    home = os.path.join(short_tmp, "sharing")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[node]\nshards_per_gpu = 4\n")
    server = server_factory(gpus=2, extra=["--cpus", "16", "--mem", "64G", "--sample-interval", "0.3"], home=home)
    client = server.client()
    pid_file = tmp_path / "pid"
    train = client.submit(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"], name="train", gpu_mem="30G",
                          gpu_share=True)["id"]
    shard = client.submit(["sleep", "300"], name="eval", gres="shard:1")["id"]
    wait_for(lambda: all(client.get(j)["state"] == "RUNNING" for j in (train, shard)))
    pid = int(wait_for(lambda: pid_file.read_text().strip() if pid_file.exists() else ""))
    replay([{"pid": pid, "usedGpuMemory": 6 * GIB}])

    page.goto(server.url + "/")
    card = page.locator("[data-testid=gpu-card][data-index='0']")
    card.wait_for()
    assert card.get_attribute("data-shared") == f"{train},{shard}"
    assert "shared by 2 jobs" in card.inner_text()
    rows = card.locator("[data-testid=shared-job]")
    assert rows.count() == 2
    wait_for(lambda: "6 GB / 30 GB" in rows.nth(0).inner_text(), timeout=20)  # the page follows the samples
    assert "train" in rows.nth(0).inner_text()
    assert "eval (root) · shard:1" in rows.nth(1).inner_text() and "— / 20 GB" in rows.nth(1).inner_text()
    assert card.locator("[data-testid=shared-budget]").inner_text() == "50 GB budgeted · 30 GB free"
    other = page.locator("[data-testid=gpu-card][data-index='1']")
    assert other.get_attribute("data-shared") == "" and "free" in other.inner_text()
    screenshot(page, "cluster-shared")
    for job in (train, shard):
        client.cancel(job)
