"""The Cluster page shows a GPU's health (issue 22, point 4): a GPU whose replayed NVML frames report XID 79 is
marked drained by corral with the fault, and its health line names the event; a thermal throttle on another GPU
is shown as recorded, the GPU left in service."""

from __future__ import annotations

import json

from tests.helpers import wait_for
from tests.web.conftest import screenshot

ROOMY = ["--cpus", "16", "--mem", "64G", "--sample-interval", "0.3"]


def _gpu(index: int, **health: object) -> dict:
    return {"index": index, "uuid": f"GPU-{index}", "utilization": {"gpu": 0, "memory": 0},
            "memory": {"total": 80 << 30, "used": 0, "free": 80 << 30}, "power_mw": 60000, "temperature_c": 35,
            "processes": [], **health}


def test_the_cluster_page_shows_a_failed_gpu_drained_and_a_throttled_one_in_service(server_factory, page,
                                                                                    monkeypatch, tmp_path):
    frames = [[_gpu(0), _gpu(1)],
              [_gpu(0, throttle_reasons=0x40), _gpu(1, xid_events=[{"xid": 79, "time_us": 1_795_000_000_000_000}])]]
    path = tmp_path / "frames.jsonl"
    path.write_text("".join(json.dumps(frame) + "\n" for frame in frames))
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(path))
    server = server_factory(gpus=2, extra=ROOMY)
    client = server.client()
    wait_for(lambda: client.nodes()[0]["gpus"][1]["drained"], timeout=30)

    page.goto(server.url + "/")
    failed = page.locator("[data-testid=gpu-card][data-index='1']")
    failed.wait_for()
    assert failed.get_attribute("data-drain") == "DRAINED"
    assert failed.locator("[data-testid=gpu-drain]").inner_text().startswith(
        "DRAINED: XID 79: GPU has fallen off the bus (corral, ")
    assert failed.locator("[data-testid=gpu-health]").inner_text().startswith(
        "last: XID 79: GPU has fallen off the bus (")
    throttled = page.locator("[data-testid=gpu-card][data-index='0']")
    assert "throttled: thermal (hardware)" in throttled.locator("[data-testid=gpu-health]").inner_text()
    assert throttled.get_attribute("data-drain") == ""
    assert "1 drained" in page.locator(".total", has_text="GPUs").inner_text()
    screenshot(page, "cluster-health")
