"""The experiment-tracking commands: `corral runs`, `run show|rename|note|tag|archive|delete`, `metrics`,
`compare`, `sync`, `import-tensorboard`, `import-wandb`, `artifacts list|get`.

Registered on the main group by `corral.cli.main`. Like the job commands, each parses its
options, makes its calls to the client and prints a table (or the API's JSON with --json);
the SDK's spool and TensorBoard readers are imported only by the commands that use them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from corral.cli.artifacts import artifacts
from corral.cli.connect import client_for
from corral.cli.terminal import escape, json_text, print_json
from corral.core.tracking.run_states import RUN_STATES
from corral.errors import Forbidden, NotFound
from corral.home import HomeLayout

if TYPE_CHECKING:
    from corral.client import Client


def _get_run(client: Client, ref: str) -> dict[str, Any]:
    """The run `ref` names; an unknown one is an error that names it."""
    try:
        return client.get_run(ref)
    except NotFound as exc:
        if ref in exc.message:
            raise
        raise NotFound(f"no run {ref} (give a run's id or uid; `corral runs` lists them)") from None


@click.command()
@click.option("-p", "--project", help="Only runs of this project.")
@click.option("--tag", help="Only runs with this tag.")
@click.option("-t", "--state", type=click.Choice(RUN_STATES, case_sensitive=False), help="Only runs in this state.")
@click.option("-j", "--job", "job", help="Only the runs of this corral job.")
@click.option("-w", "--where", "where", multiple=True, metavar="EXPR",
              help="Filter (repeatable, all must hold): config.KEY OP VALUE or metric.KEY[.last|.min|.max] OP NUMBER, "
                   "OP one of = != < <= > >=; e.g. config.lr=0.1, metric.loss.min<0.2.")
@click.option("-n", "--limit", type=click.IntRange(1), default=50, show_default=True)
@click.option("--archived", is_flag=True, help="The archived runs (hidden otherwise).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def runs(ctx: click.Context, project: str | None, tag: str | None, state: str | None, job: str | None,
         where: tuple[str, ...], limit: int, archived: bool, as_json: bool) -> None:
    """Tracked runs, newest first, with the last value of the metrics they share."""
    from corral.cli.format_runs import runs_table

    found = client_for(ctx).runs(project=project, tag=tag, state=state.lower() if state else None, job=job,
                              where=list(where), limit=limit, archived=archived)
    click.echo(json_text(found) if as_json else runs_table(found))


@click.group()
def run() -> None:
    """One tracked run."""


@run.command("show")
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="The run as JSON, with its artifacts under `artifacts`.")
@click.pass_context
def run_show(ctx: click.Context, run_ref: str, as_json: bool) -> None:
    """Everything about a run (its id or uid): where it ran, config, tags, metrics, checkpoints."""
    from corral.cli.format_runs import run_view

    client = client_for(ctx)
    found = _get_run(client, run_ref)
    try:
        artifacts: list[dict[str, Any]] | None = client.artifacts(found["id"])
        hidden = None
    except Forbidden as exc:  # anyone may read a run; its artifacts are its owner's and the admins'
        artifacts, hidden = None, _why_hidden(exc)
    if as_json:
        print_json({**found, "artifacts": artifacts, **({"artifacts_hidden": hidden} if hidden else {})})
    else:
        click.echo(run_view(found, artifacts or [], artifacts_hidden=hidden))


def _why_hidden(refused: Forbidden) -> str:
    """`only its owner (ada) or an admin may list them; you are bob`: the policy's reason, without the
    action the server names (the view shows which run it is)."""
    why = refused.message.split(": ", 1)[-1]
    return why.replace("may do this", "may list them")


@run.command("rename")
@click.argument("run_ref", metavar="RUN")
@click.argument("name")
@click.pass_context
def run_rename(ctx: click.Context, run_ref: str, name: str) -> None:
    """Give the run a new name."""
    changed = client_for(ctx).change_run(run_ref, name=name)
    click.echo(f"run {changed['id']} is now named {escape(changed['name'])}")


@run.command("note")
@click.argument("run_ref", metavar="RUN")
@click.argument("text", required=False)
@click.option("-f", "--file", "source", type=click.File("r"), help="Read the notes from a file ('-': stdin).")
@click.option("--clear", is_flag=True, help="Remove the notes.")
@click.pass_context
def run_note(ctx: click.Context, run_ref: str, text: str | None, source: Any, clear: bool) -> None:
    """Set the run's notes (Markdown; the dashboard shows them on the run's page)."""
    if sum((text is not None, source is not None, clear)) != 1:
        raise click.UsageError("give the notes as TEXT, with --file, or --clear")
    notes = None if clear else (source.read() if source is not None else text)
    changed = client_for(ctx).change_run(run_ref, notes=notes)
    click.echo(f"run {changed['id']}: notes {'cleared' if clear else 'saved'}")


@run.command("tag")
@click.argument("run_ref", metavar="RUN")
@click.argument("add", metavar="[TAG]...", nargs=-1)
@click.option("-r", "--remove", multiple=True, metavar="TAG", help="A tag to take off (repeatable).")
@click.pass_context
def run_tag(ctx: click.Context, run_ref: str, add: tuple[str, ...], remove: tuple[str, ...]) -> None:
    """Add tags, and take some off: `corral run tag 12 best --remove draft`."""
    if not add and not remove:
        raise click.UsageError("give tags to add, or --remove TAG")
    changed = client_for(ctx).tag_run(run_ref, add=list(add), remove=list(remove))
    click.echo(f"run {changed['id']}: tags {escape(','.join(changed['tags'])) or '(none)'}")


@run.command("archive")
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@click.option("--undo", is_flag=True, help="Bring the runs back into listings.")
@click.pass_context
def run_archive(ctx: click.Context, run_refs: tuple[str, ...], undo: bool) -> None:
    """Hide runs from listings, keeping everything (`corral runs --archived` shows them)."""
    client = client_for(ctx)
    for ref in run_refs:
        changed = client.change_run(ref, archived=not undo)
        click.echo(f"run {changed['id']} {'restored' if undo else 'archived'}")


@run.command("delete")
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask.")
@click.pass_context
def run_delete(ctx: click.Context, run_refs: tuple[str, ...], yes: bool) -> None:
    """Delete runs with their metrics and uploaded artifacts, for good (a job's checkpoint files stay
    where it wrote them). Asks first."""
    from corral.cli.format_runs import format_size

    client = client_for(ctx)
    found = [_get_run(client, ref) for ref in run_refs]
    if not yes:
        for r in found:
            stored = sum(a.get("size") or 0 for a in client.artifacts(r["id"]) if a.get("stored"))
            click.echo(f"  run {r['id']} {escape(r['project'])}/{escape(r['name'])}: {len(r.get('metrics') or {})} "
                       f"metrics, {format_size(stored)} of artifacts")
        if not click.confirm(f"Delete {len(found)} run(s) for good?", default=False, err=True):
            ctx.exit(1)
    for r in found:
        done = client.delete_run(r["id"])
        click.echo(f"run {r['id']} deleted ({format_size(done['blobs_removed_bytes'])} freed)")


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.argument("key")
@click.option("--max-points", type=click.IntRange(2, 100_000), default=2000, show_default=True,
              help="Downsample to at most this many points (each bucket's min and max are kept).")
@click.option("--start", type=click.IntRange(0), help="First step.")
@click.option("--end", type=click.IntRange(0), help="Last step.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--csv", "as_csv", is_flag=True, help="step,value,time lines (the summary line goes to stderr).")
@click.pass_context
def metrics(ctx: click.Context, run_ref: str, key: str, max_points: int, start: int | None, end: int | None,
            as_json: bool, as_csv: bool) -> None:
    """One metric of a run, step by step (downsampled past --max-points)."""
    from corral.cli.format_runs import series_csv, series_header, series_table

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    client = client_for(ctx)
    found = _get_run(client, run_ref)
    if key not in (found.get("metrics") or {}):
        logged = ", ".join(sorted(found.get("metrics") or {})) or "none"
        raise NotFound(f"run {run_ref} has no metric {key!r} (it has: {logged})")
    series = client.series(found["id"], key, max_points=max_points, start=start, end=end)
    if as_json:
        print_json(series)
    elif as_csv:
        click.echo(series_header(series), err=True)
        click.echo(series_csv(series))
    else:
        click.echo(series_header(series))
        click.echo(series_table(series))


@click.command()
@click.argument("run_refs", metavar="RUN RUN...", nargs=-1, required=True)
@click.option("--all", "all_config", is_flag=True, help="Show every config key, not only those that differ.")
@click.option("--goal", "goals", multiple=True, metavar="KEY=min|max",
              help="Which way a metric improves, where its name does not say (repeatable).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def compare(ctx: click.Context, run_refs: tuple[str, ...], all_config: bool, goals: tuple[str, ...], as_json: bool) -> None:
    """Runs side by side: config that differs, and each shared metric's last/min/max; `*` marks the best.

    A metric's direction comes from its name (loss, error: lower; accuracy, F1, reward: higher) or
    from --goal; one with neither (a learning rate) has no best."""
    from corral.cli.format_runs import compare_runs, compare_view
    from corral.core.tracking.metric_goals import parse_goals

    if len(run_refs) < 2:
        raise click.UsageError("give two runs or more to compare")
    declared = parse_goals(goals)
    client = client_for(ctx)
    found = [_get_run(client, ref) for ref in run_refs]
    comparison = compare_runs(found, all_config=all_config, goals=declared)
    click.echo(json_text(comparison) if as_json else compare_view(comparison, all_config=all_config))


@click.command()
@click.argument("directory", metavar="[DIR]", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync(ctx: click.Context, directory: str | None, as_json: bool) -> None:
    """Upload runs spooled offline (in DIR, default $CORRAL_SPOOL_DIR or <home>/spool); each exactly once."""
    from corral.cli.format_runs import sync_lines
    from corral.sdk.sync import sync_spool

    client = client_for(ctx)
    if directory is None and ctx.obj["home"] and not os.environ.get("CORRAL_SPOOL_DIR"):
        directory = HomeLayout(client.home).spool  # the SDK's default, for the home given with --home
    reports = [_as_dict(r) for r in sync_spool(directory, client=client)]
    if as_json:
        print_json(reports)
    elif reports:
        click.echo(sync_lines(reports))
    else:
        click.echo("nothing to sync")
    if any(r.get("error") for r in reports):
        ctx.exit(1)


def _as_dict(report: Any) -> dict[str, Any]:
    import dataclasses

    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        return dataclasses.asdict(report)
    if hasattr(report, "_asdict"):
        return dict(report._asdict())
    if isinstance(report, dict):
        return report
    return {name: getattr(report, name, None) for name in ("uid", "run_id", "batches", "points", "stored", "state",
                                                           "error")}


@click.command("import-tensorboard")
@click.argument("directory", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@click.option("-p", "--project", default="default", show_default=True, help="Project of the runs created.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def import_tensorboard(ctx: click.Context, directory: str, project: str, as_json: bool) -> None:
    """Make runs of the TensorBoard event files under DIR (one run a directory of event files): scalars as
    metrics, images, histograms and text as media, hparams as config. Importing again adds nothing twice."""
    from corral.cli.format_runs import imported_table
    from corral.sdk.tensorboard import import_tensorboard as import_directory

    created = import_directory(directory, client=client_for(ctx), project=project)
    if as_json:
        print_json(created)
    elif created:
        click.echo(imported_table(created))
    else:
        click.echo(f"no TensorBoard event files under {directory}")


@click.command("import-wandb")
@click.argument("paths", metavar="DIR...", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-p", "--project", help="Project of the runs created [default: each run's W&B project].")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def import_wandb(ctx: click.Context, paths: tuple[str, ...], project: str | None, as_json: bool) -> None:
    """Make runs of what W&B wrote offline under DIR... (WANDB_MODE=offline: wandb/offline-run-*/run-*.wandb):
    config, tags, history with its steps, summary. Importing again adds nothing twice. Needs the wandb
    package (pip install 'corral[wandb]')."""
    from corral.cli.format_runs import imported_table
    from corral.sdk.wandb_offline import import_wandb as import_paths

    created = import_paths(list(paths), client=client_for(ctx), project=project)
    if as_json:
        print_json(created)
    elif created:
        click.echo(imported_table(created))
    else:
        click.echo(f"no W&B run files (run-*.wandb) under {', '.join(paths)}")


COMMANDS = (runs, run, metrics, compare, sync, import_tensorboard, import_wandb, artifacts)
