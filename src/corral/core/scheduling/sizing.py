"""How many GPUs, and which, a model of N parameters needs: the arithmetic behind `corral recommend`.

The memory accounting is the standard one for mixed-precision Adam from the ZeRO paper
(Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
SC 2020, section 3.1): 2 bytes of bf16/fp16 weights, 2 of gradients, and 12 of optimizer state
(fp32 master weights 4, Adam's m 4 and v 4), 16 bytes per parameter in all. Per mode:

    train, finetune  weights + gradients (at the precision) + fp32 master weights + Adam m and v
                     (fp32); with fp32/tf32 the weights are the master copy, so 4 + 4 + 8 = 16 B
                     again. fp8 training keeps bf16 weights and gradients and casts to fp8 inside
                     the matmuls, so it is counted as bf16.
    lora             frozen weights at the precision (int8/int4 for QLoRA-style runs) + adapters:
                     1% of the parameters, trained at 16 B each.
    inference        weights at the precision.

Every mode adds 20% for activations and workspace (the KV cache, for inference). The figures are
a floor for a sensible batch, not a profile: long sequences or big batches need more. Sizes are
decimal GB (1e9 bytes), GPUs are counted at their nominal size, and 90% of a GPU is taken as usable
(the CUDA context, the allocator's fragmentation and NCCL buffers take the rest).

The GPU count is ceil(total / (90% of one GPU)), rounded up to 1, 2, 4, 8 or a multiple of 8 (whole
nodes of 8), which is what FSDP/ZeRO-3 sharding and tensor parallelism split evenly across. The
GPU type:

    train, finetune  the seed table's type for the size (below), and never fewer GPUs than its row
                     starts at: the table also pays for speed, not only memory. fp8 needs Hopper, so
                     an A100 row becomes the H100-80G (same 80 GB) there.
    lora, inference  of A100-40G, A100-80G, H100-80G, H200-141G (H100 and H200 only, for fp8): the
                     type that needs the fewest GPUs, and of those the smallest, the cheaper and
                     commoner card. Fewer GPUs means less tensor parallelism and fewer to find free.
    --gpu-type       forces the type; the count is then what memory needs (the table's floors are
                     written for its own types).

The seed table (training):

    params   GPUs
    <1B      1×A100-40G
    1–7B     1–4×A100-80G
    7–13B    4–8×A100-80G
    13–70B   8+×H100-80G
    >70B     16+×H100-80G

Upper bounds are inclusive: a 7B model is in the 1–7B row, 13B in 7–13B, 70B in 13–70B.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from corral.errors import InvalidRequest

MODES = ("train", "finetune", "lora", "inference")
MODE_ALIASES = {"full": "train", "training": "train", "pretrain": "train", "pretraining": "train",
                "fine-tune": "finetune", "fine_tune": "finetune", "full-finetune": "finetune",
                "infer": "inference", "serve": "inference", "serving": "inference"}
"""Other words people use for the modes: full training is `train`, serving is `inference`."""
PRECISIONS: dict[str, float] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
"""Bytes per parameter of the weights in each precision."""
TRAINING_MODES = ("train", "finetune")
QUANTIZED = ("int8", "int4")
"""Precisions for frozen or served weights only: nothing trains in them."""

USABLE_FRACTION = 0.9
ACTIVATIONS_MARGIN = 0.2
LORA_FRACTION = 0.01
"""Share of the parameters LoRA adapters train (rank 8–64 on the attention and MLP projections)."""
GPUS_PER_NODE = 8
ADAM_BYTES = 8
MASTER_BYTES = 4
TRAINED_BYTES = 16

_PARAMS_HINT = "use a count such as 350M, 7B or 1.5T"
_PARAMS = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*([KMBT])?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
_MAX_PARAMS = 10**15


@dataclass(frozen=True)
class GpuModel:
    """A GPU type corral can size for: its name and nominal memory."""

    name: str
    mem_gb: float
    fp8: bool = False
    """Has FP8 tensor cores (Ada and Hopper)."""


CATALOGUE: dict[str, GpuModel] = {g.name: g for g in (
    GpuModel("T4", 16),
    GpuModel("V100-16G", 16),
    GpuModel("V100", 32),
    GpuModel("A10G", 24),
    GpuModel("L4", 24, fp8=True),
    GpuModel("RTX-4090", 24, fp8=True),
    GpuModel("A100-40G", 40),
    GpuModel("L40S", 48, fp8=True),
    GpuModel("A100-80G", 80),
    GpuModel("H100-80G", 80, fp8=True),
    GpuModel("H200-141G", 141, fp8=True),
)}
_ALIASES = {"H100": "H100-80G", "H200": "H200-141G", "V100-32G": "V100", "RTX4090": "RTX-4090", "4090": "RTX-4090"}
AUTO_TYPES = ("A100-40G", "A100-80G", "H100-80G", "H200-141G")
"""The types lora and inference choose from, smallest first."""


@dataclass(frozen=True)
class Tier:
    """One row of the seed table: models of up to `up_to` parameters train on `min_gpus`.. of `gpu_type`."""

    params: str
    up_to: int | None
    """Largest parameter count in the row (inclusive); None for the last row."""
    gpu_type: str
    min_gpus: int
    max_gpus: int | None
    """None: no upper bound ("8+")."""

    @property
    def gpus(self) -> str:
        """The row's GPU column: `1–4×A100-80G`, `8+×H100-80G`."""
        if self.max_gpus is None:
            count = f"{self.min_gpus}+"
        elif self.max_gpus == self.min_gpus:
            count = str(self.min_gpus)
        else:
            count = f"{self.min_gpus}–{self.max_gpus}"
        return f"{count}×{self.gpu_type}"


