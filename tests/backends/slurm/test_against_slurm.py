"""corral on a real Slurm cluster: the testbed of scripts/slurm-testbed.sh (slurmctld, slurmd,
slurmdbd on this machine, four fake GPUs). Jobs are submitted, watched, cancelled, timed out,
requeued and chained for real."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from corral.client import Client
from tests.helpers import wait_for
from tests.slurm_testbed import squeue_ids

def finished(client: Client, job_id, timeout: float = 60) -> dict:
    job = client.wait(job_id, timeout=timeout, poll=5)
    assert job["state"] not in ("PENDING", "RUNNING"), job
    return job


def test_a_job_runs_on_slurm_with_its_gpus_and_keeps_its_corral_id(slurm):
    client = slurm.client()
    job = client.submit(["sh", "-c", 'echo "gpus=$CUDA_VISIBLE_DEVICES slurm=$SLURM_JOB_ID corral=$CORRAL_JOB_ID"'],
                        gpus=2)
    ended = finished(client, job["id"])
    assert (ended["state"], ended["exit_code"]) == ("COMPLETED", 0)
    out = client.logs(job["id"])[0].decode()
    assert f"corral={job['id']}" in out and f"slurm={ended['backend_id']}" in out
    assert out.split("gpus=")[1].split()[0].count(",") == 1  # two GPUs, bound by Slurm


def test_a_job_on_a_compute_node_brings_a_token_of_its_owner(slurm):
    # another machine cannot be named by the kernel: the job's SDK sends the token corral gave it
    probe = ('import json, os, urllib.request as u; r = u.Request(os.environ["CORRAL_URL"] + "/api/v1/whoami", headers='
             '{"Authorization": "Bearer " + os.environ["CORRAL_TOKEN"], "X-Forwarded-For": "203.0.113.9"}); '
             'me = json.load(u.urlopen(r)); print(me["user"], me["via"], me["scope"])')
    client = slurm.client()
    job = client.submit(["/usr/bin/python3", "-c", probe])
    ended = finished(client, job["id"])
    assert (ended["state"], ended["exit_code"]) == ("COMPLETED", 0), client.logs(job["id"], stream="stderr")
    assert client.logs(job["id"])[0].decode().split() == [job["user"], "token", "submit"]


def test_a_failing_job_records_its_exit_code(slurm):
    client = slurm.client()
    job = client.submit(["sh", "-c", "echo oops >&2; exit 3"])
    ended = finished(client, job["id"])
    assert (ended["state"], ended["exit_code"]) == ("FAILED", 3)
    assert client.logs(job["id"], stream="stderr")[0] == b"oops\n"


@pytest.fixture
def no_accounting(slurm_cluster, tmp_path, monkeypatch) -> str:
    """The testbed's slurm.conf without slurmdbd, for every Slurm command of this test and of servers it starts:
    sacct then says, for real, that accounting storage is disabled, as on a small cluster that runs none."""
    with open("/etc/slurm/slurm.conf") as f:
        lines = [line for line in f.read().splitlines() if not line.startswith("AccountingStorage")]
    conf = tmp_path / "slurm.conf"
    conf.write_text("\n".join([*lines, "AccountingStorageType=accounting_storage/none", ""]))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    return str(conf)


def test_on_a_cluster_without_accounting_a_job_still_ends_with_its_state_and_exit_code(no_accounting, slurm):
    assert "accounting storage is disabled" in subprocess.run(["sacct", "-j", "1"], capture_output=True,
                                                              text=True).stderr
    client = slurm.client()
    failing = client.submit(["sh", "-c", "exit 3"])
    sleeping = client.submit(["sleep", "300"])
    wait_for(lambda: client.get(sleeping["id"])["state"] == "RUNNING", timeout=60)
    client.cancel(sleeping["id"])
    ended, cancelled = finished(client, failing["id"]), finished(client, sleeping["id"])
    assert (ended["state"], ended["exit_code"]) == ("FAILED", 3)
    assert ended["start_time"] and ended["end_time"]
    assert cancelled["state"] == "CANCELLED"


def test_cancelling_a_running_job_scancels_it(slurm):
    client = slurm.client()
    job = client.submit(["sleep", "300"])
    wait_for(lambda: client.get(job["id"])["state"] == "RUNNING", timeout=30)
    backend_id = client.get(job["id"])["backend_id"]
    client.cancel(job["id"])
    assert finished(client, job["id"])["state"] == "CANCELLED"
    assert backend_id not in squeue_ids()


def test_cancelling_a_running_job_and_pending_ones_together_starts_none_of_them_at_slurm(slurm, short_tmp):
    client = slurm.client()
    blocker = client.submit(["sleep", "300"], gpus=4, time="10")
    wait_for(lambda: client.get(blocker["id"])["state"] == "RUNNING", timeout=120)  # the testbed is shared
    marks = os.path.join(short_tmp, "marks")
    os.makedirs(marks)
    waiting = [client.submit(["touch", os.path.join(marks, str(i))], gpus=1, time="1") for i in range(3)]
    for job in waiting:  # at Slurm, waiting for the blocker's GPUs
        wait_for(lambda job=job: client.get(job["id"])["reason"] in ("Resources", "Priority"), timeout=60)
    done = subprocess.run([sys.executable, "-m", "corral.cli", "--home", slurm.home, "cancel", str(blocker["id"]),
                           *(str(job["id"]) for job in waiting)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert finished(client, blocker["id"])["state"] == "CANCELLED"
    later = client.submit(["true"], gpus=4, time="1")  # Slurm has scheduled on the freed GPUs since
    assert finished(client, later["id"], timeout=120)["state"] == "COMPLETED"
    assert os.listdir(marks) == []
    for job in waiting:
        shown = client.get(job["id"])
        assert (shown["state"], shown["start_time"]) == ("CANCELLED", None), shown


def test_a_cancel_of_pending_only_leaves_an_arrays_running_task_at_slurm(slurm):
    client = slurm.client()
    array = client.submit(["sleep", "300"], gpus=4, time="10", array="0-2")
    wait_for(lambda: client.get(f"{array['id']}_0")["state"] == "RUNNING", timeout=120)
    (answer,) = client.cancel_jobs([array["id"]], pending_only=True)  # scancel --state=PENDING at Slurm
    assert answer["id"] == array["id"], answer
    running = client.get(f"{array['id']}_0")["backend_id"]
    at_slurm = f"{client.get(array['id'])['backend_id']}_"
    # the two tasks not started leave Slurm's queue; the running one stays
    wait_for(lambda: {i for i in squeue_ids() if i.startswith(at_slurm)} == {running}, timeout=30)
    assert client.get(f"{array['id']}_0")["state"] == "RUNNING"
    client.cancel(f"{array['id']}_0")
    ended = finished(client, array["id"])
    assert ended["state"] == "CANCELLED"
    started = [t for t in client.array_tasks(array["id"])["tasks"] if t["start_time"] is not None]
    assert [t["array_task_id"] for t in started] == [0]


def test_a_pending_job_shows_slurms_reason_and_a_chain_runs_in_order(slurm):
    client = slurm.client()
    first = client.submit(["sleep", "3"], name="first")
    second = client.submit(["true"], name="second", dependency=f"afterok:{first['id']}")
    wait_for(lambda: client.get(second["id"])["reason"] == "Dependency", timeout=30)
    a, b = finished(client, first["id"]), finished(client, second["id"])
    assert a["state"] == b["state"] == "COMPLETED"
    assert b["start_time"] >= a["end_time"][:19]  # ISO strings; Slurm's times are whole seconds


def test_an_array_runs_its_tasks_within_the_throttle_with_a_log_each(slurm):
    client = slurm.client()
    array = client.submit(["sh", "-c", "echo task $SLURM_ARRAY_TASK_ID"], array="0-3%2", name="sweep")
    ended = finished(client, array["id"], timeout=90)
    assert ended["state"] == "COMPLETED"
    for task in range(4):
        task_job = client.get(f"{array['id']}_{task}")
        assert task_job["state"] == "COMPLETED"
        assert client.logs(f"{array['id']}_{task}")[0] == f"task {task}\n".encode()


@pytest.mark.timeout(240)
def test_a_job_past_its_time_limit_ends_timeout(slurm):
    client = slurm.client()
    job = client.submit(["sleep", "600"], time="1")  # Slurm counts in minutes
    assert finished(client, job["id"], timeout=150)["state"] == "TIMEOUT"


@pytest.mark.timeout(180)
def test_a_job_requeued_by_slurm_runs_again_and_appends_its_log(slurm):
    client = slurm.client()
    job = client.submit(["sh", "-c", 'echo "run ${SLURM_RESTART_COUNT:-0}"; sleep 4'])
    wait_for(lambda: client.get(job["id"])["state"] == "RUNNING", timeout=30)
    backend_id = client.get(job["id"])["backend_id"]
    subprocess.run(["scontrol", "requeue", backend_id], check=True)
    # Slurm holds a requeued job back a while (Reason=BeginTime, ~11 s on the testbed): corral shows it
    wait_for(lambda: client.get(job["id"])["reason"] == "BeginTime", timeout=30)
    ended = finished(client, job["id"], timeout=90)
    assert ended["state"] == "COMPLETED" and ended["restarts"] >= 1
    out = client.logs(job["id"])[0].decode()
    assert "run 0" in out and "run 1" in out  # the first run's output kept


def test_the_epilog_webhook_needs_the_token(slurm):
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(slurm.url)
    token = open(os.path.join(slurm.home, "webhook.token")).read().strip()
    for header, status in ((None, 401), ("Bearer wrong", 401), (f"Bearer {token}", 202)):
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("POST", "/api/v1/webhooks/slurm", body=b"{}",
                     headers={"Authorization": header} if header else {})
        assert conn.getresponse().status == status
        conn.close()


CLI_SESSION = """
set -e
corral submit --parsable -J done -- sh -c 'echo from-the-job' > id1
corral submit --parsable -J doomed -- sleep 300 > id2
corral queue
corral wait "$(cat id1)"
corral logs "$(cat id1)"
corral cancel "$(cat id2)"
corral history
"""


@pytest.mark.parametrize("backend", ["local", "slurm"])
def test_the_same_cli_session_works_on_both_backends(backend, request, server_factory, short_tmp):
    if backend == "slurm":
        request.getfixturevalue("slurm_cluster")
    server = server_factory(extra=["--backend", backend])
    env = {**os.environ, "CORRAL_HOME": server.home, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    env.pop("CORRAL_URL", None)
    done = subprocess.run(["bash", "-c", CLI_SESSION], cwd=short_tmp, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "from-the-job" in done.stdout
    history = done.stdout.split("JOBID")[-1]
    assert "COMPLETED" in history and "CANCELLED" in history


def test_a_job_submitted_with_plain_sbatch_can_be_attached_and_followed(slurm, short_tmp):
    out = os.path.join(short_tmp, "plain-%j.out")
    slurm_id = subprocess.run(["sbatch", "--parsable", f"--output={out}", "--wrap", "echo from plain sbatch; sleep 2"],
                              capture_output=True, text=True, check=True).stdout.strip()
    client = slurm.client()
    job = client.attach(slurm_id)
    assert client.attach(slurm_id)["id"] == job["id"]  # attaching twice tracks it once
    ended = finished(client, job["id"])
    assert (ended["state"], ended["backend_id"]) == ("COMPLETED", slurm_id)
    assert client.logs(job["id"])[0] == b"from plain sbatch\n"


def test_attach_is_refused_by_name_on_the_local_backend(server_factory):
    from corral.errors import Conflict

    client = server_factory().client()
    with pytest.raises(Conflict) as err:
        client.attach("123")
    assert "--backend slurm" in err.value.message


@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_efficiency_of_a_finished_job_comes_from_slurms_accounting(slurm):
    client = slurm.client()
    burn = "import time\nt = time.time()\nx = bytearray(200 * 2**20)\nwhile time.time() - t < 4: pass\n"
    job = client.submit([sys.executable, "-c", burn], mem="1G", cpus=1)
    assert finished(client, job["id"])["state"] == "COMPLETED"
    eff = wait_for(lambda: _efficiency_with_cpu(client, job["id"]), timeout=30)
    assert eff["cpus"] == 1 and eff["mem_requested_mb"] == 1024.0
    assert 0.3 < eff["cpu_efficiency"] <= 1.2  # a busy loop: most of a core
    assert eff["max_rss_mb"] > 150  # the 200 MB it held


def _efficiency_with_cpu(client: Client, job_id):
    eff = client.efficiency(job_id)
    # slurmdbd fills a record in more than one write: wait for the request's memory too (once seen as 16 bytes)
    return eff if eff["cpu_time_s"] > 0 and eff["max_rss_mb"] > 0 and (eff["mem_requested_mb"] or 0) >= 1 else None


def test_holding_a_job_waiting_at_slurm_holds_it_there(slurm):
    client = slurm.client()
    blocker = client.submit(["sleep", "300"], gpus=4, time="10")
    waiting = client.submit(["true"], gpus=4, time="1")
    wait_for(lambda: client.get(waiting["id"])["backend_id"], timeout=30)
    client.hold(waiting["id"])
    backend_id = client.get(waiting["id"])["backend_id"]
    reason = subprocess.run(["squeue", "-h", "-j", backend_id, "-o", "%r"], capture_output=True, text=True).stdout
    assert reason.strip() == "JobHeldUser"
    client.cancel(blocker["id"])
    time.sleep(3)
    assert client.get(waiting["id"])["state"] == "PENDING"  # room now, but held
    client.release(waiting["id"])
    assert finished(client, waiting["id"])["state"] == "COMPLETED"


def test_slurm_path_sends_users_to_slurms_own_commands_in_front_of_a_real_slurm(slurm):
    out = subprocess.run([sys.executable, "-m", "corral.cli", "--home", slurm.home, "slurm-path"], capture_output=True,
                         text=True, timeout=60)
    assert (out.returncode, out.stdout) == (1, "")
    assert "runs its jobs on slurm: use slurm's own commands" in out.stderr


LOGGER = """
import corral, os, sys, time
run = corral.init(project="moved", flush_interval_s=0.2)
print(run.id, flush=True)
i = 0
while not os.path.exists(sys.argv[1]):
    run.log({"loss": 1.0 / (i + 1)}, step=i)
    i += 1
    time.sleep(0.01)
