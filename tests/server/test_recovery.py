"""kill -9 of the server while jobs run: nothing lost, nothing run twice."""

from __future__ import annotations

import os

from tests.helpers import wait_for


def _runs(path: str) -> int:
    try:
        with open(path) as f:
            return len(f.read().splitlines())
    except FileNotFoundError:
        return 0


def test_server_killed_mid_run_recovers_every_job_exactly_once(server, short_tmp):
    client = server.client()
    ledger = {name: os.path.join(short_tmp, f"{name}.runs") for name in ("long", "quick", "queued")}
    go = os.path.join(short_tmp, "go")
    # long: still running after the restart; quick: ends (exit 7) while the server is dead;
    # queued: waits for long's GPUs the whole time.
    long = client.submit(["sh", "-c", f"echo run >> {ledger['long']}; while [ ! -e {go} ]; do sleep 0.05; done; sleep 5"],
                         gpus=3, workdir=short_tmp)
    quick = client.submit(["sh", "-c", f"echo run >> {ledger['quick']}; while [ ! -e {go} ]; do sleep 0.05; done; exit 7"],
                          gpus=1, workdir=short_tmp)
    queued = client.submit(["sh", "-c", f"echo run >> {ledger['queued']}"], gpus=2, workdir=short_tmp)
    wait_for(lambda: _runs(ledger["long"]) == 1 and _runs(ledger["quick"]) == 1)
    assert client.get(queued["id"])["state"] == "PENDING"

    server.kill9()
    open(go, "w").close()  # releases both running jobs while no server watches
    wait_for(lambda: os.path.exists(os.path.join(server.home, "jobs", str(quick["id"]), "result.json")))
    server.start()
    client = server.client()

    assert client.get(long["id"])["state"] == "RUNNING"
    quick_after = client.get(quick["id"])
    assert (quick_after["state"], quick_after["exit_code"]) == ("FAILED", 7)
    assert client.get(queued["id"])["state"] == "PENDING"

    assert client.wait(long["id"], timeout=30)["state"] == "COMPLETED"
    assert client.wait(queued["id"], timeout=30)["state"] == "COMPLETED"
    assert {name: _runs(path) for name, path in ledger.items()} == {"long": 1, "quick": 1, "queued": 1}


def test_pending_jobs_survive_a_crash_in_submit_order(server, short_tmp):
    client = server.client()
    blocker = client.submit(["sleep", "30"], gpus=4, workdir=short_tmp)
    waiting = [client.submit(["true"], gpus=1, workdir=short_tmp)["id"] for _ in range(5)]
    server.kill9()
    server.start()
    client = server.client()
    assert [j["id"] for j in client.queue()] == [blocker["id"], *waiting]
    client.cancel(blocker["id"])
    for job_id in waiting:
        assert client.wait(job_id, timeout=30)["state"] == "COMPLETED"
