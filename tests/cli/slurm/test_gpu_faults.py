"""GPU health (issue 22, point 4) on a live server whose GPU figures are recorded NVML frames ($CORRAL_GPU_REPLAY)
in which, a few seconds in, GPU 1 reports XID 79 (fallen off the bus) and GPU 2 XID 48 (double-bit ECC): both are
drained by corral with the fault as the reason (API, `corral nodes`, `scontrol show node`, `sinfo -R`); the job on
one (sbatch --no-requeue) ends NODE_FAIL naming the GPU and the fault, the other (--requeue) waits again and runs on
a healthy GPU; an admin's `corral resume` brings the GPU back, and the replay coming round again does not drain it
anew; the fault is an alert firing."""

from __future__ import annotations

import json
import os
import re

from tests.cli.test_drain_cli import corral, running
from tests.helpers import wait_for

INTERVAL_S = 0.25
FAULT_FRAME = 44  # about 11 s in: the jobs are running by then, even on a loaded machine
GIB = 1 << 30
ROOMY = ["--cpus", "16", "--mem", "64G", "--sample-interval", str(INTERVAL_S)]
FAULTS = {1: "XID 79: GPU has fallen off the bus", 2: "XID 48: double-bit ECC error"}


def _gpu(index: int, **health: object) -> dict:
    return {"index": index, "uuid": f"GPU-{index}", "utilization": {"gpu": 0, "memory": 0},
            "memory": {"total": 80 * GIB, "used": 0, "free": 80 * GIB}, "power_mw": 60000, "temperature_c": 35,
            "processes": [], "ecc": {"volatile_uncorrected": 0}, "throttle_reasons": 0, **health}


def replaying(monkeypatch, tmp_path) -> None:
    healthy = [_gpu(i) for i in range(4)]
    faulty = [_gpu(0, throttle_reasons=0x40), _gpu(1, xid_events=[{"xid": 79, "time_us": 1_795_000_000_000_000}]),
              _gpu(2, xid_events=[{"xid": 48, "time_us": 1_795_000_000_100_000}]), _gpu(3)]
    frames = [healthy] * FAULT_FRAME + [faulty] + [healthy] * 4
    path = tmp_path / "frames.jsonl"
    path.write_text("".join(json.dumps(frame) + "\n" for frame in frames))
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(path))


