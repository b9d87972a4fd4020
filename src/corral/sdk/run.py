"""A tracked run: `corral.init` makes one, `run.log` records metrics, `run.finish` ends it.

    run = corral.init(project="mnist", config=args)
    for step in range(steps):
        run.log({"loss": loss.item()}, step=step)     # a deque append, about a microsecond
        if run.checkpoint_due():
            run.save_checkpoint(model.state_dict(), step=step, metric=val_loss)
    run.finish()

`log` does no work in the caller's thread beyond an append: the run's `Sender` thread converts,
batches, sends and, when the server cannot be reached, spools (see corral.sdk.sender). No method
here raises because of the server; checkpoint saving does raise on disk errors, since a silently
missing checkpoint would be worse than a stopped job.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import os
import secrets
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from corral.core.checkpointing import recommended_checkpoint_interval_s
from corral.sdk.backoff import RETRY_INTERVAL_S
from corral.sdk.checkpoint_schedule import CheckpointSchedule
from corral.sdk.checkpoints import CheckpointStore, RetentionPolicy, finite_or_none
from corral.sdk.config_values import config_dict, with_sweep_values
from corral.sdk.context import detect_job, git_commit
from corral.sdk.media import Media
from corral.sdk.context import resume_key as derive_resume_key
from corral.sdk.places import SpoolPlaces, resume_spool
from corral.sdk.run_record import RunRecord
from corral.sdk.sender import Sender, logger

MODES = ("online", "offline", "disabled")
REQUEST_TIMEOUT_S = 10.0
FINISH_TIMEOUT_S = 30.0
SIGTERM_FLUSH_S = 3.0  # well inside the grace before SIGKILL (corral's default 10 s, Slurm's KillWait 30 s)

_now = time.time  # a module global: one dict lookup cheaper than time.time in run.log

_init_count = 0
_current: Run | None = None
_open_runs: list[Run] = []
_hooks_installed = False
_uncaught_exception = False
_warned_child = False
_lock = threading.Lock()


class Run:
    """One tracked run. Made by `corral.init`; a disabled run (mode "disabled", or a rank other than
    0 under `rank_zero_only`) has the same methods, as cheap no-ops, and still reads checkpoints."""

    def __init__(self, *, project: str, name: str | None, uid: str, mode: str, rank: int,
                 checkpoints: CheckpointStore, sender: Sender | None = None, queue: deque | None = None,
                 run_id: int | None = None, resumed: bool = False, summary: dict[str, Any] | None = None,
                 next_step: int = 0, time_limit_s: float | None = None, end_time: float | None = None,
                 clock: Callable[[], float] = time.time, finish_timeout_s: float = FINISH_TIMEOUT_S) -> None:
        self._record = RunRecord(project, name, uid, mode, rank, run_id, resumed, summary or {})
        self._checkpoints = checkpoints
        self._schedule = CheckpointSchedule(recommended_checkpoint_interval_s(time_limit_s), end_time, clock)
        self._sender = sender
        self._next_step = next_step  # log()'s own state stays a plain attribute: it is read and set on every call
        self._finish_timeout_s = finish_timeout_s
        self._finished = False
        self._pid = os.getpid()
        if sender is None or queue is None:
            self.log = _ignore_log  # type: ignore[method-assign]
            self._finished = True
        else:
            # three items per record, not a tuple: one object less for the garbage collector to track
            self._extend = queue.extend

    # -- who the run is (read-only: the record is the server's as much as this process's) -------

    @property
    def project(self) -> str:
        return self._record.project

    @property
    def name(self) -> str | None:
        return self._record.name

    @property
    def uid(self) -> str:
        """Chosen by this process (16 hex); the server's when it resumed a run made by an earlier one."""
        return self._record.uid

    @property
    def id(self) -> int | None:
        """The server's id; None while the run has not reached the server."""
        return self._record.id

    @property
    def mode(self) -> str:
        return self._record.mode

    @property
    def rank(self) -> int:
        return self._record.rank

    @property
    def resumed(self) -> bool:
        """True when this run continues one made by an earlier process of the same job."""
        return self._record.resumed

    @property
    def summary(self) -> dict[str, Any]:
        """The server's per-key summary (count, last_step, last, min, max) as of `init`."""
        return self._record.summary

    @property
    def checkpoint_dir(self) -> str:
        return self._checkpoints.directory

    @property
    def checkpoint_interval_s(self) -> float:
        return self._schedule.interval_s

    @checkpoint_interval_s.setter
    def checkpoint_interval_s(self, seconds: float) -> None:
        # a script may choose its own interval, as it could when this was a plain attribute
        self._schedule.interval_s = seconds

    @property
    def _queue(self) -> deque | None:
        return self._sender.queue if self._sender is not None else None

    @property
    def disabled(self) -> bool:
        return self._sender is None

    @property
    def step(self) -> int:
        """The step the next `log` without `step=` gets: 0, or after a resume the last step + 1."""
        return self._next_step

    # -- logging ----------------------------------------------------------------------------------

    def log(self, data: Mapping[str, Any], step: int | None = None) -> None:
        """Record metric values at `step` (default: the step after the previous call's).

        Only appends to a queue: conversion, batching and sending happen in the run's thread.
        Values are anything `float()` takes (Python, numpy and one-element torch scalars), or
        media (`corral.Image`, `corral.Histogram`, `corral.Text`, `corral.Table`), uploaded as the run's
        artifacts at `step`.
        """
        if step is None:
            step = self._next_step
        self._next_step = step + 1
        values = dict(data)  # a copy: callers reuse their dicts
        media = None
        for key, value in values.items():
            if type(value) is not float and type(value) is not int:
                if isinstance(value, Media):  # an image, histogram, text or table: uploaded as an artifact at this step
                    media = media or {}
                    media[key] = value
                    continue
                # the value as it is now: a tensor or array may be changed in place before the
                # background thread reads it
                values[key] = _snapshot(value)
        if media is not None:
            for key in media:
                del values[key]
            self._extend((None, "media", {"step": step, "items": media}))
            if not values:
                return
        self._extend((step, _now(), values))

    def log_params(self, params: Mapping[str, Any] | argparse.Namespace) -> None:
        """Merge `params` into the run's config (shallow)."""
        if not self._finished:
            self._extend((None, "params", {"params": config_dict(params)}))

    def add_tags(self, *tags: str) -> None:
        if not self._finished and tags:
            self._extend((None, "tags", {"add": [str(t) for t in tags], "remove": []}))

    def log_artifact(self, path: str | os.PathLike[str], type: str = "file", step: int | None = None,
                     metric: float | None = None, metric_name: str | None = None, *, deleted: bool = False,
                     name: str | None = None) -> None:
        """Upload a file, or a directory's files, to the server's artifact store (in the background:
        hashed, sent in chunks, resumed after an interruption, spooled and synced when offline).

        `name`: the artifact's name in the run (default: the file's or directory's own name; a
        directory's files go under it). Checkpoints (`type="checkpoint"`) are not copied: they stay
        where the job wrote them and are registered, with their size and sha256, to be downloaded
        from there. `deleted=True` records that an artifact registered earlier is gone.
        """
        if self._finished:
            return
        source = os.path.abspath(os.fspath(path))
        if type != "checkpoint" and not deleted:
            self._extend((None, "artifact_upload", {"source": source, "type": type,
                                                     "name": name or os.path.basename(source.rstrip(os.sep))}))
            return
        artifact = {"path": source, "type": type, "step": step,
                    "metric": metric_name or (self._checkpoints.metric_name if finite_or_none(metric) is not None else None),
                    "metric_value": finite_or_none(metric), "deleted": True if deleted else None}
        if artifact["metric_value"] is not None and artifact["metric"] == self._checkpoints.metric_name:
            artifact["goal"] = self._checkpoints.policy.mode  # the declared best_mode judges it
        self._extend((None, "artifact_file", {k: v for k, v in artifact.items() if v is not None}))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything logged so far is sent (or spooled); False if `timeout` ran out."""
        if self._finished or self._sender is None:
            return True
        return self._sender.flush(timeout)

    # -- checkpoints ------------------------------------------------------------------------------

    def save_checkpoint(self, obj: Any, step: int | None = None, metric: float | None = None, *,
                        move: bool = False) -> str:
        """Save `obj` as `ckpt-{step:08d}.pt`, or the file at path `obj` under its own name, atomically; returns its path.

        Registers it as a "checkpoint" artifact, then applies the retention policy (`keep_last`,
        `keep_best`). On a disabled run (ranks other than 0) nothing is written; the path is
        the one rank 0 writes. `move=True` moves a file rather than copying it.

        Raises:
            OSError: the checkpoint could not be written (the previous one is intact).
        """
        if step is None:
            step = max(self._next_step - 1, 0)
        step = int(step)
        self._schedule.saved()  # on every rank: all must agree on checkpoint_due()
        if self._sender is None:
            return self._checkpoints.path_for(step, obj)
        entry, removed = self._checkpoints.save(obj, step, metric, move=move)
        if not self._finished:
            artifacts = [self._checkpoints.artifact(entry)]
            artifacts += [self._checkpoints.artifact(gone, deleted=True) for gone in removed]
            self._extend((None, "artifacts", {"artifacts": artifacts}))
        return os.path.join(self._checkpoints.directory, entry["file"])

    def latest_checkpoint(self) -> str | None:
        """Path of the checkpoint with the highest step (any rank, after a requeue, offline); or None."""
        return self._checkpoints.latest()

    def best_checkpoint(self) -> str | None:
        """Path of the checkpoint with the best metric; or None."""
        return self._checkpoints.best()

    def checkpoint_due(self) -> bool:
        """True once `checkpoint_interval_s` has passed since the last save (or the start), and
        once more when the job's end time is a few minutes away."""
        return self._schedule.due()

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, state: str = "finished", timeout: float | None = None) -> None:
        """Send everything, mark the run `state` ("finished", "failed", "crashed"); waits at most
        `timeout` seconds (default 30) for the upload. Calling it again does nothing."""
        if self._sender is None:
            _forget(self)  # a disabled run: nothing to send, but it is no longer current
            return
        with _lock:
            if self._finished:
                return
            self._finished = True
        self._extend((None, "finish", {"state": state, "end_time": time.time()}))
        self.log = _ignore_log  # type: ignore[method-assign]
        self._extend = _ignore
        _forget(self)
        assert self._sender is not None
        timeout = self._finish_timeout_s if timeout is None else timeout
        if not self._sender.close(timeout):
            where = self._sender.spool.path if self._sender.spool is not None else "memory"
            print(f"corral: run {self.uid} was still uploading after {timeout:g} s; what is not yet "
                  f"spooled (in {where}) is lost", file=sys.stderr)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        self.finish("failed" if exc_type is not None else "finished")

    def __repr__(self) -> str:
        return f"Run(project={self.project!r}, uid={self.uid!r}, id={self.id!r}, mode={self.mode!r})"

    def _created(self, server_run: dict[str, Any]) -> None:
        # called from the sender's thread when the run reaches the server
        self._record.created(server_run)


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
    global _init_count, _current
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
        _current = run
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
    _current = run
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


