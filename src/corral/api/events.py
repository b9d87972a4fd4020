"""`GET /api/v1/events`: server-sent events for the dashboard (and anyone with curl)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Query, Request
from starlette.responses import StreamingResponse

from corral.api.jobs import owned_job
from corral.event_bus import Event
from corral.server.log_follow import MAX_LOG_TEXT, LogFollower

router = APIRouter(prefix="/api/v1", tags=["events"])

TICK_S = 0.25
KEEPALIVE_S = 15.0
RECHECK_S = 1.0  # a stream ends this soon after its token is revoked or expires, or its session is logged out
MAX_LOG_EVENT = MAX_LOG_TEXT  # bytes of log text one event carries at most


@router.get("/events", summary="Server-sent events: jobs, runs, samples, alerts (and one job's log lines)",
            response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
async def events(request: Request, job: str | None = Query(None, pattern=r"^[0-9]{1,10}(_[0-9]{1,10})?$",
                                                           description="Also stream this job's new log text.")) -> StreamingResponse:
    """`event: jobs` (some jobs changed state), `runs` (metrics were stored), `samples` (a monitoring
    tick), `alerts` (something fired or resolved), and with `job`, `log` (`{"stream", "offset", "text"}`)."""
    logs: LogFollower | None = None
    if job is not None:
        found = owned_job(request, job, "following the logs of")  # 404 or 403 now, not a stream that says nothing
        logs = LogFollower.of_job(request.app.state.service, found)
    return StreamingResponse(_stream(request, logs), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(request: Request, logs: LogFollower | None) -> AsyncIterator[str]:
    app = request.app
    bus, service, identifier = app.state.events, app.state.service, app.state.identifier
    subscriber = bus.subscribe()
    generation = service.generation
    if logs is not None:
        await asyncio.to_thread(logs.skip_to_end)
    last_sent = last_check = time.monotonic()
    try:
        yield "retry: 2000\n\n"
        while not app.state.stopping():
            if time.monotonic() - last_check >= RECHECK_S:
                last_check = time.monotonic()
                if not identifier.still_holds(request.scope):
                    return  # what was sent to a credential that has ended stops with it
            first: Event | None = None
            try:
                async with asyncio.timeout(TICK_S):  # not wait_for, which on Python 3.11 may drop a cancel
                    first = await subscriber.queue.get()
            except TimeoutError:
                pass
            events = ([first] if first is not None else []) + subscriber.drain()
            out = [event.encode() for event in _coalesce(events)]
            if subscriber.overflowed:  # events were dropped: everything may have changed
                subscriber.overflowed = False
                out += [Event(name, {}).encode() for name in ("jobs", "runs", "samples", "alerts")]
            if service.generation != generation:  # coalesced: one event however many jobs changed
                generation = service.generation
                out.append(Event("jobs", {}).encode())
            if logs is not None:
                for stream in logs.paths:
                    # off the event loop: a log on a stalled network filesystem must not stop the server
                    event = await asyncio.to_thread(_log_event, logs, stream)
                    if event is not None:
                        out.append(event.encode())
            if not out and time.monotonic() - last_sent > KEEPALIVE_S:
                out.append(": keepalive\n\n")
            if out:
                last_sent = time.monotonic()
                yield "".join(out)
    finally:
        bus.unsubscribe(subscriber)


def _coalesce(events: list[Event]) -> list[Event]:
    """A tick's events, merged: one `runs` listing every run that changed, one of each other kind."""
    runs: dict[object, dict[str, object]] = {}
    others: dict[str, Event] = {}
    for event in events:
        if event.name == "runs":
            for run in event.data.get("runs", []):
                runs[run.get("id")] = {**runs.get(run.get("id"), {}), **run}
        else:
            others[event.name] = event
    merged = list(others.values())
    if runs:
        merged.append(Event("runs", {"runs": list(runs.values())}))
    return merged


def _log_event(logs: LogFollower, stream: str) -> Event | None:
    """The new text of a log since the last read as a `log` event (`start`, `offset` where the next read
    starts, `text`, and `skipped` bytes when the job wrote faster than a page can follow)."""
    text = logs.read(stream)
    if text is None:
        return None
    data: dict[str, object] = {"stream": text.stream, "start": text.start, "offset": text.offset, "text": text.text}
    if text.skipped:
        data["skipped"] = text.skipped
    return Event("log", data)
