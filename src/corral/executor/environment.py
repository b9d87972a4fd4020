"""The environment a job starts with: its own variables, GPU binding, corral's and Slurm's."""

from __future__ import annotations

from collections.abc import Mapping

from corral.core.arrays import parse_array
from corral.core.job import Job
from corral.core.resources import Allocation


def job_environment(
    job: Job, allocation: Allocation, *, server_env: Mapping[str, str], checkpoint_dir: str, server_url: str | None,
    home: str | None = None,
) -> dict[str, str]:
    spec = job.spec
    env = {k: v for k, v in server_env.items() if not k.startswith(("SLURM_", "CORRAL_"))} if spec.inherit_env else {}
    env.update(spec.env)
    gpu_list = ",".join(str(i) for i in allocation.gpu_ids)
    # PCI bus order is the order NVML and nvidia-smi number GPUs in; CUDA's default
    # ("fastest first") may differ, which would pin the job to GPUs it was not given.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["CUDA_VISIBLE_DEVICES"] = gpu_list
    env.setdefault("OMP_NUM_THREADS", str(spec.cpus))
    env.update({
        "CORRAL_JOB_ID": str(job.id),
        "CORRAL_JOB_NAME": spec.name,
        "CORRAL_GPUS": gpu_list,
        "CORRAL_NUM_GPUS": str(len(allocation.gpu_ids)),
        "CORRAL_CPUS": str(spec.cpus),
        "CORRAL_NODE": allocation.node,
        "CORRAL_CHECKPOINT_DIR": checkpoint_dir,
        "CORRAL_RESTART_COUNT": str(job.restarts),
    })
    if spec.time_limit_s:
        env["CORRAL_TIME_LIMIT_S"] = str(spec.time_limit_s)
        env["CORRAL_JOB_END_TIME"] = str(int((job.start_time or 0) + spec.time_limit_s))
    if server_url:
        # CORRAL_HOME_URL marks the address as corral's: while CORRAL_URL still equals it, clients
        # follow the home's address file, so a server restarted on another port is found again
        env["CORRAL_URL"] = env["CORRAL_HOME_URL"] = server_url
    if home:
        env["CORRAL_HOME"] = home  # the server's address file and socket, and the SDK's spool
    if job.array_job_id is not None:
        env["CORRAL_ARRAY_JOB_ID"] = str(job.array_job_id)
        env["CORRAL_ARRAY_TASK_ID"] = str(job.array_task_id)
    if spec.script is not None:
        env.update(slurm_variables(job, allocation))
    return env


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
        "SLURM_NTASKS": "1",
        "SLURM_NPROCS": "1",
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_TASKS_PER_NODE": "1",
        "SLURM_CPUS_PER_TASK": str(spec.cpus),
        "SLURM_CPUS_ON_NODE": str(spec.cpus),
        "SLURM_JOB_CPUS_PER_NODE": str(spec.cpus),
        "SLURM_RESTART_COUNT": str(job.restarts),
    }
    if spec.mem_mb:
        out["SLURM_MEM_PER_NODE"] = str(spec.mem_mb)
    if allocation.gpu_ids:
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
