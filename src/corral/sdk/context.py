"""Where a training process runs: its job (corral or Slurm), its rank, its node, its code version.

Read once at `corral.init`, from the environment a job gets (see corral.executor.environment)
or the one torchrun / Slurm give each rank.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

GIT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class JobContext:
    """What the environment says about the process that called `init`."""

    job: str | None
    """The job as the resume key names it: a corral job id ("12"), a Slurm one ("slurm-345_7"), or None."""
    corral_job_id: int | None
    """Set for corral jobs only: the run is linked to it on the server."""
    rank: int
    node: str
    checkpoint_dir: str | None
    time_limit_s: float | None
    end_time: float | None


def detect_job(environ: Mapping[str, str] | None = None) -> JobContext:
    """Read the job, rank and limits from `environ` (default: os.environ)."""
    env = os.environ if environ is None else environ
    corral_job = _int(env.get("CORRAL_JOB_ID"))
    if corral_job is not None:
        job: str | None = str(corral_job)
    elif env.get("SLURM_JOB_ID"):
        # an array task has its own SLURM_JOB_ID, but ARRAY_JOB_ID_TASK_ID is the name people know
        array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
        job = f"slurm-{array}_{task}" if array and task else f"slurm-{env['SLURM_JOB_ID']}"
    else:
        job = None
    return JobContext(
        job=job,
        corral_job_id=corral_job,
        rank=detect_rank(env),
        node=env.get("CORRAL_NODE") or socket.gethostname(),
        checkpoint_dir=env.get("CORRAL_CHECKPOINT_DIR") or None,
        time_limit_s=_float(env.get("CORRAL_TIME_LIMIT_S")),
        end_time=_float(env.get("CORRAL_JOB_END_TIME") or env.get("SLURM_JOB_END_TIME")),
    )


def detect_rank(environ: Mapping[str, str]) -> int:
    """The global rank: torchrun's RANK first (under srun + torchrun every worker has SLURM_PROCID=0)."""
    for name in ("RANK", "SLURM_PROCID", "LOCAL_RANK"):
        value = _int(environ.get(name))
        if value is not None:
            return value
    return 0


def resume_key(job: str | None, project: str, name: str | None, init_index: int, rank: int | None = None,
               program: str | None = None) -> str | None:
    """The key under which a requeued job finds its run again; None outside a job.

    `program` (default: the script's file name) keeps apart the programs one job runs one after
    another (`python train.py; python eval.py`); `init_index` counts the `init` calls of this
    process, so a script that makes several runs gets each one back in order; `rank` is given
    when every rank keeps its own run.
    """
    if job is None:
        return None
    if program is None:
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    key = f"job:{job}:{program}:{project}:{name or ''}:{init_index}"
    return key if rank is None else f"{key}:rank:{rank}"


def git_commit(cwd: str | None = None, timeout: float = GIT_TIMEOUT_S) -> str | None:
    """HEAD of the repository holding `cwd`, or None (no git, no repository, slow filesystem)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
