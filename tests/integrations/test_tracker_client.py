"""The course's tracker client, unchanged (`course_tracker_client.py` beside this file), against a live corral.

A training script imports the client as the course's students do; only TRACKER_API (corral's URL,
with or without the `/tracker` prefix) and TRACKER_API_KEY (a corral token) are set for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import requests

from corral.home import HomeLayout

HERE = os.path.dirname(os.path.abspath(__file__))

TRAIN = textwrap.dedent("""
    import json, os, sys
    from course_tracker_client import create_run, log_artifact, log_metric, log_metrics_batch

    run_id = create_run(experiment_id=sys.argv[1], config={"lr": 0.001, "batch_size": 64, "model": "resnet18"})
    for epoch in range(5):
        log_metric(run_id, "train_loss", 2.0 / (epoch + 1), step=epoch)
        log_metrics_batch(run_id, step=epoch, metrics={"val_loss": 1.0 / (epoch + 1), "val_acc": 0.5 + epoch / 10})
    with open("final.pt", "wb") as f:
        f.write(b"w" * 1234)
    log_artifact(run_id, "final.pt", type="checkpoint")
    print(json.dumps({"run_id": run_id}))
""")


def _train(tmp_path, url: str, key: str, experiment: str, job: str | None, check: bool = True) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(TRAIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "CORRAL_", "TRACKER_"))}
    env.update(PYTHONPATH=HERE, TRACKER_API=url, TRACKER_API_KEY=key, SLURMD_NODENAME="gpu07", TRACKER_GPU_TYPE="H100")
    if job is not None:
        env["SLURM_JOB_ID"] = job
    return subprocess.run([sys.executable, "train.py", experiment], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=check)


@pytest.mark.parametrize("prefix", ["/tracker", ""], ids=["tracker-prefix", "bare-url"])
def test_the_course_client_logs_everything_into_corral_unchanged(server_factory, tmp_path, prefix):
    server = server_factory()
    client = server.client()
    job = client.submit(["sleep", "60"], name="course")
    key = client.create_token(expires="1h")["token"]
    try:
        done = _train(tmp_path, server.url + prefix, key, "7", str(job["id"]))
        run_id = json.loads(done.stdout)["run_id"]

        run = client.get_run(run_id)
        assert run["project"] == "7"  # the experiment is a corral project
        assert run["config"] == {"lr": 0.001, "batch_size": 64, "model": "resnet18"}
        assert run["job_id"] == job["id"] and run["node"] == "gpu07" and run["gpu_type"] == "H100"
        loss = client.series(run_id, "train_loss")
        assert loss["steps"] == [0, 1, 2, 3, 4] and loss["values"] == [2.0, 1.0, 2 / 3, 0.5, 0.4]
        acc = client.series(run_id, "val_acc")
        assert acc["steps"] == [0, 1, 2, 3, 4] and acc["values"] == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9])
        assert client.series(run_id, "val_loss")["count"] == 5
        [artifact] = client.artifacts(run_id)
        assert artifact["path"] == str(tmp_path / "final.pt")
        assert artifact["type"] == "checkpoint" and artifact["size"] == 1234
        assert [r["id"] for r in client.runs(job=job["id"])] == [run_id]

        # the job requeued: the script starts again and gets its run back; the steps it logs again are not doubled
        again = _train(tmp_path, server.url + prefix, key, "7", str(job["id"]))
        assert json.loads(again.stdout)["run_id"] == run_id
        assert client.series(run_id, "train_loss")["count"] == 5
        assert len(client.artifacts(run_id)) == 1  # a known path is updated, not added twice
    finally:
        client.cancel(job["id"])


def test_a_course_key_speaks_for_its_user_alone(server_factory, tmp_path):
    server = server_factory()
    root = server.client()
    job = root.submit(["sleep", "60"], name="not-alices")
    mine = root.create_token(expires="1h")["token"]
    alices = root.create_token(user="corral-course-alice", expires="1h")["token"]
    base = server.url + "/tracker"
    try:
        # alice may not hang her run on someone else's job
        refused = _train(tmp_path, base, alices, "7", str(job["id"]), check=False)
        assert refused.returncode != 0 and "403" in refused.stderr
        # outside a job, her run is hers
        own = json.loads(_train(tmp_path, base, alices, "7", None).stdout)["run_id"]
        assert root.get_run(own)["user"] == "corral-course-alice" and root.get_run(own)["job_id"] is None
        # she may not log into another's run, nor record artifacts there
        theirs = json.loads(_train(tmp_path, base, mine, "7", str(job["id"])).stdout)["run_id"]
        headers = {"X-API-Key": alices}
        assert requests.post(f"{base}/runs/{theirs}/metrics", json={"name": "x", "value": 1, "step": 99},
                             headers=headers, timeout=10).status_code == 403
        assert requests.post(f"{base}/runs/{theirs}/artifacts", json={"path": "/tmp/x"},
                             headers=headers, timeout=10).status_code == 403
        # a wrong key is refused, not taken for the local user the connection comes from
        answer = requests.post(f"{base}/experiments/7/runs", json={}, headers={"X-API-Key": "corral_nonsense"}, timeout=10)
        assert answer.status_code == 401
        # a job id no job has is named, not silently dropped
        answer = requests.post(f"{base}/experiments/7/runs", json={"slurm_job_id": "99999"}, headers=headers, timeout=10)
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "slurm_job_id"
    finally:
        root.cancel(job["id"])


@pytest.mark.parametrize(("route", "body", "field"), [
    ("runs/{run}/metrics", {"name": "loss", "value": "high", "step": 1}, "value"),
    ("runs/{run}/metrics", {"name": "loss", "value": 1.0}, "step"),
    ("runs/{run}/metrics/batch", {"step": 1, "metrics": {"loss": 1.0}, "timestamp": "yesterday"}, "timestamp"),
    ("runs/{run}/metrics/batch", {"step": 1, "metrics": []}, "metrics"),
    ("runs/{run}/artifacts", {"path": "/x", "size_bytes": -1}, "size_bytes"),
    ("experiments/7/runs", {"config": [1, 2]}, "config"),
    ("experiments/7/runs", {"slurm_job_id": "12; rm -rf /"}, "slurm_job_id"),
])
def test_bad_course_bodies_are_refused_naming_their_field(server_factory, route, body, field):
    server = server_factory()
    key = server.client().create_token(expires="1h")["token"]
    base, headers = server.url + "/tracker", {"X-API-Key": key}
    run = requests.post(f"{base}/experiments/7/runs", json={}, headers=headers, timeout=10).json()["run_id"]
    answer = requests.post(f"{base}/{route.format(run=run)}", json=body, headers=headers, timeout=10)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field


def test_the_course_epilog_nudges_corral_with_a_key(server_factory):
    server = server_factory()
    key = server.client().create_token(expires="1h")["token"]
    with open(HomeLayout(server.home).webhook_token) as f:
        secret = f.read().strip()
    form = "job_id=123&status=COMPLETED&exit_code=0"
    for base in (server.url + "/tracker", server.url):
        for credential in (key, secret):
            answer = requests.post(f"{base}/webhooks/slurm", data=form, timeout=10, headers={
                "X-API-Key": credential, "Content-Type": "application/x-www-form-urlencoded"})
            assert answer.status_code == 202, answer.text
            assert answer.json() == {"status": "accepted", "job_id": "123"}
        answer = requests.post(f"{base}/webhooks/slurm", data=form, timeout=10, headers={"X-API-Key": "corral_wrong"})
        assert answer.status_code == 401
    # corral's own epilog route takes its secret as X-API-Key too
    assert requests.post(f"{server.url}/api/v1/webhooks/slurm", json={"slurm_job_id": "1"}, timeout=10,
                         headers={"X-API-Key": secret}).status_code == 202
    assert requests.post(f"{server.url}/api/v1/webhooks/slurm", json={}, timeout=10,
                         headers={"X-API-Key": "nope"}).status_code == 401


def test_a_corral_token_works_as_x_api_key_on_corral_own_routes(server_factory):
    server = server_factory()
    root = server.client()
    key = root.create_token(user="corral-course-bob", expires="1h")["token"]
    answer = requests.get(f"{server.url}/api/v1/whoami", headers={"X-API-Key": key}, timeout=10)
    assert answer.status_code == 200 and answer.json()["user"] == "corral-course-bob"
    # the dashboard's run pages at the root stay pages: no caller needed to load them
    assert requests.get(f"{server.url}/runs/1", timeout=10).status_code == 200
