"""`corral resubmit` (a job run again, with changes) and `corral sweep` (a grid or random search as one job
array; `sweep show ID`). Quick commands like `submit`, whose options they share (`corral.cli.jobs`)."""

from __future__ import annotations

import os
import sys

from corral.cli.jobs import JOB_OPTIONS, Call, _key_values, _out, _query, _warn, job_ref, run
from corral.cli.options import FLAG, INT, Command, Opt, UsageError
from corral.cli.terminal import escape, flush_stdout, print_json
from corral.errors import CorralError, InvalidRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

# what a rerun may change: submit's options, but not what only a first submit says
_RERUN_OPTIONS = [o for o in JOB_OPTIONS if o.key not in ("wrap", "condor")]

RESUBMIT = Command("resubmit", "Run a job again as its owner (for its owner or an admin), with changes: `resubmit ID "
                   "[--set KEY=VALUE ...] [submit options] [-- CMD ARGS]`. The new job's parent is ID.", [
    Opt("--set", key="sets", many=True, metavar="KEY=VALUE", help="Change a field (time=2h, gpus=2, env.LR=3e-4, "
        "label.try=2; a submit field's name); repeatable."),
    *_RERUN_OPTIONS,
    Opt("-y", "--yes", key="yes", kind=FLAG, help="Another user's job (an admin's rerun): run it again as its owner "
        "without asking."),
    Opt("--parsable", kind=FLAG, help="Print only the new job's id."),
    Opt("--json", key="as_json", kind=FLAG, help="Print the new job as JSON."),
], "job_id", interspersed=True, takes_command=True)

SWEEP = Command("sweep", "Run a grid or random search as one job array: `sweep --param lr=1e-4,3e-4 --param "
                "bs=32,64 [options] -- CMD --lr {lr}`; `sweep show ID` shows one.", [
    Opt("--param", key="params", many=True, metavar="NAME=VALUES", help="A parameter: V1,V2,... or a range to "
        "sample, uniform:LOW:HIGH, loguniform:LOW:HIGH or int:LOW:HIGH (repeatable)."),
    Opt("--samples", kind=INT, help="A random search of this many tasks [default: the whole grid]."),
    Opt("--seed", kind=INT, help="The random search's seed [default: one picked and kept with the sweep]."),
    Opt("--method", help="grid or random [default: random with --samples or a range, else grid]."),
    Opt("--max-concurrent", "--concurrency", key="concurrency", kind=INT,
        help="At most this many tasks at once (the array's %N)."),
    Opt("--metric", help="The metric `sweep show` ranks by [default: the first the runs log]."),
    *[o for o in _RERUN_OPTIONS if o.key != "array"],
    Opt("--parsable", kind=FLAG, help="Print only the sweep's id."),
    Opt("--json", key="as_json", kind=FLAG, help="Print the sweep as JSON."),
], "operands", many=True, required=False, interspersed=False, takes_command=True)

SWEEP_SHOW = Command("sweep show", "A sweep: every task's parameters, state, and its run's final and best metric.", [
    Opt("--metric", help="Rank by this metric [default: the sweep's, else the first logged]."),
    Opt("--sort", help="Sort by a column: task, state, final, best, or a parameter's name [default: task]."),
    Opt("--json", key="as_json", kind=FLAG),
], "sweep_id")

_REQUEST_SKIP = frozenset({"sets", "params", "samples", "seed", "method", "concurrency", "metric", "env_pairs",
                           "label_pairs", "parsable", "as_json", "no_container_mount_home", "wrap", "condor", "yes"})


def resubmit(call: Call) -> int:
    changes: dict[str, Any] = {k: v for k, v in call.options.items() if k not in _REQUEST_SKIP and v is not None}
    if call["sets"]:
        from corral.core.jobspec.resubmit import parse_sets

        for key, value in parse_sets(list(call["sets"])).items():
            if isinstance(value, dict):
                changes.setdefault(key, {}).update(value)
            else:
                changes[key] = value
    if call["env_pairs"]:
        changes.setdefault("env", {}).update(_key_values(call["env_pairs"], "--env"))
    if call["label_pairs"]:
        changes.setdefault("labels", {}).update(_key_values(call["label_pairs"], "--label"))
    if call["no_container_mount_home"]:
        changes["container_mount_home"] = False
    if call.command_after_dashes is not None:
        if not call.command_after_dashes:
            raise UsageError("nothing after --: give the command to run instead, e.g. -- python train.py --lr 1e-3")
        changes["command"] = call.command_after_dashes
    if len(call.operands) != 1:
        raise UsageError("give one job id: corral resubmit ID [--set KEY=VALUE ...]")
    ref = job_ref(call.operands[0])
    server = call.server()
    owner = None
    try:
        job = server.ask("POST", f"/api/v1/jobs/{ref}/resubmit", changes)
    except InvalidRequest as exc:
        if exc.field != "confirm_owner":  # another's job: the server wants its owner named (corral.core.jobspec.resubmit)
            raise
        owner = server.ask("GET", f"/api/v1/jobs/{ref}")["user"]
        _confirm_owner(call.operands[0], owner, call["yes"])
        job = server.ask("POST", f"/api/v1/jobs/{ref}/resubmit", {**changes, "confirm_owner": owner})
    for warning in job.get("warnings", []):
        _warn(warning)
    if call["as_json"]:
        print_json(job)
    elif call["parsable"]:
        _out(str(job["id"]))
    else:
        as_owner = f", as {escape(job['user'])}" if owner is not None else ""
        _out(f"Submitted batch job {job['id']} (a rerun of job {call.operands[0]}{as_owner})")
    return 0


