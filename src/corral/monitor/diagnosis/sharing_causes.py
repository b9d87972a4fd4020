"""A sharing job (`corral.core.scheduling.sharing`) stopped for holding more GPU memory than its budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.monitoring.findings import CRITICAL, Finding
from corral.core.units.units import format_memory
from corral.monitor.diagnosis.log_lines import clip


def over_gpu_budget(job: Mapping[str, Any]) -> Finding | None:
    reason = job.get("reason") or ""
    budget = job.get("gpu_share_mb") or 0
    if job.get("state") != "FAILED" or not budget or not reason.startswith("GPU memory ") or "over its budget" not in reason:
        return None
    shards = job.get("gpu_shards") or 0
    bigger = (f"more shards (--gres=shard:{shards + 1} or more, each of a GPU's shards_per_gpu)" if shards
              else f"a bigger budget (--gpu-mem more than {format_memory(budget)} with --gpu-share)")
    return Finding(
        cause="gpu_over_budget", title=f"It used more GPU memory than its budget of {format_memory(budget)} on a shared GPU",
        evidence=(clip(reason),),
        fixes=(
            f"Ask for {bigger}, or for a whole GPU (--gpus 1) if it needs one.",
            "Or make it use less: a smaller batch, and PyTorch held to the budget with "
            "torch.cuda.set_per_process_memory_fraction (the job's CORRAL_GPU_MEM_MB says the budget in MB).",
        ),
        severity=CRITICAL,
    )
