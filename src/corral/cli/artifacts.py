"""`corral artifacts list RUN` and `corral artifacts get RUN [PATH] [-o DEST]`: a run's artifacts
from the server's store (or, for checkpoints, from where the job wrote them)."""

from __future__ import annotations

import os

import click

from corral.cli.connect import client_for
from corral.cli.terminal import print_json
from corral.errors import InvalidRequest, NotFound


@click.group()
def artifacts() -> None:
    """A run's artifacts: list them, download them."""


@artifacts.command("list")
@click.argument("run_ref", metavar="RUN")
@click.option("--type", "type_", help="Only artifacts of this type (model, checkpoint, ...).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_artifacts(ctx: click.Context, run_ref: str, type_: str | None, as_json: bool) -> None:
    """The run's artifacts: uploaded ones (in the store) and registered ones (checkpoints)."""
    from corral.cli.format_runs import artifacts_table

    found = client_for(ctx).artifacts(run_ref, type=type_)
    if as_json:
        print_json(found)
    elif found:
        click.echo(artifacts_table(found))
    else:
        click.echo(f"run {run_ref} has no artifacts")


@artifacts.command("get")
@click.argument("run_ref", metavar="RUN")
@click.argument("path", required=False)
@click.option("-o", "--output", "dest", type=click.Path(),
              help="Where to write, as cp -r does: a new name becomes the file (or the directory's copy), an "
                   "existing directory receives it under its own name (default: the artifact's name, in .).")
@click.pass_context
def get_artifact(ctx: click.Context, run_ref: str, path: str | None, dest: str | None) -> None:
    """Download the artifact PATH of RUN, or those under the directory PATH, or all of them.

    `get 8 model -o ./dl` writes ./dl/weights.bin where ./dl is new, and ./dl/model/weights.bin where
    ./dl is a directory already (cp -r's rule; `mlflow artifacts download` always writes the latter)."""
    client = client_for(ctx)
    listed = client.artifacts(run_ref)
    if path is None:
        chosen = listed
    else:
        prefix = path.rstrip("/") + "/"
        chosen = [a for a in listed if a["path"] == path] or [a for a in listed if a["path"].startswith(prefix)]
    if not chosen:
        raise NotFound(f"run {run_ref} has no artifact {path!r}; `corral artifacts list {run_ref}` lists them"
                       if path else f"run {run_ref} has no artifacts")
    single = len(chosen) == 1 and path is not None and chosen[0]["path"] == path
    root = os.path.abspath(dest or ".")
    into_existing = dest is None or os.path.isdir(dest)  # decided once: the first file written makes `dest`
    for artifact in chosen:
        name = artifact["path"]
        relative = os.path.basename(name) if os.path.isabs(name) else name
        target = _target(relative, path, dest, single, into_existing)
        if os.path.isdir(target):
            target = os.path.join(target, os.path.basename(relative))
        if not single and os.path.commonpath([root, os.path.abspath(target)]) != root:
            raise InvalidRequest("path", f"{name!r} would be written outside {dest or '.'}")
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        partial = f"{target}.part"
        with open(partial, "wb") as f:
            written = client.download_artifact(run_ref, name, f)
        os.replace(partial, target)
        click.echo(f"{target}  {written:,} bytes")


def _target(relative: str, path: str | None, dest: str | None, single: bool, into_existing: bool) -> str:
    """Where one artifact goes. One file: `dest`, else its name in `.`. A directory PATH's files: under
    `dest` by their names inside PATH when `dest` is new, under `dest/<PATH's last name>/` when `dest` is a
    directory already or not given (cp -r's rule). All of a run's: under `dest` (or `.`) by their names."""
    if single:
        return dest or os.path.basename(relative)
    if path is None:
        return os.path.join(dest or ".", relative)
    directory = path.rstrip("/")
    inside = relative[len(directory) + 1:] if relative.startswith(directory + "/") else relative
    if dest is not None and not into_existing:
        return os.path.join(dest, inside)
    return os.path.join(dest or ".", os.path.basename(directory), inside)


COMMANDS = (artifacts,)