def _confirm_owner(ref: str, owner: str, yes: bool) -> None:
    """Go on with a rerun of `owner`'s job as them: `--yes`, or a `y` at the terminal.

    Raises:
        CorralError: neither, saying whose job it is and what to pass.
    """
    whose = f"job {ref} is {owner}'s: it runs again as {owner} (their account, limits and files), not as you"
    if yes:
        _warn(f"{whose}; running it again as {owner} (--yes)")
        return
    if not sys.stdin.isatty():
        raise CorralError(f"{whose}; pass --yes to run it again as {owner}")
    flush_stdout()
    sys.stderr.write(escape(f"{whose[0].upper()}{whose[1:]}. Run it again as {owner}? [y/N]: "))
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CorralError(f"not run again: {whose}")


def sweep(call: Call) -> int:
    if call.operands[:1] == ["show"]:
        return show(Call(SWEEP_SHOW, call.operands[1:], call.home, call.url))
    if call.operands:
        raise UsageError(f"unexpected {call.operands[0]!r}: give the command after --, or `sweep show ID`")
    if not call.command_after_dashes:
        raise UsageError("give the command to run after --, e.g. -- python train.py --lr {lr}")
    body: dict[str, Any] = {k: v for k, v in call.options.items() if k not in _REQUEST_SKIP and v is not None}
    for key in ("samples", "seed", "method", "concurrency", "metric"):
        if call[key] is not None:
            body[key] = call[key]
    body["params"] = list(call["params"])
    body["command"] = call.command_after_dashes
    body["submit_dir"] = os.getcwd()
    body["environment"] = dict(os.environ)
    mask = os.umask(0o022)
    os.umask(mask)
    body["umask"] = f"{mask:04o}"
    if call["env_pairs"]:
        body["env"] = _key_values(call["env_pairs"], "--env")
    if call["label_pairs"]:
        body["labels"] = _key_values(call["label_pairs"], "--label")
    if call["no_container_mount_home"]:
        body["container_mount_home"] = False
    answer = call.server().ask("POST", "/api/v1/sweeps", body)
    for warning in answer["job"].get("warnings", []):
        _warn(warning)
    if call["as_json"]:
        print_json(answer)
    elif call["parsable"]:
        _out(str(answer["id"]))
    else:
        seed = f", seed {answer['seed']}" if answer.get("seed") is not None else ""
        _out(f"Submitted sweep {answer['id']}: {len(answer['tasks'])} task(s), {answer['method']}{seed} "
             f"(job array {answer['job']['ref']}); see `corral sweep show {answer['id']}`")
    return 0


def show(call: Call) -> int:
    sweep_id = call.operands[0]
    if not (sweep_id.isascii() and sweep_id.isdigit()):
        raise UsageError(f"{sweep_id!r} is not a sweep id (its array job's id, e.g. 12)")
    query = ""
    if call["metric"]:
        query = "?" + _query([("metric", call["metric"])])
    view = call.server().ask("GET", f"/api/v1/sweeps/{sweep_id}{query}")
    if call["as_json"]:
        print_json(view)
        return 0
    from corral.cli.format_sweeps import sweep_text

    _out(sweep_text(view, call["sort"]))
    return 0


_RUN: dict[str, Callable[[Call], int]] = {"resubmit": resubmit, "sweep": sweep, "sweep show": show}
COMMANDS = {command.name: command for command in (RESUBMIT, SWEEP)}


def run_launch(command: Command, argv: Sequence[str], home: str | None, url: str | None) -> int:
    """`corral.cli.jobs.run` for these commands."""
    return run(command, argv, home, url, _RUN)

