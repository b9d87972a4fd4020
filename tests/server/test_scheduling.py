"""Partitions, QoS limits, priorities and holds through a live server configured by config.toml."""

from __future__ import annotations

import os

import pytest

from click.testing import CliRunner

from corral.cli.main import cli as main_cli
from corral.errors import Conflict, InvalidRequest, OverLimit
from tests.helpers import wait_for

CONFIG = """
[scheduler]
default_partition = "gpu"

[partitions.debug]
max_time = "30m"
tier = 2

[partitions.gpu]
default_time = "1h"

[partitions.private]
allowed_users = ["nobody-else"]

[qos.normal]
max_running_per_user = 2
max_gpus_per_user = 3
max_submit_per_user = 6
"""


@pytest.fixture
def configured(server_factory, short_tmp):
    home = os.path.join(short_tmp, "configured")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(CONFIG)
    return server_factory(home=home)


def reason_of(client, job_id: int) -> str:
    return client.get(job_id)["reason"]


def test_a_partition_fills_in_its_default_time_and_refuses_strangers(configured, short_tmp):
    client = configured.client()
    job = client.submit(["true"], workdir=short_tmp)
    assert (job["partition"], job["qos"], job["time_limit_s"]) == ("gpu", "normal", 3600)
    with pytest.raises(InvalidRequest, match="no partition 'nope'"):
        client.submit(["true"], partition="nope", workdir=short_tmp)
    with pytest.raises(InvalidRequest, match="may not use partition private"):
        client.submit(["true"], partition="private", workdir=short_tmp)


def test_a_time_limit_over_the_partitions_is_refused_at_submit_and_at_update(configured, short_tmp):
    """It would wait forever (PartitionTimeLimit): refused, naming --time, the partition's limit and the fix."""
    client = configured.client()
    with pytest.raises(OverLimit) as refused:
        client.submit(["true"], partition="debug", time="1:00:00", workdir=short_tmp)
    assert refused.value.field == "time"
    assert refused.value.message == (
        "time: --time=1:00:00 is longer than partition debug allows (its max_time is 30:00): the job would never "
        "start (ask for --time=30 (minutes) or less, or use partition gpu, which allows it)")
    assert client.queue() == []  # nothing was submitted
    cli = CliRunner().invoke(main_cli, ["--home", configured.home, "submit", "-p", "debug", "-t", "45", "--", "true"])
    assert cli.exit_code == 1 and cli.output.startswith("corral: error: time: --time=45:00 is longer than partition "
                                                        "debug allows (its max_time is 30:00)")
    job = client.submit(["true"], partition="debug", time="20", hold=True, workdir=short_tmp)
    with pytest.raises(OverLimit, match="--time=2:00:00 is longer than partition debug allows"):
        client.update(job["id"], time="2:00:00")
    moved = client.update(job["id"], partition="gpu", time="2:00:00")  # gpu has no max_time: it may go there
    assert (moved["partition"], moved["time_limit_s"]) == ("gpu", 7200)
    with pytest.raises(OverLimit, match="--time=2:00:00 is longer than partition debug allows"):
        client.update(job["id"], partition="debug")  # and not back with that limit
    client.update(job["id"], partition="debug", time="20")
    assert client.get(job["id"])["time_limit_s"] == 1200  # refused changes change nothing
    client.update(job["id"], time="25")
    assert client.get(job["id"])["time_limit_s"] == 1500
    client.release(job["id"])
    assert client.wait(job["id"], timeout=20)["state"] == "COMPLETED"


def test_qos_limits_hold_jobs_with_slurms_reasons(configured, short_tmp):
    client = configured.client()
    a = client.submit(["sleep", "30"], gpus=1, workdir=short_tmp)
    b = client.submit(["sleep", "30"], gpus=1, workdir=short_tmp)
    c = client.submit(["sleep", "30"], gpus=1, workdir=short_tmp)
    wait_for(lambda: client.get(b["id"])["state"] == "RUNNING")
    wait_for(lambda: reason_of(client, c["id"]) == "QOSMaxJobsPerUserLimit")
    client.cancel(a["id"])
    client.cancel(b["id"])
    wait_for(lambda: client.get(c["id"])["state"] == "RUNNING")
    big = client.submit(["sleep", "30"], gpus=3, workdir=short_tmp)
    wait_for(lambda: reason_of(client, big["id"]) == "QOSMaxGRESPerUser")  # 1 + 3 GPUs > 3
    client.cancel(c["id"])
    client.cancel(big["id"])


