"""A job's end is written where its owner looks (issue 16, point 2): its stderr gets Slurm's line for a
time limit, a cancel (naming who), an out-of-memory kill, a preemption and a lost supervisor; and a
preemption is kept as events (when, for which job, when it was requeued) that `show`, `history` and the
API report. All on a live server with real jobs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.client import Client
from corral.executor.cgroups.placement import _mounts
from tests.helpers import wait_for

AT = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or "memory" not in _mounts("/proc/self/mountinfo")[0]
    and _mounts("/proc/self/mountinfo")[1] is None,
    reason="the kernel's OOM kill needs root and a cgroup hierarchy (CI has both)")


def stderr_of(client: Client, job_id: int) -> str:
    return client.logs(job_id, stream="stderr")[0].decode()


def stop_line(job: dict, ending: str) -> str:
    """Slurm's line, as a pattern: `slurmstepd: error: *** JOB 12 ON node CANCELLED AT <time><ending> ***`."""
    return (rf"(?m)^slurmstepd: error: \*\*\* JOB {job['id']} ON {re.escape(job['node'])} "
            rf"CANCELLED AT {AT}{re.escape(ending)} \*\*\*$")


def test_a_time_limit_is_written_in_slurms_words_to_the_jobs_stderr(server, short_tmp):
    with server.client() as client:
        job = client.submit(["sh", "-c", "echo working; sleep 30"], time="0:02", workdir=short_tmp)
        ended = client.wait(job["id"], timeout=60)
        assert ended["state"] == "TIMEOUT"
        assert re.search(stop_line(ended, " DUE TO TIME LIMIT"), stderr_of(client, job["id"])), stderr_of(client, job["id"])
        assert ended["node"] == client.nodes()[0]["name"]  # the node as corral reports it


def test_a_cancel_names_who_cancelled(server_factory, os_users, shared_dir):
    alice, _ = os_users
    server = server_factory(gpus=0, home=os.path.join(shared_dir, "home"))
    with Client(home=server.home) as root:
        token = root.create_token(user=alice, expires="1h")["token"]
    with Client(server.url, token=token) as as_alice:
        job = as_alice.submit(["sh", "-c", "echo up; sleep 60"], submit_dir="/tmp", time="2m")
        wait_for(lambda: as_alice.logs(job["id"])[0] == b"up\n", timeout=60)
        as_alice.cancel(job["id"])
        ended = as_alice.wait(job["id"], timeout=30)
        assert ended["state"] == "CANCELLED"
        assert re.search(stop_line(ended, f" BY {alice}"), stderr_of(as_alice, job["id"])), stderr_of(as_alice, job["id"])
        events = as_alice.get(job["id"])["events"]
        assert [e["kind"] for e in events] == ["submitted", "started", "cancelled", "ended"]
        assert events[2]["by_user"] == alice
        # a job cancelled before it ran has no log to write to; its timeline still says who
        waiting = as_alice.submit(["true"], submit_dir="/tmp", time="2m", dependency=f"afterok:{job['id']}")
        as_alice.cancel(waiting["id"])
        assert [(e["kind"], e.get("by_user")) for e in as_alice.get(waiting["id"])["events"]] == [
            ("submitted", None), ("cancelled", alice), ("ended", None)]


@needs_cgroups
def test_an_out_of_memory_kill_is_written_in_slurms_words(server, short_tmp):
    hog = f"{sys.executable} -c 'import time; a = bytearray(400 << 20); time.sleep(30)'"
    with server.client() as client:
        job = client.submit(["bash", "-c", f"{hog}; sleep 30"], mem="100M", time="1", workdir=short_tmp)
        assert client.wait(job["id"], timeout=60)["state"] == "OUT_OF_MEMORY"
        stderr = stderr_of(client, job["id"])
        assert (f"slurmstepd: error: Detected 1 oom_kill event in StepId={job['id']}.batch. "
                "Some of the step tasks have been OOM Killed.\n") in stderr, stderr


# Stops at once on SIGTERM the first time; the second run (after its requeue) ends at once.
PREEMPTIBLE = """
import os, signal, sys, time
if os.environ["CORRAL_RESTART_COUNT"] != "0":
    print("resumed", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
open(os.path.join(os.environ["CORRAL_CHECKPOINT_DIR"], "up"), "w").close()
time.sleep(60)
"""


