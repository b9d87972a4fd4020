"""The routes the dashboard reads: the queue by pages, the cluster, and the server-sent events."""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.parse

import pytest

from tests.helpers import wait_for

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def get(server, path: str):
    return json.loads(server.client()._raw("GET", path)[2])


def test_the_queue_pages_running_first_then_pending_in_priority_order(server_factory):
    server = server_factory(gpus=2)
    client = server.client()
    ids = [client.submit(SLEEP, gpus=2, name=f"j{i}", nice=(50 if i == 3 else 0),
                         labels={"team": "a" if i % 2 else "b"})["id"] for i in range(6)]
    wait_for(lambda: client.get(ids[0])["state"] == "RUNNING")
    wait_for(lambda: all(client.get(i)["reason"] not in (None, "None") for i in ids[1:]))
    first = get(server, "/api/v1/queue?limit=3")
    assert (first["total"], first["running"], first["pending"]) == (6, 1, 5)
    assert [j["id"] for j in first["jobs"]][0] == ids[0] and first["jobs"][0]["state"] == "RUNNING"
    rest = get(server, "/api/v1/queue?limit=3&offset=3")
    pending = [j for j in first["jobs"] + rest["jobs"] if j["state"] == "PENDING"]
    assert [j["priority"] for j in pending] == sorted((j["priority"] for j in pending), reverse=True)
    assert pending[-1]["id"] == ids[3]  # the nice one comes last
    assert all(j["reason"] for j in pending)
    team_a = get(server, "/api/v1/queue?label=team%3Da")
    assert {j["id"] for j in team_a["jobs"]} == {ids[1], ids[3], ids[5]}
    assert get(server, "/api/v1/queue?state=RUNNING")["total"] == 1
    status, _, body = client._raw("GET", "/api/v1/queue?state=DONE")
    assert status == 422 and json.loads(body)["error"]["field"] == "state"
    for i in ids:
        client.cancel(i)


def test_paging_through_the_queue_shows_every_job_once(server_factory):
    server = server_factory(gpus=1)
    client = server.client()
    ids = {client.submit(SLEEP, gpus=1)["id"] for _ in range(250)}
    seen, offset = [], 0
    while True:
        page = get(server, f"/api/v1/queue?limit=100&offset={offset}")
        assert page["total"] == 250
        seen += [j["id"] for j in page["jobs"]]
        offset += 100
        if offset >= page["total"]:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 250


def test_the_cluster_shows_who_holds_each_gpu_and_the_totals(server_factory):
    server = server_factory(gpus=4)
    client = server.client()
    job = client.submit(SLEEP, gpus=2, cpus=1)["id"]
    wait_for(lambda: client.get(job)["state"] == "RUNNING")
    cluster = get(server, "/api/v1/cluster")
    gpus = cluster["nodes"][0]["gpus"]
    assert sum(1 for g in gpus if g["job_id"] == job) == 2
    assert cluster["totals"]["gpus"] == 4 and cluster["totals"]["gpus_used"] == 2 and cluster["totals"]["cpus_alloc"] == 1
    assert all(g["utilization"] is None for g in gpus)  # declared GPUs: nothing measured, and none made up
    client.cancel(job)


def read_events(server, path: str, until, timeout: float = 20.0, subscribed=None) -> list[tuple[str, dict]]:
    """Open an event stream and collect events until `until(events)` holds; `subscribed()` is called once the
    stream hears of changes (its first line comes after it subscribed), for a test to make some."""
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    conn.request("GET", path)
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    if subscribed is not None:
        # the raw chunked body: a chunk's size on a line of its own, then its text
        assert any(line.startswith(b"retry: ") for line in iter(response.fp.readline, b""))
        subscribed()
    events, name, deadline = [], None, time.monotonic() + timeout
    while time.monotonic() < deadline and not until(events):
        line = response.fp.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name:
            events.append((name, json.loads(line[6:])))
            name = None
    conn.close()
    return events


