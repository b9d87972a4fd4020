"""HTCondor submit files as CHTC users write them, through `corral submit --condor` against a real server
with declared GPUs of two types (two T4s, compute capability 7.5, then two A100s, 8.0)."""

from __future__ import annotations

import json
import os

import htcondor2 as htcondor  # HTCondor's own Python bindings (the dev extra): the log's reader
import pytest
from click.testing import CliRunner

from corral.cli.main import cli


@pytest.fixture
def run(server_factory, short_tmp, monkeypatch):
    server = server_factory(gpus=4, extra=["--gpu-type", "T4:2,A100:2", "--gpu-mem", "16G"])
    monkeypatch.chdir(short_tmp)

    def invoke(*args: str):
        return CliRunner().invoke(cli, ["--home", server.home, *args], catch_exceptions=False)

    return invoke


def write(directory: str, name: str, text: str, mode: int = 0o644) -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def submitted(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])


def events(path: str) -> list[tuple[int, int, int, dict]]:
    """The log as HTCondor's own reader (the htcondor bindings' JobEventLog) sees it."""
    return [(int(e.type), e.cluster, e.proc, dict(e.items())) for e in htcondor.JobEventLog(path).events(0)]


CHTC_GPU_JOB = """\
# CHTC's GPU job template, unchanged but for the executable
universe = vanilla
executable = gpus.sh
arguments = $(Process)
log = job_$(Cluster).log
output = job_$(Cluster)_$(Process).out
error = job_$(Cluster)_$(Process).err
should_transfer_files = YES
when_to_transfer_output = ON_EXIT
+WantGPULab = true
+GPUJobLength = "short"
request_gpus = 2
request_cpus = 1
request_memory = 64MB
request_disk = 1GB
requirements = (OpSys == "LINUX") && (CUDACapability >= 7.0)
gpus_minimum_capability = 8.0
gpus_minimum_memory = 8GB
require_gpus = (GlobalMemoryMb >= 8000)
queue 1
"""


def test_a_chtc_gpu_file_runs_unchanged_on_the_gpus_that_meet_its_capability(run, short_tmp):
    write(short_tmp, "gpus.sh", "#!/bin/sh\necho \"$1 on $CUDA_VISIBLE_DEVICES\"\nexit 3\n", 0o755)
    write(short_tmp, "gpu.sub", CHTC_GPU_JOB)
    result = run("submit", "--condor", "--json", "gpu.sub")
    job = submitted(result)
    assert "+WantGPULab: ignored" in result.output and "should_transfer_files: ignored" in result.output
    assert "Capability >= 8.0" in job["requirements"]
    shown = run("show", str(job["id"])).output
    assert "Requirements: " in shown and f"EventLog: {short_tmp}/job_%A.log" in shown
    assert [line.split()[2:5] for line in run("nodes").output.splitlines()[-4:]] == [
            ["T4", "16G", "7.5"], ["T4", "16G", "7.5"], ["A100", "16G", "8.0"], ["A100", "16G", "8.0"]]
    run("wait", str(job["id"]))
    done = json.loads(run("show", "--json", str(job["id"])).output)
    assert done["state"] == "FAILED" and done["exit_code"] == 3
    assert done["gpu_ids"] == [2, 3]  # the A100s; first fit would have taken the T4s 0 and 1
    cluster = job["id"]
    log = os.path.join(short_tmp, f"job_{cluster}.log")
    seen = events(log)
    assert [(code, c, p) for code, c, p, _ in seen] == [(0, cluster, 0), (1, cluster, 0), (5, cluster, 0)]
    assert seen[2][3]["ReturnValue"] == 3 and seen[2][3]["TerminatedNormally"] is True


@pytest.mark.parametrize(("line", "named"), [
    ("requirements = (OpSys == \"LINUX\") && (CUDACapability >= 9.0)", "CUDACapability >= 9.0"),
    ("gpus_minimum_capability = 9.0", "Capability >= 9.0"),
    ("require_gpus = (DeviceName == \"H100\")", "DeviceName == \"H100\""),
])
def test_a_gpu_requirement_no_gpu_here_meets_is_refused_naming_it(run, short_tmp, line, named):
    write(short_tmp, "gpu.sub", f"executable = /bin/true\nrequest_gpus = 1\n{line}\nqueue\n")
    result = run("submit", "--condor", "gpu.sub")
    assert result.exit_code != 0
    assert named in result.output and "capability 8.0" in result.output, result.output


def test_a_requirement_corral_cannot_evaluate_is_refused_naming_the_sub_expression(run, short_tmp):
    write(short_tmp, "gpu.sub", "executable = /bin/true\nrequest_gpus = 1\n"
                                "requirements = (CUDACapability >= 7.0) && (HasCHTCStaging == true)\nqueue\n")
    result = run("submit", "--condor", "gpu.sub")
    assert result.exit_code != 0 and "'HasCHTCStaging'" in result.output, result.output


@pytest.mark.parametrize(("queue", "expected"), [
    ("queue lr, seed from (\n  0.1, 1\n  0.01 2\n)", ["0 0.1 1", "1 0.01 2"]),
    ("queue 2 lr in (0.1, 0.01)", ["0 0.1 -", "1 0.1 -", "2 0.01 -", "3 0.01 -"]),
    ("queue lr, seed from params.txt", ["0 0.5 7", "1 0.05 8"]),
    ("queue lr matching files *.csv", ["0 a.csv -", "1 b.csv -"]),
])
def test_queue_forms_make_one_task_per_item_with_its_values(run, short_tmp, queue, expected):
    write(short_tmp, "params.txt", "0.5, 7\n0.05 8\n")
    for name in ("a.csv", "b.csv"):
        write(short_tmp, name, "x\n")
    os.mkdir(os.path.join(short_tmp, "c.csv"))  # `files` leaves directories out
    write(short_tmp, "sweep.sub", "executable = /bin/echo\narguments = $(Process) $(lr) $(seed:-)\n"
                                  "output = out.$(Process)\nlog = sweep.log\n"
                                  f"{queue}\n")
    job = submitted(run("submit", "--condor", "--json", "sweep.sub"))
    assert job["array"] == f"0-{len(expected) - 1}"
    run("wait", str(job["id"]))
    for task, line in enumerate(expected):
        with open(os.path.join(short_tmp, f"out.{task}")) as f:
            assert f.read() == line + "\n"
    codes = sorted((p, code) for code, _, p, _ in events(os.path.join(short_tmp, "sweep.log")))
    assert codes == [(p, code) for p in range(len(expected)) for code in (0, 1, 5)]
