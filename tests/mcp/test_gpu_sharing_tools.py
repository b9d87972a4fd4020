"""An agent uses a shared box's GPUs through the real MCP client: two small jobs made with share_gpu and a
gpu_memory budget share one GPU (list_gpus then says that GPU is shared, with what is left for sharing jobs,
and no longer free for whole-GPU jobs), and a job asking for a reservation that does not exist is refused naming
the tool's argument. Against a live server."""

from __future__ import annotations

import anyio

from tests.helpers import wait_for
from tests.mcp.test_session import FAST, call, over_stdio, refused


def test_small_jobs_share_a_gpu_and_list_gpus_says_so(server_factory, tmp_path):
    server = server_factory(gpus=2, extra=FAST)
    client = server.client()

    async def session() -> None:
        async with over_stdio(server.home, cwd=str(tmp_path)) as agent:
            made = [await call(agent, "create_gpu_job", command="sleep 120", gpu_memory="20G", share_gpu=True,
                               time_limit="10m", name=f"eval{i}") for i in range(2)]
            for job in made:
                wait_for(lambda job=job: client.get(job["job_id"])["state"] == "RUNNING", timeout=30)
            assert [client.get(job["job_id"])["gpu_ids"] for job in made] == [[0], [0]]
            listing = await call(agent, "list_gpus")
            gpu0, gpu1 = listing["gpus"]
            assert gpu0["free"] is False
            assert gpu0["unavailable"] == f"shared by 2 job(s): {80 * 1024 - 2 * 20 * 1024} MB left for jobs with share_gpu"
            assert gpu1["free"] is True and listing["free"] == 1
            text = await refused(agent, "create_gpu_job", command="true", reservation="no-such-reservation")
            assert text.startswith("reservation:"), text
            for job in made:
                await call(agent, "stop_gpu_job", job_id=job["job_id"])

    anyio.run(session)
