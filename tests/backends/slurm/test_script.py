"""The sbatch call: pinned by golden files, and proven inert to hostile names, values and arguments."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral.backends.slurm.script import SbatchRequest, build_sbatch, format_time_limit, warn_signal_option
from corral.core.jobspec.job import Job
from corral.core.jobspec.spec import JobSpec
from corral.core.jobspec.states import JobState

GOLDEN = Path(__file__).parent / "golden"
SEPARATOR = "--- script ---"
BASH = shutil.which("bash") or "/bin/bash"

# Shell metacharacters of every kind. These scripts really run: were quoting ever broken, the payloads
# would only touch files in $CANARY (or remove it), which the tests then find.
PAYLOADS = [
    "$(rm -rf $CANARY)",
    "$(touch $CANARY/dollar)",
    "`touch $CANARY/backtick`",
    "; touch $CANARY/semicolon",
    "&& touch $CANARY/and\n",
    "line one\nline two\n$(touch $CANARY/newline)",
    "it's \"quoted\" 'twice'",
    "$HOME ${PATH} $0 $@ $*",
    "\\ back\\slash \\n",
    "*",
    "~",
    "{a,b}",
    "!",
    "-x",
    "--export=ALL",
    "",
    "  spaced  ",
    "ünïcödé ✓",
    "tab\there",
]
# Checked as text only, never run.
STATIC_PAYLOADS = ["$(rm -rf /)", *PAYLOADS]


def make_spec(**fields: Any) -> JobSpec:
    base: dict[str, Any] = dict(
        name="train", user="alice", command=("python", "train.py"), script=None, script_args=(), gpus=0,
        gpu_type=None, gpu_mem_mb=None, cpus=1, mem_mb=0, time_limit_s=None, env={}, inherit_env=True,
        labels={}, workdir="/home/alice/project", submit_dir="/home/alice/project",
        stdout="/home/alice/.corral/logs/%j.out", stderr="/home/alice/.corral/logs/%j.err",
    )
    base.update(fields)
    return JobSpec(**base)


def make_job(**fields: Any) -> Job:
    return Job(id=41, spec=make_spec(**fields), state=JobState.PENDING, submit_time=0.0)


def build(job: Job, **kwargs: Any) -> SbatchRequest:
    args: dict[str, Any] = dict(
        partition="gpu", account=None, dependency=None, env=dict(job.spec.env), stdout=job.spec.stdout,
        stderr=job.spec.stderr, user_script_path=None,
    )
    args.update(kwargs)
    return build_sbatch(job, **args)


def render(request: SbatchRequest) -> str:
    return "\n".join(request.argv) + f"\n{SEPARATOR}\n" + request.script


def check_golden(name: str, request: SbatchRequest) -> None:
    text = render(request)
    path = GOLDEN / f"{name}.txt"
    if not path.exists():
        pytest.fail(f"no golden file {path}; if this output is right, write it there:\n{text}")
    assert text == path.read_text(), f"{path} differs; if the change is intended, replace it with:\n{text}"


def run_script(script: str, tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "batch.sh"
    path.write_text(script)
    return subprocess.run(
        [BASH, str(path)], cwd=tmp_path, capture_output=True, timeout=30,
        env=env if env is not None else {"PATH": os.environ["PATH"], "CANARY": str(tmp_path / "canary")},
    )


def assert_untouched(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    assert canary.is_dir() and list(canary.iterdir()) == [], "a payload ran"
    assert not (tmp_path / "pwned").exists(), "a payload ran"


def assert_only_options(argv: tuple[str, ...]) -> None:
    for item in argv:
        assert re.match(r"^--[a-z][a-z-]*(=|$)", item), f"{item!r} is not one --option[=value]"


# --- golden files -------------------------------------------------------------------------------------


def test_command_job_with_typed_gpus_time_and_memory_matches_golden():
    job = make_job(
        command=("python", "train.py", "--lr", "0.1"), gpus=2, gpu_type="A100", cpus=8, mem_mb=32768,
        time_limit_s=4 * 3600 + 1, nice=10, qos="high", warn_signal="USR1@90",
        env={"WANDB_PROJECT": "resnet", "CORRAL_JOB_ID": "41"},
    )
    check_golden("command_gpu", build(job, account="ml-lab"))


def test_batch_script_job_execs_the_saved_script_with_its_arguments_matches_golden():
    job = make_job(
        command=(), script="#!/bin/bash\n#SBATCH --gres=gpu:1\nsrun python train.py \"$@\"\n",
        script_args=("--epochs", "90", "two words"), gpus=1, stderr=None, partition="a100",
        env={"CORRAL_JOB_ID": "41"},
    )
    request = build(job, user_script_path="/var/lib/corral/scripts/41/job.sh", stderr=None, requeue=False)
    check_golden("batch_script", request)


def test_array_with_throttle_and_dependency_matches_golden():
    job = make_job(
        command=("python", "sweep.py"), array="0-99%4", dependency="afterok:12", kill_on_invalid_dep=True,
        stdout="/logs/%x-%A_%a.out", stderr=None,
    )
    request = build(job, dependency="afterok:1234_7", stdout="/logs/train-%A_%a.out", stderr=None)
    check_golden("array_dependency", request)


def test_job_without_inherited_environment_exports_only_its_own_matches_golden():
    job = make_job(
        command=("bash", "-c", "module load cuda && nvidia-smi"), inherit_env=False,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/alice", "LANG": "C.UTF-8",
            "BASH_FUNC_module%%": "() {  eval $(/usr/bin/modulecmd bash $*)\n}",
        },
    )
    check_golden("no_inherit_env", build(job, partition=None))


# --- options ------------------------------------------------------------------------------------------


def test_a_variable_name_bash_cannot_export_goes_through_env_instead(tmp_path):
    request = build(make_job(command=("printenv", "A\nB", "OK")), env={"A\nB": "odd", "OK": "fine"})
    assert "export OK=fine\n" in request.script
    result = run_script(request.script, tmp_path)
    assert result.stdout == b"odd\nfine\n"


def test_every_option_is_one_argv_element_with_its_value_after_the_equals_sign():
    job = make_job(name="--partition=evil", workdir="-/tmp", gpus=1, array="1-3", warn_signal="TERM@60")
    request = build(job, dependency="afterany:5", account="-acct")
    assert_only_options(request.argv)
    assert "--job-name=--partition=evil" in request.argv
    assert "--chdir=-/tmp" in request.argv
    assert "--account=-acct" in request.argv
    assert [a for a in request.argv if a.startswith("--partition")] == ["--partition=gpu"]


def test_no_memory_request_never_becomes_mem_zero():
    request = build(make_job(mem_mb=0))
    assert not any(a.startswith("--mem") for a in request.argv)


def test_time_limit_rounds_up_to_whole_minutes():
    assert format_time_limit(1) == "0-00:01:00"
    assert format_time_limit(60) == "0-00:01:00"
    assert format_time_limit(61) == "0-00:02:00"
    assert format_time_limit(86400) == "1-00:00:00"
    assert format_time_limit(365 * 86400) == "365-00:00:00"
    assert not any(a.startswith("--time") for a in build(make_job(time_limit_s=None)).argv)


def test_the_jobs_partition_wins_over_the_backend_default():
    assert "--partition=a100" in build(make_job(partition="a100"), partition="gpu").argv
    assert "--partition=gpu" in build(make_job(), partition="gpu").argv
    assert not any(a.startswith("--partition") for a in build(make_job(), partition=None).argv)


def test_untyped_gpus_and_no_gpus():
    assert "--gres=gpu:3" in build(make_job(gpus=3)).argv
    assert not any(a.startswith("--gres") for a in build(make_job()).argv)


def test_a_shard_job_asks_the_cluster_for_its_shards_not_a_gpu():
    argv = build(make_job(gpus=1, gpu_shards=2)).argv
    assert "--gres=shard:2" in argv and not any(a.startswith("--gres=gpu") for a in argv)


def test_warning_signal_goes_to_the_batch_shell_because_the_command_replaces_it():
    assert warn_signal_option("USR1@90", command=True) == "B:USR1@90"
    assert warn_signal_option("B:10@60", command=True) == "B:10@60"
    assert warn_signal_option("R:TERM@30", command=True) == "RB:TERM@30"


def test_a_batch_scripts_warning_signal_is_passed_as_given_its_steps_getting_it_without_b():
    assert warn_signal_option("USR1@90", command=False) == "USR1@90"
    assert warn_signal_option("b:USR1@90", command=False) == "B:USR1@90"
    assert warn_signal_option("BR:10", command=False) == "RB:10"


def test_only_an_array_job_gets_the_array_option():
    task = Job(id=42, spec=make_spec(array="0-3"), state=JobState.PENDING, submit_time=0.0,
               array_job_id=41, array_task_id=1)
    assert not any(a.startswith("--array") for a in build(task).argv)
    assert "--array=0-3" in build(make_job(array="0-3")).argv


def test_requeue_and_export_follow_the_arguments_and_the_spec():
    assert "--requeue" in build(make_job()).argv
    assert "--no-requeue" in build(make_job(), requeue=False).argv
    assert "--export=ALL" in build(make_job(inherit_env=True)).argv
    assert "--export=NONE" in build(make_job(inherit_env=False)).argv


def test_a_comment_goes_to_slurm_as_one_option():
    assert "--comment=warm start; $(x)" in build(make_job(comment="warm start; $(x)")).argv
    assert not any(a.startswith("--comment") for a in build(make_job()).argv)


# --- the script runs, and hostile text stays text ----------------------------------------------------


def test_hostile_names_paths_and_values_stay_single_argv_elements():
    for payload in STATIC_PAYLOADS:
        job = make_job(name=payload, workdir="/w/" + payload)
        request = build(job, stdout="/logs/" + payload, dependency="afterok:1")
        assert_only_options(request.argv)
        assert f"--job-name={payload}" in request.argv
        assert f"--chdir=/w/{payload}" in request.argv
        assert f"--output=/logs/{payload}" in request.argv


def test_every_generated_script_is_valid_bash(tmp_path):
    env = {f"V{i}": p for i, p in enumerate(STATIC_PAYLOADS)}
    command_job = make_job(command=("printf", "%s\\n", *STATIC_PAYLOADS), env=env)
    script_job = make_job(command=(), script="#!/bin/bash\n", script_args=tuple(STATIC_PAYLOADS), env=env)
    for job, script_path in ((command_job, None), (script_job, "/x/$(y) z.sh")):
        path = tmp_path / "check.sh"
        path.write_text(build(job, user_script_path=script_path).script)
        result = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_command_arguments_arrive_byte_for_byte_and_nothing_runs(tmp_path):
    (tmp_path / "canary").mkdir()
    job = make_job(command=("printf", "%s\\n", *PAYLOADS))
    result = run_script(build(job).script, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "".join(p + "\n" for p in PAYLOADS).encode()
    assert_untouched(tmp_path)


def test_environment_values_arrive_byte_for_byte_and_nothing_runs(tmp_path):
    (tmp_path / "canary").mkdir()
    env = {f"V{i}": p for i, p in enumerate(PAYLOADS)}
    probe = "import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, sys.stdout)"
    job = make_job(command=(sys.executable, "-c", probe, *PAYLOADS), env=env)
    result = run_script(build(job).script, tmp_path)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["argv"] == PAYLOADS
    assert {k: seen["env"].get(k) for k in env} == env
    assert_untouched(tmp_path)


def test_batch_script_job_gets_its_arguments_and_exported_shell_functions(tmp_path):
    (tmp_path / "canary").mkdir()
    folder = tmp_path / "dir with $(touch pwned) `touch pwned` and 'quotes'"
    folder.mkdir()
    user_script = folder / "job.sh"
    user_script.write_text('#!/bin/bash\ngreet\nprintf "%s\\n" "$@"\n')
    user_script.chmod(0o755)
    job = make_job(
        command=(), script=user_script.read_text(), script_args=tuple(PAYLOADS), inherit_env=False,
        env={"PATH": os.environ["PATH"], "BASH_FUNC_greet%%": "() {  echo hello from a function\n}"},
    )
    request = build(job, user_script_path=str(user_script))
    result = run_script(request.script, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("hello from a function\n" + "".join(p + "\n" for p in PAYLOADS)).encode()
    assert_untouched(tmp_path)


def test_the_command_replaces_the_batch_shell(tmp_path):
    # exec: Slurm's signals and the exit status reach the command itself, not a wrapping shell
    job = make_job(command=(sys.executable, "-c", "import os, sys; print(os.getpid()); sys.exit(7)"))
    path = tmp_path / "batch.sh"
    path.write_text(build(job).script)
    process = subprocess.Popen([BASH, str(path)], stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=30)
    assert int(out) == process.pid
    assert process.returncode == 7


def test_a_script_job_without_a_saved_script_is_a_programming_error():
    with pytest.raises(AssertionError):
        build(make_job(command=(), script="#!/bin/bash\n"), user_script_path=None)


FAKE = """#!/bin/sh
printf '%s\\n' "$(basename "$0")" "$@" >> "$CALLS"
"""
FAKE_SCONTROL = """#!/bin/sh
printf 'node17\\nnode18\\n'
"""


def test_a_multi_node_job_runs_srun_torchrun_with_a_rendezvous_on_its_first_node(tmp_path):
    from tests.helpers import make_spec

    spec = make_spec(command=["python", "train.py", "--lr", "$(touch pwned)"], nodes=2, gpus_per_node=4)
    job = Job(id=9, spec=spec, state=JobState.PENDING, submit_time=0.0)
    request = build_sbatch(job, partition=None, account=None, dependency=None, env={}, stdout="/tmp/o",
                           stderr=None, user_script_path=None)
    assert "--nodes=2" in request.argv and "--ntasks-per-node=1" in request.argv and "--gres=gpu:4" in request.argv
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("srun", FAKE), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text(request.script)
    calls = tmp_path / "calls"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), "SLURM_NNODES": "2", "SLURM_JOB_ID": "4242",
           "SLURM_JOB_NODELIST": "node[17-18]"}
    subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, check=True)
    assert calls.read_text().splitlines() == [
        "srun", "--ntasks-per-node=1", "torchrun", "--nnodes=2", "--nproc_per_node=4", "--rdzv_id=4242",
        "--rdzv_backend=c10d", "--rdzv_endpoint=node17:29500", "train.py", "--lr", "$(touch pwned)",
    ]
    assert not (tmp_path / "pwned").exists()


def test_placement_time_and_mail_options_pass_to_slurm_which_honours_them_itself():
    import time

    begin = time.mktime((2026, 12, 1, 8, 0, 0, 0, 0, -1))
    job = make_job(begin_time=begin, deadline=begin + 7200, exclusive=True, features="a100&nvlink",
                   nodelist=("gpu01",), exclude=("gpu02", "gpu03"), time_min_s=1800, time_limit_s=3600, priority=50,
                   mail_type=("END", "FAIL"), mail_user="me@lab.org")
    argv = build(job).argv
    for option in ("--begin=2026-12-01T08:00:00", "--deadline=2026-12-01T10:00:00", "--exclusive",
                   "--constraint=a100&nvlink", "--nodelist=gpu01", "--exclude=gpu02,gpu03", "--time-min=0-00:30:00",
                   "--priority=50", "--mail-type=END,FAIL", "--mail-user=me@lab.org"):
        assert option in argv
    plain = build(make_job()).argv
    assert not [a for a in plain if a.startswith(("--begin", "--exclusive", "--constraint", "--mail", "--priority"))]


def test_a_container_job_gets_pyxis_options_so_the_cluster_runs_it_in_its_image():
    from corral.core.jobspec.spec_container import ContainerSpec, Mount

    container = ContainerSpec("nvcr.io#nvidia/pytorch:24.01-py3", mounts=(Mount("/data", "/data", True),
                              Mount("/scratch/a b", "/scratch")), workdir="/workspace", env=("NCCL_DEBUG", "HF_HOME"),
                              mount_home=False, remap_root=True)
    argv = build(make_job(container=container)).argv
    assert_only_options(argv)
    assert [a for a in argv if "container" in a] == [
        "--container-image=nvcr.io#nvidia/pytorch:24.01-py3", "--container-mounts=/data:/data:ro,/scratch/a b:/scratch",
        "--container-workdir=/workspace", "--container-env=NCCL_DEBUG,HF_HOME", "--no-container-mount-home",
        "--container-remap-root"]
    only_image = build(make_job(container=ContainerSpec("ubuntu:22.04"))).argv
    assert [a for a in only_image if "container" in a] == ["--container-image=ubuntu:22.04"]
    assert not [a for a in build(make_job()).argv if "container" in a]
