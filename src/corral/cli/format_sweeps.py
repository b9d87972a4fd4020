"""`corral sweep show` as text: the sweep's parameters, a row per task, and the best configuration named."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.cli.format import table
from corral.cli.format_runs import format_value
from corral.cli.terminal import escaped
from corral.errors import InvalidRequest

_COLUMNS = ("task", "state", "final", "best")


@escaped
def sweep_text(view: Mapping[str, Any], sort: str | None = None) -> str:
    """The sweep's head lines, its tasks' table (sorted by `sort`: a column or a parameter's name; missing
    values last), and its best task."""
    names = [p["name"] for p in view["params"]]
    rows = list(view["tasks"])
    key = sort or "task"
    if key not in _COLUMNS and key not in names:
        raise InvalidRequest("sort", f"{key!r} is not a column", f"sort by one of: {', '.join([*_COLUMNS, *names])}")
    rows.sort(key=lambda r: _sort_key(r, key, view.get("lower_is_better", True)))
    metric = view.get("metric") or "-"
    head = [
        f"Sweep {view['id']}: {view.get('name') or ''} ({view['method']}"
        + (f", seed {view['seed']}" if view.get("seed") is not None else "")
        + (f", at most {view['concurrency']} at once" if view.get("concurrency") else "") + f"), {view.get('state')}",
        "Parameters: " + "  ".join(_param_text(p) for p in view["params"]),
        "Command: " + " ".join(view["command"]),
        f"Metric: {metric} ({'lower' if view.get('lower_is_better', True) else 'higher'} is better)"
        + (f"; others: {', '.join(m for m in view.get('metrics', []) if m != metric)}" if len(view.get("metrics", [])) > 1 else ""),
        "",
    ]
    body = table(["TASK", *[n.upper() for n in names], "STATE", "RUN", f"FINAL {metric}", f"BEST {metric}"], [
        [r["ref"], *[str(r["values"].get(n, "")) for n in names], r["state"] or "-",
         (r["run"] or {}).get("uid") or "-", format_value(r["final"]), format_value(r["best"])]
        for r in rows
    ])
    best = view.get("best")
    tail = ["", f"Best: task {best['ref']}: " + ", ".join(f"{n}={best['values'][n]}" for n in names)
            + f" ({metric} {format_value(best['best'])})"] if best else ["", "Best: none yet (no task's run has logged "
                                                                          f"{metric})"]
    return "\n".join([*head, body, *tail])


def _param_text(param: Mapping[str, Any]) -> str:
    if "values" in param:
        return f"{param['name']}={','.join(param['values'])}"
    return f"{param['name']}={param['kind']}:{param['low']:g}:{param['high']:g}"


def _sort_key(row: Mapping[str, Any], key: str, lower: bool) -> tuple[int, Any]:  # numbers first, then text
    if key == "task":
        return (0, row["task"])
    if key == "state":
        return (0, row["state"] or "")
    if key in ("final", "best"):
        value = row[key]
        if value is None:
            return (1, 0.0)
        return (0, value if lower else -value)
    value = row["values"].get(key)
    try:
        return (0, float(value))
    except (TypeError, ValueError):
        return (1, str(value))
