"""`corral mcp` end to end: an MCP client (the `mcp` library) drives the MCP server over stdio and
streamable HTTP against a live corral server, as an agent would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client as MCPClient
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import wait_for

FAST = ["--sample-interval", "0.3"]
TOOLS = {"create_gpu_job", "view_gpu_job", "stop_gpu_job", "workload_submit", "workload_get", "workload_logs",
         "metrics_query", "alert_create", "list_gpus", "queue", "list_runs", "run_metrics", "recommend_resources",
         "diagnose_job", "job_efficiency"}
READ_ONLY = {"view_gpu_job", "workload_get", "workload_logs", "metrics_query", "list_gpus", "queue", "list_runs",
             "run_metrics", "recommend_resources", "diagnose_job", "job_efficiency"}


def corral_mcp(home: str, *args: str) -> list[str]:
    return ["-m", "corral.cli", "--home", home, "mcp", *args]


@asynccontextmanager
async def over_stdio(home: str, cwd: str | None = None) -> AsyncIterator[MCPClient]:
    """A session with `corral --home HOME mcp` spawned as an MCP client spawns it."""
    with tempfile.TemporaryFile("w+") as errlog:
        params = StdioServerParameters(command=sys.executable, args=corral_mcp(home), cwd=cwd)
        async with MCPClient(stdio_client(params, errlog=errlog)) as client:
            yield client


@asynccontextmanager
async def over_http(home: str) -> AsyncIterator[MCPClient]:
    """A session with `corral --home HOME mcp --http --port 0`, at the URL it announces."""
    process = subprocess.Popen([sys.executable, *corral_mcp(home, "--http", "--port", "0")],
                               stderr=subprocess.PIPE, text=True)
    try:
        url = None
        assert process.stderr is not None
        for line in process.stderr:
            found = re.search(r"at (http://127\.0\.0\.1:\d+/mcp)$", line.strip())
            if found:
                url = found.group(1)
                break
        assert url, "corral mcp --http never said where it listens"
        async with MCPClient(streamable_http_client(url)) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=20)


async def call(client: MCPClient, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: MCPClient, tool: str, **arguments: Any) -> str:
    """The text of the tool error the call must end in."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text and "Error executing tool" not in text
    return text


