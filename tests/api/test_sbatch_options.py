"""sbatch's command line in a submit (`options`), through the real API: read as #SBATCH lines are, over them and
under the request's own fields; -H, --open-mode, --comment and -A made real; what corral cannot honour refused."""

from __future__ import annotations

import os

import pytest

from tests.api.test_jobs_api import call
from tests.helpers import wait_for

SCRIPT = "#!/bin/sh\n#SBATCH -J fromscript --mem=2G --time=60 --comment=script\necho ran\n"


def _job(server, ref):
    return call(server, "GET", f"/api/v1/jobs/{ref}")[1]


def _ended(server, ref):
    return wait_for(lambda: (j := _job(server, ref))["state"] not in ("PENDING", "RUNNING") and j, timeout=30)


def test_options_come_over_the_scripts_lines_and_under_the_requests_fields(server, short_tmp):
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "script": SCRIPT, "script_name": "prep.sh", "submit_dir": short_tmp, "time": "5",
        "options": ["-J", "fromoptions", "--mem=1G", "--comment", "from the command line", "-A", "lab",
                    "--requeue", "--wckey=ml"],
    })
    assert status == 201, job
    assert (job["name"], job["mem_mb"], job["time_limit_s"]) == ("fromoptions", 1024, 300)
    assert job["comment"] == "from the command line"
    assert job["account"] is None  # this server keeps no accounts: taken, and charges nothing
    assert any("--account=lab" in w for w in job["warnings"])
    assert any("--wckey=ml" in w for w in job["warnings"]) and not any("--requeue" in w for w in job["warnings"])
    assert job["requeue"] is True  # it waits again if its GPU fails
    done = _ended(server, job["id"])
    assert done["state"] == "COMPLETED" and done["comment"] == "from the command line"


@pytest.mark.parametrize("how", [{"options": ["-H"]}, {"options": ["--hold"]}, {"hold": True}])
def test_a_job_submitted_held_waits_until_released(server, short_tmp, how):
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp, **how})
    assert status == 201, job
    assert job["held"] is True
    waiting = _job(server, job["id"])
    assert (waiting["state"], waiting["reason"], waiting["held"]) == ("PENDING", "JobHeldUser", True)
    other = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp})[1]
    assert _ended(server, other["id"])["state"] == "COMPLETED"  # the scheduler ran, and left the held one
    assert _job(server, job["id"])["state"] == "PENDING"
    status, released, _ = call(server, "POST", f"/api/v1/jobs/{job['id']}/release")
    assert status == 200, released
    assert _ended(server, job["id"])["state"] == "COMPLETED"


def test_open_mode_append_keeps_what_the_file_holds_and_truncate_empties_it(server, short_tmp):
    out = os.path.join(short_tmp, "shared.out")

    def run(text, *options):
        status, job, _ = call(server, "POST", "/api/v1/jobs", {
            "script": f"#!/bin/sh\necho {text}\n", "submit_dir": short_tmp, "options": [f"--output={out}", *options]})
        assert status == 201, job
        assert _ended(server, job["id"])["state"] == "COMPLETED"
        with open(out) as f:
            return f.read()

    assert run("first", "--open-mode=append") == "first\n"
    assert run("second", "--open-mode", "append") == "first\nsecond\n"
    assert run("third") == "third\n"  # truncate, the default
    assert run("fourth", "--open-mode=truncate") == "fourth\n"
    # a script's own line, and the request's field, say the same
    assert run("fifth", "--job-name=x") == "fifth\n"
    status, job, _ = call(server, "POST", "/api/v1/jobs", {
        "script": "#!/bin/sh\n#SBATCH --open-mode=append\necho sixth\n", "submit_dir": short_tmp, "stdout": out})
    assert _ended(server, job["id"])["state"] == "COMPLETED"
    with open(out) as f:
        assert f.read() == "fifth\nsixth\n"


