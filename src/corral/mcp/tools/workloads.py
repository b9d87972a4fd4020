"""The tools in the seed's workload shape: submit a workload, get it, read its logs, query its metrics,
and create an alert on it (or on every job of the user's)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from corral.errors import InvalidRequest
from corral.mcp import bounds
from corral.mcp.field_names import WORKLOAD_FIELDS, fields_named
from corral.mcp.inputs import job_ref
from corral.mcp.lookups import tracked_values
from corral.mcp.results import AlertRule, MetricSeries, Workload, WorkloadLogs
from corral.mcp.tools.calls import MAX_GPUS, TERMINAL, ToolCalls
from corral.mcp.views import number, series_summary, workload_view
from corral.mcp.workload import EnvValue, EnvVar, workload_request

LOG_CHUNK = 1 << 20
"""What the server returns of a log in one read."""
MAX_RUNTIME_S = 365 * 86400
MAX_OFFSET = 2**53
"""The largest log offset taken: past any real log, and exact in every JSON parser."""

WorkloadId = Annotated[StrictInt | StrictStr, Field(description=(
    "The workload's id as workload_submit returned it: \"12\", or \"12_3\" for task 3 of array 12."))]


class WorkloadTools(ToolCalls):
    """workload_submit, workload_get, workload_logs, metrics_query and alert_create."""

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
