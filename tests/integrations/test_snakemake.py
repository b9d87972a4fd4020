"""Snakemake's Slurm executor plugin, unchanged, on a corral server with no Slurm: through `corral
slurm-path` it probes the cluster (scontrol show config, sinfo -o %P, sacct for an account), checks a
`slurm_account` with sacctmgr (`-n -s list user U format=account%256`), submits each rule with sbatch
--wrap, polls with sacct -X --parsable2 --name (or squeue --states=all --name), asks sacct for a failed
job's steps (-j ID.STEP), runs the rule inside the job with srun, and cancels with scancel on Ctrl-C."""

from __future__ import annotations

import getpass
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("snakemake_executor_plugin_slurm")

SNAKEFILE = """
rule all:
    input: "total.txt"

rule numbers:
    output: "numbers.txt"
    resources: runtime=5, mem_mb=2000, cpus_per_task=1
    shell: "seq 1 10 > {output}; echo $SLURM_JOB_ID > numbers.job"

rule total:
    input: "numbers.txt"
    output: "total.txt"
    threads: 2
    resources: runtime=7, mem_mb=2500
    shell: "awk '{{s += $1}} END {{print s}}' {input} > {output}; echo $SLURM_JOB_ID > total.job"

rule broken:
    output: "broken.txt"
    resources: runtime=5, mem_mb=2000
    shell: "echo the reference genome is missing >&2; exit 3"

rule slow:
    output: "slow.txt"
    resources: runtime=5, mem_mb=2000
    shell: "sleep 300; touch {output}"
"""


ACCOUNTS = f'[accounts.lab]\nmembers = ["{getpass.getuser()}"]\n[accounts.vision]\nmembers = ["{getpass.getuser()}"]\n'


@pytest.fixture
def config(request) -> str:
    """The server's config.toml (a test sets it with `@pytest.mark.parametrize("config", [...], indirect=True)`)."""
    return getattr(request, "param", "")


