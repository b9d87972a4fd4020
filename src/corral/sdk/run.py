"""A tracked run: `corral.init` makes one, `run.log` records metrics, `run.finish` ends it.

    run = corral.init(project="mnist", config=args)
    for step in range(steps):
        run.log({"loss": loss.item()}, step=step)     # a deque append, about a microsecond
        if run.checkpoint_due():
            run.save_checkpoint(model.state_dict(), step=step, metric=val_loss)
    run.finish()

This module holds `Run`, the object; `init`, which makes one, is in corral.sdk.start, and the process's
open runs (the current one, and the exit, fork and SIGTERM hooks) in corral.sdk.open_runs.

`log` does no work in the caller's thread beyond an append: the run's `Sender` thread converts,
batches, sends and, when the server cannot be reached, spools (see corral.sdk.sender). No method
here raises because of the server; checkpoint saving does raise on disk errors, since a silently
missing checkpoint would be worse than a stopped job.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from corral.core.jobspec.checkpointing import recommended_checkpoint_interval_s
from corral.sdk.checkpoint_schedule import CheckpointSchedule
from corral.sdk.checkpoints import CheckpointStore, finite_or_none
from corral.sdk.config_values import config_dict
from corral.sdk.media import Media
from corral.sdk.open_runs import _forget, _ignore, _ignore_log, _lock
from corral.sdk.run_record import RunRecord
from corral.sdk.sender import Sender

FINISH_TIMEOUT_S = 30.0

_now = time.time  # a module global: one dict lookup cheaper than time.time in run.log


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

