"""Real supervisors running real processes: exit status, GPU binding, limits, signals, recovery."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from corral.backends.base import Recovered
from corral.backends.local import LaunchSettings, LocalBackend
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.executor import files
from tests.helpers import make_spec, wait_for

_next_id = iter(range(1, 10_000))


@pytest.fixture
def backend(short_tmp):
    settings = LaunchSettings(kill_grace_s=1.0, server_env=dict(os.environ), server_url=lambda: "http://x:1")
    return LocalBackend(short_tmp, settings)


def start(backend: LocalBackend, gpu_ids=(0,), **request) -> Job:
    log_dir = os.path.join(os.path.dirname(backend.jobs_dir), "logs")
    spec = make_spec(workdir=os.path.dirname(backend.jobs_dir), log_dir=log_dir, gpus=len(gpu_ids), **request)
    job = Job(id=next(_next_id), spec=spec, state=JobState.RUNNING, submit_time=time.time(), start_time=time.time(),
              node="n1", gpu_ids=tuple(gpu_ids))
    backend.start(job, Allocation(job.id, "n1", tuple(gpu_ids), spec.cpus, spec.mem_mb))
    return job


def finish(backend: LocalBackend, job: Job, timeout: float = 20.0):
    ended = wait_for(lambda: backend.poll([job]), timeout=timeout)
    assert ended[0][0] is job
    return ended[0][1]


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_exit_codes_are_recorded_by_the_supervisor(backend):
    ok = start(backend, command=["sh", "-c", "exit 0"])
    bad = start(backend, command=["sh", "-c", "exit 3"])
    assert finish(backend, ok).state == "COMPLETED"
    outcome = finish(backend, bad)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 3)


def test_a_job_killed_by_a_signal_fails_with_the_signal(backend):
    job = start(backend, command=["sh", "-c", "kill -9 $$"])
    outcome = finish(backend, job)
    assert (outcome.state, outcome.signal, outcome.exit_code) == ("FAILED", 9, 137)


def test_job_sees_exactly_its_gpus_and_corral_variables(backend):
    job = start(backend, gpu_ids=(1, 3), command=["sh", "-c", "env"])
    finish(backend, job)
    env = dict(line.split("=", 1) for line in read(job.log_path("stdout")).splitlines() if "=" in line)
    assert env["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["CORRAL_JOB_ID"] == str(job.id)
    assert env["CORRAL_GPUS"] == "1,3"
    assert env["CORRAL_JOB_NAME"] == "sh"
    assert env["CORRAL_CHECKPOINT_DIR"].endswith(f"checkpoints/{job.id}")
    assert os.path.isdir(env["CORRAL_CHECKPOINT_DIR"])
    assert "SLURM_JOB_ID" not in env  # Slurm's variables are for batch scripts


def test_a_cpu_job_sees_no_gpus(backend):
    job = start(backend, gpu_ids=(), command=["sh", "-c", 'echo "[$CUDA_VISIBLE_DEVICES]"'])
    finish(backend, job)
    assert read(job.log_path("stdout")) == "[]\n"


def test_batch_script_gets_slurm_variables_and_its_arguments(backend):
    script = "#!/bin/sh\n#SBATCH --job-name=tut\necho $SLURM_JOB_ID $SLURM_JOB_NAME $SLURM_NTASKS \"$1\"\n"
    job = start(backend, command=None, script=script, script_args=["a b"])
    assert finish(backend, job).state == "COMPLETED"
    assert read(job.log_path("stdout")) == f"{job.id} tut 1 a b\n"


def test_stdout_and_stderr_go_to_their_files_or_one_file(backend, short_tmp):
    split = start(backend, command=["sh", "-c", "echo out; echo err >&2"])
    merged = start(backend, command=["sh", "-c", "echo out; echo err >&2"], stdout=f"{short_tmp}/m-%j.out")
    finish(backend, split)
    finish(backend, merged)
    assert read(split.log_path("stdout")) == "out\n" and read(split.log_path("stderr")) == "err\n"
    assert read(f"{short_tmp}/m-{merged.id}.out") == "out\nerr\n"


def test_a_missing_program_fails_with_127_and_says_why(backend):
    job = start(backend, command=["no-such-program-xyz"])
    outcome = finish(backend, job)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 127)
    assert "no-such-program-xyz" in read(job.log_path("stderr"))


def test_time_limit_sends_sigterm_then_records_timeout(backend):
    job = start(backend, command=["sh", "-c", "trap 'echo got TERM; exit 143' TERM; sleep 30 & wait"], time_limit_s=1)
    began = time.monotonic()
    outcome = finish(backend, job)
    assert outcome.state == "TIMEOUT"
    assert time.monotonic() - began < 10
    assert "got TERM" in read(job.log_path("stdout"))


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace_period(backend):
    job = start(backend, command=[sys.executable, "-c",
                                  "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"],
                time_limit_s=1)
    outcome = finish(backend, job)
    assert (outcome.state, outcome.signal) == ("TIMEOUT", signal.SIGKILL)


def test_exceeding_the_memory_limit_ends_the_job_out_of_memory(backend):
    hog = "x = bytearray(300 * 1024 * 1024); import time; x[::4096] = b'1' * len(x[::4096]); time.sleep(30)"
    job = start(backend, command=[sys.executable, "-c", hog], mem="100M")
    outcome = finish(backend, job)
    assert outcome.state == "OUT_OF_MEMORY"
    assert "memory limit" in read(job.log_path("stderr"))


def test_memory_within_the_limit_is_fine(backend):
    job = start(backend, command=[sys.executable, "-c", "x = bytearray(20 * 1024 * 1024)"], mem="500M")
    assert finish(backend, job).state == "COMPLETED"


def test_cancel_stops_the_whole_process_tree(backend, short_tmp):
    marker = os.path.join(short_tmp, "child.pid")
    job = start(backend, command=["sh", "-c", f"sleep 60 & echo $! > {marker}; wait"])
    wait_for(lambda: os.path.exists(marker) and read(marker).strip())
    child = int(read(marker))
    backend.cancel(job)
    assert finish(backend, job).state == "CANCELLED"
    wait_for(lambda: not _alive(child), timeout=15)


def test_leftover_background_processes_die_with_the_job(backend, short_tmp):
    marker = os.path.join(short_tmp, "bg.pid")
    job = start(backend, command=["sh", "-c", f"sleep 60 & echo $! > {marker}"])
    assert finish(backend, job).state == "COMPLETED"
    wait_for(lambda: not _alive(int(read(marker))), timeout=15)


def test_a_cancel_that_arrives_before_the_fork_means_the_job_never_runs(short_tmp):
    from corral.executor.launch import read_outcome, spawn_supervisor
    from corral.executor.launch_config import LaunchConfig

    job_dir = os.path.join(short_tmp, "jobs", "1")
    os.makedirs(job_dir)
    open(os.path.join(job_dir, files.CANCEL), "w").close()
    marker = os.path.join(short_tmp, "ran")
    config = LaunchConfig(argv=("touch", marker), env=dict(os.environ), cwd=short_tmp,
                          stdout=f"{short_tmp}/o", stderr=f"{short_tmp}/o", time_limit_s=None, mem_limit_mb=0)
    spawn_supervisor(job_dir, config).wait(timeout=20)
    outcome = read_outcome(job_dir)
    assert outcome.state == "CANCELLED"
    assert not os.path.exists(marker)


def test_recovery_sees_a_live_supervisor_as_running_and_an_ended_one_as_ended(backend):
    job = start(backend, command=["sleep", "2"])
    wait_for(lambda: os.path.exists(os.path.join(backend.job_dir(job.id), files.STARTED)))
    fresh = LocalBackend(os.path.dirname(backend.jobs_dir),
                         LaunchSettings(kill_grace_s=1, server_env={}, server_url=lambda: None))
    assert fresh.recover(job).status is Recovered.RUNNING
    finish(fresh, job)
    recovery = fresh.recover(job)
    assert recovery.status is Recovered.ENDED and recovery.outcome.state == "COMPLETED"


def test_recovery_of_a_job_whose_supervisor_was_killed_reports_node_fail_and_kills_the_job(backend):
    job = start(backend, command=["sleep", "60"])
    started = wait_for(lambda: files.read_json(os.path.join(backend.job_dir(job.id), files.STARTED)))
    os.kill(started["supervisor_pid"], signal.SIGKILL)
    backend.supervisors.child(job.id).wait()
    fresh = LocalBackend(os.path.dirname(backend.jobs_dir),
                         LaunchSettings(kill_grace_s=1, server_env={}, server_url=lambda: None))
    recovery = fresh.recover(job)
    assert recovery.status is Recovered.LOST and recovery.outcome.state == "NODE_FAIL"
    wait_for(lambda: not _alive(started["pid"]), timeout=15)


def test_recovery_of_a_job_never_launched_requeues_it(backend):
    spec = make_spec()
    job = Job(id=next(_next_id), spec=spec, state=JobState.RUNNING, submit_time=0.0)
    assert backend.recover(job).status is Recovered.NEVER_STARTED


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_signal_option_warns_the_job_before_its_time_limit(backend):
    script = "trap 'echo warned at $(date +%s)' USR1; echo started at $(date +%s); while true; do sleep 0.1; done"
    job = start(backend, command=["sh", "-c", script], time_limit_s=3, signal="USR1@2")
    outcome = finish(backend, job)
    assert outcome.state == "TIMEOUT"
    lines = read(job.log_path("stdout")).split("\n")
    started = int(lines[0].split()[-1])
    warned = int(next(line for line in lines if line.startswith("warned")).split()[-1])
    assert 0 <= warned - started <= 2  # about 1 s after start: 2 s before the 3 s limit


def test_a_cancel_during_a_preemptions_grace_period_wins(backend):
    job = start(backend, command=["sh", "-c", "trap '' TERM; sleep 30"])
    wait_for(lambda: os.path.exists(os.path.join(backend.job_dir(job.id), files.STARTED)))
    backend.preempt(job)
    backend.cancel(job)
    assert finish(backend, job).state == "CANCELLED"


def test_a_preempted_job_ends_preempted(backend):
    job = start(backend, command=["sleep", "30"])
    wait_for(lambda: os.path.exists(os.path.join(backend.job_dir(job.id), files.STARTED)))
    backend.preempt(job)
    assert finish(backend, job).state == "PREEMPTED"


def test_a_job_whose_gpu_failed_ends_node_fail_its_stderr_saying_so_in_slurms_words(backend, short_tmp):
    marker = os.path.join(short_tmp, "child.pid")
    job = start(backend, command=["sh", "-c", f"sleep 60 & echo $! > {marker}; wait"])
    wait_for(lambda: os.path.exists(marker) and read(marker).strip())
    backend.fail_node(job, "GPU 0 of n1 failed: XID 79: GPU has fallen off the bus")
    outcome = finish(backend, job)
    assert (outcome.state, outcome.signal) == ("NODE_FAIL", signal.SIGTERM)
    wait_for(lambda: not _alive(int(read(marker))), timeout=15)  # its processes die with it, as with a cancel
    last = read(job.log_path("stderr")).splitlines()[-1]
    assert last.startswith(f"slurmstepd: error: *** JOB {job.id} ON n1 CANCELLED AT ")
    assert last.endswith(" DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")


def test_a_job_whose_gpu_failed_before_its_supervisor_forked_never_runs(short_tmp):
    from corral.executor.launch import read_outcome, spawn_supervisor
    from corral.executor.launch_config import LaunchConfig

    job_dir = os.path.join(short_tmp, "jobs", "1")
    os.makedirs(job_dir)
    with open(os.path.join(job_dir, files.NODE_FAIL), "w") as f:
        f.write("GPU 0 of n1 failed: XID 48: double-bit ECC error")
    marker = os.path.join(short_tmp, "ran")
    config = LaunchConfig(argv=("touch", marker), env=dict(os.environ), cwd=short_tmp,
                          stdout=f"{short_tmp}/o", stderr=f"{short_tmp}/o", time_limit_s=None, mem_limit_mb=0)
    spawn_supervisor(job_dir, config).wait(timeout=20)
    outcome = read_outcome(job_dir)
    assert (outcome.state, outcome.error) == ("NODE_FAIL", "GPU 0 of n1 failed: XID 48: double-bit ECC error")
    assert not os.path.exists(marker)


def test_a_job_whose_log_runs_away_is_killed_before_it_fills_the_disk(short_tmp):
    settings = LaunchSettings(kill_grace_s=1.0, server_env=dict(os.environ), server_url=lambda: None, max_log_mb=2)
    backend = LocalBackend(short_tmp, settings)
    job = start(backend, command=[sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"])
    quiet = start(backend, command=["sh", "-c", "echo fine"])
    outcome = finish(backend, job)
    assert (outcome.state, outcome.signal) == ("FAILED", 9)
    # no more than the limit, together (tests/executor/test_log_caps.py: however fast the job writes)
    assert os.path.getsize(job.log_path("stdout")) == 2 << 20  # and its stderr says why
    assert "the job's logs reached the server's limit of 2 MB" in read(job.log_path("stderr"))
    assert finish(backend, quiet).state == "COMPLETED"  # the job is the one that fails


def test_a_pipeline_in_a_job_ends_quietly_when_its_reader_is_done(backend):
    # SIGPIPE as Slurm's jobs have it (the supervisor's Python ignores it, and an exec would pass that on)
    job = start(backend, command=["sh", "-c", "yes | head -n 2"])
    assert finish(backend, job).state == "COMPLETED"
    assert read(job.log_path("stdout")) == "y\ny\n"
    assert read(job.log_path("stderr")) == ""  # not "yes: standard output: Broken pipe"
