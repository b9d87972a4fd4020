"""`corral plan`: when a job would start if submitted now, why, and what would start it sooner; nothing is submitted.

It takes `corral submit`'s options and sends the same body to the server's forecast
(POST /api/v1/forecast). The options are declared here again: `corral submit`'s live inside its
command in `corral.cli.main`, not as a list another command could take.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from corral.cli.connect import client_for
from corral.cli.terminal import escaped, print_json
from corral.errors import CorralError

_SUBMIT_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("-J", "--job-name", "name", help="Job name [default: the script's or program's name]."),
    click.option("-G", "--gpus", help="GPUs: a count, or TYPE:COUNT."),
    click.option("--gpus-per-node", "gpus_per_node", help="GPUs on each node of a multi-node job (with --nodes)."),
    click.option("-N", "--nodes", type=int, help="Nodes."),
    click.option("--gres", help="Slurm style GPU request: gpu:N or gpu:TYPE:N."),
    click.option("--gpu-type", help="GPU type, e.g. A100."),
    click.option("--gpu-mem", help="Minimum memory of each GPU, e.g. 40G."),
    click.option("-c", "--cpus-per-task", "--cpus", "cpus", type=int, help="CPUs [default: 1]."),
    click.option("--mem", help="Host memory, e.g. 16G."),
    click.option("--mem-per-cpu", help="Host memory per CPU."),
    click.option("--mem-per-gpu", help="Host memory per GPU."),
    click.option("-t", "--time", help="Time limit: minutes, HH:MM:SS, D-HH:MM:SS, 30m, 2h."),
    click.option("-o", "--output", "stdout", help="Stdout file pattern."),
    click.option("-e", "--error", "stderr", help="Stderr file pattern."),
    click.option("-D", "--chdir", "workdir", help="Working directory [default: the current one]."),
    click.option("--export", help="Environment to pass: ALL (default), NONE, or NAMES / ALL,VAR=value."),
    click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Set a variable (repeatable)."),
    click.option("--label", "label_pairs", multiple=True, metavar="KEY=VALUE", help="Attach a label (repeatable)."),
    click.option("--nice", type=int, help="Lower the job's priority by this much."),
    click.option("-p", "--partition", help="Partition [default: the configured default]."),
    click.option("-q", "--qos", help="Quality of service [default: the configured default]."),
    click.option("-A", "--account", help="Account to charge [default: the first you are in]."),
    click.option("-H", "--hold", is_flag=True, default=None, help="Submitted held (the forecast: if released now)."),
    click.option("-d", "--dependency", help="Start after other jobs: afterok:ID, afterany:ID, singleton, ..."),
    click.option("-a", "--array", help="A job array: 0-99, 1,3,5-9, 0-20:4, %4."),
    click.option("--signal", help="Warn the job before its time limit: SIG@SECONDS."),
    click.option("--preemptible", is_flag=True, default=None, help="Let jobs of higher priority preempt it."),
    click.option("--kill-on-invalid-dep", "kill_on_invalid_dep", type=click.Choice(["yes", "no"])),
    click.option("--wrap", help="Run this shell command line, as a one-line batch script (like sbatch --wrap)."),
    click.option("--condor", "condor", is_flag=True, help="SCRIPT is an HTCondor submit description file."),
]


class _PlanCommand(click.Command):
    """Everything after `--` is the job's command, as for `corral submit`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["corral.command"] = args[cut + 1:]
            args = args[:cut]
        return super().parse_args(ctx, args)


def _with_submit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_SUBMIT_OPTIONS):
        command = option(command)
    return command


@click.command(cls=_PlanCommand, context_settings={"allow_interspersed_args": False})
@_with_submit_options
@click.option("--json", "as_json", is_flag=True, help="Print the forecast as JSON.")
@click.argument("script_and_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def plan(ctx: click.Context, script_and_args: tuple[str, ...], env_pairs: tuple[str, ...],
         label_pairs: tuple[str, ...], wrap: str | None, condor: bool, as_json: bool, **fields: Any) -> None:
    """When a job would start if submitted now, what holds it back, and whether a shorter --time or fewer
    GPUs would start it sooner. Takes `corral submit`'s options; submits nothing."""
    body = request_body(ctx, script_and_args, env_pairs, label_pairs, wrap, condor, fields)
    answer = client_for(ctx).forecast(**body)
    if as_json:
        print_json(answer)
        return
    for warning in answer.get("warnings", []):
        click.echo(f"corral: warning: {warning}", err=True)
    click.echo(forecast_text(answer))


