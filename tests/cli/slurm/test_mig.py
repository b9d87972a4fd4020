"""MIG slices as GPUs (issue 22, point 3) on a live server that detects its GPUs from recorded NVML frames
($CORRAL_GPU_REPLAY): an A100 in MIG mode cut into one 3g.40gb and two 1g.10gb, beside a whole A100. Jobs ask for
slices by profile through sbatch and `corral submit`, run bound to `CUDA_VISIBLE_DEVICES=MIG-<uuid>`; the API,
`corral nodes`, `scontrol show node` and `sinfo` show each slice; its memory is sampled per slice."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli.test_drain_cli import corral, running
from tests.conftest import Server, _kill_leftover_supervisors
from tests.executor.test_mig import MIG_1G, MIG_3G, mig_frame
from tests.helpers import wait_for

UP = ["--cpus", "16", "--mem", "64G", "--sample-interval", "0.3"]



@pytest.fixture
def mig_server(short_tmp, monkeypatch):
    frames = os.path.join(short_tmp, "frames.jsonl")
    with open(frames, "w") as f:
        f.write(json.dumps(mig_frame()) + "\n")
    monkeypatch.setenv("CORRAL_GPU_REPLAY", frames)
    home = os.path.join(short_tmp, "mig")
    os.makedirs(home)
    server = Server(home=home, gpus=None, extra=UP).start()
    yield server
    server.stop()
    _kill_leftover_supervisors(home)  # jobs outlive servers by design; a test's must not outlive it


def test_slices_are_requested_by_profile_bound_by_uuid_and_shown_per_slice(mig_server, slurm_shell, short_tmp):
    server = mig_server
    client = server.client()
    node = client.nodes()[0]
    assert [(g["index"], g["type"], g["mem_mb"], g["uuid"], g["parent"]) for g in node["gpus"]] == [
        (1, "A100", 81920, "GPU-bbbb", None),
        (2, "3g.40gb", 40960, MIG_3G, 0), (3, "1g.10gb", 10240, MIG_1G[0], 0), (4, "1g.10gb", 10240, MIG_1G[1], 0),
    ]
    shell = slurm_shell(server.home)
    gres = "gpu:A100:1,gpu:3g.40gb:1,gpu:1g.10gb:2"
    show = shell(f"scontrol show node {node['name']}").stdout
    assert f"   Gres={gres}\n" in show, show
    assert shell("sinfo -h -o %G").stdout.strip() == gres

    out = os.path.join(short_tmp, "slice.out")
    submitted = shell(f"sbatch --parsable --gres=gpu:1g.10gb:1 -o {out} "
                      "--wrap 'echo $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS; srun sh -c \"echo step $CUDA_VISIBLE_DEVICES\"; "
                      "sleep 300'")
    assert submitted.returncode == 0, submitted.stderr
    on_slice = int(submitted.stdout.strip())
    assert running(client, on_slice)["gpu_ids"] == [3]
    assert wait_for(lambda: os.path.exists(out) and len(open(out).read().splitlines()) >= 2 and open(out).read(),
                    timeout=30).splitlines()[:2] == [f"{MIG_1G[0]} 3", f"step {MIG_1G[0]}"]

    refused = shell("sbatch -G 3g.40gb:2 --wrap true")
    assert refused.returncode != 0
    assert "requested 2 GPUs of 3g.40gb; the most any node has is 1" in refused.stderr, refused.stderr
    assert "3g.40gb (MIG slice, 40G" in refused.stderr and "1g.10gb (MIG slice, 10G" in refused.stderr

    whole = shell("sbatch --parsable --gpus=A100:1 --wrap 'sleep 300'")
    assert running(client, int(whole.stdout.strip()))["gpu_ids"] == [1]
    by_corral = corral(server, "submit", "-G", "3g.40gb:1", "--", "sleep", "300").output
    big = client.queue(states=["RUNNING", "PENDING"])[-1]
    assert f"{big['id']}" in by_corral
    assert running(client, big["id"])["gpu_ids"] == [2]

    rows = corral(server, "nodes").output
    row = next(line for line in rows.splitlines() if line.split()[1:2] == ["3"])
    assert "1g.10gb (MIG slice of GPU 0)" in row and f"{on_slice} (" in row
    # the slice's memory, sampled on its own MIG device: the job's GPU memory
    sample = wait_for(lambda: next((r["sample"] for r in client.top() if r["id"] == on_slice and r["sample"]), None),
                      timeout=30)
    assert sample["gpu_memory_mb"] == 1024, sample
    for job in (on_slice, int(whole.stdout.strip()), big["id"]):
        client.cancel(job)

    # an XID names the GPU by NVML's index: draining GPU 0 drains each of its slices
    assert corral(server, "drain", "0", "--reason", "XID 79").output.strip() == f"GPU 0 of node {node['name']} drained: XID 79"
    assert [(g["index"], (g["drained"] or {}).get("reason")) for g in client.nodes()[0]["gpus"]] == [
        (1, None), (2, "XID 79"), (3, "XID 79"), (4, "XID 79")]
