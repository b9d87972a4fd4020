"""GPU topology (issue 22, point 6) on a live server whose GPUs are recorded NVML frames ($CORRAL_GPU_REPLAY) of
an 8-GPU machine with two NVLink groups (0-3, 4-7): a 4-GPU job lands inside one group even when lower-indexed
GPUs of the other are free, single-GPU jobs pack, `sbatch --constraint=nvlink` waits for a whole group (and is
refused when no group could ever hold it); the links show in the API, `corral nodes` and `scontrol show node`.
A server with declared GPUs takes its NVLink groups from config.toml."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.cli.test_drain_cli import corral, running, waiting
from tests.conftest import Server
from tests.executor.test_gpu_topology import write_hgx_replay
from tests.helpers import wait_for

ROOMY = ["--cpus", "16", "--mem", "64G", "--sample-interval", "0.5"]
SLEEP = ["sleep", "300"]



@pytest.fixture
def hgx(short_tmp, tmp_path, monkeypatch) -> Iterator[Server]:
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(write_hgx_replay(tmp_path / "frames.jsonl")))
    server = Server(home=os.path.join(short_tmp, "hgx"), gpus=None, extra=ROOMY).start()
    yield server
    server.stop()


def test_multi_gpu_jobs_get_one_nvlink_group_and_single_gpu_jobs_pack(hgx):
    client = hgx.client()
    node = client.nodes()[0]
    assert [g["nvlink"] for g in node["gpus"]] == [[0, 1, 2, 3]] * 4 + [[4, 5, 6, 7]] * 4
    assert node["features"] == ["h100", "nvlink"]  # its GPU type is a feature too, undeclared
    assert node["links"][0] == ["X", "NV", "NV", "NV", "SYS", "SYS", "SYS", "SYS"]

    first = client.submit(SLEEP, gpus=1, name="one")
    assert running(client, first["id"])["gpu_ids"] == [0]
    # GPUs 1-3 are the lowest free, but only 4-7 are four linked to each other
    four = client.submit(SLEEP, gpus=4, name="four")
    assert running(client, four["id"])["gpu_ids"] == [4, 5, 6, 7]
    # the next single-GPU jobs fill the group in use, GPU 0's PCIe switch partner first
    singles = [client.submit(SLEEP, gpus=1, name=f"s{i}") for i in range(3)]
    assert [running(client, job["id"])["gpu_ids"] for job in singles] == [[1], [2], [3]]
    for job in (first, four, *singles):
        client.cancel(job["id"])


def test_sbatch_constraint_nvlink_waits_for_a_whole_group(hgx, slurm_shell, tmp_path):
    client = hgx.client()
    name = client.nodes()[0]["name"]
    holders = [client.submit(SLEEP, gpus=1, name=f"h{i}") for i in range(5)]  # packed: 0-3, then 4
    assert sorted(running(client, job["id"])["gpu_ids"][0] for job in holders) == [0, 1, 2, 3, 4]
    for job in holders[1:4]:
        client.cancel(job["id"])  # busy now: GPU 0 and GPU 4; six free, no four of one group
    loose = client.submit(SLEEP, gpus=4, name="loose")  # without the constraint, four GPUs across the groups
    assert running(client, loose["id"])["gpu_ids"] == [1, 2, 3, 5]
    shell = slurm_shell(hgx.home)
    submitted = shell("sbatch --parsable -G 4 --constraint=nvlink --wrap 'sleep 300'", cwd=str(tmp_path))
    assert submitted.returncode == 0, submitted.stderr
    linked = int(submitted.stdout.strip())
    assert waiting(client, linked)["reason"] == "Resources"
    client.cancel(loose["id"])  # six GPUs free, but no four of one group: it still waits
    wait_for(lambda: sum(g["job_id"] is None for g in client.nodes()[0]["gpus"]) == 6)
    time.sleep(1)  # a few scheduling passes
    assert client.get(linked)["state"] == "PENDING"
    client.cancel(holders[4]["id"])  # group 4-7 free again
    assert running(client, linked)["gpu_ids"] == [4, 5, 6, 7]
    assert "Features=nvlink" in shell(f"scontrol show job {linked}").stdout

    refused = shell("sbatch -G 5 --constraint=nvlink --wrap 'sleep 1'", cwd=str(tmp_path))
    assert refused.returncode != 0
    assert "constraint" in refused.stderr and "NVLink groups 0-3, 4-7" in refused.stderr, refused.stderr

    show = shell(f"scontrol show node {name}").stdout
    assert "   AvailableFeatures=h100,nvlink\n" in show and "   ActiveFeatures=h100,nvlink\n" in show, show
    assert shell("sinfo -h -o '%f'").stdout.strip() == "h100,nvlink"
    table = corral(hgx, "nodes").output
    assert f"{name}: features: h100, nvlink; NVLink groups 0-3, 4-7" in table
    assert "GPU0  X     NV    NV    NV    SYS" in table, table
    for job in (holders[0], {"id": linked}):
        client.cancel(job["id"])


def test_declared_gpus_take_their_nvlink_groups_and_gpu_features_from_config(server_factory, short_tmp, slurm_shell,
                                                                             tmp_path):
    home = os.path.join(short_tmp, "declared")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('[node]\nnvlink = ["0-3", "4-7"]\ngpu_features = {fast = "6-7"}\nfeatures = ["ib"]\n')
    server = server_factory(gpus=8, extra=ROOMY, home=home)
    client = server.client()
    node = client.nodes()[0]
    assert node["features"] == ["a100", "fast", "ib", "nvlink"] and node["gpu_features"] == {"fast": "6-7"}
    assert node["gpus"][6]["features"] == ["nvlink", "fast"] and node["gpus"][6]["nvlink"] == [4, 5, 6, 7]
    assert node["links"][0][4] == "SYS"
    fast = client.submit(SLEEP, gpus=2, constraint="fast&ib", name="fast")
    assert running(client, fast["id"])["gpu_ids"] == [6, 7]
    client.cancel(fast["id"])
    refused = slurm_shell(home)("sbatch -G 3 --constraint=fast --wrap 'sleep 1'", cwd=str(tmp_path))
    assert refused.returncode != 0 and "GPU feature fast: 6-7" in refused.stderr, refused.stderr
    cli = corral(server, "submit", "-G", "5", "-C", "nvlink", "--wrap", "sleep 1", code=1).output
    assert "constraint: requested 5 GPUs with --constraint=nvlink; at most 4 on any node meet it together" in cli, cli
