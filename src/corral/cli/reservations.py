"""`corral reservation create|update|list|show|delete`: GPUs kept for some users or accounts over a window
(Slurm's advanced reservations; admins make and delete them, anyone lists them)."""

from __future__ import annotations

from typing import Any

import click

from corral.cli.connect import client_for
from corral.cli.format import local_time, table
from corral.cli.terminal import json_text
from corral.core.units.units import format_memory
from corral.errors import NotFound


@click.group()
def reservation() -> None:
    """GPUs kept for some users or accounts over a window; jobs use one with --reservation NAME."""


@reservation.command()
@click.argument("name")
@click.option("--gpus", type=int, help="How many GPUs (the lowest-numbered free over the window).")
@click.option("--gpu-ids", help="Which GPUs, by index: 0,1.")
@click.option("--node", help="The node [default: the one node with GPUs].")
@click.option("--cpus", type=int, help="CPUs kept with them [default: the GPUs' share of the node's].")
@click.option("--mem", help="Memory kept with them, e.g. 64G [default: the GPUs' share].")
@click.option("--users", help="Who may use it: ada,bob.")
@click.option("--accounts", help="Accounts whose jobs may use it: vision (with --users too, a job needs both).")
@click.option("--start", default="now", show_default=True, help="When it begins: now, now+1hour, 16:00, "
              "2026-12-01T08:00.")
@click.option("--duration", help="How long: 4h, 4:00:00, 240 (minutes).")
@click.option("--end", help="When it ends, in place of --duration.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def create(ctx: click.Context, name: str, gpus: int | None, gpu_ids: str | None, node: str | None, cpus: int | None,
           mem: str | None, users: str | None, accounts: str | None, start: str, duration: str | None,
           end: str | None, as_json: bool) -> None:
    """Keep GPUs for users or accounts from --start for --duration (admins; like scontrol create reservation)."""
    made = client_for(ctx).create_reservation(
        name=name, gpus=gpus, gpu_ids=_indexes(gpu_ids), node=node, cpus=cpus, mem=mem,
        users=users.split(",") if users else None, accounts=accounts.split(",") if accounts else None,
        start=start, duration=duration, end=end)
    click.echo(json_text(made) if as_json else f"Reservation created: {made['name']} ({_summary(made)})")


@reservation.command()
@click.argument("name")
@click.option("--gpus", type=int, help="How many GPUs now.")
@click.option("--gpu-ids", help="Which GPUs now, by index: 0,1.")
@click.option("--cpus", type=int, help="CPUs kept with them.")
@click.option("--mem", help="Memory kept with them, e.g. 64G.")
@click.option("--users", help="Who may use it now: ada,bob.")
@click.option("--accounts", help="Accounts whose jobs may use it now.")
@click.option("--start", help="A new start (the duration stays unless --duration or --end is given).")
@click.option("--duration", help="A new duration, from its start: 4h, 4:00:00, 240 (minutes).")
@click.option("--end", help="A new end, in place of --duration.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def update(ctx: click.Context, name: str, gpus: int | None, gpu_ids: str | None, cpus: int | None, mem: str | None,
           users: str | None, accounts: str | None, start: str | None, duration: str | None, end: str | None,
           as_json: bool) -> None:
    """Change a reservation; what is not given stays (admins; like scontrol update ReservationName=...)."""
    made = client_for(ctx).update_reservation(
        name, gpus=gpus, gpu_ids=_indexes(gpu_ids), cpus=cpus, mem=mem, users=users.split(",") if users else None,
        accounts=accounts.split(",") if accounts else None, start=start, duration=duration, end=end)
    click.echo(json_text(made) if as_json else f"Reservation updated: {made['name']} ({_summary(made)})")


def _indexes(gpu_ids: str | None) -> list[int] | None:
    if gpu_ids is None:
        return None
    try:
        return [int(part) for part in gpu_ids.split(",")]
    except ValueError:
        raise click.BadParameter(f"{gpu_ids!r} is not a list of GPU indexes, e.g. 0,1", param_hint="--gpu-ids") from None


@reservation.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """Every reservation, the earliest first."""
    found = client_for(ctx).reservations()
    if as_json:
        click.echo(json_text(found))
        return
    if not found:
        click.echo("No reservations")
        return
    click.echo(table(["NAME", "STATE", "START", "END", "NODE", "GPUS", "USERS", "ACCOUNTS"],
                     [[r["name"], r["state"], local_time(r["start"]), local_time(r["end"]), r["node"],
                       ",".join(map(str, r["gpus"])), ",".join(r["users"]) or "-", ",".join(r["accounts"]) or "-"]
                      for r in found]))


@reservation.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, name: str, as_json: bool) -> None:
    """One reservation, whole."""
    found = next((r for r in client_for(ctx).reservations() if r["name"] == name), None)
    if found is None:
        raise NotFound(f"reservation {name!r}: no such reservation (corral reservation list shows them)")
    if as_json:
        click.echo(json_text(found))
        return
    rows = [("Name", found["name"]), ("State", found["state"]), ("Start", local_time(found["start"])),
            ("End", local_time(found["end"])), ("Node", found["node"]),
            ("GPUs", ",".join(map(str, found["gpus"]))), ("CPUs", str(found["cpus"])),
            ("Memory", f"{found['mem_mb']} MB"), ("Users", ",".join(found["users"]) or "-"),
            ("Accounts", ",".join(found["accounts"]) or "-"), ("Made by", f"{found['by']} at {local_time(found['created'])}")]
    click.echo("\n".join(f"{key + ':':<10} {value}" for key, value in rows))


@reservation.command()
@click.argument("name")
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    """Delete a reservation (admins); jobs still waiting for it are held (reason ReservationDeleted)."""
    client_for(ctx).delete_reservation(name)
    click.echo(f"Reservation deleted: {name}")


def _summary(made: dict[str, Any]) -> str:
    who = [f"users {','.join(made['users'])}"] if made["users"] else []
    who += [f"accounts {','.join(made['accounts'])}"] if made["accounts"] else []
    # its CPUs and memory are said too: without --cpus/--mem they are the share left free by running jobs
    return (f"GPU {','.join(map(str, made['gpus']))} of {made['node']} with {made['cpus']} CPUs and "
            f"{format_memory(made['mem_mb']) if made['mem_mb'] else 'no'} memory, {local_time(made['start'])} to "
            f"{local_time(made['end'])}, for {' and '.join(who)}")
