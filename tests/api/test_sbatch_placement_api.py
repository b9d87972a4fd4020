"""sbatch's --begin, --deadline, --exclusive, --constraint, --nodelist/--exclude, --cpus-per-gpu, --priority and
--mail-type through a real server: waiting for a begin time, the whole node, features from config.toml, node
names, admins' priorities, and mail through a real local SMTP server (aiosmtpd)."""

from __future__ import annotations

import getpass
import os
import socket
import time

import pytest

from tests.api.test_jobs_api import call
from tests.helpers import wait_for
from tests.monitor.receivers import MailCollector, start_smtp

HOST = socket.gethostname()


def _job(server, ref):
    return call(server, "GET", f"/api/v1/jobs/{ref}")[1]


def _state(server, ref, *states, timeout=30):
    return wait_for(lambda: (j := _job(server, ref))["state"] in states and j, timeout=timeout)


def _configured(server_factory, short_tmp, text):
    home = os.path.join(short_tmp, "placement-home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(text)
    return server_factory(home=home)


def test_a_job_with_a_begin_time_waits_with_reason_begin_time_then_runs(server, short_tmp):
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "script": "#!/bin/sh\n#SBATCH --begin=now+4\ntrue\n", "submit_dir": short_tmp})
    assert status == 201, job
    assert abs(time.mktime(time.strptime(job["begin_time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
               - (time.time() + 4)) < 3
    waiting = wait_for(lambda: (j := _job(server, job["id"]))["reason"] == "BeginTime" and j, timeout=10)
    assert waiting["state"] == "PENDING"
    other = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp})[1]
    assert _state(server, other["id"], "COMPLETED")  # it blocks nobody
    assert _state(server, job["id"], "COMPLETED", timeout=40)


def test_an_exclusive_job_holds_every_gpu_and_nothing_starts_beside_it(server, short_tmp):
    status, big, _ = call(server, "POST", "/api/v1/jobs", {
        "command": ["sleep", "30"], "gpus": 1, "submit_dir": short_tmp, "options": ["--exclusive"]})
    assert status == 201 and big["exclusive"] is True, big
    running = _state(server, big["id"], "RUNNING")
    assert running["gpu_ids"] == [0, 1, 2, 3]
    small = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp})[1]
    waiting = wait_for(lambda: (j := _job(server, small["id"]))["reason"] == "Resources" and j, timeout=15)
    assert waiting["state"] == "PENDING"
    call(server, "POST", f"/api/v1/jobs/{big['id']}/cancel")
    assert _state(server, small["id"], "COMPLETED")


def test_constraints_read_the_features_config_declares_and_a_missing_one_is_refused(server_factory, short_tmp):
    server = _configured(server_factory, short_tmp, '[node]\nfeatures = ["a100", "nvlink"]\n')
    body = {"command": ["true"], "submit_dir": short_tmp}
    for options in (["--constraint=nvlink"], ["-C", "a100&nvlink"], ["-C", "h100|nvlink"]):
        status, job, _ = call(server, "POST", "/api/v1/jobs", {**body, "options": options})
        assert status == 201, job
        assert _state(server, job["id"], "COMPLETED")["features"] == options[-1].rpartition("=")[2]
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "constraint": "h100"})
    assert status == 422 and answer["error"]["field"] == "constraint", answer
    assert "h100" in answer["error"]["message"] and "a100, nvlink" in answer["error"]["message"]


def test_nodelist_and_exclude_take_this_nodes_name_and_refuse_others(server, short_tmp):
    body = {"command": ["true"], "submit_dir": short_tmp}
    status, job, _ = call(server, "POST", "/api/v1/jobs", {**body, "options": ["-w", HOST]})
    assert status == 201 and job["nodelist"] == [HOST], job
    assert _state(server, job["id"], "COMPLETED")["node"] == HOST
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "nodelist": "elsewhere"})
    assert status == 422 and answer["error"]["field"] == "nodelist" and HOST in answer["error"]["message"]
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "options": ["--exclude", HOST]})
    assert status == 422 and answer["error"]["field"] == "exclude", answer


