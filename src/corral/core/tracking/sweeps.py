"""Sweeps: parameters declared, expanded into tasks (a grid, or random samples with a seed), and each task's
command and environment filled in from its values (pure).

A parameter is `NAME=V1,V2,...` (a list: every value in a grid, one of them at random in a random search) or
`NAME=KIND:LOW:HIGH` with KIND `uniform`, `loguniform` (uniform in the logarithm: learning rates) or `int`
(a whole number, both ends included), which only a random search samples. A task's values are kept as text,
as written or sampled, so that `{lr}` in a command becomes exactly what the sweep's table shows;
`typed_values` reads them back as numbers for a run's config.

A sweep runs as one job array: `task_script` is its batch script, which gives task N its command and
environment by `$SLURM_ARRAY_TASK_ID`, every value quoted (`shlex.quote`), on every backend alike.
"""

from __future__ import annotations

import json
import math
import random
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.errors import InvalidRequest

MAX_PARAMS = 32
MAX_VALUES = 1000
MAX_TASKS = 10_000
MAX_VALUE_TEXT = 200
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
KINDS = ("uniform", "loguniform", "int")
METHODS = ("grid", "random")
# `{name}` in a command; `{{` and `}}` are literal braces, as in Python's str.format
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
ENV_PREFIX = "SWEEP_"
PARAMS_ENV = "CORRAL_SWEEP_PARAMS"
"""The task's values as a JSON object: `corral.init` adds them to the run's config."""


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter: a list of values, or a range (`kind` with `low` and `high`) to sample."""

    name: str
    values: tuple[str, ...] = ()
    kind: str | None = None
    low: float = 0.0
    high: float = 0.0

    @property
    def text(self) -> str:
        """As it is written on the command line: `lr=1e-4,3e-4` or `lr=loguniform:1e-05:0.01`."""
        if self.kind is None:
            return f"{self.name}={','.join(self.values)}"
        return f"{self.name}={self.kind}:{_number_text(self.low, self.kind)}:{_number_text(self.high, self.kind)}"

    def to_dict(self) -> dict[str, Any]:
        if self.kind is None:
            return {"name": self.name, "values": list(self.values)}
        return {"name": self.name, "kind": self.kind, "low": self.low, "high": self.high}


def parse_param(text: object, field: str = "params") -> Param:
    """A parameter from `NAME=V1,V2` or `NAME=KIND:LOW:HIGH`.

    Raises:
        InvalidRequest: naming `field`, what is wrong and how to write it.
    """
    if not isinstance(text, str):
        raise InvalidRequest(field, f"{text!r:.60} is not NAME=VALUES", "write lr=1e-4,3e-4 or lr=loguniform:1e-5:1e-2")
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep:
        raise InvalidRequest(field, f"{text!r:.60} is not NAME=VALUES", "write lr=1e-4,3e-4 or lr=loguniform:1e-5:1e-2")
    check_name(name, field)
    return param_from(name, rest.strip(), field)


def check_name(name: str, field: str = "params") -> None:
    if not NAME.match(name):
        raise InvalidRequest(field, f"{name!r:.60} is not a parameter name",
                             "start with a letter or _, then letters, digits or _ (it becomes SWEEP_NAME)")


def param_from(name: str, spec: object, field: str = "params") -> Param:
    """A parameter named `name` from its values: `V1,V2`, `KIND:LOW:HIGH`, or a list of values."""
    where = f"{field}.{name}"
    if isinstance(spec, (list, tuple)):
        values = [_value_text(v, where) for v in spec]
    elif isinstance(spec, str):
        head, colon, tail = spec.partition(":")
        if colon and head.strip().lower() in KINDS:
            return _range_param(name, head.strip().lower(), tail, where)
        values = [v.strip() for v in spec.split(",")]
    else:
        raise InvalidRequest(where, f"{spec!r:.60} is neither values nor a range", "write 1e-4,3e-4 or loguniform:1e-5:1e-2")
    if not values or any(v == "" for v in values):
        raise InvalidRequest(where, "has an empty value", "write the values comma-separated: 32,64,128")
    if len(values) > MAX_VALUES:
        raise InvalidRequest(where, f"has {len(values)} values; at most {MAX_VALUES}")
    if len(set(values)) != len(values):
        raise InvalidRequest(where, "repeats a value", "give each value once")
    return Param(name, tuple(values))


def _value_text(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidRequest(where, f"{value!r:.60} is not a number or text")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequest(where, f"{value!r} is not a finite number")
    text = value.strip() if isinstance(value, str) else repr(value)
    if len(text) > MAX_VALUE_TEXT or "\0" in text or "\n" in text:
        raise InvalidRequest(where, f"a value is longer than {MAX_VALUE_TEXT} characters or holds a NUL or a new line")
    return text


def _range_param(name: str, kind: str, rest: str, where: str) -> Param:
    low_text, colon, high_text = rest.partition(":")
    example = {"uniform": "uniform:0:0.5", "loguniform": "loguniform:1e-5:1e-2", "int": "int:1:8"}[kind]
    if not colon:
        raise InvalidRequest(where, f"{kind} needs LOW:HIGH", f"write {name}={example}")
    try:
        low, high = float(low_text), float(high_text)
    except ValueError:
        raise InvalidRequest(where, f"{low_text!r:.30}:{high_text!r:.30} are not numbers", f"write {name}={example}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise InvalidRequest(where, f"needs LOW < HIGH, got {low_text}:{high_text}", f"write {name}={example}")
    if kind == "loguniform" and low <= 0:
        raise InvalidRequest(where, "loguniform needs LOW > 0", f"write {name}={example}")
    if kind == "int" and (low != int(low) or high != int(high)):
        raise InvalidRequest(where, "int needs whole numbers", f"write {name}={example}")
    return Param(name, (), kind, low, high)


def parse_params(given: Sequence[object] | Mapping[str, object], field: str = "params") -> tuple[Param, ...]:
    """Parameters from `NAME=...` texts (the command line) or a mapping of names to values or ranges (JSON).

    Raises:
        InvalidRequest: none given, too many, a name given twice, or a bad one.
    """
    if isinstance(given, Mapping):
        for name in given:
            check_name(str(name), field)
        params = [param_from(str(name), spec, field) for name, spec in given.items()]
    elif isinstance(given, (list, tuple)):
        params = [parse_param(text, field) for text in given]
    else:
        raise InvalidRequest(field, "must be NAME=VALUES texts or an object of names to values")
    if not params:
        raise InvalidRequest(field, "no parameter given", "add --param lr=1e-4,3e-4")
    if len(params) > MAX_PARAMS:
        raise InvalidRequest(field, f"{len(params)} parameters; at most {MAX_PARAMS}")
    names = [p.name for p in params]
    for name in names:
        if names.count(name) > 1:
            raise InvalidRequest(field, f"{name} is given twice", "give each parameter once, with all its values")
    return tuple(params)


def choose_method(params: Sequence[Param], method: str | None, samples: int | None) -> str:
    """`grid` or `random`: as asked, else random when samples are asked for or a range is declared."""
    if method is not None and method not in METHODS:
        raise InvalidRequest("method", f"{method!r:.30} is not a sweep method", "use grid or random")
    ranged = [p.name for p in params if p.kind is not None]
    if method == "grid" and ranged:
        raise InvalidRequest("method", f"a grid cannot cover the range of {ranged[0]}",
                             "give its values as a list, or use a random search with --samples N")
    if method == "grid" and samples is not None:
        raise InvalidRequest("samples", "a grid runs every combination; samples are for a random search",
                             "drop --samples, or use --method random")
    if method is None:
        method = "random" if samples is not None or ranged else "grid"
    if method == "random" and samples is None:
        raise InvalidRequest("samples", "a random search needs the number of tasks", "add --samples N")
    return method


def expand(params: Sequence[Param], method: str, samples: int | None = None, seed: int = 0) -> list[dict[str, str]]:
    """Every task's values, in task order: a grid's combinations (the last parameter varies fastest), or
    `samples` random draws, the same ones for the same seed.

    Raises:
        InvalidRequest: more than MAX_TASKS tasks, or a bad number of samples.
    """
    if method == "grid":
        count = math.prod(len(p.values) for p in params)
        if count > MAX_TASKS:
            raise InvalidRequest("params", f"the grid has {count} combinations; at most {MAX_TASKS} tasks",
                                 "give fewer values, or sample it: --method random --samples N")
        tasks: list[dict[str, str]] = [{}]
        for p in params:
            tasks = [{**t, p.name: v} for t in tasks for v in p.values]
        return tasks
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_TASKS:
        raise InvalidRequest("samples", f"must be a whole number from 1 to {MAX_TASKS}, got {samples!r:.30}")
    rng = random.Random(seed)
    return [{p.name: _draw(p, rng) for p in params} for _ in range(samples)]


def _draw(p: Param, rng: random.Random) -> str:
    if p.kind is None:
        return p.values[rng.randrange(len(p.values))]
    if p.kind == "int":
        return str(rng.randint(int(p.low), int(p.high)))
    if p.kind == "loguniform":
        value = math.exp(rng.uniform(math.log(p.low), math.log(p.high)))
    else:
        value = rng.uniform(p.low, p.high)
    return _number_text(value, p.kind)


def _number_text(value: float, kind: str | None) -> str:
    if kind == "int":
        return str(int(value))
    return f"{value:.6g}"


def template_names(command: Sequence[str], field: str = "command") -> list[str]:
    """The parameter names a command's `{name}` fields use, in order of first use.

    Raises:
        InvalidRequest: a lone `{` or `}`, or an empty or malformed field.
    """
    names: list[str] = []
    for arg in command:
        for match in _FIELD.finditer(arg):
            token = match.group(0)
            if token in ("{{", "}}"):
                continue
            if match.group(1) is None:
                raise InvalidRequest(field, f"{arg!r:.60} has a lone {token!r}", "write {{ or }} for a literal brace")
            name = match.group(1).strip()
            if not NAME.match(name):
                raise InvalidRequest(field, f"{{{name}}} in {arg!r:.60} is not a parameter name",
                                     "write {lr} for parameter lr; {{ or }} for a literal brace")
            if name not in names:
                names.append(name)
    return names


def check_template(command: Sequence[str], params: Sequence[Param], field: str = "command") -> None:
    """Every `{name}` in the command is a declared parameter.

    Raises:
        InvalidRequest: naming the first undeclared one and the declared ones.
    """
    declared = [p.name for p in params]
    for name in template_names(command, field):
        if name not in declared:
            raise InvalidRequest(field, f"uses {{{name}}}, which is not a parameter of the sweep",
                                 f"declare it with --param {name}=..., or use one of: {', '.join(declared)}")


def fill(command: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """The command with each `{name}` replaced by the task's value (check_template first)."""
    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values[match.group(1).strip()]

    return [_FIELD.sub(one, arg) for arg in command]


