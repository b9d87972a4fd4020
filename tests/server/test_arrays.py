"""Job arrays through a live server: one record until tasks start, throttles, %A/%a, cancelling."""

from __future__ import annotations

import os

import pytest

from corral.errors import InvalidRequest, NotFound
from tests.helpers import wait_for


def test_an_array_runs_every_task_within_its_throttle(server, short_tmp):
    client = server.client()
    script = (
        "#!/bin/sh\n#SBATCH --array=0-5%2\n#SBATCH --output=" + short_tmp + "/%A_%a.out\n"
        f"n=$(ls {short_tmp}/running.* 2>/dev/null | wc -l); echo $n >> {short_tmp}/concurrency\n"
        f"touch {short_tmp}/running.$SLURM_ARRAY_TASK_ID; sleep 0.3; rm {short_tmp}/running.$SLURM_ARRAY_TASK_ID\n"
        "echo task=$SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID count=$SLURM_ARRAY_TASK_COUNT corral=$CORRAL_ARRAY_TASK_ID\n"
    )
    array = client.submit(script=script, workdir=short_tmp)
    assert array["array"] == "0-5%2" and array["ref"] == f"{array['id']}_[0-5%2]"
    assert [j["ref"] for j in client.queue() if j["id"] == array["id"]]  # one record in the queue
    final = client.wait(array["id"], timeout=60)
    assert final["state"] == "COMPLETED"
    for task in range(6):
        with open(os.path.join(short_tmp, f"{array['id']}_{task}.out")) as f:
            assert f.read() == f"task={task} of {array['id']} count=6 corral={task}\n"
    with open(os.path.join(short_tmp, "concurrency")) as f:
        assert max(int(line) for line in f) < 2  # never more than 2 at once: at most 1 other was running
    task = client.get(f"{array['id']}_3")
    assert (task["array_job_id"], task["array_task_id"], task["state"]) == (array["id"], 3, "COMPLETED")
    assert client.queue() == []


def test_cancel_one_waiting_task_then_the_whole_array(server, short_tmp):
    client = server.client()
    blocker = client.submit(["sleep", "30"], gpus=4, workdir=short_tmp)
    array = client.submit(["true"], gpus=1, array="0-9", workdir=short_tmp)
    wait_for(lambda: client.get(array["id"])["reason"] == "Resources")  # its first task waits for GPUs
    cancelled = client.cancel(f"{array['id']}_7")
    assert (cancelled["ref"], cancelled["state"]) == (f"{array['id']}_7", "CANCELLED")
    assert "7" not in client.get(array["id"])["ref"].split("[")[1].split(",")
    whole = client.cancel(array["id"])
    assert whole["state"] == "CANCELLED"
    assert [j["id"] for j in client.queue()] == [blocker["id"]]
    with pytest.raises(NotFound):
        client.get(f"{array['id']}_42")
    client.cancel(blocker["id"])


def test_a_failing_task_fails_the_array_and_afterok_on_it_never_holds(server, short_tmp):
    client = server.client()
    array = client.submit(["sh", "-c", 'exit $(( CORRAL_ARRAY_TASK_ID == 2 ))'], array="0-3", workdir=short_tmp)
    after = client.submit(["true"], dependency=f"afterok:{array['id']}", workdir=short_tmp)
    assert client.wait(array["id"], timeout=30)["state"] == "FAILED"
    assert client.get(f"{array['id']}_2")["exit_code"] == 1
    assert client.get(f"{array['id']}_1")["state"] == "COMPLETED"
    wait_for(lambda: client.get(after["id"])["reason"] == "DependencyNeverSatisfied")
    client.cancel(after["id"])
    listed = client.array_tasks(array["id"])  # what the dashboard's array page shows
    assert [(t["ref"], t["state"]) for t in listed["tasks"]] == [
        (f"{array['id']}_{i}", "FAILED" if i == 2 else "COMPLETED") for i in range(4)]
    assert listed["summary"] == {"tasks": 4, "ended": 4, "states": {"COMPLETED": 3, "FAILED": 1}, "waiting": ""}
    with pytest.raises(InvalidRequest, match="not an array"):
        client.array_tasks(after["id"])


