"""Frameworks that launch through srun run unchanged in a corral job on one machine: a batch script's
`srun python train.py` gives PyTorch Lightning its SLURM world (two DDP processes over gloo), and corral's
tracking records the run once, from rank 0."""

from __future__ import annotations

import sys

import pytest

from tests.helpers import needs

pytestmark = needs("lightning")

TRAIN = """
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from corral.integrations.lightning import CorralLogger


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
trainer = L.Trainer(strategy="ddp", accelerator="cpu", devices=DEVICES, num_nodes=1, max_epochs=1,
                    logger=CorralLogger(project="srun-ddp", name="lightning"), log_every_n_steps=1,
                    enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
trainer.fit(Regression(), data)
environment = type(trainer.strategy.cluster_environment).__name__
print(f"rank {trainer.global_rank} of {trainer.world_size} on {environment} with "
      f"{torch.distributed.get_backend() if torch.distributed.is_initialized() else 'none'}", flush=True)
"""


def _script(directives: str, launch: str) -> str:
    return f"#!/bin/bash\n{directives}\nexport PYTHONWARNINGS=ignore\n{launch}\n"


def test_lightning_ddp_under_srun_trains_with_world_size_two_and_is_tracked_once(server_factory, tmp_path):
    server = server_factory(gpus=0)
    client = server.client()
    (tmp_path / "train.py").write_text(TRAIN.replace("DEVICES", "2"))
    job = client.submit(script=_script("#SBATCH --ntasks-per-node=2", f"srun {sys.executable} train.py"),
                        workdir=str(tmp_path), stdout="out.txt", stderr="err.txt")
    ended = client.wait(job["id"], timeout=240)
    out = (tmp_path / "out.txt").read_text()
    assert ended["state"] == "COMPLETED", (tmp_path / "err.txt").read_text()[-3000:]
    ranks = sorted(line for line in out.splitlines() if line.startswith("rank "))
    assert ranks == ["rank 0 of 2 on SLURMEnvironment with gloo", "rank 1 of 2 on SLURMEnvironment with gloo"], out
    (run,) = client.runs(project="srun-ddp")  # rank 1's logger stays silent
    assert run["state"] == "finished" and run["job_id"] == job["id"]
    # 64 samples, 8 a batch, split over 2 ranks: 4 steps each, logged once
    assert client.series(run["id"], "train_loss")["steps"] == [0, 1, 2, 3]


def test_lightning_refuses_ntasks_without_ntasks_per_node_as_it_does_on_slurm(server_factory, tmp_path):
    server = server_factory(gpus=0)
    client = server.client()
    (tmp_path / "train.py").write_text(TRAIN.replace("DEVICES", "1"))
    job = client.submit(script=_script("#SBATCH --ntasks=2", f"srun {sys.executable} train.py"),
                        workdir=str(tmp_path), stdout="out.txt", stderr="err.txt")
    assert client.wait(job["id"], timeout=240)["state"] == "FAILED"
    # Slurm sets no SLURM_NTASKS_PER_NODE for --ntasks alone, and Lightning asks for it; its hint is the fix
    assert "HINT: Use `--ntasks-per-node=2` instead." in (tmp_path / "err.txt").read_text()


WORKER = """
import os

import torch.distributed as dist

dist.init_process_group("gloo")
total = __import__("torch").tensor([dist.get_rank() + 1])
dist.all_reduce(total)
# one write per line: torchrun's workers run unbuffered and share one stdout, so print's separate newline
# could land after the other worker's line
line = f"rank {dist.get_rank()} of {dist.get_world_size()} sum {int(total)} step {os.environ['SLURM_STEP_ID']}\\n"
os.write(1, line.encode())
dist.destroy_process_group()
"""


def test_srun_torchrun_starts_its_workers_in_the_step(server_factory, tmp_path):
    server = server_factory(gpus=0)
    client = server.client()
    (tmp_path / "worker.py").write_text(WORKER)
    torchrun = f"{sys.executable} -m torch.distributed.run"
    job = client.submit(script=_script("#SBATCH -c 2", f"srun {torchrun} --nproc_per_node=2 worker.py"),
                        workdir=str(tmp_path), stdout="out.txt", stderr="err.txt")
    ended = client.wait(job["id"], timeout=240)
    assert ended["state"] == "COMPLETED", (tmp_path / "err.txt").read_text()[-3000:]
    lines = sorted(line for line in (tmp_path / "out.txt").read_text().splitlines() if line.startswith("rank "))
    assert lines == ["rank 0 of 2 sum 3 step 0", "rank 1 of 2 sum 3 step 0"]
    (step,) = client.steps(job["id"])
    assert (step["name"], step["state"], step["exit_code"], step["ntasks"]) == ("python", "COMPLETED", 0, 1)
