"""Sharing a GPU (issue 22, point 2) on a live server: jobs asking for shards (`sbatch --gres=shard:N`, with
`[node] shards_per_gpu`) or a memory budget (`corral submit --gpu-mem 20G --gpu-share`) run together on one GPU
within its memory, a whole-GPU job never lands on it, Slurm's commands show the shards as Slurm does, a sharing
job over its budget (NVML's per-process figure, here replayed frames naming its real process) is warned, then
stopped with the reason, and with `[node] outside_processes = "share"` a sharing job runs beside a process outside
corral within what it leaves free."""

from __future__ import annotations

import getpass
import json
import os

from tests.cli.slurm.test_outside_gpus import notebook  # noqa: F401 - a fixture: a process outside corral
from tests.cli.test_drain_cli import corral, running, waiting
from tests.helpers import wait_for

ROOMY = ["--cpus", "16", "--mem", "64G", "--sample-interval", "0.3"]
GIB = 1 << 30
MB = 1 << 20


def home_with(short_tmp: str, name: str, config: str) -> str:
    home = os.path.join(short_tmp, name)
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(config)
    return home


def frames(path, processes: list[dict]) -> None:
    """One 80 GiB GPU on which NVML lists `processes`; the server reads the file again when it changes."""
    frame = [{"index": 0, "uuid": "GPU-0", "utilization": {"gpu": 35, "memory": 5},
              "memory": {"total": 80 * GIB, "used": 3 * GIB, "free": 77 * GIB}, "power_mw": 120000,
              "temperature_c": 40, "processes": processes}]
    path.write_text(json.dumps(frame) + "\n")
    stamp = os.stat(path).st_mtime_ns + 1_000_000  # a new stamp, even within the file system's granularity
    os.utime(path, ns=(stamp, stamp))


def gpu(client, index: int) -> dict:
    return client.nodes()[0]["gpus"][index]


def test_shard_jobs_share_one_gpu_a_whole_gpu_job_takes_another_and_slurm_shows_the_shards(
        server_factory, short_tmp, slurm_shell, db_url, tmp_path):
    home = home_with(short_tmp, "shards", "[node]\nshards_per_gpu = 4\n")
    server = server_factory(db=db_url, gpus=2, extra=ROOMY, home=home)
    client = server.client()
    shell = slurm_shell(server.home)
    out = tmp_path / "env.%j"

    def sbatch(*options: str) -> int:
        done = shell(f"sbatch --parsable -o {out} {' '.join(options)} "
                     "--wrap 'echo $CUDA_VISIBLE_DEVICES ${SLURM_SHARDS_ON_NODE:-none} ${CORRAL_GPU_MEM_MB:-none}; "
                     "srun --gres=shard:1 printenv CUDA_VISIBLE_DEVICES; sleep 300'")
        assert done.returncode == 0, done.stderr
        return int(done.stdout.strip())

    first, second = sbatch("--gres=shard:2"), sbatch("--gres=shard:2")
    assert running(client, first)["gpu_ids"] == [0] and running(client, second)["gpu_ids"] == [0]
    whole = sbatch("--gres=gpu:1")
    assert running(client, whole)["gpu_ids"] == [1]  # never GPU 0, which the shard jobs share
    third = sbatch("--gres=shard:1")  # GPU 0's four shards are taken, GPU 1 is whole: it waits
    assert waiting(client, third)["reason"] == "Resources"

    shared = gpu(client, 0)["shared"]
    assert [(j["job_id"], j["shards"], j["budget_mb"]) for j in shared["jobs"]] == [(first, 2, 40960), (second, 2, 40960)]
    assert (shared["budgeted_mb"], shared["free_mb"]) == (81920, 0)
    assert gpu(client, 1)["shared"] is None and gpu(client, 1)["job_id"] == whole
    # its GPU and shards as Slurm sets them, its budget in MB; a step asking for shards shares the job's GPU
    log = tmp_path / f"env.{first}"
    assert wait_for(lambda: log.exists() and log.read_text().count("\n") == 2 and log.read_text()) == "0 2 40960\n0\n"

    job = shell(f"scontrol show job {first}").stdout
    assert "gres/shard=2\n" in job.split("TRES=")[1].split()[0] + "\n", job
    assert "   TresPerNode=gres:shard:2\n" in job
    assert shell(f"squeue -h -j {first} -O tres-per-node:30").stdout.strip() == "gres:shard:2"
    assert shell(f"squeue -h -j {whole} -O tres-per-node:30").stdout.strip() == "gres:gpu:1"
    assert shell(f"squeue -h -j {first} -O tres-alloc:80").stdout.strip().endswith(",billing=1,gres/shard=2")
    assert "gres/shard=2," in shell(f"sacct -n -P -j {first} -X -o AllocTRES").stdout
    node = shell("scontrol show node").stdout
    assert "   Gres=gpu:A100:2,shard:8\n" in node, node
    assert shell("sinfo -h -o %G").stdout.strip() == "gpu:A100:2,shard:8"
    assert "shared: " in corral(server, "nodes").output

    # the shares are the jobs': a restarted server rebuilds them, and still keeps GPU 0 from whole-GPU jobs
    server.stop()
    server.start()
    client = server.client()
    assert gpu(client, 0)["shared"]["budgeted_mb"] == 81920
    client.cancel(whole)
    assert running(client, third)["gpu_ids"] == [1]  # the next sharing job takes the freed GPU
    for job_id in (first, second, third):
        client.cancel(job_id)


