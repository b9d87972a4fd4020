"""The monitor end to end: a real server samples real jobs, answers metric queries, fires alerts
through real receivers (an HTTP server, an SMTP server, a command), and diagnoses real failures."""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

from corral.client import Client
from corral.errors import Conflict, InvalidRequest, NotFound
from tests.helpers import wait_for

REPLAY = os.path.join(os.path.dirname(__file__), "data", "nvml_8gpu.jsonl")
FAST = ["--sample-interval", "0.3"]


@pytest.fixture
def fast_server(server_factory):
    return server_factory(gpus=4, extra=FAST)




def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def points(client: Client, job: int, metric: str) -> list[float]:
    return [v for _, v in client.metrics(job, metric, start="-5m")["points"] if v is not None]


# -- sampling and queries ---------------------------------------------------------------------------

@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_a_cpu_bound_job_shows_a_full_core_and_an_allocation_shows_its_memory(fast_server):
    client = fast_server.client()
    busy = client.submit(py("while True: pass"), cpus=1, mem="2G")["id"]
    hog = client.submit(py("import time; b = b'x' * (500 << 20); time.sleep(60)"), cpus=1, mem="2G")["id"]
    wait_for(lambda: len(points(client, busy, "cpu_utilization")) >= 5, timeout=20)
    cpu = sorted(points(client, busy, "cpu_utilization")[-5:])
    assert 50 <= cpu[2] <= 150, cpu  # ~100% of its one core (the median, on a machine shared with the tests)
    rss = wait_for(lambda: max(points(client, hog, "rss_mb") or [0]) >= 450 and points(client, hog, "rss_mb"), timeout=20)
    assert 450 <= max(rss) <= 700
    wait_for(lambda: points(client, hog, "cpu_utilization")[-1] < 30, timeout=20)  # once allocated, it sleeps

    top = {row["id"]: row for row in client.top()}
    assert top[busy]["sample"]["cpu_utilization"] > 60 and top[hog]["sample"]["rss_mb"] >= 450
    assert top[busy]["sample"]["gpu_utilization"] is None  # declared GPUs: nothing to read

    result = client.metrics(busy, "cpu_utilization", start="-10m", max_points=2)
    assert len(result["points"]) <= 2 and result["count"] >= 4  # thinned, keeping the extremes
    for job in (busy, hog):
        client.cancel(job)


def test_metric_queries_check_their_input(fast_server):
    client = fast_server.client()
    job = client.submit(["true"])["id"]
    client.wait(job, timeout=30)
    with pytest.raises(InvalidRequest) as bad_time:
        client.metrics(job, "cpu_utilization", start="yesterday-ish")
    assert bad_time.value.field == "start" and "-30m" in bad_time.value.message
    with pytest.raises(NotFound) as unknown:
        client.metrics(job, "gpu_happiness")
    assert "gpu_happiness" in unknown.value.message
    with pytest.raises(NotFound):
        client.metrics(999_999, "cpu_utilization")
    assert client.metrics(job, "cpu_utilization", start="2020-01-01T00:00:00Z", end="2020-01-02T00:00:00Z")["points"] == []


def test_recorded_nvml_frames_are_attributed_to_the_jobs_gpus(server_factory, monkeypatch):
    monkeypatch.setenv("CORRAL_GPU_REPLAY", REPLAY)
    server = server_factory(gpus=8, extra=FAST)
    client = server.client()
    job = client.submit(py("import time; time.sleep(60)"), gpus=2)
    frames = [json.loads(line) for line in open(REPLAY)]
    gpus = wait_for(lambda: client.get(job["id"])["gpu_ids"])
    assert len(gpus) == 2
    # each frame's mean over exactly the job's two GPUs
    expected = {sum(f[i]["utilization"]["gpu"] for i in gpus) / 2 for f in frames}
    seen = wait_for(lambda: points(client, job["id"], "gpu_utilization"), timeout=20)
    assert set(seen) <= expected
    temps = points(client, job["id"], "gpu_temperature_c")
    assert set(temps) <= {max(f[i]["temperature_c"] for i in gpus) for f in frames}
    row = next(r for r in client.top() if r["id"] == job["id"])
    assert [g["index"] for g in row["sample"]["gpus"]] == gpus
    client.cancel(job["id"])


