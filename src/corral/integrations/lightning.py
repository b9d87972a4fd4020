"""A PyTorch Lightning logger that writes to a corral run.

    from corral.integrations.lightning import CorralLogger
    trainer = lightning.Trainer(logger=CorralLogger(project="mnist"), max_epochs=10)

Metrics go to the run at Lightning's global step, hyperparameters into its config, the checkpoints
ModelCheckpoint keeps become artifacts, and the end of `fit` finishes the run (`failed` if fit
raised). Only global rank 0 logs, as with Lightning's own loggers.

Lightning finalizes its loggers at the end of every `fit`, `validate` and `test`; a logger used
again afterwards (`fit` then `test`) reopens the same run, found by a resume key of its own.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lightning.fabric.utilities.logger import _convert_params, _sanitize_callable_params
from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
from lightning.pytorch.loggers.utilities import _scan_checkpoints
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from corral.integrations._values import as_number, jsonable, numbers_only
from corral.sdk.context import detect_job

if TYPE_CHECKING:
    from lightning.pytorch.callbacks import ModelCheckpoint

    from corral.sdk.run import Run

_STEP_IN_NAME = re.compile(r"step=(\d+)")
_loggers_made = itertools.count()


class CorralLogger(Logger):
    """Log a Lightning run to corral.

    Args:
        project: the run's project.
        name: the run's name (default: corral's choice).
        config: the run's initial config; `save_hyperparameters()` adds the model's.
        tags: the run's tags.
        save_dir: where Lightning puts checkpoints (`<save_dir>/<project>/<version>/checkpoints`);
            None leaves it to the Trainer's `default_root_dir`. In a corral job,
            `os.environ["CORRAL_CHECKPOINT_DIR"]` keeps them across a requeue.
        log_checkpoints: True registers, at the end of each fit, the checkpoints ModelCheckpoint kept
            (top-k removes the others as it goes); "all" registers each as it is written, so
            the ones removed later stay listed; False registers none.
        run: an open run to log to; the logger then leaves finishing it to you.
    """

    def __init__(self, project: str = "lightning", *, name: str | None = None, config: Mapping[str, Any] | None = None,
                 tags: list[str] | None = None, save_dir: str | None = None, log_checkpoints: bool | str = True,
                 run: Run | None = None) -> None:
        super().__init__()
        # what corral.init is called with, on first use and again after `finalize`
        self._init_args: dict[str, Any] = {"project": project, "name": name, "config": dict(config or {}), "tags": tags,
                                           "resume_key": _resume_key(project, name, next(_loggers_made))}
        self._save_dir = save_dir
        self._log_checkpoints = log_checkpoints
        self._run = run
        self._owns_run = run is None
        self._logged_checkpoints: dict[str, float] = {}
        self._checkpoint_callback: ModelCheckpoint | None = None
        self._last_step = 0
        self._finished = False

    @property
    def name(self) -> str:
        return str(self._init_args["project"])

    @property
    def version(self) -> str:
        # the checkpoint directory's name: the run's, so it is found again when the job is requeued
        if getattr(rank_zero_only, "rank", 0) != 0:
            return ""  # Lightning uses rank 0's directory on every rank
        run = self.experiment
        return str(run.name or run.uid)

    @property
    def save_dir(self) -> str | None:
        return self._save_dir

    @property
    @rank_zero_experiment
    def experiment(self) -> Run:
        """The corral run, started on first use (and reopened on use after `finalize`)."""
        if self._run is None or self._finished:
            import corral

            self._run = corral.init(**{**self._init_args, "config": jsonable(self._init_args["config"])})
            self._finished = False
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        params = _sanitize_callable_params(_convert_params(params))
        self.experiment.log_params(jsonable(params))

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        values = numbers_only(metrics)
        if not values:
            return
        if step is not None:
            self._last_step = step
        self.experiment.log(values, step=step)

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        self._checkpoint_callback = checkpoint_callback
        if self._log_checkpoints == "all":
            self._register_checkpoints(checkpoint_callback)

    def _register_checkpoints(self, checkpoint_callback: ModelCheckpoint) -> None:
        """Register the callback's checkpoint files not registered yet (or rewritten since)."""
        monitor = getattr(checkpoint_callback, "monitor", None)
        for mtime, path, score, _tag in _scan_checkpoints(checkpoint_callback, self._logged_checkpoints):
            found = _STEP_IN_NAME.search(os.path.basename(path))
            value = as_number(score) if monitor else None
            self.experiment.log_artifact(os.path.abspath(path), type="checkpoint",
                                         step=int(found.group(1)) if found else self._last_step,
                                         metric=value, metric_name=monitor if value is not None else None)
            self._logged_checkpoints[path] = mtime

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._log_checkpoints and self._checkpoint_callback is not None:
            self._register_checkpoints(self._checkpoint_callback)
        if self._run is None or not self._owns_run or self._finished:
            return
        self._run.finish(state="failed" if status == "failed" else "finished")
        self._finished = True


def _resume_key(project: str, name: str | None, index: int) -> str:
    """In a job: stable across its requeues, like the SDK's own key; elsewhere: this process only."""
    job = detect_job().job
    if job is None:
        return f"lightning:{secrets.token_hex(8)}"
    return f"lightning:job:{job}:{project}:{name or ''}:{index}"