def test_a_preemption_is_written_to_stderr_and_kept_with_the_job_that_caused_it(server, short_tmp):
    with server.client() as client:
        low = client.submit([sys.executable, "-c", PREEMPTIBLE], gpus=4, nice=100, preemptible=True, workdir=short_tmp)
        wait_for(lambda: os.path.exists(os.path.join(server.home, "checkpoints", str(low["id"]), "up")), timeout=30)
        first_run = client.get(low["id"])
        high = client.submit(["sleep", "1"], gpus=2, workdir=short_tmp)
        assert client.wait(high["id"], timeout=30)["state"] == "COMPLETED"
        final = client.wait(low["id"], timeout=60)
        assert (final["state"], final["restarts"]) == ("COMPLETED", 1)
        assert re.search(stop_line(first_run, " DUE TO PREEMPTION"), stderr_of(client, low["id"])), \
            stderr_of(client, low["id"])

        events = client.get(low["id"])["events"]
        kinds = [e["kind"] for e in events]
        assert kinds == ["submitted", "started", "preempted", "requeued", "started", "ended"], events
        preempted, requeued = events[2], events[3]
        assert preempted["by_job"] == str(high["id"])
        assert first_run["start_time"] <= preempted["time"] <= requeued["time"] <= events[4]["time"]
        assert events[1]["node"] == first_run["node"]

        shown = CliRunner().invoke(cli, ["--home", server.home, "show", str(low["id"])])
        assert shown.exit_code == 0, shown.output
        assert re.search(rf"Events: {AT} submitted\n", shown.output), shown.output
        assert re.search(rf"{AT} preempted by job {high['id']}\n", shown.output), shown.output
        assert re.search(rf"{AT} requeued\n", shown.output), shown.output

        history = CliRunner().invoke(cli, ["--home", server.home, "history"])
        assert history.exit_code == 0, history.output
        assert re.search(rf"job {low['id']}: {AT} preempted by job {high['id']}\n", history.output), history.output
        api = client.history()
        assert next(j for j in api if j["id"] == low["id"])["events"][2]["by_job"] == str(high["id"])


def test_a_lost_supervisor_leaves_slurms_node_failure_line(server, short_tmp):
    with server.client() as client:
        job = client.submit(["sh", "-c", "echo up; sleep 60"], time="5", workdir=short_tmp)
        wait_for(lambda: client.logs(job["id"])[0] == b"up\n", timeout=30)
        with open(os.path.join(server.home, "jobs", str(job["id"]), "started.json")) as f:
            os.kill(json.load(f)["supervisor_pid"], signal.SIGKILL)
        ended = client.wait(job["id"], timeout=60)
        assert ended["state"] == "NODE_FAIL"
        pattern = stop_line(client.get(job["id"]) | {"node": ended["node"] or client.nodes()[0]["name"]},
                            " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS")
        assert re.search(pattern, stderr_of(client, job["id"])), stderr_of(client, job["id"])


def test_the_node_failure_line_never_follows_a_link_the_job_left_in_place_of_its_log(
        server_factory, os_users, shared_dir):
    """The server writes this line as root: a job that swapped its log for a link to a file it may not
    write (here root's, standing in for /etc/shadow) must not get the server to write there."""
    alice, _ = os_users
    server = server_factory(gpus=0, home=os.path.join(shared_dir, "home"))
    victim = os.path.join(shared_dir, "shadow")
    with open(victim, "w") as f:
        f.write("root:secret\n")
    os.chmod(victim, 0o644)
    logs = os.path.join(shared_dir, "logs")
    os.makedirs(logs)
    os.chown(logs, *_ids(alice))
    log = os.path.join(logs, "job.out")
    with Client(home=server.home) as root:
        token = root.create_token(user=alice, expires="1h")["token"]
    with Client(server.url, token=token) as as_alice:
        swap = f"echo up; ln -sf {victim} {log}.new && mv -f {log}.new {log}; echo swapped > {logs}/done; sleep 60"
        job = as_alice.submit(["sh", "-c", swap], submit_dir="/tmp", stdout=log, time="2m")
        wait_for(lambda: os.path.exists(os.path.join(logs, "done")), timeout=60)
        with open(os.path.join(server.home, "jobs", str(job["id"]), "started.json")) as f:
            os.kill(json.load(f)["supervisor_pid"], signal.SIGKILL)
        assert as_alice.wait(job["id"], timeout=60)["state"] == "NODE_FAIL"
    with open(victim) as f:
        assert f.read() == "root:secret\n"


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid
