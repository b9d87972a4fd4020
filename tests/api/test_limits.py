"""Request bodies have a ceiling: past it, a clear 413 and nothing read into memory or stored."""

from __future__ import annotations

import http.client
import json
import urllib.parse

from corral.api.limits import DEFAULT_MAX_BODY_MB


def connect(server) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(server.url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)


def test_a_body_over_the_limit_is_refused_with_413_and_nothing_changes(server_factory):
    server = server_factory()
    client = server.client()
    run = client.create_run(project="p")
    too_big = b'{"points": [' + b" " * ((DEFAULT_MAX_BODY_MB << 20) + 1) + b"]}"
    for path in (f"/api/v1/runs/{run['id']}/metrics", "/api/v1/jobs"):
        conn = connect(server)
        conn.request("POST", path, too_big, {"Content-Type": "application/json"})
        response = conn.getresponse()
        error = json.loads(response.read())["error"]
        assert response.status == 413 and error["code"] == "too_large"
        assert "body" in error["message"] and f"{DEFAULT_MAX_BODY_MB} MB" in error["message"]
        conn.close()
    assert client.get_run(run["id"])["metrics"] == {} and client.queue() == []


def test_a_chunked_body_is_counted_as_it_arrives(server_factory):
    server = server_factory()
    conn = connect(server)
    piece = b" " * (1 << 20)

    def body():
        yield b'{"command": ["true"], "name": "x"'
        for _ in range(DEFAULT_MAX_BODY_MB + 2):
            yield piece
        yield b"}"

    conn.request("POST", "/api/v1/jobs", body(), {"Content-Type": "application/json"}, encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 413 and json.loads(response.read())["error"]["code"] == "too_large"
    assert server.client().queue() == []


def test_a_large_but_reasonable_metrics_batch_still_goes_in(server_factory):
    client = server_factory().client()
    run = client.create_run(project="p")
    steps = list(range(200_000))  # about 5 MB of JSON
    client.log_metrics(run["id"], {"metrics": [{"key": "loss", "steps": steps, "values": [0.5] * len(steps)}]})
    assert client.get_run(run["id"])["metrics"]["loss"]["count"] == 200_000