def current_run() -> Run | None:
    """The run the last `init` made, until it finishes."""
    return _current


def log(data: Mapping[str, Any], step: int | None = None) -> None:
    """`run.log` on the current run."""
    run = _current
    if run is None:
        raise RuntimeError("corral.log() needs a run: call corral.init() first")
    run.log(data, step)


def finish(state: str = "finished") -> None:
    """`run.finish` on the current run, if there is one."""
    if _current is not None:
        _current.finish(state)


def _connector(url: str | None, client: Any) -> Callable[[], Any]:
    if client is not None:
        return lambda: client

    def connect() -> Any:
        from corral.client import Client

        return Client(url, timeout=REQUEST_TIMEOUT_S)

    return connect


def _remember(run: Run) -> None:
    global _hooks_installed
    with _lock:
        _open_runs.append(run)
        if not _hooks_installed:
            _hooks_installed = True
            atexit.register(_finish_open_runs)
            os.register_at_fork(after_in_child=_orphan_runs_in_child)
            _flush_on_sigterm()
            previous = sys.excepthook

            def excepthook(*args: Any) -> None:
                global _uncaught_exception
                _uncaught_exception = True
                previous(*args)

            sys.excepthook = excepthook


def _forget(run: Run) -> None:
    global _current
    with _lock:
        if run in _open_runs:
            _open_runs.remove(run)
        if _current is run:
            _current = None