def test_cpus_per_gpu_and_gpus_per_task_size_the_job(server, short_tmp):
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "command": ["true"], "submit_dir": short_tmp, "options": ["--gpus-per-task=2", "--cpus-per-gpu=1"]})
    assert status == 201, job
    assert (job["gpus"], job["cpus"]) == (2, 2)


def test_only_an_admin_sets_a_priority(server, short_tmp):
    # the test's own user runs the server, and is its admin over the Unix socket; a token's caller is not
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp,
                                                          "options": ["--priority=500", "-H"]})
    assert status == 201 and job["fixed_priority"] == 500, job


def test_a_pending_job_that_can_no_longer_meet_its_deadline_ends_deadline(server, short_tmp):
    hog = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "30"], "gpus": 4, "submit_dir": short_tmp})[1]
    _state(server, hog["id"], "RUNNING")
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "command": ["true"], "gpus": 1, "time": "1", "submit_dir": short_tmp, "options": ["--deadline=now+63"]})
    assert status == 201, job
    ended = _state(server, job["id"], "DEADLINE", timeout=30)
    assert ended["reason"] == "DeadLine" and ended["start_time"] is None
    call(server, "POST", f"/api/v1/jobs/{hog['id']}/cancel")
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {
        "command": ["true"], "time": "10", "submit_dir": short_tmp, "deadline": "now+60"})
    assert status == 422 and answer["error"]["field"] == "deadline" and "could not end in time" in str(answer)


@pytest.fixture
def relay():
    collector = MailCollector()
    controller = start_smtp(collector)
    yield collector, controller.port
    controller.stop()


def test_mail_type_sends_slurms_mails_through_the_smtp_relay(server_factory, short_tmp, relay):
    collector, port = relay
    server = _configured(server_factory, short_tmp,
                         f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsender = "slurm@lab.test"\ndomain = "lab.test"\n')
    body = {"submit_dir": short_tmp, "name": "train"}
    ok = call(server, "POST", "/api/v1/jobs", {**body, "command": ["sleep", "1"], "options": ["--mail-type=ALL"]})[1]
    _state(server, ok["id"], "COMPLETED")
    failed = call(server, "POST", "/api/v1/jobs", {**body, "command": ["sh", "-c", "exit 3"],
                                                   "options": ["--mail-type=FAIL", "--mail-user=me@else.test"]})[1]
    _state(server, failed["id"], "FAILED")
    quiet = call(server, "POST", "/api/v1/jobs", {**body, "command": ["true"], "options": ["--mail-type=NONE"]})[1]
    _state(server, quiet["id"], "COMPLETED")
    wait_for(lambda: len(collector.envelopes) >= 3, timeout=20)
    time.sleep(0.5)
    mails = [collector.message(i) for i in range(len(collector.envelopes))]
    subjects = [m["Subject"] for m in mails]
    assert len(subjects) == 3, subjects
    user = ok["user"]
    began, ended, fail = sorted(mails, key=lambda m: ("Began" not in m["Subject"], str(failed["id"]) in m["Subject"]))
    assert began["To"] == f"{user}@lab.test" and began["From"] == "slurm@lab.test"
    assert began["Subject"].startswith(f"Slurm Job_id={ok['id']} Name=train Began, Queued time 00:00:0")
    assert ended["Subject"].startswith(f"Slurm Job_id={ok['id']} Name=train Ended, Run time 00:00:0")
    assert ended["Subject"].endswith(", COMPLETED, ExitCode 0")
    assert fail["To"] == "me@else.test"
    assert fail["Subject"].startswith(f"Slurm Job_id={failed['id']} Name=train Failed, Run time 00:00:0")
    assert fail["Subject"].endswith(", FAILED, ExitCode 3")


def test_a_nodes_gpu_types_are_features_a_constraint_names_without_an_admin_declaring_them(server_factory, short_tmp):
    server = server_factory()  # `--gpus 4 --gpu-type A100`, no [node] features
    body = {"command": ["true"], "submit_dir": short_tmp}
    [node] = call(server, "GET", "/api/v1/nodes")[1]
    assert node["features"] == ["a100"]
    for options in (["--constraint=a100"], ["-C", "A100"], ["-C", "h100|a100"]):  # case does not matter
        status, job, _ = call(server, "POST", "/api/v1/jobs", {**body, "gpus": 1, "options": options})
        assert status == 201, job
        assert _state(server, job["id"], "COMPLETED")["state"] == "COMPLETED"
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "constraint": "h100"})
    assert status == 422 and answer["error"]["field"] == "constraint", answer
    assert "h100: on no node" in answer["error"]["message"] and "features here: a100 " in answer["error"]["message"]