def test_a_gpu_fault_drains_the_gpu_fails_or_requeues_its_jobs_and_an_admin_resumes_it(
        server_factory, monkeypatch, tmp_path, slurm_shell, http):
    replaying(monkeypatch, tmp_path)
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    client.drain(node, "kept free by the test", [0, 3])  # so the two jobs land on GPUs 1 and 2
    # an admin who asked to hear of failed nodes (as any job's) hears of a failed GPU too
    client.add_channel("ops", "webhook", url=f"{http.base}/hook")
    client.create_alert("node-fail", "state == NODE_FAIL", severity="critical", channels=["ops"])
    shell = slurm_shell(server.home)
    submitted = shell("sbatch --parsable -G 1 -J plain --no-requeue --wrap 'sleep 300' && "
                      "sbatch --parsable -G 1 -J again --requeue --wrap 'sleep 300'", cwd=str(tmp_path))
    plain, again = ({"id": int(line)} for line in submitted.stdout.split())
    plain_gpu = running(client, plain["id"])["gpu_ids"][0]
    again_gpu = running(client, again["id"])["gpu_ids"][0]
    assert {plain_gpu, again_gpu} == {1, 2}

    ended = wait_for(lambda: (j := client.get(plain["id"]))["state"] == "NODE_FAIL" and j, timeout=60)
    assert ended["reason"] == f"GPU {plain_gpu} of {node} failed: {FAULTS[plain_gpu]}"
    with open(ended["stderr_path"]) as f:
        log = f.read()
    assert re.search(rf"^slurmstepd: error: \*\*\* JOB {plain['id']} ON \S+ CANCELLED AT \S+ DUE TO NODE FAILURE, "
                     r"SEE SLURMCTLD LOG FOR DETAILS \*\*\*$", log, re.M), log
    gpus = wait_for(lambda: (g := client.nodes()[0]["gpus"])[again_gpu]["drained"] and g, timeout=30)
    for index in (1, 2):
        assert gpus[index]["drained"]["reason"] == FAULTS[index] and gpus[index]["drained"]["by"] == "corral"
        assert gpus[index]["health"]["events"][-1] == {"gpu": index, "severity": "fatal", "what": FAULTS[index],
                                                       "at": gpus[index]["health"]["events"][-1]["at"]}
    throttle = gpus[0]["health"]["events"][0]  # recorded, nothing more: GPU 0 is drained only by hand
    assert (throttle["severity"], throttle["what"]) == ("recorded", "throttled: thermal (hardware)")
    assert gpus[0]["drained"]["reason"] == "kept free by the test"

    waiting = wait_for(lambda: (j := client.get(again["id"]))["state"] == "PENDING" and j["reason"] not in
                       (None, "None") and j, timeout=30)
    assert waiting["restarts"] == 1 and waiting["reason"].startswith("ReqNodeNotAvail, ")
    with open(waiting["stderr_path"]) as f:  # stopped with SIGTERM as a requeue is, saying why as Slurm does
        assert f" DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***" in f.read()
    corral(server, "resume", "0")
    assert running(client, again["id"])["gpu_ids"] == [0]  # a healthy GPU

    table = corral(server, "nodes").output
    row = next(line for line in table.splitlines() if line.split()[:2] == [node, "1"])
    assert f"DRAINED: {FAULTS[1]} [corral@" in row
    row = next(line for line in table.splitlines() if line.split()[:2] == [node, "0"])
    assert "health: last: throttled: thermal (hardware) at " in row
    finding = client.diagnose(plain["id"])["findings"][0]
    assert finding["title"] == "Its GPU failed under it" and ended["reason"] in finding["evidence"][0]
    show = shell(f"scontrol show node {node}").stdout
    assert re.search(rf"^   Reason=gpu 1: {FAULTS[1]}; gpu 2: {FAULTS[2]}; gpu 3: kept free by the test \[", show,
                     re.M), show
    reasons = shell("sinfo -R -h -o '%100E|%N'").stdout
    assert FAULTS[1] in reasons and FAULTS[2] in reasons, reasons
    assert shell(f"sacct -X -n -j {plain['id']} -o State%12").stdout.strip() == "NODE_FAIL"
    assert "Requeue=0 Restarts=0 " in shell(f"scontrol show job {plain['id']}").stdout
    assert "Requeue=1 Restarts=1 " in shell(f"scontrol show job {again['id']}").stdout

    fired = [f for f in client.alerts() if f["rule"] == "gpu-health"]
    assert sorted(f["value"] for f in fired) == sorted(FAULTS.values())
    assert all(f["severity"] == "critical" and f["job_id"] is None for f in fired)
    assert {(f["rule"], f["job_id"]) for f in client.alerts() if f["rule"] == "node-fail"} == {("node-fail", plain["id"])}
    posted = wait_for(lambda: len(http.requests) >= 3 and [r["body"].decode() for r in http.requests], timeout=30)
    assert sum(f"GPU 1 of {node}: {FAULTS[1]}; drained" in body for body in posted) == 1, posted

    corral(server, "resume", "1")
    assert client.nodes()[0]["gpus"][1]["drained"] is None
    late = client.submit(["sleep", "300"], gpus=1, name="late")
    assert running(client, late["id"])["gpu_ids"] == [1]
    # a whole replay cycle later the XID frame has come round again: the same event, not drained anew
    wait_for(lambda: len(client.nodes()[0]["gpus"][0]["health"]["events"]) >= 2, timeout=60)
    assert client.nodes()[0]["gpus"][1]["drained"] is None and client.get(late["id"])["state"] == "RUNNING"
    for job in (again, late):
        client.cancel(job["id"])


def test_a_fault_of_a_gpu_in_mig_mode_drains_each_of_its_slices_and_fails_the_job_on_one(
        short_tmp, monkeypatch, slurm_shell):
    """NVML names the whole GPU (its index) in an XID; its slices are what jobs hold and what is drained."""
    from tests.cli.slurm.test_mig import UP
    from tests.conftest import Server, _kill_leftover_supervisors
    from tests.executor.test_mig import mig_frame

    healthy = mig_frame()
    faulty = mig_frame()
    faulty[0] = {**faulty[0], "xid_events": [{"xid": 79, "time_us": 1_795_000_000_000_000}]}
    path = os.path.join(short_tmp, "frames.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(frame) + "\n" for frame in [healthy] * 20 + [faulty]))
    monkeypatch.setenv("CORRAL_GPU_REPLAY", path)
    home = os.path.join(short_tmp, "mig")
    os.makedirs(home)
    server = Server(home=home, gpus=None, extra=UP).start()
    try:
        client = server.client()
        node = client.nodes()[0]["name"]
        submitted = slurm_shell(server.home)("sbatch --parsable --no-requeue --gres=gpu:1g.10gb:1 --wrap 'sleep 300'",
                                             cwd=short_tmp)
        job = int(submitted.stdout)
        assert running(client, job)["gpu_ids"] == [3]  # the first 1g.10gb slice of GPU 0
        ended = wait_for(lambda: (j := client.get(job))["state"] == "NODE_FAIL" and j, timeout=60)
        assert ended["reason"] == f"GPU 0 of {node} failed: {FAULTS[1]}"
        gpus = {g["index"]: g for g in client.nodes()[0]["gpus"]}
        assert {i: (g["drained"] or {}).get("reason") for i, g in gpus.items()} == {
            1: None, 2: FAULTS[1], 3: FAULTS[1], 4: FAULTS[1]}  # the whole GPU 1 is left in service
        assert gpus[2]["health"]["events"][-1]["what"] == FAULTS[1]  # a slice shows its GPU's health
    finally:
        server.stop()
        _kill_leftover_supervisors(home)
