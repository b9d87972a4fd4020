"""The server's parts that its options shape: jobs' cgroups, tokens and mail relay, the artifact store, the monitor."""

from __future__ import annotations

import os
import sys
import time
from typing import IO, TYPE_CHECKING, Any

from corral.compose.config import ServerOptions
from corral.errors import InvalidRequest
from corral.home import HomeLayout

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from corral.monitor.channels.notification import SmtpSettings
    from corral.monitor.jobs import JobReader
    from corral.monitor.service import MonitorService
    from corral.store.runs import RunStore
    from corral.tracking.artifacts import ArtifactService
    from corral.tracking.service import TrackingService


def job_isolation(options: ServerOptions, home: str, lock: IO[str], jobs_run_here: bool) -> Any:
    """Where this server's jobs' cgroups go (`corral.executor.cgroups.placement`), or why none.

    Raises:
        InvalidRequest: `[cgroups] mode` (or --cgroups) names a version this machine cannot give.
    """
    from corral.executor.cgroups import CgroupError
    from corral.executor.cgroups.placement import Placement, find_layout

    if not jobs_run_here:
        return Placement(None, "Slurm's own, on its compute nodes (its cgroup plugins, as the cluster configures them)")
    try:
        return find_layout(home, options.cgroups)
    except CgroupError as exc:
        lock.close()
        raise InvalidRequest("cgroups", f"cannot hold jobs in cgroups: {exc.strerror or exc}",
                             'use --cgroups auto (or [cgroups] mode = "auto"), which falls back to process groups') from None


def job_token(tokens: Any, job: Any) -> str:
    """A submit token of the job's owner, for its SDK on a compute node; it lapses a day after the job's time limit."""
    now = time.time()
    lifetime = (job.spec.time_limit_s or 7 * 86400) + 86400
    return tokens.create(job.spec.user, f"job-{job.id}", "submit", min(now + lifetime, now + 365 * 86400), "corral", now)[1]


def job_mail_relay(options: ServerOptions) -> SmtpSettings | None:
    """The relay sbatch --mail-type mails go through: `[smtp]` (its defaults: a relay on this machine); None without
    the section, where a job that asks for mail is told at submit and in `show` that none will be sent."""
    from corral.monitor.channels import SmtpSettings

    return SmtpSettings(**options.smtp) if options.smtp_section else None


def build_artifacts(options: ServerOptions, tracking: TrackingService) -> ArtifactService:
    """The artifact store where `[tracking] artifact_dir` puts it (else in the home), with its limits."""
    from corral.server.accounts import uid_of
    from corral.tracking.artifact_store import ArtifactStore
    from corral.tracking.artifacts import ArtifactLimits, ArtifactService

    root = os.path.expanduser(options.artifact_dir) if options.artifact_dir else HomeLayout(options.home).artifacts
    mb = 1 << 20
    limits = ArtifactLimits(
        max_file_bytes=options.max_artifact_mb * mb if options.max_artifact_mb else None,
        user_quota_bytes=options.user_artifact_quota_mb * mb if options.user_artifact_quota_mb else None)
    return ArtifactService(ArtifactStore(root), tracking, limits=limits, uid_of=uid_of)


def import_mlflow_files(home: str, artifacts: ArtifactService) -> None:
    """Take an older corral's MLflow uploads (kept apart, in the home) into the artifact store, before
    anything is served (`corral.tracking.compat.mlflow_artifacts`); once they are in, this finds nothing to do."""
    import asyncio

    from corral.tracking.compat.mlflow_artifacts import import_legacy_files

    root = HomeLayout(home).mlflow_artifacts
    if not os.path.isdir(root):
        return
    try:
        taken = asyncio.run(import_legacy_files(root, artifacts))
    except Exception as exc:  # noqa: BLE001 - best effort: the files stay, the next start tries again
        print(f"corral: could not take in the MLflow artifacts in {root}: {exc}", file=sys.stderr, flush=True)
        return
    if taken:
        print(f"corral: took {taken} MLflow artifact(s) from {root} into the artifact store", file=sys.stderr, flush=True)


def build_monitor(options: ServerOptions, service: JobReader, engine: Engine, tracking: TrackingService,
                  run_store: RunStore, sample: bool) -> MonitorService:
    """The monitor: samples local jobs (NVML for GPUs, or recorded frames from $CORRAL_GPU_REPLAY)."""
    from corral.monitor.channels import SmtpSettings
    from corral.monitor.service import MonitorService

    sampler = None
    if sample:
        from corral.monitor.nvml import gpu_source_from_env
        from corral.monitor.sampling import JobSampler

        sampler = JobSampler(gpu_source_from_env(os.environ))
    smtp = SmtpSettings(**options.smtp)
    return MonitorService(jobs=service, engine=engine, tracking=tracking, run_store=run_store,
                          sampler=sampler,
                          interval_s=float(options.sample_interval_s), smtp=smtp,
                          retention_days=float(options.sample_retention_days))