def request_body(ctx: click.Context, script_and_args: tuple[str, ...], env_pairs: tuple[str, ...],
                 label_pairs: tuple[str, ...], wrap: str | None, condor: bool, fields: dict[str, Any]) -> dict[str, Any]:
    """The body `corral submit` would send for these options (its logic, repeated: see the module's docstring)."""
    command = ctx.meta.get("corral.command")
    body: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if wrap is not None:
        if command is not None or script_and_args:
            raise click.UsageError("give --wrap, a script, or a command after --, not two of them")
        body["script"] = f"#!/bin/sh\n{wrap}\n"
        body["script_name"] = "wrap"
    elif command is not None:
        if script_and_args:
            raise click.UsageError("give a script or a command after --, not both")
        if not command:
            raise click.UsageError("nothing after --: give the command to run, e.g. -- python train.py")
        body["command"] = command
    elif script_and_args:
        path = script_and_args[0]
        try:
            with open(path) as f:
                body["script"] = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not a text file"
            raise CorralError(f"cannot read script {path}: {reason}") from None
        if condor:
            from corral.cli.condor import resolve_items

            body["condor"] = resolve_items(body.pop("script"), os.getcwd())
        else:
            body["script_name"] = os.path.basename(path)
            body["script_args"] = list(script_and_args[1:])
    elif not sys.stdin.isatty():
        body["script"] = sys.stdin.read()
    else:
        raise click.UsageError("give a batch script, a command after --, or --wrap")
    body["submit_dir"] = os.getcwd()
    body["environment"] = dict(os.environ)
    mask = os.umask(0o022)
    os.umask(mask)
    body["umask"] = f"{mask:04o}"
    if env_pairs:
        body["env"] = _key_values(env_pairs, "--env")
    if label_pairs:
        body["labels"] = _key_values(label_pairs, "--label")
    return body


def _key_values(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        out[key] = value
    return out


@escaped
def forecast_text(answer: dict[str, Any]) -> str:
    """The forecast as a person reads it: when, where, why, who holds what it needs, and what would be sooner."""
    from corral.core.units import format_duration

    lines = []
    limit = format_duration(answer.get("time_limit_s"))
    where = _where(answer.get("node"), answer.get("gpus") or [])
    if answer["start"] is None:
        lines.append(f"Job {answer['job_id']} would not start as things stand: {answer['reason']}.")
    elif not answer["start_in_s"]:
        lines.append(f"Job {answer['job_id']} would start now{where}, partition {answer['partition']}, "
                     f"time limit {limit}.")
    else:
        lines.append(f"Job {answer['job_id']} would start at {_when(answer['start'], answer['start_in_s'])}{where}, "
                     f"partition {answer['partition']}, time limit {limit}.")
        lines.append(f"Why: {answer['reason']}.")
    if answer.get("ahead"):
        lines.append(f"Ahead of it in the queue: {answer['ahead']} pending job{'s' if answer['ahead'] > 1 else ''}.")
    blockers = answer.get("blockers") or []
    if blockers:
        lines.append("Held by:")
        rows = [("JOB", "USER", "KIND", "NODE", "GPUS", "FROM", "UNTIL")]
        for b in blockers:
            start = b["start"] if b["kind"] == "reserved" else None
            until = "no time limit" if b["end"] is None and b["kind"] != "waiting" else (
                _when(b["end"], b["ends_in_s"]) if b["end"] else "-")
            rows.append((str(b["job_id"]), b["user"], b["kind"], b.get("node") or "-",
                         ",".join(map(str, b.get("gpus") or [])) or "-", _local(start) if start else "-", until))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    alternatives = answer.get("alternatives") or []
    if alternatives:
        lines.append("Sooner:")
        width = max(len(a["option"]) for a in alternatives)
        for a in alternatives:
            when = "starts now" if not a["start_in_s"] else f"starts at {_when(a['start'], a['start_in_s'])}"
            lines.append(f"  {a['option'].ljust(width)}  {when}{_where(a.get('node'), a.get('gpu_ids') or [])}")
    for note in answer.get("notes") or []:
        lines.append(f"Note: {note}")
    if answer.get("preempts"):
        lines.append(f"Preempts: {', '.join(map(str, answer['preempts']))}")
    return "\n".join(lines)


def _where(node: str | None, gpus: list[int]) -> str:
    if not node:
        return ""
    return f" on {node}" + (f" (GPUs {','.join(map(str, gpus))})" if gpus else "")


def _local(text: str) -> str:
    from corral.cli.format import local_time

    return local_time(text)


def _when(text: str, in_s: float | None) -> str:
    from corral.core.units import format_duration

    return f"{_local(text)} (in {format_duration(in_s)})" if in_s is not None else _local(text)
