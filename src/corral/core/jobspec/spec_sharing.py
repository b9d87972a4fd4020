"""A job spec's GPU share (`corral.core.scheduling.sharing`): Slurm's `--gres=shard:N`, or `--gpu-mem SIZE --gpu-share`.

Either makes a sharing job: one GPU (CUDA_VISIBLE_DEVICES names it) that others may use too, within a memory
budget. `--gpu-mem` alone keeps its meaning: a minimum memory of each whole GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from corral.core.jobspec.job_spec import MAX_GPUS
from corral.core.jobspec.spec_queue import yes_no
from corral.errors import InvalidRequest

_SHARD = re.compile(r"^\s*shard(?::\s*([0-9]{1,6}))?\s*$", re.IGNORECASE)


def is_shard_gres(text: object) -> bool:
    return isinstance(text, str) and text.strip().lower().startswith("shard")


def parse_shards(text: str) -> int:
    """`shard:2` -> 2; `shard` -> 1.

    Raises:
        InvalidRequest: on `gres`, naming the spellings taken.
    """
    match = _SHARD.match(text)
    if match is None:
        raise InvalidRequest("gres", f"cannot read {text!r:.60} as a shard request",
                             "write shard:N (N shards of one GPU), or gpu:N for whole GPUs")
    count = int(match.group(1) or 1)
    if not 1 <= count <= MAX_GPUS * 1000:
        raise InvalidRequest("gres", f"shard:{count}: must be from 1 to {MAX_GPUS * 1000}",
                             "write shard:N with N at most the node's shards_per_gpu")
    return count


def split_shards(fields: dict[str, Any]) -> int:
    """Take a `gres=shard:N` out of the fields (what is left is read as whole GPUs); its N, or 0."""
    gres = fields.get("gres")
    if not is_shard_gres(gres):
        return 0
    del fields["gres"]
    return parse_shards(str(gres))


def share_of(fields: Mapping[str, Any], shards: int, gpus: int, gpu_mem_mb: int | None,
             exclusive: bool) -> tuple[int, int]:
    """A sharing job's GPUs (one) and its memory budget in MB (0 for shards: the server sizes them);
    (gpus, 0) for a job that shares nothing.

    Raises:
        InvalidRequest: `gpu_share` without `gpu_mem`, a share of more than one GPU, or with --exclusive.
    """
    share = yes_no(fields.get("gpu_share") or False, "gpu_share")
    if not shards and not share:
        return gpus, 0
    field = "gres" if shards else "gpu_share"
    if gpus > 1 or (shards and gpus):
        raise InvalidRequest(field, f"a sharing job gets part of one GPU, but {gpus} GPUs were asked for too",
                             "drop --gpus (the share is of one GPU), or ask for whole GPUs without "
                             + ("shard:N" if shards else "--gpu-share"))
    if exclusive:
        raise InvalidRequest(field, "a sharing job cannot take its whole node (--exclusive)",
                             "drop --exclusive, or ask for whole GPUs")
    if shards:
        if share:
            raise InvalidRequest("gpu_share", "given together with --gres=shard:N",
                                 "give one: shard:N, or --gpu-mem SIZE --gpu-share")
        return 1, 0
    if not gpu_mem_mb:
        raise InvalidRequest("gpu_share", "needs the GPU memory the job may use", "add --gpu-mem SIZE, e.g. 20G")
    return 1, gpu_mem_mb

