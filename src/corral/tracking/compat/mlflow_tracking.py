"""MLflow's tracking API on corral's runs: what `/api/2.0/mlflow/...` does, in MLflow's shapes.

The model, translated at this boundary only:
- An **experiment** is a corral project; its id is the project's id as a string, and "0" (MLflow's
  default experiment) is the project `default`. Lifecycle (a soft delete), tags and an artifact
  location are kept beside it (`store.mlflow`).
- A **run** is a corral run; its MLflow `run_id` is the run's uid (new runs get 32 hex digits, as
  MLflow's). Status RUNNING/FINISHED/FAILED/KILLED is corral's running/finished/failed/crashed;
  times are milliseconds. Params are the run's config (as text); metrics its series (a metric's step
  only moves forward, as corral's SDK's: a point at a step not above the last is not stored);
  tags are kept as MLflow's key-value tags, `mlflow.runName` being the run's name and `mlflow.user`
  its owner. `artifact_uri` is `mlflow-artifacts:/<experiment>/<run>/artifacts`, so the client
  uploads through the server (`corral.tracking.compat.mlflow_artifacts`).
- **Attached to its job**: a run whose create carries the tag `corral.job_id` (corral puts it in
  every job's `MLFLOW_RUN_CONTEXT`, which the mlflow client turns into tags; a user may set it too)
  is the job's run, checked as corral's own create checks a `job_id`: the job must exist and be
  the caller's (or an admin's or coordinator's to track).

Who may do what is the caller's business (`api.compat.mlflow` checks owner/admin before a change);
this module is handed the checks it needs (`check_job`, `may_manage`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import Connection

from corral.core.dialects import mlflow_requests as M
from corral.core.tracking.metric_series import Points
from corral.core.tracking.metrics_batch import MetricsBatch
from corral.core.dialects.mlflow_filter import RunView, holds, matches, parse_filter, parse_order_by, sort_runs
from corral.core.tracking.nonfinite import json_number
from corral.core.tracking.run_requests import parse_run_request
from corral.errors import Conflict, Forbidden, InvalidRequest, NotFound
from corral.store import mlflow as X
from corral.store.runs import RunStore
from corral.tracking.service import TrackingService

JOB_TAG = "corral.job_id"
RUN_NAME_TAG, USER_TAG = "mlflow.runName", "mlflow.user"
ARTIFACT_SCHEME = "mlflow-artifacts:"


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(round(seconds * 1000))


class MlflowTracking:
    """MLflow's operations over the tracking service (its writer, its store)."""

    def __init__(self, tracking: TrackingService, runs: RunStore, clock: Callable[[], float] = time.time) -> None:
        self.tracking = tracking
        self.runs = runs
        self.clock = clock

    # -- experiments ------------------------------------------------------------------------------

    def _project(self, conn: Connection, experiment_id: str) -> dict[str, Any]:
        M.experiment_id(experiment_id)
        if experiment_id == M.DEFAULT_EXPERIMENT_ID:
            pid = X.project_id(conn, M.DEFAULT_PROJECT)
            if pid is None:  # MLflow's default experiment always exists
                pid = X.create_experiment(conn, M.DEFAULT_PROJECT, None, {}, self.clock())
        else:
            pid = int(experiment_id)
        found = X.experiments(conn, ids=[pid])
        if not found:
            raise NotFound(f"No Experiment with id={experiment_id} exists")
        return found[0]

    @staticmethod
    def experiment_json(row: dict[str, Any]) -> dict[str, Any]:
        eid = M.DEFAULT_EXPERIMENT_ID if row["name"] == M.DEFAULT_PROJECT else str(row["id"])
        return {
            "experiment_id": eid, "name": row["name"],
            "artifact_location": row["artifact_location"] or f"{ARTIFACT_SCHEME}/{eid}",
            "lifecycle_stage": row["lifecycle_stage"], "creation_time": _ms(row["created"]),
            "last_update_time": _ms(row["last_update_time"]),
            "tags": [{"key": k, "value": v} for k, v in sorted(row["tags"].items())],
        }

    async def create_experiment(self, body: dict[str, Any]) -> dict[str, Any]:
        name = M.text(body, "name", required=True, limit=200)
        assert name is not None
        if not name.isprintable():
            raise InvalidRequest("name", f"{name!r} holds control characters", "an experiment's name is printable text")
        location = M.text(body, "artifact_location", limit=1000)
        tags = dict(M.pairs(body.get("tags"), "tags", M.MAX_TAGS, M.MAX_TAG_VALUE))

        def apply(conn: Connection) -> int:
            if X.project_id(conn, name) is not None:
                raise Conflict(f"Experiment(name={name}) already exists. Error: the project {name!r} exists")
            return X.create_experiment(conn, name, location, tags, self.clock())

        pid = await self.tracking.transact(apply)
        return {"experiment_id": M.DEFAULT_EXPERIMENT_ID if name == M.DEFAULT_PROJECT else str(pid)}

    async def get_experiment(self, experiment_id: Any) -> dict[str, Any]:
        eid = M.experiment_id(experiment_id)
        row = await self.tracking.transact(lambda conn: self._project(conn, eid))
        return {"experiment": self.experiment_json(row)}

    async def get_experiment_by_name(self, name: Any) -> dict[str, Any]:
        name = M.text({"experiment_name": name}, "experiment_name", required=True, limit=10_000)
        found = await self.tracking.read(lambda conn: X.experiments(conn, name=name))
        if not found:
            raise NotFound(f"Could not find experiment with name '{name}'")
        return {"experiment": self.experiment_json(found[0])}

    async def search_experiments(self, body: dict[str, Any]) -> dict[str, Any]:
        stages = M.view_type(body.get("view_type"), "view_type")
        limit = M.max_results(body.get("max_results"), 1000)
        offset = M.page_token(body.get("page_token"))
        name_like = _name_filter(body.get("filter"))
        rows = await self.tracking.read(lambda conn: X.experiments(conn))
        chosen = [r for r in rows if r["lifecycle_stage"] in stages and (name_like is None or name_like(r["name"]))]
        chosen.sort(key=lambda r: (-(r["created"] or 0), r["id"]))  # MLflow: newest first, then by id
        page = chosen[offset:offset + limit]
        out: dict[str, Any] = {"experiments": [self.experiment_json(r) for r in page]}
        if offset + limit < len(chosen):
            out["next_page_token"] = M.next_page_token(offset + limit)
        return out

    async def change_experiment(self, body: dict[str, Any], stage: str | None, may_manage: Callable[[set[str]], bool],
                                what: str) -> dict[str, Any]:
        """Delete or restore (`stage`), or set a tag of, an experiment: its runs' owners' or an admin's.

        Raises:
            Forbidden: the project holds runs that `may_manage` refuses.
        """
        eid = M.experiment_id(body.get("experiment_id"))
        tags = None
        if stage is None:
            tags = {M.key(body.get("key"), "key"): M.value_text(body.get("value"), "value", M.MAX_TAG_VALUE)}

        def apply(conn: Connection) -> None:
            row = self._project(conn, eid)
            if not may_manage(X.owners(conn, row["id"])):
                raise Forbidden(f"experiment {eid} holds other users' runs; only an admin may {what} it")
            if stage == X.DELETED and row["name"] == M.DEFAULT_PROJECT:
                raise InvalidRequest("experiment_id", "Cannot delete the default experiment '0'")
            X.update_experiment(conn, row["id"], self.clock(), lifecycle_stage=stage, tags=tags)

        await self.tracking.transact(apply)
        return {}

    # -- runs -------------------------------------------------------------------------------------

    async def run_owner(self, run_id: Any) -> tuple[int, str]:
        """(corral's id, owner) of the run an MLflow run_id names."""
        ref = _run_ref(run_id)
        return await self.tracking.owner(ref)

    async def create_run(self, body: dict[str, Any], *, user: str,
                         check_job: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """A new run in the experiment `experiment_id` ("0" when missing), owned by `user`, or by its
        job's owner when a `corral.job_id` tag attaches it (which `check_job` must allow)."""
        eid = M.experiment_id(body.get("experiment_id") or M.DEFAULT_EXPERIMENT_ID)
        tags = dict(M.pairs(body.get("tags"), "tags", M.MAX_ITEMS, M.MAX_TAG_VALUE))
        name = M.text(body, "run_name", limit=200) or tags.get(RUN_NAME_TAG)
        start = M.integer(body.get("start_time"), "start_time", _ms(self.clock()) or 0)
        job_id = None
        if JOB_TAG in tags:
            job_id = M.integer(tags[JOB_TAG], f"tags.{JOB_TAG}", low=1)
        uid = uuid.uuid4().hex
        # corral's own create checks the name, the job and its owner, as POST /api/v1/runs does
        request = parse_run_request({"name": name or uid[:8], "uid": uid, "job_id": job_id, "start_time": start / 1000})
        job = None
        if request.job_id is not None:
            job = self.tracking.job_info(request.job_id)
            if job is None:
                raise InvalidRequest(f"tags.{JOB_TAG}", f"job {request.job_id} does not exist",
                                     "name a job of yours that was submitted, or leave the tag out")
            check_job(job)

        def apply(conn: Connection) -> int:
            project = self._project(conn, eid)
            if project["lifecycle_stage"] != X.ACTIVE:
                raise InvalidRequest("experiment_id", f"The experiment {eid} must be in the 'active' state")
            named = dataclasses.replace(request, project=project["name"])
            run_id, _ = self.runs.create(conn, named, user=user, now=self.clock(), job=job)
            owner = (job or {}).get("user") or user
            X.set_tags(conn, run_id, [*((k, v) for k, v in tags.items() if k != RUN_NAME_TAG), (USER_TAG, owner)])
            return run_id

        run_id = await self.tracking.transact(apply)
        run = await self.tracking.read(lambda conn: self._runs_json(conn, [run_id])[0])
        self.tracking.notify([{"id": run_id, "uid": uid, "job_id": job_id, "last_step": None, "state": "running"}])
        return {"run": run}

    async def get_run(self, run_id: Any) -> dict[str, Any]:
        ref = _run_ref(run_id)
        return {"run": await self.tracking.read(lambda conn: self._runs_json(conn, [self.runs.resolve(conn, ref)])[0])}

    async def update_run(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        state = M.status(body.get("status"))
        end = body.get("end_time")
        end_s = None if end is None else M.integer(end, "end_time") / 1000
        name = M.text(body, "run_name", limit=200)
        if name is not None:
            name = parse_run_request({"name": name}).name
        if state in ("finished", "failed", "crashed") and end_s is None:
            end_s = self.clock()

        def apply(conn: Connection) -> tuple[dict[str, Any], dict[str, Any]]:
            self._active(conn, run_id)
            X.set_run(conn, run_id, state=state, end_time=end_s, name=name)
            run = self.runs.get(conn, run_id)
            return self._runs_json(conn, [run_id])[0], run

        mlflow_run, run = await self.tracking.transact(apply)
        self.tracking.notify([{"id": run_id, "uid": run["uid"], "job_id": run["job_id"], "last_step": run["last_step"],
                               "state": run["state"]}])
        return {"run_info": mlflow_run["info"]}

    async def set_lifecycle(self, run_id: int, stage: str) -> dict[str, Any]:
        await self.tracking.transact(lambda conn: X.set_lifecycle(conn, run_id, stage))
        return {}

    async def log_batch(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        series, params, tags = M.batch(body)
        await self._log(run_id, series, params, tags)
        return {}

    async def log_metric(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        await self._log(run_id, M.by_key([M.metric(body, "metric")]), [], [])
        return {}

    async def log_param(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        param = (M.key(body.get("key"), "key"), M.value_text(body.get("value"), "value", M.MAX_PARAM_VALUE))
        await self._log(run_id, {}, [param], [])
        return {}

    async def set_tag(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        tag = (M.key(body.get("key"), "key"), M.value_text(body.get("value"), "value", M.MAX_TAG_VALUE))
        await self._log(run_id, {}, [], [tag])
        return {}

    async def delete_tag(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        key = M.key(body.get("key"), "key")

        def apply(conn: Connection) -> None:
            self._active(conn, run_id)
            if not X.delete_tag(conn, run_id, key):
                raise NotFound(f"No tag with name: {key} in run with id {run_id}")

        await self.tracking.transact(apply)
        return {}

    async def _log(self, run_id: int, series: dict[str, Points], params: list[tuple[str, str]],
                   tags: list[tuple[str, str]]) -> None:
        metrics = MetricsBatch(None, series)
        given = dict(params)

        def apply(conn: Connection) -> dict[str, Any] | None:
            self._active(conn, run_id)
            config = self.runs.get(conn, run_id)["config"] if given else {}
            for key, value in given.items():  # MLflow: a param is set once; the same value again is fine
                if key in config and _param_text(config[key]) != value:
                    raise InvalidRequest(
                        f"params.{key}", f"Changing param values is not allowed. Param with key='{key}' was already "
                        f"logged with value='{_param_text(config[key])}' for run ID='{run_id}'. "
                        f"Attempted logging new value '{value}'")
            if given:
                self.runs.merge_params(conn, run_id, given)
            names = [v for k, v in tags if k == RUN_NAME_TAG]
            if names:
                X.set_run(conn, run_id, state=None, end_time=None, name=parse_run_request({"name": names[-1]}).name)
            X.set_tags(conn, run_id, [(k, v) for k, v in tags if k != RUN_NAME_TAG])
            if metrics.series and self.runs.append(conn, run_id, metrics).accepted:
                job_id, uid = self.runs.identity(conn, run_id)
                last = max(int(p.steps[-1]) for p in metrics.series.values())
                return {"id": run_id, "uid": uid, "job_id": job_id, "last_step": last}
            return None

        changed = await self.tracking.transact(apply)
        if changed is not None:  # the live views (dashboard charts), as corral's own batches tell them
            self.tracking.notify([changed])

    def _active(self, conn: Connection, run_id: int) -> None:
        if X.lifecycle(conn, run_id) != X.ACTIVE:
            raise InvalidRequest("run_id", f"The run {run_id} must be in the 'active' state. Current state is deleted.")

    async def search_runs(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = body.get("experiment_ids") or []
        if not isinstance(ids, list) or not ids:
            raise InvalidRequest("experiment_ids", "must be a non-empty list", 'e.g. ["0"]')
        eids = [M.experiment_id(i, "experiment_ids") for i in ids]
        clauses = parse_filter(M.text(body, "filter", limit=100_000))
        order = body.get("order_by") or []
        if not isinstance(order, list):
            raise InvalidRequest("order_by", "must be a list", 'e.g. ["metrics.acc DESC"]')
        keys = parse_order_by(order)
        stages = M.view_type(body.get("run_view_type"), "run_view_type")
        limit = M.max_results(body.get("max_results"), 1000)
        offset = M.page_token(body.get("page_token"))

        def read(conn: Connection) -> tuple[list[dict[str, Any]], bool]:
            pids = []
            for eid in eids:
                try:
                    pids.append(self._project_read(conn, eid))
                except NotFound:
                    continue  # as MLflow: an unknown experiment holds no runs
            runs = {r["info"]["run_id"]: r for r in self._runs_json(conn, X.run_ids(conn, pids))}
            views = [_view(r) for r in runs.values()]
            chosen = [v for v in views if v.attributes["lifecycle_stage"] in stages and matches(clauses, v)]
            ordered = [runs[v.attributes["run_id"]] for v in sort_runs(chosen, keys)]
            return ordered[offset:offset + limit], offset + limit < len(ordered)

        page, more = await self.tracking.read(read)
        out: dict[str, Any] = {"runs": page}
        if more:
            out["next_page_token"] = M.next_page_token(offset + limit)
        return out

    def _project_read(self, conn: Connection, eid: str) -> int:
        if eid == M.DEFAULT_EXPERIMENT_ID:
            pid = X.project_id(conn, M.DEFAULT_PROJECT)
            if pid is None:
                raise NotFound("no default project yet")
            return pid
        return int(eid)

    async def metric_history(self, run_id: Any, key: Any, max_results: Any, page_token: Any) -> dict[str, Any]:
        ref = _run_ref(run_id)
        metric_key = M.key(key, "metric_key")
        limit = M.max_results(max_results, 25_000_000, limit=25_000_000)
        offset = M.page_token(page_token)

        def read(conn: Connection) -> tuple[Points, int]:
            points = X.history(conn, self.runs.resolve(conn, ref), metric_key)
            return points.take(slice(offset, offset + limit)), len(points)

        points, total = await self.tracking.read(read)
        values = points.values.tolist() if np.isfinite(points.values).all() else [json_number(v) for v in points.values.tolist()]
        out: dict[str, Any] = {"metrics": [
            {"key": metric_key, "value": v, "timestamp": int(round(t * 1000)), "step": s}
            for s, v, t in zip(points.steps.tolist(), values, points.times.tolist())]}
        if offset + limit < total:
            out["next_page_token"] = M.next_page_token(offset + limit)
        return out

    # -- shapes -----------------------------------------------------------------------------------

    def _runs_json(self, conn: Connection, ids: list[int]) -> list[dict[str, Any]]:
        if not ids:
            return []
        rows = self.runs.many(conn, ids)
        projects = X.run_project_ids(conn, ids)
        names = {row["id"]: row["name"] for row in X.experiments(conn, ids=sorted(set(projects.values())))}
        stages = X.lifecycles(conn, ids)
        tags = X.tags(conn, ids)
        out = []
        for run in rows:
            pid = projects[run["id"]]
            eid = M.DEFAULT_EXPERIMENT_ID if names.get(pid) == M.DEFAULT_PROJECT else str(pid)
            out.append(run_json(run, eid, stages[run["id"]], tags[run["id"]]))
        return out


def run_json(run: dict[str, Any], experiment_id: str, stage: str, tags: dict[str, str]) -> dict[str, Any]:
    """A corral run (as `RunStore.get` gives it) in MLflow's `Run` shape."""
    uid = run["uid"]
    info: dict[str, Any] = {
        "run_id": uid, "run_uuid": uid, "run_name": run["name"], "experiment_id": experiment_id,
        "user_id": run["user"], "status": M.STATE_TO_STATUS.get(run["state"], "RUNNING"),
        "start_time": _ms(run["start_time"]), "artifact_uri": f"{ARTIFACT_SCHEME}/{experiment_id}/{uid}/artifacts",
        "lifecycle_stage": stage,
    }
    if run["end_time"] is not None:
        info["end_time"] = _ms(run["end_time"])
    all_tags = {t: "" for t in run["tags"]} | dict(tags) | {RUN_NAME_TAG: run["name"], USER_TAG: run["user"]}
    if run["job_id"] is not None:
        all_tags[JOB_TAG] = str(run["job_id"])
    metrics = [{"key": k, "value": m["last"], "timestamp": _ms(m["last_time"]), "step": m["last_step"]}
               for k, m in sorted(run["metrics"].items())]
    params = [{"key": k, "value": _param_text(v)} for k, v in sorted(run["config"].items())]
    return {"info": info, "data": {"metrics": metrics, "params": params,
                                   "tags": [{"key": k, "value": v} for k, v in sorted(all_tags.items())]},
            "inputs": {}}


def _view(run: dict[str, Any]) -> RunView:
    info, data = run["info"], run["data"]
    metrics = {m["key"]: (m["value"] if isinstance(m["value"], float | int) else float(m["value"])) for m in data["metrics"]}
    return RunView(
        attributes={"status": info["status"], "run_name": info["run_name"], "run_id": info["run_id"],
                    "user_id": info["user_id"], "artifact_uri": info["artifact_uri"],
                    "lifecycle_stage": info["lifecycle_stage"], "start_time": info["start_time"],
                    "end_time": info.get("end_time")},
        metrics=metrics, params={p["key"]: p["value"] for p in data["params"]},
        tags={t["key"]: t["value"] for t in data["tags"]})


def _param_text(value: Any) -> str:
    """A config value as MLflow's params show it: text as it is, anything else as JSON would write it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return {True: "True", False: "False", None: "None"}[value]
    if isinstance(value, (int, float)):
        return repr(value) if math.isfinite(value) else str(value)
    return json.dumps(value, sort_keys=True)


def _run_ref(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 64 or not all(c.isascii() and (c.isalnum() or c in "_-") for c in value):
        raise InvalidRequest("run_id", f"{value!r} is not a run id", "give the run_id that runs/create answered")
    return value


def _name_filter(text: Any) -> Callable[[str], bool] | None:
    """search_experiments' filter on names (`name = 'x'`, `name LIKE 'x%'`); None: every experiment."""
    if text in (None, ""):
        return None
    if not isinstance(text, str):
        raise InvalidRequest("filter", f"{text!r} is not a filter")
    clauses = parse_filter(text, attributes=("name",))
    return lambda name: all(holds(c, name) for c in clauses)
