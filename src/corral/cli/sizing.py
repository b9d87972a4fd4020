"""`corral recommend`: the GPUs a model needs, worked out here, and whether the server found (as every command
finds it) runs it: its nodes' GPUs are asked for, and what does fit on them is said where the model does not.

Registered on the main group by `corral.cli.main`.
"""

from __future__ import annotations

from typing import Any

import click

from corral.cli.terminal import json_text
from corral.core.scheduling.sizing import PRECISIONS, estimate, format_estimate, parse_params
from corral.errors import CorralError, InvalidRequest

_OPTIONS = {"params": "--params", "mode": "--mode", "precision": "--precision", "gpu_type": "--gpu-type"}
NODES_TIMEOUT_S = 5.0
NO_SERVER = "(no corral server found: whether it runs here is not checked)"


@click.command()
@click.option("--params", "params_text", required=True, metavar="COUNT",
              help="The model's parameter count: 350M, 7B, 1.5B, 70e9.")
@click.option("--mode", default="train", show_default=True, metavar="MODE",
              help="train (also: full, pretrain) / finetune: full training with Adam; lora: adapters on frozen "
                   "weights; inference (also: serve).")
@click.option("--precision", type=click.Choice(list(PRECISIONS), case_sensitive=False), default="bf16",
              show_default=True, help="Precision of the weights; int8 and int4 only with lora or inference.")
@click.option("--gpu-type", help="Size for this GPU type (H100, A100-40G, L40S, RTX-4090, ...) instead of choosing.")
@click.option("--json", "as_json", is_flag=True, help="The estimate as JSON (what GET /api/v1/recommend answers).")
@click.pass_context
def recommend(ctx: click.Context, params_text: str, mode: str, precision: str, gpu_type: str | None,
              as_json: bool) -> None:
    """How many GPUs, and which, a model needs to train, fine-tune or serve, with the arithmetic; and whether
    the server runs it, or what does fit on it."""
    from corral.core.scheduling.sizing_here import fit_here, gpu_groups

    try:
        result = estimate(parse_params(params_text), mode, precision, gpu_type)
    except InvalidRequest as exc:
        raise _bad_parameter(exc) from None
    nodes = _server_nodes(ctx)
    here = None if nodes is None else fit_here(result, gpu_groups(nodes))
    if as_json:
        click.echo(json_text({**result.to_dict(), **({"here": here.to_dict()} if here else {})}))
    else:
        click.echo(format_estimate(result, here.lines if here else (NO_SERVER,)))


def _server_nodes(ctx: click.Context) -> list[tuple[str, list[tuple[str, int]]]] | None:
    """The server's nodes and their GPUs (type, MB), or None where no server answers."""
    from corral.client import Client

    options: dict[str, Any] = ctx.find_root().obj or {}
    try:
        with Client(options.get("url"), home=options.get("home"), timeout=NODES_TIMEOUT_S) as client:
            nodes = client.nodes()
    except (CorralError, OSError):
        return None
    return [(str(n.get("name")), [(str(g.get("type") or "GPU"), int(g.get("mem_mb") or 0)) for g in n.get("gpus") or []])
            for n in nodes]


def _bad_parameter(exc: InvalidRequest) -> click.BadParameter:
    """click's error for the option the InvalidRequest names, without naming it twice."""
    prefix = f"{exc.field}: "
    text = exc.message[len(prefix):] if exc.message.startswith(prefix) else exc.message
    return click.BadParameter(text, param_hint=f"'{_OPTIONS.get(exc.field, exc.field)}'")
