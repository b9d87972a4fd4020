"""A small CNN on handwritten digits, tracked by corral; resumes from its checkpoint when requeued.

The digits are scikit-learn's (1,797 8x8 images that ship with the package: nothing is downloaded),
used at 8x8 or upsampled (`--size 28` for MNIST's size). CUDA when there is a GPU, else CPU.

    python examples/mnist_cnn.py --epochs 3
    corral submit --gpus 1 -- python examples/mnist_cnn.py --epochs 20
    python examples/mnist_cnn.py --profile           # torch.profiler table and where a step's time goes
    kernprof -l -v examples/mnist_cnn.py --profile   # and line by line timings of train_step
"""

from __future__ import annotations

import argparse
import builtins
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import corral

# kernprof -l puts `profile` into builtins; without it the decorator changes nothing
profile: Callable[[Callable[..., Any]], Callable[..., Any]] = getattr(builtins, "profile", lambda fn: fn)

PHASES = ("data", "forward", "backward", "optimizer")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=8, help="image side in pixels: 8 as shipped, or upsampled (28 = MNIST)")
    parser.add_argument("--name", default=None, help="the run's name (default: from lr, batch size and seed)")
    parser.add_argument("--profile", action="store_true", help="profile a few training steps instead of training")
    parser.add_argument("--profile-steps", type=int, default=20, help="steps timed for the summary in --profile mode")
    return parser.parse_args(argv)


def load_digits(size: int) -> tuple[TensorDataset, TensorDataset]:
    """scikit-learn's digits as normalised 1xSIZExSIZE tensors, split 80/20 the same way for every seed."""
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if size != images.shape[-1]:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = (images - images.mean()) / images.std()
    labels = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1234))
    cut = int(0.8 * len(labels))
    train, val = order[:cut], order[cut:]
    return TensorDataset(images[train], labels[train]), TensorDataset(images[val], labels[val])


class DigitCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(4),  # the same head for 8x8 and upsampled inputs
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 16, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


@profile
def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
               labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step; returns the loss and the number of correct predictions (on the device)."""
    logits = model(images)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(1) == labels).sum()


def to_device(loader: DataLoader, device: torch.device):
    """The loader's batches on the device; pinned host memory lets the copy overlap compute."""
    for images, labels in loader:
        yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def make_loader(dataset: TensorDataset, batch_size: int, device: torch.device, *, shuffle: bool = False,
                generator: torch.Generator | None = None, drop_last: bool = False) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator, drop_last=drop_last,
                      pin_memory=device.type == "cuda")


@torch.no_grad()
def evaluate(model: nn.Module, batches) -> tuple[float, float]:
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for images, labels in batches:
        logits = model(images)
        total_loss += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(1) == labels).sum().item()
        count += len(labels)
    model.train()
    return total_loss / count, correct / count


def train(args: argparse.Namespace, device: torch.device) -> None:
    train_set, val_set = load_digits(args.size)
    model = DigitCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    name = args.name or f"cnn-lr{args.lr:g}-bs{args.batch_size}-seed{args.seed}"
    # on disk: the newest checkpoint (to resume from) and the best by validation loss
    run = corral.init(project="mnist", config=vars(args), name=name, best_metric="val/loss", keep_last=1, keep_best=1)
    start_epoch, step = 0, 0
    checkpoint = run.latest_checkpoint()
    if checkpoint is not None:  # a requeued job: carry on where the last checkpoint left off
        state = torch.load(checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, step = state["epoch"] + 1, state["step"]
        print(f"resumed from {checkpoint}: epoch {start_epoch}, step {step}", flush=True)

    val_loader = make_loader(val_set, 512, device)
    for epoch in range(start_epoch, args.epochs):
        # seeded from (seed, epoch): a resumed run sees the batches it would have seen
        order = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        loader = make_loader(train_set, args.batch_size, device, shuffle=True, generator=order)
        seen, correct_sum, started = 0, 0, time.perf_counter()
        for images, labels in to_device(loader, device):
            loss, correct = train_step(model, optimizer, images, labels)
            # .item() waits for the device; once per step is cheap next to a step here
            run.log({"train/loss": loss.item(), "train/acc": correct.item() / len(labels)}, step=step)
            seen += len(labels)
            correct_sum += int(correct)
            step += 1
        val_loss, val_acc = evaluate(model, to_device(val_loader, device))
        elapsed = time.perf_counter() - started
        run.log({"val/loss": val_loss, "val/acc": val_acc, "train/epoch_acc": correct_sum / seen,
                 "epoch": epoch, "samples_per_s": seen / elapsed}, step=step)
        run.save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "epoch": epoch, "step": step}, step=step, metric=val_loss)
        print(f"epoch {epoch}: val_loss {val_loss:.4f}  val_acc {val_acc:.4f}  ({seen / elapsed:.0f} samples/s)", flush=True)
    run.finish()


def profile_steps(args: argparse.Namespace, device: torch.device) -> None:
    """Time each phase of a training step with timers, then show torch.profiler's busiest ops."""
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    train_set, _ = load_digits(args.size)
    model = DigitCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = make_loader(train_set, args.batch_size, device, shuffle=True, drop_last=True,
                         generator=torch.Generator().manual_seed(args.seed))
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:  # kernels run asynchronously: without this a timer measures only their launch
            torch.cuda.synchronize()

    def batches():
        while True:
            yield from to_device(loader, device)

    source = batches()
    for _ in range(3):  # warm-up: allocator, cuDNN algorithm choice, first-call overheads
        train_step(model, optimizer, *next(source))

    totals = dict.fromkeys(PHASES, 0.0)
    for _ in range(args.profile_steps):
        sync()
        marks = [time.perf_counter()]
        images, labels = next(source)
        sync()
        marks.append(time.perf_counter())
        loss = F.cross_entropy(model(images), labels)
        sync()
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        sync()
        marks.append(time.perf_counter())
        optimizer.step()
        sync()
        marks.append(time.perf_counter())
        for phase, begin, end in zip(PHASES, marks, marks[1:]):
            totals[phase] += end - begin

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch_profile(activities=activities, record_shapes=False) as prof:
        for _ in range(5):
            with record_function("data"):
                images, labels = next(source)
            with record_function("step"):
                train_step(model, optimizer, images, labels)
        sync()
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(f"== torch.profiler: 5 steps on {device}, sorted by {sort_by} ==")
    print(prof.key_averages().table(sort_by=sort_by, row_limit=15))
    print(where_the_time_goes(totals, args.profile_steps, args.batch_size))


def where_the_time_goes(totals: dict[str, float], steps: int, batch_size: int) -> str:
    step_s = sum(totals.values())
    lines = [f"== where the time goes: {steps} steps, {1000 * step_s / steps:.2f} ms a step, "
             f"{steps * batch_size / step_s:.0f} samples/s =="]
    for phase in PHASES:
        lines.append(f"{phase:>10}  {1000 * totals[phase] / steps:8.3f} ms  {100 * totals[phase] / step_s:5.1f}%")
    share = {phase: totals[phase] / step_s for phase in PHASES}
    if share["data"] > 0.3:
        lines.append("input-bound: the model waits for batches (more DataLoader workers, pin_memory, data on the device)")
    elif share["optimizer"] > 0.3:
        lines.append("optimizer-bound: many small parameter tensors (try a fused/foreach optimizer)")
    else:
        lines.append("compute-bound: forward and backward dominate, as they should")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.profile:
        profile_steps(args, device)
    else:
        train(args, device)


if __name__ == "__main__":
    main()
