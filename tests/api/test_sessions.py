"""The dashboard's login session against a live server: a credential of its own (cookie AND key), ended by
logging out, by its lifetime and by its token; never a token, nor taken for one. And API tokens: their
expiry holds on every use, however recently the server looked them up.

The tests run as root; a browser elsewhere is played with `X-Forwarded-For`, as a proxy in front of
corral sends it, so that the kernel's word (the local peer) counts for nothing.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import time
import urllib.parse
from dataclasses import dataclass

import pytest

from corral.client import Client
from corral.store.db import database_url, open_engine
from corral.store.tokens import TokenStore
from tests.helpers import wait_for

REMOTE = {"X-Forwarded-For": "203.0.113.9"}


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)

    def error(self) -> str:
        return self.json()["error"]["message"]


def call(server, method: str, path: str, headers: dict | None = None, body: object = None) -> Answer:
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=payload, headers={**({"Content-Type": "application/json"} if payload else {}),
                                                      **(headers or {})})
    response = conn.getresponse()
    answer = Answer(response.status, response.headers, response.read())
    conn.close()
    return answer


@dataclass
class Login:
    cookie: str  # the Cookie header's value, as the browser sends it
    key: str
    answer: dict

    def headers(self) -> dict:
        """What the dashboard's page sends: the cookie and the key."""
        return {"Cookie": self.cookie, "X-Corral-Session": self.key}


def log_in(server, token: str) -> Login:
    answer = call(server, "POST", "/api/v1/session", REMOTE, {"token": token})
    assert answer.status == 200, answer.body
    cookie = answer.headers["set-cookie"].split(";")[0]
    return Login(cookie, answer.json()["session_key"], answer.json())


