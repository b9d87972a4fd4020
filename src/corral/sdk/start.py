"""`init`: start a run, or in a requeued job resume it, and make it the current one; and
`own_checkpoint_dir`, where a run outside a job keeps its checkpoints."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from corral.sdk import open_runs
from corral.sdk.backoff import RETRY_INTERVAL_S
from corral.sdk.checkpoints import CheckpointStore, RetentionPolicy
from corral.sdk.config_values import config_dict, with_sweep_values
from corral.sdk.context import detect_job, git_commit
from corral.sdk.context import resume_key as derive_resume_key
from corral.sdk.open_runs import _lock, _remember
from corral.sdk.places import SpoolPlaces, resume_spool
from corral.sdk.run import FINISH_TIMEOUT_S, Run
from corral.sdk.sender import Sender, logger

MODES = ("online", "offline", "disabled")
REQUEST_TIMEOUT_S = 10.0

_init_count = 0


def init(project: str | None = None, config: Any = None, name: str | None = None, tags: Iterable[str] | None = None,
         *, mode: str | None = None, url: str | None = None, client: Any = None, rank_zero_only: bool = True,
         resume_key: str | None = None, checkpoint_dir: str | None = None, keep_last: int | None = None,
         keep_best: int | None = None, best_metric: str | None = None, best_mode: str = "min",
         flush_interval_s: float = 1.0, retry_interval_s: float = RETRY_INTERVAL_S, spool_dir: str | None = None,
         finish_timeout_s: float = FINISH_TIMEOUT_S, clock: Callable[[], float] = time.time) -> Run:
    """Start (or, in a requeued job, resume) a run and make it the current one.

    Args:
        project: groups runs (default `$CORRAL_PROJECT`, else "default").
        config: a dict, an argparse.Namespace or a dataclass: the run's hyperparameters.
        mode: "online" (default, or `$CORRAL_MODE`), "offline" (spool only) or "disabled".
        url: the server (default `$CORRAL_URL`, else the one of the corral home).
        client: anything with `corral.client.Client`'s run methods, used instead of a Client.
        rank_zero_only: under DDP only rank 0 tracks; with False every rank has its own run.
        resume_key: overrides the key derived from the job, project, name and `init` count.
        checkpoint_dir: default `$CORRAL_CHECKPOINT_DIR` (a corral job's), else a directory of this
            run's own under ./checkpoints (`own_checkpoint_dir`).
        keep_last, keep_best, best_metric, best_mode: checkpoint retention (see RetentionPolicy).
        flush_interval_s: how often the background thread sends.
        retry_interval_s: the longest wait between a spooling run's tries of the server (they
            start 1 s after a failure and double).
        spool_dir: default `$CORRAL_SPOOL_DIR`, else `<corral home>/spool`; a shared server's
            `<home>/spool/<user>`, or a private fallback when it cannot be written (corral.sdk.places).
        clock: wall-clock time source for `checkpoint_due` (tests pass a fake).
    """
    global _init_count
    with _lock:
        index = _init_count
        _init_count += 1
    mode = (mode or os.environ.get("CORRAL_MODE") or "online").strip().lower()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    job = detect_job()
    project = project or os.environ.get("CORRAL_PROJECT") or "default"
    uid = secrets.token_hex(8)
    key = resume_key or derive_resume_key(job.job, project, name, index, None if rank_zero_only else job.rank)
    directory = checkpoint_dir or job.checkpoint_dir or own_checkpoint_dir(uid, key)
    if not rank_zero_only:  # each rank its own run, so its own checkpoints and manifest
        directory = os.path.join(directory, f"rank-{job.rank}")
    store = CheckpointStore(directory,
                            RetentionPolicy(keep_last, keep_best, best_mode), best_metric or "metric")
    common = dict(project=project, name=name, rank=job.rank, checkpoints=store, time_limit_s=job.time_limit_s,
                  end_time=job.end_time, clock=clock)
    if mode == "disabled" or (rank_zero_only and job.rank != 0):
        run = Run(uid=uid, mode="disabled", **common)  # type: ignore[arg-type]
        open_runs._current = run
        return run

    tag_list = [str(t) for t in (tags or ())] + ([] if rank_zero_only else [f"rank:{job.rank}"])
    request: dict[str, Any] = {
        "project": project, "name": name, "uid": uid, "resume_key": key,
        "config": with_sweep_values(config_dict(config), os.environ), "tags": tag_list, "job_id": job.corral_job_id,
        "node": job.node,
        "git_commit": git_commit(), "start_time": time.time(),
    }
    request = {k: v for k, v in request.items() if v is not None}
    places = SpoolPlaces.resolve(spool_dir)
    spool, spooled_last_step = resume_spool(places, key)
    if spool is not None:
        request = spool.request
    if mode == "offline" and spool is None:
        try:
            spool, refused = places.create(request["uid"], request)
            if refused:
                logger.warning("corral: cannot write the spool in %s; spooling in %s instead", refused, spool.path)
        except OSError as exc:
            logger.warning("corral: cannot create the spool (%s); this run's data will be lost", exc)

    queue: deque = deque()
    holder: list[Run] = []  # the run, once made: the sender tells it its id when it reaches the server late

    def created(server_run: dict[str, Any]) -> None:
        if holder:
            holder[0]._created(server_run)

    sender = Sender(queue, request=request, connect=None if mode == "offline" else _connector(url, client),
                    places=places, spool=spool, flush_interval_s=flush_interval_s,
                    retry_interval_s=retry_interval_s, on_created=created)
    try:
        server_run = sender.create_run() or {}
    except Exception:
        if spool is not None:
            spool.release()
        raise
    last_steps = [s for s in (server_run.get("last_step"), spooled_last_step) if isinstance(s, int)]
    run = Run(uid=server_run.get("uid") or request["uid"], mode=mode, sender=sender, queue=queue,
              run_id=server_run.get("id"), resumed=bool(server_run.get("resumed")) or spooled_last_step is not None,
              summary=server_run.get("metrics"), next_step=max(last_steps) + 1 if last_steps else 0,
              finish_timeout_s=finish_timeout_s, **common)  # type: ignore[arg-type]
    holder.append(run)
    sender.start()
    _remember(run)
    open_runs._current = run
    return run


def own_checkpoint_dir(uid: str, resume_key: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Where a run outside a job keeps its checkpoints: `./checkpoints/<run>`, a directory of its own,
    so a second run never takes the first one's checkpoint for its latest.

    `<run>` is what the processes that should share it have in common: the run's resume key (one given
    to `init`, so a script restarted by hand resumes; or a Slurm job's, so its requeue finds them:
    `resume-<hash>`), torchrun's run id (every rank of one launch finds rank 0's checkpoints,
    `torchrun-<hash>`), else the run's uid.
    """
    env = os.environ if environ is None else environ
    if resume_key:
        return os.path.join("checkpoints", "resume-" + hashlib.sha256(resume_key.encode()).hexdigest()[:16])
    launch = env.get("TORCHELASTIC_RUN_ID", "")
    if launch and launch != "none":
        return os.path.join("checkpoints", "torchrun-" + hashlib.sha256(launch.encode()).hexdigest()[:16])
    return os.path.join("checkpoints", uid)


def _connector(url: str | None, client: Any) -> Callable[[], Any]:
    if client is not None:
        return lambda: client

    def connect() -> Any:
        from corral.client import Client

        return Client(url, timeout=REQUEST_TIMEOUT_S)

    return connect
