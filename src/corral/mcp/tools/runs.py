"""The tools about tracked runs: list them, and read a run's metrics by step."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt, StrictStr

from corral.errors import InvalidRequest
from corral.mcp import bounds
from corral.mcp.field_names import fields_named
from corral.mcp.inputs import job_ref
from corral.mcp.lookups import public_ids
from corral.mcp.results import RunList, RunMetrics
from corral.mcp.tools.calls import ToolCalls
from corral.mcp.views import number, run_view, series_summary

MAX_KEYS = 10


class RunTools(ToolCalls):
    """list_runs and run_metrics."""

    def list_runs(
        self,
        project: Annotated[str | None, Field(max_length=200, description="Only this project's runs.")] = None,
        state: Annotated[Literal["running", "finished", "failed", "crashed"] | None, Field(
            description="Only runs in this state.")] = None,
        job_id: Annotated[StrictInt | StrictStr | None, Field(description=(
            "Only the runs of this job: 12, or \"12_3\" for task 3 of array 12 (a workloadId as it is)."))] = None,
        limit: Annotated[StrictInt, Field(ge=1, le=100, description=(
            "At most this many runs, newest first (fewer when they are large: an answer stays short)."))] = 20,
    ) -> RunList:
        """Tracked runs, newest first: config, state, and each metric's last, min and max."""
        with self._client() as client:
            job = None
            if job_id is not None:
                ref = job_ref(job_id, "job_id")
                with fields_named({}, job="job_id"):
                    job = int(client.get(ref)["id"]) if "_" in ref else int(ref)
            runs = client.runs(project=project, state=state, job=job, limit=limit + 1)
            ids = public_ids(client, {r["job_id"] for r in runs[:limit] if isinstance(r.get("job_id"), int)})
        matched = [run_view(r, ids.get(r["job_id"]) if isinstance(r.get("job_id"), int) else None) for r in runs[:limit]]
        view: RunList = {"runs": [], "total": len(matched), "more": len(runs) > limit, "truncated": False}
        view["runs"], dropped = bounds.fit_items(matched, bounds.RESULT_BYTES - bounds.json_size(view))
        view["truncated"] = dropped or view["more"]
        return view

    def run_metrics(
        self,
        run: Annotated[StrictInt | StrictStr, Field(description="The run's id or uid (see list_runs).")],
        keys: Annotated[list[StrictStr] | None, Field(min_length=1, max_length=MAX_KEYS, description=(
            "Metric names, e.g. [\"train/loss\", \"val/acc\"]; leave out to list the run's metrics."))] = None,
        maxPoints: Annotated[StrictInt, Field(ge=2, le=bounds.MAX_POINTS, description=(  # noqa: N803
            "Points per metric (fewer when several are asked for: 1000 in all), keeping each bucket's low and "
            "high."))] = bounds.DEFAULT_POINTS,
    ) -> RunMetrics:
        """A run's tracked metrics by step, downsampled."""
        with self._client() as client, fields_named({"key": "keys", "max_points": "maxPoints", "ref": "run"},
                                                    missing="run"):
            info = client.get_run(run)
            available = sorted(info.get("metrics") or {})
            series = []
            per_key = max(2, min(maxPoints, bounds.RUN_METRICS_TOTAL_POINTS // len(keys or [1])))
            for key in keys or []:
                if key not in available:
                    raise InvalidRequest("keys", f"run {info['id']} has no metric {key!r}",
                                         f"it has: {', '.join(available[:30]) or 'none yet'}")
                data = client.series(info["id"], key, max_points=per_key)
                points = [[step, number(value)] for step, value in zip(data["steps"], data["values"])]
                series.append({"key": key, "count": data["count"], "downsampled": data["downsampled"],
                               "points": points, "summary": series_summary(data["values"])})
        return {"run": str(info["id"]), "series": series, "available_keys": available[:100]}
