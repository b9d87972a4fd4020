"""`corral mcp` end to end: an MCP client (the `mcp` library) drives the MCP server over stdio and
streamable HTTP against a live corral server, as an agent would."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx2
from mcp import Client as MCPClient
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import wait_for

FAST = ["--sample-interval", "0.3"]
TOOLS = {"create_gpu_job", "forecast_gpu_job", "view_gpu_job", "stop_gpu_job", "workload_submit", "workload_get", "workload_logs",
         "metrics_query", "alert_create", "list_gpus", "queue", "list_runs", "run_metrics", "recommend_resources",
         "diagnose_job", "job_efficiency", "drain_gpus", "resume_gpus"}
READ_ONLY = {"forecast_gpu_job", "view_gpu_job", "workload_get", "workload_logs", "metrics_query", "list_gpus", "queue", "list_runs",
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


@contextmanager
def http_server(home: str, cwd: str | None = None) -> Iterator[tuple[str, list[str]]]:
    """`corral --home HOME mcp --http --port 0` running: the URL it announces, and what it printed until then."""
    process = subprocess.Popen([sys.executable, *corral_mcp(home, "--http", "--port", "0")], cwd=cwd,
                               stderr=subprocess.PIPE, text=True)
    try:
        url, lines = None, []
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.strip())
            found = re.search(r"at (http://127\.0\.0\.1:\d+/mcp)$", line.strip())
            if found:
                url = found.group(1)
                break
        assert url, f"corral mcp --http never said where it listens: {lines}"
        yield url, lines
    finally:
        process.terminate()
        process.wait(timeout=20)


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[MCPClient]:
    """An MCP session at `url` whose every request carries `token` as `Authorization: Bearer` (None: no header)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with MCPClient(streamable_http_client(url, http_client=http)) as client:
            yield client


@asynccontextmanager
async def over_http(home: str, token: str) -> AsyncIterator[MCPClient]:
    """A session with `corral --home HOME mcp --http --port 0`, at the URL it announces, with `token`."""
    with http_server(home) as (url, _):
        async with http_session(url, token) as client:
            yield client


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
            # stopping destroys work; submitting runs arbitrary code as the user: both are destructive
            destructive = {name for name, tool in listed.items() if tool.annotations.destructive_hint}
            assert destructive == {"stop_gpu_job", "create_gpu_job", "workload_submit"}
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
            # busy, not idle (~0 %): its share of two cores shared with other tests is all it can get
            assert cpu["source"] == "samples" and len(cpu["points"]) >= 3 and cpu["summary"]["max"] > 5

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
            # the server's GPUs are declared, with no driver to read them: the agent is told it went unchecked
            assert any("no GPU driver" in item for item in diagnosis["unchecked"]), diagnosis
            assert diagnosis["usage"]["memory_source"] in ("cgroup", "rusage", "rusage+samples", "samples")

            # another job stopped
            sleeper = await call(agent, "create_gpu_job", gpus=2, command="sleep 60", time_limit="10m")
            running = await poll(agent, sleeper["job_id"], lambda v: v["state"] == "RUNNING")
            # when it ends at the latest: its start plus its limit, in the view, its next step and the queue
            shown = corral.get(sleeper["job_id"])
            assert (running["expected_end"], running["expected_end_source"]) == (shown["expected_end"], "time_limit")
            assert f"ends by {running['expected_end']} at the latest" in running["next_step"]
            queue = await call(agent, "queue")
            assert [j["job_id"] for j in queue["jobs"]] == [sleeper["job_id"]] and queue["running"] == 1
            assert queue["jobs"][0]["expected_end"] == running["expected_end"]
            assert (await call(agent, "list_gpus"))["free"] == 2
            stopped = await call(agent, "stop_gpu_job", job_id=sleeper["job_id"])
            assert stopped["already_ended"] is False
            await poll(agent, sleeper["job_id"], lambda v: v["state"] == "CANCELLED")
            again = await call(agent, "stop_gpu_job", job_id=sleeper["job_id"])
            assert again["already_ended"] is True and again["state"] == "CANCELLED"

    anyio.run(session)


