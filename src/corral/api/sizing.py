"""Route for sizing: the GPUs a model needs (what `corral recommend` prints), computed per request, and
whether this server's nodes run it (`here`, core.scheduling.sizing_here)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from corral.api.schemas import ErrorOut
from corral.core.scheduling.sizing_here import recommend_here

router = APIRouter(prefix="/api/v1", tags=["sizing"])


@router.get("/recommend", summary="GPUs for a model: the memory it needs, the type and count, the arithmetic, "
                                  "and what of it this server runs",
            responses={422: {"model": ErrorOut}})
async def recommend(
    request: Request,
    params: str = Query(..., description="Parameter count: 350M, 7B, 1.5B, 70e9, 1.2T."),
    mode: str = Query("train", description="train (or full), finetune, lora or inference."),
    precision: str = Query("bf16", description="fp32, tf32, bf16, fp16, fp8, int8 or int4 (int8, int4: not training)."),
    gpu_type: str | None = Query(None, description="Size for this GPU type (H100, A100-40G, L40S, ...)."),
) -> dict[str, object]:
    # the core checks every value, so a bad one answers 422 with the same message as the CLI
    service = getattr(request.app.state, "service", None)
    nodes = None if service is None else [(n.name, [(g.type, g.mem_mb) for g in n.gpus]) for n in service.nodes]
    return recommend_here(params, mode, precision, gpu_type, nodes)
