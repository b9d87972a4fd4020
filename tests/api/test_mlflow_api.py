"""MLflow's REST API on corral, driven by the real `mlflow` client (mlflow-skinny), unchanged.

A script instrumented with MLflow runs in a subprocess with `MLFLOW_TRACKING_URI` set to a corral
server (and `MLFLOW_TRACKING_TOKEN` to a corral token); what it logged is then read back through
MLflow's client and through corral's own. Bad input gets MLflow's error shapes, never a 500; another
user's run is theirs to change; a run started inside a corral job is attached to it.

The tests run as root, so a plain local caller is an admin; other users come with tokens.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import subprocess
import sys
import textwrap
import urllib.parse

import pytest

from corral.client import Client
from tests.helpers import needs

pytestmark = needs("mlflow")

SCRIPT = textwrap.dedent('''
    import json, os, sys, tempfile
    import mlflow
    from mlflow import MlflowClient

    work = tempfile.mkdtemp()
    artifact = os.path.join(work, "notes.txt")
    with open(artifact, "w") as f:
        f.write("hello from mlflow\\n")
    mlflow.set_experiment("mnist-mlflow")
    with mlflow.start_run(run_name="lr-0.1") as run:
        mlflow.log_param("lr", "0.1")
        mlflow.log_params({"batch_size": 32, "optimizer": "adam"})
        for step in range(5):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
        mlflow.log_metrics({"acc": 0.9, "f1": 0.75}, step=4)
        mlflow.set_tag("team", "vision")
        mlflow.log_artifact(artifact)
        mlflow.log_dict({"layers": 4}, "config/model.json")
        run_id = run.info.run_id
    with mlflow.start_run(run_name="lr-1.0"):  # a second run, that the filter below leaves out
        mlflow.log_param("lr", "1.0")
        mlflow.log_metric("acc", 0.2)

    client = MlflowClient()
    experiment = client.get_experiment_by_name("mnist-mlflow")
    found = client.search_runs(
        [experiment.experiment_id],
        filter_string="metrics.acc > 0.5 and params.lr = '0.1' and tags.team = 'vision' and attributes.status = 'FINISHED'",
        order_by=["metrics.acc DESC"])
    ranked = client.search_runs([experiment.experiment_id], order_by=["metrics.acc ASC"])
    history = client.get_metric_history(run_id, "loss")
    got = client.get_run(run_id)
    listed = client.list_artifacts(run_id)
    downloaded = client.download_artifacts(run_id, "notes.txt", tempfile.mkdtemp())
    nested = client.list_artifacts(run_id, "config")
    loaded = mlflow.artifacts.load_dict(f"runs:/{run_id}/config/model.json")
    print(json.dumps({
        "run_id": run_id, "experiment_id": experiment.experiment_id,
        "found": [r.info.run_id for r in found], "ranked": [r.info.run_name for r in ranked],
        "history": [[m.step, m.value, m.timestamp] for m in history],
        "status": got.info.status, "name": got.info.run_name, "params": got.data.params,
        "metrics": got.data.metrics, "tags": got.data.tags, "artifact_uri": got.info.artifact_uri,
        "listed": [[a.path, a.is_dir, a.file_size] for a in listed],
        "downloaded": open(downloaded).read(),
        "nested": [a.path for a in nested], "loaded": loaded,
    }))
''')


def run_mlflow(server, code: str, token: str | None = None, tmp_path=None, args: list[str] = ()) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "CORRAL_"))}
    env["MLFLOW_TRACKING_URI"] = server.url
    if token:
        env["MLFLOW_TRACKING_TOKEN"] = token
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=180,
                          cwd=str(tmp_path) if tmp_path else None)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def call(server, method: str, path: str, body=None, token: str | None = None, raw: bytes | None = None):
    url = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    try:
        return response.status, json.loads(payload) if payload else None
    except ValueError:
        return response.status, payload


@pytest.fixture
def server(server_factory, db_url):
    """On SQLite and on PostgreSQL."""
    return server_factory(gpus=0, db=db_url)


def token_for(server, user: str, scope: str = "submit") -> str:
    return server.client().create_token(user=user, scope=scope, name=f"{user}-{scope}")["token"]


def test_an_unchanged_mlflow_script_logs_into_corral(server, tmp_path):
    alice = token_for(server, "alice")
    out = run_mlflow(server, SCRIPT, token=alice, tmp_path=tmp_path)

    # what MLflow's client reads back
    assert out["found"] == [out["run_id"]]
    assert out["ranked"] == ["lr-1.0", "lr-0.1"]
    assert [(s, v) for s, v, _ in out["history"]] == [(0, 1.0), (1, 0.5), (2, 1 / 3), (3, 0.25), (4, 0.2)]
    assert all(isinstance(t, int) and t > 1_600_000_000_000 for _, _, t in out["history"])  # milliseconds
    assert out["status"] == "FINISHED" and out["name"] == "lr-0.1"
    assert out["params"] == {"lr": "0.1", "batch_size": "32", "optimizer": "adam"}
    assert out["metrics"] == {"loss": 0.2, "acc": 0.9, "f1": 0.75}
    assert out["tags"]["team"] == "vision" and out["tags"]["mlflow.user"] == "alice"
    assert out["tags"]["mlflow.runName"] == "lr-0.1" and out["tags"]["mlflow.source.type"] == "LOCAL"
    assert out["artifact_uri"] == f"mlflow-artifacts:/{out['experiment_id']}/{out['run_id']}/artifacts"
    assert out["listed"] == [["config", True, None], ["notes.txt", False, len("hello from mlflow\n")]]
    assert out["nested"] == ["config/model.json"] and out["loaded"] == {"layers": 4}
    assert out["downloaded"] == "hello from mlflow\n"

    # what corral has: the same run, in the project of that name, alice's
    client = server.client()
    [run] = [r for r in client.runs(project="mnist-mlflow") if r["uid"] == out["run_id"]]
    assert (run["name"], run["user"], run["state"]) == ("lr-0.1", "alice", "finished")
    assert run["config"] == {"lr": "0.1", "batch_size": "32", "optimizer": "adam"}
    loss = client.series(out["run_id"], "loss")
    assert loss["steps"] == [0, 1, 2, 3, 4] and loss["values"][-1] == 0.2
    assert run["metrics"]["acc"]["last"] == 0.9
    listed = {a["path"]: a for a in client.artifacts(out["run_id"])}  # mlflow's uploads are corral's artifacts
    assert sorted(listed) == ["config/model.json", "notes.txt"] and listed["notes.txt"]["size"] == len("hello from mlflow\n")
    model = io.BytesIO()
    client.download_artifact(out["run_id"], "config/model.json", model)
    assert json.loads(model.getvalue()) == {"layers": 4} and listed["config/model.json"]["size"] == len(model.getvalue())


def test_bad_input_gets_mlflow_errors_never_a_500(server):
    api = "/api/2.0/mlflow"
    status, body = call(server, "GET", f"{api}/experiments/get-by-name?experiment_name=nope")
    assert (status, body["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    status, made = call(server, "POST", f"{api}/experiments/create", {"name": "exp"})
    assert status == 200 and made["experiment_id"].isdigit()
    status, body = call(server, "POST", f"{api}/experiments/create", {"name": "exp"})
    assert (status, body["error_code"]) == (400, "RESOURCE_ALREADY_EXISTS")
    status, body = call(server, "POST", f"{api}/runs/create", {"experiment_id": made["experiment_id"], "start_time": 1})
    assert status == 200
    run_id = body["run"]["info"]["run_id"]
    assert body["run"]["info"]["status"] == "RUNNING" and body["run"]["info"]["lifecycle_stage"] == "active"

    status, body = call(server, "POST", f"{api}/runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "0.1"})
    assert status == 200
    status, body = call(server, "POST", f"{api}/runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "0.2"})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE") and "Changing param values" in body["message"]

    bad = [
        ("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "x", "value": "high", "timestamp": 1}]}),
        ("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "x", "value": 1, "timestamp": 10**30}]}),
        ("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "x", "value": 1, "timestamp": 1, "step": -1}]}),
        ("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "../x", "value": 1, "timestamp": 1}]}),
        ("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "x\x00", "value": 1, "timestamp": 1}]}),
        ("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "x", "value": 1, "timestamp": 1}] * 1001}),
        ("runs/log-batch", {"run_id": run_id, "params": [{"key": "p", "value": "v" * 6001}]}),
        ("runs/log-batch", {"run_id": run_id, "tags": "not a list"}),
        ("runs/log-metric", {"run_id": run_id, "key": "x", "timestamp": 1}),
        ("runs/set-tag", {"run_id": run_id, "key": "", "value": "v"}),
        ("runs/update", {"run_id": run_id, "status": "EXPLODED"}),
        ("runs/search", {"experiment_ids": ["0"], "filter": "metrics.acc > 'high'"}),
        ("runs/search", {"experiment_ids": ["0"], "filter": "metrics.a = 1 or metrics.b = 2"}),
        ("runs/search", {"experiment_ids": ["0"], "order_by": ["bogus.x DESC"]}),
        ("runs/search", {"experiment_ids": ["0"], "page_token": "not-a-token"}),
        ("runs/search", {"experiment_ids": ["x'; drop table runs"]}),
        ("runs/search", {"experiment_ids": "0"}),
        ("runs/create", {"experiment_id": "12abc"}),
        ("experiments/create", {"name": ""}),
        ("experiments/create", {"name": ["a"]}),
    ]
    for path, payload in bad:
        status, body = call(server, "POST", f"{api}/{path}", payload)
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (path, payload, status, body)
    for raw in (b"not json", b"[1, 2]", b'{"run_id": "\\ud800"}', b"[" * 5000 + b"]" * 5000):
        status, body = call(server, "POST", f"{api}/runs/log-batch", raw=raw)
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (raw[:20], status, body)

    for method, path in (("GET", f"{api}/runs/get?run_id=0123456789abcdef0123456789abcdef"),
                         ("GET", f"{api}/experiments/get?experiment_id=999999"),
                         ("GET", f"{api}/metrics/get-history?run_id=nosuchrun&metric_key=loss")):
        status, body = call(server, method, path)
        assert (status, body["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST"), (path, body)
    status, body = call(server, "POST", f"{api}/runs/delete-tag", {"run_id": run_id, "key": "never-set"})
    assert (status, body["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")

    # a deleted run takes no more logging, and leaves the default search; it can come back
    assert call(server, "POST", f"{api}/runs/delete", {"run_id": run_id})[0] == 200
    status, body = call(server, "POST", f"{api}/runs/log-metric", {"run_id": run_id, "key": "x", "value": 1, "timestamp": 1})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    assert call(server, "POST", f"{api}/runs/search", {"experiment_ids": [made["experiment_id"]]})[1] == {"runs": []}
    status, body = call(server, "POST", f"{api}/runs/search", {"experiment_ids": [made["experiment_id"]], "run_view_type": "ALL"})
    assert [r["info"]["lifecycle_stage"] for r in body["runs"]] == ["deleted"]
    assert call(server, "POST", f"{api}/runs/restore", {"run_id": run_id})[0] == 200

    # artifact paths stay inside the run
    for path in (f"{made['experiment_id']}/{run_id}/artifacts/../../etc/passwd", f"0/{run_id}/other/x",
                 f"{made['experiment_id']}/{run_id}/artifacts/a//b", "0/../x/artifacts/y"):
        status, body = call(server, "PUT", f"/api/2.0/mlflow-artifacts/artifacts/{path}", raw=b"x")
        assert status in (400, 404), (path, status, body)
        assert body["error_code"] in ("INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST"), body


def test_another_users_run_is_theirs_to_change_and_read_artifacts_of(server, tmp_path):
    alice, bob = token_for(server, "alice"), token_for(server, "bob")
    reader = token_for(server, "bob", scope="read")
    api = "/api/2.0/mlflow"
    status, body = call(server, "POST", f"{api}/runs/create", {"experiment_id": "0"}, token=alice)
    assert status == 200 and body["run"]["info"]["user_id"] == "alice"
    run_id, experiment = body["run"]["info"]["run_id"], body["run"]["info"]["experiment_id"]
    artifact = f"/api/2.0/mlflow-artifacts/artifacts/{experiment}/{run_id}/artifacts/model.txt"
    assert call(server, "PUT", artifact, raw=b"weights", token=alice)[0] == 200

    for path, payload in (("runs/log-metric", {"run_id": run_id, "key": "x", "value": 1, "timestamp": 1}),
                          ("runs/log-batch", {"run_id": run_id, "params": [{"key": "p", "value": "v"}]}),
                          ("runs/set-tag", {"run_id": run_id, "key": "k", "value": "v"}),
                          ("runs/update", {"run_id": run_id, "status": "KILLED"}),
                          ("runs/delete", {"run_id": run_id})):
        status, body = call(server, "POST", f"{api}/{path}", payload, token=bob)
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (path, body)
    assert call(server, "GET", artifact, token=bob)[1]["error_code"] == "PERMISSION_DENIED"
    assert call(server, "PUT", artifact, raw=b"mine now", token=bob)[0] == 403
    status, body = call(server, "POST", f"{api}/runs/create", {"experiment_id": "0"}, token=reader)
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
    status, body = call(server, "POST", f"{api}/experiments/delete", {"experiment_id": experiment}, token=bob)
    assert (status, body["error_code"]) in ((403, "PERMISSION_DENIED"), (400, "INVALID_PARAMETER_VALUE"))

    # everybody sees runs and metrics (corral's rule); the owner and an admin change them
    status, body = call(server, "GET", f"{api}/runs/get?run_id={run_id}", token=bob)
    assert status == 200 and body["run"]["info"]["status"] == "RUNNING"
    assert call(server, "GET", artifact, token=alice)[1] == b"weights"
    status, body = call(server, "POST", f"{api}/runs/update", {"run_id": run_id, "status": "KILLED", "end_time": 5})
    assert status == 200 and body["run_info"]["status"] == "KILLED"
    assert server.client().get_run(run_id)["state"] == "crashed"


def test_a_run_started_in_a_corral_job_is_attached_to_it(server, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''
        import mlflow
        mlflow.set_experiment("in-a-job")
        with mlflow.start_run(run_name="job-run"):
            mlflow.log_metric("loss", 0.5, step=1)
    '''))
    client = server.client()
    job = client.submit([sys.executable, str(script)], workdir=str(tmp_path),
                        env={"MLFLOW_TRACKING_URI": server.url})
    final = client.wait(job["id"], timeout=180, poll=1)
    assert final["state"] == "COMPLETED", open(final["stderr_path"]).read()[-3000:]
    [run] = client.runs(project="in-a-job")
    assert run["job_id"] == job["id"] and run["name"] == "job-run" and run["state"] == "finished"

    # a run that names another user's job is refused, as corral's own create refuses it
    bob = token_for(server, "bob")
    status, body = call(server, "POST", "/api/2.0/mlflow/runs/create",
                        {"experiment_id": "0", "tags": [{"key": "corral.job_id", "value": str(job["id"])}]}, token=bob)
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
    status, body = call(server, "POST", "/api/2.0/mlflow/runs/create",
                        {"experiment_id": "0", "tags": [{"key": "corral.job_id", "value": "99999"}]}, token=bob)
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE")


LOG_FILES = textwrap.dedent('''
    import json, sys
    import mlflow
    weights, data = sys.argv[1:3]
    with mlflow.start_run(run_name="dedup") as run:
        mlflow.log_artifact(weights)
        mlflow.log_artifacts(data, "data")
    print(json.dumps({"run_id": run.info.run_id}))
''')

READ_BACK = textwrap.dedent('''
    import json, os, sys, tempfile
    from mlflow import MlflowClient
    run_id, big, more = sys.argv[1:4]
    client = MlflowClient()
    listed = {path or "": [[a.path, a.is_dir, a.file_size] for a in client.list_artifacts(run_id, path)]
              for path in (None, "data", "corral")}
    readme = open(client.download_artifacts(run_id, "corral/readme.md", tempfile.mkdtemp())).read()
    whole = client.download_artifacts(run_id, "data", tempfile.mkdtemp())
    tree = sorted(os.path.relpath(os.path.join(d, f), whole) for d, _, fs in os.walk(whole) for f in fs)
    refused = {}
    for name, path in (("big", big), ("more", more)):
        try:
            client.log_artifact(run_id, path)
        except Exception as exc:
            refused[name] = str(exc)
    print(json.dumps({"listed": listed, "readme": readme, "tree": tree, "refused": refused}))
''')


def blob_files(home: str) -> list[str]:
    return sorted(name for _, _, names in os.walk(os.path.join(home, "artifacts", "blobs")) for name in names)


def test_mlflow_artifacts_are_corral_artifacts_stored_once_and_within_the_quota(server_factory, db_url, tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[tracking]\nmax_artifact_mb = 1\nuser_artifact_quota_mb = 2\n")
    server = server_factory(gpus=0, db=db_url, home=home)
    alice = token_for(server, "alice")
    weights = os.urandom(600_000)
    files = {"weights.bin": weights, "data/copy.bin": weights, "data/sub/labels.txt": b"cat\ndog\n",
             "big.bin": os.urandom(1_100_000), "more.bin": os.urandom(900_000), "readme.md": b"# from corral\n"}
    for name, content in files.items():
        os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
        (tmp_path / name).write_bytes(content)

    run_id = run_mlflow(server, LOG_FILES, token=alice, tmp_path=tmp_path, args=[
        str(tmp_path / "weights.bin"), str(tmp_path / "data")])["run_id"]
    client = server.client()
    client.upload_artifact(run_id, str(tmp_path / "readme.md"), "corral/readme.md")  # through corral's own API
    out = run_mlflow(server, READ_BACK, token=alice, tmp_path=tmp_path, args=[
        run_id, str(tmp_path / "big.bin"), str(tmp_path / "more.bin")])

    # what mlflow logged is in corral's listing of the run, with its sizes and content
    listed = {a["path"]: a for a in client.artifacts(run_id)}
    assert {path: a["size"] for path, a in listed.items()} == {
        "weights.bin": 600_000, "data/copy.bin": 600_000, "data/sub/labels.txt": 8, "corral/readme.md": 14}
    labels = io.BytesIO()
    client.download_artifact(run_id, "data/sub/labels.txt", labels)
    assert labels.getvalue() == b"cat\ndog\n"
    # the same content twice is stored once
    assert listed["weights.bin"]["sha256"] == listed["data/copy.bin"]["sha256"] == hashlib.sha256(weights).hexdigest()
    assert blob_files(home) == sorted({a["sha256"] for a in listed.values()})

    # what corral holds, mlflow's client lists and downloads
    assert out["listed"] == {
        "": [["corral", True, None], ["data", True, None], ["weights.bin", False, 600_000]],
        "data": [["data/copy.bin", False, 600_000], ["data/sub", True, None]],
        "corral": [["corral/readme.md", False, 14]]}
    assert out["readme"] == "# from corral\n"
    assert out["tree"] == ["copy.bin", "sub/labels.txt"]

    # corral's limits refuse, with the reason, through the mlflow client; nothing of it is kept
    assert "max_artifact_mb" in out["refused"]["big"] and "1,048,576 bytes" in out["refused"]["big"]
    assert "user_artifact_quota_mb" in out["refused"]["more"] and "alice's artifacts hold" in out["refused"]["more"]
    assert sorted(a["path"] for a in client.artifacts(run_id)) == sorted(listed)
    assert os.listdir(os.path.join(home, "artifacts", "tmp")) == []

    # deleting a directory as mlflow's client does: all under it; a blob still linked stays
    root = call(server, "GET", f"/api/2.0/mlflow/runs/get?run_id={run_id}")[1]["run"]["info"]["artifact_uri"]
    status, body = call(server, "DELETE", f"/api/2.0/mlflow-artifacts/artifacts/{root.split(':/', 1)[1]}/data", token=alice)
    assert status == 200, body
    assert sorted(a["path"] for a in client.artifacts(run_id)) == ["corral/readme.md", "weights.bin"]
    assert blob_files(home) == sorted({listed["weights.bin"]["sha256"], listed["corral/readme.md"]["sha256"]})


def test_an_older_corrals_mlflow_files_are_kept_after_an_upgrade(server_factory, tmp_path):
    server = server_factory(gpus=0)
    alice = token_for(server, "alice")
    status, body = call(server, "POST", "/api/2.0/mlflow/runs/create", {"experiment_id": "0"}, token=alice)
    assert status == 200
    run_id = body["run"]["info"]["run_id"]
    server.stop()
    # where an older corral kept the files mlflow's client uploaded
    legacy = os.path.join(server.home, "artifacts", "mlflow", run_id)
    os.makedirs(os.path.join(legacy, "model"))
    with open(os.path.join(legacy, "model", "weights.bin"), "wb") as f:
        f.write(b"trained weights")
    server.start()

    url = f"/api/2.0/mlflow-artifacts/artifacts/0/{run_id}/artifacts"
    assert call(server, "GET", f"{url}/model/weights.bin", token=alice) == (200, b"trained weights")
    status, body = call(server, "GET", f"/api/2.0/mlflow-artifacts/artifacts?path=0/{run_id}/artifacts/model", token=alice)
    assert body == {"files": [{"path": "weights.bin", "is_dir": False, "file_size": 15}]}
    assert [(a["path"], a["size"]) for a in server.client().artifacts(run_id)] == [("model/weights.bin", 15)]
    assert not os.path.exists(legacy)  # moved into the store, not kept twice


def test_an_mlflow_artifact_larger_than_a_request_is_logged_whole_and_other_bodies_stay_limited(server_factory,
                                                                                                  tmp_path):
    server = server_factory(gpus=0)
    alice = token_for(server, "alice")
    model = tmp_path / "weights.bin"
    with open(model, "wb") as f:  # past the API's 64 MB a request: a model's weights often are
        for _ in range(70):
            f.write(os.urandom(1 << 20))
    data = tmp_path / "data"
    data.mkdir()
    run_id = run_mlflow(server, LOG_FILES, token=alice, tmp_path=tmp_path, args=[str(model), str(data)])["run_id"]
    (stored,) = server.client().artifacts(run_id)
    assert (stored["path"], stored["size"]) == ("weights.bin", 70 << 20)
    with open(model, "rb") as f:
        assert stored["sha256"] == hashlib.file_digest(f, "sha256").hexdigest()
    # any other body over the limit is still refused before it is read
    status, body = call(server, "POST", "/api/2.0/mlflow/runs/log-batch", raw=b"{" + b" " * (65 << 20) + b"}",
                        token=alice)
    assert status == 413 and "larger than the server's limit of 64 MB" in body["error"]["message"]