run.finish(timeout=120)
print("logged", i, flush=True)
"""


@pytest.mark.timeout(300)
def test_a_slurm_jobs_run_follows_its_server_to_another_port_and_every_point_arrives_without_sync(slurm, tmp_path):
    client = slurm.client()
    stop = tmp_path / "stop"
    job = client.submit([sys.executable, "-c", LOGGER, str(stop)], time="10")
    run_id = int(wait_for(lambda: client.logs(job["id"])[0].split(), timeout=90)[0])
    wait_for(lambda: (client.get_run(run_id)["last_step"] or 0) >= 50, timeout=60)  # sending live
    old_url = slurm.url
    slurm.kill9()
    slurm.start()  # --port 0: another port
    assert slurm.url != old_url
    client = slurm.client()
    before = client.get_run(run_id)["last_step"]
    # live again, through the home's address file: no `corral sync`, the job's token to the same server
    wait_for(lambda: client.get_run(run_id)["last_step"] > before + 50, timeout=90)
    stop.write_text("")
    ended = finished(client, job["id"], timeout=180)
    out = client.logs(job["id"])[0].decode()
    assert ended["state"] == "COMPLETED", out
    total = int(out.split()[-1])
    series = client.series(run_id, "loss", max_points=100_000)
    assert series["steps"] == list(range(total)) and series["values"] == [1.0 / (i + 1) for i in range(total)]
    run = client.get_run(run_id)
    assert (run["state"], run["metrics"]["loss"]["count"]) == ("finished", total)
    err = client.logs(job["id"], stream="stderr")[0].decode()
    assert err.count("cannot reach the corral server") == 1, err  # while it was down, and only then
    assert "is spooled in" not in err and "dropping data" not in err, err  # nothing left for `corral sync`
    spool = os.path.join(slurm.home, "spool")
    assert not os.path.isdir(spool) or os.listdir(spool) == []