@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_events_tell_of_job_changes_stored_metrics_and_a_jobs_new_log_lines(server_factory):
    server = server_factory(extra=["--sample-interval", "0.3"])
    client = server.client()
    job = client.submit([sys.executable, "-u", "-c", "import time\nfor i in range(100):\n print('line', i); time.sleep(0.2)"])
    wait_for(lambda: client.get(job["id"])["state"] == "RUNNING")
    run = client.create_run(project="p", job_id=job["id"])

    def changes() -> None:  # made once the stream listens, so that they reach it as changes
        client.log_metrics(run["id"], {"points": [{"key": "loss", "step": 7, "value": 0.5}]})
        client.submit(["true"])

    kinds = lambda evs: {n for n, _ in evs}  # noqa: E731
    logged = {"id": run["id"], "uid": run["uid"], "job_id": job["id"], "last_step": 7}
    runs_of = lambda evs: [r for n, d in evs if n == "runs" for r in d["runs"]]  # noqa: E731
    stdout_of = lambda evs: "".join(d["text"] for n, d in evs if n == "log" and d["stream"] == "stdout")  # noqa: E731
    sampled = {"id": run["id"], "job_id": job["id"]}
    # read until every event asserted below has come, each in its own time (log lines every 0.2 s, samples
    # every 0.3 s), not for as long as a machine at rest takes to send them
    events = read_events(server, f"/api/v1/events?job={job['id']}",
                         lambda evs: ({"jobs", "log", "samples"} <= kinds(evs) and logged in runs_of(evs)
                                      and sampled in runs_of(evs) and ("line 0" in (t := stdout_of(evs))
                                                                      or "line 1" in t)),
                         subscribed=changes)
    assert {"jobs", "runs", "log", "samples"} <= kinds(events)
    assert logged in runs_of(events)  # the metrics that were stored, with the run's job and uid
    assert sampled in runs_of(events)  # its system metrics, from the monitor
    text = stdout_of(events)
    assert "line 0" in text or "line 1" in text
    status, _, body = client._raw("GET", "/api/v1/events?job=99999")
    assert status == 404
    client.cancel(job["id"])


def test_dashboard_pages_are_served_for_every_page_path(server_factory):
    server = server_factory()
    client = server.client()
    for path in ("/", "/queue", "/jobs/12", "/runs", "/runs/3", "/compare?runs=1,2", "/alerts"):
        status, headers, body = client._raw("GET", path)
        assert status == 200 and headers["content-type"].startswith("text/html"), path
        assert b'type="module"' in body
    status, headers, _ = client._raw("GET", "/static/vendor/uplot/uPlot.iife.min.js")
    assert status == 200 and "javascript" in headers["content-type"]


def test_a_chart_page_gets_many_series_in_one_request(server_factory):
    client = server_factory().client()
    run = client.create_run(project="p")
    client.log_metrics(run["id"], {"metrics": [{"key": k, "steps": list(range(1000)), "values": [float(i) for i in range(1000)]}
                                               for k in ("a", "b/c")]})
    status, _, body = client._raw("GET", f"/api/v1/runs/{run['id']}/series/batch?key=b/c&key=a&max_points=10")
    assert status == 200
    series = json.loads(body)["series"]
    assert [s["key"] for s in series] == ["b/c", "a"]  # in the order asked
    assert all(s["count"] == 1000 and len(s["steps"]) <= 10 and s["steps"][0] == 0 and s["steps"][-1] == 999 for s in series)
    status, _, body = client._raw("GET", f"/api/v1/runs/{run['id']}/series/batch?key=a&key=nope")
    assert status == 404 and "nope" in json.loads(body)["error"]["message"]
    too_many = "&".join(f"key=k{i}" for i in range(101))
    status, _, body = client._raw("GET", f"/api/v1/runs/{run['id']}/series/batch?{too_many}")
    assert status == 422 and json.loads(body)["error"]["field"] == "key"


def test_a_log_far_ahead_is_skipped_to_its_end_at_a_line_start(tmp_path):
    from corral.api.events import MAX_LOG_EVENT, _log_event
    from corral.server.log_follow import LogFollower

    path = tmp_path / "chatty.out"
    path.write_bytes(b"".join(b"line %07d\n" % i for i in range(200_000)))  # 2.4 MB behind
    logs = LogFollower({"stdout": str(path)})
    event, offset = _log_event(logs, "stdout"), logs.offsets["stdout"]
    size = path.stat().st_size
    assert offset == size and event.data["offset"] == size  # caught up at once
    assert event.data["skipped"] > 0 and event.data["start"] == event.data["skipped"]
    assert event.data["text"].startswith("line ") and event.data["text"].endswith("\n")
    assert len(event.data["text"]) <= MAX_LOG_EVENT
    with open(path, "ab") as f:
        f.write("é partial".encode()[:1])  # half a character, no newline yet
    event, offset = _log_event(logs, "stdout"), logs.offsets["stdout"]
    assert event is None or "\ufffd" not in event.data["text"]


def test_a_subscriber_that_falls_behind_is_told_to_refetch_everything():
    from corral.api.events import _coalesce
    from corral.event_bus import QUEUE_SIZE, Event, EventBus

    bus = EventBus()
    subscriber = bus.subscribe()
    for i in range(QUEUE_SIZE + 5):
        bus.publish("runs", {"runs": [{"id": i % 3, "last_step": i}]})
    assert subscriber.overflowed
    merged = _coalesce(subscriber.drain() + [Event("alerts", {}), Event("alerts", {})])
    assert [e.name for e in merged] == ["alerts", "runs"]
    assert sorted(r["id"] for r in merged[1].data["runs"]) == [0, 1, 2]  # one entry per run
    bus.unsubscribe(subscriber)
    assert bus.subscribers == 0