def _orphan_runs_in_child() -> None:
    """A forked child (a DataLoader worker, say) has the parent's runs but no thread to send
    their data: what it logs would pile up unsent. Its runs stop recording, with one warning."""
    global _current
    for run in list(_open_runs):
        run.log = _logged_in_child  # type: ignore[method-assign]
        run._extend = _ignore
        run._finished = True
    _open_runs.clear()
    _current = None


def _logged_in_child(data: Any, step: int | None = None) -> None:
    global _warned_child
    if not _warned_child:
        _warned_child = True
        logger.warning("corral: run.log() in a forked child process is ignored; log from the parent, "
                       "or call corral.init() in the child")


def _flush_on_sigterm() -> None:
    """SIGTERM (cancel, time limit, preemption) ends Python without its atexit hooks; send what
    is queued first, then die of the signal as before. Only where nobody handles SIGTERM yet:
    a script's or a framework's own handler is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    deadline = time.monotonic() + SIGTERM_FLUSH_S
    for run in list(_open_runs):
        if run._pid == os.getpid():
            # not finish(): a preempted job resumes this run; the server ends it if the job ends
            run.flush(max(0.0, deadline - time.monotonic()))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _finish_open_runs() -> None:
    """At exit: finish what the script left open (failed if an exception ended it)."""
    for run in list(_open_runs):
        if run._pid == os.getpid():  # a forked child does not own its parent's runs
            run.finish("failed" if _uncaught_exception else "finished")


def _snapshot(value: Any) -> Any:
    """A value that no later in-place change can alter: tensors are copied on their device (no
    GPU sync in the training loop, and no autograd graph kept alive), the rest made a float."""
    detach = getattr(value, "detach", None)
    if detach is not None:
        try:
            return detach().clone()
        except Exception:  # noqa: BLE001 - not a tensor after all
            pass
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return value  # the background thread warns about it once and drops it


def _ignore_log(data: Any, step: int | None = None) -> None:
    pass


def _ignore(record: Any) -> None:
    pass
