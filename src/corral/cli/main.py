"""`corral`: the command line, shaped after Slurm's (sbatch, squeue, scontrol show job, scancel, sacct).

The click group of every command. The quick ones (submit, queue, show, cancel, hold, release, logs) are
corral.cli.jobs': the `corral` program (corral.cli.entry) runs them without loading this module, and they
appear here as `QuickCommand`s, for `corral --help`, their own help and callers of the group. Each other
command parses its options and makes one call to the client or the server; heavy modules are imported
inside the commands that need them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from corral.cli.connect import client_for, take_server_options
from corral.cli.draining import drain, resume
from corral.cli.reservations import reservation
from corral.cli.jobs import COMMANDS as QUICK_COMMANDS
from corral.cli.launch import COMMANDS as LAUNCH_COMMANDS
from corral.cli.launch import run_launch
from corral.cli.mcp import mcp
from corral.cli.monitoring import MONITORING_COMMANDS
from corral.cli.options import CHOICE, FLAG, INT, Command, HelpRequested, Opt
from corral.cli.sizing import recommend
from corral.cli.terminal import json_text, print_error, print_json
from corral.cli.tokens import token
from corral.cli.tracking import COMMANDS as TRACKING_COMMANDS
from corral.errors import CorralError


class CorralGroup(click.Group):
    """Turns corral's errors into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CorralError as exc:
            print_error(exc)
            ctx.exit(1)


@click.group(cls=CorralGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="CORRAL_HOME", help="The server's state directory [default: ~/.corral].")
@click.option("--url", envvar="CORRAL_URL", help="Talk to the server at this URL instead of the home's.")
@click.version_option(package_name="corral")
@click.pass_context
def cli(ctx: click.Context, home: str | None, url: str | None) -> None:
    """Run GPU training jobs: submit, queue, run on the right GPUs, watch, stop."""
    ctx.obj = {"home": home, "url": url}


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

        if options["backend"] == "local":
            _warn_if_closed_to_others()  # here, on the terminal; the server says it again in its log
        info = start_detached(home, _up_args(ctx, home, options))
        click.echo(f"corral server running at {info['url']} (pid {info['pid']}, home {home})")
        return
    from corral.compose.config import ServerOptions, load_config
    from corral.compose.serve import serve
    from corral.core.scheduling.resources import DeclaredInventory

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
        cgroups=options["cgroups"], slurm_commands=_slurm_commands(shared=options["backend"] == "local"),
    )
    serve(load_config(server_options, {"kill_grace_s" if n == "kill_grace" else n for n in explicit}))


def _slurm_commands(shared: bool) -> str | None:
    """Where corral's Slurm commands are, for jobs to find `srun` there first; None where they cannot be
    written (the server runs without them: a job's `srun` is whatever its PATH finds). `shared`: jobs may run
    as other users (the local backend; as root, `_warn_if_closed_to_others`)."""
    from corral.cli.slurm.install import slurm_bin_dir

    try:
        directory = slurm_bin_dir()
    except OSError as exc:
        click.echo(f"corral: warning: jobs get no corral srun on their PATH: {exc}", err=True)
        return None
    if shared:
        _warn_if_closed_to_others()
    return directory


SHARED_INSTALL = ("install corral where every account can read it, from a Python every account may run: "
                  "python3 -m venv /opt/corral && /opt/corral/bin/pip install /path/to/corral, then run "
                  "/opt/corral/bin/corral up (README: Running corral as a shared service)")


def _warn_if_closed_to_others() -> None:
    """As root (a shared service), say so when the other accounts cannot run this installation: their jobs'
    srun and scontrol (corral's, first on their PATH) and `import corral` would fail."""
    import os

    from corral.cli.slurm.install import closed_to_others

    closed = closed_to_others() if os.geteuid() == 0 else None
    if closed is not None:
        try:
            mode = f" (mode {os.stat(closed).st_mode & 0o777:o})"
        except OSError:
            mode = ""
        click.echo(f"corral: warning: other users' jobs cannot run corral's srun and scontrol, nor import corral "
                   f"from it: {closed}{mode} is closed to them; {SHARED_INSTALL}", err=True)


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


