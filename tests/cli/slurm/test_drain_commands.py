"""`scontrol update NodeName=... State=DRAIN|RESUME`, and a drained node in sinfo and scontrol show node, on a live
server: a job on the node runs on (DRAINING), then the node is DRAINED; nothing new starts there until it resumes."""

from __future__ import annotations

import re

from tests.cli.test_drain_cli import waiting
from tests.helpers import wait_for

ROOMY = ["--cpus", "16", "--mem", "64G"]  # a CPU for each job: the machine may have two


def test_scontrol_drains_a_node_its_job_runs_on_and_sinfo_and_show_node_say_draining_then_drained(
        server_factory, slurm_shell):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    shell = slurm_shell(server.home)
    first = client.submit(["sleep", "300"], gpus=1)
    wait_for(lambda: client.get(first["id"])["state"] == "RUNNING", timeout=30)

    refused = shell(f"scontrol update NodeName={node} State=DRAIN")
    assert refused.returncode == 1 and "You must specify a reason" in refused.stderr
    drained = shell(f'scontrol update NodeName={node} State=DRAIN Reason="fan failure"')
    assert drained.returncode == 0, drained.stderr
    assert client.get(first["id"])["state"] == "RUNNING"
    view = client.nodes()[0]
    assert (view["state"], view["reason"], view["reason_by"]) == ("draining", "fan failure", "root")
    assert {g["drain_state"] for g in view["gpus"]} == {"DRAINING", "DRAINED"}

    show = shell(f"scontrol show node {node}").stdout
    assert "State=DRAINING " in show
    assert re.search(r"^   Reason=fan failure \[root@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]$", show, re.M), show
    assert shell("sinfo -h -o %t").stdout.split() == ["drng"]
    cpu_only = client.submit(["sleep", "300"], gpus=0)
    assert waiting(client, cpu_only["id"])["reason"] == f"ReqNodeNotAvail, {node} drained: fan failure"

    client.cancel(first["id"])
    wait_for(lambda: client.nodes()[0]["state"] == "drained", timeout=30)
    assert "State=DRAINED " in shell(f"scontrol show node {node}").stdout
    assert shell("sinfo -h -o %t").stdout.split() == ["drain"]
    reasons = shell("sinfo -R").stdout.splitlines()
    assert reasons[0].split() == ["REASON", "USER", "TIMESTAMP", "NODELIST"]
    assert reasons[1].startswith("fan failure ") and reasons[1].split()[-1] == node and " root " in reasons[1]
    assert client.get(cpu_only["id"])["state"] == "PENDING"

    bad = shell("scontrol update NodeName=nosuchnode State=RESUME")
    assert bad.returncode == 1 and "Invalid node name specified" in bad.stderr
    assert shell(f"scontrol update NodeName={node} State=BOGUS").returncode == 1
    resumed = shell(f"scontrol update NodeName={node} State=RESUME")
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: client.get(cpu_only["id"])["state"] == "RUNNING", timeout=30)
    assert "Reason=" not in shell(f"scontrol show node {node}").stdout
    assert shell("sinfo -R -h").stdout == ""
    client.cancel(cpu_only["id"])


def test_a_drained_gpu_shows_its_reason_on_the_node_without_draining_the_node(server_factory, slurm_shell):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    client.drain(node, "XID 79", [2])
    shell = slurm_shell(server.home)
    show = shell(f"scontrol show node {node}").stdout
    assert "State=IDLE " in show and re.search(r"^   Reason=gpu 2: XID 79 \[root@", show, re.M), show
    assert shell("sinfo -h -o %t").stdout.split() == ["idle"]
