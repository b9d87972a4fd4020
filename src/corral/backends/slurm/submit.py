"""Handing a job to Slurm: its files in the home, its environment, its sbatch call (`SlurmSubmitter`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from corral.backends.base import SubmitRefused
from corral.backends.slurm.cluster import SlurmCluster
from corral.backends.slurm.script import build_sbatch
from corral.core.jobspec.job import Job
from corral.core.jobspec.paths import expand_pattern
from corral.executor.environment import job_environment
from corral.executor.files import write_json_atomic
from corral.home import HomeLayout

log = logging.getLogger("corral.slurm")

_TASK_SENTINEL = "\x00TASK\x00"


class SlurmSubmitter:
    def __init__(self, cluster: SlurmCluster, *, home: str, partition: str | None, account: str | None,
                 server_url: Callable[[], str | None], job_token: Callable[[Job], str] | None) -> None:
        """`job_token`: makes the API token a job's SDK sends from its compute node (another machine,
        which the server cannot name by the kernel)."""
        self.cluster = cluster
        self.layout = HomeLayout(home)
        self.partition = partition
        self.account = account
        self.server_url = server_url
        self.job_token = job_token

    def submit(self, job: Job, dependency: str | None) -> str:
        """sbatch the job; returns Slurm's id.

        Raises:
            SubmitRefused: sbatch refused it (its words).
        """
        job_dir = self.layout.job_dir(job.id)
        os.makedirs(job_dir, exist_ok=True)
        checkpoint_dir = self.layout.checkpoint_dir(job.id)
        os.makedirs(checkpoint_dir, exist_ok=True)
        user_script = None
        if job.spec.script is not None:
            user_script = os.path.join(job_dir, "user-script")
            _write_executable(user_script, job.spec.script)
        stdout = log_pattern(job, "stdout")
        stderr = log_pattern(job, "stderr") if job.spec.stderr else None
        for path in (stdout, stderr):
            if path:  # Slurm fails a job whose log it cannot open (JobLaunchFailure)
                os.makedirs(os.path.dirname(path), exist_ok=True)
        request = build_sbatch(
            job, partition=self.partition, account=self.account, dependency=dependency,
            env=self._environment(job, checkpoint_dir), stdout=stdout, stderr=stderr, user_script_path=user_script,
        )
        script_path = os.path.join(job_dir, "sbatch.sh")
        _write_executable(script_path, request.script)
        write_json_atomic(os.path.join(job_dir, "sbatch.json"), {"argv": list(request.argv)})
        try:
            return self.cluster.submit(request, script_path)
        except Exception as exc:  # noqa: BLE001 - Slurm refused it: the job fails with Slurm's words
            log.warning("sbatch refused job %d: %s", job.id, exc)
            raise SubmitRefused(f"sbatch: {getattr(exc, 'message', exc)}") from None

    def _environment(self, job: Job, checkpoint_dir: str) -> dict[str, str]:
        # sbatch's --export=ALL passes the submitting environment itself; Slurm places the job and
        # sets its own SLURM_* and GPU variables. A compute node that sees the home's address file (the
        # server's machine, a shared file system) follows it to a restarted server, as a local job does;
        # one that does not keeps CORRAL_URL (corral.server_address.locate)
        env = job_environment(job, None, server_env={}, checkpoint_dir=checkpoint_dir, server_url=self.server_url(),
                              home=self.layout.root)
        if self.job_token is not None and "CORRAL_TOKEN" not in env:
            env["CORRAL_TOKEN"] = self.job_token(job)
        return env


def log_pattern(job: Job, stream: str) -> str:
    """The log path as Slurm should write it: corral's pattern filled in, except an array's task
    number, which is Slurm's `%a` (its tasks get their corral records later)."""
    s = job.spec
    pattern = s.stdout if stream == "stdout" or s.stderr is None else s.stderr
    if not job.is_array:
        return job.log_path(stream)
    # a task's own job id (%j) is Slurm's to choose, so tasks are told apart by ARRAY_TASK
    pattern = pattern.replace("%j", "%A_%a").replace("%a", _TASK_SENTINEL)
    path = expand_pattern(pattern, job_id=job.id, name=s.name, user=s.user, node="%N", workdir=s.workdir,
                          array_job_id=job.id, array_task_id=None)
    return path.replace("%", "%%").replace("%%N", "%N").replace(_TASK_SENTINEL, "%a")


def task_log(array: Job, stream: str, task_id: int) -> str:
    """Where Slurm writes one task's log (a corral pattern that needs no job id)."""
    return log_pattern(array, stream).replace("%a", str(task_id))


def _write_executable(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o700)  # the job's environment (its token too) is in it: for its owner only
    os.replace(tmp, path)
