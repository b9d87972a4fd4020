"""API tokens against a live server: made, used from "elsewhere", listed, revoked (the store itself is
tested on SQLite and PostgreSQL in tests/store/test_token_store.py).

The tests run as root, so a plain local client is an admin (the kernel vouches for it);
other users are reached the way a remote caller would be: with a token.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest

from corral.client import Client
from corral.errors import Forbidden, InvalidRequest, NotFound, Unauthenticated


@pytest.fixture
def server(server_factory):
    return server_factory(gpus=0)


def call(server, method: str, path: str, body=None, token: str | None = None):
    url = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data else None


def as_token(server, secret: str) -> Client:
    """A client that proves who it is only with the token, over TCP, as one on another machine would."""
    return Client(server.url, token=secret)


def test_a_token_made_by_an_admin_lets_its_user_in_with_that_scope(server):
    status, made = call(server, "POST", "/api/v1/tokens", {"name": "alice-laptop", "user": "alice", "expires": "12h"})
    assert status == 201, made
    secret = made.pop("token")
    assert secret.startswith("corral_") and len(secret) == 50
    assert (made["user"], made["name"], made["scope"], made["state"], made["created_by"]) == (
        "alice", "alice-laptop", "submit", "active", "root")
    assert not any("hash" in key for key in made)

    alice = as_token(server, secret)
    assert alice.whoami() == {"user": "alice", "scope": "submit", "via": "token", "admin": False,
                              "personal_queue_of": None}
    listed = alice.tokens()
    assert [t["id"] for t in listed] == [made["id"]]
    assert secret not in json.dumps(listed)  # shown once, at creation, never again


def test_tokens_are_made_at_the_machine_not_by_other_tokens(server):
    admin = server.client()
    read = admin.create_token(scope="read", user="alice", name="dash")["token"]
    submit = admin.create_token(scope="submit", user="alice", name="sdk")["token"]

    with pytest.raises(Forbidden, match="submit scope"):
        as_token(server, read).create_token(scope="read")
    # a leaked token must not be able to mint successors that outlive its revocation
    with pytest.raises(Forbidden, match="not with another token"):
        as_token(server, submit).create_token(scope="read", name="child")
    with pytest.raises(Forbidden, match="alice may hold at most submit"):
        admin.create_token(scope="admin", user="alice")
    assert [t["name"] for t in admin.tokens(all=True)] == ["sdk", "dash"]


def test_bad_token_requests_name_the_field_and_the_fix(server):
    admin = server.client()
    for body, field in (({"expires": "never"}, "expires"), ({"expires": "400d"}, "expires"),
                        ({"expires": 30}, "expires"), ({"name": "my token"}, "name"), ({"scope": "root"}, "scope"),
                        ({"scope": {"a": [1]}}, "scope"), ({"user": "a/b"}, "user"), ({"colour": "red"}, "colour")):
        status, answer = call(server, "POST", "/api/v1/tokens", body)
        assert status == 422, (body, answer)
        assert answer["error"]["field"] == field and answer["error"]["hint"]
    with pytest.raises(InvalidRequest, match="every token expires"):
        admin.create_token(expires="never")
    assert admin.tokens(all=True) == []  # nothing half-made


def test_revoking_stops_a_token_at_once_and_only_its_owner_or_an_admin_may(server):
    admin = server.client()
    alice_made = admin.create_token(user="alice", name="a")
    bob_made = admin.create_token(user="bob", name="b")
    alice, bob = as_token(server, alice_made["token"]), as_token(server, bob_made["token"])
    assert alice.whoami()["user"] == "alice"  # now in the server's cache of valid tokens

    with pytest.raises(Forbidden, match="only its owner or an admin"):
        bob.revoke_token(alice_made["id"])
    with pytest.raises(NotFound):
        bob.revoke_token(9999)
    assert alice.whoami()["user"] == "alice"

    gone = alice.revoke_token(alice_made["id"])
    assert gone["state"] == "revoked" and gone["revoked"]
    with pytest.raises(Unauthenticated, match="unknown, revoked or expired"):
        alice.whoami()

    admin.revoke_token(bob_made["id"])
    with pytest.raises(Unauthenticated):
        bob.whoami()
    assert {t["id"]: t["state"] for t in admin.tokens(all=True)} == {alice_made["id"]: "revoked",
                                                                    bob_made["id"]: "revoked"}


def test_each_user_lists_their_own_tokens_and_only_admins_list_everyones(server):
    admin = server.client()
    a1 = admin.create_token(user="alice", name="one")
    admin.create_token(user="bob", name="two")
    a3 = admin.create_token(user="alice", name="three", scope="read")
    mine = admin.create_token(name="mine", scope="admin")
    alice = as_token(server, a1["token"])

    assert [t["name"] for t in alice.tokens()] == ["three", "one"]  # newest first
    with pytest.raises(Forbidden, match="needs admin"):
        alice.tokens(all=True)
    assert [t["name"] for t in admin.tokens(all=True)] == ["mine", "three", "two", "one"]
    assert [t["name"] for t in admin.tokens()] == ["mine"]
    assert as_token(server, mine["token"]).whoami()["scope"] == "admin"
    assert as_token(server, a3["token"]).tokens()[0]["scope"] == "read"


def test_a_request_with_no_token_from_elsewhere_or_a_made_up_one_is_refused(server):
    status, answer = call(server, "GET", "/api/v1/tokens", token="corral_" + "x" * 43)
    assert status == 401 and "corral token create" in answer["error"]["message"]
