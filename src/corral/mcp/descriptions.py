"""What the agent reads about the server and each tool: when to use it and how to use it well.

Kept apart from the code so the text can be read (and reviewed) as text.
"""

from __future__ import annotations

INSTRUCTIONS = """\
corral runs GPU jobs on a shared GPU machine or a Slurm cluster, as your user: whoever started this
server, or over HTTP the user of your API token. Everybody sees the queue and every job's state; only a
job's owner (or an admin) may stop it or read its logs, and corral says so when you may not.

A typical session: list_gpus (what is free) and recommend_resources (what a model needs) -> forecast_gpu_job
(when it would start, and whether less time or fewer GPUs would start it sooner) -> create_gpu_job
-> view_gpu_job until the job ends -> workload_logs for more output -> metrics_query (GPU and CPU use)
-> diagnose_job when a job failed or runs badly. alert_create watches a job for you.

- Queueing: a GPU job may wait in the queue for minutes or hours when the GPUs are busy. That is normal:
  poll view_gpu_job every minute or two (the reason says why it waits; queue shows what is ahead),
  and never resubmit a job only because it is still PENDING.
- Logs: stdout and stderr go to files (paths in every job view); view_gpu_job shows their last lines,
  workload_logs reads more, and continues from nextOffset while the job runs.
- Checkpoints: write them to $CORRAL_CHECKPOINT_DIR (set in the job's environment). It is the job's own
  directory and stays the same when the job is requeued or preempted, so a training script should resume
  from the newest checkpoint there.
- Storage: the job runs where its GPUs are (on a cluster, another node): code, data and outputs must be on
  storage that machine sees (the shared filesystem), not in a temporary directory of yours.
- Time limits: at its time_limit a job gets SIGTERM, then SIGKILL (state TIMEOUT). Ask for a little more
  than it needs and checkpoint regularly; short jobs often start sooner.
"""

CREATE_GPU_JOB = """\
Submit a job that runs a shell command (or a batch script) on GPUs. Returns at once with the job's id, its
state (PENDING or RUNNING), the reason it waits, and where its logs and checkpoints go; it does not wait
for the job. Then poll view_gpu_job.

The command runs with bash in working_directory, with CUDA_VISIBLE_DEVICES set to exactly its GPUs. Save
checkpoints to $CORRAL_CHECKPOINT_DIR (the same directory after a requeue: resume from it). Paths must be on
storage the GPU machine sees. log_file must lie under working_directory (relative paths start there). Ask
for what the job needs: more GPUs, memory or time than free now means a longer wait in the queue
(list_gpus shows what is free; recommend_resources sizes a model). A request no machine could ever
satisfy is refused at once, naming the field. The command runs as your user (whoever started corral mcp,
or your API token's user), with their files: submit only what you would run in their shell.
"""

FORECAST_GPU_JOB = """\
When a job would start if you created it now, without creating it: takes exactly create_gpu_job's arguments
and answers would_start (ISO 8601 UTC, or null: never as things stand), starts_in, the GPUs it would get, the
reason it would wait, the jobs that hold what it needs (blockers: running jobs to their time limits, jobs
ahead of it in the queue) and alternatives: a shorter time_limit that lets it start now between other jobs
(backfill), or fewer GPUs, each with the create_gpu_job arguments to change and when it would then start.
Call it before create_gpu_job when the GPUs may be busy; nothing is queued and nothing runs. Bad arguments are
refused as create_gpu_job would refuse them; a request no machine could ever run is answered with code
Unsatisfiable and, where fewer GPUs would run, that alternative.
"""

VIEW_GPU_JOB = """\
A job's state, the reason it waits, its times, exit code, log paths and checkpoint directory, and the last
20 lines of its stdout and stderr (bounded). next_step says what to do now. job_id is the id as you gave
it: 12, or "12_3" for task 3 of array 12.

States: PENDING (queued; reason: Resources = waiting for GPUs to free up, Priority = others are ahead),
RUNNING, then COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY or NODE_FAIL. GPU jobs can stay PENDING
for a long time: poll every minute or two while pending, every 30-60 s while running, and do not resubmit.
For the whole log use workload_logs; for why a job failed use diagnose_job.
"""

STOP_GPU_JOB = """\
Stop a job: a pending one leaves the queue; a running one gets SIGTERM, a grace period, then SIGKILL, and
ends CANCELLED. Its logs and checkpoints stay. Stopping a job that already ended changes nothing and says
how it ended. This cannot be undone: a stopped job must be submitted again. Only the job's owner, an
admin or a coordinator of its account may stop it; anyone else is refused, saying who may.
"""

WORKLOAD_SUBMIT = """\
Submit a workload in the seed's shape: command (a list, not run through a shell) plus args, gpus,
gpuMemoryMb, env (an object, or a list of {name, value}), labels, preemptible, maxRuntimeSeconds. Returns
the workload (workloadId, state, reason, log paths); poll workload_get.

It runs the command as your user (whoever started corral mcp, or your API token's user). image runs the
command in that container image: on corral's own machine through the server's container runtime (Podman,
Apptainer, Docker; the server refuses image, saying so, where it has none), on a Slurm cluster through its
Pyxis plugin (srun --container-image). Your home and the working directory are mounted. Checkpoints go to
$CORRAL_CHECKPOINT_DIR, which survives a requeue.
"""

WORKLOAD_GET = """\
A workload's state, the reason it waits, times, exit code and log paths (the seed's shape). A workload is a
corral job: view_gpu_job shows the same job with its last log lines. Pending workloads can wait a long
time for GPUs: poll patiently (every minute or two) and do not resubmit.
"""

