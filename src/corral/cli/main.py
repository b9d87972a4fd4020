"""`corral`: the command line, shaped after Slurm's (sbatch, squeue, scontrol show job, scancel, sacct).

Each command parses its options and makes one call to the client or the server;
heavy modules are imported inside the commands that need them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from corral.cli.connect import client_for
from corral.cli.mcp import mcp
from corral.cli.monitoring import MONITORING_COMMANDS
from corral.cli.plan import plan
from corral.cli.sizing import recommend
from corral.cli.terminal import escape, json_text, print_json
from corral.cli.tokens import token
from corral.cli.tracking import COMMANDS as TRACKING_COMMANDS
from corral.errors import CorralError


class CorralGroup(click.Group):
    """Turns corral's errors into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CorralError as exc:
            problems = getattr(exc, "problems", ())
            if len(problems) > 1:  # each on a line of its own; escape() would show the message's newlines as \n
                click.echo(f"corral: error: {escape(exc.message.partition(chr(10))[0])}", err=True)
                for problem in problems:
                    click.echo(f"  {escape(problem)}", err=True)
            else:
                click.echo(f"corral: error: {escape(exc.message)}", err=True)
            ctx.exit(1)


@click.group(cls=CorralGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="CORRAL_HOME", help="The server's state directory [default: ~/.corral].")
@click.option("--url", envvar="CORRAL_URL", help="Talk to the server at this URL instead of the home's.")
@click.version_option(package_name="corral")
@click.pass_context
def cli(ctx: click.Context, home: str | None, url: str | None) -> None:
    """Run GPU training jobs: submit, queue, run on the right GPUs, watch, stop."""
    ctx.obj = {"home": home, "url": url}


