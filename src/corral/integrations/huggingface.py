"""Track a Hugging Face `transformers.Trainer` in corral.

    from corral.integrations.huggingface import CorralCallback
    trainer = Trainer(model, args=TrainingArguments(..., report_to="none"), callbacks=[CorralCallback(project="bert")])

Each log becomes metrics at `state.global_step` (numbers only), each saved checkpoint directory an
artifact, and the end of training finishes the run. The callback also works without transformers,
called with plain dicts or simple objects for `args` and `state`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.integrations._values import jsonable, numbers_only

if TYPE_CHECKING:
    from corral.sdk.run import Run

try:
    from transformers import TrainerCallback as _CallbackBase
except ImportError:  # the same hooks, so the callback can be driven by hand

    class _CallbackBase:  # type: ignore[no-redef]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any: ...
        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any: ...
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any: ...
        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any: ...

# transformers.trainer_utils.PREFIX_CHECKPOINT_DIR: where Trainer saves step N
CHECKPOINT_PREFIX = "checkpoint"


class CorralCallback(_CallbackBase):
    """A `TrainerCallback` that logs to a corral run.

    Args:
        project: the run's project.
        name: the run's name (default: `args.run_name` when it was set, else corral's choice).
        config: merged over the training arguments in the run's config.
        tags: the run's tags.
        run: an open run to log to instead; the callback then leaves finishing it to you.
        log_checkpoints: register each saved checkpoint directory as an artifact.
    """

    def __init__(self, project: str = "huggingface", *, name: str | None = None, config: Mapping[str, Any] | None = None,
                 tags: list[str] | None = None, run: Run | None = None, log_checkpoints: bool = True) -> None:
        self.project = project
        self.name = name
        self.config = dict(config or {})
        self.tags = tags
        self.log_checkpoints = log_checkpoints
        self._run = run
        self._owns_run = run is None
        self._step: int | None = None
        self._logged: set[str] = set()  # the keys logged at `_step`

    @property
    def run(self) -> Run | None:
        return self._run

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if _is_main(state):
            self._ensure_run(args, kwargs.get("model"))
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        if not _is_main(state) or not logs:
            return control
        values = numbers_only(logs)  # Trainer's final log mixes in strings and None
        step = int(_field(state, "global_step", 0))
        # Trainer repeats `epoch` in the evaluation's and the final log at the step its training log
        # had: sent again, the server would skip it and the run warn of points skipped that were no loss
        if step != self._step:
            self._step, self._logged = step, set()
        values = {k: v for k, v in values.items() if k not in self._logged}
        if values:
            self._logged.update(values)
            self._ensure_run(args, kwargs.get("model")).log(values, step=step)
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not self.log_checkpoints or not _is_main(state):
            return control
        step = int(_field(state, "global_step", 0))
        path = os.path.join(str(_field(args, "output_dir", ".")), f"{CHECKPOINT_PREFIX}-{step}")
        if os.path.isdir(path):
            metric, value = _checkpoint_metric(args, state, step)
            self._ensure_run(args, kwargs.get("model")).log_artifact(
                os.path.abspath(path), type="checkpoint", step=step, metric=value, metric_name=metric)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if _is_main(state) and self._run is not None and self._owns_run:
            self._run.finish()
        return control

    def _ensure_run(self, args: Any, model: Any = None) -> Run:
        if self._run is None:
            import corral

            config = _arguments(args)
            model_config_dict = getattr(getattr(model, "config", None), "to_dict", None)
            if callable(model_config_dict):  # a PreTrainedModel's architecture
                config["model_config"] = model_config_dict()
            config.update(self.config)
            run_name = _field(args, "run_name", None)
            # Trainer defaults run_name to output_dir: a path says nothing a run name should
            name = self.name or (run_name if run_name and run_name != _field(args, "output_dir", None) else None)
            self._run = corral.init(project=self.project, name=name, config=jsonable(config), tags=self.tags)
        return self._run


def _field(obj: Any, name: str, default: Any) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _is_main(state: Any) -> bool:
    # Trainer calls callbacks on every process; only the first of all logs
    return bool(_field(state, "is_world_process_zero", True))


def _arguments(args: Any) -> dict[str, Any]:
    if hasattr(args, "to_dict"):
        return dict(args.to_dict())  # TrainingArguments: enums as values, tokens hidden
    if isinstance(args, Mapping):
        return dict(args)
    return dict(vars(args)) if hasattr(args, "__dict__") else {}


def _checkpoint_metric(args: Any, state: Any, step: int) -> tuple[str | None, float | None]:
    """The metric that picks the best model, as evaluated at this step (Trainer evaluates before saving)."""
    metric = _field(args, "metric_for_best_model", None)
    if not metric:
        return None, None
    key = metric if metric.startswith("eval_") else f"eval_{metric}"
    for entry in reversed(_field(state, "log_history", None) or []):
        if _field(entry, "step", None) == step and key in entry:
            values = numbers_only({key: entry[key]})
            return (key, values[key]) if values else (None, None)
    return None, None