class QuickCommand(click.Command):
    """A command of corral.cli.jobs on this group: its options are declared there and read there (the
    `corral` program runs it without click, through corral.cli.entry); click writes its help, from the
    same declarations, and runs it for callers of the group itself (CliRunner)."""

    def __init__(self, spec: Command, runner: Callable[..., int] | None = None) -> None:
        params: list[click.Parameter] = [_click_option(option) for option in spec.options]
        if spec.operand:
            params.append(click.Argument([spec.operand], nargs=-1 if spec.many else 1, required=spec.required))
        super().__init__(spec.name, params=params, help=spec.help)
        self.spec = spec
        self.runner = runner

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["corral.argv"] = list(args)
        return []

    def invoke(self, ctx: click.Context) -> Any:
        from corral.cli.jobs import run

        try:
            status = (self.runner or run)(self.spec, ctx.meta["corral.argv"], ctx.obj["home"], ctx.obj["url"])
        except HelpRequested:
            click.echo(ctx.get_help())
            status = 0
        ctx.exit(status)


def _click_option(option: Opt) -> click.Option:
    """The click declaration of an option, for the help click writes."""
    settings: dict[str, Any] = {"help": option.help or None, "multiple": option.many}
    if option.kind == FLAG:
        settings.update(is_flag=True, default=option.default)
    elif option.kind == INT:
        settings["type"] = int
    elif option.kind == CHOICE:
        settings["type"] = click.Choice(list(option.choices))
    if option.metavar:
        settings["metavar"] = option.metavar
    return click.Option([*option.names, option.key], **settings)



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
@click.option("-t", "--time", help="New time limit.")
@click.option("--nice", type=int, help="New nice value.")
@click.option("-p", "--partition", help="Move to this partition.")
@click.option("-q", "--qos", help="New quality of service.")
@click.option("-G", "--gpus", help="GPUs: a count, or TYPE:COUNT.")
@click.option("-c", "--cpus-per-task", "--cpus", "cpus", type=int, help="CPUs.")
@click.option("--mem", help="Host memory, e.g. 16G.")
@click.option("-J", "--job-name", "name", help="New name.")
@click.option("--comment", help="New comment (\"\" clears it).")
@click.option("-b", "--begin", help="Start no earlier than this (16:00, now+1hour, 2026-12-01T08:00; \"\" clears).")
@click.option("--deadline", help="Remove it if it cannot end by then (\"\" clears).")
@click.option("-C", "--constraint", help="Node features it needs (\"\" clears).")
@click.option("-w", "--nodelist", help="Run only on these nodes, comma-separated (\"\" clears).")
@click.option("-x", "--exclude", help="Never run on these nodes, comma-separated (\"\" clears).")
@click.option("--mail-type", "mail_type", help="Mail on BEGIN, END, FAIL, ... or ALL, NONE.")
@click.option("--mail-user", "mail_user", help="Whom to mail.")
@click.option("--time-min", "time_min", help="Shortest time limit it may be started with (\"\" clears).")
@click.option("-d", "--dependency", help="New dependency, e.g. afterok:12 (\"\" clears).")
@click.option("--priority", help="Fixed priority (admins).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def update(ctx: click.Context, job_id: str, as_json: bool, **changes: Any) -> None:
    """Change a pending job's limits, resources, begin and deadline, node choice, mail, comment or dependency
    (like scontrol update)."""
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
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def nodes(ctx: click.Context, as_json: bool) -> None:
    """Each node's GPUs: type, memory, which job holds each, and how they are linked (NVLink groups)."""
    from corral.cli.format import nodes_table

    data = client_for(ctx).nodes()
    click.echo(json_text(data) if as_json else nodes_table(data))


@cli.command()
@click.option("-t", "--state", "states", multiple=True, help="Only jobs that ended in this state (repeatable).")
@click.option("-n", "--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """Finished jobs, the latest started first, with exit codes (like sacct)."""
    from corral.cli.format import history_table

    jobs = client_for(ctx).history(states=[s.upper() for s in states], limit=limit, order="start")
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


for _command in (*TRACKING_COMMANDS, *MONITORING_COMMANDS, recommend, mcp, token, drain, resume, reservation,
                 *(QuickCommand(spec) for spec in QUICK_COMMANDS.values()),
                 *(QuickCommand(spec, run_launch) for spec in LAUNCH_COMMANDS.values())):
    cli.add_command(_command)
# every command that finds a server takes --home (and --url) after its name as well as before it; `up` keeps its
# own --home and, starting a server rather than finding one, takes no --url, nor does `down`, which stops it by
# its home; `recommend` asks no server
for _name, _command in cli.commands.items():
    if _name != "recommend" and not isinstance(_command, QuickCommand):  # a quick command's options have them
        take_server_options(_command, url=_name not in ("up", "down"))

