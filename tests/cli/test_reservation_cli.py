"""Reservations (issue 22, point 5) on a live server with 4 declared GPUs: `corral reservation`, jobs outside kept
off the reserved GPUs, jobs inside run there, a reservation that ends by itself, bad input and a second account."""

from __future__ import annotations

import os

import pytest

from corral.client import Client
from corral.errors import CorralError
from tests.cli.test_drain_cli import ROOMY, corral, running, waiting
from tests.helpers import wait_for


def test_reserved_gpus_go_to_the_reservations_jobs_and_others_run_beside_them(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    made = corral(server, "reservation", "create", "demo", "--gpus", "2", "--users", "root", "--duration", "1h").output
    assert made.startswith(f"Reservation created: demo (GPU 0,1 of {node} with 8 CPUs and 32G memory, ") and "for users root" in made
    listed = corral(server, "reservation", "list").output.splitlines()
    assert listed[0].split() == ["NAME", "STATE", "START", "END", "NODE", "GPUS", "USERS", "ACCOUNTS"]
    assert listed[1].split()[:2] == ["demo", "ACTIVE"] and listed[1].split()[-3:] == ["0,1", "root", "-"]

    needs_all = client.submit(["sleep", "300"], gpus=4, time="10:00")
    outside = client.submit(["sleep", "300"], gpus=2, time="10:00")
    assert sorted(running(client, outside["id"])["gpu_ids"]) == [2, 3]
    inside = client.submit(["sleep", "300"], gpus=2, time="10:00", reservation="demo")
    job = running(client, inside["id"])
    assert sorted(job["gpu_ids"]) == [0, 1] and job["reservation"] == "demo"
    waits = waiting(client, needs_all["id"])
    assert waits["reason"] in ("Resources", "Priority")
    third = client.submit(["sleep", "300"], gpus=1, time="10:00", reservation="demo")
    assert waiting(client, third["id"])["reason"] == "Resources"  # GPUs 2 and 3 are free later, but not its

    with pytest.raises(CorralError) as caught:
        client.delete_reservation("demo")
    assert caught.value.status == 409 and f"has jobs running in it ({inside['id']})" in caught.value.message
    for j in (needs_all, outside, inside, third):
        client.cancel(j["id"])


def test_a_reservation_ends_by_itself_and_its_waiting_job_is_held_until_released(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    client.create_reservation(name="brief", gpus=1, users=["root"], duration="6s")
    later = client.create_reservation(name="later", gpu_ids=[3], users=["root"], start="now+3", duration="1h")
    assert later["gpus"] == [3] and later["state"] == "INACTIVE"
    too_long = client.submit(["sleep", "300"], gpus=1, time="10:00", reservation="brief")
    assert waiting(client, too_long["id"])["reason"] == "Reservation"  # its limit runs past the end
    upcoming = client.submit(["sleep", "300"], gpus=1, time="10:00", reservation="later")
    early = waiting(client, upcoming["id"])
    if early["state"] == "PENDING":
        assert early["reason"] == "Reservation" and early["estimated_start"] is not None
    assert running(client, upcoming["id"])["gpu_ids"] == [3]  # once it begins

    held = wait_for(lambda: (j := client.get(too_long["id"]))["reason"] == "ReservationDeleted" and j, timeout=30)
    assert held["state"] == "PENDING" and held["reservation"] is None
    assert [r["name"] for r in client.reservations()] == ["later"]
    client.release(too_long["id"])
    assert running(client, too_long["id"])["gpu_ids"] == [0]  # outside any reservation now
    for j in (too_long, upcoming):
        client.cancel(j["id"])


def test_bad_reservations_and_submits_are_refused_naming_the_field(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    client.create_reservation(name="taken", gpu_ids=[0, 1], users=["root"], duration="2h")
    cases = [({"name": "x", "gpus": 1, "users": ["no_such_user_here"], "duration": "1h"}, 422, "users",
              "no user 'no_such_user_here'"),
             ({"name": "x", "gpu_ids": [7], "users": ["root"], "duration": "1h"}, 422, "gpu_ids",
              f"node {node} has no GPU 7"),
             ({"name": "x", "gpus": 9, "users": ["root"], "duration": "1h"}, 422, "gpus", "has 4 GPUs; cannot reserve 9"),
             ({"name": "x", "gpus": 1, "users": ["root"], "start": "now+2hours", "end": "now+1hour"}, 422, "end",
              "ends before it starts"),
             ({"name": "x", "gpus": 1, "users": ["root"]}, 422, "duration", "needs an end"),
             ({"name": "x", "gpus": 1, "duration": "1h"}, 422, "users", "needs users or accounts"),
             ({"name": "x", "gpu_ids": [1, 2], "users": ["root"], "duration": "1h"}, 409, None, "in reservation taken"),
             ({"name": "taken", "gpus": 1, "users": ["root"], "duration": "1h"}, 409, None, "exists already")]
    for body, status, field, words in cases:
        with pytest.raises(CorralError) as caught:
            client._request("POST", "/api/v1/reservations", body)
        assert caught.value.status == status and words in caught.value.message, (body, caught.value.message)
        if field is not None:
            assert caught.value.field == field
    with pytest.raises(CorralError) as caught:
        client.submit(["true"], gpus=1, reservation="nope")
    assert caught.value.status == 422 and caught.value.field == "reservation"
    assert "no reservation 'nope' (Requested reservation is invalid)" in caught.value.message
    refused = corral(server, "reservation", "delete", "nope", code=1).output
    assert "no such reservation" in refused
    assert [r["name"] for r in client.reservations()] == ["taken"]


def test_a_reservation_never_promises_cpus_or_memory_running_jobs_hold(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)  # 16 CPUs, 64 GB
    client = server.client()
    busy = client.submit(["sleep", "300"], cpus=12, mem="40G", time="30:00")
    running(client, busy["id"])
    refused = corral(server, "reservation", "create", "demo", "--gpus", "2", "--cpus", "8", "--users", "root",
                     "--duration", "1h", code=1).output
    assert "has 4 of 16 CPUs free over the window" in refused and f"job {busy['id']} (until " in refused
    assert "ask for at most 4" in refused
    assert client.reservations() == []
    # the GPUs' share (8 CPUs, 32 GB) shrinks to what the job leaves
    made = corral(server, "reservation", "create", "demo", "--gpus", "2", "--users", "root", "--duration", "1h").output
    assert " with 4 CPUs and 24G memory, " in made
    assert (client.reservations()[0]["cpus"], client.reservations()[0]["mem_mb"]) == (4, 24 * 1024)
    inside = client.submit(["sleep", "300"], gpus=1, cpus=3, time="10:00", reservation="demo")
    running(client, inside["id"])
    shrink = corral(server, "reservation", "update", "demo", "--cpus", "2", code=1).output
    assert f"its running jobs ({inside['id']}) hold 3 CPUs" in shrink
    assert client.reservations()[0]["cpus"] == 4
    # a job in a reservation holds part of it, not more: a second reservation beside it gets the rest
    client.cancel(busy["id"])
    wait_for(lambda: client.get(busy["id"])["state"] == "CANCELLED")
    beside = client.create_reservation(name="beside", gpus=2, cpus=12, users=["root"], duration="1h")
    assert (beside["gpus"], beside["cpus"]) == ([2, 3], 12)  # all that demo's 4 leave
    assert client.update_reservation("beside", users=["root", "nobody"])["cpus"] == 12
    client.cancel(inside["id"])


@pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")
def test_a_user_who_is_no_admin_may_not_reserve_nor_use_a_reservation_not_theirs(server_factory, os_users, shared_dir):
    alice, bob = os_users
    server = server_factory(gpus=4, extra=ROOMY, home=os.path.join(shared_dir, "home"))
    with Client(home=server.home) as root:
        token = root.create_token(user=alice, scope="submit", expires="1h")["token"]
        root.create_reservation(name="bobs", gpus=2, users=[bob], duration="1h")
    refused = corral(server, "reservation", "create", "mine", "--gpus", "1", "--users", alice, "--duration", "1h",
                     token=token, code=1).output
    assert "creating reservation mine needs a credential with admin scope" in refused
    refused = corral(server, "reservation", "delete", "bobs", token=token, code=1).output
    assert "deleting reservation bobs needs a credential with admin scope" in refused
    refused = corral(server, "submit", "--gpus", "1", "--reservation", "bobs", "--wrap", "true", token=token,
                     code=1).output
    assert f"reservation bobs is for users {bob}; user {alice} may not use it" in refused
    assert "Access denied to requested reservation" in refused
    assert [r["name"] for r in server.client().reservations()] == ["bobs"]


def test_a_reservation_outlives_a_restart_and_still_keeps_its_gpus(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    client.create_reservation(name="kept", gpu_ids=[0, 1], users=["root"], accounts=None, duration="1h")
    before = client.reservations()
    server.stop()
    server.start()
    client = server.client()
    assert client.reservations() == before
    outside = client.submit(["sleep", "300"], gpus=3, time="10:00")
    assert waiting(client, outside["id"])["reason"] in ("Resources", "Priority")  # only 2 GPUs are not reserved
    inside = client.submit(["sleep", "300"], gpus=2, time="10:00", reservation="kept")
    assert sorted(running(client, inside["id"])["gpu_ids"]) == [0, 1]
    for j in (outside, inside):
        client.cancel(j["id"])