def test_on_a_node_of_two_gpu_types_a_constraint_on_one_gets_its_gpus(server_factory, short_tmp):
    server = server_factory(extra=["--gpu-type", "T4:2,A100:2"])  # GPUs 0-1 T4, 2-3 A100
    body = {"command": ["sleep", "30"], "submit_dir": short_tmp}
    t4 = call(server, "POST", "/api/v1/jobs", {**body, "gpus": 2, "constraint": "t4"})[1]
    a100 = call(server, "POST", "/api/v1/jobs", {**body, "gpus": 1, "constraint": "A100"})[1]
    assert _state(server, t4["id"], "RUNNING")["gpu_ids"] == [0, 1]
    assert _state(server, a100["id"], "RUNNING")["gpu_ids"] in ([2], [3])
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "gpus": 3, "constraint": "t4"})
    assert status == 422 and answer["error"]["field"] == "constraint", answer
    for job in (t4, a100):
        call(server, "POST", f"/api/v1/jobs/{job['id']}/cancel")


def test_mail_asked_for_on_a_server_without_smtp_is_warned_of_at_submit_and_in_show(server_factory, short_tmp,
                                                                                     relay, monkeypatch):
    from click.testing import CliRunner

    from corral.cli.main import cli

    server = server_factory()  # no [smtp] in its config.toml: it sends no mail
    monkeypatch.chdir(short_tmp)

    def corral(home: str, *args: str):
        return CliRunner().invoke(cli, ["--home", home, *args], catch_exceptions=False)

    submitted = corral(server.home, "submit", "--parsable", "--mail-type=END,FAIL", "--", "true")
    assert submitted.exit_code == 0, submitted.stderr
    warning = ("--mail-type=END,FAIL: this server sends no mail (its config.toml has no [smtp] section), so none "
               "will be sent for this job; ask an admin to set [smtp], or watch it with corral wait")
    assert submitted.stderr == f"corral: warning: {warning}\n"
    job_id = submitted.stdout.strip()
    _state(server, job_id, "COMPLETED")
    shown = [line.strip().partition(": ") for line in corral(server.home, "show", job_id).stdout.splitlines()]
    assert ("Mail", ": ", f"END,FAIL to {getpass.getuser()}") in shown and ("Warning", ": ", warning) in shown
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp,
                                                             "options": ["--mail-type=BEGIN"]})
    assert status == 201 and answer["warnings"] == [warning.replace("END,FAIL", "BEGIN")]
    quiet = corral(server.home, "submit", "--parsable", "--", "true")  # no mail asked for: nothing said
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert "Warning" not in corral(server.home, "show", quiet.stdout.strip()).stdout

    _, port = relay  # with [smtp] the mail goes out: nothing to warn of
    mailing = _configured(server_factory, short_tmp, f'[smtp]\nhost = "127.0.0.1"\nport = {port}\n')
    sent = corral(mailing.home, "submit", "--parsable", "--mail-type=END", "--", "true")
    assert sent.exit_code == 0 and sent.stderr == ""
    assert call(mailing, "GET", f"/api/v1/jobs/{sent.stdout.strip()}")[1]["warnings"] == []
