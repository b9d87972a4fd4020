"""Requeueing jobs as Slurm's `scontrol requeue` does, on a live server."""

from __future__ import annotations

import os

import pytest

from corral.errors import Conflict, Forbidden
from tests.helpers import wait_for


def test_a_running_job_is_stopped_and_waits_again_then_runs_once_more(server_factory, short_tmp):
    client = server_factory().client()
    job = client.submit(["bash", "-c", "[ -e again ] && exit 0; touch again; sleep 60"], workdir=short_tmp)
    wait_for(lambda: os.path.exists(os.path.join(short_tmp, "again")))  # its first run is under way
    client.requeue(job["id"])
    wait_for(lambda: client.get(job["id"])["restarts"] == 1)
    final = client.wait(job["id"], timeout=60)  # its second run finds the mark and ends at once
    assert (final["state"], final["restarts"]) == ("COMPLETED", 1), (final, client.logs(job["id"], stream="stderr"))
    events = client.get(job["id"])["events"]
    requeued = [event for event in events if event["kind"] == "requeued"]
    assert len(requeued) == 1 and not [event for event in events if event["kind"] == "preempted"], events
    assert requeued[0].get("by_user") == client.whoami()["user"], requeued  # the timeline names who asked


def test_requeuehold_leaves_it_held_and_an_ended_job_waits_again(server_factory, short_tmp):
    client = server_factory().client()
    running = client.submit(["sleep", "60"], workdir=short_tmp)
    wait_for(lambda: client.get(running["id"])["state"] == "RUNNING")
    client.requeue(running["id"], hold=True)
    wait_for(lambda: client.get(running["id"])["state"] == "PENDING")
    held = client.get(running["id"])
    assert (held["held"], held["reason"], held["restarts"]) == (True, "JobHeldUser", 1)
    ended = client.wait(client.submit(["true"], workdir=short_tmp)["id"], timeout=30)
    assert ended["state"] == "COMPLETED"
    again = client.requeue(ended["id"])
    assert (again["state"], again["restarts"], again["end_time"]) == ("PENDING", 1, None)
    assert client.wait(ended["id"], timeout=30)["state"] == "COMPLETED"
    with pytest.raises(Conflict, match="pending"):
        client.requeue(running["id"])  # held, so still pending: Slurm's "Job is pending execution"
    client.cancel(running["id"])


def test_only_its_owner_or_an_admin_may_requeue_or_update_a_job(server_factory, short_tmp):
    from corral.client import Client

    server = server_factory()
    admin = server.client()
    running = admin.submit(["sleep", "60"], workdir=short_tmp)
    wait_for(lambda: admin.get(running["id"])["state"] == "RUNNING")
    alice = Client(server.url, token=admin.create_token(user="alice", name="a")["token"])
    with pytest.raises(Forbidden, match="requeueing job"):
        alice.requeue(running["id"])
    with pytest.raises(Forbidden, match="updating job"):
        alice.update(running["id"], comment="mine now")
    assert admin.get(running["id"])["restarts"] == 0
    admin.cancel(running["id"])
