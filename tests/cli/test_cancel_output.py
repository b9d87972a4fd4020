"""`corral cancel` and `corral requeue` say what became of each job named, in words: cancelled before it started,
stopped, being stopped; queued again (not `job 21: PENDING (None)`)."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from corral.cli.format_outcomes import cancelled, requeued
from corral.cli.main import cli
from tests.helpers import wait_for


def stubborn(directory: str, name: str) -> list[str]:
    """Ignores SIGTERM, so that a stop takes the whole grace period (longer than a cancel waits for it); leaves
    `name-TASK` in `directory` once it does."""
    return ["sh", "-c", """trap '' TERM; touch "$0/$1-${CORRAL_ARRAY_TASK_ID:-}"; while :; do sleep 1; done""",
            directory, name]


def test_cancel_and_requeue_say_what_became_of_each_job(server_factory, short_tmp):
    server = server_factory(extra=["--cpus", "16", "--kill-grace", "30"])
    marks = os.path.join(short_tmp, "marks")
    os.makedirs(marks)

    def corral(*args: str) -> tuple[int, list[str]]:
        result = CliRunner().invoke(cli, ["--home", server.home, *args])
        return result.exit_code, result.output.splitlines()

    with server.client() as client:
        done = client.submit(["true"], gpus=0)["id"]
        assert client.wait(done, timeout=30)["state"] == "COMPLETED"
        alone = client.submit(stubborn(marks, "alone"), gpus=0)["id"]
        quick = client.submit(["sleep", "300"], gpus=0)["id"]
        array = client.submit(stubborn(marks, "array"), gpus=2, array="0-3")["id"]
        waiting = client.submit(["true"], gpus=4)["id"]
        wait_for(lambda: client.get(quick)["state"] == "RUNNING", timeout=30)
        # SIGTERM ignored from here on (two tasks of the array run, two wait)
        wait_for(lambda: sorted(os.listdir(marks)) == ["alone-", "array-0", "array-1"], timeout=30)

    assert corral("cancel", f"{array}_3") == (0, [f"job {array}_3: cancelled before it started"])
    code, said = corral("cancel", str(waiting), str(alone), str(array), str(quick), str(done))
    assert code == 1  # the job that had ended: said on stderr, the others cancelled
    assert said[:3] == [
        f"job {waiting}: cancelled before it started",
        f"job {alone}: being stopped (SIGTERM sent, SIGKILL after the grace period); it ends CANCELLED",
        f"job {array}: cancelled: no more of its tasks start; its running tasks are being stopped (SIGTERM sent, "
        "SIGKILL after the grace period)",
    ], said
    # SIGTERM ends it at once; whether its end is read within the cancel's wait is the machine's load
    assert (said[3].startswith(f"job {quick}: cancelled: stopped after running 0:0")
            or said[3] == f"job {quick}: being stopped (SIGTERM sent, SIGKILL after the grace period); it ends CANCELLED"
            ), said
    assert said[4] == f"corral: error: job {done} already ended (COMPLETED); there is nothing to cancel"
    code, listed = corral("cancel", "--json", str(waiting))
    assert code == 1 and listed == [f"corral: error: job {waiting} already ended (CANCELLED); there is nothing to cancel",
                                    "[]"]

    assert corral("requeue", str(done)) == (0, [f"job {done}: queued again (restart 1)"])
    with server.client() as client:
        again = client.submit(stubborn(marks, "again"), gpus=0)["id"]
        wait_for(lambda: "again-" in os.listdir(marks), timeout=30)
    assert corral("requeue", str(again)) == (0, [f"job {again}: being stopped, to be queued again"])
    with server.client() as client:
        assert client.wait(quick, timeout=30)["state"] == "CANCELLED"
    code, out = corral("requeue", "--json", str(quick))  # --json: the jobs as they are, unchanged
    assert code == 0 and json.loads("\n".join(out))[0]["state"] == "PENDING"


def test_each_way_a_cancel_ends_reads_as_words():
    """What the live test cannot pin without timing a stop: a job whose stop was read within the cancel's wait."""
    ran = {"id": 4, "state": "CANCELLED", "array": None, "array_job_id": None,
           "start_time": "2026-01-05T10:00:00.000Z", "end_time": "2026-01-05T10:01:05.000Z"}
    assert cancelled("4", ran) == "job 4: cancelled: stopped after running 1:05"
    task = ran | {"array": "0-9", "array_job_id": 3, "start_time": None}
    assert cancelled("3_2", task) == "job 3_2: cancelled before it started"
    array = task | {"array_job_id": None}
    assert cancelled("3", array) == "job 3: cancelled: no more of its tasks start, and none runs"
    assert cancelled("4", ran | {"state": "COMPLETED"}) == "job 4: ended COMPLETED before the cancel stopped it"
    assert requeued("4", ran | {"state": "PENDING", "restarts": 2, "held": False, "reason": "Priority"}) == (
        "job 4: queued again (restart 2); waiting: Priority")
