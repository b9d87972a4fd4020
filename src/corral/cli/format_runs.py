"""Tables and views of runs, metrics and comparisons for the terminal: pure functions from the API's dicts to text.

Runs carry times as Unix seconds (floats), and metric values as numbers or, when not
finite, as the strings "NaN", "Infinity" and "-Infinity" (see docs/tracking-api.md).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from corral.cli.format import table
from corral.cli.terminal import escaped
from corral.core.tracking.metric_goals import metric_goal
from corral.core.units.units import format_duration

MAX_METRIC_COLUMNS = 3
MEDIA_TYPES = ("image", "histogram", "text", "table")  # corral.sdk.media's types
MEDIA_PLURALS = {"image": "images", "histogram": "histograms", "text": "texts", "table": "tables"}
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def as_float(value: Any) -> float | None:
    """A metric value as a float (NaN and infinities included); None for a missing one."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return _NON_FINITE.get(value)
    return float(value)


def format_value(value: Any, digits: int = 6) -> str:
    """A metric or config value, short: `0.123457`, `1e-05`, `nan`, `-` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) or (isinstance(value, str) and value in _NON_FINITE):
        number = as_float(value)
        assert number is not None
        if math.isnan(number):
            return "nan"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return f"{number:.{digits}g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def format_config_value(value: Any) -> str:
    """A config value as it was given: floats exact (`1.0`, `0.0003`), strings bare, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return format_value(value)


def format_time(ts: float | None) -> str:
    return "-" if ts is None else dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%dT%H:%M:%S")


def run_duration(run: Mapping[str, Any], now: float | None = None) -> str:
    """How long the run has lasted: to its end, or to now while it runs."""
    start, end = run.get("start_time"), run.get("end_time")
    if start is None:
        return "-"
    if end is None:
        if run.get("state") != "running":
            return "-"
        end = time.time() if now is None else now
    return format_duration(end - start)


def format_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{int(value)}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


def run_label(run: Mapping[str, Any], width: int = 24) -> str:
    """`7 lr-0.1`: the run's id and (shortened) name, to head a column."""
    name = str(run.get("name") or run.get("uid") or "")
    if len(name) > width:
        name = name[: width - 1] + "~"
    return f"{run['id']} {name}".strip()


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys: `{"model": {"depth": 4}}` -> `{"model.depth": 4}`; an empty dict stays a value."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, f"{name}."))
        else:
            flat[name] = value
    return flat


_QUALITY = ("loss", "acc", "err", "f1", "auc", "bleu", "ppl", "perplexity", "mse", "mae", "rmse", "score", "reward")
_HELD_OUT = ("val", "valid", "eval", "test")


def _key_rank(key: str) -> tuple[bool, bool, bool, str]:
    # what a person compares runs by first: the metrics they logged (not system/gpu_util, _timestamp),
    # measures of quality (loss, accuracy, ...) before counters, held-out ones before training ones
    lower = key.lower()
    system = ("/" in key and key.split("/", 1)[0] in {"system", "sys", "gpu"}) or key.startswith("_")
    quality = any(q in lower for q in _QUALITY)
    held_out = any(lower.startswith(h) or f"/{h}" in lower or f"_{h}" in lower for h in _HELD_OUT)
    return system, not quality, not held_out, key


def metric_columns(runs: Sequence[Mapping[str, Any]], limit: int = MAX_METRIC_COLUMNS) -> list[str]:
    """The metrics to show as columns: those every run that logged any has (else the most common), at most `limit`."""
    counts: dict[str, int] = {}
    logged = [run["metrics"] for run in runs if run.get("metrics")]
    for metrics in logged:
        for key in metrics:
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return []
    common = [k for k, n in counts.items() if n == len(logged)]
    if common:
        return sorted(common, key=_key_rank)[:limit]
    return sorted(counts, key=lambda k: (-counts[k], _key_rank(k)))[:limit]


@escaped
def runs_table(runs: Sequence[Mapping[str, Any]], now: float | None = None) -> str:
    """`corral runs`: one line a run, with the last value of the metrics they share."""
    now = time.time() if now is None else now
    keys = metric_columns(runs)
    rows = []
    for run in runs:
        metrics = run.get("metrics") or {}
        step = run.get("last_step")
        rows.append([
            str(run["id"]), str(run.get("project") or "-"), str(run.get("name") or run.get("uid") or "-")[:32],
            str(run.get("state") or "-"), "-" if run.get("job_id") is None else str(run["job_id"]),
            "-" if step is None else str(step),
            *[format_value(metrics[k]["last"], 4) if k in metrics else "-" for k in keys],
            format_time(run.get("start_time")), run_duration(run, now),
        ])
    return table(["ID", "PROJECT", "NAME", "STATE", "JOB", "STEP", *keys, "START", "DURATION"], rows)


def _fields(pairs: Sequence[tuple[str, Any]]) -> list[str]:
    width = max(len(k) for k, _ in pairs)
    return [f"{k.rjust(width)}: {v}" for k, v in pairs]


def checkpoint_marks(artifacts: Sequence[Mapping[str, Any]]) -> dict[Any, list[str]]:
    """Which checkpoints are the `best` (by their metric) and the `latest` (by step): artifact id -> marks."""
    checkpoints = [a for a in artifacts if a.get("type") == "checkpoint" and not a.get("deleted")]
    marks: dict[Any, list[str]] = {}
    scored = [(value, a) for a in checkpoints if (value := as_float(a.get("metric_value"))) is not None
              and not math.isnan(value)]
    if scored:
        # the goal the run declared (best_mode), else the metric's name, else the SDK's default best_mode: min
        first = scored[0][1]
        goal = first.get("goal") or metric_goal(str(first.get("metric") or "")) or "min"
        sign = 1.0 if goal == "min" else -1.0
        # ties go to the later step, as the SDK's retention judges them: it has trained longer
        _, best = min(scored, key=lambda pair: (sign * pair[0], -(pair[1].get("step") or 0)))
        marks.setdefault(_artifact_key(best), []).append("best")
    if checkpoints:
        latest = max(checkpoints, key=lambda a: (a.get("step") is not None, a.get("step") or 0, a.get("created") or 0))
        marks.setdefault(_artifact_key(latest), []).append("latest")
    return marks


def _artifact_key(artifact: Mapping[str, Any]) -> Any:
    return artifact.get("id", artifact.get("path"))


def run_view(run: Mapping[str, Any], artifacts: Sequence[Mapping[str, Any]] = (), now: float | None = None, *,
             artifacts_hidden: str | None = None) -> str:
    """`corral run show`: the run's fields, its notes, flattened config, a summary of each metric, its media
    (by key), its other artifacts; or, where the caller may not list them, `artifacts_hidden`: why not."""
    notes = run.get("notes")
    # the notes' lines are escaped one by one: their line breaks are theirs to keep, their escapes are not
    return _run_view({**run, "notes": notes.splitlines() if isinstance(notes, str) else []}, artifacts, now,
                     artifacts_hidden)