def test_the_seed_workload_shape_over_streamable_http_and_a_bad_image_refused_by_name(server_factory, podman,
                                                                                      busybox_image):
    server = server_factory(gpus=4)
    corral = server.client()
    token = corral.create_token(scope="submit", expires="1h")["token"]  # over HTTP each agent brings its own

    async def session() -> None:
        async with over_http(server.home, token) as agent:
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

            # an image runs through the server's container runtime (Podman here), on the workload's GPUs
            boxed = await call(agent, "workload_submit", name="boxed", image=busybox_image, gpus=2,
                               command=["sh", "-c", 'echo "$IMAGE_OWN on $CUDA_VISIBLE_DEVICES"'])
            deadline = time.monotonic() + 60
            while (workload := await call(agent, "workload_get", workloadId=boxed["workloadId"]))["state"] != "COMPLETED":
                assert time.monotonic() < deadline and workload["state"] in ("PENDING", "RUNNING"), workload
                await anyio.sleep(0.2)
            assert workload["image"] == busybox_image and workload["gpus"] == 2
            logs = await call(agent, "workload_logs", workloadId=boxed["workloadId"], tail=10)
            assert logs["lines"] == ["from-the-image on 0,1"]
            created = await call(agent, "create_gpu_job", command='echo "$IMAGE_OWN"', image=busybox_image, gpus=1)
            assert created["image"] == busybox_image

            before = len(corral.history()) + len(corral.queue())
            text = await refused(agent, "workload_submit", command=["python", "train.py"], image="two words")
            assert text.startswith("image: ") and "is not an image reference" in text
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


def json_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def test_array_tasks_keep_their_ref_and_alerts_and_errors_name_the_argument(server_factory):
    server = server_factory(gpus=2)
    corral = server.client()
    array = corral.submit(["sleep", "60"], gpus=1, array="0-2%1")  # task 0 runs, tasks 1 and 2 wait
    first, waiting = f"{array['id']}_0", f"{array['id']}_2"
    wait_for(lambda: corral.get(first)["state"] == "RUNNING")
    task_id = corral.get(first)["id"]
    assert task_id != array["id"]  # the task has an internal id of its own, which the agent never needs

    async def session() -> None:
        async with over_stdio(server.home) as agent:
            view = await call(agent, "view_gpu_job", job_id=first)
            assert (view["job_id"], view["ref"], view["state"]) == (first, first, "RUNNING")
            assert (await call(agent, "workload_get", workloadId=first))["workloadId"] == first
            assert first in [job["job_id"] for job in (await call(agent, "queue"))["jobs"]]

            rule = await call(agent, "alert_create", name="task-stopped", condition="state == CANCELLED",
                              workloadId=first)
            assert rule["scope"] == f"job {first}"
            text = await refused(agent, "alert_create", name="later", condition="state == FAILED", workloadId=waiting)
            assert text.startswith(f"workloadId: task {waiting} has not started yet") and f"workloadId={array['id']}" in text

            user = corral.health()["user"]
            mine = await call(agent, "alert_create", name="mine", condition="state == FAILED")
            assert mine["scope"] == f"every job of user {user} (yours)"
            assert [r.get("user") for r in corral.alert_rules() if r["name"] == "mine"] == [user]

            assert (await refused(agent, "alert_create", name="mine", condition="state == FAILED")).startswith(
                "name: an alert rule named 'mine' exists")
            assert (await refused(agent, "alert_create", name="loud", condition="state == FAILED",
                                  channels=["nope"])).startswith("channels: no alert channel named 'nope'")
            assert await refused(agent, "alert_create", name="typo", condition="state == FAILED",
                                 workloadId=424242) == "workloadId: job 424242 does not exist"
            assert await refused(agent, "view_gpu_job", job_id=424242) == "job_id: job 424242 does not exist"
            assert (await refused(agent, "diagnose_job", job_id="424242_1")).startswith("job_id: job 424242")
            assert await refused(agent, "workload_logs", workloadId="424242") == (
                "workloadId: job 424242 does not exist")
            assert (await refused(agent, "metrics_query", metric="loss", workloadId=first)).startswith(
                "metric: job ")
            assert [r["name"] for r in corral.alert_rules()] == ["task-stopped", "mine"]  # nothing else was made

            stopped = await call(agent, "stop_gpu_job", job_id=first)
            assert (stopped["job_id"], stopped["ref"]) == (first, first) and stopped["message"].startswith(f"job {first} ")
            firing = wait_for(lambda: [f for f in corral.alerts(job=task_id) if f["rule"] == "task-stopped"])
            assert firing
            again = await call(agent, "stop_gpu_job", job_id=first)
            assert again["already_ended"] and again["job_id"] == first

    anyio.run(session)


