"""Reads a tool makes beyond its main call: dashboard views the client has no method for, the ids
tools name jobs by, and the NaN and infinities a tracked series names where the metrics API writes null."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.errors import NotFound
from corral.mcp.views import number, public_id

if TYPE_CHECKING:
    from corral.client import Client

RESOLVE_POINTS = 100_000
"""The most points of a run's series read to tell NaN from infinities (the tracking API's limit)."""


def get_json(client: Client, path: str) -> Any:
    """GET a path of the server's API that the client has no method for (the dashboard's views)."""
    return client._request("GET", path)


def public_ids(client: Client, job_ids: set[int]) -> dict[int, int | str]:
    """corral's internal ids of jobs (as runs carry them) -> the ids the tools name them by: a task's `12_3`."""
    out: dict[int, int | str] = {}
    for job_id in sorted(job_ids):
        try:
            out[job_id] = public_id(client.get(job_id))
        except NotFound:  # a run may outlive its job's record (another server's, or purged)
            continue
    return out


def tracked_values(client: Client, job_id: int, metric: str, points: list[list[Any]]) -> list[list[Any]]:
    """`points` of a tracked metric with the values the server wrote as null (its JSON has no NaN or
    infinity) read from the run's own series, which names them; any it cannot place read "NaN"."""
    runs = client.runs(job=job_id, limit=100)
    run = next((r for r in runs if metric in (r.get("metrics") or {})), None)  # the newest, as the server picks
    named: dict[float, Any] = {}
    if run is not None:
        data = client.series(run["id"], metric, max_points=RESOLVE_POINTS)
        named = {round(float(t), 3): number(v) for t, v in zip(data.get("times") or [], data.get("values") or [])
                 if isinstance(v, str)}
    return [[t, named.get(round(float(t), 3), "NaN") if v is None else v] for t, v in points]