@escaped
def _run_view(run: Mapping[str, Any], artifacts: Sequence[Mapping[str, Any]], now: float | None,
              artifacts_hidden: str | None) -> str:
    gpu = run.get("gpu_type") or "-"
    pairs = [
        ("RunId", run["id"]), ("Uid", run.get("uid") or "-"), ("Project", run.get("project") or "-"),
        ("Name", run.get("name") or "-"), ("User", run.get("user") or "-"), ("State", run.get("state") or "-"),
        ("Resumed", _resumed(run)),
        ("JobId", "-" if run.get("job_id") is None else run["job_id"]), ("Node", run.get("node") or "-"),
        ("GPU", gpu), ("GitCommit", run.get("git_commit") or "-"), ("ResumeKey", run.get("resume_key") or "-"),
        ("StartTime", format_time(run.get("start_time"))), ("EndTime", format_time(run.get("end_time"))),
        ("Duration", run_duration(run, now)),
        ("LastStep", "-" if run.get("last_step") is None else run["last_step"]),
        ("Tags", ",".join(run.get("tags") or []) or "-"),
    ]
    if run.get("archived"):
        pairs.append(("Archived", "yes"))
    parts = ["\n".join(_fields(pairs))]
    if run.get("notes"):
        parts.append("Notes:\n" + _indent("\n".join(run["notes"])))
    config = flatten_config(run.get("config") or {})
    if config:
        lines = _fields([(k, format_config_value(v)) for k, v in sorted(config.items())])
        parts.append("Config:\n" + _indent("\n".join(lines)))
    else:
        parts.append("Config: (none)")
    metrics = run.get("metrics") or {}
    if metrics:
        rows = []
        for key in sorted(metrics, key=_key_rank):
            m = metrics[key]
            rows.append([
                key, str(m.get("count", "-")), f"{_step(m.get('first_step'))}-{_step(m.get('last_step'))}",
                format_value(m.get("last")), _at(m.get("min"), m.get("min_step")), _at(m.get("max"), m.get("max_step")),
            ])
        parts.append("Metrics:\n" + _indent(table(["KEY", "COUNT", "STEPS", "LAST", "MIN (STEP)", "MAX (STEP)"], rows)))
    else:
        parts.append("Metrics: (none)")
    media = [a for a in artifacts if is_media(a)]
    if media:
        parts.append("Media:\n" + _indent(media_table(media)))
    artifacts = [a for a in artifacts if not is_media(a)]
    if artifacts:
        marks = checkpoint_marks(artifacts)
        rows = []
        for a in sorted(artifacts, key=_artifact_order):
            metric = "-" if a.get("metric") is None else f"{a['metric']}={format_value(a.get('metric_value'))}"
            rows.append([
                str(a.get("type") or "-"), _step(a.get("step")), metric, format_size(a.get("size")),
                ",".join(marks.get(_artifact_key(a), [])) or "", str(a.get("path")),
            ])
        parts.append("Artifacts:\n" + _indent(table(["TYPE", "STEP", "METRIC", "SIZE", "MARK", "PATH"], rows)))
    elif artifacts_hidden:
        parts.append(f"Artifacts: not shown: {artifacts_hidden}")
    else:
        parts.append("Artifacts: (none)")
    return "\n\n".join(parts)


def _resumed(run: Mapping[str, Any]) -> str:
    times = run.get("resumes")
    if isinstance(times, int) and times > 0:
        return f"yes ({times} time{'s' if times != 1 else ''})"
    return "yes" if run.get("resumed") else "no"


def is_media(artifact: Mapping[str, Any]) -> bool:
    """An image, histogram, text or table logged with `run.log` (or imported from TensorBoard)."""
    return artifact.get("type") in MEDIA_TYPES and str(artifact.get("path")).startswith("media/") \
        and bool(artifact.get("stored"))


def media_table(media: Sequence[Mapping[str, Any]]) -> str:
    """One row a media key: its type, how many steps hold one, from which to which, and their size."""
    keys: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for a in media:
        path = str(a["path"])
        keys.setdefault((path[len("media/"):path.rindex("/")], str(a.get("type"))), []).append(a)
    rows = []
    for (key, type_), items in sorted(keys.items()):
        steps = [a["step"] for a in items if isinstance(a.get("step"), int)]
        span = f"{min(steps)}-{max(steps)}" if steps else "-"
        rows.append([key, type_, str(len(items)), span, format_size(sum(a.get("size") or 0 for a in items))])
    return table(["KEY", "TYPE", "COUNT", "STEPS", "SIZE"], rows)


@escaped
def artifacts_table(artifacts: Sequence[Mapping[str, Any]]) -> str:
    """`corral artifacts list`: each artifact's type, size, where its bytes are and its path."""
    rows = [[str(a.get("type") or "-"), format_size(a.get("size")), "store" if a.get("stored") else "registered",
             (a.get("sha256") or "-")[:12], str(a.get("path"))] for a in sorted(artifacts, key=_artifact_order)]
    return table(["TYPE", "SIZE", "WHERE", "SHA256", "PATH"], rows)


def _artifact_order(artifact: Mapping[str, Any]) -> tuple[Any, ...]:
    # checkpoints first, by step; then the other artifacts
    step = artifact.get("step")
    return artifact.get("type") != "checkpoint", step is None, step or 0, str(artifact.get("path"))


def _step(step: Any) -> str:
    return "-" if step is None else str(step)


def _at(value: Any, step: Any) -> str:
    return "-" if value is None else f"{format_value(value)} ({_step(step)})"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


# -- one series -----------------------------------------------------------------------------------


