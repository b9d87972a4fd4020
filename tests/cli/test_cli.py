"""The `corral` command against a live server (in-process with click's CliRunner, or as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from corral.cli.format import local_time
from corral.cli.main import cli
from tests.helpers import wait_for

TUTORIAL_SCRIPT = """#!/bin/bash
#SBATCH --job-name=mnist
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --time=00:10:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --error=logs/%x-%j.err
#SBATCH --export=ALL

echo "Job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURM_JOB_NODELIST with GPUs $CUDA_VISIBLE_DEVICES"
echo "args: $@"
echo "submit dir: $SLURM_SUBMIT_DIR"
"""


@pytest.fixture
def run(server_factory):
    server = server_factory()

    def invoke(*args: str, input: str | None = None):
        return CliRunner().invoke(cli, ["--home", server.home, *args], input=input, catch_exceptions=False)

    invoke.server = server
    return invoke


def test_an_unchanged_slurm_batch_script_runs_and_reads_its_slurm_variables(run, short_tmp, monkeypatch):
    path = os.path.join(short_tmp, "train.sh")
    with open(path, "w") as f:
        f.write(TUTORIAL_SCRIPT)
    os.makedirs(os.path.join(short_tmp, "logs"))
    monkeypatch.chdir(short_tmp)
    result = run("submit", path, "--epochs", "3")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Submitted batch job ")
    job_id = result.output.split()[-1]
    assert run("wait", job_id).exit_code == 0
    with open(os.path.join(short_tmp, "logs", f"mnist-{job_id}.out")) as f:
        out = f.read()
    assert f"Job {job_id} (mnist) on " in out
    assert "args: --epochs 3" in out
    assert f"submit dir: {short_tmp}" in out


def test_submit_json_and_show_json_carry_the_job_fields(run, short_tmp):
    result = run("submit", "--json", "-J", "probe", "--gpus", "1", "-c", "1", "--mem", "512M", "-t", "5",
                 "--label", "team=nlp", "--env", "ALPHA=1", "-D", short_tmp, "--", "sh", "-c", "echo $ALPHA")
    assert result.exit_code == 0, result.output
    job = json.loads(result.output)
    assert (job["name"], job["gpus"], job["mem_mb"], job["time_limit_s"], job["labels"]) == ("probe", 1, 512, 300, {"team": "nlp"})
    run("wait", str(job["id"]))
    shown = json.loads(run("show", str(job["id"]), "--json").output)
    assert shown["state"] == "COMPLETED" and shown["exit_code"] == 0 and len(shown["gpu_ids"]) == 1
    assert run("logs", str(job["id"])).output == "1\n"


def test_submit_takes_the_submitters_environment_like_sbatch(run, monkeypatch):
    monkeypatch.setenv("CORRAL_TEST_MARK", "from-client")
    job_id = run("submit", "--parsable", "--", "sh", "-c", "echo $CORRAL_TEST_MARK").output.strip()
    run("wait", job_id)
    assert run("logs", job_id).output == "from-client\n"
    none_id = run("submit", "--parsable", "--export=NONE", "--", "sh", "-c", "echo [$CORRAL_TEST_MARK]").output.strip()
    run("wait", none_id)
    assert run("logs", none_id).output == "[]\n"


def test_queue_shows_running_jobs_and_why_pending_ones_wait(run):
    first = run("submit", "--parsable", "--gpus", "4", "--", "sleep", "30").output.strip()
    second = run("submit", "--parsable", "--gpus", "1", "--", "true").output.strip()
    wait_for(lambda: json.loads(run("show", second, "--json").output)["reason"] == "Resources")
    table = run("queue").output
    lines = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert "RUNNING" in lines[first] and "PENDING" in lines[second] and "(Resources)" in lines[second]
    listed = json.loads(run("queue", "--json").output)
    assert [j["id"] for j in listed] == [int(first), int(second)]
    nodes = run("nodes").output
    assert f"{first} (sleep" in nodes and "GPUs 4/4 busy" in nodes
    result = run("cancel", first, second)
    said = result.output.splitlines()
    assert result.exit_code == 0 and said[1] == f"job {second}: cancelled before it started", result.output
    assert said[0].startswith((f"job {first}: cancelled: stopped after running 0:", f"job {first}: being stopped")), said
    history = run("history").output
    assert first in history and second in history and "CANCELLED" in history


def test_show_and_queue_long_say_when_a_running_job_should_end_and_why(run):
    limited = run("submit", "--parsable", "-t", "10", "--", "sleep", "120").output.strip()
    unlimited = run("submit", "--parsable", "--", "sleep", "120").output.strip()
    job = wait_for(lambda: (j := json.loads(run("show", limited, "--json").output))["state"] == "RUNNING" and j)
    wait_for(lambda: json.loads(run("show", unlimited, "--json").output)["state"] == "RUNNING")
    start = time.mktime(time.strptime(local_time(job["start_time"]), "%Y-%m-%dT%H:%M:%S"))
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start + 600))  # start + 10 minutes, to the second
    shown = run("show", limited).output
    assert f"ExpectedEnd: {end} (start + time limit)" in shown, shown
    assert "ExpectedEnd" not in run("show", unlimited).output  # no limit and no tracked run: nothing to say
    table = run("queue", "-l").output.splitlines()
    assert table[0].split()[:8] == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME", "TIME_LIMIT", "END_TIME"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows[limited][7] == end and rows[unlimited][7] == "-"
    assert "END_TIME" not in run("queue").output  # the long form's column
    run("cancel", limited, unlimited)


def test_wait_exits_with_the_jobs_exit_code(run):
    job_id = run("submit", "--parsable", "--", "sh", "-c", "exit 5").output.strip()
    result = run("wait", job_id)
    assert result.exit_code == 5
    assert "FAILED" in result.output


def test_logs_follow_prints_everything_until_the_job_ends(run):
    job_id = run("submit", "--parsable", "--", "sh", "-c", "for i in 1 2 3; do echo tick$i; sleep 0.3; done; echo bad >&2").output.strip()
    result = run("logs", "-f", job_id)
    assert result.output == "tick1\ntick2\ntick3\n"
    assert run("logs", "--stderr", job_id).output == "bad\n"


def test_cancelling_a_finished_job_or_an_unknown_one_fails_clearly(run):
    job_id = run("submit", "--parsable", "--", "true").output.strip()
    run("wait", job_id)
    result = CliRunner().invoke(cli, ["--home", run.server.home, "cancel", job_id])
    assert result.exit_code == 1 and "already ended (COMPLETED)" in result.output
    result = CliRunner().invoke(cli, ["--home", run.server.home, "show", "4242"])
    assert result.exit_code == 1 and "job 4242 does not exist" in result.output


def test_bad_resources_are_refused_and_nothing_is_queued(run):
    result = CliRunner().invoke(cli, ["--home", run.server.home, "submit", "--gpus", "9", "--", "true"])
    assert result.exit_code == 1
    assert "requested 9 GPUs; the largest node has 4" in result.output
    result = CliRunner().invoke(cli, ["--home", run.server.home, "submit", "--mem", "-5G", "--", "true"])
    assert result.exit_code == 1 and "mem" in result.output
    assert json.loads(run("queue", "--json").output) == []
    assert json.loads(run("history", "--json").output) == []


def test_an_unreadable_script_is_an_error_and_submits_nothing(run, short_tmp):
    path = os.path.join(short_tmp, "secret.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\ntrue\n")
    os.chmod(path, 0)
    missing = CliRunner().invoke(cli, ["--home", run.server.home, "submit", os.path.join(short_tmp, "nope.sh")])
    assert missing.exit_code == 1 and "cannot read script" in missing.output
    if os.geteuid() != 0:  # root reads any file
        result = CliRunner().invoke(cli, ["--home", run.server.home, "submit", path])
        assert result.exit_code == 1 and "Permission denied" in result.output
    assert json.loads(run("queue", "--json").output) == []


def test_an_unsupported_directive_is_named(run, short_tmp):
    path = os.path.join(short_tmp, "array.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n#SBATCH --core-spec=2\ntrue\n")
    result = CliRunner().invoke(cli, ["--home", run.server.home, "submit", path])
    assert result.exit_code == 1 and "--core-spec" in result.output


def test_without_a_server_the_cli_says_how_to_start_one(short_tmp):
    result = subprocess.run([sys.executable, "-m", "corral.cli", "--home", short_tmp, "queue"],
                            capture_output=True, text=True, env={**os.environ, "CORRAL_URL": ""})
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "no corral server is running" in result.stderr and "corral up" in result.stderr


def test_a_second_server_on_the_same_home_is_refused(run):
    result = subprocess.run([sys.executable, "-m", "corral.cli", "up", "--home", run.server.home, "--port", "0", "--gpus", "1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "already runs" in result.stderr


def test_down_stops_the_server_and_keeps_running_jobs(run, short_tmp):
    marker = os.path.join(short_tmp, "survived")
    job_id = run("submit", "--parsable", "--", "sh", "-c", f"sleep 1; touch {marker}").output.strip()
    wait_for(lambda: json.loads(run("show", job_id, "--json").output)["state"] == "RUNNING")
    result = run("down")
    assert result.exit_code == 0 and "stopped" in result.output
    assert not os.path.exists(os.path.join(run.server.home, "server.json"))
    wait_for(lambda: os.path.exists(marker), timeout=10)
    run.server.start()
    job = json.loads(run("wait", job_id, "--json").output)
    assert job["state"] == "COMPLETED"


def test_a_scripts_chdir_is_honoured_and_submit_dir_is_where_it_was_submitted(run, short_tmp, monkeypatch):
    target = os.path.join(short_tmp, "work")
    os.makedirs(target)
    path = os.path.join(short_tmp, "cd.sh")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\n#SBATCH --chdir={target}\npwd\necho $SLURM_SUBMIT_DIR\n")
    monkeypatch.chdir(short_tmp)
    job_id = run("submit", "--parsable", path).output.strip()
    run("wait", job_id)
    assert run("logs", job_id).output == f"{target}\n{short_tmp}\n"


def test_exported_shell_functions_do_not_stop_a_submit(run, monkeypatch):
    monkeypatch.setenv("BASH_FUNC_module%%", "() {  echo module\n}")
    result = run("submit", "--parsable", "--", "true")
    assert result.exit_code == 0, result.output
    assert run("wait", result.output.strip()).exit_code == 0


def test_down_after_a_crash_removes_the_stale_address_and_signals_nobody(run):
    run.server.kill9()
    result = run("down")
    assert result.exit_code == 0 and "no corral server was running" in result.output
    assert not os.path.exists(os.path.join(run.server.home, "server.json"))


def test_an_htcondor_submit_file_runs_as_an_array(run, short_tmp, monkeypatch):
    with open(os.path.join(short_tmp, "hello.sh"), "w") as f:
        f.write("#!/bin/sh\necho hello from $1\n")
    os.chmod(os.path.join(short_tmp, "hello.sh"), 0o755)
    with open(os.path.join(short_tmp, "hello.sub"), "w") as f:
        f.write("executable = hello.sh\narguments = $(Process)\noutput = out.$(Cluster).$(Process)\n"
                "error = err.$(Cluster).$(Process)\nlog = hello.log\nrequest_cpus = 1\nrequest_memory = 64MB\nqueue 3\n")
    monkeypatch.chdir(short_tmp)
    result = run("submit", "--condor", "--json", "hello.sub")
    assert result.exit_code == 0, result.output
    array = json.loads(result.output[result.output.index("{"):])
    assert array["array"] == "0-2"
    assert run("wait", str(array["id"])).exit_code == 0
    for task in range(3):
        with open(os.path.join(short_tmp, f"out.{array['id']}.{task}")) as f:
            assert f.read() == f"hello from {task}\n"


def test_wrap_is_a_batch_script_so_array_tasks_see_their_number(run):
    array_id = run("submit", "--parsable", "--array=0-2", "--wrap", "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID").output.strip()
    assert run("wait", array_id).exit_code == 0
    for task in range(3):
        assert run("logs", f"{array_id}_{task}").output == f"task {task} of {array_id}\n"


def test_every_problem_of_a_batch_script_is_shown_at_once(run, short_tmp):
    path = os.path.join(short_tmp, "ddp.sh")
    with open(path, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --job-name=ddp\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=4\n"
                "#SBATCH --gpus-per-node=4\n#SBATCH --overcommit\n#SBATCH --core-spec=2\n"
                "#SBATCH --time=2-00:00:00x\nsrun python train.py\n")
    result = CliRunner().invoke(cli, ["--home", run.server.home, "submit", path])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "corral: error: script: 4 problems in the script's directives, all listed here:"
    assert [line.split(":")[0] for line in lines[1:]] == ["  line 3", "  line 6", "  line 7", "  line 8"]
    for text in ("--nodes=4: this server runs each job on one machine", "--overcommit",
                 "--core-spec", "--time=2-00:00:00x"):
        assert text in result.output, text
    assert json.loads(run("queue", "--json").output) == []


def test_submit_takes_tasks_and_each_tasks_cpus_and_gpus(run):
    job = json.loads(run("submit", "--json", "-n", "2", "-c", "1", "--gpus-per-task", "1", "--", "true").output)
    assert (job["ntasks"], job["cpus"], job["gpus"], job["gpus_per_task"]) == (2, 2, 2, 1)


def test_cpus_is_taken_as_the_spelling_people_type(run):
    job = json.loads(run("submit", "--json", "--cpus", "2", "--", "true").output)
    assert job["cpus"] == 2
    blocker = run("submit", "--parsable", "--gpus", "4", "--", "sleep", "30").output.strip()
    waiting = run("submit", "--parsable", "--gpus", "1", "--", "true").output.strip()
    result = run("update", waiting, "--cpus", "2")
    assert result.exit_code == 0, result.output
    assert json.loads(run("show", waiting, "--json").output)["cpus"] == 2
    run("cancel", blocker, waiting)


def test_update_to_a_partition_on_a_server_without_partitions_is_refused_and_changes_nothing(run):
    blocker = run("submit", "--parsable", "--gpus", "4", "--", "sleep", "30").output.strip()
    waiting = run("submit", "--parsable", "--gpus", "1", "-t", "10", "--", "true").output.strip()
    before = json.loads(run("show", waiting, "--json").output)
    result = CliRunner().invoke(cli, ["--home", run.server.home, "update", waiting, "--partition", "debug", "-t", "5"])
    assert result.exit_code == 1
    assert "updated" not in result.output
    assert "partition: this server has no partitions configured, so the job cannot move to partition 'debug'" \
        in result.output
    assert "[partitions.NAME]" in result.output
    result = CliRunner().invoke(cli, ["--home", run.server.home, "update", waiting, "--qos", "high"])
    assert result.exit_code == 1 and "this server has no QoS configured" in result.output
    after = json.loads(run("show", waiting, "--json").output)
    assert (after["partition"], after["time_limit_s"]) == (before["partition"], before["time_limit_s"]) == ("default", 600)
    run("cancel", blocker, waiting)


def test_priority_names_array_tasks_as_queue_and_show_do(run):
    # two preemptible tasks run; a job of higher priority preempts both, and they wait again as tasks 1_0, 1_1
    array = run("submit", "--parsable", "-a", "0-1", "--gpus", "2", "--nice", "100", "--preemptible",
                "--", "sleep", "60").output.strip()
    wait_for(lambda: sum(j["state"] == "RUNNING" for j in json.loads(run("queue", "--json").output)) == 2)
    high = run("submit", "--parsable", "--gpus", "4", "--", "sleep", "30").output.strip()
    wait_for(lambda: json.loads(run("show", high, "--json").output)["state"] == "RUNNING", timeout=30)
    rows = wait_for(lambda: len(r := json.loads(run("priority", "--json").output)) == 2 and r, timeout=30)
    assert sorted(r["ref"] for r in rows) == [f"{array}_0", f"{array}_1"]
    table = run("priority").output.splitlines()
    assert sorted(line.split()[0] for line in table[1:]) == [f"{array}_0", f"{array}_1"]
    queued = {j["ref"] for j in json.loads(run("queue", "--json").output) if j["state"] == "PENDING"}
    assert {r["ref"] for r in rows} <= queued
    run("cancel", array, high)


def test_whoami_says_the_scope_once_and_what_it_allows(run):
    result = run("whoami")
    assert result.exit_code == 0, result.output
    first, second = result.output.splitlines()
    user = json.loads(run("whoami", "--json").output)
    assert first.startswith(f"{user['user']} ({user['scope']}), known by ")
    assert first.count(user["scope"]) == 1
    allows = {"admin": "you may manage every user's jobs, tokens and alert channels",
              "submit": "you may submit jobs, log runs, and manage your own jobs and alerts"}
    assert second == allows[user["scope"]]


def test_update_sets_slurms_fields_and_requeue_queues_an_ended_job_again(run, short_tmp, monkeypatch):
    monkeypatch.chdir(short_tmp)
    job_id = run("submit", "--parsable", "--hold", "-t", "30", "--", "true").output.strip()
    changed = run("update", job_id, "--comment", "a note", "--begin", "now+1hour", "--time-min", "10",
                  "--mail-type", "END", "--mail-user", "ana@example.org", "--json")
    assert changed.exit_code == 0, changed.output
    job = json.loads(changed.output)
    assert (job["comment"], job["time_min_s"], job["mail_type"], job["mail_user"]) == ("a note", 600, ["END"],
                                                                                     "ana@example.org")
    refused = run("update", job_id, "--begin", "garbage")
    assert refused.exit_code != 0 and "begin" in refused.output
    assert run("update", job_id, "--begin", "").exit_code == 0
    assert run("release", job_id).exit_code == 0
    assert run("wait", job_id).exit_code == 0
    again = run("requeue", job_id, "--hold")
    assert again.exit_code == 0, again.output
    assert again.output == f"job {job_id}: queued again (restart 1); held: it starts once released (corral release {job_id})\n"
    shown = run.server.client().get(job_id)
    assert (shown["state"], shown["held"], shown["restarts"]) == ("PENDING", True, 1)


def test_every_command_that_finds_a_server_takes_home_after_its_name_as_up_does(server_factory, short_tmp):
    """`corral up --home DIR` works, so `corral down --home DIR` must too: else the server is easily left running."""
    server = server_factory()  # `corral up --home DIR --detach`
    elsewhere = os.path.join(short_tmp, "no-server-here")

    def corral(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CORRAL_HOME": elsewhere}
        env.pop("CORRAL_URL", None)
        return subprocess.run([sys.executable, "-m", "corral.cli", *args], capture_output=True, text=True, timeout=60,
                              env=env)

    job = corral("submit", "--home", server.home, "--parsable", "--", "true")  # a quick command, run without click
    assert job.returncode == 0, job.stderr
    assert corral("wait", job.stdout.strip(), "--home", server.home).returncode == 0
    assert job.stdout.strip() in corral("history", "--home", server.home).stdout
    assert corral("token", "list", "--home", server.home).returncode == 0  # a group's command
    assert corral("token", "--home", server.home, "list").returncode == 0  # and the group itself
    url = corral("queue", "--url", server.url, "--json")
    assert url.returncode == 0 and json.loads(url.stdout) == []
    after = corral("--home", elsewhere, "queue", "--home", server.home)  # given after the name, it wins
    assert after.returncode == 0, after.stderr
    down = corral("down", "--home", server.home)
    assert down.returncode == 0, down.stderr
    assert f"corral server stopped (pid {server.pid})" in down.stdout
    assert not os.path.exists(os.path.join(server.home, "server.json"))


def test_history_lists_jobs_latest_start_first_and_the_demo_names_each_job_as_history_does(run, short_tmp,
                                                                                             monkeypatch):
    monkeypatch.chdir(short_tmp)
    client = run.server.client()
    holder = run("submit", "--parsable", "-G", "4", "--", "sleep", "2").output.strip()
    wait_for(lambda: client.get(holder)["state"] == "RUNNING")
    waited = run("submit", "--parsable", "-G", "4", "--", "true").output.strip()  # starts after the array's tasks
    array = run("submit", "--parsable", "-G", "1", "--nice", "-5", "--array=0-1", "--", "true").output
    array = array.strip()  # ahead of `waited` (a negative nice: root's), its tasks start first, with ids after it
    for ref in (waited, f"{array}_0", f"{array}_1"):
        client.wait(ref, timeout=30)
    rows = [line.split() for line in run("history").output.splitlines()[1:]]
    refs = [row[0] for row in rows]
    jobs = {job["ref"]: job for job in client.history(limit=10)}
    starts = [jobs[ref]["start_time"] or jobs[ref]["end_time"] for ref in refs]  # the array's own record: its end
    assert starts == sorted(starts, reverse=True) and refs[-1] == holder
    assert refs.index(waited) < refs.index(f"{array}_0") and refs.index(waited) < refs.index(f"{array}_1")
    assert int(waited) < int(array)  # by id it would come last but one: not in start order

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "demo.sh")) as f:
        lines = f.read().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("for ") and "corral history --json" in line)
    loop = "\n".join(lines[first:next(i for i in range(first, len(lines)) if lines[i] == "done") + 1])
    env = {**os.environ, "CORRAL_HOME": run.server.home, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    shown = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    headers = [line.split()[2].rstrip(":") for line in shown.stdout.splitlines() if "stdout ---" in line]
    assert headers == list(reversed(refs))  # the demo names each job as history did, in the order they started
