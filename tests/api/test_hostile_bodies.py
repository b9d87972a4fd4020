"""Hostile input to a live server: a clear 422 naming the field, never a server error (issue 15, items 6 and 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.api.test_jobs_api import call
from tests.helpers import wait_for

DEEP = b"[" * 200_000
JSON_ROUTES = [
    ("POST", "/api/v1/jobs"), ("POST", "/api/v1/runs"), ("POST", "/api/v1/tokens"), ("POST", "/api/v1/session"),
    ("POST", "/api/v1/alerts/rules"), ("POST", "/api/v1/alerts/channels"), ("PATCH", "/api/v1/jobs/{job}"),
    ("POST", "/api/v1/runs/{run}/params"), ("POST", "/api/v1/runs/{run}/tags"), ("POST", "/api/v1/runs/{run}/finish"),
    ("POST", "/api/v1/runs/{run}/artifacts"), ("POST", "/api/v1/runs/{run}/metrics"), ("POST", "/api/v1/jobs/attach"),
]


def nested(depth: int) -> dict:
    value: dict = {"a": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture
def pending(server):
    """(server, a job that stays pending, a run): the job waits on a running sleep."""
    status, blocker, _ = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "600"], "name": "blocker"})
    assert status == 201, blocker
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "dependency": f"afterok:{blocker['id']}"})
    assert status == 201, job
    run = call(server, "POST", "/api/v1/runs", {"project": "hostile"})[1]
    yield server, job["id"], run["id"]
    call(server, "POST", f"/api/v1/jobs/{blocker['id']}/cancel")


def test_200000_open_brackets_to_every_json_route_is_a_422_never_a_recursion_error(pending):
    server, job, run = pending
    for method, path in JSON_ROUTES:
        status, answer, _ = call(server, method, path.format(job=job, run=run), raw=DEEP)
        assert status == 422, (path, answer)
        assert answer["error"]["code"] == "invalid" and ("deep" in answer["error"]["message"]
                                                     or "depth" in answer["error"]["message"]), (path, answer)
    assert call(server, "GET", "/api/v1/health")[0] == 200


@pytest.mark.parametrize("method, path, body, field", [
    ("POST", "/api/v1/runs", {"project": "p", "config": nested(900)}, "config"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "gpus": "A100:" + "9" * 5000}, "gpus"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "cpus": "9" * 5000}, "cpus"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "mem": "9" * 5000 + "G"}, "mem"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "time": "9" * 5000}, "time"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "array": "9" * 5000}, "array"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "nice": 10**40}, "nice"),
    ("POST", "/api/v1/runs", {"project": "p", "job_id": "²"}, "job_id"),
    ("POST", "/api/v1/runs", {"project": "p", "job_id": "٣"}, "job_id"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "name": "a\ud800"}, "name"),
    ("POST", "/api/v1/runs", {"project": "p", "name": "a\ud800"}, "name"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "name": "invoice\u202efdp.exe"}, "name"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "name": "x\x1b]0;owned\x07"}, "name"),
    ("POST", "/api/v1/jobs", {"command": ["true"], "labels": {"team": "a\u2066b"}}, "labels.team"),
])
def test_values_that_gave_500s_are_422s_naming_the_field(refusing_server, method, path, body, field):
    status, answer, _ = call(refusing_server, method, path, body)
    assert status == 422, answer
    assert answer["error"]["field"] == field, answer


@pytest.mark.parametrize("body, field", [
    ({"command": ["sh", "-c", "sleep 600 # \ud800"]}, "command[2]"),
    ({"command": ["sleep", "600"], "labels": {"team": "\udc00"}}, "labels.team"),
])
def test_a_lone_surrogate_is_refused_at_the_door_and_the_queue_keeps_answering(server, body, field):
    status, answer, _ = call(server, "POST", "/api/v1/jobs", body)
    assert status == 422 and answer["error"]["field"] == field, answer
    for path in ("/api/v1/queue", "/api/v1/jobs", "/api/v1/top"):
        assert call(server, "GET", path)[0] == 200


def test_a_batch_script_over_max_script_mb_is_refused_naming_the_setting(server_factory, short_tmp):
    home = os.path.join(short_tmp, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[server]\nmax_script_mb = 1\n")
    server = server_factory(home=home)
    big = "#!/bin/sh\n" + "# " + "x" * (1 << 20) + "\ntrue\n"
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {"script": big, "submit_dir": short_tmp})
    assert status == 422 and answer["error"]["field"] == "script", answer
    assert "max_script_mb" in answer["error"]["message"]
    fits = "#!/bin/sh\n" + "# " + "x" * (1 << 19) + "\necho fits\n"
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"script": fits, "submit_dir": short_tmp})
    assert status == 201, job
    assert call(server, "GET", f"/api/v1/jobs/{job['id']}")[1]["script"] == fits  # `corral show` still has it
    done = wait_for(lambda: (j := call(server, "GET", f"/api/v1/jobs/{job['id']}")[1])["state"] == "COMPLETED" and j)
    with open(done["stdout_path"]) as f:
        assert f.read() == "fits\n"


def test_the_default_script_cap_is_4_mb_as_slurms(server):
    script = "#!/bin/sh\n" + "#" * (4 << 20) + "\n"
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {"script": script})
    assert status == 422 and answer["error"]["field"] == "script" and "4 MB" in answer["error"]["message"], answer


ARRAY = ",".join(str(i) for i in range(0, 200_000, 2))  # 100,000 listed indices


def test_an_array_of_100000_listed_indices_is_one_short_row_of_everyones_queue(server_factory, short_tmp):
    server = server_factory(gpus=0)
    status, blocker, _ = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "600"]})
    assert status == 201
    status, array, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "array": ARRAY,
                                                            "dependency": f"afterok:{blocker['id']}"})
    assert status == 201, array
    try:
        listed = {j["id"]: j for j in call(server, "GET", "/api/v1/jobs")[1]["jobs"]}
        assert len(listed[array["id"]]["ref"]) <= 64 and listed[array["id"]]["ref"].startswith(f"{array['id']}_[0,2,4,")
        assert len(listed[array["id"]]["array"]) <= 64
        queue = call(server, "GET", "/api/v1/queue")[1]
        assert all(len(j["ref"]) <= 64 for j in queue["jobs"])
        out = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, "queue"], capture_output=True,
                             timeout=60, check=True).stdout
        assert len(out) < 2000, len(out)
        assert f"{array['id']}_[0,2,4,".encode() in out and b"...+" in out
        shown = call(server, "GET", f"/api/v1/jobs/{array['id']}")[1]
        assert shown["array"] == ARRAY  # the job itself keeps every index
    finally:
        call(server, "POST", f"/api/v1/jobs/{array['id']}/cancel")
        call(server, "POST", f"/api/v1/jobs/{blocker['id']}/cancel")


def test_show_and_queue_print_another_users_escape_sequences_as_visible_text(server_factory):
    server = server_factory(gpus=0)
    status, blocker, _ = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "600"]})
    command = ["sh", "-c", "true \x1b]0;owned\x07\x1b[2J \u202egnp.sh"]
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": command, "dependency": f"afterok:{blocker['id']}"})
    assert status == 201, job
    try:
        for args in (["show", str(job["id"])], ["queue"], ["history"]):
            out = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, *args], capture_output=True,
                                 timeout=60, check=True).stdout.decode()
            assert not any(ch in out for ch in "\x1b\x07\u202e"), (args, out)
        shown = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, "show", str(job["id"])],
                               capture_output=True, timeout=60, check=True).stdout.decode()
        assert "\\x1b]0;owned\\x07" in shown and "\\u202egnp.sh" in shown
        as_json = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, "show", "--json",
                                  str(job["id"])], capture_output=True, timeout=60, check=True).stdout
        assert json.loads(as_json)["command"] == command  # the data itself is unchanged
    finally:
        call(server, "POST", f"/api/v1/jobs/{job['id']}/cancel")
        call(server, "POST", f"/api/v1/jobs/{blocker['id']}/cancel")


def test_an_environment_variable_that_is_not_utf8_still_reaches_the_job_as_its_bytes(server_factory, short_tmp):
    server = server_factory(gpus=0)  # what the CLI sends from os.environ: a byte that is not UTF-8 as U+DCE9
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "command": ["sh", "-c", 'printf %s "$X"'], "submit_dir": short_tmp,
        "environment": {"PATH": "/usr/bin:/bin", "X": "caf\udce9"}})
    assert status == 201, job
    done = wait_for(lambda: (j := call(server, "GET", f"/api/v1/jobs/{job['id']}")[1])["state"] == "COMPLETED" and j)
    with open(done["stdout_path"], "rb") as f:
        assert f.read() == b"caf\xe9"
