"""Reading and writing what the monitor keeps: samples, alert channels, rules, firings, deliveries.

Every method takes a connection inside the caller's transaction, as RunStore's do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, case, delete, func, insert, or_, select, update

from corral.core.monitoring.alerts import may_use_channel
from corral.errors import Conflict, Forbidden, NotFound
from corral.core.monitoring.samples import LOW_GPU_UTILIZATION, SampleSummary
from corral.store.db import inserted_id
from corral.store.schema import (
    alert_channels, alert_deliveries, alert_firings, alert_rules, job_samples, metric_chunks, metric_series, runs,
)

SAMPLE_COLUMNS = (
    "gpu_utilization", "gpu_memory_mb", "gpu_power_w", "gpu_temperature_c", "cpu_utilization", "cpu_time_s",
    "rss_mb", "read_mb_s", "write_mb_s", "processes",
)


class MonitorStore:
    # -- samples ----------------------------------------------------------------------------------

    def add_samples(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            conn.execute(insert(job_samples), [{k: row.get(k) for k in ("job_id", "time", *SAMPLE_COLUMNS)} for row in rows])

    def prune_samples(self, conn: Connection, before: float, limit: int) -> int:
        """Forget up to `limit` of the samples taken before `before`; how many went."""
        oldest = select(job_samples.c.id).where(job_samples.c.time < before).order_by(job_samples.c.time).limit(limit)
        return conn.execute(delete(job_samples).where(job_samples.c.id.in_(oldest.scalar_subquery()))).rowcount

    def series(self, conn: Connection, job_id: int, metric: str, *, start: float | None, end: float | None,
               max_points: int) -> tuple[int, list[tuple[float, float | None]]]:
        """(samples in range, points): at most `max_points`, each bucket's lowest and highest kept."""
        column = job_samples.c[metric]
        query = select(job_samples.c.time, column).where(job_samples.c.job_id == job_id)
        if start is not None:
            query = query.where(job_samples.c.time >= start)
        if end is not None:
            query = query.where(job_samples.c.time <= end)
        rows = conn.execute(query.order_by(job_samples.c.time)).all()
        return len(rows), thin_extremes([(r[0], r[1]) for r in rows], max_points)

    def sample_summary(self, conn: Connection, job_id: int) -> SampleSummary | None:
        """A job's samples boiled down (what eff and diagnose read), by the database: a month of
        samples is one aggregate query, never a month of rows in memory."""
        c = job_samples.c
        low = func.sum(case((c.gpu_utilization < LOW_GPU_UTILIZATION, 1), else_=0))
        # Sequence[Any]: SQLAlchemy's stubs type the items of an aggregate row as object
        row: Sequence[Any] = conn.execute(select(
            func.count(), func.min(c.time), func.max(c.time), func.avg(c.gpu_utilization), func.max(c.gpu_utilization),
            func.max(c.gpu_memory_mb), func.avg(c.gpu_power_w), func.avg(c.cpu_utilization), func.max(c.cpu_time_s),
            func.max(c.rss_mb), func.count(c.gpu_utilization), low,
        ).where(c.job_id == job_id)).one()
        count, first, last, gpu_mean, gpu_max, gpu_mem, power, cpu, cpu_time, rss, gpu_count, low_count = row
        if not count:
            return None
        return SampleSummary(
            count=int(count), first_time=float(first), last_time=float(last), gpu_utilization_mean=_float(gpu_mean),
            gpu_utilization_max=_float(gpu_max), gpu_memory_peak_mb=_float(gpu_mem), gpu_power_mean_w=_float(power),
            cpu_utilization_mean=_float(cpu), cpu_time_s=_float(cpu_time),  # cumulative: the largest is the last
            rss_peak_mb=_float(rss), low_gpu_fraction=int(low_count or 0) / gpu_count if gpu_count else None,
        )

    # -- tracked runs, as the monitor reads them ----------------------------------------------------

    def runs_of(self, conn: Connection, job_ids: Iterable[int]) -> list[dict[str, Any]]:
        """The runs of these jobs: id, job, name, state, start, config."""
        ids = list(job_ids)
        if not ids:
            return []
        query = select(runs.c.id, runs.c.job_id, runs.c.name, runs.c.state, runs.c.start_time, runs.c.config).where(
            runs.c.job_id.in_(ids))
        return [dict(r._mapping) for r in conn.execute(query.order_by(runs.c.id))]

    def series_heads(self, conn: Connection, run_ids: Iterable[int]) -> list[dict[str, Any]]:
        """Each tracked series' end of these runs: key, last step, value and time, first NaN step."""
        ids = list(run_ids)
        if not ids:
            return []
        c = metric_series.c
        query = select(c.run_id, c.key, c.count, c.last_step, c.last_value, c.last_time, c.first_nonfinite_step).where(
            c.run_id.in_(ids), ~c.key.startswith("system/"))
        return [dict(r._mapping) for r in conn.execute(query)]

    def step_range(self, conn: Connection, run_id: int, key: str, since: float | None,
                   until: float | None) -> tuple[int, int] | None:
        """The steps of a tracked series logged between two times (whole chunks: the caller trims
        the edges), so a time window is cut before the series is downsampled; None if there are none."""
        c = metric_chunks.c
        query = select(func.min(c.first_step), func.max(c.last_step)).where(c.run_id == run_id, c.key == key)
        if since is not None:
            query = query.where(c.last_time >= since)
        if until is not None:
            query = query.where(c.first_time <= until)
        span: Sequence[Any] = conn.execute(query).one()  # aggregates: typed as object by SQLAlchemy's stubs
        first, last = span
        return None if first is None else (int(first), int(last))

    # -- channels ---------------------------------------------------------------------------------

    def put_channel(self, conn: Connection, name: str, type_: str, config: Mapping[str, Any], now: float,
                    owner: str | None = None) -> None:
        """Create a channel (`owner`'s, shared with nobody), or replace one's settings (keeping whom it is shared with)."""
        if conn.execute(select(alert_channels.c.name).where(alert_channels.c.name == name)).first() is not None:
            conn.execute(update(alert_channels).where(alert_channels.c.name == name).values(type=type_, config=dict(config)))
        else:
            conn.execute(insert(alert_channels).values(name=name, type=type_, config=dict(config), created=now,
                                                       owner=owner, shared_with=None))

    def share_channel(self, conn: Connection, name: str, shared_with: Sequence[str] | None) -> None:
        """Set whom besides admins a channel is for: user names, ["*"] (everybody), None (nobody)."""
        done = conn.execute(update(alert_channels).where(alert_channels.c.name == name).values(
            shared_with=None if shared_with is None else list(shared_with)))
        if not done.rowcount:
            raise NotFound(f"no alert channel named {name!r}")

    def channels(self, conn: Connection) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in conn.execute(select(alert_channels).order_by(alert_channels.c.name))]

    def delete_channel(self, conn: Connection, name: str) -> None:
        users = [r.name for r in conn.execute(select(alert_rules.c.name, alert_rules.c.channels))
                 if name in (r.channels or [])]
        if users:
            raise Conflict(f"channel {name!r} is used by rule(s) {', '.join(users)}; delete or change those first")
        if conn.execute(delete(alert_channels).where(alert_channels.c.name == name)).rowcount == 0:
            raise NotFound(f"no alert channel named {name!r}")

    # -- rules ------------------------------------------------------------------------------------

    def add_rule(self, conn: Connection, row: Mapping[str, Any], admin: bool = True) -> int:
        """Add a rule; `admin`: whether its owner is one (others name only the channels shared with them).

        Raises:
            Conflict: the name is taken. NotFound: no such channel. Forbidden: a channel not shared with the owner.
        """
        if conn.execute(select(alert_rules.c.id).where(alert_rules.c.name == row["name"])).first() is not None:
            raise Conflict(f"an alert rule named {row['name']!r} exists; delete it first or pick another name")
        known = {r.name: r.shared_with for r in conn.execute(select(alert_channels.c.name, alert_channels.c.shared_with))}
        for channel in row["channels"]:
            if channel not in known:
                raise NotFound(f"no alert channel named {channel!r}; create it with `corral alert channel add`")
            if not may_use_channel(known[channel], row["owner"], admin):
                raise Forbidden(f"alert channel {channel!r} is not shared with {row['owner']}: an admin must share it "
                                f"first (corral alert channel share {channel} --with {row['owner']})")
        return inserted_id(conn.execute(insert(alert_rules).values(**row)))

    def rules(self, conn: Connection) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in conn.execute(select(alert_rules).order_by(alert_rules.c.id))]

    def rule(self, conn: Connection, name: str) -> dict[str, Any]:
        row = conn.execute(select(alert_rules).where(alert_rules.c.name == name)).first()
        if row is None:
            raise NotFound(f"no alert rule named {name!r}")
        return dict(row._mapping)

    def delete_rule(self, conn: Connection, name: str, now: float) -> list[int]:
        """Delete a rule; its open firings resolve. Returns their ids."""
        rule = self.rule(conn, name)
        open_ids: list[int] = list(conn.execute(select(alert_firings.c.id).where(
            alert_firings.c.rule_id == rule["id"], alert_firings.c.status == "firing")).scalars())
        if open_ids:
            conn.execute(update(alert_firings).where(alert_firings.c.id.in_(open_ids))
                         .values(status="resolved", resolved_at=now))
        conn.execute(delete(alert_rules).where(alert_rules.c.id == rule["id"]))
        return open_ids

    # -- firings and deliveries -------------------------------------------------------------------

    def open_firings(self, conn: Connection) -> list[dict[str, Any]]:
        query = select(alert_firings.c.id, alert_firings.c.rule_id, alert_firings.c.job_id).where(
            alert_firings.c.status == "firing")
        return [dict(r._mapping) for r in conn.execute(query)]

    def fire(self, conn: Connection, row: Mapping[str, Any], channels: Sequence[str], now: float,
             refused: Mapping[str, str] | None = None, *, status: str = "firing") -> int:
        """Record a firing and its deliveries; `refused`: channels not to send to, each recorded failed with why;
        `status`: "firing" (open until its condition clears) or "fired" (about an ended job: nothing clears it)."""
        firing_id = inserted_id(conn.execute(insert(alert_firings).values(status=status, **row)))
        self._deliveries(conn, firing_id, channels, "firing", now, refused)
        return firing_id

    def resolve(self, conn: Connection, firing_id: int, channels: Sequence[str], now: float,
                refused: Mapping[str, str] | None = None) -> None:
        done = conn.execute(update(alert_firings).where(alert_firings.c.id == firing_id, alert_firings.c.status == "firing")
                            .values(status="resolved", resolved_at=now))
        if done.rowcount:
            self._deliveries(conn, firing_id, channels, "resolved", now, refused)

    def _deliveries(self, conn: Connection, firing_id: int, channels: Sequence[str], event: str, now: float,
                    refused: Mapping[str, str] | None = None) -> None:
        refused = refused or {}
        if channels:
            conn.execute(insert(alert_deliveries), [
                {"firing_id": firing_id, "channel": c, "event": event, "status": "failed", "attempts": 0,
                 "next_attempt_at": None, "last_error": refused[c]} if c in refused else
                {"firing_id": firing_id, "channel": c, "event": event, "status": "pending", "attempts": 0,
                 "next_attempt_at": now} for c in channels])

    def firing_owner(self, conn: Connection, firing_id: int) -> str | None:
        """Whose job a firing is about (None: nobody's).

        Raises:
            NotFound: no such firing.
        """
        row = conn.execute(select(alert_firings.c.user).where(alert_firings.c.id == firing_id)).first()
        if row is None:
            raise NotFound(f"no alert firing {firing_id}")
        return row.user

    def acknowledge(self, conn: Connection, firing_id: int, user: str, now: float) -> dict[str, Any]:
        done = conn.execute(update(alert_firings).where(alert_firings.c.id == firing_id,
                                                        alert_firings.c.acknowledged_at.is_(None))
                            .values(acknowledged_at=now, acknowledged_by=user))
        if not done.rowcount and conn.execute(select(alert_firings.c.id).where(alert_firings.c.id == firing_id)).first() is None:
            raise NotFound(f"no alert firing {firing_id}")
        return self.firings(conn, ids=[firing_id])[0]

    def firings(self, conn: Connection, *, status: str | None = None, job_id: int | None = None,
                unacknowledged: bool = False, ids: Sequence[int] | None = None, limit: int = 100,
                user: str | None = None) -> list[dict[str, Any]]:
        """Firings newest first, each with its deliveries; `user`: only the firings about that user's jobs."""
        query = select(alert_firings)
        if user is not None:
            query = query.where(alert_firings.c.user == user)
        if status is not None:
            query = query.where(alert_firings.c.status == status)
        if job_id is not None:
            query = query.where(alert_firings.c.job_id == job_id)
        if unacknowledged:
            query = query.where(alert_firings.c.acknowledged_at.is_(None))
        if ids is not None:
            query = query.where(alert_firings.c.id.in_(list(ids)))
        found = [dict(r._mapping) for r in conn.execute(query.order_by(alert_firings.c.id.desc()).limit(limit))]
        by_id = {f["id"]: f for f in found}
        for f in found:
            f["deliveries"] = []
        if by_id:
            d = alert_deliveries.c
            for row in conn.execute(select(alert_deliveries).where(d.firing_id.in_(list(by_id))).order_by(d.id)):
                by_id[row.firing_id]["deliveries"].append(
                    {k: v for k, v in row._mapping.items() if k != "firing_id"})
        return found

    def due_deliveries(self, conn: Connection, now: float, limit: int = 50) -> list[dict[str, Any]]:
        d = alert_deliveries.c
        query = (select(alert_deliveries, alert_firings, alert_channels.c.type, alert_channels.c.config)
                 .join(alert_firings, alert_firings.c.id == d.firing_id)
                 .outerjoin(alert_channels, alert_channels.c.name == d.channel)
                 .where(d.status == "pending", or_(d.next_attempt_at.is_(None), d.next_attempt_at <= now))
                 .order_by(d.next_attempt_at, d.id).limit(limit))
        rows = []
        for row in conn.execute(query):
            m = row._mapping
            rows.append({
                "delivery_id": m[d.id], "channel": m[d.channel], "event": m[d.event], "attempts": m[d.attempts],
                "channel_type": m[alert_channels.c.type], "channel_config": m[alert_channels.c.config],
                "firing": {c.name: m[c] for c in alert_firings.c},
            })
        return rows

    def next_due(self, conn: Connection) -> float | None:
        d = alert_deliveries.c
        return conn.execute(select(func.min(d.next_attempt_at)).where(d.status == "pending")).scalar()

    def delivered(self, conn: Connection, delivery_id: int, attempts: int, now: float) -> None:
        conn.execute(update(alert_deliveries).where(alert_deliveries.c.id == delivery_id)
                     .values(status="sent", attempts=attempts, sent_at=now, next_attempt_at=None))

    def delivery_failed(self, conn: Connection, delivery_id: int, attempts: int, error: str,
                        retry_at: float | None) -> None:
        conn.execute(update(alert_deliveries).where(alert_deliveries.c.id == delivery_id).values(
            status="pending" if retry_at is not None else "failed", attempts=attempts, last_error=error[:2000],
            next_attempt_at=retry_at))


def thin_extremes(points: list[tuple[float, float | None]], max_points: int) -> list[tuple[float, float | None]]:
    """At most `max_points` points: the series cut into buckets, each keeping its lowest and highest
    (in time order), so a dip or a spike never disappears from a long job's chart."""
    if len(points) <= max_points:
        return points
    buckets = max(1, max_points // 2)
    times = np.array([p[0] for p in points])
    values = np.array([np.nan if p[1] is None else p[1] for p in points], dtype=float)
    edges = np.linspace(0, len(points), buckets + 1).astype(int)
    kept: list[tuple[float, float | None]] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi <= lo:
            continue
        chunk = values[lo:hi]
        if np.isnan(chunk).all():
            kept.append((float(times[lo]), None))
            continue
        i, j = lo + int(np.nanargmin(chunk)), lo + int(np.nanargmax(chunk))
        for k in sorted({i, j}):
            kept.append((float(times[k]), float(values[k])))
    return kept


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
