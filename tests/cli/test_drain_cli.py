"""Draining GPUs and nodes by hand (issue 22, point 4) on a live server with 4 declared GPUs: `corral drain` and
`corral resume`, what the scheduler does with a drained GPU, what `corral nodes` and the API show, and that a
drain outlives a restart."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.client import Client
from corral.errors import CorralError
from tests.helpers import wait_for

ROOMY = ["--cpus", "16", "--mem", "64G"]  # a CPU for each job: the machine may have two


def corral(server, *args: str, code: int = 0, token: str | None = None):
    env = {"CORRAL_TOKEN": token} if token else {}
    result = CliRunner().invoke(cli, ["--url", server.url, *args], env=env)
    assert result.exit_code == code, result.output
    return result


def waiting(client: Client, job_id: int) -> dict:
    """The job once a scheduling pass has given it a reason."""
    return wait_for(lambda: (j := client.get(job_id))["state"] == "PENDING" and j["reason"] not in (None, "None") and j,
                    timeout=30)


def running(client: Client, job_id: int) -> dict:
    return wait_for(lambda: (j := client.get(job_id))["state"] == "RUNNING" and j, timeout=30)


def test_no_job_lands_on_a_drained_gpu_one_that_needs_it_says_so_and_runs_once_it_is_resumed(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    assert corral(server, "drain", "2", "--reason", "XID 79").output.strip() == f"GPU 2 of node {node} drained: XID 79"
    whole = client.submit(["sleep", "300"], gpus=4, name="needs-all")
    reason = waiting(client, whole["id"])["reason"]
    assert reason == f"ReqNodeNotAvail, {node} GPU 2 drained: XID 79"
    small = [client.submit(["sleep", "300"], gpus=1, name=f"small{i}") for i in range(4)]
    held = sorted(g for job in small[:3] for g in running(client, job["id"])["gpu_ids"])
    assert held == [0, 1, 3]
    assert waiting(client, small[3]["id"])["reason"] == "Resources"  # a free-looking GPU 2 is not given to it

    gpu2 = client.nodes()[0]["gpus"][2]
    assert gpu2["drained"]["reason"] == "XID 79" and gpu2["drained"]["by"] == "root" and gpu2["drain_state"] == "DRAINED"
    assert gpu2["drained"]["at"].endswith("Z") or "+00:00" in gpu2["drained"]["at"]
    assert [g["drained"] for g in client.nodes()[0]["gpus"] if g["index"] != 2] == [None, None, None]
    table = corral(server, "nodes").output
    row = next(line for line in table.splitlines() if line.split()[:2] == [node, "2"])
    assert "DRAINED: XID 79 [root@" in row

    for job in small:
        client.cancel(job["id"])
    assert "resumed" in corral(server, "resume", "2").output
    assert sorted(running(client, whole["id"])["gpu_ids"]) == [0, 1, 2, 3]
    assert client.nodes()[0]["gpus"][2]["drained"] is None
    client.cancel(whole["id"])


def test_a_drain_outlives_a_restart_with_its_reason_who_and_when(server_factory):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    client.drain(node, "ECC errors", [1, 3])
    before = [g["drained"] for g in client.nodes()[0]["gpus"]]
    server.stop()
    server.start()
    client = server.client()
    assert [g["drained"] for g in client.nodes()[0]["gpus"]] == before
    assert before[1]["reason"] == "ECC errors" and before[0] is None
    job = client.submit(["sleep", "300"], gpus=3)
    assert waiting(client, job["id"])["reason"].startswith("ReqNodeNotAvail, ")
    two = client.submit(["sleep", "300"], gpus=2)
    assert sorted(running(client, two["id"])["gpu_ids"]) == [0, 2]
    for j in (job, two):
        client.cancel(j["id"])


def test_bad_drains_are_refused_naming_the_field(refusing_server):
    client = refusing_server.client()
    node = client.nodes()[0]["name"]
    cases = [(lambda: client.drain(node, "x", [7]), "gpus", f"node {node} has no GPU 7 (its GPUs are 0, 1, 2, 3)"),
             (lambda: client.drain(node, "  ", [0]), "reason", "a drain needs a reason"),
             (lambda: client.drain(node, "x", []), "gpus", "non-empty list"),
             (lambda: client._request("POST", f"/api/v1/nodes/{node}/drain", {"reason": "x", "gpus": ["a"]}),
              "gpus", "GPU indexes"),
             (lambda: client._request("POST", f"/api/v1/nodes/{node}/drain", {"reason": "x", "gpu": 1}),
              "gpu", "is no field")]
    for call, field, words in cases:
        with pytest.raises(CorralError) as caught:
            call()
        assert caught.value.status == 422 and caught.value.field == field and words in caught.value.message, field
    with pytest.raises(CorralError) as caught:
        client.drain("nosuchnode", "x")
    assert caught.value.status == 404 and "node 'nosuchnode': no such node here" in caught.value.message
    with pytest.raises(CorralError) as caught:
        client.resume(node, [1])
    assert caught.value.status == 409 and f"GPU 1 of node {node} is not drained" in caught.value.message
    refused = corral(refusing_server, "drain", "1", code=2)  # click: --reason is required
    assert "--reason" in refused.output
    assert "a drain needs a reason" in corral(refusing_server, "drain", "1", "--reason", "", code=1).output
    assert [g["drained"] for g in client.nodes()[0]["gpus"]] == [None] * 4


@pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")
def test_a_user_who_is_no_admin_may_not_drain_or_resume(server_factory, os_users, shared_dir):
    alice, _ = os_users
    server = server_factory(gpus=4, extra=ROOMY, home=os.path.join(shared_dir, "home"))
    with Client(home=server.home) as root:
        token = root.create_token(user=alice, scope="submit", expires="1h")["token"]
        node = root.nodes()[0]["name"]
        root.drain(node, "fan", [0])
    refused = corral(server, "drain", "1", "--reason", "mine now", token=token, code=1).output
    assert f"draining GPU 1 of node {node} needs a credential with admin scope" in refused
    refused = corral(server, "resume", "0", token=token, code=1).output
    assert f"resuming GPU 0 of node {node} needs a credential with admin scope" in refused
    assert [g["drained"] is not None for g in server.client().nodes()[0]["gpus"]] == [True, False, False, False]
