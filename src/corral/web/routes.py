"""Serving the dashboard: its static files, and index.html for every page path (the pages route themselves)."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
PAGES = ("/", "/queue", "/jobs/{job_id}", "/runs", "/runs/{run_id}", "/compare", "/alerts", "/plan", "/login", "/new",
         "/sweeps/{sweep_id}")

router = APIRouter(include_in_schema=False)


def _index() -> Response:
    # no-cache: a new corral version's pages are picked up at once; the files themselves are small
    return FileResponse(os.path.join(STATIC_DIR, "index.html"), headers={"Cache-Control": "no-cache"})


for _path in PAGES:
    router.add_api_route(_path, _index, methods=["GET", "HEAD"])


class _RevalidatedFiles(StaticFiles):
    """Static files the browser always revalidates (a 304 when unchanged): after an upgrade no
    page runs a mix of old and new modules."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


def install_dashboard(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", _RevalidatedFiles(directory=STATIC_DIR, check_dir=False), name="static")