def test_a_gpu_share_command_finds_its_budget_in_corral_gpu_mem_mb_as_a_shard_script_does(server_factory, short_tmp):
    home = home_with(short_tmp, "budget-env", "[node]\nshards_per_gpu = 4\n")
    server = server_factory(gpus=1, extra=ROOMY, home=home)
    client = server.client()
    show = ["sh", "-c", "echo ${CORRAL_GPU_MEM_MB:-none} $CUDA_VISIBLE_DEVICES"]
    command = client.submit(show, gpu_mem="20G", gpu_share=True)
    script = client.submit(None, script="#!/bin/sh\necho ${CORRAL_GPU_MEM_MB:-none} $CUDA_VISIBLE_DEVICES\n", gres="shard:1")
    for job, budget in ((command, 20480), (script, 20480)):
        ended = client.wait(job["id"], timeout=60)
        assert ended["state"] == "COMPLETED", client.logs(job["id"], stream="stderr")
        assert client.logs(job["id"])[0].decode().split() == [str(budget), "0"]


def test_bad_share_requests_name_the_field_and_the_fix(server_factory, short_tmp, slurm_shell):
    server = server_factory(gpus=1, extra=ROOMY)
    client = server.client()
    no_shards = slurm_shell(server.home)("sbatch --gres=shard:2 --wrap true")
    assert no_shards.returncode != 0
    assert "shard:2: this server shares no GPU by shards" in no_shards.stderr and "shards_per_gpu" in no_shards.stderr
    refused = corral(server, "submit", "--gpu-share", "--", "true", code=1).output
    assert "gpu_share" in refused and "--gpu-mem" in refused
    two = corral(server, "submit", "--gpus", "2", "--gpu-mem", "10G", "--gpu-share", "--", "true", code=1).output
    assert "part of one GPU" in two
    home = home_with(short_tmp, "four", "[node]\nshards_per_gpu = 4\n")
    other = server_factory(gpus=1, extra=ROOMY, home=home)
    too_many = slurm_shell(other.home)("sbatch --gres=shard:5 --wrap true")
    assert "shard:5 is more than one GPU has (4 shards each)" in too_many.stderr
    assert client.nodes()[0]["shards_per_gpu"] == 0


def budgeted_job(server_factory, short_tmp, monkeypatch, tmp_path, config: str, budget: str):
    """A server replaying one GPU, configured by `config`, running a `--gpu-share` job of `budget`: the server, the
    job's id, its process's pid (for the frames to name) and the frames file."""
    replay = tmp_path / "frames.jsonl"
    frames(replay, [])
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(replay))
    server = server_factory(gpus=1, extra=ROOMY, home=home_with(short_tmp, "budget", config))
    pid_file = tmp_path / "pid"
    submitted = corral(server, "submit", "--parsable", "--gpu-mem", budget, "--gpu-share", "--",
                       "sh", "-c", f"echo $$ > {pid_file}; exec sleep 300").output
    pid = int(wait_for(lambda: pid_file.read_text().strip() if pid_file.exists() else ""))
    return server, int(submitted.strip()), pid, replay