def test_holding_or_updating_an_array_covers_its_waiting_tasks(server, short_tmp):
    from corral.errors import Conflict

    client = server.client()
    blocker = client.submit(["sleep", "30"], gpus=4, workdir=short_tmp)
    array = client.submit(["true"], gpus=1, array="0-5%2", workdir=short_tmp)
    wait_for(lambda: client.get(f"{array['id']}_0")["state"] == "PENDING")
    client.hold(array["id"])
    assert client.get(f"{array['id']}_0")["reason"] == "JobHeldUser"
    with pytest.raises(Conflict, match="hold or release the whole array"):
        client.release(f"{array['id']}_4")
    updated = client.update(array["id"], time="7")
    assert updated["time_limit_s"] == 420 and client.get(f"{array['id']}_0")["time_limit_s"] == 420
    client.release(array["id"])
    client.cancel(blocker["id"])
    final = client.wait(array["id"], timeout=60)
    assert final["state"] == "COMPLETED" and final["reason"] is None
    assert client.get(f"{array['id']}_5")["time_limit_s"] == 420


def _corral(server, *args: str) -> str:
    """The real `corral` command, as a user types it."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("tasks", [1_000, 100_000])
def test_cancelling_a_running_array_cancels_it_and_its_afterok_never_runs(server_factory, short_tmp, tasks):
    """The issue's reproduction: an array of quick tasks cancelled a few seconds in ended COMPLETED
    (its started tasks had all completed) and its `afterok` dependent ran."""
    import time

    server = server_factory()
    array = _corral(server, "submit", "--parsable", "-t", "1", f"--array=0-{tasks - 1}", "-D", short_tmp,
                    "--", "true").strip()
    dependent = _corral(server, "submit", "--parsable", "-D", short_tmp, "-d", f"afterok:{array}", "--", "echo",
                        "RAN").strip()
    client = server.client()
    wait_for(lambda: client.get(f"{array}_0")["state"] == "COMPLETED", timeout=30)
    time.sleep(1)
    printed = _corral(server, "cancel", array)
    final = client.wait(array, timeout=30)
    assert final["state"] == "CANCELLED", printed
    assert f"job {array}: COMPLETED" not in printed
    wait_for(lambda: client.get(dependent)["reason"] == "DependencyNeverSatisfied")
    assert client.get(dependent)["state"] == "PENDING"
    started = {job["id"] for job in client.queue()} - {int(dependent)}
    assert not started, f"tasks still active after the array was cancelled: {started}"
    client.cancel(dependent)


def test_an_array_cancelled_after_all_its_started_tasks_completed_ends_cancelled(server, short_tmp):
    """Deterministic form of the race: every task that got a record has completed, the rest have
    none yet (the array is held), and then the array is cancelled."""
    client = server.client()
    array = client.submit(["sleep", "0.5"], array="0-9%1", workdir=short_tmp)
    dependent = client.submit(["echo", "RAN"], dependency=f"afterok:{array['id']}", workdir=short_tmp)
    wait_for(lambda: client.get(f"{array['id']}_0")["state"] == "RUNNING")
    client.hold(array["id"])  # its throttle has room for no other task now: none waits with a record
    wait_for(lambda: client.get(f"{array['id']}_0")["state"] == "COMPLETED")
    cancelled = client.cancel(array["id"])
    assert cancelled["state"] == "CANCELLED"
    assert client.get(array["id"])["state"] == "CANCELLED"
    with pytest.raises(NotFound):
        client.get(f"{array['id']}_5")  # a task that never got a record never will
    wait_for(lambda: client.get(dependent["id"])["reason"] == "DependencyNeverSatisfied")
    assert client.get(dependent["id"])["state"] == "PENDING"
    client.cancel(dependent["id"])
