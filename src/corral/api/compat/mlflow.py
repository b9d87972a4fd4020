"""MLflow's REST API (`/api/2.0/mlflow/...`, `/api/2.0/mlflow-artifacts/...`): the `mlflow` client logs to corral.

`MLFLOW_TRACKING_URI=http://<corral server>` and a script instrumented with MLflow logs its runs into
corral unchanged; `MLFLOW_TRACKING_TOKEN` is sent as `Authorization: Bearer`, a corral API token. The
routes are thin: each checks who may act (as corral's own run routes: anyone sees, a run's owner or
an admin changes; creating needs the submit scope) and calls one `MlflowTracking` method
(`corral.tracking.compat.mlflow_tracking`), which translates. Errors come back in MLflow's shape,
`{"error_code": ..., "message": ...}`, with MLflow's statuses (`mlflow.exceptions`), since the client
parses them: RESOURCE_DOES_NOT_EXIST 404, INVALID_PARAMETER_VALUE and RESOURCE_ALREADY_EXISTS 400,
PERMISSION_DENIED 403. Left out of /openapi.json: MLflow documents this API.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount

from corral.api.identity import caller_of, policy_of
from corral.errors import Conflict, CorralError, Forbidden, InvalidRequest, NotFound, RateLimited, Unauthenticated
from corral.tracking.artifacts import ArtifactService
from corral.tracking.compat.mlflow_artifacts import artifact_target
from corral.tracking.compat.mlflow_tracking import MlflowTracking

router = APIRouter(include_in_schema=False)
MOUNT = "/api/2.0"
PREFIX = "/mlflow"  # within MOUNT
ARTIFACTS = "/mlflow-artifacts/artifacts"


def mount() -> Mount:
    """The routes under `/api/2.0`, as one entry of the app's routes: matching a path against them costs
    the other routes one prefix check, and an MLflow call never walks the whole API's list."""
    return Mount(MOUNT, routes=list(router.routes))

_CODES: list[tuple[type[CorralError], str, int]] = [
    (NotFound, "RESOURCE_DOES_NOT_EXIST", 404),
    (Conflict, "RESOURCE_ALREADY_EXISTS", 400),
    (InvalidRequest, "INVALID_PARAMETER_VALUE", 400),
    (Forbidden, "PERMISSION_DENIED", 403),
    (Unauthenticated, "UNAUTHENTICATED", 401),
    (RateLimited, "REQUEST_LIMIT_EXCEEDED", 429),
]


def mlflow_error(error: CorralError) -> Response:
    """A corral error as MLflow answers it."""
    code, status = next(((c, s) for kind, c, s in _CODES if isinstance(error, kind)), ("INTERNAL_ERROR", error.status))
    if status == 503:
        code = "TEMPORARILY_UNAVAILABLE"
    response = Response(json.dumps({"error_code": code, "message": error.message}), status_code=status,
                        media_type="application/json")
    if isinstance(error, RateLimited):
        response.headers["Retry-After"] = str(max(1, round(error.retry_after + 0.5)))
    return response


def _mlflow(request: Request) -> MlflowTracking:
    return request.app.state.mlflow


def _artifacts(request: Request) -> ArtifactService:
    return request.app.state.artifacts


async def _body(request: Request) -> dict[str, Any]:
    if request.method == "GET":
        return dict(request.query_params)
    if request.method != "POST":  # an artifact's upload: its body is the file, streamed by the handler
        return {}
    raw = await request.body()
    if not raw.strip():
        return {}
    try:  # orjson: fast, and it refuses what is hostile (lone surrogates, nesting past 1,024 levels)
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"is not JSON: {exc}", "send a JSON object") from None
    if not isinstance(body, dict):
        raise InvalidRequest("body", f"must be a JSON object, got {type(body).__name__}")
    return body


Handler = Callable[[Request, dict[str, Any]], Awaitable[Any]]


