"""forecast_gpu_job over stdio against a live corral server: create_gpu_job's arguments, answered with when the
job would start; nothing is created."""

from __future__ import annotations

import anyio

from tests.mcp.test_session import call, over_stdio, poll, refused


def test_an_agent_learns_when_a_job_would_start_and_what_would_start_it_sooner(server_factory, short_tmp):
    server = server_factory(gpus=2)
    corral = server.client()

    async def session() -> None:
        async with over_stdio(server.home, cwd=short_tmp) as agent:
            listed = {tool.name: tool for tool in (await agent.list_tools()).tools}
            tool = listed["forecast_gpu_job"]
            assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
            assert tool.input_schema["properties"] == listed["create_gpu_job"].input_schema["properties"]

            now = await call(agent, "forecast_gpu_job", command="python train.py", gpus=2, time_limit="30m")
            assert (now["starts_in"], now["gpu_ids"], now["code"], now["blockers"]) == ("now", [0, 1], "None", [])
            assert "starts it now" in now["next_step"] and corral.queue() == []

            busy = await call(agent, "create_gpu_job", command="sleep 120", gpus=2, time_limit="10m")
            await poll(agent, busy["job_id"], lambda view: view["state"] == "RUNNING")
            later = await call(agent, "forecast_gpu_job", command="python train.py", gpus=1, time_limit="5m")
            assert later["would_start"] and later["starts_in"].startswith(("9:", "10:00")) and later["code"] == "Resources"
            assert [(b["job_id"], b["kind"], b["cpus"]) for b in later["blockers"]] == [(busy["job_id"], "running", 1)]
            assert later["waits_for"] == ["gpus"]  # what decides its start
            assert later["alternatives"] == [] and later["time_limit"] == "5:00"

            never = await call(agent, "forecast_gpu_job", command="true", gpus=3)
            assert never["would_start"] is None and never["code"] == "Unsatisfiable"
            assert [a["create_gpu_job_arguments"] for a in never["alternatives"]] == [{"gpus": 2}]
            assert (await refused(agent, "forecast_gpu_job", command="true", time_limit="soon")).startswith(
                "time_limit: ")
            assert (await refused(agent, "forecast_gpu_job", gpus=1)).startswith("command: give exactly one of")
            assert [job["id"] for job in corral.queue()] == [busy["job_id"]]  # nothing was created

    anyio.run(session)
