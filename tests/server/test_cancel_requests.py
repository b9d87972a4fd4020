"""A cancel never starts the jobs it cancels: what one request names is out of the scheduler's reach before the
GPUs of the running jobs it names come free (`corral cancel 14 15 16`, arrays, their tasks), on real servers.

Every job leaves a file when it runs; a job cancelled while pending must leave none, have no start time and no
`started` in its timeline. After each cancel, a job submitted later is let run to its end on the freed GPUs: the
passes that could have started a cancelled job have all had their turn.
"""

from __future__ import annotations

import os
import random

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from tests.helpers import wait_for

ROUNDS = 4
CPUS = ["--cpus", "16"]  # GPUs, not this machine's few CPUs, decide who runs: freed GPUs go to whoever waits


def _touch(directory: str, name: str) -> list[str]:
    """A job that leaves `name-TASK` (`name-` for a job that is no array task) in `directory` when it starts."""
    return ["sh", "-c", 'touch "$0/$1-${CORRAL_ARRAY_TASK_ID:-}"; exec sleep 300', directory, name]


def _cancel_cli(server, refs: list[str]) -> tuple[bool, str]:
    """`corral cancel REFS...`: whether it went well, what it printed."""
    result = CliRunner().invoke(cli, ["--home", server.home, "cancel", *refs], catch_exceptions=False)
    return result.exit_code == 0, result.output


def _cancel_api(server, refs: list[str]) -> tuple[bool, str]:
    with server.client() as client:
        answers = client.cancel_jobs(refs)
    return all("error" not in answer for answer in answers), str(answers)


def _never_started(client, ref) -> None:
    job = client.get(ref)
    kinds = [event["kind"] for event in job["events"]]
    assert (job["state"], job["start_time"], "started" in kinds) == ("CANCELLED", None, False), (ref, job)


def _all_gpus_free_again(client) -> None:
    """A job submitted after the cancel runs to its end on every GPU: no pass can start a cancelled job any more."""
    later = client.submit(["true"], gpus=4)
    assert client.wait(later["id"], timeout=60)["state"] == "COMPLETED"


@pytest.mark.parametrize("how", [_cancel_cli, _cancel_api], ids=["corral-cancel", "api"])
def test_cancelling_running_and_pending_jobs_together_never_starts_the_pending_ones(server_factory, db_url, short_tmp,
                                                                                    how):
    marks = os.path.join(short_tmp, "marks")
    os.makedirs(marks)
    server = server_factory(db=db_url, extra=CPUS)
    order = random.Random(31)
    with server.client() as client:
        for round_ in range(ROUNDS):
            blocker = client.submit(["sleep", "300"], gpus=4, name="blocker")
            wait_for(lambda: client.get(blocker["id"])["state"] == "RUNNING", timeout=30)
            waiting = [client.submit(_touch(marks, f"r{round_}-job{i}"), gpus=1) for i in range(3)]
            array = client.submit(_touch(marks, f"r{round_}-array"), gpus=1, array="0-5")
            # a pass has seen them all, waiting for the blocker's GPUs (a task of the array has its record)
            wait_for(lambda: all(client.get(j["id"])["reason"] in ("Resources", "Priority") for j in waiting), timeout=30)
            refs = [str(blocker["id"]), *(str(j["id"]) for j in waiting), str(array["id"])]
            if round_ % 2:
                order.shuffle(refs)  # the running job first (as `corral cancel 14 15 16`), or anywhere
            done, said = how(server, refs)
            assert client.wait(blocker["id"], timeout=30)["state"] == "CANCELLED"
            _all_gpus_free_again(client)
            assert os.listdir(marks) == []
            assert done, said
            for job in waiting:
                _never_started(client, job["id"])
            assert client.get(array["id"])["state"] == "CANCELLED"
            for task in client.array_tasks(array["id"])["tasks"]:
                _never_started(client, task["id"])


def test_cancelling_an_array_with_running_tasks_never_starts_its_next_ones(server_factory, short_tmp):
    marks = os.path.join(short_tmp, "marks")
    os.makedirs(marks)
    server = server_factory(extra=CPUS)
    with server.client() as client:
        for round_ in range(ROUNDS):
            blocker = client.submit(["sleep", "300"], gpus=2, name="blocker")
            array = client.submit(_touch(marks, f"r{round_}"), gpus=1, array="0-7")
            aid = array["id"]
            wait_for(lambda: len(os.listdir(marks)) == 2 * (round_ + 1), timeout=30)  # two tasks run, six wait
            running = {t["array_task_id"] for t in client.array_tasks(aid)["tasks"] if t["state"] == "RUNNING"}
            assert len(running) == 2 and client.get(blocker["id"])["state"] == "RUNNING"
            # a running task, the array, the blocker and a task not started yet, named in one request
            first = min(running)
            unstarted = max(set(range(8)) - running)
            refs = [f"{aid}_{first}", str(aid), str(blocker["id"]), f"{aid}_{unstarted}"]
            done, said = _cancel_cli(server, refs[round_ % 4:] + refs[:round_ % 4])
            assert client.wait(aid, timeout=30)["state"] == "CANCELLED"
            _all_gpus_free_again(client)
            ran = {name for name in os.listdir(marks) if name.startswith(f"r{round_}-")}
            assert ran == {f"r{round_}-{t}" for t in running}
            assert done, said
            tasks = {t["array_task_id"]: t for t in client.array_tasks(aid)["tasks"]}
            for task_id, task in tasks.items():
                if task_id in running:
                    assert task["state"] == "CANCELLED" and task["start_time"] is not None
                else:
                    _never_started(client, task["id"])
