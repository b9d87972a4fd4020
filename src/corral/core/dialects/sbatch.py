"""`#SBATCH` directives: read a Slurm batch script's header into corral request fields.

The parser only maps option names to the request's field names, keeping the
values as text; `corral.core.jobspec.spec.build_spec` validates them, so a value means
the same thing whether it came from a script, the CLI or the REST API.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from corral.errors import InvalidRequest, several_problems

# option (without dashes) -> request field
_VALUED: dict[str, str] = {
    "job-name": "name", "J": "name",
    "gres": "gres",
    "gpus": "gpus", "G": "gpus", "gpus-per-node": "gpus", "gpus-per-task": "gpus_per_task",
    "ntasks": "ntasks", "n": "ntasks", "ntasks-per-node": "ntasks_per_node",
    "cpus-per-task": "cpus", "c": "cpus",
    "mem": "mem", "mem-per-cpu": "mem_per_cpu", "mem-per-gpu": "mem_per_gpu",
    "time": "time", "t": "time",
    "output": "stdout", "o": "stdout",
    "error": "stderr", "e": "stderr",
    "chdir": "workdir", "D": "workdir",
    "export": "export",
    "partition": "partition", "p": "partition",
    "dependency": "dependency", "d": "dependency",
    "kill-on-invalid-dep": "kill_on_invalid_dep",
    "array": "array", "a": "array",
    "signal": "signal",
    "qos": "qos", "q": "qos",
    "account": "account", "A": "account",
    "comment": "comment",
    "begin": "begin", "b": "begin", "deadline": "deadline",
    "constraint": "constraint", "C": "constraint",
    "nodelist": "nodelist", "w": "nodelist", "exclude": "exclude", "x": "exclude",
    "cpus-per-gpu": "cpus_per_gpu", "time-min": "time_min", "priority": "priority", "reservation": "reservation",
    "mail-type": "mail_type", "mail-user": "mail_user",
    # Pyxis's (the Slurm plugin that runs a job in an image); corral reads them the same way
    "container-image": "image", "container-mounts": "container_mounts", "container-workdir": "container_workdir",
    "container-env": "container_env",
}
_NODES = ("nodes", "N")  # a count, checked with the request's fields: more than 1 needs the Slurm backend
# accepted and ignored with a warning: they change nothing about where or how the job runs here
_HARMLESS_VALUED = {
    "hint", "distribution", "m", "tmp", "mem-bind", "cpu-bind", "propagate", "wckey", "licenses", "L",
}
_HARMLESS_FLAGS = {"parsable", "quiet", "Q", "verbose", "v", "get-user-env"}
# flags that set a field to yes: corral's own (in #CORRAL lines as in #SBATCH ones), and sbatch's --hold
_YES_FLAGS = {"preemptible": "preemptible", "hold": "hold", "H": "hold"}
# Pyxis's flags: each sets its field to this value
_SET_FLAGS = {"no-container-mount-home": ("container_mount_home", "no"),
              "container-remap-root": ("container_remap_root", "yes"),
              # whether the job waits again when its GPU fails (Slurm: when its node fails)
              "requeue": ("requeue", "yes"), "no-requeue": ("requeue", "no")}
_FLAGS = _HARMLESS_FLAGS | {"overcommit", "O", "contiguous", "wait", "W", "no-kill", "k"}
_OPEN_MODES = ("append", "truncate")
_DEFAULT_NICE = "100"  # what sbatch's bare --nice means


@dataclass
class Directives:
    """What a script's header asks for: request fields, warnings for what was ignored, and its faults.

    `problems`: every directive that cannot be taken, each with where it is and its fix, so that a
    script's author sees them all at once (`parse_*` raise them; `read_script` leaves that to its caller).
    `places`: each field's directive as written, with its line, to name it when its value is bad.
    """

    fields: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    places: dict[str, str] = field(default_factory=dict)

    def raise_problems(self) -> None:
        """Raises InvalidRequest (field `script`) listing every problem, if there is any."""
        if self.problems:
            raise several_problems("script", "the script's directives", self.problems)


def check_shebang(script: str) -> None:
    if not script.startswith("#!"):
        raise InvalidRequest(
            "script", "a batch script's first line must be #! and an interpreter", "start it with #!/bin/bash"
        )


def parse_script(script: str) -> Directives:
    """Read the `#SBATCH` lines at the top of a batch script.

    As in sbatch, directives end at the first line that is neither blank nor a comment.

    Raises:
        InvalidRequest: directives corral does not support or cannot read; names each with its line.
    """
    directives = read_script(script)
    directives.raise_problems()
    return directives


def read_script(script: str) -> Directives:
    """`parse_script` that keeps the directives' problems in `problems` instead of raising them.

    Raises:
        InvalidRequest: the script has no `#!` line.
    """
    check_shebang(script)
    tokens: list[tuple[str, int | None]] = []
    unreadable: list[str] = []
    for number, line in enumerate(script.splitlines()[1:], start=2):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if stripped.startswith("#SBATCH"):
            try:
                tokens.extend((token, number) for token in shlex.split(stripped[len("#SBATCH"):], comments=True))
            except ValueError as exc:
                unreadable.append(f"line {number}: cannot read directive {stripped!r}: {exc} (close the quote)")
    directives = _read_options(tokens, "#SBATCH")
    directives.problems[:0] = unreadable
    directives.problems.sort(key=line_of)
    return directives


def parse_options(tokens: list[str], *, source: str = "#SBATCH") -> Directives:
    """Map sbatch-style options (`--mem=16G`, `-c 4`, `-J name`) to request fields.

    Raises:
        InvalidRequest: options corral does not support or cannot read; names each.
    """
    directives = _read_options([(token, None) for token in tokens], source)
    directives.raise_problems()
    return directives


def read_options(tokens: object, source: str = "sbatch") -> Directives:
    """`parse_options` for a request's `options` (sbatch's command line, as typed), keeping the options'
    problems in `problems` instead of raising them.

    Raises:
        InvalidRequest: `options` is not a list of strings.
    """
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        raise InvalidRequest("options", "must be a list of strings: the sbatch options as typed",
                             'e.g. ["-J", "prep", "--mem=4G"]')
    return _read_options([(token, None) for token in tokens], source)


def _read_options(tokens: list[tuple[str, int | None]], source: str) -> Directives:
    out = Directives()
    i = 0
    while i < len(tokens):
        token, line = tokens[i]
        at = f"line {line}: " if line is not None else ""
        i += 1
        if token.startswith("--"):
            name, equals, value = token[2:].partition("=")
            has_value = bool(equals)
        elif token.startswith("-") and len(token) > 1:
            name, value = token[1], token[2:]
            has_value = bool(value)
        else:
            out.problems.append(f"{at}{source} {token!r} is not an option (directives look like --mem=16G)")
            continue
        if name == "nice":
            out.fields["nice"] = value if has_value else _DEFAULT_NICE
            out.places["nice"] = f"{at}{source} {token}"
            continue
        if name == "exclusive" and token.startswith("--"):
            if has_value:  # --exclusive=user|mcs share the node among one user's (or group's) jobs
                out.problems.append(f"{at}{source} --exclusive={value}: sharing a node among one user's or group's "
                                    "jobs is not supported (remove the value: --exclusive takes the whole node)")
            else:
                out.fields["exclusive"] = "yes"
            continue
        if name in _YES_FLAGS:
            out.fields[_YES_FLAGS[name]] = "yes"
            continue
        if name in _SET_FLAGS:
            if has_value:
                out.problems.append(f"{at}{source} --{name}={value}: a flag takes no value (write --{name})")
                continue
            field_name, flag_value = _SET_FLAGS[name]
            out.fields[field_name] = flag_value
            out.places[field_name] = f"{at}{source} --{name}"
            continue
        if name in _FLAGS:
            if name in _HARMLESS_FLAGS:
                out.warnings.append(f"{source} --{name} has no effect on corral's local backend; ignored")
            else:
                out.problems.append(f"{at}{source} option {_spelled(token, name)} is not supported by corral (remove it)")
            continue
        if not has_value:
            if i >= len(tokens) or tokens[i][1] != line:
                out.problems.append(f"{at}{source} option {token} needs a value (e.g. {token}=VALUE)")
                continue
            value = tokens[i][0]
            i += 1
        written = f"{at}{source} {_spelled(token, name)}={value}"
        if name in _VALUED:
            out.fields[_VALUED[name]] = value
            out.places[_VALUED[name]] = written
        elif name == "open-mode":
            if value not in _OPEN_MODES:
                out.problems.append(f"{at}{source} --open-mode={value}: give --open-mode=append (keep what the "
                                    "files hold) or --open-mode=truncate (the default)")
                continue
            out.fields["open_mode"] = value
            out.places["open_mode"] = written
        elif name in _NODES:
            low, _, high = value.strip().partition("-")
            if high and high != low:
                out.problems.append(f"{at}{source} --nodes={value}: a range of node counts is not supported "
                                    "(give one count, e.g. --nodes=2)")
                continue
            out.fields["nodes"] = low  # checked with the request's fields; more than 1 needs the Slurm backend
            out.places["nodes"] = written
        elif name == "container-name":
            # Pyxis keeps a named container's filesystem between steps and jobs; corral starts each job afresh
            out.problems.append(f"{at}{source} --container-name={value}: named containers are not supported by "
                                "corral (remove it: each job starts from --container-image afresh)")
        elif name in _HARMLESS_VALUED:
            out.warnings.append(f"{source} --{name}={value} has no effect on corral's local backend; ignored")
        else:
            out.problems.append(
                f"{at}{source} option {_spelled(token, name)} is not supported by corral (remove it; supported: "
                "--job-name --gres --gpus --cpus-per-task --mem --time --output --error --chdir --export --nice "
                "--partition --qos --account --dependency --kill-on-invalid-dep --array --signal --preemptible "
                "--hold --requeue --no-requeue --open-mode --comment --begin --deadline --exclusive --constraint --nodelist --exclude "
                "--cpus-per-gpu --gpus-per-task --time-min --priority --reservation --mail-type --mail-user --nodes --ntasks "
                "--ntasks-per-node --container-image --container-mounts --container-workdir --container-env "
                "--no-container-mount-home --container-remap-root)")
    return out


def line_of(problem: str) -> int:
    """The line a problem is on, to list them in the script's order (0: none named)."""
    head = problem.partition(":")[0]
    return int(head[5:]) if head.startswith("line ") and head[5:].isdigit() else 0


def _spelled(token: str, name: str) -> str:
    """The option as the user wrote it: `-a` stays `-a`, `--array=1-3` becomes `--array`."""
    return f"-{name}" if not token.startswith("--") else f"--{name}"
