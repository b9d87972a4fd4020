"""The REST API against a live server, on SQLite and on PostgreSQL."""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse

import pytest

from tests.helpers import wait_for


def call(server, method: str, path: str, body=None, raw: bytes | None = None):
    url = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    ctype = response.getheader("content-type", "")
    return response.status, (json.loads(data) if "json" in ctype and data else data), dict(response.getheaders())


REQUIRED_FIELDS = {
    "id", "name", "state", "reason", "exit_code", "gpu_ids", "gpus", "cpus", "mem_mb", "time_limit_s", "submit_time",
    "start_time", "end_time", "stdout_path", "stderr_path", "command",
}


def test_submit_answers_201_with_the_job_and_it_runs_to_completion(server, short_tmp):
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "command": ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], "gpus": 2, "cpus": 1, "mem": "1G", "time": "10:00",
        "name": "hello", "workdir": short_tmp, "labels": {"team": "vision"},
    })
    assert status == 201, job
    assert REQUIRED_FIELDS <= set(job)
    assert (job["name"], job["gpus"], job["mem_mb"], job["time_limit_s"]) == ("hello", 2, 1024, 600)
    done = wait_for(lambda: (j := call(server, "GET", f"/api/v1/jobs/{job['id']}")[1])["state"] == "COMPLETED" and j)
    assert done["exit_code"] == 0 and len(done["gpu_ids"]) == 2
    assert done["start_time"] and done["end_time"]
    with open(done["stdout_path"]) as f:
        assert f.read().strip() == ",".join(map(str, done["gpu_ids"]))


@pytest.mark.parametrize("body, field", [
    ({"command": ["true"], "gpus": -1}, "gpus"),
    ({"command": ["true"], "cpus": 0}, "cpus"),
    ({"command": ["true"], "mem": "lots"}, "mem"),
    ({"command": ["true"], "time": "soon"}, "time"),
    ({"command": ["true"], "bogus": 1}, "bogus"),
    ({"command": "true"}, "command"),
    ({"command": []}, "command"),
    ({}, "command"),
    ({"command": ["true"], "workdir": "relative/dir"}, "workdir"),
    ({"command": ["true"], "env": {"1X": "y"}}, "env"),
    ({"script": "echo no shebang"}, "script"),
    ({"script": "#!/bin/sh\n#SBATCH --core-spec=2\ntrue\n"}, "script"),
    ({"command": ["true"], "gpus": 9}, "gpus"),
    ({"command": ["true"], "gpus": 1, "gpu_type": "H100"}, "gpus"),
    ({"command": ["true"], "cpus": 100000}, "cpus"),
    ({"command": ["true"], "cpus": "four"}, "cpus"),
    ({"command": ["true"], "labels": "x"}, "labels"),
    ({"command": ["true"], "name": 5}, "name"),
    ({"command": ["true"], "gpus": True}, "gpus"),
    ({"command": ["true"], "nodes": 2}, "nodes"),
    ({"command": ["true"], "nodes": 0}, "nodes"),
    ({"command": ["true"], "gpus": 1, "gpus_per_node": 2}, "gpus_per_node"),
])
def test_bad_input_is_422_naming_the_field_and_changes_nothing(refusing_server, body, field):
    before = call(refusing_server, "GET", "/api/v1/jobs?scope=active")[1]["jobs"]
    status, answer, _ = call(refusing_server, "POST", "/api/v1/jobs", body)
    assert status == 422, answer
    assert answer["error"]["field"] == field
    assert answer["error"]["message"]
    assert call(refusing_server, "GET", "/api/v1/jobs?scope=active")[1]["jobs"] == before


def test_a_multi_node_job_is_refused_here_pointing_at_slurm(server):
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "nodes": 2, "gpus_per_node": 4})
    assert status == 422 and "--backend slurm" in answer["error"]["message"]


def test_too_many_gpus_is_refused_with_the_reason(server):
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "gpus": 9})
    assert status == 422
    assert "requested 9 GPUs; the largest node has 4" in answer["error"]["message"]


def test_malformed_json_is_a_clear_422(server):
    status, answer, _ = call(server, "POST", "/api/v1/jobs", raw=b"{not json")
    assert status == 422 and answer["error"]["field"] == "body" and "JSON" in answer["error"]["message"]
    status, answer, _ = call(server, "POST", "/api/v1/jobs", raw=b"[1, 2]")
    assert status == 422 and "JSON object" in answer["error"]["message"]


def test_unknown_job_is_404(server):
    for method, path in (("GET", "/api/v1/jobs/99999"), ("POST", "/api/v1/jobs/99999/cancel"),
                         ("GET", "/api/v1/jobs/99999/logs")):
        status, answer, _ = call(server, method, path)
        assert status == 404 and "99999" in answer["error"]["message"]


def test_cancelling_a_finished_job_is_409_and_keeps_its_state(server):
    job = call(server, "POST", "/api/v1/jobs", {"command": ["true"]})[1]
    wait_for(lambda: call(server, "GET", f"/api/v1/jobs/{job['id']}")[1]["state"] == "COMPLETED")
    status, answer, _ = call(server, "POST", f"/api/v1/jobs/{job['id']}/cancel")
    assert status == 409 and "COMPLETED" in answer["error"]["message"]
    assert call(server, "GET", f"/api/v1/jobs/{job['id']}")[1]["state"] == "COMPLETED"


def test_pending_jobs_wait_in_submit_order_with_reasons(server):
    blocker = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "30"], "gpus": 3})[1]
    wait_for(lambda: call(server, "GET", f"/api/v1/jobs/{blocker['id']}")[1]["state"] == "RUNNING")
    big = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "gpus": 2})[1]
    small = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "gpus": 1})[1]

    def reasons():
        jobs = {j["id"]: j for j in call(server, "GET", "/api/v1/jobs")[1]["jobs"]}
        return jobs[big["id"]]["reason"] == "Resources" and jobs[small["id"]]["reason"] == "Priority" and jobs

    jobs = wait_for(reasons)
    assert jobs[small["id"]]["state"] == "PENDING"  # one GPU is free, but strict order: it may not overtake
    status, cancelled, _ = call(server, "POST", f"/api/v1/jobs/{blocker['id']}/cancel")
    assert status == 200 and cancelled["state"] == "CANCELLED"
    wait_for(lambda: call(server, "GET", f"/api/v1/jobs/{small['id']}")[1]["state"] == "COMPLETED")


def test_cancel_a_pending_job_removes_it_from_the_queue(server):
    blocker = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "30"], "gpus": 4})[1]
    waiting = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "gpus": 1})[1]
    status, job, _ = call(server, "POST", f"/api/v1/jobs/{waiting['id']}/cancel")
    assert status == 200 and job["state"] == "CANCELLED" and job["start_time"] is None
    active = [j["id"] for j in call(server, "GET", "/api/v1/jobs")[1]["jobs"]]
    assert waiting["id"] not in active and blocker["id"] in active
    finished = call(server, "GET", "/api/v1/jobs?scope=finished&state=CANCELLED")[1]["jobs"]
    assert [j["id"] for j in finished] == [waiting["id"]]
    call(server, "POST", f"/api/v1/jobs/{blocker['id']}/cancel")


@pytest.mark.parametrize("body, field", [
    ({}, "jobs"), ({"jobs": []}, "jobs"), ({"jobs": "12"}, "jobs"), ({"jobs": ["{id}", "x"]}, "jobs[1]"),
    ({"jobs": ["{id}", 12]}, "jobs[1]"), ({"jobs": ["{id}", "12_[1-3]"]}, "jobs[1]"),
    ({"jobs": ["{id}"], "pending_only": "yes"}, "pending_only"), ({"jobs": ["{id}"], "state": "PENDING"}, "state"),
])
def test_a_cancel_of_many_with_a_bad_body_is_refused_by_field_and_cancels_nothing(server, body, field):
    waiting = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "hold": True})[1]
    named = {k: [r.replace("{id}", str(waiting["id"])) if isinstance(r, str) else r for r in v] if isinstance(v, list)
             else v for k, v in body.items()}
    status, answer, _ = call(server, "POST", "/api/v1/jobs/cancel", named)
    assert status == 422 and answer["error"]["field"] == field, answer
    assert call(server, "GET", f"/api/v1/jobs/{waiting['id']}")[1]["state"] == "PENDING"


