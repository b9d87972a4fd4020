"""Whose jobs an agent may touch: the MCP server calls corral with the agent's credential, so corral's own
checks apply to the agent's user. Over stdio that is `$CORRAL_TOKEN` (or whoever started it); over HTTP
every request must bring a token, and the tools act as that token's user, whoever runs `corral mcp`.

Against a live corral server run by root (a shared server), with two real accounts.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client as MCPClient
from mcp import MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client

from corral.client import Client
from corral.mcp.clients import ClientPool
from tests.helpers import wait_for
from tests.mcp.test_session import call, http_server, http_session, refused

ACTIVE = ("PENDING", "RUNNING")


@asynccontextmanager
async def over_stdio_with(url: str, token: str) -> AsyncIterator[MCPClient]:
    """`corral --url URL mcp` spawned with `CORRAL_TOKEN=token`, as an agent's MCP client config would."""
    with tempfile.TemporaryFile("w+") as errlog:
        params = StdioServerParameters(command=sys.executable, args=["-m", "corral.cli", "--url", url, "mcp"],
                                       env={"CORRAL_TOKEN": token}, cwd="/tmp")
        async with MCPClient(stdio_client(params, errlog=errlog)) as client:
            yield client


def tokens_for(server, *users: str, scope: str = "submit") -> list[str]:
    """An API token for each of `users`, made by root (an admin)."""
    admin = Client(home=server.home)
    return [admin.create_token(user=user, scope=scope, expires="1h")["token"] for user in users]


def test_over_stdio_the_agent_acts_as_its_tokens_user_and_may_not_touch_anothers_job(server_factory, os_users,
                                                                                     shared_dir):
    alice, bob = os_users
    server = server_factory(gpus=4, home=os.path.join(shared_dir, "home"))  # a home its users' jobs can reach
    admin = server.client()
    alice_token, bob_token = tokens_for(server, alice, bob)
    (alice_reader,) = tokens_for(server, alice, scope="read")
    bobs = Client(server.url, token=bob_token).submit(["sleep", "60"], submit_dir="/tmp", gpus=1)
    assert bobs["user"] == bob

    async def session() -> None:
        async with over_stdio_with(server.url, alice_token) as agent:
            mine = await call(agent, "create_gpu_job", command="sleep 60", gpus=1, working_directory="/tmp")
            assert mine["user"] == alice and admin.get(mine["job_id"])["user"] == alice  # not root, who runs both

            # bob's job: anybody sees it, only he (or an admin) stops it or reads its logs
            text = await refused(agent, "stop_gpu_job", job_id=bobs["id"])
            assert f"only its owner ({bob})" in text and "an admin" in text and f"you are {alice}" in text
            text = await refused(agent, "workload_logs", workloadId=str(bobs["id"]))
            assert text.startswith(f"reading the logs of job {bobs['id']}: only its owner ({bob})")
            assert f"only its owner ({bob})" in await refused(agent, "diagnose_job", job_id=bobs["id"])
            view = await call(agent, "view_gpu_job", job_id=bobs["id"])
            assert view["user"] == bob and view["state"] in ACTIVE and "stdout_tail" not in view
            assert any(w.startswith("logs not shown: reading the logs of") for w in view["warnings"])
            queue = await call(agent, "queue")
            assert {job["job_id"] for job in queue["jobs"]} == {bobs["id"], mine["job_id"]}
            assert admin.get(bobs["id"])["state"] in ACTIVE  # refused means untouched

            # an alert on "every job of mine" is alice's, not the server's user's
            rule = await call(agent, "alert_create", name="alice-failures", condition="state == FAILED")
            assert rule["scope"] == f"every job of user {alice} (yours)"
            assert [r["user"] for r in admin.alert_rules() if r["name"] == "alice-failures"] == [alice]

            # her own job she stops
            assert (await call(agent, "stop_gpu_job", job_id=mine["job_id"]))["already_ended"] is False
            wait_for(lambda: admin.get(mine["job_id"])["state"] == "CANCELLED")

        async with over_stdio_with(server.url, alice_reader) as agent:
            before = len(admin.queue()) + len(admin.history())
            text = await refused(agent, "create_gpu_job", command="true", gpus=0, working_directory="/tmp")
            assert text == "submitting a job needs a credential with submit scope; this one (token) has read"
            assert len(admin.queue()) + len(admin.history()) == before  # nothing was submitted
            assert bobs["id"] in [job["job_id"] for job in (await call(agent, "queue"))["jobs"]]  # reading is fine

    anyio.run(session)
    admin.cancel(bobs["id"])


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside `error`'s groups, and those they were raised from."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    found = [error]
    if error.__context__ is not None:
        found += leaves(error.__context__)
    return found