@pytest.fixture
def workflow(server_factory, tmp_path, monkeypatch, short_tmp, config):
    """A workflow directory, with corral's Slurm commands first on PATH and no job's environment."""
    home = os.path.join(short_tmp, "snakemake-home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(config)
    server = server_factory(home=home)
    slurm_path = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, "slurm-path"],
                                capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("PATH", f"{slurm_path}:{os.environ['PATH']}")
    monkeypatch.setenv("CORRAL_HOME", server.home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # snakemake's source cache, the test's own
    for name in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_", "SNAKEMAKE_"))]:
        monkeypatch.delenv(name)
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    monkeypatch.chdir(tmp_path)
    return server


def snakemake(*targets: str, status_command: str = "sacct") -> list[str]:
    # the plugin's first status check waits 40 s by default; 1 s keeps the test short
    return [sys.executable, "-m", "snakemake", "--executor", "slurm", "--jobs", "2", "--latency-wait", "5",
            "--slurm-init-seconds-before-status-checks", "1", "--slurm-status-command", status_command,
            "--nocolor", *targets]


def test_a_workflow_runs_each_rule_as_a_corral_job_with_its_resources(workflow, tmp_path):
    done = subprocess.run(snakemake("--verbose"), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Status query timing (cycle): command=sacct," in done.stderr  # its default
    assert (tmp_path / "total.txt").read_text() == "55\n"
    client = workflow.client()
    numbers = client.wait((tmp_path / "numbers.job").read_text().strip(), timeout=30)
    total = client.wait((tmp_path / "total.job").read_text().strip(), timeout=30)
    assert [job["state"] for job in (numbers, total)] == ["COMPLETED", "COMPLETED"]
    assert (numbers["cpus"], numbers["mem_mb"], numbers["time_limit_s"], numbers["comment"]) == (
        1, 2000, 300, "rule_numbers")
    assert (total["cpus"], total["mem_mb"], total["time_limit_s"], total["comment"]) == (2, 2500, 420, "rule_total")
    assert numbers["name"] == total["name"]  # the run's id, which the plugin's sacct --name polls by
    assert numbers["end_time"] <= total["start_time"]  # total waited for its input


def test_a_failing_rule_is_reported_failed_with_the_jobs_state(workflow, tmp_path):
    done = subprocess.run(snakemake("broken.txt"), capture_output=True, text=True, timeout=240)
    assert done.returncode != 0
    assert "Error in rule broken" in done.stderr
    job_id = re.search(r"submitted with SLURM jobid (\d+)", done.stderr).group(1)
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'FAILED'" in done.stderr
    assert "Failed to retrieve jobstep reason" not in done.stderr  # sacct -j ID.0 ... ID.9 answered
    record = workflow.client().wait(job_id, timeout=30)
    assert (record["state"], record["exit_code"]) == ("FAILED", 1)  # the rule's snakemake in the job exits 1
    with open(record["stdout_path"]) as log:  # the plugin keeps a failed job's log and names it
        assert "the reference genome is missing" in log.read()
    assert record["stdout_path"] in done.stderr
    assert not (tmp_path / "broken.txt").exists()


def test_interrupting_snakemake_cancels_its_running_job(workflow, tmp_path):
    # polled through squeue, which the plugin recommends here (the workflow above polls through sacct)
    run = subprocess.Popen([*snakemake("slow.txt", status_command="squeue"), "--verbose"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        # Ctrl-C cancels the jobs snakemake holds as active, but while it polls their status it holds none
        # (its remote executor takes them off the list for the poll): so after its first poll ends, in the
        # 11 s until its second, and not while one is under way
        for line in run.stdout:
            seen.append(line)
            if "Checking 1 active jobs with external IDs" in line:
                break
        time.sleep(2)
        job_id = re.search(r"submitted with SLURM jobid (\d+)", "".join(seen)).group(1)
        assert workflow.client().get(job_id)["state"] == "RUNNING"
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=120)
        assert "command=squeue," in "".join(seen) + output  # the status command it used
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0
    assert workflow.client().wait(job_id, timeout=60)["state"] == "CANCELLED", output


@pytest.mark.parametrize("config", [ACCOUNTS], indirect=True, ids=["accounts-lab-vision"])
def test_a_workflow_with_a_slurm_account_is_checked_with_sacctmgr_and_charged_to_it(workflow, tmp_path):
    # the user's default account is lab (the first by name): the workflow asks for the other one
    done = subprocess.run([*snakemake("numbers.txt"), "--default-resources", "slurm_account=vision"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "numbers.txt").read_text().split() == [str(n) for n in range(1, 11)]
    job = workflow.client().wait((tmp_path / "numbers.job").read_text().strip(), timeout=30)
    assert (job["state"], job["account"]) == ("COMPLETED", "vision")
    refused = subprocess.run([*snakemake("total.txt"), "--default-resources", "slurm_account=nosuch"],
                             capture_output=True, text=True, timeout=240)
    assert refused.returncode != 0  # sacctmgr's answer is what the plugin checks against
    assert "The given account nosuch appears to be invalid" in refused.stderr
    assert "lab" in refused.stderr and "vision" in refused.stderr


@pytest.mark.parametrize("config", [ACCOUNTS], indirect=True, ids=["accounts-lab-vision"])
def test_a_workflow_without_an_account_is_charged_to_the_default_account_sacctmgr_names(workflow, tmp_path):
    default = subprocess.run(["sacctmgr", "-n", "-P", "list", "user", getpass.getuser(), "format=defaultaccount"],
                             capture_output=True, text=True, timeout=60)
    assert (default.returncode, default.stdout) == (0, "lab\n"), default.stderr
    done = subprocess.run(snakemake("numbers.txt"), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    # the plugin guesses from sacct (`sacct -nu U -o Account%256 | tail -1`, the pipe passed to sacct as
    # words, which sacct refuses, as Slurm's does) and goes on without -A: sbatch charges the default
    assert "No SLURM account given, trying to guess." in done.stderr
    job = workflow.client().wait((tmp_path / "numbers.job").read_text().strip(), timeout=30)
    assert (job["state"], job["account"]) == ("COMPLETED", "lab")