def test_a_sharing_job_over_its_budget_is_warned_then_stopped_with_the_reason(
        server_factory, short_tmp, monkeypatch, tmp_path, slurm_shell, http):
    server, job_id, pid, replay = budgeted_job(server_factory, short_tmp, monkeypatch, tmp_path,
                                               "[node]\ngpu_share_grace_s = 2\n", "20G")
    client = server.client()
    assert running(client, job_id)["gpu_share_mb"] == 20480
    # whoever asked to hear of the job failing hears of the warning too, while there is time to act
    client.add_channel("mine", "webhook", url=f"{http.base}/hook")
    client.create_alert("failed", "state == FAILED", channels=["mine"])
    client.add_channel("done", "webhook", url=f"{http.base}/done")  # a rule about another state hears nothing of it
    client.create_alert("finished", "state == COMPLETED", channels=["done"])

    frames(replay, [{"pid": pid, "usedGpuMemory": round(24.1 * 1024) * MB}])
    warned = wait_for(lambda: (j := client.get(job_id))["reason"] and j)
    assert warned["state"] == "RUNNING"
    assert warned["reason"].startswith("GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem): stopped at ")
    (alert,) = wait_for(lambda: [f for f in client.alerts(job=job_id) if f["rule"] == "gpu-share-budget"])
    assert (alert["severity"], alert["value"], alert["user"]) == ("warning", "24.1 GB", warned["user"])
    assert alert["message"].startswith(f"job {job_id} (") and warned["reason"] in alert["message"]
    posted = wait_for(lambda: [r for r in http.requests if b"gpu-share-budget" in r["body"]])
    assert [r["path"] for r in posted] == ["/hook"]
    assert "GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem): stopped at " in posted[0]["body"].decode()
    ended = wait_for(lambda: (j := client.get(job_id))["state"] != "RUNNING" and j, timeout=30)
    assert ended["state"] == "FAILED"
    assert ended["reason"] == "GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem)"
    # its events are recorded off the loop, just after the state they explain
    kinds = wait_for(lambda: ("gpu_over_budget", "stopped") in (k := [(e["kind"], e.get("action"))
                                                                       for e in client.get(job_id)["events"]]) and k)
    assert ("gpu_over_budget", "warned") in kinds and ("gpu_over_budget", "stopped") in kinds
    # Slurm writes a reason's spaces as underscores
    assert " Reason=GPU_memory_24.1_GB_over_its_budget_of_20_GB_(--gpu-mem) " in \
        slurm_shell(server.home)(f"scontrol show job {job_id}").stdout
    assert "GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem)" in corral(server, "show", str(job_id)).output
    diagnosis = client.diagnose(job_id)
    found = next(f for f in diagnosis["findings"] if f["cause"] == "gpu_over_budget")
    assert found["evidence"] == ["GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem)"]
    assert "--gpu-mem more than 20G" in found["fixes"][0]
    assert [r["path"] for r in http.requests if r["path"] == "/done"] == []


def test_warn_only_keeps_the_job_running_and_forgives_it_once_it_drops_back(server_factory, short_tmp, monkeypatch,
                                                                            tmp_path):
    server, job_id, pid, replay = budgeted_job(server_factory, short_tmp, monkeypatch, tmp_path,
                                               '[node]\ngpu_share_over_budget = "warn"\ngpu_share_grace_s = 0\n', "10G")
    client = server.client()
    frames(replay, [{"pid": pid, "usedGpuMemory": 12 * GIB}])
    assert wait_for(lambda: client.get(job_id)["reason"]) == "GPU memory 12 GB over its budget of 10 GB (--gpu-mem)"
    frames(replay, [{"pid": pid, "usedGpuMemory": 8 * GIB}])
    wait_for(lambda: client.get(job_id)["reason"] is None)
    assert client.get(job_id)["state"] == "RUNNING"
    # over again: warned again, but its owner was alerted once while it runs (not at every crossing)
    frames(replay, [{"pid": pid, "usedGpuMemory": 11 * GIB}])
    assert wait_for(lambda: client.get(job_id)["reason"]) == "GPU memory 11 GB over its budget of 10 GB (--gpu-mem)"
    # the reason changes in memory at once; the event that says so is recorded off the loop, just after
    warned = wait_for(lambda: len(w := [e for e in client.get(job_id)["events"] if e["kind"] == "gpu_over_budget"]) >= 2
                      and w)
    assert [e["action"] for e in warned] == ["warned", "warned"]
    assert [f["value"] for f in client.alerts(job=job_id) if f["rule"] == "gpu-share-budget"] == ["12 GB"]
    client.cancel(job_id)


def test_share_mode_puts_sharing_jobs_beside_a_process_outside_corral_within_its_free_memory(
        server_factory, short_tmp, monkeypatch, tmp_path, notebook):
    replay = tmp_path / "frames.jsonl"
    frames(replay, [{"pid": notebook.pid, "usedGpuMemory": 60 * GIB}])
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(replay))
    home = home_with(short_tmp, "share", '[node]\noutside_processes = "share"\n')
    server = server_factory(gpus=1, extra=ROOMY, home=home)
    client = server.client()
    wait_for(lambda: gpu(client, 0)["outside"], timeout=30)
    whole = client.submit(["sleep", "300"], gpus=1)
    small = client.submit(["sleep", "300"], gpu_mem="10G", gpu_share=True)
    big = client.submit(["sleep", "300"], gpu_mem="15G", gpu_share=True)
    assert running(client, small["id"])["gpu_ids"] == [0]
    # never on a GPU in use outside corral: it waits for it, as with "avoid", blocking nobody
    assert waiting(client, whole["id"])["reason"].startswith("ReqNodeNotAvail, ")
    assert f"GPU 0 in use outside corral by {getpass.getuser()} (pid {notebook.pid}, 61440 MB)" in \
        client.get(whole["id"])["reason"]
    assert waiting(client, big["id"])["reason"] == "Resources"  # 60 + 10 + 15 GiB is more than its 80
    shared = gpu(client, 0)["shared"]
    assert (shared["outside_mb"], shared["budgeted_mb"], shared["free_mb"]) == (61440, 10240, 10240)
    for job in (whole, small, big):
        client.cancel(job["id"])
