"""`GET /api/v1/events`: server-sent events for the dashboard (and anyone with curl)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Query, Request
from starlette.responses import StreamingResponse

from corral.server.events import Event

router = APIRouter(prefix="/api/v1", tags=["events"])

TICK_S = 0.25
KEEPALIVE_S = 15.0
MAX_LOG_EVENT = 64 * 1024


@router.get("/events", summary="Server-sent events: jobs, runs, samples, alerts (and one job's log lines)",
            response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
async def events(request: Request, job: str | None = Query(None, pattern=r"^[0-9]{1,10}(_[0-9]{1,10})?$",
                                                           description="Also stream this job's new log text.")) -> StreamingResponse:
    """`event: jobs` (some jobs changed state), `runs` (metrics were stored), `samples` (a monitoring
    tick), `alerts` (something fired or resolved), and with `job`, `log` (`{"stream", "offset", "text"}`)."""
    service = request.app.state.service
    logs = None
    if job is not None:
        found = service.resolve(job)  # 404 now, not a stream that never says anything
        logs = {stream: found.log_path(stream) for stream in ("stdout", "stderr")}
        if logs["stderr"] == logs["stdout"]:
            del logs["stderr"]
    return StreamingResponse(_stream(request, logs), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(request: Request, logs: dict[str, str] | None) -> AsyncIterator[str]:
    app = request.app
    bus, service = app.state.events, app.state.service
    queue = bus.subscribe()
    generation = service.generation
    offsets = {stream: _size(path) for stream, path in (logs or {}).items()}
    last_sent = time.monotonic()
    try:
        yield "retry: 2000\n\n"
        while not app.state.stopping():
            try:
                event: Event | None = await asyncio.wait_for(queue.get(), TICK_S)
            except TimeoutError:
                event = None
            out = []
            if event is not None:
                out.append(event.encode())
            if service.generation != generation:  # coalesced: one event however many jobs changed
                generation = service.generation
                out.append(Event("jobs", {}).encode())
            for stream, path in (logs or {}).items():
                text, offsets[stream] = _read_from(path, offsets[stream])
                if text:
                    out.append(Event("log", {"stream": stream, "offset": offsets[stream], "text": text}).encode())
            if not out and time.monotonic() - last_sent > KEEPALIVE_S:
                out.append(": keepalive\n\n")
            if out:
                last_sent = time.monotonic()
                yield "".join(out)
    finally:
        bus.unsubscribe(queue)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _read_from(path: str, offset: int) -> tuple[str, int]:
    """New text of a log since `offset` (whole lines where it can), and where the next read starts."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < offset:  # truncated (a requeued job starts its log again): read from the start
                offset = 0
            if size == offset:
                return "", offset
            f.seek(offset)
            data = f.read(min(size - offset, MAX_LOG_EVENT))
    except OSError:
        return "", offset
    cut = data.rfind(b"\n") + 1
    if 0 < cut < len(data) and len(data) < MAX_LOG_EVENT:
        data = data[:cut]  # the rest of the line comes with the next read
    return data.decode("utf-8", "replace"), offset + len(data)

