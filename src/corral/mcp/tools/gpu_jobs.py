"""The GPU-job tools: create a job, forecast its start, view it with its logs' last lines, stop it; and
the arguments create_gpu_job and forecast_gpu_job share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, StrictBool, StrictInt, StrictStr

from corral.errors import Conflict, Forbidden, InvalidRequest
from corral.mcp import bounds
from corral.mcp.field_names import JOB_FIELDS, fields_named
from corral.mcp.inputs import given_id, job_name_of, job_ref, log_file_place
from corral.mcp.results import ForecastView, JobView, LogTail, StopResult
from corral.mcp.tools.calls import MAX_GPUS, TERMINAL, JobId, ToolCalls
from corral.mcp.views import forecast_view, job_view
from corral.mcp.workload import EnvValue

if TYPE_CHECKING:
    from corral.client import Client

MAX_CPUS = 4096

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


class GpuJobTools(ToolCalls):
    """create_gpu_job, forecast_gpu_job, view_gpu_job and stop_gpu_job."""

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