TIERS = (
    Tier("<1B", 10**9 - 1, "A100-40G", 1, 1),
    Tier("1–7B", 7 * 10**9, "A100-80G", 1, 4),
    Tier("7–13B", 13 * 10**9, "A100-80G", 4, 8),
    Tier("13–70B", 70 * 10**9, "H100-80G", 8, None),
    Tier(">70B", None, "H100-80G", 16, None),
)


@dataclass(frozen=True)
class Estimate:
    """The memory a model needs and the GPUs that hold it; `arithmetic` shows the working."""

    params: int
    mode: str
    precision: str
    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    """Adam's m and v, fp32."""
    master_weights_gb: float
    adapters_gb: float
    """LoRA adapters with their gradients and optimizer states (lora only)."""
    activations_gb: float
    total_gb: float
    gpu_type: str
    gpu_mem_gb: float
    gpus: int
    nodes: int
    tier: Tier
    """The seed table's row for this size (a training table: for lora and inference, for reference)."""
    arithmetic: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, with `recommendation` (`2×A100-80G`) and the tier's GPU column."""
        data = asdict(self)
        data["tier"]["gpus"] = self.tier.gpus
        data["arithmetic"] = list(self.arithmetic)
        return {"recommendation": f"{self.gpus}×{self.gpu_type}", **data}


def parse_params(text: str) -> int:
    """A parameter count from `7B`, `1.5b`, `350M`, `1.2T`, `70e9` or `7000000000`.

    Raises:
        InvalidRequest: not a count, not positive, or a bare small number (`7` is surely `7B`).
    """
    match = _PARAMS.match(text) if isinstance(text, str) else None
    if not match:
        raise InvalidRequest("params", f"cannot read {text!r} as a parameter count", _PARAMS_HINT)
    from decimal import Decimal, InvalidOperation  # exact for 1.1B; imported here to keep the CLI's start fast

    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number) * (Decimal(10) ** int(exponent or 0)) * _SCALE[(suffix or "").upper()]
    except (ArithmeticError, InvalidOperation):  # decimal.Overflow for 1e999999999999
        raise InvalidRequest("params", f"cannot read {text!r} as a parameter count", _PARAMS_HINT) from None
    count = int(value.to_integral_value())
    if count <= 0:
        raise InvalidRequest("params", f"must be positive, got {text.strip()!r}", _PARAMS_HINT)
    if count > _MAX_PARAMS:
        raise InvalidRequest("params", f"{text.strip()!r} is more than 1000T parameters", _PARAMS_HINT)
    if not suffix and not exponent and count < 10**6:
        # nobody sizes GPUs for a 7-parameter model; they forgot the unit
        raise InvalidRequest("params", f"{text.strip()!r} is {count} parameters; did you mean {text.strip()}B?",
                             _PARAMS_HINT)
    return count