def test_clients_are_kept_per_token_and_never_lent_for_another(server_factory, os_users):
    alice, bob = os_users
    server = server_factory(gpus=1)
    alice_token, bob_token = tokens_for(server, alice, bob)
    pool = ClientPool(lambda token: Client(server.url, token=token))
    with pool.client(alice_token) as first:
        assert first.whoami()["user"] == alice
        with pool.client(alice_token) as second:  # a call in parallel: a client (a connection) of its own
            assert second is not first and second.whoami()["user"] == alice
        with pool.client(bob_token) as other:
            assert other.whoami()["user"] == bob
    with pool.client(alice_token) as again:
        assert again in (first, second) and again.whoami()["user"] == alice  # kept, with its connection
    with pool.client(bob_token) as again:
        assert again is other
    pool.close()


def post_initialize(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], dict]:
    """A raw MCP `initialize` POST: the status, headers and JSON body the MCP endpoint answers."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    conn.request("POST", parts.path, body=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    answer = {k.lower(): v for k, v in response.getheaders()}
    return response.status, answer, json.loads(data) if answer.get("content-type") == "application/json" else {}


def test_over_http_every_request_needs_a_token_and_the_tools_act_as_its_user(server_factory, os_users, shared_dir):
    alice, bob = os_users
    server = server_factory(gpus=4, home=os.path.join(shared_dir, "home"))  # a home its users' jobs can reach
    admin = server.client()
    alice_token, bob_token = tokens_for(server, alice, bob)
    assert os.geteuid() == 0  # the MCP server below runs as root; its tools must not

    with http_server(server.home, cwd="/tmp") as (url, printed):
        assert any("every request must carry" in line and "corral token create --scope submit" in line
                   for line in printed)

        # no token: 401, saying how to make one; the MCP client sees that message
        status, headers, body = post_initialize(url, {})
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        assert "carries none" in body["error"]["message"] and "corral token create --scope submit" in body["error"]["message"]
        status, _, body = post_initialize(url, {"Authorization": "Bearer " + "corral_" + "x" * 43})
        assert status == 401 and "unknown, revoked or expired" in body["error"]["message"]
        status, _, body = post_initialize(url, {"Authorization": f"Basic {alice_token}"})
        assert status == 401 and "Bearer corral_" in body["error"]["message"]

        async def without_token() -> None:
            async with http_session(url, None):
                pass

        with pytest.raises(BaseException) as caught:
            anyio.run(without_token)
        errors = [e for e in leaves(caught.value) if isinstance(e, MCPError)]  # the SDK's task groups wrap it
        assert errors and "carries none" in str(errors[0]) and "corral token create --scope submit" in str(errors[0])

        async def session() -> None:
            async with http_session(url, alice_token) as agent:
                job = await call(agent, "create_gpu_job", command="sleep 60", gpus=1, working_directory="/tmp")
                assert job["user"] == alice and admin.get(job["job_id"])["user"] == alice
                assert (await call(agent, "view_gpu_job", job_id=job["job_id"]))["user"] == alice
            async with http_session(url, bob_token) as agent:
                text = await refused(agent, "stop_gpu_job", job_id=job["job_id"])
                assert f"only its owner ({alice})" in text and f"you are {bob}" in text
                assert admin.get(job["job_id"])["state"] in ACTIVE
                theirs = await call(agent, "create_gpu_job", command="sleep 60", gpus=1, working_directory="/tmp")
                assert theirs["user"] == bob  # the same MCP server, another agent, another user
                assert (await call(agent, "stop_gpu_job", job_id=theirs["job_id"]))["already_ended"] is False

            # two agents at once, calls in parallel: each call is made with its own request's token
            made: dict[str, list[str]] = {alice: [], bob: []}

            async def submit_as(user: str, token: str) -> None:
                async with http_session(url, token) as agent:
                    async with anyio.create_task_group() as group:
                        for _ in range(4):
                            group.start_soon(submit_one, agent, user)

            async def submit_one(agent: MCPClient, user: str) -> None:
                job = await call(agent, "create_gpu_job", command="true", gpus=0, working_directory="/tmp")
                made[user].append(admin.get(job["job_id"])["user"])

            async with anyio.create_task_group() as group:
                group.start_soon(submit_as, alice, alice_token)
                group.start_soon(submit_as, bob, bob_token)
            assert made == {alice: [alice] * 4, bob: [bob] * 4}

            # a token revoked while its agent is connected: the next tool call says so
            async with http_session(url, alice_token) as agent:
                mine = [t for t in admin.tokens(all=True) if t["user"] == alice]
                for token in mine:
                    admin.revoke_token(token["id"])
                text = await refused(agent, "queue")
                assert "unknown, revoked or expired" in text and "corral token create" in text
            admin.cancel(job["job_id"])

        anyio.run(session)