def _key_values(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        out[key] = value
    return out


# -- the server ----------------------------------------------------------------------------------


@cli.command()
@click.option("--home", "up_home", help="State directory (overrides the global --home).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port; 0 picks a free one.")
@click.option("--db", help="Database URL, e.g. postgresql://user@host/db [default: SQLite in the home].")
@click.option("--gpus", type=click.IntRange(0, 1024), help="Declare N GPUs instead of detecting them with NVML.")
@click.option("--gpu-type", help="Type of the declared GPUs, e.g. A100; mixed: T4:2,A100:2 (in index order).")
@click.option("--gpu-mem", help="Memory of each declared GPU, e.g. 80G.")
@click.option("--cpus", type=click.IntRange(1), help="CPUs to schedule [default: those this process may use].")
@click.option("--mem", help="Memory to schedule, e.g. 256G [default: the machine's].")
@click.option("--kill-grace", type=click.FloatRange(0, 3600), default=10.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL on cancel and time limit.")
@click.option("--backend", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="local: run jobs on this machine; slurm: submit every job to the Slurm cluster with sbatch.")
@click.option("--partition", "slurm_partition", help="With --backend slurm: the partition jobs go to by default.")
@click.option("--account", "slurm_account", help="With --backend slurm: the account jobs are charged to.")
@click.option("--sample-interval", "sample_interval_s", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds between samples of each running job's GPUs, CPU, memory and I/O.")
@click.option("--cgroups", type=click.Choice(["auto", "v1", "v2", "off"]), default="auto", show_default=True,
              help="Hold each job in a cgroup of its own (auto: v2 or v1 where this user may; off: process groups).")
@click.option("--detach", is_flag=True, help="Run in the background; logs go to <home>/server.log.")
@click.pass_context
def up(ctx: click.Context, up_home: str | None, detach: bool, **options: Any) -> None:
    """Start the server (API, scheduler and executor) for a home."""
    from corral.home import resolve_home

    home = resolve_home(up_home or ctx.obj["home"])
    if detach:
        from corral.cli.daemon import start_detached

        info = start_detached(home, _up_args(ctx, home, options))
        click.echo(f"corral server running at {info['url']} (pid {info['pid']}, home {home})")
        return
    from corral.compose.server import ServerOptions, load_config, serve
    from corral.core.resources import DeclaredInventory

    explicit = {
        name for name in options
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        or ctx.get_parameter_source(name) is click.core.ParameterSource.ENVIRONMENT
    }
    inventory = DeclaredInventory(
        gpus=options["gpus"], gpu_type=options["gpu_type"], gpu_mem=options["gpu_mem"], cpus=options["cpus"],
        mem=options["mem"],
    )
    server_options = ServerOptions(
        home=home, host=options["host"], port=options["port"], db=options["db"], kill_grace_s=options["kill_grace"],
        inventory=inventory, backend=options["backend"], slurm_partition=options["slurm_partition"],
        slurm_account=options["slurm_account"], sample_interval_s=options["sample_interval_s"],
        cgroups=options["cgroups"],
    )
    serve(load_config(server_options, {"kill_grace_s" if n == "kill_grace" else n for n in explicit}))


def _up_args(ctx: click.Context, home: str, options: dict[str, Any]) -> list[str]:
    args = ["up", "--home", home]
    for name, value in options.items():
        source = ctx.get_parameter_source(name)
        if value is None or source is not click.core.ParameterSource.COMMANDLINE:
            continue
        flag = {"slurm_partition": "partition", "slurm_account": "account",
                "sample_interval_s": "sample-interval"}.get(name, name)
        args += [f"--{flag.replace('_', '-')}", str(value)]
    return args


@cli.command()
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for it to exit.")
@click.pass_context
def down(ctx: click.Context, timeout: float) -> None:
    """Stop the server. Running jobs keep running and are picked up by the next `corral up`."""
    from corral.cli.daemon import stop_server
    from corral.home import resolve_home

    home = resolve_home(ctx.obj["home"])
    pid = stop_server(home, timeout)
    click.echo(f"corral server stopped (pid {pid})" if pid else f"no corral server was running for home {home}")


# -- jobs ----------------------------------------------------------------------------------------


class SubmitCommand(click.Command):
    """Everything after `--` is the job's command, untouched by option parsing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["corral.command"] = args[cut + 1:]
            args = args[:cut]
        return super().parse_args(ctx, args)


@cli.command(cls=SubmitCommand, context_settings={"allow_interspersed_args": False})
@click.option("-J", "--job-name", "name", help="Job name [default: the script's or program's name].")
@click.option("-G", "--gpus", help="GPUs: a count, or TYPE:COUNT.")
@click.option("--gpus-per-node", "gpus_per_node", help="GPUs on each node of a multi-node job (with --nodes).")
@click.option("-N", "--nodes", type=int, help="Nodes (more than 1: srun torchrun with a rendezvous; Slurm backend).")
@click.option("--gres", help="Slurm style GPU request: gpu:N or gpu:TYPE:N.")
@click.option("--gpu-type", help="GPU type, e.g. A100.")
@click.option("--gpu-mem", help="Minimum memory of each GPU, e.g. 40G.")
@click.option("-c", "--cpus-per-task", "--cpus", "cpus", type=int, help="CPUs [default: 1].")
@click.option("--mem", help="Host memory, e.g. 16G; the job is killed past it [default: no limit].")
@click.option("--mem-per-cpu", help="Host memory per CPU.")
@click.option("--mem-per-gpu", help="Host memory per GPU.")
@click.option("-t", "--time", help="Time limit: minutes, HH:MM:SS, D-HH:MM:SS, 30m, 2h.")
@click.option("-o", "--output", "stdout", help="Stdout file pattern (%j id, %x name, %A/%a array job/task).")
@click.option("-e", "--error", "stderr", help="Stderr file pattern [default: with --output, the same file].")
@click.option("-D", "--chdir", "workdir", help="Working directory [default: the current one].")
@click.option("--export", help="Environment to pass: ALL (default), NONE, or NAMES / ALL,VAR=value.")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Set a variable (repeatable).")
@click.option("--label", "label_pairs", multiple=True, metavar="KEY=VALUE", help="Attach a label (repeatable).")
@click.option("--nice", type=int, help="Lower the job's priority by this much.")
@click.option("-p", "--partition", help="Partition [default: the configured default].")
@click.option("-q", "--qos", help="Quality of service [default: the configured default].")
@click.option("-A", "--account", help="Account to charge [default: the first you are in]; its coordinators may "
              "manage the job.")
@click.option("-H", "--hold", is_flag=True, default=None, help="Submit it held: it waits until `corral release`.")
@click.option("-d", "--dependency", help="Start after other jobs: afterok:ID[:ID], afterany:ID, after:ID, afternotok:ID, "
              "singleton; join with , (all) or ? (any).")
@click.option("-a", "--array", help="A job array: 0-99, 1,3,5-9, 0-20:4; %4 runs at most 4 tasks at once.")
@click.option("--signal", help="Warn the job before its time limit (and on preemption): SIG@SECONDS, e.g. USR1@90.")
@click.option("--preemptible", is_flag=True, default=None, help="Let jobs of higher priority preempt (and requeue) it.")
@click.option("--kill-on-invalid-dep", "kill_on_invalid_dep", type=click.Choice(["yes", "no"]),
              help="Cancel the job if its dependency can never be satisfied.")
@click.option("--wrap", help="Run this shell command line, as a one-line batch script (like sbatch --wrap).")
@click.option("--condor", "condor", is_flag=True, help="SCRIPT is an HTCondor submit description file.")
@click.option("--parsable", is_flag=True, help="Print only the job id.")
@click.option("--json", "as_json", is_flag=True, help="Print the submitted job as JSON.")
@click.argument("script_and_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def submit(ctx: click.Context, script_and_args: tuple[str, ...], env_pairs: tuple[str, ...],
           label_pairs: tuple[str, ...], wrap: str | None, condor: bool, parsable: bool, as_json: bool,
           **fields: Any) -> None:
    """Submit a job: `submit [options] SCRIPT [ARGS]`, `submit [options] -- CMD [ARGS]`, or `--wrap "CMD"`."""
    command = ctx.meta.get("corral.command")
    body: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if wrap is not None:
        if command is not None or script_and_args:
            raise click.UsageError("give --wrap, a script, or a command after --, not two of them")
        # as sbatch does: a one-line batch script, so it sees SLURM_JOB_ID, SLURM_ARRAY_TASK_ID, ...
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
            if len(script_and_args) > 1:
                raise click.UsageError("an HTCondor submit file takes no arguments here; use its `arguments`")
            from corral.cli.condor import resolve_items

            body["condor"] = resolve_items(body.pop("script"), os.getcwd())
        else:
            body["script_name"] = os.path.basename(path)
            body["script_args"] = list(script_and_args[1:])
    elif not sys.stdin.isatty():
        body["script"] = sys.stdin.read()
    else:
        raise click.UsageError("give a batch script, a command after --, or --wrap")
    body["submit_dir"] = os.getcwd()  # the default working directory; a script's --chdir may override it
    body["environment"] = dict(os.environ)
    mask = os.umask(0o022)
    os.umask(mask)
    body["umask"] = f"{mask:04o}"  # the job's files get the submitter's permissions, as in Slurm
    if env_pairs:
        body["env"] = _key_values(env_pairs, "--env")
    if label_pairs:
        body["labels"] = _key_values(label_pairs, "--label")
    job = client_for(ctx).submit(**body)
    for warning in job.get("warnings", []):
        click.echo(f"corral: warning: {escape(warning)}", err=True)
    if condor and job.get("user_log"):
        from corral.cli.condor import write_submitted

        problem = write_submitted(job)
        if problem:
            click.echo(f"corral: warning: {escape(problem)}", err=True)
    if as_json:
        print_json(job)
    elif parsable:
        click.echo(job["id"])
    else:
        click.echo(f"Submitted batch job {job['id']}")


@cli.command()
@click.option("-t", "--state", "states", multiple=True, help="Only jobs in this state (repeatable).")
@click.option("--start", "starts", is_flag=True, help="Pending jobs with their estimated start (like squeue --start).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def queue(ctx: click.Context, states: tuple[str, ...], starts: bool, as_json: bool) -> None:
    """Pending and running jobs, with the reason each pending one waits."""
    from corral.cli.format import queue_table, start_table

    wanted = ["PENDING"] if starts else [s.upper() for s in states]
    jobs = client_for(ctx).queue(states=wanted)
    if as_json:
        print_json(jobs)
    else:
        click.echo(start_table(jobs) if starts else queue_table(jobs))


@cli.command()
@click.argument("slurm_job_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def attach(ctx: click.Context, slurm_job_id: str, as_json: bool) -> None:
    """Track a job submitted with plain sbatch: its state, logs and runs (Slurm backend)."""
    job = client_for(ctx).attach(slurm_job_id)
    click.echo(json_text(job) if as_json else f"Slurm job {slurm_job_id} is corral job {job['id']}")


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Everything about one job."""
    from corral.cli.format import job_view

    job = client_for(ctx).get(job_id)
    click.echo(json_text(job) if as_json else job_view(job))


@cli.command()
@click.argument("job_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def cancel(ctx: click.Context, job_ids: tuple[str, ...], as_json: bool) -> None:
    """Cancel jobs: pending ones leave the queue, running ones get SIGTERM, a grace period, then SIGKILL."""
    _each_job(ctx, job_ids, "cancel", as_json)


def _each_job(ctx: click.Context, job_ids: tuple[str, ...], action: str, as_json: bool) -> None:
    client = client_for(ctx)
    results, failed = [], False
    for job_id in job_ids:
        try:
            job = getattr(client, action)(job_id)
        except CorralError as exc:
            click.echo(f"corral: error: {escape(exc.message)}", err=True)
            failed = True
            continue
        results.append(job)
        if not as_json:
            click.echo(f"job {job_id}: {job['state']}" + (f" ({escape(job['reason'])})" if job.get("reason") else ""))
    if as_json:
        print_json(results)
    if failed:
        ctx.exit(1)


@cli.command()
@click.argument("job_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def hold(ctx: click.Context, job_ids: tuple[str, ...], as_json: bool) -> None:
    """Keep pending jobs from starting (reason JobHeldUser) until released."""
    _each_job(ctx, job_ids, "hold", as_json)


@cli.command()
@click.argument("job_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def release(ctx: click.Context, job_ids: tuple[str, ...], as_json: bool) -> None:
    """Let held jobs run again."""
    _each_job(ctx, job_ids, "release", as_json)


@cli.command()
@click.argument("job_id")
@click.option("-t", "--time", help="New time limit.")
@click.option("--nice", type=int, help="New nice value.")
@click.option("-p", "--partition", help="Move to this partition.")
@click.option("-q", "--qos", help="New quality of service.")
@click.option("-G", "--gpus", help="GPUs: a count, or TYPE:COUNT.")
@click.option("-c", "--cpus-per-task", "--cpus", "cpus", type=int, help="CPUs.")
@click.option("--mem", help="Host memory, e.g. 16G.")
@click.option("-J", "--job-name", "name", help="New name.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def update(ctx: click.Context, job_id: str, as_json: bool, **changes: Any) -> None:
    """Change a pending job's time limit, nice, partition, QoS or resources (like scontrol update)."""
    job = client_for(ctx).update(job_id, **changes)
    click.echo(json_text(job) if as_json else f"job {job['ref']} updated")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def priority(ctx: click.Context, as_json: bool) -> None:
    """Pending jobs' priorities and the factors they are made of (like sprio)."""
    from corral.cli.format import priority_table

    rows = client_for(ctx).priorities()
    click.echo(json_text(rows) if as_json else priority_table(rows))


@cli.command()
@click.argument("job_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing as the job writes, until it ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("-n", "--tail", type=int, help="Only the last N lines.")
@click.pass_context
def logs(ctx: click.Context, job_id: str, follow: bool, use_stderr: bool, tail: int | None) -> None:
    """A job's output."""
    client = client_for(ctx)
    stream = "stderr" if use_stderr else "stdout"
    out = sys.stdout.buffer
    if tail is not None:
        data, offset, state = client.logs(job_id, stream=stream, tail=tail)
        out.write(data)
        out.flush()
        if not follow:
            return
    else:
        offset = 0
    import time

    from corral.client import TERMINAL

    while True:
        data, offset, state = client.logs(job_id, stream=stream, offset=offset)
        if data:
            out.write(data)
            out.flush()
            continue
        if not follow or state in TERMINAL:
            return
        time.sleep(0.25)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def nodes(ctx: click.Context, as_json: bool) -> None:
    """Each node's GPUs: type, memory, and which job holds each."""
    from corral.cli.format import nodes_table

    data = client_for(ctx).nodes()
    click.echo(json_text(data) if as_json else nodes_table(data))


@cli.command()
@click.option("-t", "--state", "states", multiple=True, help="Only jobs that ended in this state (repeatable).")
@click.option("-n", "--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """Finished jobs, newest first, with exit codes (like sacct)."""
    from corral.cli.format import history_table

    jobs = client_for(ctx).history(states=[s.upper() for s in states], limit=limit)
    click.echo(json_text(jobs) if as_json else history_table(jobs))


@cli.command()
@click.argument("job_id")
@click.option("--timeout", type=float, help="Give up after this many seconds (exit status 124).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def wait(ctx: click.Context, job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for a job to end; exit with its exit code."""
    from corral.client import TERMINAL

    job = client_for(ctx).wait(job_id, timeout=timeout)
    if as_json:
        print_json(job)
    if job["state"] not in TERMINAL:
        click.echo(f"corral: job {job_id} is still {job['state']} after {timeout} s", err=True)
        ctx.exit(124)
    if not as_json:
        click.echo(f"job {job_id} {job['state']} (exit code {job['exit_code']})", err=True)
    ctx.exit(exit_status(job))


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def whoami(ctx: click.Context, as_json: bool) -> None:
    """Who the server takes you for: your user, what you may do, and how it knows."""
    me = client_for(ctx).whoami()
    if as_json:
        print_json(me)
        return
    how = {"socket": "the Unix socket's peer credentials", "local": "the kernel's socket table (TCP from this machine)",
           "token": "an API token", "session": "a dashboard session"}.get(me["via"], me["via"])
    # the scope says it all (`admin` is the only scope that makes one an admin); the next line, what it allows
    click.echo(f"{me['user']} ({me['scope']}), known by {how}")
    if me["scope"] in _SCOPE_MEANS:
        click.echo(f"you may {_SCOPE_MEANS[me['scope']]}")
    if me.get("personal_queue_of"):
        click.echo(f"this server is {me['personal_queue_of']}'s personal queue")


_SCOPE_MEANS = {"read": "see the queue, jobs, runs and metrics, and change nothing",
                "submit": "submit jobs, log runs, and manage your own jobs and alerts",
                "admin": "manage every user's jobs, tokens and alert channels"}


@cli.command(name="slurm-path")
@click.pass_context
def slurm_path(ctx: click.Context) -> None:
    """Print the directory of corral's Slurm commands (sbatch, squeue, scancel, sacct, ...).

    `export PATH="$(corral slurm-path):$PATH"` switches them on: Slurm scripts and tools then submit to
    corral. Nothing else on PATH changes, so a real Slurm is never shadowed unless you ask."""
    from corral.cli.slurm.install import slurm_bin_dir

    backend = _server_backend(ctx)
    if backend is not None and backend != "local":
        raise CorralError(f"this corral server runs its jobs on {backend}: use {backend}'s own commands, "
                          "which corral tracks (corral attach), rather than corral's")
    click.echo(slurm_bin_dir())


def _server_backend(ctx: click.Context) -> str | None:
    """The server's backend, or None when no server answers (the commands find one when they run)."""
    try:
        return str(client_for(ctx, timeout=5).health().get("backend"))
    except CorralError:
        return None


def exit_status(job: dict[str, Any]) -> int:
    if job["exit_code"] is not None:
        return min(int(job["exit_code"]), 255)
    return 0 if job["state"] == "COMPLETED" else 1


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="corral")


for _command in (*TRACKING_COMMANDS, *MONITORING_COMMANDS, recommend, mcp, token, plan):
    cli.add_command(_command)
