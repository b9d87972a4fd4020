"""Every job in its own cgroup, on a live root server (issue 15, item 1): what a job starts, however it
detaches, ends with it; its memory limit is the kernel's; its process cap is its own; it cannot open GPUs
it was not given; its CPU time and processes are counted whole. And without cgroups, the server says so.

Each test replays a reproduction that escaped the process-group-and-session supervision before.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import uuid

import pytest

from corral.client import Client
from corral.executor.cgroups.placement import _mounts
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or "memory" not in _mounts("/proc/self/mountinfo")[0]
                                and _mounts("/proc/self/mountinfo")[1] is None,
                                reason="cgroups need root and a cgroup hierarchy (CI has both)")


def marked(tag: str) -> str:
    """A process name no other test uses, to find the escapee by."""
    return f"escapee-{tag}-{uuid.uuid4().hex[:8]}"


def pids_named(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[0] == name.encode():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def escapes(name: str, then: str = "sleep 300", orphan: bool = False) -> list[str]:
    """The issue's job: a grandchild that leaves the process group and the session, renamed `name`;
    `orphan`: started from a subshell that exits at once, so it leaves the process tree too."""
    detach = f'setsid bash -c "exec -a {name} sleep 600" </dev/null >/dev/null 2>&1 &'
    return ["bash", "-c", f"({detach}); {then}" if orphan else f"{detach} {then}"]


def running(client: Client, job_id: int) -> dict:
    return wait_for(lambda: (job := client.get(job_id))["state"] == "RUNNING" and job, timeout=30)


def test_cancel_kills_a_setsid_escapee_and_frees_its_gpus_only_then(server):
    name = marked("cancel")
    with server.client() as client:
        job = client.submit(escapes(name), gpus=2, time="1")
        running(client, job["id"])
        wait_for(lambda: pids_named(name), timeout=30)
        ended = client.cancel(job["id"])
        assert client.wait(job["id"], timeout=30)["state"] == "CANCELLED"
        # the outcome is written only once the cgroup is empty: by the time it reads CANCELLED, nothing is left
        assert pids_named(name) == [], f"{name} outlived its cancelled job ({ended['state']})"
        holders = [gpu["job_id"] for node in client.nodes() for gpu in node["gpus"]]
        assert job["id"] not in holders


def test_a_job_that_ends_takes_its_detached_processes_with_it(server):
    name = marked("end")
    with server.client() as client:
        job = client.submit(escapes(name, then="sleep 1; exit 0"), time="1")
        assert client.wait(job["id"], timeout=60)["state"] == "COMPLETED"
        assert pids_named(name) == []


def test_a_time_limit_reaches_detached_processes(server):
    name = marked("timeout")
    with server.client() as client:
        job = client.submit(escapes(name), time="0:02")
        assert client.wait(job["id"], timeout=60)["state"] == "TIMEOUT"
        assert pids_named(name) == []


def test_memory_limit_holds_a_setsid_child_and_its_oom_kill_ends_the_job(server):
    with server.client() as client:
        hog = f"{sys.executable} -c 'import time; a = bytearray(400 << 20); time.sleep(30)'"
        job = client.submit(["bash", "-c", f"setsid {hog} & sleep 30"], mem="100M", time="1")
        ended = client.wait(job["id"], timeout=60)
        assert ended["state"] == "OUT_OF_MEMORY"
        assert "memory limit of 100 MB" in client.logs(job["id"], stream="stderr")[0].decode()
        efficiency = client.efficiency(job["id"])
        assert efficiency["elapsed_s"] < 25  # ended by the kill, not by the 30 s sleep
        assert 90 <= efficiency["max_rss_mb"] <= 110 and "cgroup" in efficiency["source"]


def test_cpu_time_of_a_detached_process_counts_in_eff(server, short_tmp):
    done = os.path.join(short_tmp, "burnt")
    burn = (f"{sys.executable} -c 'import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"
            f"open(\"{done}\", \"w\")'")
    with server.client() as client:
        # orphaned by its subshell, the burner is nobody's child to wait for: only the cgroup counts its time
        job = client.submit(["bash", "-c", f"(setsid {burn} </dev/null &); until [ -e {done} ]; do sleep 0.1; done"],
                            time="1")
        assert client.wait(job["id"], timeout=60)["state"] == "COMPLETED"
        assert client.efficiency(job["id"])["cpu_time_s"] >= 1.5


def test_the_sampler_counts_a_detached_process_as_the_jobs(server_factory):
    server = server_factory(extra=["--sample-interval", "0.2"])
    name = marked("sampled")
    with server.client() as client:
        job = client.submit(escapes(name, orphan=True), time="1")
        running(client, job["id"])
        wait_for(lambda: pids_named(name), timeout=30)
        # the job's own process (bash exec-ing its last command, sleep 300), and the escapee: out of its
        # session and its process tree, still in its cgroup
        wait_for(lambda: any(row["id"] == job["id"] and row["sample"] and row["sample"]["processes"] == 2
                             for row in client.top()), timeout=30)
        client.cancel(job["id"])


def test_the_process_cap_is_per_job_not_per_user(server_factory, os_users, shared_dir):
    alice, _ = os_users
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[server]\nmax_job_processes = 40\n")
    server = server_factory(gpus=0, home=home, extra=["--cpus", "8"])  # the three jobs run side by side
    hold = "i=0; while [ $i -lt {n} ]; do sleep 60 & i=$((i+1)); done; echo started; sleep 60"
    with Client(home=server.home) as root:
        token = root.create_token(user=alice, expires="1h")["token"]
        with Client(server.url, token=token) as as_alice:
            first = as_alice.submit(["sh", "-c", hold.format(n=30)], submit_dir="/tmp", time="2m")
            wait_for(lambda: as_alice.logs(first["id"])[0] == b"started\n", timeout=60)
            # 30 of alice's processes run already: a per-user cap of 40 would refuse the second job's forks
            second = as_alice.submit(["sh", "-c", hold.format(n=30)], submit_dir="/tmp", time="2m")
            wait_for(lambda: as_alice.logs(second["id"])[0] == b"started\n", timeout=60)
            bomb = as_alice.submit(["sh", "-c", hold.format(n=100)], submit_dir="/tmp", time="2m")
            ended = as_alice.wait(bomb["id"], timeout=60)
            assert ended["state"] == "FAILED"
            assert "fork" in as_alice.logs(bomb["id"], stream="stderr")[0].decode().lower()
            for job in (first, second):
                as_alice.cancel(job["id"])


def test_a_job_cannot_open_a_gpu_it_was_not_given(server, short_tmp):
    devices = os.path.join(short_tmp, "dev")
    os.makedirs(devices)
    for n in range(4):  # /dev/nvidia0..3 as the driver makes them; no driver here, so an allowed open is ENXIO
        os.mknod(os.path.join(devices, f"nvidia{n}"), 0o666 | 0o020000, os.makedev(195, n))
    probe = ("import os\nfor n in range(4):\n    try:\n        os.close(os.open(f'" + devices + "/nvidia{n}', os.O_RDWR))\n"
             "        print(n, 0)\n    except OSError as e:\n        print(n, e.errno)\n"
             "print('mine', os.environ['CUDA_VISIBLE_DEVICES'])")
    with server.client() as client:
        job = client.submit([sys.executable, "-c", probe], gpus=1, time="1")
        assert client.wait(job["id"], timeout=60)["state"] == "COMPLETED"
        lines = client.logs(job["id"])[0].decode().split("\n")
        mine = int(lines[4].split()[1])
        errors = {int(n): int(code) for n, code in (line.split() for line in lines[:4])}
        assert errors.pop(mine) == errno.ENXIO
        assert set(errors.values()) == {errno.EPERM}


def test_a_lost_supervisors_detached_processes_are_killed_on_recovery(server):
    name = marked("orphan")
    with server.client() as client:
        job = client.submit(escapes(name), time="5")
        running(client, job["id"])
        wait_for(lambda: pids_named(name), timeout=30)
        started = os.path.join(server.home, "jobs", str(job["id"]), "started.json")
        import json

        with open(started) as f:
            os.kill(json.load(f)["supervisor_pid"], signal.SIGKILL)
        assert client.wait(job["id"], timeout=60)["state"] == "NODE_FAIL"
        wait_for(lambda: not pids_named(name), timeout=30)


def test_nodes_and_start_up_say_how_jobs_are_held(server_factory):
    with server_factory().client() as client:
        (node,) = client.nodes()
        assert node["isolation"] in ("cgroup v1", "cgroup v2")
        assert "dies with it" in node["isolation_detail"]
    off = server_factory(extra=["--cgroups", "off"])
    with off.client() as client:
        (node,) = client.nodes()
        assert node["isolation"] == "none" and "setsid escapes" in node["isolation_detail"]
    with open(os.path.join(off.home, "server.log")) as f:
        assert "job isolation: off" in f.read()