@escaped
def series_header(series: Mapping[str, Any]) -> str:
    """`loss: 2000 of 10000000 points (downsampled, first, last and each bucket's min and max)`."""
    shown, total = len(series.get("steps") or []), series.get("count", len(series.get("steps") or []))
    if series.get("downsampled"):
        return f"{series['key']}: {shown} of {total} points (downsampled: first, last, and each bucket's min and max)"
    return f"{series['key']}: {shown} points (all)"


@escaped
def series_table(series: Mapping[str, Any]) -> str:
    rows = [[str(s), format_value(v, 8)] for s, v in zip(series.get("steps") or [], series.get("values") or [])]
    return table(["STEP", "VALUE"], rows)


def series_csv(series: Mapping[str, Any]) -> str:
    """`step,value,time` lines; values exact (repr), non-finite ones as nan/inf/-inf."""
    steps, values = series.get("steps") or [], series.get("values") or []
    times = series.get("times") or [None] * len(steps)
    lines = ["step,value,time"]
    for step, value, t in zip(steps, values, times):
        number = as_float(value)
        lines.append(f"{step},{'' if number is None else repr(number)},{'' if t is None else repr(float(t))}")
    return "\n".join(lines)


# -- comparing runs -------------------------------------------------------------------------------


def compare_runs(runs: Sequence[Mapping[str, Any]], all_config: bool = False,
                 goals: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What `corral compare` shows, as data: the config keys that differ (all with `all_config`), side by side,
    and for each metric all runs have its last, min and max per run and the best run(s).

    A metric's direction is the goal declared for it in `goals` ("min" or "max"), else its name's
    (`corral.core.tracking.metric_goals`); one with neither (a learning rate logged as a metric) has no best.

    Returns:
        `{"runs": [{id, uid, project, name, state}], "config": {key: [value per run]},
        "metrics": {key: {"goal", "lower_is_better", "last": [...], "min": [...], "max": [...], "best": [run ids]}}}`;
        a config key a run lacks is None in its place; goal and lower_is_better are None without a direction.
    """
    configs = [flatten_config(r.get("config") or {}) for r in runs]
    keys = sorted({k for c in configs for k in c})
    config: dict[str, list[Any]] = {}
    missing = object()
    for key in keys:
        values = [c.get(key, missing) for c in configs]
        first = values[0]
        same = all(_same(v, first) for v in values[1:])
        if all_config or not same:
            config[key] = [None if v is missing else v for v in values]
    metrics: dict[str, dict[str, Any]] = {}
    summaries = [r.get("metrics") or {} for r in runs]
    common = [k for k in summaries[0] if all(k in s for s in summaries[1:])] if summaries else []
    for key in sorted(common, key=_key_rank):
        goal = metric_goal(key, goals)
        lower = goal == "min"
        entry: dict[str, Any] = {
            "goal": goal, "lower_is_better": None if goal is None else lower,
            "last": [s[key].get("last") for s in summaries],
            "min": [s[key].get("min") for s in summaries],
            "max": [s[key].get("max") for s in summaries],
        }
        judged = [as_float(v) for v in entry["min" if lower else "max"]]
        finite = [v for v in judged if v is not None and math.isfinite(v)]
        if finite and goal is not None:
            target = min(finite) if lower else max(finite)
            entry["best"] = [r["id"] for r, v in zip(runs, judged) if v == target]
        else:
            entry["best"] = []
        metrics[key] = entry
    return {
        "runs": [{k: r.get(k) for k in ("id", "uid", "project", "name", "state")} for r in runs],
        "config": config,
        "metrics": metrics,
    }


def _best_text(entry: Mapping[str, Any], best_labels: str) -> str:
    if entry.get("goal") is None:
        return "- (no direction: --goal KEY=min|max)"
    return f"{best_labels} ({'lower' if entry['goal'] == 'min' else 'higher'} is better)"


def _same(a: Any, b: Any) -> bool:
    # 1 and 1.0 are one learning rate; True and 1 are not one flag
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


@escaped
def compare_view(comparison: Mapping[str, Any], all_config: bool = False) -> str:
    """`corral compare` as text: the config table, then each metric's last/min/max with the best run marked `*`."""
    runs = comparison["runs"]
    labels = [run_label(r) for r in runs]
    parts = []
    if comparison["config"]:
        rows = [[k, *[format_config_value(v) for v in values]] for k, values in comparison["config"].items()]
        parts.append(table(["CONFIG", *labels], rows))
    else:
        parts.append("CONFIG: (none)" if all_config else "CONFIG: no differences")
    if comparison["metrics"]:
        rows = []
        for key, entry in comparison["metrics"].items():
            best = set(entry["best"])
            judged = entry["goal"]
            best_labels = ", ".join(label for r, label in zip(runs, labels) if r["id"] in best) or "-"
            for stat in ("last", "min", "max"):
                cells = []
                for r, value in zip(runs, entry[stat]):
                    mark = " *" if stat == judged and r["id"] in best else ""
                    cells.append(format_value(value) + mark)
                first = stat == "last"
                rows.append([
                    key if first else "", stat, *cells,
                    _best_text(entry, best_labels) if first else "",
                ])
        parts.append(table(["METRIC", "", *labels, "BEST"], rows))
    else:
        parts.append("METRICS: none that all these runs have")
    return "\n\n".join(parts)


# -- sync and import ------------------------------------------------------------------------------


@escaped
def sync_lines(reports: Sequence[Mapping[str, Any]]) -> str:
    """`corral sync`: one line a spooled run: where it went and what was sent, or why it failed."""
    lines = []
    for r in reports:
        if r.get("error"):
            lines.append(f"{r['uid']} -> failed: {r['error']}")
        else:
            state = f", {r['state']}" if r.get("state") else ""
            lines.append(f"{r['uid']} -> run {r.get('run_id')}: {_sent(r)}{state}")
    return "\n".join(lines)


def _sent(report: Mapping[str, Any]) -> str:
    """`3 batches, 300 points`; `nothing new: its 1 batch (500 points) was stored already`; or, where the
    server had some, `2 batches, 1000 points (500 new, 500 stored already)`."""
    batches, points = report.get("batches") or 0, report.get("points") or 0
    stored = report.get("stored")
    sent = f"{_count(batches, 'batch', 'batches')}, {_count(points, 'point', 'points')}"
    if stored is None or stored >= points:  # a report that does not say (an older SDK's) is taken as sent
        return sent
    if stored == 0:
        were = "was" if batches == 1 else "were"
        return (f"nothing new: its {_count(batches, 'batch', 'batches')} ({_count(points, 'point', 'points')}) "
                f"{were} stored already")
    return f"{sent} ({stored} new, {points - stored} stored already)"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@escaped
def imported_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """`corral import-tensorboard` and `import-wandb`: the runs they made (or found made), and what they left out."""
    rows = [[str(r["id"]), str(r.get("project") or "-"), str(r.get("name") or "-"),
             "-" if r.get("last_step") is None else str(r["last_step"]), str(len(r.get("metrics") or {}))]
            for r in runs]
    notes = []
    for r in runs:
        replaced = r.get("replaced_points") or {}
        if replaced:
            keys = ", ".join(f"{k}: {n}" for k, n in sorted(replaced.items()))
            notes.append(f"run {r['id']}: {_count(sum(replaced.values()), 'point', 'points')} at steps logged again "
                         f"({keys}) gave way to the values logged later, as a resumed job meant them")
        if r.get("skipped_values"):
            notes.append(f"run {r['id']}: {_count(r['skipped_values'], 'value', 'values')} that are not numbers "
                         "(images, tables, text) not imported")
        if r.get("media"):
            kinds = ", ".join(_count(n, kind, MEDIA_PLURALS.get(kind, kind)) for kind, n in sorted(r["media"].items()))
            notes.append(f"run {r['id']}: media: {kinds} ({r.get('media_sent', 0)} uploaded now)")
        if r.get("skipped_media"):
            notes.append(f"run {r['id']}: {_count(r['skipped_media'], 'value', 'values')} of audio, video or text "
                         "over 1 MiB not imported")
        if r.get("negative_steps"):
            notes.append(f"run {r['id']}: {_count(r['negative_steps'], 'value', 'values')} at negative steps not imported")
    return "\n".join([table(["ID", "PROJECT", "NAME", "STEP", "METRICS"], rows), *notes])
