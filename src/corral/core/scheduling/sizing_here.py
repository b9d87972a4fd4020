"""What of a sizing fits on this server: its nodes' GPUs against the memory a model needs (`corral recommend`).

`core.scheduling.sizing.estimate` answers with the GPUs a model needs anywhere (`24×H100-80G on 3 nodes`); this says
whether the server asked can run it (a job runs on one node: the GPUs of one type of one node must hold it,
at the same 90% usable), and where it cannot, what does fit there: the same model with LoRA or for inference,
at the first precision that fits, and the largest model that trains in full. A declared "80G" GPU counts as
80 GB, as `core.scheduling.sizing.undersized` reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from corral.core.scheduling.sizing import (
    TRAINING_MODES, USABLE_FRACTION, Estimate, estimate, format_params, gpus_needed, parse_params, round_gpu_count,
)


@dataclass(frozen=True)
class GpuGroup:
    """The GPUs of one type on one node."""

    node: str
    gpu_type: str
    mem_gb: float
    count: int

    @property
    def usable_gb(self) -> float:
        return self.count * self.mem_gb * USABLE_FRACTION

    def describe(self) -> str:
        """`vm's 4×A100 (80 GB each)`."""
        return f"{self.node}'s {self.count}×{self.gpu_type} ({self.mem_gb:g} GB each)"


@dataclass(frozen=True)
class Placement:
    """A sizing on this server: `gpus` of `group`'s (the count to ask for: `needed` rounded to split evenly,
    within what the node has)."""

    mode: str
    precision: str
    total_gb: float
    group: GpuGroup
    needed: int
    gpus: int

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "precision": self.precision, "total_gb": round(self.total_gb, 3),
                "node": self.group.node, "gpu_type": self.group.gpu_type, "gpu_mem_gb": self.group.mem_gb,
                "gpus": self.gpus}


@dataclass(frozen=True)
class Here:
    """Whether the server runs the estimate, and what fits on it where it does not."""

    fits: Placement | None
    largest: GpuGroup | None
    """The group holding the most GPU memory (None: the server has no GPUs)."""
    alternatives: tuple[Placement, ...]
    largest_trainable_params: int | None
    """The largest model that trains in full (train, bf16) on `largest`, by memory."""
    lines: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"fits": self.fits is not None, "placement": self.fits.to_dict() if self.fits else None,
                "largest": None if self.largest is None else {
                    "node": self.largest.node, "gpu_type": self.largest.gpu_type, "gpu_mem_gb": self.largest.mem_gb,
                    "gpus": self.largest.count, "usable_gb": round(self.largest.usable_gb, 1)},
                "alternatives": [a.to_dict() for a in self.alternatives],
                "largest_trainable_params": self.largest_trainable_params, "lines": list(self.lines)}


def gpu_groups(nodes: Iterable[tuple[str, Iterable[tuple[str, int]]]]) -> list[GpuGroup]:
    """The GPU groups of nodes given as (name, [(gpu type, memory in MB), ...]); GPUs of unknown memory
    are left out (nothing can be sized on them)."""
    groups: list[GpuGroup] = []
    for name, gpus in nodes:
        counts: dict[tuple[str, int], int] = {}
        for gpu_type, mem_mb in gpus:
            if mem_mb and mem_mb > 0:
                counts[(gpu_type or "GPU", mem_mb)] = counts.get((gpu_type or "GPU", mem_mb), 0) + 1
        groups += [GpuGroup(name, kind, mem_mb / 1024, count) for (kind, mem_mb), count in counts.items()]
    return groups


def place(total_gb: float, mode: str, precision: str, groups: Sequence[GpuGroup]) -> Placement | None:
    """The group that holds `total_gb` with the fewest GPUs (then the least memory each), or None."""
    best: Placement | None = None
    for group in groups:
        needed = gpus_needed(total_gb, group.mem_gb)
        if needed > group.count:
            continue
        option = Placement(mode, precision, total_gb, group, needed, min(round_gpu_count(needed), group.count))
        if best is None or (option.gpus, group.mem_gb) < (best.gpus, best.group.mem_gb):
            best = option
    return best


def fit_here(wanted: Estimate, groups: Sequence[GpuGroup]) -> Here:
    """Whether a server with these GPU groups runs `wanted`; else what fits there instead."""
    largest = max(groups, key=lambda g: (g.usable_gb, g.count), default=None)
    fits = place(wanted.total_gb, wanted.mode, wanted.precision, groups)
    if fits is not None:
        line = (f"This server runs it: {_count(fits.gpus, 'GPU')} of {fits.group.describe()}, "
                f"--gpus {fits.gpus} --gpu-type {fits.group.gpu_type}")
        return Here(fits, largest, (), None, (line,))
    if largest is None:
        return Here(None, None, (), None, ("This server cannot run it: it has no GPUs.",))
    alternatives = _alternatives(wanted, groups)
    trainable = largest_trainable(largest)
    lines = [f"This server cannot run it: the most GPU memory one job can have here is {largest.describe()}, "
             f"~{largest.usable_gb:.0f} GB usable of the ~{wanted.total_gb:.0f} GB it needs."]
    fitting = [f"{a.mode} in {a.precision} (~{a.total_gb:.0f} GB: --gpus {a.gpus} on {a.group.node})"
               for a in alternatives]
    if trainable is not None and wanted.mode in TRAINING_MODES + ("lora",):
        fitting.append(f"full training (bf16) of a model of up to ~{format_params(trainable)} parameters")
    if fitting:
        lines.append("What fits here: " + "; ".join(fitting) + ".")
    return Here(None, largest, alternatives, trainable, tuple(lines))


def largest_trainable(group: GpuGroup) -> int | None:
    """The most parameters that train in full (bf16, Adam) within the group's usable memory, rounded down to
    two significant figures; None below 100M (nothing worth training in full)."""
    per_billion = estimate(10**9, "train", "bf16").total_gb
    params = int(group.usable_gb / per_billion * 10**9)
    if params < 10**8:
        return None
    scale = 10 ** (len(str(params)) - 2)
    return params // scale * scale


def _alternatives(wanted: Estimate, groups: Sequence[GpuGroup]) -> tuple[Placement, ...]:
    """The same model with LoRA, then for inference (served: for inference only), each at the first precision
    (16-bit first) that fits in less memory than asked for."""
    modes = ("inference",) if wanted.mode == "inference" else ("lora", "inference")
    found = []
    for mode in modes:
        for precision in ("bf16", "int8", "int4"):
            if mode == wanted.mode and precision == wanted.precision:
                continue
            total = estimate(wanted.params, mode, precision).total_gb
            if total >= wanted.total_gb:
                continue
            placed = place(total, mode, precision, groups)
            if placed is not None:
                found.append(placed)
                break
    return tuple(found)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def recommend_here(params: str, mode: str, precision: str, gpu_type: str | None,
                   nodes: Iterable[tuple[str, Iterable[tuple[str, int]]]] | None) -> dict[str, object]:
    """`estimate`'s answer as JSON, with `here` (`fit_here` on `nodes`, `gpu_groups`' shape) where the nodes are known.

    Raises:
        InvalidRequest: naming `params`, `mode`, `precision` or `gpu_type`, as `estimate` does.
    """
    wanted = estimate(parse_params(params), mode, precision, gpu_type)
    data = wanted.to_dict()
    if nodes is not None:
        data["here"] = fit_here(wanted, gpu_groups(nodes)).to_dict()
    return data