def task_env(values: Mapping[str, str]) -> dict[str, str]:
    """A task's environment: SWEEP_NAME for each value, and all of them as JSON for the SDK's config."""
    env = {ENV_PREFIX + name.upper(): value for name, value in values.items()}
    env[PARAMS_ENV] = json.dumps(typed_values(values), sort_keys=True)
    return env


def typed_values(values: Mapping[str, str]) -> dict[str, Any]:
    """The values as a run's config holds them: whole numbers and numbers as such, anything else as text."""
    return {name: _typed(value) for name, value in values.items()}


def _typed(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def task_script(command: Sequence[str], tasks: Sequence[Mapping[str, str]], params: Sequence[Param]) -> str:
    """The array's batch script: task N's environment exported, then its command run in the script's place.

    Every word goes through `shlex.quote`; a task number the sweep does not have fails with exit status 2.
    """
    lines = [
        "#!/bin/sh",
        f"# corral sweep: {len(tasks)} task(s) over {', '.join(p.name for p in params)}",
        "# " + " ".join(shlex.quote(p.text) for p in params),
        'case "${SLURM_ARRAY_TASK_ID:-}" in',
    ]
    for number, values in enumerate(tasks):
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in task_env(values).items())
        argv = " ".join(shlex.quote(a) for a in fill(command, values))
        lines.append(f"{number}) export {exports}; exec {argv} ;;")
    lines.append('*) echo "corral sweep: no values for task ${SLURM_ARRAY_TASK_ID:-?}" >&2; exit 2 ;;')
    lines.append("esac")
    return "\n".join(lines) + "\n"


