"""A run's metric series: a batch's points appended in chunks, a range read back downsampled.

Part of `RunStore` (corral.store.runs); its writes run inside the caller's transaction, as the store's do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from corral.core.tracking import metric_series as S
from corral.core.tracking.metrics_batch import MetricsBatch, increasing_only
from corral.errors import NotFound
from corral.store.schema import metric_chunks, metric_series, run_batches, runs

_OTHER = metric_chunks.alias("other")
_LAST_CHUNK = select(func.max(_OTHER.c.first_step)).where(  # each key's last chunk: an index lookup
    _OTHER.c.run_id == metric_chunks.c.run_id, _OTHER.c.key == metric_chunks.c.key).scalar_subquery()
_RAW_FACTOR = 32  # read raw points while a range holds at most this many per point asked for


@dataclass(frozen=True)
class Appended:
    accepted: int
    skipped: int
    duplicate: bool


class RunMetrics:
    """The metric series of `RunStore`'s runs."""

    def append(self, conn: Connection, run_id: int, batch: MetricsBatch) -> Appended:
        """Store a batch's points; steps that do not move a series forward are skipped."""
        if conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is None:
            raise NotFound(f"no run {run_id}")
        if batch.batch_id is not None:
            seen = conn.execute(select(run_batches.c.batch_id).where(
                run_batches.c.run_id == run_id, run_batches.c.batch_id == batch.batch_id)).first()
            if seen is not None:
                return Appended(0, 0, True)
        current = {row.key: row for row in conn.execute(_SERIES_OF, {"run_id": run_id, "keys": list(batch.series)})}
        accepted = skipped = 0
        kept_by_key: dict[str, S.Points] = {}
        for key, points in batch.series.items():
            meta = current.get(key)
            kept = increasing_only(points, None if meta is None else meta.last_step)
            skipped += len(points) - len(kept)
            if len(kept):
                kept_by_key[key] = kept
                accepted += len(kept)
        if kept_by_key:
            self._append_series(conn, run_id, kept_by_key, current)
        if batch.batch_id is not None:
            conn.execute(insert(run_batches).values(run_id=run_id, batch_id=batch.batch_id))
        return Appended(accepted, skipped, False)

    def _append_series(self, conn: Connection, run_id: int, kept: dict[str, S.Points], current: dict[str, Any]) -> None:
        """Append each key's points: every key of a batch in the same few statements (a batch of ten
        keys costs what one did), whatever the number of keys."""
        # Small appends are merged into the series' last chunk while it is small and no larger
        # than what comes in (a binary counter): each point is rewritten O(log) times, and a
        # long series ends up in chunks of at least MERGE_BELOW points whatever the batch size.
        merging = dict(kept)
        done: dict[str, S.Points] = {}
        while merging:
            tails = {row.key: row for row in conn.execute(_TAILS_OF, {"run_id": run_id, "keys": list(merging)})}
            taken = {}
            for key in list(merging):
                tail = tails.get(key)
                if (tail is None or tail.points >= S.MERGE_BELOW or tail.points > len(merging[key])
                        or tail.points + len(merging[key]) > S.CHUNK_TARGET):
                    done[key] = merging.pop(key)
                else:
                    taken[tail.id] = key
            if not taken:
                break
            data = {row.id: row.data for row in conn.execute(_CHUNK_DATA, {"ids": list(taken)})}
            conn.execute(_DELETE_CHUNKS, {"ids": list(taken)})
            for chunk_id, key in taken.items():
                merging[key] = S.concat([S.decode(data[chunk_id]), merging[key]])
        rows = []
        for key, merged in done.items():
            for lo in range(0, len(merged), S.CHUNK_TARGET):
                part = merged.take(slice(lo, lo + S.CHUNK_TARGET))
                rows.append({
                    "run_id": run_id, "key": key, "first_step": int(part.steps[0]), "last_step": int(part.steps[-1]),
                    "count": len(part), "first_value": _db_float(part.values[0]), "first_time": float(part.times[0]),
                    "last_value": _db_float(part.values[-1]), "last_time": float(part.times[-1]),
                    "lod2": S.encode(S.summarize(part, S.LOD2)), "lod1": S.encode(S.summarize(part, S.LOD1)),
                    "data": S.encode(part),
                })
        conn.execute(_INSERT_CHUNKS, rows)
        summaries = {key: _summary(points, current.get(key)) for key, points in kept.items()}
        new = [{"run_id": run_id, "key": key, "first_step": int(kept[key].steps[0]), **summary}
               for key, summary in summaries.items() if key not in current]
        if new:
            conn.execute(insert(metric_series), new)
        changed = [{"b_key": key, **{f"b_{name}": value for name, value in summary.items()}}
                   for key, summary in summaries.items() if key in current]
        if changed:
            conn.execute(_UPDATE_SERIES, [{"b_run_id": run_id, **row} for row in changed])

    def series(self, conn: Connection, run_id: int, key: str, *, start: int | None, end: int | None,
               max_points: int) -> tuple[int, bool, S.Points]:
        """(points in range, downsampled?, the points): at most `max_points`, each bucket's
        extremes kept (core.tracking.metric_series.downsample)."""
        meta = conn.execute(select(metric_series.c.count).where(
            metric_series.c.run_id == run_id, metric_series.c.key == key)).first()
        if meta is None:
            keys: list[str] = sorted(conn.execute(select(metric_series.c.key).where(metric_series.c.run_id == run_id)).scalars())
            raise NotFound(f"run {run_id} has no metric {key!r}" + (f"; it has {', '.join(keys[:20])}" if keys else ""))
        c = metric_chunks.c
        query = select(c.id, c.first_step, c.last_step, c.count.label("points"), c.first_value, c.first_time, c.last_value,
                       c.last_time).where(c.run_id == run_id, c.key == key)
        if start is not None:
            query = query.where(c.last_step >= start)
        if end is not None:
            query = query.where(c.first_step <= end)
        chunks = list(conn.execute(query.order_by(c.first_step)))
        whole = [ch for ch in chunks if (start is None or ch.first_step >= start) and (end is None or ch.last_step <= end)]
        whole_ids = {ch.id for ch in whole}
        edges = {ch.id: self._raw(conn, [ch.id]).in_range(start, end) for ch in chunks if ch.id not in whole_ids}
        count = sum(ch.points for ch in whole) + sum(len(p) for p in edges.values())
        if count == 0:
            return 0, False, S.EMPTY
        if count <= _RAW_FACTOR * max_points:
            raw = self._raw(conn, [ch.id for ch in chunks]).in_range(start, end)
            if count <= max_points:
                return count, False, raw
            return count, True, S.downsample(raw, raw.take(slice(0, 1)), raw.take(slice(-1, None)), max_points)
        level = c.lod1 if count // S.LOD1 <= _RAW_FACTOR * max_points else c.lod2
        summaries = {row.id: S.decode(row[1]) for row in conn.execute(select(c.id, level).where(c.id.in_(list(whole_ids))))}
        parts = [edges[ch.id] if ch.id in edges else summaries[ch.id] for ch in chunks]
        first, last = chunks[0], chunks[-1]
        first_point = edges[first.id].take(slice(0, 1)) if first.id in edges else _point(first.first_step, first.first_value, first.first_time)
        last_point = edges[last.id].take(slice(-1, None)) if last.id in edges else _point(last.last_step, last.last_value, last.last_time)
        return count, True, S.downsample(S.concat(parts), first_point, last_point, max_points)

    def _raw(self, conn: Connection, ids: Sequence[int]) -> S.Points:
        rows = conn.execute(select(metric_chunks.c.data).where(metric_chunks.c.id.in_(list(ids)))
                            .order_by(metric_chunks.c.first_step))
        chunks: list[bytes] = list(rows.scalars())
        return S.concat([S.decode(data) for data in chunks])