def test_a_cancel_of_many_answers_each_job_in_order_and_one_refusal_stops_no_other(server):
    done = call(server, "POST", "/api/v1/jobs", {"command": ["true"]})[1]
    wait_for(lambda: call(server, "GET", f"/api/v1/jobs/{done['id']}")[1]["state"] == "COMPLETED")
    held = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "hold": True})[1]
    array = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "hold": True, "array": "0-3"})[1]
    refs = [str(held["id"]), "99999", str(done["id"]), f"{array['id']}_2", str(held["id"])]
    status, answer, _ = call(server, "POST", "/api/v1/jobs/cancel", {"jobs": refs})
    assert status == 200, answer
    first, missing, ended, task, again = answer["jobs"]
    assert (first["id"], first["state"], first["start_time"]) == (held["id"], "CANCELLED", None)
    assert (missing["ref"], missing["error"]["status"], missing["error"]["code"]) == ("99999", 404, "not_found")
    assert (ended["error"]["status"], ended["error"]["code"]) == (409, "conflict")
    assert "already ended (COMPLETED)" in ended["error"]["message"]
    assert (task["ref"], task["state"], task["start_time"]) == (f"{array['id']}_2", "CANCELLED", None)  # a record of its own
    assert again["id"] == held["id"] and again["state"] == "CANCELLED"  # named twice: cancelled once
    tasks = call(server, "GET", f"/api/v1/jobs/{array['id']}/tasks")[1]
    assert tasks["summary"]["states"] == {"CANCELLED": 1, "PENDING": 3}


def test_logs_read_by_offset_and_tail_and_wait_returns_the_final_job(server):
    job = call(server, "POST", "/api/v1/jobs", {"command": ["sh", "-c", "for i in 1 2 3; do echo line$i; done; echo oops >&2; exit 4"]})[1]
    status, final, _ = call(server, "GET", f"/api/v1/jobs/{job['id']}/wait?timeout=20")
    assert status == 200 and final["state"] == "FAILED" and final["exit_code"] == 4
    status, data, headers = call(server, "GET", f"/api/v1/jobs/{job['id']}/logs")
    assert data == b"line1\nline2\nline3\n" and headers["x-corral-offset"] == "18"
    assert headers["x-corral-state"] == "FAILED"
    assert call(server, "GET", f"/api/v1/jobs/{job['id']}/logs?offset=12")[1] == b"line3\n"
    assert call(server, "GET", f"/api/v1/jobs/{job['id']}/logs?tail=1")[1] == b"line3\n"
    assert call(server, "GET", f"/api/v1/jobs/{job['id']}/logs?stream=stderr")[1] == b"oops\n"
    status, answer, _ = call(server, "GET", f"/api/v1/jobs/{job['id']}/logs?stream=both")
    assert status == 422 and answer["error"]["field"] == "stream"


def test_nodes_show_each_gpu_and_its_holder(server):
    job = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "30"], "gpus": 2, "name": "holder"})[1]
    wait_for(lambda: call(server, "GET", f"/api/v1/jobs/{job['id']}")[1]["state"] == "RUNNING")
    nodes = call(server, "GET", "/api/v1/nodes")[1]
    assert len(nodes) == 1 and len(nodes[0]["gpus"]) == 4
    held = [g for g in nodes[0]["gpus"] if g["job_id"] == job["id"]]
    assert len(held) == 2 and all(g["type"] == "A100" and g["mem_mb"] == 80 * 1024 for g in held)
    assert held[0]["job_name"] == "holder"
    call(server, "POST", f"/api/v1/jobs/{job['id']}/cancel")


def test_nodes_give_each_gpu_its_compute_capability_and_requirements_choose_by_it(server):
    nodes = call(server, "GET", "/api/v1/nodes")[1]
    assert {g["capability"] for g in nodes[0]["gpus"]} == {8.0}  # declared A100s, by the table of types
    assert nodes[0]["arch"] in ("X86_64", "aarch64")
    status, answer, _ = call(server, "POST", "/api/v1/jobs",
                             {"command": ["true"], "gpus": 1, "requirements": "CUDACapability >= 9.0"})
    assert status == 422 and answer["error"]["field"] == "requirements" and "capability 8.0" in answer["error"]["hint"]
    status, job, _ = call(server, "POST", "/api/v1/jobs",
                          {"command": ["true"], "gpus": 1, "requirements": "TARGET.CUDACapability >= 8.0"})
    assert status == 201 and job["requirements"] == "TARGET.CUDACapability >= 8.0"


