"""`corral recommend`: the GPUs a model needs, worked out here; no server is asked.

Registered on the main group by `corral.cli.main`.
"""

from __future__ import annotations


import click

from corral.cli.terminal import json_text
from corral.core.sizing import MODES, PRECISIONS, estimate, format_estimate, parse_params
from corral.errors import InvalidRequest

_OPTIONS = {"params": "--params", "mode": "--mode", "precision": "--precision", "gpu_type": "--gpu-type"}


@click.command()
@click.option("--params", "params_text", required=True, metavar="COUNT",
              help="The model's parameter count: 350M, 7B, 1.5B, 70e9.")
@click.option("--mode", type=click.Choice(MODES, case_sensitive=False), default="train", show_default=True,
              help="train/finetune: full training with Adam; lora: adapters on frozen weights; inference.")
@click.option("--precision", type=click.Choice(list(PRECISIONS), case_sensitive=False), default="bf16",
              show_default=True, help="Precision of the weights; int8 and int4 only with lora or inference.")
@click.option("--gpu-type", help="Size for this GPU type (H100, A100-40G, L40S, RTX-4090, ...) instead of choosing.")
@click.option("--json", "as_json", is_flag=True, help="The estimate as JSON (what GET /api/v1/recommend answers).")
def recommend(params_text: str, mode: str, precision: str, gpu_type: str | None, as_json: bool) -> None:
    """How many GPUs, and which, a model needs to train, fine-tune or serve, with the arithmetic."""
    try:
        result = estimate(parse_params(params_text), mode, precision, gpu_type)
    except InvalidRequest as exc:
        raise _bad_parameter(exc) from None
    click.echo(json_text(result.to_dict()) if as_json else format_estimate(result))


def _bad_parameter(exc: InvalidRequest) -> click.BadParameter:
    """click's error for the option the InvalidRequest names, without naming it twice."""
    prefix = f"{exc.field}: "
    text = exc.message[len(prefix):] if exc.message.startswith(prefix) else exc.message
    return click.BadParameter(text, param_hint=f"'{_OPTIONS.get(exc.field, exc.field)}'")
