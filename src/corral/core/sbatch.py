"""`#SBATCH` directives: read a Slurm batch script's header into corral request fields.

The parser only maps option names to the request's field names, keeping the
values as text; `corral.core.spec.build_spec` validates them, so a value means
the same thing whether it came from a script, the CLI or the REST API.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from corral.errors import InvalidRequest

# option (without dashes) -> request field
_VALUED: dict[str, str] = {
    "job-name": "name", "J": "name",
    "gres": "gres",
    "gpus": "gpus", "G": "gpus", "gpus-per-node": "gpus", "gpus-per-task": "gpus",
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
}
# options that must say "one": corral runs one task on one node
_ONE: dict[str, str] = {"nodes": "nodes", "N": "nodes", "ntasks": "ntasks", "n": "ntasks",
                        "ntasks-per-node": "ntasks-per-node"}
# accepted and ignored with a warning: they change nothing about where or how the job runs here
_HARMLESS_VALUED = {
    "account", "A", "mail-type", "mail-user", "comment",
    "hint", "distribution", "m", "tmp", "mem-bind", "cpu-bind", "propagate", "wckey", "licenses", "L",
}
_HARMLESS_FLAGS = {"requeue", "no-requeue", "parsable", "quiet", "Q", "verbose", "v", "get-user-env"}
# corral's own, in #CORRAL lines as in #SBATCH ones: flags that set a field to yes
_CORRAL_FLAGS = {"preemptible": "preemptible"}
_FLAGS = _HARMLESS_FLAGS | {"exclusive", "hold", "H", "overcommit", "O", "contiguous", "wait", "W", "no-kill", "k"}
_DEFAULT_NICE = "100"  # what sbatch's bare --nice means


@dataclass
class Directives:
    """What a script's header asks for: request fields and warnings for what was ignored."""

    fields: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def check_shebang(script: str) -> None:
    if not script.startswith("#!"):
        raise InvalidRequest(
            "script", "a batch script's first line must be #! and an interpreter", "start it with #!/bin/bash"
        )


def parse_script(script: str) -> Directives:
    """Read the `#SBATCH` lines at the top of a batch script.

    As in sbatch, directives end at the first line that is neither blank nor a comment.

    Raises:
        InvalidRequest: a directive corral does not support or cannot read; names it.
    """
    check_shebang(script)
    tokens: list[str] = []
    for line in script.splitlines()[1:]:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if stripped.startswith("#SBATCH"):
            try:
                tokens.extend(shlex.split(stripped[len("#SBATCH"):], comments=True))
            except ValueError as exc:
                raise InvalidRequest("script", f"cannot read directive {stripped!r}: {exc}") from None
    return parse_options(tokens, source="#SBATCH")


def parse_options(tokens: list[str], *, source: str = "#SBATCH") -> Directives:
    """Map sbatch-style options (`--mem=16G`, `-c 4`, `-J name`) to request fields."""
    out = Directives()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.startswith("--"):
            name, has_value, value = token[2:].partition("=")
        elif token.startswith("-") and len(token) > 1:
            name, value = token[1], token[2:]
            has_value = bool(value)
        else:
            raise InvalidRequest("script", f"{source} {token!r} is not an option", "directives look like --mem=16G")
        if name == "nice":
            out.fields["nice"] = value if has_value else _DEFAULT_NICE
            continue
        if name in _CORRAL_FLAGS:
            out.fields[_CORRAL_FLAGS[name]] = "yes"
            continue
        if name in _FLAGS:
            if name in _HARMLESS_FLAGS:
                out.warnings.append(f"{source} --{name} has no effect on corral's local backend; ignored")
                continue
            raise InvalidRequest("script", f"{source} option {_spelled(token, name)} is not supported by corral", "remove it")
        if not has_value:
            if i >= len(tokens):
                raise InvalidRequest("script", f"{source} option {token} needs a value")
            value = tokens[i]
            i += 1
        if name in _VALUED:
            out.fields[_VALUED[name]] = value
        elif name == "open-mode":
            if value != "truncate":  # truncate is what corral does anyway
                raise InvalidRequest("script", f"{source} --open-mode={value} is not supported by corral", "remove it; logs are truncated")
        elif name in _ONE and _ONE[name] == "nodes":
            low, _, high = value.strip().partition("-")
            if high and high != low:
                raise InvalidRequest("script", f"{source} --nodes={value}: a range of node counts is not supported",
                                     "give one count, e.g. --nodes=2")
            out.fields["nodes"] = low  # checked with the request's fields; more than 1 needs the Slurm backend
        elif name in _ONE:
            if value.strip() not in ("1", "1-1"):
                raise InvalidRequest(
                    "script", f"{source} --{_ONE[name]}={value}: corral runs a job as one task on one node",
                    "use --nodes=1 --ntasks=1 (multi-node jobs need the Slurm backend)",
                )
        elif name in _HARMLESS_VALUED:
            out.warnings.append(f"{source} --{name}={value} has no effect on corral's local backend; ignored")
        else:
            raise InvalidRequest(
                "script", f"{source} option {_spelled(token, name)} is not supported by corral",
                "remove it; supported: --job-name --gres --gpus --cpus-per-task --mem --time --output --error "
                "--chdir --export --nice --partition --qos --dependency --kill-on-invalid-dep --array --signal --preemptible --nodes=1 --ntasks=1",
            )
    return out


def _spelled(token: str, name: str) -> str:
    """The option as the user wrote it: `-a` stays `-a`, `--array=1-3` becomes `--array`."""
    return f"-{name}" if not token.startswith("--") else f"--{name}"