def test_openapi_documents_the_job_endpoints(server):
    status, doc, _ = call(server, "GET", "/openapi.json")
    assert status == 200
    assert {"/api/v1/jobs", "/api/v1/jobs/{job_id}", "/api/v1/jobs/{job_id}/cancel", "/api/v1/nodes"} <= set(doc["paths"])
    body = doc["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"command", "script", "gpus", "mem", "time", "workdir"} <= set(body["properties"])


def test_script_jobs_honour_sbatch_directives_and_report_warnings(server, short_tmp):
    script = ("#!/bin/bash\n#SBATCH --job-name=tutorial\n#SBATCH --gres=gpu:A100:2\n#SBATCH --cpus-per-task=1\n"
              "#SBATCH --mem=1G\n#SBATCH --time=00:05:00\n#SBATCH --partition=gpu\n"
              f"#SBATCH --output={short_tmp}/%x-%j.out\n\necho job=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES\n")
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"script": script, "workdir": short_tmp})
    assert status == 201, job
    assert (job["name"], job["gpus"], job["mem_mb"], job["time_limit_s"]) == ("tutorial", 2, 1024, 300)
    assert any("partition 'gpu' ignored" in w for w in job["warnings"])
    assert job["stdout_path"] == os.path.join(short_tmp, f"tutorial-{job['id']}.out")
    final = call(server, "GET", f"/api/v1/jobs/{job['id']}/wait?timeout=20")[1]
    assert final["state"] == "COMPLETED"
    with open(final["stdout_path"]) as f:
        assert f.read() == f"job={job['id']} gpus={','.join(map(str, final['gpu_ids']))}\n"


def test_a_job_whose_log_cannot_be_opened_fails_with_the_reason_and_the_queue_goes_on(server, short_tmp):
    blocker = os.path.join(short_tmp, "a-file")
    open(blocker, "w").close()
    deep = os.path.join(blocker, "x" * 80, "out.txt")  # under a file: cannot be created
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "stdout": deep})
    assert status == 201
    final = call(server, "GET", f"/api/v1/jobs/{job['id']}/wait?timeout=20")[1]
    assert final["state"] == "FAILED" and "cannot open log file" in final["reason"]
    after = call(server, "POST", "/api/v1/jobs", {"command": ["true"]})[1]
    assert call(server, "GET", f"/api/v1/jobs/{after['id']}/wait?timeout=20")[1]["state"] == "COMPLETED"


@pytest.mark.parametrize("path", [
    "/api/v1/jobs/99999999999999999999", "/api/v1/jobs?scope=finished&before=99999999999999999999",
    "/api/v1/jobs/1/logs?offset=99999999999999999999999",
])
def test_out_of_range_numbers_in_urls_are_422_not_500(refusing_server, path):
    status, answer, _ = call(refusing_server, "GET", path)
    assert status == 422, answer


@pytest.mark.parametrize("body, field", [
    ({"command": ["true"], "gpus": 1, "gpu_mem": "99999999999999999999P"}, "gpu_mem"),
    ({"command": ["true"], "gpu_mem": "40G"}, "gpu_mem"),
    ({"command": ["true"], "gpus": "\u0663"}, "gpus"),
    ({"command": ["true"], "time": "\u0663"}, "time"),
    ({"command": ["true"], "mem_mb": 2**40}, "mem_mb"),
])
def test_values_the_database_could_not_hold_are_refused_up_front(refusing_server, body, field):
    status, answer, _ = call(refusing_server, "POST", "/api/v1/jobs", body)
    assert status == 422 and answer["error"]["field"] == field


def test_reading_a_log_past_its_end_answers_nothing_from_the_end(server_factory):
    client = server_factory().client()
    job = client.submit(["sh", "-c", "echo hello"])["id"]
    client.wait(job, timeout=30)
    data, offset, state = client.logs(job, offset=2**62)
    assert (data, offset, state) == (b"", len(b"hello\n"), "COMPLETED")
