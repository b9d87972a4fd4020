"""CorralLogger driving a real Lightning Trainer against a live server."""

from __future__ import annotations

import pytest

from tests.helpers import needs

pytestmark = needs("lightning")

STEPS_PER_EPOCH = 4  # 64 samples in batches of 16


def test_a_lightning_fit_logs_metrics_hparams_and_checkpoints_and_test_reopens_the_run(live_server, tmp_path):
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from corral.integrations.lightning import CorralLogger
    from tests.integrations.lightning_model import Regression, loader

    server = live_server
    logger = CorralLogger(project="lit", name="regression", tags=["lightning"], config={"data": "synthetic"})
    trainer = L.Trainer(max_epochs=2, logger=logger, default_root_dir=str(tmp_path), log_every_n_steps=1,
                        accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[ModelCheckpoint(monitor="val_loss", save_top_k=1)])
    trainer.fit(Regression(), loader(), loader())

    client = server.client()
    (run,) = client.runs(project="lit")
    assert (run["name"], run["state"], run["tags"]) == ("regression", "finished", ["lightning"])
    assert run["config"] == {"data": "synthetic", "lr": 0.05, "width": 8}
    train = client.series(run["id"], "train_loss")
    assert train["steps"] == list(range(2 * STEPS_PER_EPOCH))
    assert client.series(run["id"], "val_loss")["count"] == 2
    assert run["metrics"]["epoch"]["last"] == 1
    (checkpoint,) = client.artifacts(run["id"], type="checkpoint")
    assert checkpoint["path"].endswith(".ckpt") and checkpoint["metric"] == "val_loss"
    assert checkpoint["metric_value"] == pytest.approx(run["metrics"]["val_loss"]["min"])
    assert checkpoint["step"] in (STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH)
    # checkpoints go under the run's name, so a requeued job's Trainer finds them again
    assert "/lit/regression/checkpoints/" in checkpoint["path"]

    trainer.test(Regression(), loader(), verbose=False)
    (after_test,) = client.runs(project="lit")
    assert after_test["id"] == run["id"] and after_test["state"] == "finished"
    assert client.series(run["id"], "test_loss")["count"] == 1


def test_a_failing_fit_marks_the_run_failed(live_server, tmp_path):
    import lightning as L

    from corral.integrations.lightning import CorralLogger
    from tests.integrations.lightning_model import Regression, loader

    server = live_server

    class Exploding(Regression):
        def training_step(self, batch, batch_idx):
            if batch_idx == 2:
                raise RuntimeError("diverged")
            return super().training_step(batch, batch_idx)

    trainer = L.Trainer(max_epochs=1, logger=CorralLogger(project="lit-fail"), default_root_dir=str(tmp_path),
                        log_every_n_steps=1, accelerator="cpu", devices=1, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False, limit_val_batches=0)
    with pytest.raises(RuntimeError, match="diverged"):
        trainer.fit(Exploding(), loader())
    (run,) = server.client().runs(project="lit-fail")
    assert run["state"] == "failed" and run["metrics"]["train_loss"]["count"] == 2