def test_nonfinite_values_read_alike_offsets_past_the_end_and_listings_stay_short(server_factory, short_tmp):
    server = server_factory(gpus=1)
    corral = server.client()
    job = corral.submit(["echo", "hello"], gpus=0, name="lossy")
    assert corral.wait(job["id"], timeout=30, poll=0.1)["state"] == "COMPLETED"
    run = corral.create_run(project="nan", name="lossy", job_id=job["id"])
    now = time.time()
    corral.log_metrics(run["id"], {"batch_id": "b1", "metrics": [{
        "key": "loss", "steps": [1, 2, 3, 4, 5], "values": [2.0, 1.0, "Infinity", "-Infinity", "NaN"],
        "times": [now - 5, now - 4, now - 3, now - 2, now - 1]}]})
    for i in range(30):  # runs an agent could not read whole
        corral.create_run(project="p" * 200, name=f"{i}-" + "n" * 190, tags=[f"{t}-" + "t" * 190 for t in range(100)],
                          config={f"key{k}": "v" * 1000 for k in range(50)})
    blocker = corral.submit(["sleep", "60"], gpus=1)
    for i in range(120):  # a long queue of long names behind it
        corral.submit(["true"], gpus=1, name=f"{i}-" + "x" * 190)

    async def session() -> None:
        async with over_stdio(server.home, cwd=short_tmp) as agent:
            expected = [2.0, 1.0, "Infinity", "-Infinity", "NaN"]
            summary = {"first": 2.0, "last": "NaN", "last_finite": 1.0, "min": 1.0, "max": 2.0, "mean": 1.5,
                       "nonfinite": 3}
            query = await call(agent, "metrics_query", metric="loss", workloadId=job["id"], startTime="-1h")
            assert query["source"] == "run" and [p[1] for p in query["points"]] == expected
            assert query["summary"] == summary
            tracked = (await call(agent, "run_metrics", run=run["id"], keys=["loss"]))["series"][0]
            assert [p[1] for p in tracked["points"]] == expected and tracked["summary"] == summary

            ref = str(job["id"])
            past = await call(agent, "workload_logs", workloadId=ref, since=2**53)
            assert (past["lines"], past["nextOffset"], past["complete"]) == ([], len("hello\n"), True)
            assert (await call(agent, "workload_logs", workloadId=ref, since=2))["lines"] == ["llo"]

            runs = await call(agent, "list_runs", limit=100)
            assert json_bytes(runs) <= 32 * 1024 and runs["truncated"] and runs["total"] == 31
            assert 0 < len(runs["runs"]) < 31 and not runs["more"]
            queue = await call(agent, "queue", limit=200)
            assert json_bytes(queue) <= 32 * 1024 and queue["truncated"] and queue["total"] == 121
            assert queue["jobs"][0]["job_id"] == blocker["id"] and queue["jobs"][1]["name"].startswith("0-xxx")

            before = len(corral.queue())
            for place in ("../outside.log", "/tmp/corral-mcp-outside-%j.log"):
                text = await refused(agent, "create_gpu_job", command="true", gpus=0, log_file=place)
                assert text.startswith("log_file: ") and "use a path under the working directory" in text
            assert len(corral.queue()) == before  # nothing was submitted
            inside = await call(agent, "create_gpu_job", command="echo in", gpus=0, log_file="sub/../in-%j.log")
            assert inside["stdout_path"] == os.path.join(short_tmp, f"in-{inside['job_id']}.log")

    anyio.run(session)


