"""The environment a job starts with: its own variables, GPU binding, corral's and Slurm's."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from corral.core.jobspec.arrays import parse_array
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.executor.mig import cuda_visible_devices


def job_environment(
    job: Job, allocation: Allocation | None, *, server_env: Mapping[str, str], checkpoint_dir: str,
    server_url: str | None, home: str | None = None,
    slurm_commands: str | None = None, gpu_uuids: Mapping[int, str] | None = None,
) -> dict[str, str]:
    """The environment a job starts with, on either backend.

    Args:
        allocation: the node and GPUs corral gave it (the local backend); None where the
            cluster places the job and sets its own `SLURM_*` and GPU variables (Slurm).
        server_env: what `--export=ALL` inherits (the server's own; sbatch passes its own instead).
        slurm_commands: the directory of corral's Slurm commands (`corral slurm-path`), put first on the
            job's PATH so that `srun` in it is corral's step, not a real Slurm's (which knows no such job).
        gpu_uuids: the node's GPUs' UUIDs by index: a MIG slice is bound by its `MIG-<uuid>` (`corral.executor.mig`).
    """
    spec = job.spec
    env = {k: v for k, v in server_env.items() if not k.startswith(("SLURM_", "CORRAL_"))} if spec.inherit_env else {}
    env.update(spec.env)
    if allocation is not None:
        env.update(_placement_variables(job, allocation, env, gpu_uuids or {}))
    env.update({
        "CORRAL_JOB_ID": str(job.id),
        "CORRAL_JOB_NAME": spec.name,
        "CORRAL_CHECKPOINT_DIR": checkpoint_dir,
    })
    mlflow_context = _mlflow_run_context(env.get("MLFLOW_RUN_CONTEXT"), job.id)
    if mlflow_context is not None:
        env["MLFLOW_RUN_CONTEXT"] = mlflow_context
    if spec.time_limit_s:
        env["CORRAL_TIME_LIMIT_S"] = str(spec.time_limit_s)
    if server_url:
        env["CORRAL_URL"] = server_url
        # CORRAL_HOME_URL marks the address as corral's: while CORRAL_URL still equals it, clients follow the
        # home's address file where they see it and it can only be the server's (corral.server_address.locate),
        # so a server restarted on another port is found again
        env["CORRAL_HOME_URL"] = server_url
    if home:
        env["CORRAL_HOME"] = home  # the server's address file and socket, and the SDK's spool
    if allocation is not None and (spec.script is not None or spec.interactive):
        env.update(slurm_variables(job, allocation))  # a batch script's, srun's and salloc's
    if slurm_commands:
        rest = [entry for entry in (env.get("PATH") or os.defpath).split(os.pathsep) if entry not in ("", slurm_commands)]
        env["PATH"] = os.pathsep.join([slurm_commands, *rest])
    return env


def _mlflow_run_context(given: str | None, job_id: int) -> str | None:
    """MLflow's client turns `MLFLOW_RUN_CONTEXT` (JSON) into tags of every run it creates: the tag
    `corral.job_id` attaches an MLflow run to its job (corral.tracking.compat.mlflow_tracking), as the SDK's
    `job_id` does. Tags the user put there are kept; one that is not a JSON object is left alone."""
    context: dict[str, object] = {}
    if given:
        try:
            parsed = json.loads(given)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        context = parsed
    return json.dumps({**context, "corral.job_id": str(job_id)})


def _placement_variables(job: Job, allocation: Allocation, env: Mapping[str, str],
                         gpu_uuids: Mapping[int, str]) -> dict[str, str]:
    """Where corral put the job: its GPUs, CPUs, node, and what its start fixes (restarts, end time)."""
    spec = job.spec
    gpu_list = ",".join(str(i) for i in allocation.gpu_ids)
    out = {
        # PCI bus order is the order NVML and nvidia-smi number GPUs in; CUDA's default
        # ("fastest first") may differ, which would pin the job to GPUs it was not given.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": cuda_visible_devices(allocation.gpu_ids, gpu_uuids),
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", str(spec.cpus_per_task)),
        "CORRAL_GPUS": gpu_list,
        "CORRAL_NUM_GPUS": str(len(allocation.gpu_ids)),
        "CORRAL_CPUS": str(spec.cpus),
        "CORRAL_NODE": allocation.node,
        "CORRAL_RESTART_COUNT": str(job.restarts),
    }
    if spec.gpu_share_mb:  # a sharing job's GPU memory budget (`corral.core.scheduling.sharing`): a command's as a script's
        out["CORRAL_GPU_MEM_MB"] = str(spec.gpu_share_mb)
    if spec.time_limit_s:
        out["CORRAL_JOB_END_TIME"] = str(int((job.start_time or 0) + spec.time_limit_s))
    if job.array_job_id is not None:
        out["CORRAL_ARRAY_JOB_ID"] = str(job.array_job_id)
        out["CORRAL_ARRAY_TASK_ID"] = str(job.array_task_id)
    return out


def slurm_variables(job: Job, allocation: Allocation) -> dict[str, str]:
    """What sbatch gives a batch script, so scripts written for Slurm run unchanged."""
    spec = job.spec
    gpu_list = ",".join(str(i) for i in allocation.gpu_ids)
    out = {
        "SLURM_JOB_ID": str(job.id),
        "SLURM_JOBID": str(job.id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_USER": spec.user,
        "SLURM_SUBMIT_DIR": spec.submit_dir,
        "SLURM_SUBMIT_HOST": allocation.node,
        "SLURM_JOB_NODELIST": allocation.node,
        "SLURM_NODELIST": allocation.node,
        "SLURMD_NODENAME": allocation.node,
        "SLURM_CLUSTER_NAME": "corral",
        "SLURM_JOB_PARTITION": spec.partition or "default",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NNODES": "1",
        "SLURM_NTASKS": str(spec.ntasks),
        "SLURM_NPROCS": str(spec.ntasks),
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_TASKS_PER_NODE": str(spec.ntasks),
        "SLURM_CPUS_PER_TASK": str(spec.cpus_per_task),
        "SLURM_CPUS_ON_NODE": str(spec.cpus),
        "SLURM_JOB_CPUS_PER_NODE": str(spec.cpus),
        "SLURM_RESTART_COUNT": str(job.restarts),
    }
    if spec.ntasks_per_node is not None:
        out["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if spec.gpus_per_task is not None:
        out["SLURM_GPUS_PER_TASK"] = str(spec.gpus_per_task)
    if spec.mem_mb:
        out["SLURM_MEM_PER_NODE"] = str(spec.mem_mb)
    if spec.open_mode == "append":
        out["SLURM_OPEN_MODE"] = "a"  # what srun reads: its steps append to the job's logs too
    if spec.gpu_shards:  # as Slurm sets for --gres=shard:N, in place of the GPU counts
        out["SLURM_SHARDS_ON_NODE"] = str(spec.gpu_shards)
    elif allocation.gpu_ids:
        out["SLURM_JOB_GPUS"] = gpu_list
        out["SLURM_GPUS_ON_NODE"] = str(len(allocation.gpu_ids))
        out["SLURM_GPUS"] = str(len(allocation.gpu_ids))
    if job.array_job_id is not None and spec.array is not None:
        tasks = parse_array(spec.array).task_ids
        out.update({
            "SLURM_ARRAY_JOB_ID": str(job.array_job_id), "SLURM_ARRAY_TASK_ID": str(job.array_task_id),
            "SLURM_ARRAY_TASK_COUNT": str(len(tasks)), "SLURM_ARRAY_TASK_MIN": str(tasks[0]),
            "SLURM_ARRAY_TASK_MAX": str(tasks[-1]),
        })
    if job.spec.time_limit_s:
        out["SLURM_JOB_END_TIME"] = str(int((job.start_time or 0) + job.spec.time_limit_s))
    return out