def test_samples_also_land_on_the_jobs_tracked_run_and_top_shows_progress(fast_server):
    client = fast_server.client()
    job = client.submit(py("import time; time.sleep(60)"))["id"]
    wait_for(lambda: client.get(job)["state"] == "RUNNING")
    now = time.time()
    run = client.create_run(project="p", name="r", job_id=job, config={"total_steps": 1000}, start_time=now - 10)
    client.log_metrics(run["id"], {"points": [{"key": "loss", "step": s, "value": 1.0 / (s + 1), "time": now - 10 + s / 10}
                                              for s in range(0, 101)]})
    wait_for(lambda: "system/cpu_utilization" in client.get_run(run["id"]).get("metrics", {})
             or _has_series(client, run["id"], "system/cpu_utilization"), timeout=20)
    row = wait_for(lambda: next((r for r in client.top() if r["id"] == job and r["progress"]), None), timeout=20)
    progress = row["progress"]
    assert progress["step"] == 100 and progress["total"] == 1000
    assert progress["rate"] == pytest.approx(10.0, rel=0.2) and progress["eta_s"] == pytest.approx(90, rel=0.25)
    assert points(client, job, "loss")[-1] == pytest.approx(1 / 101)  # tracked metrics answer the same query
    client.cancel(job)


def _has_series(client: Client, run: int, key: str) -> bool:
    try:
        return client.series(run, key)["count"] > 0
    except NotFound:
        return False


# -- alerts -----------------------------------------------------------------------------------------

def test_a_failing_job_fires_a_webhook_and_an_email_once(server_factory, db_url, http, smtp_server, tmp_path):
    collector, port = smtp_server
    client = server_factory(db=db_url, extra=FAST).client()
    client.add_channel("hook", "webhook", url=f"{http.base}/corral")
    client.add_channel("oncall", "email", to=["oncall@example.com"], smtp_host="127.0.0.1", smtp_port=port)
    marker = tmp_path / "command-got"
    client.add_channel("script", "command", argv=py(f"import sys; open({str(marker)!r}, 'w').write(sys.stdin.read())"))
    client.create_alert("job-failed", "state in (FAILED, OUT_OF_MEMORY)", severity="critical",
                        message="{name} (job {job}) of {user} ended {state}", channels=["hook", "oncall", "script"])
    ok = client.submit(["true"])["id"]
    failed = client.submit(py("import sys; sys.exit(3)"), name="train-bert")["id"]
    client.wait(ok, timeout=30)
    client.wait(failed, timeout=30)

    # the command's file exists from its open(): wait for what it wrote, whole
    wait_for(lambda: http.requests and collector.envelopes and marker.exists() and marker.read_text().endswith("}"),
             timeout=30)
    body = json.loads(http.requests[0]["body"])
    assert body["rule"] == "job-failed" and body["job_id"] == failed and body["severity"] == "critical"
    assert body["message"] == f"train-bert (job {failed}) of {client.get(failed)['user']} ended FAILED"
    email = collector.message()
    assert email["To"] == "oncall@example.com" and "train-bert" in email["Subject"]
    assert json.loads(marker.read_text())["job_id"] == failed
    time.sleep(1.5)  # more ticks: the same episode sends nothing new
    assert len(http.requests) == 1 and len(collector.envelopes) == 1

    [firing] = client.alerts()
    assert firing["job_id"] == failed
    # an event about an ended job, told once: "fired", never "resolved", which would read as all well
    assert firing["status"] == "fired" and firing["resolved_at"] is None
    assert client.alerts(status="fired")[0]["id"] == firing["id"]
    assert {d["channel"]: d["status"] for d in firing["deliveries"]} == {"hook": "sent", "oncall": "sent", "script": "sent"}
    client.acknowledge(firing["id"])
    assert client.alerts(unacknowledged=True) == []  # acknowledged: gone from `corral alert list`
    assert client.alerts()[0]["acknowledged_by"]


def test_a_condition_fires_once_per_episode_and_resolves_when_it_clears(fast_server, http):
    client = fast_server.client()
    client.add_channel("hook", "webhook", url=http.base)
    job = client.submit(py("import time; b = b'x' * (300 << 20); time.sleep(120)"), mem="1G")["id"]
    client.create_alert("big", "rss_mb > 200 for 1s", job=job, channels=["hook"])
    wait_for(lambda: http.requests, timeout=20)
    time.sleep(1.5)
    assert [json.loads(r["body"])["status"] for r in http.requests] == ["firing"]
    client.cancel(job)
    wait_for(lambda: len(http.requests) == 2, timeout=20)
    resolved = json.loads(http.requests[1]["body"])
    assert resolved["status"] == "resolved" and resolved["resolved_at"] >= resolved["fired_at"]
    assert client.alerts(status="resolved")[0]["resolved_at"] is not None


def test_nan_loss_hung_job_time_left_and_queue_wait_fire(fast_server):
    client = fast_server.client()
    for name, condition in (("nan", "metric.loss is nan"), ("hung", "no_progress for 2s"),
                            ("ending", "time_left < 1h"), ("waiting", "queue_wait > 1s")):
        client.create_alert(name, condition)
    quiet = client.submit(py("import time; time.sleep(60)"), time="2h")["id"]
    short = client.submit(py("import time; time.sleep(60)"), time="30m")["id"]
    held = client.submit(["true"], dependency=f"afterok:{quiet}")["id"]  # waits
    wait_for(lambda: client.get(quiet)["state"] == "RUNNING")
    run = client.create_run(project="p", name="r", job_id=quiet)
    client.log_metrics(run["id"], {"points": [{"key": "loss", "step": 1, "value": 2.5},
                                              {"key": "loss", "step": 2, "value": "NaN"}]})

    def fired() -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for f in client.alerts(limit=100):
            out.setdefault(f["rule"], set()).add(f["job_id"])
        return out

    # each rule for the job it is about: on a loaded machine the short job may be found hung a tick first
    wait_for(lambda: {"nan", "hung", "ending", "waiting"} <= set(f := fired()) and quiet in f["hung"]
             and held in f["waiting"], timeout=30)
    found = fired()
    assert found["nan"] == {quiet} and quiet in found["hung"] and found["ending"] == {short}
    assert held in found["waiting"]
    nan = next(f for f in client.alerts() if f["rule"] == "nan")
    assert nan["value"] == "non-finite at step 2"
    # durations carry their unit: "value 3 s", never a bare "value 3"
    for rule in ("hung", "ending", "waiting"):
        firing = next(f for f in client.alerts() if f["rule"] == rule)
        assert re.fullmatch(r"-?\d+ s( \(.+\))?", firing["value"]), firing
        assert f"(value {firing['value']})" in firing["message"]
    for job in (quiet, short, held):
        client.cancel(job)


def test_a_failing_channel_is_retried_and_its_failure_is_visible(fast_server):
    client = fast_server.client()
    client.add_channel("down", "webhook", url="http://127.0.0.1:9/never")
    client.create_alert("failed", "state == FAILED", channels=["down"])
    job = client.submit(["false"])["id"]
    client.wait(job, timeout=30)
    delivery = wait_for(lambda: [d for f in client.alerts() for d in f["deliveries"] if d["attempts"] >= 1], timeout=20)[0]
    assert delivery["status"] == "pending" and delivery["next_attempt_at"] > time.time()  # retried later, with backoff
    assert "127.0.0.1:9" in delivery["last_error"] and "refused" in delivery["last_error"]
    with pytest.raises(Conflict) as caught:
        client.test_channel("down")
    assert "refused" in caught.value.message


def test_rules_and_channels_are_validated_and_secrets_hidden(fast_server):
    client = fast_server.client()
    with pytest.raises(InvalidRequest) as bad:
        client.create_alert("x", "gpu_utilization < lots")
    assert bad.value.field == "condition"
    with pytest.raises(NotFound):
        client.create_alert("x", "state == FAILED", channels=["nope"])
    with pytest.raises(InvalidRequest) as bad_channel:
        client.add_channel("slack", "slack", url="ftp://hooks.slack.com/x")
    assert bad_channel.value.field == "url"
    assert client.alert_rules() == []  # nothing half-made
    client.add_channel("slack", "slack", url="https://hooks.slack.com/services/T0/B0/SECRET")
    assert "SECRET" not in json.dumps(client.channels())
    client.create_alert("x", "state == FAILED", channels=["slack"])
    with pytest.raises(Conflict):
        client.create_alert("x", "state == TIMEOUT")
    with pytest.raises(Conflict):
        client.delete_channel("slack")  # a rule uses it
    client.delete_alert("x")
    client.delete_channel("slack")
    assert client.alert_rules() == [] and client.channels() == []


# -- efficiency and diagnosis -------------------------------------------------------------------------

@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_eff_reports_a_local_jobs_cpu_and_memory_with_advice(fast_server):
    client = fast_server.client()
    job = client.submit(py("import time\nt = time.time()\nwhile time.time() - t < 2: pass"), cpus=1, mem="8G")["id"]
    client.wait(job, timeout=30)
    report = client.efficiency(job)
    assert report["state"] == "COMPLETED" and report["cpus"] == 1
    assert 0.4 <= report["cpu_efficiency"] <= 1.1  # a busy loop, less Python's start-up, on a shared machine
    assert report["mem_requested_mb"] == 8192 and report["mem_efficiency"] < 0.05
    assert any("--mem" in line for line in report["advice"])