def format_params(params: int) -> str:
    """`7B`, `1.5B`, `350M`, `1.2T`, `175B`: short, and readable back by `parse_params`."""
    for scale, unit in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if params >= scale:
            value = params / scale
            text = f"{value:.1f}" if value < 100 else f"{value:.0f}"
            return text.removesuffix(".0") + unit
    return str(params)


def gpu_model(name: str) -> GpuModel:
    """The catalogue entry for `H100`, `a100-80gb`, `RTX 4090`, ...

    Raises:
        InvalidRequest: an unknown type, or a bare `A100` (40 or 80 GB?).
    """
    key = re.sub(r"[\s_]+", "-", name.strip().upper())
    key = re.sub(r"(\d)GB$", r"\1G", key)
    key = _ALIASES.get(key, key)
    if key in CATALOGUE:
        return CATALOGUE[key]
    if key == "A100":
        raise InvalidRequest("gpu_type", "A100 comes with 40 GB or 80 GB", "say A100-40G or A100-80G")
    raise InvalidRequest("gpu_type", f"unknown GPU type {name!r}", f"known: {', '.join(CATALOGUE)}")


def tier_for(params: int) -> Tier:
    """The seed table's row a model of `params` parameters falls in."""
    return next(t for t in TIERS if t.up_to is None or params <= t.up_to)