def test_the_submit_limit_refuses_the_job_over_it(configured, short_tmp):
    client = configured.client()
    jobs = [client.submit(["sleep", "30"], gpus=3, workdir=short_tmp)]  # the other five wait (GPU limit)
    jobs += [client.submit(["sleep", "30"], gpus=1, workdir=short_tmp) for _ in range(5)]
    with pytest.raises(Conflict, match="QOSMaxSubmitJobPerUserLimit"):
        client.submit(["true"], workdir=short_tmp)
    assert len(client.queue()) == 6
    client.cancel(jobs.pop()["id"])
    jobs.append(client.submit(["sleep", "30"], gpus=1, workdir=short_tmp))  # room again
    for job in jobs:
        client.cancel(job["id"])


def test_hold_and_release(server, short_tmp):
    client = server.client()
    blocker = client.submit(["sleep", "30"], gpus=4, workdir=short_tmp)
    job = client.submit(["true"], gpus=1, workdir=short_tmp)
    held = client.hold(job["id"])
    assert held["held"] is True and held["reason"] == "JobHeldUser" and held["state"] in ("PENDING",)
    with pytest.raises(Conflict, match="already held"):
        client.hold(job["id"])
    client.cancel(blocker["id"])
    assert client.get(job["id"])["state"] == "PENDING"  # free GPUs, but held
    assert client.get(job["id"])["reason"] == "JobHeldUser"
    client.release(job["id"])
    assert client.wait(job["id"], timeout=20)["state"] == "COMPLETED"
    with pytest.raises(Conflict, match="only pending jobs"):
        client.hold(job["id"])


def test_priority_shows_every_pending_job_with_its_factors(server, short_tmp):
    client = server.client()
    blocker = client.submit(["sleep", "30"], gpus=4, workdir=short_tmp)
    small = client.submit(["true"], gpus=1, workdir=short_tmp)
    big = client.submit(["true"], gpus=3, workdir=short_tmp)
    rows = wait_for(lambda: (r := client.priorities()) and len(r) == 2 and r)
    assert [r["id"] for r in rows] == [small["id"], big["id"]]  # equal priorities: submit order
    assert rows[0]["job_size"] == 0.25 and rows[1]["job_size"] == 0.75
    assert rows[0]["fairshare"] == rows[1]["fairshare"] == 0.5  # one user, who has all the usage: 2^-1
    assert reason_of(client, small["id"]) == "Resources" and reason_of(client, big["id"]) == "Priority"
    client.cancel(blocker["id"])


def test_a_short_job_backfills_while_a_big_one_waits_with_an_estimated_start(server, short_tmp):
    from click.testing import CliRunner

    from corral.cli.main import cli

    client = server.client()
    blocker = client.submit(["sleep", "30"], gpus=2, time="1", workdir=short_tmp)  # 1 minute
    wait_for(lambda: client.get(blocker["id"])["state"] == "RUNNING")
    big = client.submit(["true"], gpus=4, time="5", workdir=short_tmp)
    small = client.submit(["true"], gpus=1, time="0:10", workdir=short_tmp)
    assert client.wait(small["id"], timeout=20)["state"] == "COMPLETED"  # ran past the waiting big job
    waiting = client.get(big["id"])
    assert waiting["state"] == "PENDING" and waiting["reason"] == "Resources"
    assert waiting["estimated_start"] is not None
    table = CliRunner().invoke(cli, ["--home", server.home, "queue", "--start"]).output
    line = next(row for row in table.splitlines() if row.startswith(str(big["id"])))
    assert "N/A" not in line and "(Resources)" in line
    client.cancel(blocker["id"])
    assert client.wait(big["id"], timeout=20)["state"] == "COMPLETED"


