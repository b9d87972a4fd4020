"""The tools an agent is given: each checks its input, makes its calls to the corral server with the
agent's credential (over HTTP the token of the request; over stdio whoever started `corral mcp`),
and returns a bounded, structured answer.

Independent of the MCP SDK: `corral.mcp.server` registers these methods as tools. Failures are
`corral.errors` types whose `field` is the tool's own argument name (`gpu_memory`, `workloadId`),
so the agent learns which argument to change.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlencode

from pydantic import Field, StrictBool, StrictInt, StrictStr

from corral.core.states import TERMINAL_STATES
from corral.errors import Conflict, Forbidden, InvalidRequest, Unauthenticated
from corral.mcp import bounds
from corral.mcp.clients import ClientPool
from corral.mcp import draining
from corral.mcp.credentials import AGENT_TOKEN, NO_TOKEN
from corral.mcp.field_names import JOB_FIELDS, WORKLOAD_FIELDS, fields_named
from corral.mcp.inputs import given_id, job_name_of, job_ref, log_file_place
from corral.mcp.lookups import get_json, public_ids, tracked_values
from corral.mcp.results import (
    AlertRule, ForecastView, GpuList, JobView, LogTail, MetricSeries, QueueView, RunList, RunMetrics, StopResult,
    Workload, WorkloadLogs,
)
from corral.mcp.views import (
    evidence, forecast_view, gpu_list, job_view, number, queue_view, run_view, series_summary, workload_view,
)
from corral.mcp.workload import EnvValue, EnvVar, workload_request

if TYPE_CHECKING:
    from corral.client import Client

TERMINAL = frozenset(state.value for state in TERMINAL_STATES)
LOG_CHUNK = 1 << 20
"""What the server returns of a log in one read."""
MAX_GPUS = 1024
MAX_CPUS = 4096
MAX_RUNTIME_S = 365 * 86400
MAX_KEYS = 10
MAX_OFFSET = 2**53
"""The largest log offset taken: past any real log, and exact in every JSON parser."""

JobId = Annotated[StrictInt | StrictStr, Field(description=(
    "The job's id as create_gpu_job or workload_submit returned it: 12, or \"12_3\" for task 3 of array 12."))]
WorkloadId = Annotated[StrictInt | StrictStr, Field(description=(
    "The workload's id as workload_submit returned it: \"12\", or \"12_3\" for task 3 of array 12."))]
Size = Annotated[StrictInt | StrictStr | None, Field(
    description="A size such as \"40G\" or \"512M\"; a bare number is megabytes.")]



GpuCommand = Annotated[str | None, Field(
    description="Shell command line run with bash in working_directory, e.g. \"python train.py --epochs 10\". "
                "Give this or script.", max_length=100_000)]
GpuScript = Annotated[str | None, Field(
    description="Instead of command: the text of a batch script starting with #! (#SBATCH lines are "
                "honoured; the arguments below override them).", max_length=1_000_000)]
WorkingDirectory = Annotated[str | None, Field(
    description="Directory the job runs in (absolute, or relative to where corral mcp runs). Use shared "
                "storage on a cluster.", max_length=4096)]
GpuCount = Annotated[StrictInt, Field(ge=0, le=MAX_GPUS, description="Number of GPUs (0 for a CPU-only job).")]
GpuMemory = Annotated[StrictInt | StrictStr | None, Field(
    description="Each GPU must have at least this much memory, e.g. \"40G\".")]
GpuType = Annotated[str | None, Field(description="Only GPUs of this type, e.g. \"A100\" (see list_gpus).", max_length=64)]
Cpus = Annotated[StrictInt | None, Field(ge=1, le=MAX_CPUS, description="CPU cores (default 1).")]
TimeLimit = Annotated[StrictInt | StrictStr | None, Field(
    description="Time limit: \"30m\", \"2h\", \"1d\", \"1:30:00\", \"2-00:00:00\"; a bare number is minutes. "
                "At the limit the job gets SIGTERM, then SIGKILL (state TIMEOUT).")]
JobEnv = Annotated[dict[str, EnvValue] | None, Field(
    description="Extra environment variables, e.g. {\"EPOCHS\": \"10\"}; the job also inherits the "
                "server's environment.")]
JobName = Annotated[str | None, Field(description="A name to find the job by.", max_length=200)]
LogFile = Annotated[str | None, Field(
    description="Write stdout and stderr to this file: relative to working_directory, and inside it (or "
                "corral's home); %j is the job id, %x the name. Default: separate files in corral's log "
                "directory, shown in the result.",
                max_length=4096)]
Labels = Annotated[dict[str, StrictStr] | None, Field(
    description="Labels, e.g. {\"params\": \"7B\", \"mode\": \"lora\"}: with params, corral warns when "
                "the GPUs asked for cannot hold the model.")]


JobImage = Annotated[StrictStr | None, Field(
    description="A container image the job runs in (Pyxis's --container-image), e.g. "
                "\"nvcr.io/nvidia/pytorch:24.01-py3\": its working directory, home and $CORRAL_CHECKPOINT_DIR are "
                "mounted at the same paths and it gets its GPUs; through the server's Podman or Apptainer, or Pyxis "
                "on a Slurm cluster.", max_length=512)]
ShareGpu = Annotated[StrictBool, Field(
    description="Share one GPU with other small jobs instead of taking whole ones: gpu_memory is then this job's "
                "budget of it (e.g. \"20G\"), gpus must be 1; a job over its budget is warned, then stopped.")]
Reservation = Annotated[StrictStr | None, Field(
    description="Run inside this reservation (GPUs an admin keeps for some users over a window; see list_gpus "
                "and the server's reservations), only on its GPUs and inside its window.", max_length=64)]


def _gpu_job_request(command: str | None, script: str | None, *, cwd: str, working_directory: str | None,
                     **fields: Any) -> tuple[list[str] | None, dict[str, Any]]:
    """create_gpu_job's arguments as a submit's: the argv (None for a script) and the other fields."""
    if (command is None) == (script is None):
        raise InvalidRequest("command", "give exactly one of command (a shell command line) or script "
                             "(a batch script's text)", 'e.g. command="python train.py"')
    if command is not None and not command.strip():
        raise InvalidRequest("command", "must not be empty", 'e.g. command="python train.py"')
    env = fields["env"]
    request: dict[str, Any] = {
        "gpus": fields["gpus"], "gpu_mem": fields["gpu_memory"], "gpu_type": fields["gpu_type"], "cpus": fields["cpus"],
        "mem": fields["memory"], "time": fields["time_limit"],
        "env": None if env is None else {k: str(v) for k, v in env.items()}, "labels": fields["labels"],
        "name": fields["name"] or (job_name_of(command) if command is not None else None), "stdout": fields["log_file"],
        "submit_dir": cwd, "workdir": working_directory,
    }
    if fields.get("image") is not None:
        request["image"] = fields["image"]
    if fields.get("share_gpu"):
        request["gpu_share"] = True
    if fields.get("reservation") is not None:
        request["reservation"] = fields["reservation"]
    return (["bash", "-c", command] if command is not None else None), request


class CorralTools:
    """The tools, calling corral through `clients` with each call's own credential.

    Args:
        clients: lends a `corral.client.Client` for a token (None: the credential `corral mcp` started with).
        cwd: the directory relative working directories start from (where `corral mcp` runs).
        tokens_required: every call must come with an agent's token (`AGENT_TOKEN`): over HTTP, where
            falling back to the credential of whoever started `corral mcp` would lend it to anyone.
    """

    def __init__(self, clients: ClientPool, cwd: str | None = None, *, tokens_required: bool = False) -> None:
        self._clients = clients
        self._cwd = cwd or os.getcwd()
        self._tokens_required = tokens_required

    @contextmanager
    def _client(self) -> Iterator[Client]:
        token = AGENT_TOKEN.get()
        if token is None and self._tokens_required:
            raise Unauthenticated(NO_TOKEN)
        with self._clients.client(token) as client:
            yield client

    # -- GPU jobs ----------------------------------------------------------------------------------

    def create_gpu_job(
        self, command: GpuCommand = None, script: GpuScript = None, working_directory: WorkingDirectory = None,
        gpus: GpuCount = 1, gpu_memory: GpuMemory = None, gpu_type: GpuType = None, cpus: Cpus = None,
        memory: Size = None, time_limit: TimeLimit = None, env: JobEnv = None, name: JobName = None,
        log_file: LogFile = None, labels: Labels = None, image: JobImage = None, share_gpu: ShareGpu = False,
        reservation: Reservation = None,
    ) -> JobView:
        """Submit a GPU job; returns its id, state, reason and log paths."""
        argv, request = _gpu_job_request(command, script, gpus=gpus, gpu_memory=gpu_memory, gpu_type=gpu_type,
                                         cpus=cpus, memory=memory, time_limit=time_limit, env=env, name=name,
                                         log_file=log_file, labels=labels, cwd=self._cwd,
                                         working_directory=working_directory, image=image, share_gpu=share_gpu,
                                         reservation=reservation)
        with self._client() as client, fields_named(JOB_FIELDS):
            home = self._check_log_file(client, request, log_file, working_directory)
            job = client.submit(argv, script=script, **request)
        return job_view(job, home=home)

    def forecast_gpu_job(
        self, command: GpuCommand = None, script: GpuScript = None, working_directory: WorkingDirectory = None,
        gpus: GpuCount = 1, gpu_memory: GpuMemory = None, gpu_type: GpuType = None, cpus: Cpus = None,
        memory: Size = None, time_limit: TimeLimit = None, env: JobEnv = None, name: JobName = None,
        log_file: LogFile = None, labels: Labels = None, image: JobImage = None, share_gpu: ShareGpu = False,
        reservation: Reservation = None,
    ) -> ForecastView:
        """When a job would start if created now, what holds it back, and what would start it sooner; creates nothing."""
        argv, request = _gpu_job_request(command, script, gpus=gpus, gpu_memory=gpu_memory, gpu_type=gpu_type,
                                         cpus=cpus, memory=memory, time_limit=time_limit, env=env, name=name,
                                         log_file=log_file, labels=labels, cwd=self._cwd,
                                         working_directory=working_directory, image=image, share_gpu=share_gpu,
                                         reservation=reservation)
        with self._client() as client, fields_named(JOB_FIELDS):
            self._check_log_file(client, request, log_file, working_directory)
            answer = client.forecast(argv, script=script, **request)
        return forecast_view(answer, gpu_type=gpu_type)

    def _check_log_file(self, client: Client, request: Mapping[str, Any], log_file: str | None,
                        working_directory: str | None) -> str | None:
        """The server's home; refuses a log file that would be written outside the working directory and the home."""
        home = client.health().get("home")
        if log_file is not None:
            # %u is the job's user: the caller, not whoever runs the corral server
            log_file_place(log_file, workdir=os.path.join(self._cwd, working_directory or ""), home=home,
                           name=request.get("name") or "job", user=str(client.whoami().get("user") or "user"))
        return home

    def view_gpu_job(self, job_id: JobId) -> JobView:
        """A job's state, reason, times, exit code, log paths and the last lines of its logs."""
        ref = job_ref(job_id, "job_id")
        with self._client() as client, fields_named({}, job="job_id"):
            job = client.get(ref)
            home = client.health().get("home")
            view = job_view(job, home=home, given=given_id(ref))
            try:
                view["stdout_tail"] = self._tail(client, job, "stdout")
                if job.get("stderr_path") != job.get("stdout_path"):
                    view["stderr_tail"] = self._tail(client, job, "stderr")
            except Forbidden as exc:  # everybody sees the queue; logs are their owner's
                view.pop("stdout_tail", None)
                view.setdefault("warnings", []).append(f"logs not shown: {exc.message}")
        return view

    def stop_gpu_job(self, job_id: JobId) -> StopResult:
        """Stop a job: a pending one leaves the queue, a running one gets SIGTERM, then SIGKILL."""
        ref = job_ref(job_id, "job_id")
        given = given_id(ref)
        with self._client() as client, fields_named({}, job="job_id"):
            try:
                job = client.cancel(ref)
            except Conflict:  # it had already ended: say how, which is what the agent wants to know
                job = client.get(ref)
                return {"job_id": given, "ref": str(job.get("ref") or ref), "state": job["state"],
                        "already_ended": True, "message": f"job {ref} had already ended ({job['state']}); nothing to stop"}
        state = job["state"]
        message = (f"job {ref} stopped ({state})" if state in TERMINAL else
                   f"job {ref} is stopping ({state}): it got SIGTERM and is killed after a grace period; "
                   "view_gpu_job shows it CANCELLED once it has ended")
        return {"job_id": given, "ref": str(job.get("ref") or ref), "state": state, "already_ended": False,
                "message": message}

    def _tail(self, client: Client, job: Mapping[str, Any], stream: str) -> LogTail:
        path = job.get(f"{stream}_path")
        if job["state"] == "PENDING":
            return {"path": path, "lines": [], "omitted_lines": 0, "cut_lines": 0}
        data, _, _ = client.logs(job["id"], stream=stream, tail=bounds.VIEW_LOG_LINES)
        excerpt = bounds.last_lines(data, bounds.VIEW_LOG_LINES, bounds.VIEW_LOG_BYTES, bounds.VIEW_LINE_CHARS)
        return {"path": path, "lines": excerpt.lines, "omitted_lines": excerpt.omitted_lines,
                "cut_lines": excerpt.cut_lines}

    # -- the seed's workload shape -----------------------------------------------------------------

    def workload_submit(
        self,
        command: Annotated[list[StrictStr], Field(
            description="The program and its arguments, e.g. [\"python\", \"train.py\"] (not run through a shell).",
            min_length=1, max_length=10_000)],
        name: Annotated[str | None, Field(description="A name to find the workload by.", max_length=200)] = None,
        image: Annotated[str | None, Field(
            description="A container image to run in, e.g. \"nvcr.io#nvidia/pytorch:24.05-py3\": on corral's own "
                        "machine through the server's container runtime (Podman, Apptainer, Docker), on a Slurm "
                        "cluster through Pyxis (srun --container-image).", max_length=512)] = None,
        gpus: Annotated[StrictInt, Field(ge=0, le=MAX_GPUS, description="Number of GPUs.")] = 1,
        gpuMemoryMb: Annotated[StrictInt | None, Field(  # noqa: N803 - the seed's names
            ge=1, le=2**31 - 1, description="Each GPU must have at least this many megabytes, e.g. 40960.")] = None,
        env: Annotated[dict[str, EnvValue] | list[EnvVar] | None, Field(
            description="Environment variables: {\"NAME\": \"value\"} or [{\"name\": \"NAME\", \"value\": \"value\"}].",
        )] = None,
        args: Annotated[list[StrictStr] | None, Field(description="Arguments appended to command.", max_length=10_000)] = None,
        labels: Annotated[dict[str, StrictStr] | None, Field(description="Labels to find the workload by.")] = None,
        preemptible: Annotated[StrictBool | None, Field(
            description="May be stopped for a job of higher priority and requeued (checkpoint to resume).")] = None,
        maxRuntimeSeconds: Annotated[StrictInt | None, Field(  # noqa: N803
            ge=1, le=MAX_RUNTIME_S, description="Time limit in seconds; then SIGTERM, SIGKILL (TIMEOUT).")] = None,
    ) -> Workload:
        """Submit a workload in the seed's shape."""
        with self._client() as client, fields_named(WORKLOAD_FIELDS):
            health = client.health()
            request = workload_request(
                backend=str(health.get("backend", "local")), command=command, args=args, image=image, name=name,
                gpus=gpus, gpu_memory_mb=gpuMemoryMb, env=env, labels=labels, preemptible=preemptible,
                max_runtime_s=maxRuntimeSeconds)
            command_argv = request.pop("command", None)
            job = client.submit(command_argv, submit_dir=self._cwd, **request)
        return workload_view(job, home=health.get("home"))

    def workload_get(self, workloadId: WorkloadId) -> Workload:  # noqa: N803
        """A workload's state, reason, times, exit code and log paths."""
        ref = job_ref(workloadId, "workloadId")
        with self._client() as client, fields_named(WORKLOAD_FIELDS, job="workloadId"):
            job = client.get(ref)
            home = client.health().get("home")
        return workload_view(job, home=home)

    def workload_logs(
        self,
        workloadId: WorkloadId,  # noqa: N803
        tail: Annotated[StrictInt, Field(ge=1, le=bounds.LOG_MAX_LINES, description=(
            "Without since: the last this many lines. With since: at most this many lines from there."))]
        = bounds.LOG_DEFAULT_LINES,
        since: Annotated[StrictInt | None, Field(ge=0, le=MAX_OFFSET, description=(
            "A byte offset to read on from: the nextOffset of the previous call (past the end reads from the "
            "end). Leave out for the last lines."))]
        = None,
        stream: Annotated[Literal["stdout", "stderr"], Field(description="Which log.")] = "stdout",
    ) -> WorkloadLogs:
        """Lines of a workload's stdout or stderr, bounded; nextOffset continues where they end."""
        ref = job_ref(workloadId, "workloadId")
        with self._client() as client, fields_named(WORKLOAD_FIELDS, job="workloadId"):
            if since is None:
                data, next_offset, state = client.logs(ref, stream=stream, tail=tail)
                excerpt = bounds.last_lines(data, tail, bounds.LOG_MAX_BYTES, bounds.LOG_LINE_CHARS)
                complete = state in TERMINAL
            else:
                start = since
                if since > 0:  # an offset past the end reads from the end (the server cannot seek that far)
                    _, size, _ = client.logs(ref, stream=stream, tail=0)
                    start = min(since, size)
                data, end, state = client.logs(ref, stream=stream, offset=start)
                at_end = state in TERMINAL and len(data) < LOG_CHUNK
                excerpt, used = bounds.first_lines(data, tail, bounds.LOG_MAX_BYTES, bounds.LOG_LINE_CHARS,
                                                   at_end=at_end)
                next_offset = start + used if data else end
                complete = at_end and used == len(data)
        return {"workloadId": ref, "stream": stream, "state": state, "lines": excerpt.lines,
                "nextOffset": next_offset, "omittedLines": excerpt.omitted_lines, "cutLines": excerpt.cut_lines,
                "complete": complete}

    def metrics_query(
        self,
        metric: Annotated[str, Field(min_length=1, max_length=250, description=(
            "gpu_utilization, gpu_memory_mb, gpu_power_w, gpu_temperature_c, cpu_utilization, cpu_time_s, rss_mb, "
            "read_mb_s, write_mb_s, processes; or a metric the job's run tracked, e.g. loss."))],
        workloadId: WorkloadId,  # noqa: N803
        startTime: Annotated[str, Field(max_length=64, description=(  # noqa: N803
            "Start of the range: \"-30m\", \"-2h\", \"-1d\", ISO 8601 or epoch seconds."))] = "-30m",
        endTime: Annotated[str | None, Field(max_length=64, description="End of the range; default now.")]  # noqa: N803
        = None,
        maxPoints: Annotated[StrictInt, Field(ge=2, le=bounds.MAX_POINTS, description=(  # noqa: N803
            "Longer series are thinned to this many points, keeping each bucket's low and high."))]
        = bounds.DEFAULT_POINTS,
    ) -> MetricSeries:
        """A workload's metric over time, downsampled."""
        ref = job_ref(workloadId, "workloadId")
        names = {**WORKLOAD_FIELDS, "start": "startTime", "end": "endTime", "max_points": "maxPoints"}
        with self._client() as client, fields_named(names, job="workloadId", missing="metric"):
            result = client.metrics(ref, metric, start=startTime, end=endTime, max_points=maxPoints)
            points = [[t, number(v)] for t, v in result.get("points", [])][:bounds.MAX_POINTS]
            if result.get("source") == "run" and any(v is None for _, v in points):
                points = tracked_values(client, int(result["job"]), metric, points)
        return {"workloadId": ref, "metric": metric, "source": result.get("source", ""),
                "count": int(result.get("count", len(points))), "points": points,
                "summary": series_summary([p[1] for p in points])}

    def alert_create(
        self,
        name: Annotated[str, Field(min_length=1, max_length=64, description=(
            "A unique name: letters, digits, '-', '_' and '.'."))],
        condition: Annotated[str, Field(min_length=1, max_length=500, description=(
            "e.g. \"state == FAILED\", \"state in (FAILED, TIMEOUT, OUT_OF_MEMORY)\", \"gpu_utilization < 10 for "
            "15m\", \"metric.loss is nan\", \"no_progress for 30m\", \"time_left < 10m\", \"queue_wait > 2h\"."))],
        severity: Annotated[Literal["info", "warning", "critical"], Field(description="How urgent.")] = "warning",
        message: Annotated[str, Field(max_length=2000, description=(
            "Text sent when it fires; {job} {name} {user} {state} {value} {rule} are filled in."))] = "",
        workloadId: Annotated[StrictInt | StrictStr | None, Field(description=(  # noqa: N803
            "Only this job: 12, or \"12_3\" for task 3 of array 12 (an array's id watches all its tasks); "
            "leave out to watch every job of yours."))] = None,
        channels: Annotated[list[StrictStr] | None, Field(max_length=20, description=(
            "Channels (set up with `corral alert channel add`) to notify; firings are recorded either way."))]
        = None,
    ) -> AlertRule:
        """Create an alert rule, on one job or on every job of the user's."""
        ref = job_ref(workloadId, "workloadId") if workloadId is not None else None
        with self._client() as client:
            job_id = user = None
            if ref is None:
                user = client.whoami().get("user") or None  # the caller: the server's own user is root on a shared one
                scope = f"every job of user {user} (yours)" if user else "every job"
            else:
                with fields_named({"job_id": "workloadId"}, job="workloadId"):
                    job = client.get(ref)
                if "_" in ref and job.get("array_task_id") is None:
                    raise InvalidRequest("workloadId", f"task {ref} has not started yet, so it is not a job of its "
                                         "own to watch", f"watch the whole array (workloadId={ref.split('_')[0]}), "
                                         "or create the alert once the task runs")
                job_id = int(job["id"])
                scope = f"job {ref}"
            with fields_named({"job": "workloadId"}, job="workloadId", missing="channels", clash="name"):
                rule = client.create_alert(name, condition, severity=severity, message=message, job=job_id,
                                           user=user, channels=channels or ())
        return {"name": rule["name"], "condition": rule["condition"], "severity": rule["severity"], "scope": scope,
                "message": rule.get("message") or "", "channels": list(rule.get("channels") or []),
                "note": "Fires once when the condition holds (a job ending in a watched state fires at once) and "
                        "resolves when it clears; firings are listed by `corral alert list` and on the dashboard."}

    # -- the cluster, the queue, runs --------------------------------------------------------------

    def drain_gpus(
        self,
        reason: Annotated[str, Field(min_length=1, max_length=1000, description=(
            "Why, as people will read it in corral nodes and scontrol show node, e.g. \"XID 79\", \"fan failure\"."))],
        gpus: Annotated[list[StrictInt] | None, Field(max_length=64, description=(
            "GPU indexes on the node (see list_gpus); leave out to drain the whole node."))] = None,
        node: Annotated[str | None, Field(max_length=200, description=(
            "The node; leave out on a server with one node."))] = None,
    ) -> draining.DrainResult:
        """Take GPUs (or a node) out of scheduling, admins only; jobs on them run to their end."""
        with self._client() as client:
            return draining.drain(client, node, gpus, reason)

    def resume_gpus(
        self,
        gpus: Annotated[list[StrictInt] | None, Field(max_length=64, description=(
            "GPU indexes to give back; leave out to resume the node and all its GPUs."))] = None,
        node: Annotated[str | None, Field(max_length=200, description=(
            "The node; leave out on a server with one node."))] = None,
    ) -> draining.DrainResult:
        """Give drained GPUs (or a node) back to scheduling, admins only."""
        with self._client() as client:
            return draining.resume(client, node, gpus)

    def list_gpus(self) -> GpuList:
        """Every GPU now: free, or held by which job and user; totals per type."""
        with self._client() as client:
            return gpu_list(get_json(client, "/api/v1/cluster"))

    def queue(
        self,
        state: Annotated[Literal["PENDING", "RUNNING"] | None, Field(description="Only these.")] = None,
        user: Annotated[str | None, Field(max_length=64, description="Only this user's jobs.")] = None,
        limit: Annotated[StrictInt, Field(ge=1, le=bounds.MAX_LIST, description=(
            "At most this many jobs (fewer when their names are long: an answer stays short)."))] = 50,
    ) -> QueueView:
        """Running jobs, then pending ones in priority order with their reasons and estimated starts."""
        query = [("limit", str(limit))] + [(k, v) for k, v in (("state", state), ("user", user)) if v is not None]
        with self._client() as client:
            page = get_json(client, f"/api/v1/queue?{urlencode(query)}")
        return queue_view(page, limit)

    def list_runs(
        self,
        project: Annotated[str | None, Field(max_length=200, description="Only this project's runs.")] = None,
        state: Annotated[Literal["running", "finished", "failed", "crashed"] | None, Field(
            description="Only runs in this state.")] = None,
        job_id: Annotated[StrictInt | StrictStr | None, Field(description=(
            "Only the runs of this job: 12, or \"12_3\" for task 3 of array 12 (a workloadId as it is)."))] = None,
        limit: Annotated[StrictInt, Field(ge=1, le=100, description=(
            "At most this many runs, newest first (fewer when they are large: an answer stays short)."))] = 20,
    ) -> RunList:
        """Tracked runs, newest first: config, state, and each metric's last, min and max."""
        with self._client() as client:
            job = None
            if job_id is not None:
                ref = job_ref(job_id, "job_id")
                with fields_named({}, job="job_id"):
                    job = int(client.get(ref)["id"]) if "_" in ref else int(ref)
            runs = client.runs(project=project, state=state, job=job, limit=limit + 1)
            ids = public_ids(client, {r["job_id"] for r in runs[:limit] if isinstance(r.get("job_id"), int)})
        matched = [run_view(r, ids.get(r["job_id"]) if isinstance(r.get("job_id"), int) else None) for r in runs[:limit]]
        view: RunList = {"runs": [], "total": len(matched), "more": len(runs) > limit, "truncated": False}
        view["runs"], dropped = bounds.fit_items(matched, bounds.RESULT_BYTES - bounds.json_size(view))
        view["truncated"] = dropped or view["more"]
        return view

    def run_metrics(
        self,
        run: Annotated[StrictInt | StrictStr, Field(description="The run's id or uid (see list_runs).")],
        keys: Annotated[list[StrictStr] | None, Field(min_length=1, max_length=MAX_KEYS, description=(
            "Metric names, e.g. [\"train/loss\", \"val/acc\"]; leave out to list the run's metrics."))] = None,
        maxPoints: Annotated[StrictInt, Field(ge=2, le=bounds.MAX_POINTS, description=(  # noqa: N803
            "Points per metric (fewer when several are asked for: 1000 in all), keeping each bucket's low and "
            "high."))] = bounds.DEFAULT_POINTS,
    ) -> RunMetrics:
        """A run's tracked metrics by step, downsampled."""
        with self._client() as client, fields_named({"key": "keys", "max_points": "maxPoints", "ref": "run"},
                                                    missing="run"):
            info = client.get_run(run)
            available = sorted(info.get("metrics") or {})
            series = []
            per_key = max(2, min(maxPoints, bounds.RUN_METRICS_TOTAL_POINTS // len(keys or [1])))
            for key in keys or []:
                if key not in available:
                    raise InvalidRequest("keys", f"run {info['id']} has no metric {key!r}",
                                         f"it has: {', '.join(available[:30]) or 'none yet'}")
                data = client.series(info["id"], key, max_points=per_key)
                points = [[step, number(value)] for step, value in zip(data["steps"], data["values"])]
                series.append({"key": key, "count": data["count"], "downsampled": data["downsampled"],
                               "points": points, "summary": series_summary(data["values"])})
        return {"run": str(info["id"]), "series": series, "available_keys": available[:100]}

    # -- advice ------------------------------------------------------------------------------------

    def recommend_resources(
        self,
        params: Annotated[str, Field(max_length=32, description="The model's parameter count: \"350M\", \"7B\", "
                                                                "\"1.5B\", \"70e9\".")],
        mode: Annotated[Literal["train", "finetune", "lora", "inference"], Field(description=(
            "train/finetune: full training with Adam; lora: adapters on frozen weights; inference."))] = "train",
        precision: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"], Field(description=(
            "Precision of the weights; int8/int4 only with lora or inference."))] = "bf16",
        gpu_type: Annotated[str | None, Field(max_length=32, description=(
            "Size for this GPU type (H100, A100-40G, L40S, ...) instead of choosing."))] = None,
    ) -> dict[str, Any]:
        """The GPUs a model needs, with the arithmetic (worked out here; no server asked)."""
        from corral.core.sizing import USABLE_FRACTION, estimate, format_estimate, parse_params

        result = estimate(parse_params(params), mode, precision, gpu_type)
        data = result.to_dict()
        data["summary"] = format_estimate(result).splitlines()[0]
        # the least memory a GPU needs to hold its share: any type that large will do, not only the one named
        per_gpu_gib = math.ceil(result.total_gb / result.gpus / USABLE_FRACTION * 1e9 / 2**30)
        data["create_gpu_job_arguments"] = {
            "gpus": result.gpus, "gpu_memory": f"{per_gpu_gib}G", "labels": {"params": params, "mode": mode}}
        if result.nodes > 1:
            data["note"] = (f"{result.gpus} GPUs span {result.nodes} nodes: that needs a corral server with the "
                            "Slurm backend (multi-node jobs).")
        return data

    def diagnose_job(self, job_id: JobId) -> dict[str, Any]:
        """Why a job failed or runs badly: causes, evidence and fixes."""
        ref = job_ref(job_id, "job_id")
        with self._client() as client, fields_named({}, job="job_id"):
            result = client.diagnose(ref)
        job = result.get("job") or {}
        return evidence({"job_id": given_id(ref), "state": job.get("state"), "exit_code": job.get("exit_code"),
                         "findings": result.get("findings") or [], "checked": result.get("checked") or {},
                         "unchecked": result.get("unchecked") or [], "usage": result.get("usage") or {}})

    def job_efficiency(self, job_id: JobId) -> dict[str, Any]:
        """How well a job used the CPUs, memory and GPUs it asked for, with advice."""
        ref = job_ref(job_id, "job_id")
        with self._client() as client, fields_named({}, job="job_id"):
            return evidence({"job_id": given_id(ref), **client.efficiency(ref)})
