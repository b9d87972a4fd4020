"""The tools that advise: the GPUs a model needs, why a job failed, how well it used what it asked for."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field

from corral.mcp.field_names import fields_named
from corral.mcp.inputs import given_id, job_ref
from corral.mcp.tools.calls import JobId, ToolCalls
from corral.mcp.views import evidence


class AdviceTools(ToolCalls):
    """recommend_resources, diagnose_job and job_efficiency."""

    def recommend_resources(
        self,
        params: Annotated[str, Field(max_length=32, description="The model's parameter count: \"350M\", \"7B\", "
                                                                "\"1.5B\", \"70e9\".")],
        mode: Annotated[Literal["train", "finetune", "lora", "inference"], Field(description=(
            "train/finetune: full training with Adam; lora: adapters on frozen weights; inference."))] = "train",
        precision: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"], Field(description=(
            "Precision of the weights; int8/int4 only with lora or inference."))] = "bf16",
        gpu_type: Annotated[str | None, Field(max_length=32, description=(
            "Size for this GPU type (H100, A100-40G, L40S, ...) instead of choosing."))] = None,
    ) -> dict[str, Any]:
        """The GPUs a model needs, with the arithmetic (worked out here; no server asked)."""
        from corral.core.scheduling.sizing import USABLE_FRACTION, estimate, format_estimate, parse_params

        result = estimate(parse_params(params), mode, precision, gpu_type)
        data = result.to_dict()
        data["summary"] = format_estimate(result).splitlines()[0]
        # the least memory a GPU needs to hold its share: any type that large will do, not only the one named
        per_gpu_gib = math.ceil(result.total_gb / result.gpus / USABLE_FRACTION * 1e9 / 2**30)
        data["create_gpu_job_arguments"] = {
            "gpus": result.gpus, "gpu_memory": f"{per_gpu_gib}G", "labels": {"params": params, "mode": mode}}
        if result.nodes > 1:
            data["note"] = (f"{result.gpus} GPUs span {result.nodes} nodes: that needs a corral server with the "
                            "Slurm backend (multi-node jobs).")
        return data

    def diagnose_job(self, job_id: JobId) -> dict[str, Any]:
        """Why a job failed or runs badly: causes, evidence and fixes."""
        ref = job_ref(job_id, "job_id")
        with self._client() as client, fields_named({}, job="job_id"):
            result = client.diagnose(ref)
        job = result.get("job") or {}
        return evidence({"job_id": given_id(ref), "state": job.get("state"), "exit_code": job.get("exit_code"),
                         "findings": result.get("findings") or [], "checked": result.get("checked") or {},
                         "unchecked": result.get("unchecked") or [], "usage": result.get("usage") or {}})

    def job_efficiency(self, job_id: JobId) -> dict[str, Any]:
        """How well a job used the CPUs, memory and GPUs it asked for, with advice."""
        ref = job_ref(job_id, "job_id")
        with self._client() as client, fields_named({}, job="job_id"):
            return evidence({"job_id": given_id(ref), **client.efficiency(ref)})