@contextmanager
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers: a hung corral server."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_corral_server_that_never_answers_delays_neither_start_nor_tools_for_long(short_tmp):
    async def session(url: str, *options: str) -> tuple[float, str | None]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "corral.cli", "--url", url, "mcp", *options],
                                       cwd=short_tmp)
        started = time.monotonic()
        with tempfile.TemporaryFile("w+") as errlog:
            async with MCPClient(stdio_client(params, errlog=errlog)) as agent:
                ready = time.monotonic() - started
                if not options:
                    return ready, None
                started = time.monotonic()
                text = await refused(agent, "queue")
                assert time.monotonic() - started < 10  # its 1 s, not the client's 60
                return ready, text

    async def both(url: str) -> list[tuple[float, str | None]]:
        results: list[tuple[float, str | None]] = [(0.0, None), (0.0, None)]

        async def run(i: int, *options: str) -> None:
            results[i] = await session(url, *options)

        async with anyio.create_task_group() as group:  # side by side: the test waits for the slower only
            group.start_soon(run, 0)
            group.start_soon(run, 1, "--request-timeout", "1")
        return results

    with silent_server() as url:
        (ready, _), (_, text) = anyio.run(both, url)
    # with the default options: the start-up check gives up after 3 s (the client's is 60); the rest is an
    # interpreter importing the CLI and the MCP SDK (a second and more of CPU), two at once on a loaded machine
    assert ready < 20
    assert text == f"cannot reach the corral server at {url}: timed out; check the URL"


def test_http_names_the_bad_option_and_protects_every_loopback_address(tmp_path):
    from click.testing import CliRunner

    from corral.cli.main import cli

    home = str(tmp_path / "home")
    runner = CliRunner()
    for host in ("203.0.113.7", "no-such-host.invalid"):  # not an address of this machine
        result = runner.invoke(cli, ["--home", home, "mcp", "--http", "--host", host, "--port", "0"])
        assert result.exit_code == 1 and "give --host an address of this machine" in result.output
        assert "plain HTTP" not in result.output  # nothing listened, so nothing was exposed
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        result = runner.invoke(cli, ["--home", home, "mcp", "--http", "--port", port])
        assert result.exit_code == 1 and "pick another --port" in result.output

    process = subprocess.Popen([sys.executable, *corral_mcp(home, "--http", "--host", "127.0.0.2", "--port", "0")],
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "serving MCP" in line:
                break
        assert not any("plain HTTP" in line for line in lines)  # a loopback address: tokens stay on this machine
        port = int(re.search(r"http://127\.0\.0\.2:(\d+)/mcp", lines[-1]).group(1))
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})

        def post(host_header: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.2", port, timeout=10)
            # a token's shape: with no corral server to ask, the MCP server lets the tools say that none answers
            conn.request("POST", "/mcp", body=initialize, headers={
                "Host": host_header, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "Authorization": "Bearer corral_" + "A" * 43})
            status = conn.getresponse().status
            conn.close()
            return status

        assert post("attacker.example") == 421  # a rebound DNS name is refused
        assert post(f"127.0.0.2:{port}") == 200
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_every_tool_names_an_array_task_as_the_agent_does_and_takes_its_id_as_number_or_text(server_factory):
    server = server_factory(gpus=2)
    corral = server.client()
    array = corral.submit(["sleep", "60"], gpus=1, array="0-1%1")  # task 0 runs, task 1 waits
    first = f"{array['id']}_0"
    wait_for(lambda: corral.get(first)["state"] == "RUNNING")
    task_id = corral.get(first)["id"]
    assert task_id != array["id"]
    run = corral.create_run(project="naming", name="task0", job_id=task_id)
    single = corral.submit(["true"], gpus=0)

    async def session() -> None:
        async with over_stdio(server.home) as agent:
            held = [g for g in (await call(agent, "list_gpus"))["gpus"] if not g["free"]]
            assert [g["job_id"] for g in held] == [first]  # not corral's internal id of the task

            runs = (await call(agent, "list_runs", job_id=first))["runs"]
            assert [(r["id"], r["job_id"]) for r in runs] == [(run["id"], first)]
            assert [r["job_id"] for r in (await call(agent, "list_runs", project="naming"))["runs"]] == [first]

            assert (await call(agent, "list_runs", job_id=single["id"]))["runs"] == []
            efficiency = await call(agent, "job_efficiency", job_id=first)
            assert efficiency["job_id"] == first

            # the seed's tools keep workloadId, a string, and take the number too
            assert (await call(agent, "workload_get", workloadId=single["id"]))["workloadId"] == str(single["id"])
            assert (await call(agent, "workload_get", workloadId=str(single["id"])))["workloadId"] == str(single["id"])
            # corral's own keep job_id: the number as given, or the task's text
            assert (await call(agent, "view_gpu_job", job_id=str(single["id"])))["job_id"] == single["id"]
            assert (await refused(agent, "list_runs", job_id="12; rm")).startswith("job_id: give a job number like 12")
            corral.cancel(str(array["id"]))

    anyio.run(session)