_SUMMARY_COLUMNS = ("count", "last_step", "last_value", "last_time", "min_value", "min_step", "max_value", "max_step",
                    "first_nonfinite_step")

# An append's statements, built once: building a statement (its clauses, its cache key) costs more than SQLite
# takes to run it, and an append runs several for every batch a client sends.
_RUN_EXISTS = select(runs.c.id).where(runs.c.id == bindparam("run_id"))
_SERIES_OF = select(metric_series).where(metric_series.c.run_id == bindparam("run_id"),
                                         metric_series.c.key.in_(bindparam("keys", expanding=True)))
_TAILS_OF = (select(metric_chunks.c.id, metric_chunks.c.key, metric_chunks.c.count.label("points"))  # Row.count is tuple's
             .where(metric_chunks.c.run_id == bindparam("run_id"), metric_chunks.c.key.in_(bindparam("keys", expanding=True)),
                    metric_chunks.c.first_step == _LAST_CHUNK))
_CHUNK_DATA = select(metric_chunks.c.id, metric_chunks.c.data).where(metric_chunks.c.id.in_(bindparam("ids", expanding=True)))
_DELETE_CHUNKS = delete(metric_chunks).where(metric_chunks.c.id.in_(bindparam("ids", expanding=True)))
_INSERT_CHUNKS = insert(metric_chunks)
_UPDATE_SERIES = (update(metric_series)
                  .where(metric_series.c.run_id == bindparam("b_run_id"), metric_series.c.key == bindparam("b_key"))
                  .values({name: bindparam(f"b_{name}") for name in _SUMMARY_COLUMNS}))


def _summary(points: S.Points, meta: Any) -> dict[str, Any]:
    """A series' summary columns once `points` are appended to what `meta` (None: nothing yet) summed up."""
    values = points.values
    finite = np.isfinite(values)
    summary: dict[str, Any] = {
        "count": (meta.count if meta else 0) + len(points), "last_step": int(points.steps[-1]),
        "last_value": _db_float(values[-1]), "last_time": float(points.times[-1]),
        "min_value": meta.min_value if meta else None, "min_step": meta.min_step if meta else None,
        "max_value": meta.max_value if meta else None, "max_step": meta.max_step if meta else None,
        "first_nonfinite_step": meta.first_nonfinite_step if meta else None,
    }
    if not finite.all() and summary["first_nonfinite_step"] is None:
        summary["first_nonfinite_step"] = int(points.steps[int(np.argmin(finite))])
    if finite.any():
        i = int(np.argmin(np.where(finite, values, np.inf)))
        if summary["min_value"] is None or values[i] < summary["min_value"]:
            summary["min_value"], summary["min_step"] = float(values[i]), int(points.steps[i])
        i = int(np.argmax(np.where(finite, values, -np.inf)))
        if summary["max_value"] is None or values[i] > summary["max_value"]:
            summary["max_value"], summary["max_step"] = float(values[i]), int(points.steps[i])
    return summary


def _point(step: int, value: float | None, time_: float) -> S.Points:
    return S.Points(np.array([step], np.int64), np.array([math.nan if value is None else value]), np.array([time_]))


def _db_float(value: float) -> float | None:
    """NaN has no place in a FLOAT column that both SQLite and PostgreSQL read back alike."""
    value = float(value)
    return value if not math.isnan(value) else None