def _route(path: str, *methods: str) -> Callable[[Handler], Handler]:
    """Register `handler(request, body)` at `path`; what it returns is the JSON answer, a CorralError MLflow's error."""

    def register(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            try:
                result = await handler(request, await _body(request))
            except CorralError as exc:
                return mlflow_error(exc)
            if isinstance(result, Response):
                return result
            return Response(json.dumps(result, allow_nan=False), media_type="application/json")

        endpoint.__name__ = f"mlflow_{handler.__name__.lstrip('_')}"
        router.add_api_route(path, endpoint, methods=list(methods))
        return handler

    return register


async def _owned(request: Request, body: dict[str, Any], action: str) -> int:
    """The corral id of the run `run_id` (or `run_uuid`) names, if the caller may change it."""
    ref = body.get("run_id") or body.get("run_uuid")
    if ref is None:
        raise InvalidRequest("run_id", "missing", "give the run_id that runs/create answered")
    run_id, owner = await _mlflow(request).run_owner(ref)
    policy_of(request).check_manage(caller_of(request), owner, None, f"{action} run {ref}")
    return run_id


def _may_manage_all(request: Request) -> Callable[[set[str]], bool]:
    caller, policy = caller_of(request), policy_of(request)
    return lambda owners: all(policy.may_manage(caller, owner) for owner in owners)


# -- experiments ---------------------------------------------------------------------------------

@_route(f"{PREFIX}/experiments/create", "POST")
async def _create_experiment(request: Request, body: dict[str, Any]) -> Any:
    policy_of(request).require(caller_of(request), "submit", "creating an experiment")
    return await _mlflow(request).create_experiment(body)


@_route(f"{PREFIX}/experiments/get", "GET")
async def _get_experiment(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).get_experiment(body.get("experiment_id"))


@_route(f"{PREFIX}/experiments/get-by-name", "GET")
async def _get_experiment_by_name(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).get_experiment_by_name(body.get("experiment_name"))


@_route(f"{PREFIX}/experiments/search", "POST", "GET")
async def _search_experiments(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).search_experiments(body)


@_route(f"{PREFIX}/experiments/delete", "POST")
async def _delete_experiment(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).change_experiment(body, "deleted", _may_manage_all(request), "delete")


@_route(f"{PREFIX}/experiments/restore", "POST")
async def _restore_experiment(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).change_experiment(body, "active", _may_manage_all(request), "restore")


@_route(f"{PREFIX}/experiments/set-experiment-tag", "POST")
async def _set_experiment_tag(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).change_experiment(body, None, _may_manage_all(request), "tag")


# -- runs ----------------------------------------------------------------------------------------

@_route(f"{PREFIX}/runs/create", "POST")
async def _create_run(request: Request, body: dict[str, Any]) -> Any:
    caller, policy = caller_of(request), policy_of(request)
    policy.require(caller, "submit", "creating a run")

    def check_job(job: dict[str, Any]) -> None:  # a run of a job is its owner's to log, as POST /api/v1/runs
        policy.check_manage(caller, job["user"], job["account"], f"tracking a run of job {job['id']}")

    return await _mlflow(request).create_run(body, user=caller.user, check_job=check_job)


@_route(f"{PREFIX}/runs/get", "GET")
async def _get_run(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).get_run(body.get("run_id") or body.get("run_uuid"))


@_route(f"{PREFIX}/runs/search", "POST")
async def _search_runs(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).search_runs(body)


@_route(f"{PREFIX}/runs/update", "POST")
async def _update_run(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).update_run(await _owned(request, body, "updating"), body)


@_route(f"{PREFIX}/runs/delete", "POST")
async def _delete_run(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).set_lifecycle(await _owned(request, body, "deleting"), "deleted")


@_route(f"{PREFIX}/runs/restore", "POST")
async def _restore_run(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).set_lifecycle(await _owned(request, body, "restoring"), "active")


@_route(f"{PREFIX}/runs/log-metric", "POST")
async def _log_metric(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).log_metric(await _owned(request, body, "logging a metric to"), body)


@_route(f"{PREFIX}/runs/log-batch", "POST")
async def _log_batch(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).log_batch(await _owned(request, body, "logging to"), body)


@_route(f"{PREFIX}/runs/log-parameter", "POST")
async def _log_param(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).log_param(await _owned(request, body, "logging a parameter to"), body)


@_route(f"{PREFIX}/runs/set-tag", "POST")
async def _set_tag(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).set_tag(await _owned(request, body, "tagging"), body)


@_route(f"{PREFIX}/runs/delete-tag", "POST")
async def _delete_tag(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).delete_tag(await _owned(request, body, "untagging"), body)


@_route(f"{PREFIX}/metrics/get-history", "GET")
async def _metric_history(request: Request, body: dict[str, Any]) -> Any:
    return await _mlflow(request).metric_history(body.get("run_id") or body.get("run_uuid"), body.get("metric_key"),
                                                 body.get("max_results"), body.get("page_token"))


@_route(f"{PREFIX}/logged-models/search", "POST")
async def _search_logged_models(request: Request, body: dict[str, Any]) -> Any:
    """MLflow 3's logged models, which corral does not keep: none. The client asks before it lists or
    downloads a run's artifacts by a path below their root (a model of that name would be listed too)."""
    return {"models": []}


# -- artifacts: the mlflow-artifacts proxy -------------------------------------------------------
# Kept by corral's artifact service (`corral.tracking.compat.mlflow_artifacts`): what the mlflow client logs
# is a run artifact like any other, and any uploaded artifact of the run is the mlflow client's to read.

async def _artifact_run(request: Request, path: str, action: str) -> tuple[int, str, str]:
    """(run id, owner, path within the run) of `<experiment>/<run>/artifacts/<path>`, if the caller owns
    the run (corral's rule: only a run's owner or an admin reads or writes its artifacts)."""
    uid, rest = artifact_target(path)
    run_id, owner = await _mlflow(request).run_owner(uid)
    policy_of(request).check_manage(caller_of(request), owner, None, f"{action} the artifacts of run {uid}")
    return run_id, owner, rest


@_route(ARTIFACTS, "GET")
async def _list_artifacts(request: Request, body: dict[str, Any]) -> Any:
    path = str(body.get("path") or "").strip("/")
    try:
        run_id, _, rest = await _artifact_run(request, path, "listing")
    except InvalidRequest:
        if path.count("/") < 2:  # above a run's root (an experiment): nothing listed, as nothing is kept there
            return {}
        raise
    files = await _artifacts(request).listing(run_id, rest)
    return {"files": [{"path": f.name, "is_dir": f.is_dir, **({"file_size": f.size} if f.size is not None else {})}
                      for f in files]} if files else {}


@_route(ARTIFACTS + "/{path:path}", "PUT")
async def _upload_artifact(request: Request, body: dict[str, Any]) -> Any:
    run_id, owner, rest = await _artifact_run(request, request.path_params["path"], "uploading")
    length = request.headers.get("content-length", "")
    await _artifacts(request).put_stream(run_id, owner, rest, request.stream(),
                                         declared=int(length) if length.isdigit() else None)
    return {}


@_route(ARTIFACTS + "/{path:path}", "GET")
async def _download_artifact(request: Request, body: dict[str, Any]) -> Any:
    run_id, owner, rest = await _artifact_run(request, request.path_params["path"], "downloading")
    if not rest:
        raise NotFound("the root of a run's artifacts is a directory: list it")
    found = await _artifacts(request).open(run_id, owner, rest)
    return StreamingResponse(found.chunks(None), media_type="application/octet-stream",
                             headers={"Content-Length": str(found.size)})


@_route(ARTIFACTS + "/{path:path}", "DELETE")
async def _delete_artifact(request: Request, body: dict[str, Any]) -> Any:
    run_id, _, rest = await _artifact_run(request, request.path_params["path"], "deleting")
    await _artifacts(request).delete(run_id, rest)
    return {}