def round_gpu_count(needed: int) -> int:
    """Up to 1, 2, 4, 8, or a multiple of 8 (whole nodes): counts that shard evenly."""
    if needed <= 1:
        return 1
    if needed <= GPUS_PER_NODE:
        return 1 << (needed - 1).bit_length()
    return -(-needed // GPUS_PER_NODE) * GPUS_PER_NODE


def gpus_needed(total_gb: float, gpu_mem_gb: float) -> int:
    """ceil(total / usable memory of one GPU), before rounding."""
    # the epsilon keeps 72.0 / 72.0 from becoming 2 through float noise
    return max(1, math.ceil(total_gb / (USABLE_FRACTION * gpu_mem_gb) - 1e-9))


def estimate(params: int, mode: str = "train", precision: str = "bf16", gpu_type: str | None = None) -> Estimate:
    """The memory `params` parameters need in `mode` at `precision`, and the GPUs to hold it.

    Args:
        params: the parameter count (see `parse_params`).
        mode: one of MODES; train and finetune are full training with Adam.
        precision: one of PRECISIONS; int8 and int4 only for lora and inference.
        gpu_type: force this GPU type (see CATALOGUE) instead of choosing one.

    Raises:
        InvalidRequest: naming `params`, `mode`, `precision` or `gpu_type`.
    """
    mode = _check_mode(mode)
    precision = _check_precision(precision, mode)
    if isinstance(params, bool) or not isinstance(params, int) or params <= 0:
        raise InvalidRequest("params", f"must be a positive count, got {params!r}", _PARAMS_HINT)
    forced = gpu_model(gpu_type) if gpu_type else None
    if forced is not None and precision == "fp8" and not forced.fp8:
        fp8_types = ", ".join(g.name for g in CATALOGUE.values() if g.fp8)
        raise InvalidRequest("precision", f"fp8 needs FP8 tensor cores, which the {forced.name} lacks",
                             f"use bf16 on it, or one of {fp8_types}")
    memory = _memory(params, mode, precision)
    tier = tier_for(params)
    lines = list(memory.lines)
    if forced is not None:
        gpu, needed, floor = forced, gpus_needed(memory.total, forced.mem_gb), 1
    elif mode in TRAINING_MODES:
        gpu = CATALOGUE[tier.gpu_type]
        if precision == "fp8" and not gpu.fp8:
            gpu = CATALOGUE["H100-80G"]  # the same 80 GB or more, with FP8 tensor cores
        needed, floor = gpus_needed(memory.total, gpu.mem_gb), tier.min_gpus
    else:
        gpu, needed, choice = _smallest_of_fewest(memory.total, precision)
        floor = 1
        lines.append(choice)
    gpus = round_gpu_count(max(needed, floor))
    lines.append(_total_line(memory.total, gpu, needed, floor, gpus, mode, tier))
    if mode in TRAINING_MODES:
        lines.append(f"seed table: {tier.params} → {tier.gpus}"
                     + (f" (written for its own types; with {gpu.name} the count follows from memory)"
                        if forced is not None else ""))
    return Estimate(
        params=params, mode=mode, precision=precision, weights_gb=_r(memory.weights),
        gradients_gb=_r(memory.gradients), optimizer_gb=_r(memory.optimizer), master_weights_gb=_r(memory.master),
        adapters_gb=_r(memory.adapters), activations_gb=_r(memory.activations), total_gb=_r(memory.total),
        gpu_type=gpu.name, gpu_mem_gb=gpu.mem_gb, gpus=gpus, nodes=-(-gpus // GPUS_PER_NODE), tier=tier,
        arithmetic=tuple(lines),
    )


def undersized(params: int, mode: str, precision: str, gpus: int, gpu_mem_mb: int | None) -> str | None:
    """A warning when a job's GPUs (count × memory each) cannot hold the model it declares; else None.

    With no per-GPU memory given, the job is judged against the largest GPU corral knows
    (H200-141G), so the warning only fires when no GPU of that count could do.

    Raises:
        InvalidRequest: naming `params`, `mode` or `precision`, as `estimate` does.
    """
    wanted = estimate(params, mode, precision)
    if gpu_mem_mb:
        mem_gb = gpu_mem_mb / 1024  # corral's memory sizes are MiB; a "80G" GPU is 80 of the GB used here
        if gpus >= gpus_needed(wanted.total_gb, mem_gb):
            return None
        asked = f"{gpus}×{mem_gb:g} GB"
        advice = f"--gpus {round_gpu_count(gpus_needed(wanted.total_gb, mem_gb))}"
    else:
        largest = max(CATALOGUE.values(), key=lambda g: g.mem_gb)
        if gpus >= gpus_needed(wanted.total_gb, largest.mem_gb):
            return None
        plural = "s" if gpus != 1 else ""
        asked = f"{gpus} GPU{plural} of unstated memory (too few even at {largest.mem_gb:g} GB each)"
        advice = f"--gpus {wanted.gpus} --gpu-mem {wanted.gpu_mem_gb:g}G"
    if gpus <= 0:
        asked = "no GPUs"
    size = format_params(params)
    total = _gb(wanted.total_gb, 0 if wanted.total_gb >= 10 else 1)
    return (f"the job declares a {size} model ({wanted.mode}, {wanted.precision}): ~{total} of GPU "
            f"memory, but asks for {asked}; try {advice} (corral recommend --params {size} --mode {wanted.mode} "
            f"--precision {wanted.precision})")


def format_estimate(e: Estimate, here: tuple[str, ...] = ()) -> str:
    """The recommendation on the first line, what of it the server runs (`here`, core.scheduling.sizing_here), then the
    arithmetic that leads to it."""
    nodes = f"{e.nodes} node{'s' if e.nodes != 1 else ''}"
    head = (f"{format_params(e.params)} parameters, {e.mode} in {e.precision}: {e.gpus}×{e.gpu_type} on {nodes} "
            f"(~{_gb(e.total_gb)} of GPU memory)")
    return "\n".join([head, *here, "", *(f"  {line}" for line in e.arithmetic)])


# -- the arithmetic ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Memory:
    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    master: float = 0.0
    adapters: float = 0.0
    activations: float = 0.0
    total: float = 0.0
    lines: tuple[str, ...] = ()


def _memory(params: int, mode: str, precision: str) -> _Memory:
    n = format_params(params)
    bytes_per = PRECISIONS[precision]
    lines = []
    gradients = optimizer = master = adapters = 0.0
    if mode in TRAINING_MODES:
        if precision == "fp8":
            bytes_per = PRECISIONS["bf16"]
            how = "bf16: fp8 training keeps bf16 weights and casts inside the matmuls"
        else:
            how = precision
        weights = params * bytes_per / 1e9
        gradients = params * bytes_per / 1e9
        optimizer = params * ADAM_BYTES / 1e9
        lines += [
            f"weights: {n} × {_bytes(bytes_per)} ({how}) = {_gb(weights)}",
            f"gradients: {n} × {_bytes(bytes_per)} = {_gb(gradients)}",
            f"Adam states: {n} × {_bytes(ADAM_BYTES)} (fp32 m and v) = {_gb(optimizer)}",
        ]
        if bytes_per < MASTER_BYTES:
            master = params * MASTER_BYTES / 1e9
            lines.append(f"fp32 master weights: {n} × {_bytes(MASTER_BYTES)} = {_gb(master)}")
        else:
            lines.append(f"fp32 master weights: none, the {precision} weights are the master copy")
        label = "activations and workspace"
    elif mode == "lora":
        weights = params * bytes_per / 1e9
        trained = round(params * LORA_FRACTION)
        adapters = trained * TRAINED_BYTES / 1e9
        lines += [
            f"frozen weights: {n} × {_bytes(bytes_per)} ({precision}) = {_gb(weights)}",
            f"LoRA adapters: {LORA_FRACTION:.0%} of {n} = {format_params(trained)} trained × {_bytes(TRAINED_BYTES)} "
            f"(weights, gradients, fp32 master and Adam states) = {_gb(adapters)}",
        ]
        label = "activations and workspace"
    else:
        weights = params * bytes_per / 1e9
        lines.append(f"weights: {n} × {_bytes(bytes_per)} ({precision}) = {_gb(weights)}")
        label = "KV cache and activations"
    subtotal = weights + gradients + optimizer + master + adapters
    activations = subtotal * ACTIVATIONS_MARGIN
    lines.append(f"{label}: +{ACTIVATIONS_MARGIN:.0%} = {_gb(activations)}")
    return _Memory(weights, gradients, optimizer, master, adapters, activations, subtotal + activations, tuple(lines))


def _smallest_of_fewest(total_gb: float, precision: str) -> tuple[GpuModel, int, str]:
    """For lora and inference: the fewest GPUs, then the least memory; and the line that shows the choice."""
    candidates = [CATALOGUE[name] for name in AUTO_TYPES if precision != "fp8" or CATALOGUE[name].fp8]
    counts = [(round_gpu_count(gpus_needed(total_gb, g.mem_gb)), g) for g in candidates]
    fewest = min(count for count, _ in counts)
    chosen = next(g for count, g in counts if count == fewest)
    listed = ", ".join(f"{count}×{g.name}" for count, g in counts)
    return chosen, gpus_needed(total_gb, chosen.mem_gb), f"choice: the fewest GPUs, then the smallest: {listed}"


def _total_line(total: float, gpu: GpuModel, needed: int, floor: int, gpus: int, mode: str, tier: Tier) -> str:
    line = (f"total {_gb(total)}; {gpu.mem_gb:g} GB per {gpu.name} at {USABLE_FRACTION:.0%} usable → "
            f"{needed} GPU{'s' if needed != 1 else ''}")
    if floor > needed:
        line += f" by memory, {floor} by the seed table's floor for {tier.params}"
    if gpus > max(needed, floor) and gpus > GPUS_PER_NODE:
        line += f", rounded up to {gpus}: {gpus // GPUS_PER_NODE} whole nodes of {GPUS_PER_NODE}"
    elif gpus > max(needed, floor):
        line += f", rounded up to {gpus} to split evenly"
    if gpus > 1:
        line += {"lora": " (frozen weights sharded with FSDP)", "inference": " (split with tensor parallelism)"}.get(
            mode, " (sharded with FSDP/ZeRO-3)")
    return line


def _check_mode(mode: str) -> str:
    key = mode.strip().lower() if isinstance(mode, str) else mode
    key = MODE_ALIASES.get(key, key)
    if key not in MODES:
        raise InvalidRequest("mode", f"unknown mode {mode!r}", f"use one of {', '.join(MODES)}")
    return key


def _check_precision(precision: str, mode: str) -> str:
    key = precision.strip().lower() if isinstance(precision, str) else precision
    if key not in PRECISIONS:
        raise InvalidRequest("precision", f"unknown precision {precision!r}", f"use one of {', '.join(PRECISIONS)}")
    if mode in TRAINING_MODES and key in QUANTIZED:
        allowed = ", ".join(p for p in PRECISIONS if p not in QUANTIZED)
        raise InvalidRequest("precision", f"{key} is for lora and inference only, not {mode}",
                             f"for {mode} use one of {allowed}")
    return key


def _bytes(n: float) -> str:
    return f"{n:g} byte{'s' if n != 1 else ''}"


def _gb(value: float, digits: int = 1) -> str:
    if value < 1 and digits:
        return f"{value:.2f} GB"
    return f"{value:.{digits}f} GB"


def _r(value: float) -> float:
    return round(value, 3)
