"""CorralCallback: driven by hand with plain dicts, and by a real transformers.Trainer, against a live server."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest


def _callback(**options):
    """A CorralCallback, imported here: the module imports transformers (most of a second), which collecting this
    file in every test worker would pay for."""
    from corral.integrations.huggingface import CorralCallback

    return CorralCallback(**options)


@pytest.fixture
def client(live_server):
    return live_server.client()


def test_plain_dict_calls_log_numbers_register_checkpoints_and_finish(client, tmp_path):
    callback = _callback(project="hf", tags=["plain"])
    args = {"output_dir": str(tmp_path), "run_name": "tiny-bert", "learning_rate": 5e-5,
            "metric_for_best_model": "loss"}
    state = SimpleNamespace(global_step=0, is_world_process_zero=True, log_history=[])
    callback.on_train_begin(args, state, None)
    for step in (1, 2, 3):
        state.global_step = step
        callback.on_log(args, state, None, logs={"loss": 1.0 / step, "learning_rate": 5e-5, "epoch": step / 3,
                                                 "note": "not a number", "done": False, "missing": None})
    os.makedirs(tmp_path / "checkpoint-3")
    state.log_history = [{"step": 3, "eval_loss": 0.25}]
    callback.on_save(args, state, None)
    callback.on_log(args, state, None, logs={"eval_loss": 0.25})
    callback.on_train_end(args, state, None)

    (run,) = client.runs(project="hf")
    assert (run["name"], run["state"], run["tags"]) == ("tiny-bert", "finished", ["plain"])
    assert run["config"]["learning_rate"] == 5e-5
    assert set(run["metrics"]) == {"loss", "learning_rate", "epoch", "eval_loss"}
    loss = client.series(run["id"], "loss")
    assert (loss["steps"], loss["values"]) == ([1, 2, 3], [1.0, 0.5, 1 / 3])
    (checkpoint,) = client.artifacts(run["id"], type="checkpoint")
    assert checkpoint["path"] == str(tmp_path / "checkpoint-3")
    assert (checkpoint["step"], checkpoint["metric"], checkpoint["metric_value"]) == (3, "eval_loss", 0.25)


def test_other_processes_log_nothing_and_a_given_run_is_left_open(client, tmp_path):
    import corral

    run = corral.init(project="hf-given", name="outer")
    callback = _callback(run=run)
    worker = {"global_step": 1, "is_world_process_zero": False}
    callback.on_log({"output_dir": str(tmp_path)}, worker, None, logs={"loss": 9.0})
    main = {"global_step": 1, "is_world_process_zero": True}
    callback.on_log({"output_dir": str(tmp_path)}, main, None, logs={"loss": 1.0})
    callback.on_train_end({"output_dir": str(tmp_path)}, main, None)
    run.flush()
    (server_run,) = client.runs(project="hf-given")
    assert server_run["state"] == "running" and server_run["metrics"]["loss"]["last"] == 1.0
    run.finish()


def test_without_transformers_the_callback_has_the_same_hooks(tmp_path):
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from corral.integrations.huggingface import CorralCallback\n"
            "cb = CorralCallback()\n"
            "assert type(cb).__mro__[1].__module__ == 'corral.integrations.huggingface'\n"
            "state = {'global_step': 1}\n"
            "for hook in ('on_train_begin', 'on_log', 'on_save', 'on_train_end'):\n"
            "    getattr(cb, hook)({'output_dir': '.'}, state, None, logs={'loss': 1.0})\n"
            "print('ok')\n")
    env = {**os.environ, "CORRAL_MODE": "disabled"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_transformers_own_callback_handler_drives_it(client, tmp_path):
    transformers = pytest.importorskip("transformers")
    from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

    callback = _callback(project="hf-handler", name="handled")
    assert isinstance(callback, transformers.TrainerCallback)
    handler = CallbackHandler([callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    # TrainingArguments needs accelerate even to be built; Trainer hands callbacks its to_dict() anyway
    args = SimpleNamespace(output_dir=str(tmp_path), run_name=str(tmp_path), metric_for_best_model=None,
                           to_dict=lambda: {"output_dir": str(tmp_path), "learning_rate": 0.01})
    state, control = TrainerState(max_steps=4), TrainerControl()
    control = handler.on_train_begin(args, state, control)
    for step in range(1, 5):
        state.global_step = step
        control = handler.on_log(args, state, control, logs={"loss": 4.0 - step, "grad_norm": 0.5})
    os.makedirs(tmp_path / "checkpoint-4")
    control = handler.on_save(args, state, control)
    handler.on_train_end(args, state, control)

    (run,) = client.runs(project="hf-handler")
    assert (run["name"], run["state"], run["config"]["learning_rate"]) == ("handled", "finished", 0.01)
    assert client.series(run["id"], "loss")["values"] == [3.0, 2.0, 1.0, 0.0]
    (checkpoint,) = client.artifacts(run["id"], type="checkpoint")
    assert (checkpoint["step"], checkpoint["metric"]) == (4, None)


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None or importlib.util.find_spec("transformers") is None,
                    reason="transformers.Trainer needs transformers and accelerate")
def test_a_real_trainer_logs_through_the_callback(client, tmp_path):
    import torch
    import transformers
    from torch import nn

    class TinyRegressor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.linear(x).squeeze(-1)
            return {"loss": nn.functional.mse_loss(out, labels), "logits": out}

    xs = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    data = [{"x": x, "labels": x.sum()} for x in xs]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=8, logging_steps=2,
        save_steps=3, save_strategy="steps", learning_rate=0.05, report_to="none", use_cpu=True,
        disable_tqdm=True, run_name="trainer-run")
    trainer = transformers.Trainer(model=TinyRegressor(), args=args, train_dataset=data,
                                   callbacks=[_callback(project="hf-trainer")])
    trainer.train()

    (run,) = client.runs(project="hf-trainer")
    assert (run["name"], run["state"]) == ("trainer-run", "finished")
    assert run["config"]["max_steps"] == 6 and run["config"]["learning_rate"] == 0.05
    assert client.series(run["id"], "loss")["steps"] == [2, 4, 6]
    assert "train_runtime" in run["metrics"]
    checkpoints = client.artifacts(run["id"], type="checkpoint")
    assert sorted(a["step"] for a in checkpoints) == [3, 6]
    assert all(a["path"].endswith(f"checkpoint-{a['step']}") for a in checkpoints)


def test_epoch_repeated_by_the_evaluation_log_is_no_skipped_point(client, tmp_path, caplog):
    callback = _callback(project="hf-eval")
    args = {"output_dir": str(tmp_path)}
    state = {"global_step": 0, "is_world_process_zero": True}
    callback.on_train_begin(args, state, None)
    for step in (2, 4):
        state["global_step"] = step
        callback.on_log(args, state, None, logs={"loss": 1.0 / step, "epoch": step / 4})
        callback.on_log(args, state, None, logs={"eval_loss": 2.0 / step, "epoch": step / 4})  # Trainer repeats epoch
    callback.on_log(args, state, None, logs={"train_runtime": 1.5, "train_loss": 0.4, "epoch": 1.0})
    with caplog.at_level("WARNING", logger="corral.sdk"):
        callback.on_train_end(args, state, None)
    assert "skipped" not in caplog.text
    (run,) = client.runs(project="hf-eval")
    assert client.series(run["id"], "epoch")["steps"] == [2, 4]
    assert client.series(run["id"], "eval_loss")["steps"] == [2, 4]


def test_the_skip_warning_counts_every_point_the_server_skipped(client, tmp_path, caplog):
    # a Trainer resumed from checkpoint-2 logs steps 3 and 4 again, in two log calls: both skipped
    callback = _callback(project="hf-resumed")
    args = {"output_dir": str(tmp_path)}
    state = {"global_step": 0, "is_world_process_zero": True}
    with caplog.at_level("WARNING", logger="corral.sdk"):
        callback.on_train_begin(args, state, None)
        for step in (1, 2, 3, 4, 3, 4):
            state["global_step"] = step
            callback.on_log(args, state, None, logs={"loss": float(step), "grad_norm": 0.5})
            callback.run.flush()  # each log its own batch, as a slow Trainer's are
        callback.on_train_end(args, state, None)
    first, total = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert "skipped 2 points" in first and "the total is told when the run ends" in first
    assert "in all, the server skipped 4 points" in total
