"""drain_gpus and resume_gpus (issue 22, point 4) end to end: an admin's agent drains a GPU (list_gpus then counts
it unavailable, saying why) and resumes it; an agent acting for another user is refused and changes nothing; a
GPU the node lacks, or one not drained, is an error naming what is wrong. Against a live server run by root."""

from __future__ import annotations

import os

import anyio

from tests.mcp.test_permissions import over_stdio_with, tokens_for
from tests.mcp.test_session import call, over_stdio, refused


def test_an_admins_agent_drains_and_resumes_a_gpu_and_another_users_is_refused(server_factory, os_users,
                                                                                  shared_dir):
    alice, _ = os_users
    server = server_factory(gpus=4, home=os.path.join(shared_dir, "home"))
    admin = server.client()
    node = admin.nodes()[0]["name"]
    (alice_token,) = tokens_for(server, alice)

    async def session() -> None:
        async with over_stdio(server.home) as agent:  # as root, who runs the server: an admin
            drained = await call(agent, "drain_gpus", gpus=[2], reason="fan failure")
            assert drained["node"] == node and drained["message"].startswith(f"GPU 2 of node {node} drained: ")
            gpu2 = drained["gpus"][2]
            assert (gpu2["drained"]["reason"], gpu2["drained"]["by"], gpu2["state"]) == ("fan failure", "root", "DRAINED")
            assert [g["drained"] for g in drained["gpus"] if g["index"] != 2] == [None, None, None]
            listing = await call(agent, "list_gpus")
            assert listing["free"] == 3 and listing["gpus"][2]["free"] is False
            assert listing["gpus"][2]["unavailable"] == "drained by root: fan failure"
            assert "has no GPU 7" in await refused(agent, "drain_gpus", gpus=[7], reason="x")

        async with over_stdio_with(server.url, alice_token) as agent:
            text = await refused(agent, "resume_gpus", gpus=[2])
            assert text == f"resuming GPU 2 of node {node} needs a credential with admin scope; this one (token) has submit"
            assert "admin" in await refused(agent, "drain_gpus", gpus=[0], reason="mine now")
        assert [g["index"] for g in admin.nodes()[0]["gpus"] if g["drained"]] == [2]  # refused: untouched

        async with over_stdio(server.home) as agent:
            resumed = await call(agent, "resume_gpus", gpus=[2])
            assert resumed["gpus"][2]["drained"] is None and resumed["message"] == f"GPU 2 of node {node} resumed: " \
                "jobs are placed there again."
            assert "is not drained" in await refused(agent, "resume_gpus", gpus=[2])
            assert (await call(agent, "list_gpus"))["free"] == 4

    anyio.run(session)
