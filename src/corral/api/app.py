"""The FastAPI application: routers, error handlers, and the scheduler loop in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from corral import __version__
from corral.api import (
    accounting, alerts, dashboard, events, forecast, identity, jobs, login, monitoring, nodes, reservations, runs,
    sizing, steps, sweeps, webhooks,
)
from corral.api import artifacts as artifact_routes
from corral.api import tokens as token_routes
from corral.api.compat import mlflow, tracker_client
from corral.api.errors import install_error_handlers
from corral.api.identity import Authenticate, AuthSettings, GuardedPaths, Identifier
from corral.api.limits import BodyLimit
from corral.api.streams import StreamCap
from corral.api.submit_path import SubmitPath
from corral.core.access.identity import AccessPolicy
from corral.monitor.service import MonitorService
from corral.event_bus import EventBus
from corral.server.service import JobService
from corral.server.tokens import TokenService
from corral.tracking.compat.mlflow_tracking import MlflowTracking
from corral.tracking.artifacts import ArtifactService
from corral.tracking.service import TrackingService
from corral.web.routes import install_dashboard

if TYPE_CHECKING:
    from corral.store.tokens import TokenStore

GUARDED_PATHS = GuardedPaths(
    prefixes=("/api/", f"{tracker_client.TRACKER_PREFIX}/"),  # corral's API and MLflow's (/api/2.0), the tracker's
    changes=tracker_client.BARE_PATHS,
    open=(*nodes.OPEN_PATHS, *webhooks.OPEN_PATHS, *login.OPEN_PATHS, *tracker_client.OPEN_PATHS),
)
"""Which requests need a caller (`Authenticate`), from what the routers declare."""


def create_app(
    service: JobService, *, home: str, tracking: TrackingService, monitor: MonitorService, policy: AccessPolicy,
    tokens: TokenStore, sessions: Any, artifact_service: ArtifactService, auth: AuthSettings | None = None, listen_host: str = "127.0.0.1", webhook_token: str | None = None,
    on_started: Callable[[], None] = lambda: None, on_stopped: Callable[[], None] = lambda: None,
    stopping: Callable[[], bool] = lambda: False,
) -> FastAPI:
    """The API and dashboard on one service; `policy` says who may do what, `tokens` and `sessions` hold the
    API tokens and the dashboard's sessions."""
    bus = EventBus()
    tracking.on_metrics.append(lambda runs: bus.publish("runs", {"runs": runs}))
    monitor.events = bus

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        bus.bind(asyncio.get_running_loop())
        loop_task = asyncio.create_task(service.run(), name="corral-scheduler")
        monitor_task = asyncio.create_task(monitor.run(), name="corral-monitor")
        on_started()
        try:
            yield
        finally:
            for task in (monitor_task, loop_task):
                await stop_task(task)
            monitor.close()
            service.close()
            tracking.close()
            on_stopped()

    app = FastAPI(
        title="corral", version=__version__, lifespan=lifespan,
        description="Submit, queue, run and watch GPU training jobs.",
    )
    app.state.service = service
    app.state.home = home
    app.state.tracking = tracking
    app.state.mlflow = MlflowTracking(tracking, tracking.store)  # MLflow's API over the same runs
    app.state.artifacts = artifact_service  # corral's uploads and MLflow's (api/compat/mlflow.py)
    app.state.monitor = monitor
    app.state.events = bus
    app.state.stopping = stopping  # long-lived event streams end when the server stops
    app.state.webhook_token = webhook_token
    app.state.policy = policy
    token_service = TokenService(tokens)
    app.state.tokens = token_service
    install_error_handlers(app)
    app.add_middleware(SubmitPath, service=service)
    settings = auth or AuthSettings()
    app.add_middleware(StreamCap, limit=settings.max_streams_per_user)  # inside Authenticate: it counts per caller
    identifier = Identifier(policy=policy, tokens=token_service, sessions=sessions, settings=settings,
                            listen_host=listen_host)
    app.state.identifier = identifier
    token_service.on_change.append(identifier.clear_token_cache)
    app.add_middleware(Authenticate, identifier=identifier, paths=GUARDED_PATHS)
    app.add_middleware(BodyLimit)  # added last: the outermost, before any body is read
    app.include_router(identity.router)
    app.include_router(login.router)
    app.include_router(token_routes.router)
    app.include_router(jobs.router)
    app.include_router(sweeps.router)
    app.include_router(steps.router)
    app.include_router(steps.many)
    app.include_router(forecast.router)
    app.include_router(nodes.router)
    app.include_router(accounting.router)
    app.include_router(reservations.router)
    app.include_router(runs.router)
    app.include_router(artifact_routes.router)
    app.include_router(webhooks.router)
    app.include_router(monitoring.router)
    app.include_router(alerts.router)
    app.include_router(sizing.router)
    app.include_router(events.router)
    app.include_router(dashboard.router)
    app.include_router(tracker_client.router, prefix=tracker_client.TRACKER_PREFIX)  # TRACKER_API=http://host:8765/tracker
    app.include_router(tracker_client.router, include_in_schema=False)  # TRACKER_API=http://host:8765 (POSTs only)
    app.router.routes.insert(0, mlflow.mount())  # MLflow's API (/api/2.0), matched first: see mount()
    install_dashboard(app)
    return app


async def stop_task(task: asyncio.Task[None]) -> None:
    """Cancel a task and wait for its end, cancelling again while it runs on: a cancel that an awaited call
    swallows (Python 3.11's `asyncio.wait_for`, woken in the same turn) must not keep the server from stopping."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()