WORKLOAD_LOGS = """\
Read a workload's stdout or stderr, bounded (at most 1000 lines and 64 KB per call; longer lines are cut
and marked). Without since: its last `tail` lines. To follow a running job, pass the returned nextOffset
as since on the next call: you get the lines written after it, and complete is true once the job has
ended and all is read. Progress bars (carriage returns) show their last state. Only the job's owner (or
an admin) may read its logs.
"""

METRICS_QUERY = """\
A workload's metric over time: GPU utilization and memory, power, temperature, CPU utilization (percent of
the cores it asked for), resident memory, disk I/O, measured by corral every few seconds; or a metric its
run tracked (e.g. loss). startTime like "-30m" or "-2h". Points are [epoch_seconds, value], thinned to
maxPoints keeping each bucket's low and high. NaN and infinities read "NaN", "Infinity", "-Infinity";
summary gives first and last as they are (last is "NaN" when a loss ended in NaN), last_finite, min, max
and mean of the finite values, and nonfinite (how many are not). Low gpu_utilization with high
cpu_utilization usually means data loading is the bottleneck.
"""

ALERT_CREATE = """\
Create an alert rule: it fires once when its condition holds and resolves when it clears. Scope it to one
job with workloadId (12, "12_3" for a task of an array, or an array's id for all its tasks), or leave it
out to watch every job of your user; the result's scope says which. Conditions:
"state == FAILED", "state in (FAILED, TIMEOUT, OUT_OF_MEMORY)", "gpu_utilization < 10 for 15m",
"metric.loss is nan", "no_progress for 30m" (a hung job), "time_left < 10m", "queue_wait > 2h".
"""

LIST_GPUS = """\
Every GPU now: its type and memory, and whether it is free or which job and user hold it, with live
utilization where measured; totals per type. Use it to choose gpus, gpu_type and gpu_memory: asking for
more than is free means waiting in the queue.
"""

DRAIN_GPUS = """\
Take GPUs out of scheduling (Slurm's DRAIN, per GPU), or a whole node when gpus is left out: no new job is
placed there; jobs already on them run to their end (the GPU shows DRAINING until then, DRAINED after). Say
why in reason: people read it in corral nodes, scontrol show node and sinfo -R. Admins only; anyone else is
refused. corral drains a GPU itself when NVML reports a fatal fault (XID 79, uncorrectable ECC errors, a lost
GPU), with the fault as the reason. resume_gpus gives them back.
"""

RESUME_GPUS = """\
Give drained GPUs back to scheduling, or a node and all its GPUs when gpus is left out (Slurm's RESUME).
Resume a GPU that corral drained for a fault only once it is fixed (a reset, a reboot). Admins only.
"""

QUEUE = """\
The queue: running jobs, then pending ones in priority order, each with its reason (Resources, Priority,
Dependency, ...) and estimated start where known, and training progress for running jobs. Use it to see
why a job waits and how long it may take. The answer stays short (names cut, under 32 KB): truncated says
when jobs were left out; filter by state or user to see them.
"""

LIST_RUNS = """\
Tracked runs (training scripts that call corral.init), newest first: project, state, their job, config and
each metric's last, min and max (NaN and infinities as "NaN", "Infinity", "-Infinity"). Filter by project,
state or job_id. The answer stays short (under 32 KB): a config over 300 characters comes as its JSON
text, cut; at most 20 tags and 20 metrics per run; truncated says when runs were left out. Then
run_metrics for the curves.
"""

RUN_METRICS = """\
A tracked run's metrics by step (e.g. train/loss), downsampled to maxPoints keeping every spike (each
bucket's low and high); several keys at once share 1000 points. Leave keys out to list the run's metrics.
Values and summaries read as in metrics_query ("NaN", "Infinity", "-Infinity"; last, last_finite, nonfinite).
"""

RECOMMEND_RESOURCES = """\
How many GPUs, and which, a model needs to train, fine-tune (full or LoRA) or serve, from its parameter
count and precision, with the arithmetic (weights, gradients, Adam states, activations). Worked out here
without the server. create_gpu_job_arguments gives gpus, gpu_memory and labels to pass on.
"""

DIAGNOSE_JOB = """\
Why a job failed or runs badly, from its samples, logs, tracked metrics and checkpoints: each finding has a
cause (CUDA out of memory, host memory limit, NaN loss, time limit without checkpoint, data loading
starving the GPUs, idle GPUs, hung job, NCCL timeout, missing program, a Python exception...), evidence
(numbers, log lines) and fixes. Call it before resubmitting a failed job.
"""

JOB_EFFICIENCY = """\
How well a job used what it asked for, like Slurm's seff: CPU efficiency, peak memory against the request,
mean GPU utilization and peak GPU memory, with advice when a request was far too large (smaller requests
start sooner).
"""

TOOLS = {
    "create_gpu_job": CREATE_GPU_JOB, "forecast_gpu_job": FORECAST_GPU_JOB, "view_gpu_job": VIEW_GPU_JOB, "stop_gpu_job": STOP_GPU_JOB,
    "workload_submit": WORKLOAD_SUBMIT, "workload_get": WORKLOAD_GET, "workload_logs": WORKLOAD_LOGS,
    "metrics_query": METRICS_QUERY, "alert_create": ALERT_CREATE, "list_gpus": LIST_GPUS, "queue": QUEUE,
    "drain_gpus": DRAIN_GPUS, "resume_gpus": RESUME_GPUS,
    "list_runs": LIST_RUNS, "run_metrics": RUN_METRICS, "recommend_resources": RECOMMEND_RESOURCES,
    "diagnose_job": DIAGNOSE_JOB, "job_efficiency": JOB_EFFICIENCY,
}
"""Each tool's description, by name."""
