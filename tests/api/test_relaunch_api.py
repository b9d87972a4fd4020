"""Running jobs again and sweeps through the API, against a live server, as real accounts where it matters."""

from __future__ import annotations

import os
import sys

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


def test_a_rerun_is_the_callers_job_with_changes_linked_to_its_parent(server_factory, short_tmp):
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


def test_only_the_owner_or_an_admin_may_run_a_job_again_and_it_runs_as_them(server_factory, os_users, shared_dir):
    alice, bob = os_users
    server = server_factory(gpus=1, home=os.path.join(shared_dir, "home"))  # where alice's logs can go
    with Client(home=server.home) as root:
        tokens = {u: root.create_token(user=u, expires="1h")["token"] for u in (alice, bob)}
        with Client(server.url, token=tokens[alice]) as as_alice, Client(server.url, token=tokens[bob]) as as_bob:
            job = as_alice.submit(["id", "-un"], submit_dir="/tmp")
            assert as_alice.wait(job["id"], timeout=60)["state"] == "COMPLETED"
            with pytest.raises(Forbidden) as exc:
                as_bob.resubmit(job["id"])
            assert "owner" in exc.value.message
            mine = as_alice.resubmit(job["id"])
            assert mine["user"] == alice
            admins = root.resubmit(job["id"])
            assert admins["user"] == "root" and admins["parent"] == job["id"]
            assert root.wait(admins["id"], timeout=60)["state"] == "COMPLETED"
            assert root.logs(admins["id"])[0].strip() == b"root"  # the submitter, never the original owner


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
