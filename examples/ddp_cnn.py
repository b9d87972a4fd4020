"""Data-parallel training (DDP) of a small CNN on CIFAR-sized images that this script makes itself.

Each of the 10 classes is a colored grating with its own color, orientation and frequency, at a
random phase, under noise: learnable, deterministic, and nothing to download.

    torchrun --standalone --nproc_per_node 2 examples/ddp_cnn.py --epochs 2
    corral submit --cpus 4 -- torchrun --standalone --nproc_per_node 4 examples/ddp_cnn.py
    corral submit --gpus 4 -- torchrun --standalone --nproc_per_node 4 examples/ddp_cnn.py   # NCCL, a GPU each

The global batch is split over the processes, so every world size does the same work (strong
scaling) and the times compare. The time covers the epochs (training and validation) after the
first `--warmup-steps` steps, and is the slowest rank's. Rank 0 prints `RESULT world_size=N train_time_s=T samples_per_s=S ...`
and logs those figures to its corral run; the other ranks' `corral.init` returns a run that logs nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import corral

CLASSES = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4096, help="training images (validation: a quarter as many)")
    parser.add_argument("--batch-size", type=int, default=128, help="global batch, split over the processes")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=2,
                        help="first steps left out of the timing (first-call kernel choice and allocation)")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads per process (default: the CPUs this job has, shared out among the processes)")
    parser.add_argument("--project", default="ddp-cnn")
    parser.add_argument("--name", default=None, help="the run's name (default: ddp-np<world size>)")
    return parser.parse_args(argv)


def make_images(count: int, seed: int) -> TensorDataset:
    """`count` 3x32x32 images: per class a colored sinusoidal grating, random phase, plus noise."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (count,), generator=gen)
    classes = torch.arange(CLASSES, dtype=torch.float32)
    angle = classes * math.pi / CLASSES                        # orientation per class
    freq = 1.5 + (classes % 4) * 0.75                           # cycles across the image
    color = torch.rand(CLASSES, 3, generator=torch.Generator().manual_seed(99)) * 2 - 1
    axis = torch.linspace(-math.pi, math.pi, 32)
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")
    a, f = angle[labels].view(-1, 1, 1), freq[labels].view(-1, 1, 1)
    phase = torch.rand(count, 1, 1, generator=gen) * 2 * math.pi
    wave = torch.sin(f * (xx * torch.cos(a) + yy * torch.sin(a)) + phase)          # count x 32 x 32
    images = color[labels].view(-1, 3, 1, 1) * wave.unsqueeze(1)                    # count x 3 x 32 x 32
    images += 1.0 * torch.randn(images.shape, generator=gen)
    return TensorDataset(images, labels)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 16x16
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 8x8
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(64, CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def setup() -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes (or be a world of one); returns rank, size, device."""
    rank, world, local = (int(os.environ.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", world))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    return rank, world, device


def cpu_threads(requested: int, local_world: int) -> int:
    # torchrun sets OMP_NUM_THREADS=1 only when it is unset, and corral sets it to the job's CPUs:
    # left alone, N processes would each run that many threads and fight over the same cores
    if requested:
        return requested
    cores = len(os.sched_getaffinity(0))
    cpus = min(int(os.environ.get("CORRAL_CPUS", 0)) or cores, cores)
    return max(1, cpus // local_world)


def all_reduce(value: float, op: dist.ReduceOp.RedOpType, device: torch.device, world: int) -> float:
    if world == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return tensor.item()


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device, world: int) -> tuple[float, float]:
    """Loss and accuracy over the whole validation set, each rank scoring its shard."""
    model.eval()
    loss_sum = correct = count = 0.0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        loss_sum += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(1) == labels).sum().item()
        count += len(labels)
    model.train()
    totals = [all_reduce(v, dist.ReduceOp.SUM, device, world) for v in (loss_sum, correct, count)]
    return totals[0] / totals[2], totals[1] / totals[2]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rank, world, device = setup()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if device.type == "cpu":
        torch.set_num_threads(cpu_threads(args.threads, local_world))
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} does not split evenly over {world} processes")
    per_rank_batch = args.batch_size // world

    train_set = make_images(args.samples, args.seed)
    val_set = make_images(args.samples // 4, args.seed + 1)
    sampler: DistributedSampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=per_rank_batch, sampler=sampler, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256,
                            sampler=DistributedSampler(val_set, num_replicas=world, rank=rank, shuffle=False))

    torch.manual_seed(args.seed)  # every rank starts from the same weights (DDP also broadcasts rank 0's)
    net = SmallCNN().to(device)
    model: nn.Module = net
    if world > 1:
        model = DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    config = {**vars(args), "world_size": world, "per_rank_batch": per_rank_batch, "device": device.type,
              "threads_per_process": torch.get_num_threads() if device.type == "cpu" else None}
    run = corral.init(project=args.project, name=args.name or f"ddp-np{world}", config=config, best_metric="val/loss")

    step, samples = 0, 0
    started = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            if step == args.warmup_steps:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                if world > 1:
                    dist.barrier()  # start the clock together
                started, samples = time.perf_counter(), 0
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces the gradients here, overlapped with the backward pass
            optimizer.step()
            samples += len(labels) * world
            if rank == 0 and step % 5 == 0:
                run.log({"train/loss": loss.item()}, step=step)
            step += 1
        val_loss, val_acc = evaluate(model, val_loader, device, world)
        run.log({"val/loss": val_loss, "val/acc": val_acc, "epoch": epoch}, step=step)
        if rank == 0:
            print(f"epoch {epoch}: val_loss {val_loss:.4f}  val_acc {val_acc:.4f}", flush=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    # the slowest rank's time is the job's time
    train_time = all_reduce(time.perf_counter() - started, dist.ReduceOp.MAX, device, world)

    if rank == 0:
        result = {"world_size": world, "train_time_s": round(train_time, 3), "samples_per_s": round(samples / train_time, 1),
                  "val_acc": round(val_acc, 4), "steps": step, "backend": dist.get_backend() if world > 1 else "none"}
        print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()), flush=True)
        run.log({"train_time_s": train_time, "samples_per_s": samples / train_time}, step=step)
        run.save_checkpoint(net.state_dict(), step=step, metric=val_loss)
    run.finish()
    if world > 1:
        # rank 0 is still saving the checkpoint: a rank that tears gloo down before its peers are done
        # aborts ("terminate called without an active exception"), so all of them leave together
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
