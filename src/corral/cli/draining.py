"""`corral drain` and `corral resume`: take GPUs or a node out of scheduling by hand, and give them back (admins)."""

from __future__ import annotations

from typing import Any

import click

from corral.cli.connect import client_for
from corral.cli.terminal import json_text
from corral.errors import InvalidRequest


@click.command()
@click.argument("target")
@click.option("--reason", required=True, help='Why, as Slurm asks (e.g. "XID 79"); shown in every view.')
@click.option("--node", help="The node of the GPUs given as indexes [default: the server's one node].")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def drain(ctx: click.Context, target: str, reason: str, node: str | None, as_json: bool) -> None:
    """Drain GPUs (TARGET: indexes, e.g. 2 or 1,3) or a whole node (TARGET: its name): no new job lands there,
    jobs already on them run to their end (admins; like scontrol update State=DRAIN)."""
    client = client_for(ctx)
    name, gpus = _target(client.nodes(), target, node)
    nodes = client.drain(name, reason, gpus)
    click.echo(json_text(nodes) if as_json else f"{_what(name, gpus)} drained: {reason}")


@click.command()
@click.argument("target")
@click.option("--node", help="The node of the GPUs given as indexes [default: the server's one node].")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def resume(ctx: click.Context, target: str, node: str | None, as_json: bool) -> None:
    """Give drained GPUs (TARGET: indexes) or a node (TARGET: its name, with all its GPUs) back to scheduling
    (admins; like scontrol update State=RESUME)."""
    client = client_for(ctx)
    name, gpus = _target(client.nodes(), target, node)
    nodes = client.resume(name, gpus)
    click.echo(json_text(nodes) if as_json else f"{_what(name, gpus)} resumed")


def _target(nodes: list[dict[str, Any]], target: str, node: str | None) -> tuple[str, list[int] | None]:
    """(node, GPU indexes) for GPU indexes such as `2` or `1,3`; (node, None) for a node's name."""
    parts = [p.strip() for p in target.split(",")]
    if not all(p.isdigit() for p in parts):
        if node is not None:
            raise InvalidRequest("node", f"given twice ({target} and --node {node})", "name the node once")
        return target, None
    if node is None:
        if len(nodes) != 1:
            raise InvalidRequest("node", f"GPU {target} of which node? this server has {len(nodes)}",
                                 f"add --node NAME ({', '.join(n['name'] for n in nodes)})")
        node = str(nodes[0]["name"])
    return node, [int(p) for p in parts]


def _what(node: str, gpus: list[int] | None) -> str:
    return f"node {node}" if gpus is None else f"GPU {', '.join(map(str, gpus))} of node {node}"
