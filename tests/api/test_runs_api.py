"""The tracking REST API (docs/tracking-api.md) end to end, against a live server on SQLite and on PostgreSQL.

One server per database for the module (a server takes seconds to start); each test works in its own
project and runs, so the tests do not see each other's data.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.conftest import DATABASES, Server, module_server
from tests.helpers import wait_for


@pytest.fixture(scope="module", params=DATABASES)
def live(request: pytest.FixtureRequest) -> Iterator[Server]:
    with module_server(request.param, ["--cpus", "16"]) as server:  # jobs run side by side
        yield server


def call(server: Server, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    url = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, (json.loads(data) if data else None)


def ok(server: Server, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, answer = call(server, method, path, body)
    assert got == status, answer
    return answer


def project() -> str:
    return f"p-{uuid.uuid4().hex[:8]}"


def b64(values: Any, dtype: str) -> str:
    return base64.b64encode(np.asarray(values).astype(dtype).tobytes()).decode()


def new_run(server: Server, **fields: Any) -> dict[str, Any]:
    return ok(server, "POST", "/api/v1/runs", {"project": project(), **fields}, status=201)


# -- runs -------------------------------------------------------------------------------------------


def test_create_answers_201_then_200_with_the_same_run_for_a_known_uid(live):
    uid = uuid.uuid4().hex[:16]
    body = {"project": project(), "name": "lr-0.1", "uid": uid, "config": {"lr": 0.1, "model": {"depth": 4}},
            "tags": ["baseline", "baseline", "x"], "git_commit": "ab12cd", "start_time": 1_700_000_000.0,
            "node": "gpu07", "gpu_type": "A100"}
    status, run = call(live, "POST", "/api/v1/runs", body)
    assert status == 201, run
    assert {k: run[k] for k in ("uid", "project", "name", "state", "config", "tags", "git_commit", "start_time",
                                "end_time", "node", "gpu_type", "resumed", "metrics", "last_step")} == {
        "uid": uid, "project": body["project"], "name": "lr-0.1", "state": "running", "config": body["config"],
        "tags": ["baseline", "x"], "git_commit": "ab12cd", "start_time": 1_700_000_000.0, "end_time": None,
        "node": "gpu07", "gpu_type": "A100", "resumed": False, "metrics": {}, "last_step": None}
    status, again = call(live, "POST", "/api/v1/runs", {**body, "name": "other", "config": {}})
    assert status == 200 and again["id"] == run["id"] and again["name"] == "lr-0.1" and again["config"] == body["config"]
    by_id, by_uid = ok(live, "GET", f"/api/v1/runs/{run['id']}"), ok(live, "GET", f"/api/v1/runs/{uid}")
    assert by_id == by_uid and by_id["id"] == run["id"]
    assert [r["id"] for r in ok(live, "GET", f"/api/v1/runs?project={body['project']}")["runs"]] == [run["id"]]


def test_an_empty_create_makes_a_run_in_the_default_project_with_a_readable_name(live):
    status, run = call(live, "POST", "/api/v1/runs", {})
    assert status == 201
    assert run["project"] == "default" and len(run["uid"]) == 16
    adjective, noun, number = run["name"].split("-")  # calm-heron-3: nothing in its config sets it apart
    assert adjective.isalpha() and noun.isalpha() and number.isdigit()
    assert "default" in [p["name"] for p in ok(live, "GET", "/api/v1/projects")["projects"]]


def test_a_known_resume_key_resumes_the_run_and_sets_it_running(live):
    key = f"job:1:{uuid.uuid4().hex}:train:0"
    run = new_run(live, resume_key=key)
    ok(live, "POST", f"/api/v1/runs/{run['id']}/metrics", {"batch_id": "first", "points": [
        {"key": "loss", "step": s, "value": 1.0 / (s + 1)} for s in range(10)]})
    assert ok(live, "POST", f"/api/v1/runs/{run['id']}/finish", {"state": "crashed"})["state"] == "crashed"
    status, resumed = call(live, "POST", "/api/v1/runs", {"project": run["project"], "resume_key": key})
    assert status == 200, resumed
    assert resumed["id"] == run["id"] and resumed["resumed"] is True
    assert resumed["state"] == "running" and resumed["end_time"] is None and resumed["last_step"] == 9
    read = ok(live, "GET", f"/api/v1/runs/{run['id']}")  # the run says so whenever it is read, not only here
    assert (read["resumed"], read["resumes"]) == (True, 1)
    # the requeued job logs from the start again: nothing is stored twice
    done = ok(live, "POST", f"/api/v1/runs/{run['id']}/metrics", {"batch_id": "second", "points": [
        {"key": "loss", "step": s, "value": 5.0} for s in range(15)]})
    assert (done["accepted"], done["skipped"]) == (5, 10)
    series = ok(live, "GET", f"/api/v1/runs/{run['id']}/series?key=loss")
    assert series["steps"] == list(range(15)) and series["values"][:10] == [1.0 / (s + 1) for s in range(10)]


def test_params_merge_tags_change_and_finish_twice_keeps_the_later(live):
    run = new_run(live, config={"lr": 0.1, "model": {"depth": 4}}, tags=["a", "b"], start_time=1_700_000_000.0)
    ref = run["uid"]
    after = ok(live, "POST", f"/api/v1/runs/{ref}/params", {"params": {"model": {"depth": 8}, "seed": 3}})
    assert after["config"] == {"lr": 0.1, "model": {"depth": 8}, "seed": 3}
    assert ok(live, "POST", f"/api/v1/runs/{ref}/tags", {"add": ["c"], "remove": ["a"]})["tags"] == ["b", "c"]
    first = ok(live, "POST", f"/api/v1/runs/{ref}/finish", {"state": "failed", "end_time": 1_700_000_500.0})
    assert (first["state"], first["end_time"]) == ("failed", 1_700_000_500.0)
    second = ok(live, "POST", f"/api/v1/runs/{ref}/finish", {"state": "finished"})
    assert second["state"] == "finished" and second["end_time"] > 1_700_000_500.0
    status, empty = call(live, "POST", f"/api/v1/runs/{ref}/finish", raw=b"")
    assert status == 200 and empty["state"] == "finished"


def test_a_run_never_ends_before_it_starts_and_an_import_may_correct_its_start(live):
    ahead = new_run(live, start_time=4_000_000_000.0)  # a client whose clock runs far ahead of the server's
    ended = ok(live, "POST", f"/api/v1/runs/{ahead['id']}/finish", {"state": "finished"})
    assert ended["end_time"] == ended["start_time"] == 4_000_000_000.0  # duration 0, never negative
    early = ok(live, "POST", f"/api/v1/runs/{new_run(live, start_time=1_700_000_100.0)['id']}/finish",
               {"end_time": 1_700_000_000.0})
    assert early["end_time"] == early["start_time"] == 1_700_000_100.0
    imported = new_run(live)  # started now, as far as the server knows, until the import has read its events
    spanned = ok(live, "POST", f"/api/v1/runs/{imported['id']}/finish", {"start_time": 1_700_000_000.0, "end_time": 1_700_000_240.0})
    assert (spanned["start_time"], spanned["end_time"]) == (1_700_000_000.0, 1_700_000_240.0)
    status, error = call(live, "POST", f"/api/v1/runs/{imported['id']}/finish", {"start_time": 1_700_000_300.0, "end_time": 1_700_000_000.0})
    assert status == 422 and "end_time" in json.dumps(error) and "before start_time" in json.dumps(error)


# -- metrics ----------------------------------------------------------------------------------------


def test_a_batch_is_applied_once_whatever_its_form_and_reads_back_exactly(live):
    run = new_run(live)
    path = f"/api/v1/runs/{run['id']}"
    columns = {"batch_id": "b-1", "metrics": [
        {"key": "loss", "steps": [0, 1, 2], "values": [2.3, 1.9, "NaN"], "times": [1.7e9, 1.7e9 + 1, 1.7e9 + 2]},
        {"key": "acc", "steps_i64": b64([0, 1], "<i8"), "values_f64": b64([0.5, math.inf], "<f8"),
         "times_f64": b64([1.7e9, 1.7e9 + 1], "<f8")}]}
    assert ok(live, "POST", f"{path}/metrics", columns) == {"accepted": 5, "skipped": 0, "duplicate": False}
    assert ok(live, "POST", f"{path}/metrics", columns) == {"accepted": 0, "skipped": 0, "duplicate": True}
    rows = {"batch_id": "b-2", "points": [{"key": "loss", "step": 3, "value": 1.5, "time": 1.7e9 + 3},
                                          {"key": "loss", "step": 2, "value": 9.0},  # not past step 2: skipped
                                          {"key": "acc", "step": 2, "value": None, "time": 1.7e9 + 2}]}
    assert ok(live, "POST", f"{path}/metrics", rows) == {"accepted": 2, "skipped": 1, "duplicate": False}
    loss = ok(live, "GET", f"{path}/series?key=loss")
    assert loss == {"key": "loss", "count": 4, "downsampled": False, "steps": [0, 1, 2, 3],
                    "values": [2.3, 1.9, "NaN", 1.5], "times": [1.7e9, 1.7e9 + 1, 1.7e9 + 2, 1.7e9 + 3]}
    acc = ok(live, "GET", f"{path}/series?key=acc")
    assert acc["values"] == [0.5, "Infinity", "NaN"] and acc["times"] == [1.7e9, 1.7e9 + 1, 1.7e9 + 2]
    summary = ok(live, "GET", path)
    assert summary["metrics"]["loss"] | {"last_time": 0} == {
        "count": 4, "first_step": 0, "last_step": 3, "last": 1.5, "last_time": 0, "min": 1.5, "min_step": 3,
        "max": 2.3, "max_step": 0}
    assert (summary["metrics"]["acc"]["last"], summary["metrics"]["acc"]["max"]) == ("NaN", 0.5)
    assert summary["last_step"] == 3


def test_series_returns_at_most_max_points_keeping_first_last_and_spikes(live):
    run = new_run(live)
    path = f"/api/v1/runs/{run['id']}"
    n = 20_000
    values = np.exp(-np.arange(n) / 5000.0)
    values[12_345], values[4_321] = 40.0, -40.0
    for lo in range(0, n, 5_000):
        ok(live, "POST", f"{path}/metrics", {"batch_id": f"part-{lo}", "metrics": [
            {"key": "loss", "steps_i64": b64(np.arange(lo, lo + 5000), "<i8"), "values_f64": b64(values[lo:lo + 5000], "<f8")}]})
    default = ok(live, "GET", f"{path}/series?key=loss")
    assert default["count"] == n and default["downsampled"] and len(default["steps"]) <= 2000
    for max_points, start, end in [(100, None, None), (2, None, None), (10, 4_000, 13_000), (50, 12_000, 12_999)]:
        query = f"key=loss&max_points={max_points}" + (f"&start={start}&end={end}" if start is not None else "")
        got = ok(live, "GET", f"{path}/series?{query}")
        lo, hi = (0, n - 1) if start is None else (start, end)
        assert got["count"] == hi - lo + 1 and got["downsampled"] and len(got["steps"]) <= max_points
        assert got["steps"][0] == lo and got["steps"][-1] == hi and got["steps"] == sorted(set(got["steps"]))
        assert got["values"] == values[got["steps"]].tolist()  # real points only
        if max_points >= 4:
            assert {s for s in (12_345, 4_321) if lo <= s <= hi} <= set(got["steps"])
    small = ok(live, "GET", f"{path}/series?key=loss&start=100&end=104&max_points=5")
    assert (small["count"], small["downsampled"], small["steps"]) == (5, False, [100, 101, 102, 103, 104])
    empty = ok(live, "GET", f"{path}/series?key=loss&start=30000")
    assert (empty["count"], empty["steps"], empty["values"]) == (0, [], [])


# -- search -----------------------------------------------------------------------------------------


def test_runs_are_searched_by_project_tag_state_job_and_where_newest_first(live):
    p = project()
    a = new_run(live, project=p, tags=["baseline"], config={"lr": 0.1, "model": {"depth": 4}, "act": "gelu"})
    b = new_run(live, project=p, config={"lr": 0.01, "model": {"depth": 8}})
    c = new_run(live, project=p, tags=["baseline"], config={"lr": 0.1})
    for run, losses in ((a, [1.0, 0.1, 0.3]), (b, [2.0, 0.5]), (c, [0.05])):
        ok(live, "POST", f"/api/v1/runs/{run['id']}/metrics", {"metrics": [
            {"key": "loss", "steps": list(range(len(losses))), "values": losses}]})
    ok(live, "POST", f"/api/v1/runs/{b['id']}/finish", {"state": "failed"})

    def ids(query: str) -> list[int]:
        return [r["id"] for r in ok(live, "GET", f"/api/v1/runs?project={p}&{query}")["runs"]]

    q = urllib.parse.quote
    assert ids("") == [c["id"], b["id"], a["id"]]
    assert ids("tag=baseline") == [c["id"], a["id"]]
    assert ids("state=failed") == [b["id"]]
    assert ids(f"where={q('config.lr=0.1')}") == [c["id"], a["id"]]
    assert ids(f"where={q('config.model.depth>=8')}") == [b["id"]]
    assert ids(f"where={q('config.act=gelu')}") == [a["id"]]
    assert ids(f"where={q('metric.loss.min<0.2')}") == [c["id"], a["id"]]
    assert ids(f"where={q('metric.loss.max>1')}&where={q('config.lr<0.1')}") == [b["id"]]
    assert ids(f"where={q('metric.loss<0.4')}&tag=baseline") == [c["id"], a["id"]]
    assert ids("limit=1") == [c["id"]]
    runs = ok(live, "GET", f"/api/v1/runs?project={p}&where={q('metric.loss.last>0.2')}")["runs"]
    assert [r["id"] for r in runs] == [b["id"], a["id"]] and runs[1]["metrics"]["loss"]["last"] == 0.3


# -- artifacts --------------------------------------------------------------------------------------


def test_artifacts_are_upserted_by_path_and_deleted_ones_are_hidden_unless_asked(live):
    run = new_run(live)
    path = f"/api/v1/runs/{run['uid']}/artifacts"
    posted = ok(live, "POST", path, {"artifacts": [
        {"path": "/ckpt/ckpt-00000100.pt", "type": "checkpoint", "size": 123, "sha256": "0f" * 32, "step": 100,
         "metric": "val_loss", "metric_value": 0.31},
        {"path": "/out/log.txt"}]})["artifacts"]
    assert [(a["path"], a["type"], a["deleted"], a["run_id"]) for a in posted] == [
        ("/ckpt/ckpt-00000100.pt", "checkpoint", False, run["id"]), ("/out/log.txt", "file", False, run["id"])]
    assert all(isinstance(a["id"], int) and isinstance(a["created"], float) for a in posted)
    marked = ok(live, "POST", path, {"artifacts": [{"path": "/ckpt/ckpt-00000100.pt", "deleted": True}]})["artifacts"][0]
    assert marked["id"] == posted[0]["id"] and marked["deleted"] is True
    assert (marked["step"], marked["metric"], marked["metric_value"], marked["size"]) == (100, "val_loss", 0.31, 123)
    assert [a["path"] for a in ok(live, "GET", path)["artifacts"]] == ["/out/log.txt"]
    assert [a["path"] for a in ok(live, "GET", f"{path}?deleted=true")["artifacts"]] == ["/ckpt/ckpt-00000100.pt", "/out/log.txt"]
    assert [a["path"] for a in ok(live, "GET", f"{path}?deleted=true&type=checkpoint")["artifacts"]] == ["/ckpt/ckpt-00000100.pt"]
    assert ok(live, "GET", f"{path}?type=checkpoint")["artifacts"] == []


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method, path", [
    ("GET", "/api/v1/runs/999999"),
    ("GET", "/api/v1/runs/no-such-run"),
    ("POST", "/api/v1/runs/999999/metrics"),
    ("POST", "/api/v1/runs/no-such-run/params"),
    ("POST", "/api/v1/runs/no-such-run/tags"),
    ("POST", "/api/v1/runs/no-such-run/finish"),
    ("POST", "/api/v1/runs/no-such-run/artifacts"),
    ("GET", "/api/v1/runs/no-such-run/artifacts"),
    ("GET", "/api/v1/runs/no-such-run/series?key=loss"),
])
def test_an_unknown_run_is_404(live, method, path):
    body = {"/metrics": {"points": [{"key": "a", "step": 0, "value": 1}]}, "/params": {"params": {"a": 1}},
            "/tags": {"add": ["x"]}, "/finish": {}, "/artifacts": {"artifacts": [{"path": "/x"}]}}
    payload = next((v for k, v in body.items() if path.endswith(k)), None) if method == "POST" else None
    status, answer = call(live, method, path, payload)
    assert status == 404, answer
    assert answer["error"]["code"] == "not_found"


def test_an_unknown_key_is_404_naming_the_keys_the_run_has(live):
    run = new_run(live)
    ok(live, "POST", f"/api/v1/runs/{run['id']}/metrics", {"points": [{"key": "train/loss", "step": 0, "value": 1}]})
    status, answer = call(live, "GET", f"/api/v1/runs/{run['id']}/series?key=loss")
    assert status == 404 and "train/loss" in answer["error"]["message"]


BAD = [
    ("POST", "/runs", {"uid": "has space"}, "uid"),
    ("POST", "/runs", {"job_id": -3}, "job_id"),
    ("POST", "/runs", {"job_id": 2**31}, "job_id"),  # job ids are 32-bit (GET /runs?job= refuses this one too)
    ("POST", "/runs", {"job_id": 2**70}, "job_id"),
    ("POST", "/runs", b'{"start_time": 1' + b"0" * 400 + b"}", "start_time"),
    ("POST", "/runs", {"start_time": "yesterday"}, "start_time"),
    ("POST", "/runs", {"config": [1]}, "config"),
    ("POST", "/runs", {"tags": "x"}, "tags"),
    ("POST", "/runs", {"project": ""}, "project"),
    ("POST", "/runs", {"colour": "red"}, "colour"),
    ("POST", "/runs", b'{"config": {"x": NaN}}', "config.x"),
    ("POST", "/runs", b"not json", "body"),
    ("POST", "/runs", [], "body"),
    ("POST", "{run}/metrics", {"metrics": [{"key": "a", "steps": [0, 1.5], "values": [1, 2]}]}, "metrics[0].steps"),
    ("POST", "{run}/metrics", {"metrics": [{"key": "a", "steps": [0, 1], "values": [1]}]}, "metrics[0].values"),
    ("POST", "{run}/metrics", {"metrics": [{"key": "a", "steps_i64": "!!", "values": [1]}]}, "metrics[0].steps_i64"),
    ("POST", "{run}/metrics", {"points": [{"key": "a", "step": 0, "value": "x"}]}, "points[0].value"),
    ("POST", "{run}/metrics", {"batch_id": "a b"}, "batch_id"),
    ("POST", "{run}/metrics", b'{"points": [{"key": "a", "step": 0, "value": NaN}]}', "body"),
    ("POST", "{run}/params", {"lr": 1}, "params"),
    ("POST", "{run}/tags", {"add": "x"}, "add"),
    ("POST", "{run}/finish", {"state": "done"}, "state"),
    ("POST", "{run}/finish", {"state": "finished", "end_time": "now"}, "end_time"),
    ("POST", "{run}/finish", b'{"end_time": 1' + b"0" * 400 + b"}", "end_time"),
    ("POST", "{run}/artifacts", {"artifacts": [{"type": "file"}]}, "artifacts[0]"),
    ("POST", "{run}/artifacts", {"artifacts": [{"path": "/x", "sha256": "abc"}]}, "artifacts[0].sha256"),
    ("POST", "{run}/artifacts", {"artifacts": [{"path": "/x", "size": -1}]}, "artifacts[0].size"),
    ("POST", "{run}/artifacts", {"artifacts": [{"path": "/x", "size": 2**64}]}, "artifacts[0].size"),
    ("POST", "{run}/artifacts", {"artifacts": [{"path": "/x", "step": 2**63}]}, "artifacts[0].step"),
    ("POST", "{run}/artifacts", b'{"artifacts": [{"path": "/x", "metric_value": 1' + b"0" * 400 + b"}]}",
     "artifacts[0].metric_value"),
    ("GET", "{run}/series?key=loss&max_points=1", None, "max_points"),
    ("GET", "{run}/series?key=loss&max_points=100001", None, "max_points"),
    ("GET", "{run}/series?key=loss&max_points=lots", None, "max_points"),
    ("GET", "{run}/series?key=loss&start=-1", None, "start"),
    ("GET", "{run}/series", None, "key"),
    ("GET", "/runs?where=lr%3D1", None, "where"),
    ("GET", "/runs?where=metric.loss%3Clow", None, "where"),
    ("GET", "/runs?where=metric.loss%3CNaN", None, "where"),  # NaN orders differently in SQLite and PostgreSQL
    ("GET", "/runs?state=sleeping", None, "state"),
    ("GET", "/runs?limit=0", None, "limit"),
]


@pytest.mark.parametrize("method, path, body, field", BAD, ids=[f"{i}:{b[3]}" for i, b in enumerate(BAD)])
def test_a_bad_request_is_422_naming_the_field_and_changes_nothing(live, method, path, body, field):
    run = new_run(live, config={"lr": 0.1}, tags=["t"])
    ok(live, "POST", f"/api/v1/runs/{run['id']}/metrics", {"points": [{"key": "loss", "step": 0, "value": 1.0}]})
    before = ok(live, "GET", f"/api/v1/runs/{run['id']}")
    url = "/api/v1" + path.replace("{run}", f"/runs/{run['id']}")
    status, answer = call(live, method, url, raw=body) if isinstance(body, bytes) else call(live, method, url, body)
    assert status == 422, answer
    assert answer["error"]["field"] == field and answer["error"]["message"]
    assert ok(live, "GET", f"/api/v1/runs/{run['id']}") == before


# -- runs of jobs -----------------------------------------------------------------------------------


def test_a_run_of_a_job_takes_node_and_gpu_type_and_ends_with_the_job(live, short_tmp):
    """Each job waits for its go file, so that its run exists before the job ends."""
    client = live.client()
    outcomes = {"completed": ("exit 0", "finished"), "failed": ("exit 3", "crashed"), "cancelled": (None, "crashed")}
    jobs, runs = {}, {}
    for name, (tail, _) in outcomes.items():
        go = os.path.join(short_tmp, name)
        command = ["sleep", "30"] if tail is None else ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; {tail}"]
        jobs[name] = client.submit(command, gpus=1, name=name, workdir=short_tmp)
    for name, job in jobs.items():
        job = wait_for(lambda j=job: (got := client.get(j["id"]))["state"] == "RUNNING" and got)
        run = new_run(live, job_id=job["id"])
        assert (run["node"], run["gpu_type"], run["job_id"]) == (job["node"], "A100", job["id"])
        assert run["node"]
        runs[name] = run
    finished_early = new_run(live, job_id=jobs["failed"]["id"])  # a script that called finish itself
    ok(live, "POST", f"/api/v1/runs/{finished_early['id']}/finish", {"state": "finished"})

    client.cancel(jobs["cancelled"]["id"])
    for name in ("completed", "failed"):
        open(os.path.join(short_tmp, name), "w").close()
    for name, (_, state) in outcomes.items():
        ended = wait_for(lambda r=runs[name]: (got := ok(live, "GET", f"/api/v1/runs/{r['id']}"))["state"] != "running" and got)
        assert ended["state"] == state, name
        assert ended["end_time"] is not None
    assert ok(live, "GET", f"/api/v1/runs/{finished_early['id']}")["state"] == "finished"
    by_job = ok(live, "GET", f"/api/v1/runs?job={jobs['failed']['id']}")["runs"]
    assert [r["id"] for r in by_job] == [finished_early["id"], runs["failed"]["id"]]
    client.close()


def test_a_run_naming_a_job_that_does_not_exist_is_refused_naming_the_field(live):
    """A job id not given out yet would be claimed for whoever gets it next (issue 15: run squatting)."""
    got, answer = call(live, "POST", "/api/v1/runs", {"project": project(), "job_id": 987_654, "resume_key": "k"})
    assert got == 422, answer
    assert answer["error"]["field"] == "job_id" and "job 987654 does not exist" in answer["error"]["message"]
    assert ok(live, "GET", "/api/v1/runs?job=987654")["runs"] == []


def test_a_job_that_ends_while_the_server_is_down_ends_its_run_at_restart_and_no_point_is_lost(server, short_tmp):
    """kill -9 after the answers: every acknowledged batch was committed; the job's end is caught up on."""
    client = server.client()
    go = os.path.join(short_tmp, "go")
    job = client.submit(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit 3"], gpus=1, workdir=short_tmp)
    wait_for(lambda: client.get(job["id"])["state"] == "RUNNING")
    run = client.create_run(project=project(), job_id=job["id"])
    for b in range(20):
        batch = {"batch_id": f"b{b}", "metrics": [{"key": "loss", "steps": list(range(b * 50, b * 50 + 50)),
                                                   "values": [float(s) for s in range(b * 50, b * 50 + 50)]}]}
        assert client.log_metrics(run["id"], batch)["accepted"] == 50
    client.close()
    server.kill9()
    open(go, "w").close()
    wait_for(lambda: os.path.exists(os.path.join(server.home, "jobs", str(job["id"]), "result.json")))
    server.start()
    ended = wait_for(lambda: (got := ok(server, "GET", f"/api/v1/runs/{run['id']}"))["state"] != "running" and got)
    assert ended["state"] == "crashed" and ended["end_time"] is not None
    series = ok(server, "GET", f"/api/v1/runs/{run['id']}/series?key=loss&max_points=100000")
    assert series["steps"] == list(range(1000)) and series["values"] == [float(s) for s in range(1000)]
    assert ok(server, "POST", f"/api/v1/runs/{run['id']}/metrics", {"batch_id": "b19", "metrics": []})["duplicate"]


# -- group commit -----------------------------------------------------------------------------------


def test_concurrent_clients_store_every_point_exactly_once(live):
    threads_n, batches, per_batch = 8, 15, 40
    shared = new_run(live)
    own = [new_run(live) for _ in range(threads_n)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with live.client() as client:
                for b in range(batches):
                    steps = list(range(b * per_batch, (b + 1) * per_batch))
                    for ref, key in ((own[i]["id"], "loss"), (shared["uid"], f"worker-{i}")):
                        batch = {"batch_id": f"w{i}-b{b}", "metrics": [
                            {"key": key, "steps": steps, "values": [i * 1e6 + s for s in steps]}]}
                        first = client.log_metrics(ref, batch)
                        retry = client.log_metrics(ref, batch)  # as after a lost answer
                        assert (first["accepted"], first["duplicate"]) == (per_batch, False), first
                        assert (retry["accepted"], retry["duplicate"]) == (0, True), retry
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[0]
    expected_steps = list(range(batches * per_batch))
    for i in range(threads_n):
        for ref, key in ((own[i]["id"], "loss"), (shared["id"], f"worker-{i}")):
            got = ok(live, "GET", f"/api/v1/runs/{ref}/series?key={key}&max_points=100000")
            assert got["count"] == len(expected_steps) and got["steps"] == expected_steps
            assert got["values"] == [i * 1e6 + s for s in expected_steps]
    assert len(ok(live, "GET", f"/api/v1/runs/{shared['id']}")["metrics"]) == threads_n
