"""Running jobs again and sweeps through the API, against a live server, as real accounts where it matters."""

from __future__ import annotations

import os
import pwd
import shlex
import sys
from dataclasses import dataclass

import pytest

from corral.client import Client
from corral.errors import Forbidden, InvalidRequest, NotFound

SWEEP_TASK = """
import corral, os
run = corral.init(project="sweep", flush_interval_s=0.1)
lr = float(os.environ["SWEEP_LR"])
for step in range(3):
    run.log(dict(loss=lr * (3 - step)), step=step)
run.finish()
"""


def test_a_rerun_of_ones_own_job_takes_changes_and_is_linked_to_its_parent(server_factory, short_tmp):
    server = server_factory(gpus=1)
    with server.client() as client:
        first = client.submit(["sh", "-c", "echo X=$X"], env={"X": "1"}, workdir=short_tmp, time="10:00",
                              labels={"try": "1"})
        assert client.wait(first["id"], timeout=60)["state"] == "COMPLETED"
        again = client.resubmit(first["id"], time="5:00", env={"X": "2"}, labels={"try": "2"})
        assert again["parent"] == first["id"] and client.get(first["id"])["parent"] is None
        assert (again["time_limit_s"], again["labels"], again["workdir"]) == (300, {"try": "2"}, short_tmp)
        assert client.wait(again["id"], timeout=60)["state"] == "COMPLETED"
        assert client.logs(again["id"])[0].strip() == b"X=2"
        same = client.resubmit(again["id"])
        assert same["parent"] == again["id"] and same["command"] == first["command"]

        # the API's refusals name the field, as a submit's do
        with pytest.raises(InvalidRequest) as exc:
            client.resubmit(first["id"], gpus="lots")
        assert exc.value.field == "gpus"
        with pytest.raises(InvalidRequest) as exc:
            client.resubmit(first["id"], bogus=1)
        assert exc.value.field == "bogus"
        with pytest.raises(NotFound):
            client.resubmit(99999)


@dataclass
class OwnersJob:
    """A finished job of `owner`'s whose command, `hostname`, is the fake one first in their PATH: each run of it
    appends the uid it ran as to `uids` (root could write there too: a rerun as root would leave a 0)."""

    owner: str
    uid: int
    job_id: int
    uids: str

    def ran_as(self) -> list[int]:
        with open(self.uids) as f:
            return [int(line) for line in f.read().split()]


def owners_hostname_job(server, shared_dir: str, owner: str) -> OwnersJob:
    """Submit, as `owner` (with a token of theirs), `-- hostname` with their own directory first in PATH, holding a
    fake `hostname`; wait for it."""
    entry = pwd.getpwnam(owner)
    bin_dir = os.path.join(shared_dir, f"{owner}-bin")
    os.mkdir(bin_dir)
    uids = os.path.join(bin_dir, "uids")
    fake = os.path.join(bin_dir, "hostname")
    with open(fake, "w") as f:
        f.write(f"#!/bin/sh\nid -u >> {shlex.quote(uids)}\necho fake-host\n")
    open(uids, "w").close()
    for path in (bin_dir, fake, uids):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(fake, 0o755)
    with Client(home=server.home) as root:
        token = root.create_token(user=owner, expires="1h")["token"]
    with Client(server.url, token=token) as as_owner:
        job = as_owner.submit(["hostname"], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, submit_dir="/tmp")
        assert as_owner.wait(job["id"], timeout=60)["state"] == "COMPLETED"
    made = OwnersJob(owner, entry.pw_uid, job["id"], uids)
    assert made.ran_as() == [entry.pw_uid]
    return made