def array_text(count: int, concurrency: int | None) -> str:
    """The array's `--array`: `0-N` with `%K` when at most K tasks may run at once."""
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or not 1 <= concurrency <= MAX_TASKS):
        raise InvalidRequest("concurrency", f"must be a whole number from 1 to {MAX_TASKS}, got {concurrency!r:.30}")
    text = f"0-{count - 1}"
    return f"{text}%{concurrency}" if concurrency else text


def best_task(scores: Sequence[tuple[int, float | None]], lower_is_better: bool) -> int | None:
    """The task whose score is best (lowest or highest), skipping tasks without a finite one; None if none has."""
    finite = [(task, score) for task, score in scores if score is not None and math.isfinite(score)]
    if not finite:
        return None
    pick = min if lower_is_better else max
    return pick(finite, key=lambda ts: ts[1])[0]


LOWER_IS_BETTER = ("loss", "err", "perplexity", "ppl", "mse", "mae", "rmse", "time", "latency")


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of this metric is the better one, from its name: losses, errors, perplexities."""
    name = metric.lower()
    return any(word in name for word in LOWER_IS_BETTER)


def sweep_table(definition: Mapping[str, Any], array: Mapping[str, Any], tasks: Sequence[Mapping[str, Any]],
                runs: Sequence[Mapping[str, Any]], metric: str | None = None) -> dict[str, Any]:
    """What `sweep show` and the sweep page show: every task's values, state, and its run's final and best
    value of `metric` (the sweep's own, else the first its runs logged), and the best task named.

    `array`: the array job's fields; `tasks`: its tasks' fields (those with records); `runs`: the runs its
    tasks logged, with their metrics' summaries (`min`, `max`, `last`), the newest of a task's counting.
    """
    by_job: dict[Any, Mapping[str, Any]] = {}
    for logged in sorted(runs, key=lambda r: r.get("start_time") or 0):
        by_job[logged.get("job_id")] = logged
    by_task = {t.get("array_task_id"): t for t in tasks}
    keys = sorted({k for run in by_job.values() for k in (run.get("metrics") or {}) if not k.startswith("system/")})
    chosen = metric or definition.get("metric") or (keys[0] if keys else None)
    lower = lower_is_better(chosen) if chosen else True
    rows: list[dict[str, Any]] = []
    for number, values in enumerate(definition["tasks"]):
        task = by_task.get(number)
        run: Mapping[str, Any] | None = by_job.get(task.get("id")) if task is not None else None
        summary = (run.get("metrics") or {}).get(chosen) if run is not None and chosen else None
        state = task["state"] if task is not None else (
            "PENDING" if number in _pending_numbers(array) else array.get("state"))
        rows.append({
            "task": number, "values": dict(values), "job_id": task.get("id") if task is not None else None,
            "ref": f"{array['id']}_{number}", "state": state,
            "run": None if run is None else {"uid": run.get("uid"), "id": run.get("id"), "name": run.get("name"),
                                             "state": run.get("state")},
            "final": _finite(summary.get("last")) if summary else None,
            "best": _finite(summary.get("min" if lower else "max")) if summary else None,
        })
    best = best_task([(r["task"], r["best"]) for r in rows], lower)
    return {
        "id": array["id"], "name": array.get("name"), "user": array.get("user"), "state": array.get("state"),
        "method": definition["method"], "seed": definition.get("seed"), "params": list(definition["params"]),
        "command": list(definition["command"]), "metric": chosen, "lower_is_better": lower, "metrics": keys,
        "concurrency": _throttle(array.get("array")), "tasks": rows,
        "best": None if best is None else rows[best],
    }


def _pending_numbers(array: Mapping[str, Any]) -> set[int]:
    pending = array.get("pending_tasks")
    return set(pending) if isinstance(pending, (list, tuple, set)) else set()


def _throttle(text: object) -> int | None:
    if not isinstance(text, str) or "%" not in text:
        return None
    tail = text.rsplit("%", 1)[1]
    return int(tail) if tail.isdigit() else None


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