def test_diagnose_names_cuda_oom_host_oom_and_timeout_with_evidence(fast_server, tmp_path):
    client = fast_server.client()
    oom_log = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
               "of 79.11 GiB of which 1.23 GiB is free.\n")
    cuda = client.submit(py(f"import sys; sys.stderr.write({oom_log!r}); sys.exit(1)"),
                         stderr=str(tmp_path / "%j.err"))["id"]
    host = client.submit(py("import time; b = b'x' * (400 << 20); time.sleep(30)"), mem="200M")["id"]
    late = client.submit(py("import time; time.sleep(600)"), time="0:02")["id"]  # 2 s
    for job in (cuda, host):
        client.wait(job, timeout=60)

    findings = {f["cause"]: f for f in client.diagnose(cuda)["findings"]}
    assert "cuda_oom" in findings
    assert any("Tried to allocate 2.00 GiB" in line and "stderr:3" in line for line in findings["cuda_oom"]["evidence"])
    assert any("batch" in fix for fix in findings["cuda_oom"]["fixes"])

    assert client.get(host)["state"] == "OUT_OF_MEMORY"
    assert "host_oom" in {f["cause"] for f in client.diagnose(host)["findings"]}

    assert client.wait(late, timeout=60)["state"] == "TIMEOUT"
    timeout = {f["cause"]: f for f in client.diagnose(late)["findings"]}["timeout_no_checkpoint"]
    assert any("checkpoint" in fix for fix in timeout["fixes"])


def test_submit_warns_when_a_declared_model_needs_more_gpu_memory(fast_server):
    client = fast_server.client()
    small = client.submit(["true"], gpus=1, labels={"params": "70B"})
    assert any("70B" in w and "--gpus" in w for w in small["warnings"])  # 4×80 GB here, 1,344 GB needed
    assert client.submit(["true"], gpus=1, labels={"params": "350M"})["warnings"] == []
    unreadable = client.submit(["true"], gpus=1, labels={"params": "huge"})
    assert unreadable["warnings"] and "params" in unreadable["warnings"][0]  # a warning, never a refusal


def test_rules_open_episodes_and_pending_deliveries_survive_a_restart(server_factory, tmp_path):
    from tests.monitor.receivers import HttpReceiver, free_port

    port = free_port()
    server = server_factory(extra=FAST)
    client = server.client()
    client.add_channel("later", "webhook", url=f"http://127.0.0.1:{port}/hook")  # nothing listens there yet
    client.create_alert("soon-over", "time_left < 90s")  # durations that must read back after the restart
    client.create_alert("long-wait", "state == PENDING for 1h", channels=["later"])
    client.create_alert("big", "rss_mb > 200", channels=["later"])
    job = client.submit(py("import time; b = b'x' * (300 << 20); time.sleep(120)"), mem="1G")["id"]
    wait_for(lambda: any(d["attempts"] >= 1 for f in client.alerts() for d in f["deliveries"]), timeout=30)
    [firing] = client.alerts()
    assert firing["rule"] == "big" and firing["status"] == "firing"

    server.stop()
    receiver = HttpReceiver(port=port)  # the receiver comes up while corral is down
    try:
        server.start()
        client = server.client()
        assert {r["condition"] for r in client.alert_rules()} == {"time_left < 90s", "state == PENDING for 1h",
                                                                    "rss_mb > 200"}
        wait_for(lambda: receiver.requests, timeout=30)  # the pending delivery, retried after the restart
        time.sleep(1.5)
        assert len(client.alerts()) == 1  # the episode open before the restart did not fire again
        assert [json.loads(r["body"])["firing_id"] for r in receiver.requests] == [firing["id"]]
    finally:
        client.cancel(job)
        receiver.close()


def test_metric_queries_say_nan_and_infinity_as_the_run_series_do(fast_server):
    client = fast_server.client()
    job = client.submit(py("import time; time.sleep(60)"))["id"]
    wait_for(lambda: client.get(job)["state"] == "RUNNING")
    run = client.create_run(project="p", job_id=job)
    client.log_metrics(run["id"], {"points": [{"key": "loss", "step": s, "value": v}
                                              for s, v in enumerate([2.0, "NaN", "Infinity", 0.5])]})
    assert [v for _, v in client.metrics(job, "loss", start="-5m")["points"]] == [2.0, "NaN", "Infinity", 0.5]
    client.cancel(job)