@pytest.mark.parametrize("options, field, words", [
    (["--begin=soon"], "begin", "cannot read 'soon' as a time"),
    (["--exclusive=user"], "options", "sbatch --exclusive=user: sharing a node"),
    (["-C", "h100"], "constraint", "no node here has the features h100"),
    (["--nodelist=nosuch"], "nodelist", "nosuch: no such node here"),
    (["-x", "nosuch"], "exclude", "nosuch: no such node here"),
    (["--cpus-per-gpu=2"], "cpus_per_gpu", "needs a GPU request"),
    (["--deadline=now-1hour"], "deadline", "is already past"),
    (["--time-min=soon"], "time_min", "cannot read 'soon'"),
    (["--mail-type=SOMETIMES"], "mail_type", "'SOMETIMES' is not a mail type"),
    (["--open-mode=sometimes"], "options", "sbatch --open-mode=sometimes: give --open-mode=append"),
    (["--frobnicate=1"], "options", "sbatch option --frobnicate is not supported by corral"),
    (["--mem"], "options", "sbatch option --mem needs a value"),
    (["--mem=lots"], "mem", "sbatch --mem=lots: "),
    (["-t", "soon"], "time", "sbatch -t=soon: "),
    (["--comment=a\u202eb"], "comment", "sbatch --comment=a\u202eb: "),
    ("--mem=1G", "options", "must be a list of strings"),
    ([1], "options", "must be a list of strings"),
])
def test_a_bad_option_is_refused_naming_it_as_typed_and_nothing_is_created(refusing_server, options, field, words):
    before = call(refusing_server, "GET", "/api/v1/jobs?scope=active")[1]["jobs"]
    status, answer, _ = call(refusing_server, "POST", "/api/v1/jobs", {"command": ["true"], "options": options})
    assert status == 422, answer
    assert answer["error"]["field"] == field
    assert words in answer["error"]["message"]
    assert call(refusing_server, "GET", "/api/v1/jobs?scope=active")[1]["jobs"] == before


def test_every_bad_option_and_directive_is_listed(refusing_server):
    status, answer, _ = call(refusing_server, "POST", "/api/v1/jobs", {
        "script": "#!/bin/sh\n#SBATCH --overcommit\ntrue\n", "options": ["--core-spec=2", "--contiguous", "--time=x"]})
    assert status == 422, answer
    # the script's lines first, as sbatch reads them; then, once they are right, its command line
    assert answer["error"]["field"] == "script"
    status, answer, _ = call(refusing_server, "POST", "/api/v1/jobs", {
        "script": "#!/bin/sh\ntrue\n", "options": ["--core-spec=2", "--contiguous", "--time=x"]})
    assert answer["error"]["field"] == "options"
    assert answer["error"]["message"].startswith("options: 3 problems in the sbatch options, all listed here:")
    assert [p.split(" ")[:3] for p in answer["error"]["problems"]] == [
        ["sbatch", "option", "--core-spec"], ["sbatch", "option", "--contiguous"], ["sbatch", "--time=x:", "cannot"]]


def test_account_option_charges_that_account_where_accounts_are_kept(server_factory, short_tmp):
    import getpass

    home = os.path.join(short_tmp, "accounts-home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'[accounts.lab]\nmembers = ["{getpass.getuser()}"]\n[accounts.vision]\nmembers = ["{getpass.getuser()}"]\n')
    server = server_factory(home=home)
    body = {"command": ["true"], "submit_dir": short_tmp}
    assert call(server, "POST", "/api/v1/jobs", body)[1]["account"] == "lab"  # the first, by name
    for options in (["-A", "vision"], ["--account=vision"], ["-Avision"]):
        status, job, _ = call(server, "POST", "/api/v1/jobs", {**body, "options": options})
        assert status == 201 and job["account"] == "vision", job
    # the request's own field over the option
    assert call(server, "POST", "/api/v1/jobs", {**body, "options": ["-A", "vision"], "account": "lab"})[1]["account"] == "lab"
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "options": ["-A", "nosuch"]})
    assert status == 422 and answer["error"]["field"] == "account"
    assert answer["error"]["message"] == "account: --account=nosuch: unknown account 'nosuch' (known accounts: lab, vision)"
    status, answer, _ = call(server, "POST", "/api/v1/jobs", {**body, "account": "nosuch"})
    assert answer["error"]["message"] == "account: unknown account 'nosuch' (known accounts: lab, vision)"


def test_an_array_submitted_held_starts_no_task_until_released(server, short_tmp):
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp,
                                                          "array": "0-2", "options": ["-H"]})
    assert status == 201 and job["held"] is True, job
    other = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "submit_dir": short_tmp})[1]
    assert _ended(server, other["id"])["state"] == "COMPLETED"
    tasks = call(server, "GET", f"/api/v1/jobs/{job['id']}/tasks")[1]
    assert tasks["total"] == 0 and _job(server, job["id"])["reason"] == "JobHeldUser"
    assert call(server, "POST", f"/api/v1/jobs/{job['id']}/release")[0] == 200
    done = wait_for(lambda: (t := call(server, "GET", f"/api/v1/jobs/{job['id']}/tasks")[1])["total"] == 3
                    and all(x["state"] == "COMPLETED" for x in t["tasks"]) and t, timeout=30)
    assert not any(x["held"] for x in done["tasks"])
