"""scancel by user, name, state and partition cancels arrays (their tasks not started are one row, `12_[1-5]`), and
never starts a job it cancels, as Slurm's scancel: pending jobs go before running ones free their GPUs."""

from __future__ import annotations

import os

from tests.helpers import wait_for

CPUS = ["--cpus", "16"]  # GPUs, not this machine's few CPUs, decide who runs


def _touch(directory: str, name: str) -> list[str]:
    """Leaves `name-TASK` in `directory` when it starts, then runs until stopped."""
    return ["sh", "-c", 'touch "$0/$1-${CORRAL_ARRAY_TASK_ID:-}"; exec sleep 300', directory, name]


def test_scancel_by_name_user_state_and_partition_cancels_arrays_and_starts_none_of_them(server_factory, slurm_shell,
                                                                                         short_tmp):
    marks = os.path.join(short_tmp, "marks")
    os.makedirs(marks)
    server = server_factory(extra=CPUS)
    shell = slurm_shell(server.home)
    with server.client() as client:
        blocker = client.submit(["sleep", "300"], gpus=3, name="blocker")
        sweep = client.submit(_touch(marks, "sweep"), gpus=1, array="0-5", name="sweep")
        wait_for(lambda: os.listdir(marks) == ["sweep-0"], timeout=30)  # one task runs, five wait: 1_[1-5]
        assert client.get(blocker["id"])["state"] == "RUNNING"

        out = shell("scancel -n sweep")  # the whole array: its running task and the five not started
        assert (out.returncode, out.stderr) == (0, "")
        assert client.wait(sweep["id"], timeout=30)["state"] == "CANCELLED"
        other = client.submit(_touch(marks, "other"), gpus=1, array="0-5", name="other")
        single = client.submit(_touch(marks, "single"), gpus=1, name="single")
        wait_for(lambda: "other-0" in os.listdir(marks), timeout=30)  # on sweep's GPU; the rest wait
        assert sorted(os.listdir(marks)) == ["other-0", "sweep-0"]

        # pending only: other's five tasks not started and single; other_0 and the blocker run on
        out = shell(f"scancel -u {client.whoami()['user']} -t PENDING -p default")
        assert (out.returncode, out.stderr) == (0, "")
        assert client.get(single["id"])["state"] == "CANCELLED"
        tasks = {t["array_task_id"]: t["state"] for t in client.array_tasks(other["id"])["tasks"]}
        assert tasks[0] == "RUNNING" and client.get(blocker["id"])["state"] == "RUNNING"
        assert [job["ref"] for job in client.queue()] == [str(blocker["id"]), f"{other['id']}_0"]

        out = shell("scancel --me")  # what is left: the blocker, other's running task, and with it the array
        assert (out.returncode, out.stderr) == (0, "")
        assert client.wait(other["id"], timeout=30)["state"] == "CANCELLED"
        assert client.wait(blocker["id"], timeout=30)["state"] == "CANCELLED"
        later = client.submit(["true"], gpus=4)  # on every GPU: each pass that could start a cancelled job has run
        assert client.wait(later["id"], timeout=60)["state"] == "COMPLETED"
        assert sorted(os.listdir(marks)) == ["other-0", "sweep-0"]
        for array in (sweep, other):
            started = [t for t in client.array_tasks(array["id"])["tasks"] if t["start_time"] is not None]
            assert [t["array_task_id"] for t in started] == [0] and all(t["state"] == "CANCELLED" for t in started)
        assert client.get(single["id"])["start_time"] is None