def open_stream(server, headers: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """GET /api/v1/events, its first bytes read: the stream is open."""
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", "/api/v1/events", headers=headers)
    events = conn.getresponse()
    assert events.status == 200 and events.read1(64).startswith(b"retry:")
    return conn, events


def epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def server(server_factory):
    return server_factory(gpus=0)


def test_a_login_is_a_session_of_its_own_not_the_token(server):
    made = server.client().create_token(user="alice", scope="submit", expires="1h")
    login = log_in(server, made["token"])
    assert made["token"] not in login.cookie and made["token"] not in json.dumps(login.answer)
    assert (login.answer["user"], login.answer["scope"], login.answer["token_id"]) == ("alice", "submit", made["id"])
    me = call(server, "GET", "/api/v1/whoami", {**REMOTE, **login.headers()})
    assert me.status == 200 and (me.json()["user"], me.json()["via"]) == ("alice", "session")


def test_logging_out_ends_the_session_on_the_server_and_its_open_stream(server):
    token = server.client().create_token(user="alice", scope="submit", expires="1h")["token"]
    login = log_in(server, token)
    stream, events = open_stream(server, {**REMOTE, **login.headers()})

    logout = call(server, "DELETE", "/api/v1/session", {**REMOTE, **login.headers()})
    assert logout.status == 204 and 'corral_session=""' in logout.headers["set-cookie"]
    # whoever kept a copy of the cookie and the key (a replay) gets nothing now
    replay = call(server, "GET", "/api/v1/whoami", {**REMOTE, **login.headers()})
    assert replay.status == 401 and "session has ended" in replay.error()
    # and what was already streaming to it stops (read() returns at the end of the response, or times out)
    events.read()
    stream.close()
    # the token itself is untouched: it may log in again
    assert call(server, "GET", "/api/v1/whoami", {"Authorization": f"Bearer {token}"}).status == 200


def test_a_revoked_token_ends_its_sessions_and_a_session_never_outlives_its_token(server):
    admin = server.client()
    made = admin.create_token(user="alice", scope="read", expires="1m")
    login = log_in(server, made["token"])
    assert login.answer["expires"] == made["expires"]  # 8 hours by default, but the token lasts one minute
    assert call(server, "GET", "/api/v1/jobs", login.headers()).status == 200
    streams = [open_stream(server, login.headers()), open_stream(server, {"Authorization": f"Bearer {made['token']}"})]
    admin.revoke_token(made["id"])
    answer = call(server, "GET", "/api/v1/jobs", login.headers())
    assert answer.status == 401 and "session has ended" in answer.error()
    for conn, events in streams:  # what streamed to the session and to the token stops too (else read() times out)
        events.read()
        conn.close()


def test_a_session_ends_after_session_hours_and_is_refused_from_that_moment(server_factory, short_tmp):
    home = os.path.join(short_tmp, "short")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[auth]\nsession_hours = 0.003\n")  # 10.8 s
    server = server_factory(gpus=0, home=home)
    token = server.client().create_token(user="alice", scope="read", expires="1h")["token"]
    login = log_in(server, token)
    expires = epoch(login.answer["expires"])
    assert 10 <= expires - epoch(login.answer["created"]) <= 11  # ISO times are to the second
    seen = []

    def refused() -> bool:
        sent = time.time()
        status = call(server, "GET", "/api/v1/whoami", login.headers()).status
        seen.append((sent, status))
        return status == 401

    wait_for(refused, timeout=60, interval=0.2)
    assert seen[0][1] == 200  # it worked while it lasted
    # never an answer for a request sent after it expired (the ISO time is to the second, hence the +1)
    assert all(sent < expires + 1 for sent, status in seen if status == 200), seen
    assert call(server, "GET", "/api/v1/whoami", login.headers()).status == 401


def test_a_session_is_no_bearer_token_and_a_token_is_no_session_cookie(server):
    token = server.client().create_token(user="alice", scope="submit", expires="1h")["token"]
    # the raw token in the cookie (what the dashboard kept before, and what another port saw): refused
    answer = call(server, "GET", "/api/v1/whoami", {"Cookie": f"corral_session={token}"})
    assert answer.status == 401 and "no dashboard session" in answer.error() and "Bearer" in answer.error()
    login = log_in(server, token)
    answer = call(server, "GET", "/api/v1/whoami", {"Cookie": f"corral_session={token}", "X-Corral-Session": login.key})
    assert answer.status == 401
    cookie_value = login.cookie.partition("=")[2]
    for secret in (cookie_value, login.key, f"{cookie_value} {login.key}"):
        answer = call(server, "GET", "/api/v1/whoami", {"Authorization": f"Bearer {secret}"})
        assert answer.status == 401, secret
        assert "works only in the dashboard" in answer.error() and "corral token create" in answer.error()
    # either half alone is nothing: the cookie without its key is refused, not ignored (the peer here is root)
    answer = call(server, "GET", "/api/v1/whoami", {"Cookie": login.cookie})
    assert answer.status == 401 and "needs its key" in answer.error()
    assert call(server, "GET", "/api/v1/whoami", {**REMOTE, "X-Corral-Session": login.key}).status == 401
    wrong = {"Cookie": login.cookie, "X-Corral-Session": login.key[:-2] + "AA"}
    assert call(server, "GET", "/api/v1/whoami", wrong).status == 401
    # a cookie planted by a server on another port of the host (browsers let it) neither locks the page out...
    planted = {"Cookie": f"corral_session=corral-session_{'x' * 43}; {login.cookie}", "X-Corral-Session": login.key}
    assert call(server, "GET", "/api/v1/whoami", planted).json()["user"] == "alice"
    # ...nor, being someone else's session, logs the page in as them: their cookie needs their key
    bob = log_in(server, server.client().create_token(user="bob", scope="submit", expires="1h")["token"])
    fixated = {"Cookie": f"{bob.cookie}; {login.cookie}", "X-Corral-Session": login.key}
    assert call(server, "GET", "/api/v1/whoami", fixated).json()["user"] == "alice"
    assert call(server, "GET", "/api/v1/whoami", {"Cookie": bob.cookie, "X-Corral-Session": login.key}).status == 401
    # nor does a session's half log in as a token would
    answer = call(server, "POST", "/api/v1/session", REMOTE, {"token": login.key})
    assert answer.status == 401 and "not an API token" in answer.error()


def test_an_expired_token_is_refused_at_once_though_it_was_used_a_moment_before(server):
    # a token that lapses in a few seconds (the API's shortest is a minute): written as `corral token create` would
    engine = open_engine(database_url(None, server.home))
    try:
        made, secret = TokenStore(engine).create("alice", "short", "submit", time.time() + 4, "root", time.time())
    finally:
        engine.dispose()
    with Client(server.url, token=secret) as alice:
        assert alice.whoami()["user"] == "alice"  # looked up, and so in the server's cache for a while
    wait_for(lambda: time.time() > made.expires + 0.05, timeout=30)
    answer = call(server, "GET", "/api/v1/whoami", {"Authorization": f"Bearer {secret}"})
    assert answer.status == 401 and "unknown, revoked or expired" in answer.error()