def test_dependencies_chain_jobs_and_a_broken_one_is_cancelled_on_request(server, short_tmp):
    client = server.client()
    first = client.submit(["sh", "-c", "sleep 1; exit 3"], workdir=short_tmp)
    on_ok = client.submit(["true"], dependency=f"afterok:{first['id']}", workdir=short_tmp)
    on_fail = client.submit(["true"], dependency=f"afternotok:{first['id']}", workdir=short_tmp)
    doomed = client.submit(["true"], dependency=f"afterok:{first['id']}", kill_on_invalid_dep="yes", workdir=short_tmp)
    wait_for(lambda: reason_of(client, on_ok["id"]) == "Dependency")
    assert client.wait(on_fail["id"], timeout=20)["state"] == "COMPLETED"
    wait_for(lambda: reason_of(client, on_ok["id"]) == "DependencyNeverSatisfied")
    cancelled = client.wait(doomed["id"], timeout=20)
    assert (cancelled["state"], cancelled["reason"]) == ("CANCELLED", "DependencyNeverSatisfied")
    assert client.get(on_ok["id"])["state"] == "PENDING"
    client.cancel(on_ok["id"])
    with pytest.raises(InvalidRequest, match="job 99999 does not exist"):
        client.submit(["true"], dependency="afterok:99999", workdir=short_tmp)


def test_singleton_runs_one_job_of_a_name_at_a_time(server, short_tmp):
    client = server.client()
    mark = os.path.join(short_tmp, "overlap")
    body = f"if [ -e {mark}.lock ]; then touch {mark}; fi; touch {mark}.lock; sleep 0.5; rm {mark}.lock"
    jobs = [client.submit(["sh", "-c", body], name="solo", dependency="singleton", workdir=short_tmp) for _ in range(3)]
    for job in jobs:
        assert client.wait(job["id"], timeout=30)["state"] == "COMPLETED"
    assert not os.path.exists(mark)


RESUMABLE = """
import os, signal, sys, time
ckpt = os.path.join(os.environ["CORRAL_CHECKPOINT_DIR"], "step")
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
print(f"restart={os.environ['CORRAL_RESTART_COUNT']} from={step}", flush=True)
def save(signum, frame):
    with open(ckpt + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(ckpt + ".tmp", ckpt)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
open(os.path.join(os.environ["CORRAL_CHECKPOINT_DIR"], "up"), "w").close()
while step < 40:
    step += 1
    time.sleep(0.05)
print(f"done at {step}", flush=True)
"""


def test_a_preemptible_job_makes_room_for_a_higher_priority_one_and_resumes_from_its_checkpoint(server, short_tmp):
    import sys

    client = server.client()
    low = client.submit([sys.executable, "-c", RESUMABLE], gpus=4, nice=100, preemptible=True, workdir=short_tmp)
    checkpoints = os.path.join(server.home, "checkpoints", str(low["id"]))
    wait_for(lambda: os.path.exists(os.path.join(checkpoints, "up")))
    high = client.submit(["true"], gpus=2, workdir=short_tmp)
    assert client.wait(high["id"], timeout=30)["state"] == "COMPLETED"
    final = client.wait(low["id"], timeout=60)
    assert (final["state"], final["restarts"]) == ("COMPLETED", 1)
    output = open(final["stdout_path"]).read()  # both runs: a requeued job appends to its logs
    assert output.startswith("restart=0 from=0\n")
    second = output[output.index("restart=1"):]
    assert second.startswith("restart=1 from=") and not second.startswith("restart=1 from=0\n")
    assert "done at 40" in output


def test_update_changes_a_pending_jobs_limits_and_resources(configured, short_tmp):
    from click.testing import CliRunner

    from corral.cli.main import cli

    client = configured.client()
    blocker = client.submit(["sleep", "30"], gpus=2, workdir=short_tmp)
    job = client.submit(["true"], gpus=1, partition="gpu", time="2:00:00", hold=True, workdir=short_tmp)
    wait_for(lambda: reason_of(client, job["id"]) == "JobHeldUser")
    with pytest.raises(InvalidRequest, match="command"):
        client.update(job["id"], command=["false"])
    with pytest.raises(InvalidRequest, match="requested 9 GPUs"):
        client.update(job["id"], gpus=9)
    assert client.get(job["id"])["time_limit_s"] == 7200  # refused changes change nothing
    result = CliRunner().invoke(cli, ["--home", configured.home, "update", str(job["id"]), "--time", "20", "--nice", "5"])
    assert result.exit_code == 0, result.output
    updated = client.get(job["id"])
    assert (updated["time_limit_s"], updated["nice"]) == (1200, 5)
    client.release(job["id"])
    assert client.wait(job["id"], timeout=20)["state"] == "COMPLETED"
    with pytest.raises(Conflict, match="only pending jobs"):
        client.update(job["id"], nice=1)
    client.cancel(blocker["id"])