def test_an_admins_rerun_runs_as_the_owner_once_the_admin_names_them(server_factory, os_users, shared_dir):
    alice, bob = os_users
    server = server_factory(gpus=1, home=os.path.join(shared_dir, "home"))  # where alice's logs can go
    first = owners_hostname_job(server, shared_dir, alice)
    with Client(home=server.home) as root:
        tokens = {u: root.create_token(user=u, expires="1h")["token"] for u in (alice, bob)}
        with Client(server.url, token=tokens[alice]) as as_alice, Client(server.url, token=tokens[bob]) as as_bob:
            with pytest.raises(Forbidden) as forbidden:
                as_bob.resubmit(first.job_id, confirm_owner=alice)
            assert "owner" in forbidden.value.message
            # root (an admin) is told whose job it is, and what to send; nothing is submitted
            for confirm in (None, bob, "root"):
                with pytest.raises(InvalidRequest) as exc:
                    root.resubmit(first.job_id, confirm_owner=confirm)
                assert exc.value.field == "confirm_owner" and exc.value.status == 422
                assert alice in exc.value.message and f'"confirm_owner": "{alice}"' in exc.value.message
            admins = root.resubmit(first.job_id, confirm_owner=alice)
            assert admins["id"] == first.job_id + 1, "a refused rerun submitted a job"
            assert (admins["user"], admins["parent"]) == (alice, first.job_id)
            assert root.wait(admins["id"], timeout=60)["state"] == "COMPLETED"
            assert first.ran_as() == [first.uid, first.uid]  # the owner's fake hostname ran as the owner, never as 0
            assert root.logs(admins["id"])[0].strip() == b"fake-host"
            shown = root.get(admins["id"])
            assert shown["stdout_path"].startswith(os.path.join(server.home, "logs", alice))
            asked = [e for e in shown["events"] if e["kind"] == "run_again"]
            assert [(e["by_user"], e["of_job"]) for e in asked] == [("root", first.job_id)]

            mine = as_alice.resubmit(first.job_id)  # the owner's own rerun: as easy as ever
            assert (mine["user"], mine["parent"]) == (alice, first.job_id)
            assert as_alice.wait(mine["id"], timeout=60)["state"] == "COMPLETED"
            assert first.ran_as() == [first.uid] * 3
            assert [(e["by_user"]) for e in as_alice.get(mine["id"])["events"] if e["kind"] == "run_again"] == [alice]


def test_a_sweep_is_one_array_whose_tasks_get_their_values_and_whose_runs_are_ranked(server_factory, short_tmp):
    server = server_factory(gpus=2)
    with server.client() as client:
        answer = client.sweep([sys.executable, "-c", SWEEP_TASK, "--lr", "{lr}", "--bs", "{bs}"],
                              {"lr": "0.1,0.3", "bs": "32,64"}, concurrency=2, workdir=short_tmp, gpus=0)
        assert answer["method"] == "grid" and len(answer["tasks"]) == 4
        array = answer["job"]
        assert array["array"] == "0-3%2"
        client.wait(array["id"], timeout=120)
        view = client.get_sweep(array["id"])
        assert [t["state"] for t in view["tasks"]] == ["COMPLETED"] * 4, view["tasks"]
        assert view["metric"] == "loss" and view["lower_is_better"]
        assert [t["values"] for t in view["tasks"]][:2] == [{"lr": "0.1", "bs": "32"}, {"lr": "0.1", "bs": "64"}]
        assert view["tasks"][0]["best"] == pytest.approx(0.1) and view["tasks"][0]["final"] == pytest.approx(0.1)
        assert view["best"]["values"]["lr"] == "0.1"
        # the SDK took the task's values as the run's config
        run = client.get_run(view["tasks"][3]["run"]["uid"])
        assert run["config"]["lr"] == 0.3 and run["config"]["bs"] == 64

        # a random search: the same seed, the same tasks; ranges sampled
        one = client.sweep(["echo", "{lr}"], ["lr=loguniform:1e-5:1e-2"], samples=3, seed=5, workdir=short_tmp)
        two = client.sweep(["echo", "{lr}"], ["lr=loguniform:1e-5:1e-2"], samples=3, seed=5, workdir=short_tmp)
        assert one["tasks"] == two["tasks"] and one["method"] == "random" and one["seed"] == 5
        client.wait(one["job"]["id"], timeout=60)
        assert client.logs(f"{one['job']['id']}_1")[0].strip().decode() == one["tasks"][1]["lr"]

        with pytest.raises(InvalidRequest) as exc:
            client.sweep(["echo", "{lr}", "{oops}"], {"lr": "1,2"}, workdir=short_tmp)
        assert exc.value.field == "command"
        with pytest.raises(InvalidRequest) as exc:
            client.sweep(["echo", "{lr}"], {"lr": "uniform:1:0"}, samples=2, workdir=short_tmp)
        assert exc.value.field == "params.lr"
        with pytest.raises(NotFound):
            client.get_sweep(answer["tasks"] and 99999)