async def poll(client: MCPClient, job_id: int, done: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        view = await call(client, "view_gpu_job", job_id=job_id)
        if done(view):
            return view
        assert time.monotonic() < deadline, f"job {job_id} stayed {view['state']}"
        await anyio.sleep(0.2)


def test_an_agent_session_over_stdio_creates_polls_reads_measures_alerts_and_stops(server_factory, short_tmp):
    server = server_factory(gpus=4, extra=FAST)
    corral = server.client()
    flag = os.path.join(short_tmp, "fail-now")

    async def session() -> None:
        async with over_stdio(server.home, cwd=short_tmp) as agent:
            listed = {tool.name: tool for tool in (await agent.list_tools()).tools}
            assert set(listed) == TOOLS
            for name, tool in listed.items():
                assert tool.description and len(tool.description) > 150 and tool.output_schema
                assert tool.annotations.read_only_hint is (name in READ_ONLY)
            assert listed["stop_gpu_job"].annotations.destructive_hint is True
            assert listed["create_gpu_job"].annotations.destructive_hint is False
            gpus = listed["create_gpu_job"].input_schema["properties"]["gpus"]
            assert (gpus["type"], gpus["minimum"], gpus["maximum"]) == ("integer", 0, 1024)
            assert "CORRAL_CHECKPOINT_DIR" in listed["create_gpu_job"].description
            assert "CORRAL_CHECKPOINT_DIR" in agent.instructions and "PENDING" in agent.instructions

            gpus_now = await call(agent, "list_gpus")
            assert (gpus_now["total"], gpus_now["free"]) == (4, 4)

            # a CPU-busy job, polled to completion, its logs and metrics read
            busy = await call(agent, "create_gpu_job", gpus=1, memory="1G", name="busy", command=(
                f"{sys.executable} -c 'import time\nt = time.time()\nwhile time.time() - t < 3: pass'; "
                "echo checkpoint dir $CORRAL_CHECKPOINT_DIR; echo done"))
            assert busy["state"] in ("PENDING", "RUNNING") and busy["stdout_path"].endswith(f"{busy['job_id']}.out")
            assert busy["working_directory"] == short_tmp
            finished = await poll(agent, busy["job_id"], lambda v: v["state"] not in ("PENDING", "RUNNING"))
            assert (finished["state"], finished["exit_code"]) == ("COMPLETED", 0)
            assert finished["stdout_tail"]["lines"][-1] == "done"
            assert finished["stdout_tail"]["lines"][0] == f"checkpoint dir {finished['checkpoint_dir']}"
            logs = await call(agent, "workload_logs", workloadId=str(busy["job_id"]), since=0)
            assert logs["lines"] == finished["stdout_tail"]["lines"] and logs["complete"]
            cpu = await call(agent, "metrics_query", metric="cpu_utilization", workloadId=busy["job_id"],
                             startTime="-5m", maxPoints=50)
            assert cpu["source"] == "samples" and len(cpu["points"]) >= 3 and cpu["summary"]["max"] > 30

            # an alert on a job that then fails, seen firing
            doomed = await call(agent, "create_gpu_job", gpus=1, command=(
                f"while [ ! -e {flag} ]; do sleep 0.1; done; echo 'RuntimeError: boom' >&2; exit 3"))
            rule = await call(agent, "alert_create", name="doomed-failed", condition="state == FAILED",
                              severity="critical", message="job {job} failed", workloadId=doomed["job_id"])
            assert rule["scope"] == f"job {doomed['job_id']}"
            open(flag, "w").close()
            failed = await poll(agent, doomed["job_id"], lambda v: v["state"] == "FAILED")
            assert failed["exit_code"] == 3 and failed["stderr_tail"]["lines"] == ["RuntimeError: boom"]
            assert "diagnose_job" in failed["next_step"]
            firing = wait_for(lambda: [f for f in corral.alerts(job=doomed["job_id"]) if f["rule"] == "doomed-failed"])
            assert firing[0]["severity"] == "critical"
            diagnosis = await call(agent, "diagnose_job", job_id=doomed["job_id"])
            assert diagnosis["state"] == "FAILED" and diagnosis["exit_code"] == 3

            # another job stopped
            sleeper = await call(agent, "create_gpu_job", gpus=2, command="sleep 60")
            await poll(agent, sleeper["job_id"], lambda v: v["state"] == "RUNNING")
            queue = await call(agent, "queue")
            assert [j["job_id"] for j in queue["jobs"]] == [sleeper["job_id"]] and queue["running"] == 1
            assert (await call(agent, "list_gpus"))["free"] == 2
            stopped = await call(agent, "stop_gpu_job", job_id=sleeper["job_id"])
            assert stopped["already_ended"] is False
            await poll(agent, sleeper["job_id"], lambda v: v["state"] == "CANCELLED")
            again = await call(agent, "stop_gpu_job", job_id=sleeper["job_id"])
            assert again["already_ended"] is True and again["state"] == "CANCELLED"

    anyio.run(session)


def test_the_seed_workload_shape_over_streamable_http_and_an_image_refused_on_the_local_backend(server_factory):
    server = server_factory(gpus=4)
    corral = server.client()

    async def session() -> None:
        async with over_http(server.home) as agent:
            submitted = await call(
                agent, "workload_submit", name="seed", gpus=1, gpuMemoryMb=40960, command=["bash", "-c",
                'echo "$GREETING $0"'], args=["world"], env=[{"name": "GREETING", "value": "hello"}],
                labels={"team": "ml"}, preemptible=True, maxRuntimeSeconds=600)
            ref = submitted["workloadId"]
            assert isinstance(ref, str) and submitted["logs"]["stdout"].endswith(f"{ref}.out")
            deadline = time.monotonic() + 30
            while (workload := await call(agent, "workload_get", workloadId=ref))["state"] != "COMPLETED":
                assert time.monotonic() < deadline and workload["state"] in ("PENDING", "RUNNING"), workload
                await anyio.sleep(0.2)
            assert (workload["name"], workload["exitCode"], workload["gpus"], workload["gpuMemoryMb"]) == (
                "seed", 0, 1, 40960)
            assert workload["labels"] == {"team": "ml"} and workload["preemptible"] is True
            assert workload["maxRuntimeSeconds"] == 600
            logs = await call(agent, "workload_logs", workloadId=ref, tail=10)
            assert logs["lines"] == ["hello world"] and logs["complete"] and logs["nextOffset"] == len("hello world\n")

            before = len(corral.history()) + len(corral.queue())
            text = await refused(agent, "workload_submit", command=["python", "train.py"],
                                 image="nvcr.io#nvidia/pytorch:24.05-py3")
            assert text.startswith("image: ") and "local backend" in text and "drop image" in text
            assert len(corral.history()) + len(corral.queue()) == before  # nothing was submitted

            sizing = await call(agent, "recommend_resources", params="7B", mode="lora")
            assert sizing["gpus"] == 1 and sizing["create_gpu_job_arguments"]["gpus"] == 1

    anyio.run(session)


def test_bad_input_is_a_tool_error_naming_the_field_and_the_server_carries_on(server_factory):
    server = server_factory(gpus=2)

    async def session() -> None:
        async with over_stdio(server.home) as agent:
            assert await refused(agent, "create_gpu_job", command="python train.py", gpus=-1) == (
                "gpus: must be an integer from 0 to 1024, got -1")
            assert (await refused(agent, "create_gpu_job", gpus=1)).startswith("command: give exactly one of")
            assert await refused(agent, "workload_submit", name="no-command") == (
                "command: is required (a list of at most 10000 strings)")
            assert await refused(agent, "workload_logs", workloadId="1", tail=10**9) == (
                "tail: must be an integer from 1 to 1000, got 1000000000")
            assert "job 424242" in await refused(agent, "view_gpu_job", job_id=424242)
            assert "job 424242" in await refused(agent, "stop_gpu_job", job_id=424242)
            assert (await refused(agent, "view_gpu_job", job_id="12; rm -rf /")).startswith("job_id: ")
            assert (await refused(agent, "metrics_query", metric="cpu_utilization",
                                  workloadId="x")).startswith("workloadId: ")
            assert (await refused(agent, "create_gpu_job", command="true", gpu_memory="lots")).startswith(
                "gpu_memory: cannot read 'lots'")
            assert (await refused(agent, "create_gpu_job", command="true", time_limit="soon")).startswith(
                "time_limit: ")
            assert (await refused(agent, "create_gpu_job", command="true", gpus=3)).startswith("gpus: ")  # 2 exist
            assert (await refused(agent, "create_gpu_job", command="true", gpu=1)).startswith(
                "gpu: unknown argument (this tool takes: command, script, ")
            assert (await refused(agent, "alert_create", name="x", condition="state ==")).startswith("condition: ")
            assert (await refused(agent, "recommend_resources", params="seven")).startswith("params: ")
            assert (await refused(agent, "run_metrics", run="nope!")).startswith("run: ")
            # still serving, and nothing was submitted
            assert (await call(agent, "queue"))["total"] == 0

    anyio.run(session)


def test_output_stays_bounded_for_a_job_that_prints_100000_lines(server_factory, short_tmp):
    server = server_factory(gpus=1)

    async def session() -> None:
        async with over_stdio(server.home) as agent:
            job = await call(agent, "create_gpu_job", gpus=0, command=(
                f"seq 1 100000; {sys.executable} -c 'print(\"x\" * 300000)'; echo last"))
            view = await poll(agent, job["job_id"], lambda v: v["state"] == "COMPLETED")
            tail = view["stdout_tail"]["lines"]
            assert len(tail) <= 20 and tail[-1] == "last" and tail[-3] == "100000"
            assert tail[-2].endswith("more characters]") and view["stdout_tail"]["cut_lines"] == 1
            assert sum(len(line) for line in tail) <= 8192

            ref = str(job["job_id"])
            last = await call(agent, "workload_logs", workloadId=ref, tail=1000)
            assert len(last["lines"]) <= 1000 and last["lines"][-1] == "last"
            assert sum(len(line.encode()) + 1 for line in last["lines"]) <= 64 * 1024
            first = await call(agent, "workload_logs", workloadId=ref, since=0, tail=1000)
            assert first["lines"] == [str(i) for i in range(1, 1001)] and not first["complete"]
            more = await call(agent, "workload_logs", workloadId=ref, since=first["nextOffset"], tail=2)
            assert more["lines"] == ["1001", "1002"]

            metrics = await call(agent, "metrics_query", metric="cpu_utilization", workloadId=ref, startTime="-1h")
            assert len(metrics["points"]) <= 200

            # one log file for both streams: one tail, holding both
            both = await call(agent, "create_gpu_job", gpus=0, working_directory=short_tmp, log_file="both-%j.log",
                              command="echo to-out; echo to-err >&2")
            assert both["stdout_path"] == os.path.join(short_tmp, f"both-{both['job_id']}.log")
            view = await poll(agent, both["job_id"], lambda v: v["state"] == "COMPLETED")
            assert sorted(view["stdout_tail"]["lines"]) == ["to-err", "to-out"] and "stderr_tail" not in view

    anyio.run(session)


def test_without_a_corral_server_the_tools_say_how_to_start_one(short_tmp):
    home = os.path.join(short_tmp, "empty-home")

    async def session() -> None:
        async with over_stdio(home) as agent:
            text = await refused(agent, "queue")
            assert "no corral server is running" in text and "corral up --detach" in text
            assert (await call(agent, "recommend_resources", params="70B"))["gpus"] >= 8  # needs no server

    anyio.run(session)
