"""launch.json, the server -> supervisor contract: one frozen value, written and read the same way,
still readable in the version-less shape that servers wrote before it had a version."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from corral.executor import files
from corral.executor.launch import read_outcome, spawn_supervisor
from corral.executor.launch_config import LAUNCH_VERSION, LaunchConfig, LaunchConfigError

# launch.json as backends/local.py wrote it before the contract had a version (every key it wrote)
VERSIONLESS = {
    "job_ref": "7_2", "node": "gpu01", "argv": ["python", "train.py"], "env": {"CORRAL_JOB_ID": "7"},
    "cwd": "/work", "stdout": "/work/out.log", "stderr": "/work/out.log", "time_limit_s": 3600,
    "mem_limit_mb": 2048, "kill_grace_s": 5.0, "max_log_mb": 20480, "log_reserve_mb": 256, "append_logs": True,
    "run_as": {"name": "ada", "uid": 1001, "gid": 1001, "groups": [1001, 27], "home": "/home/ada", "shell": "/bin/sh"},
    "umask": 18, "max_processes": 4096,
    "cgroup": {"layout": {"version": 2, "path": "/sys/fs/cgroup/corral/k"}, "name": "job_7", "deny_devices": [["c", 195, 1]]},
    "warn_signal": 10, "warn_before_s": 90, "lock_fd": 5,
}


def test_a_launch_config_survives_its_round_trip_through_json():
    config = LaunchConfig.from_json(VERSIONLESS)
    on_disk = json.loads(json.dumps(config.to_json()))
    assert on_disk["version"] == LAUNCH_VERSION
    assert LaunchConfig.from_json(on_disk) == config


def test_the_written_file_keeps_every_key_of_the_versionless_shape():
    # a server upgraded under a running job, and a downgraded one, still find each key where it was
    written = LaunchConfig.from_json(VERSIONLESS).to_json()
    assert {k: written[k] for k in VERSIONLESS} == VERSIONLESS


def test_todays_versionless_launch_json_reads_as_version_1():
    config = LaunchConfig.from_json(VERSIONLESS)
    assert config.version == 1
    assert config.argv == ("python", "train.py") and config.env == {"CORRAL_JOB_ID": "7"}
    assert config.run_as["uid"] == 1001 and config.cgroup["name"] == "job_7"
    assert config.warn_signal == 10 and config.warn_before_s == 90 and config.lock_fd == 5
    # the keys a version-less file could leave out, or set to null, mean what they meant then
    minimal = LaunchConfig.from_json({k: VERSIONLESS[k] for k in ("argv", "env", "cwd", "stdout", "stderr")}
                                     | {"time_limit_s": None, "kill_grace_s": None})
    assert minimal.kill_grace_s == 10.0 and minimal.warn_before_s == 0 and minimal.run_as is None


def test_the_config_is_frozen():
    config = LaunchConfig.from_json(VERSIONLESS)
    with pytest.raises(AttributeError):
        config.argv = ("rm",)  # type: ignore[misc]


def test_an_unknown_version_is_refused_by_name():
    with pytest.raises(LaunchConfigError, match="version 99"):
        LaunchConfig.from_json({**VERSIONLESS, "version": 99})
    with pytest.raises(LaunchConfigError, match="unknown fields gpus"):
        LaunchConfig.from_json({**VERSIONLESS, "version": LAUNCH_VERSION, "gpus": [0]})
    with pytest.raises(LaunchConfigError, match="argv"):
        LaunchConfig.from_json({**VERSIONLESS, "argv": "python train.py"})
    with pytest.raises(LaunchConfigError, match="cwd"):
        LaunchConfig.from_json({k: v for k, v in VERSIONLESS.items() if k != "cwd"})


def test_a_supervisor_started_on_todays_versionless_file_runs_the_job(short_tmp):
    """A job launched before the upgrade: the new supervisor code reads the file the old server wrote."""
    job_dir = os.path.join(short_tmp, "jobs", "1")
    os.makedirs(job_dir)
    out = os.path.join(short_tmp, "out")
    config = LaunchConfig(argv=("sh", "-c", "echo ran"), env={"PATH": os.environ["PATH"]}, cwd=short_tmp,
                          stdout=out, stderr=out)
    spawn_supervisor(job_dir, config).wait(timeout=20)
    assert read_outcome(job_dir).state == "COMPLETED"
    launch = files.read_json(os.path.join(job_dir, files.LAUNCH))
    del launch["version"]
    for name in (files.RESULT, files.STARTED):
        os.unlink(os.path.join(job_dir, name))
    _run_supervisor(job_dir, launch)
    assert read_outcome(job_dir).state == "COMPLETED"
    with open(out) as f:
        assert f.read() == "ran\n"


def test_a_supervisor_fails_the_job_clearly_on_a_launch_json_of_unknown_version(short_tmp):
    job_dir = os.path.join(short_tmp, "jobs", "1")
    os.makedirs(job_dir)
    marker = os.path.join(short_tmp, "ran")
    launch = LaunchConfig(argv=("touch", marker), env={}, cwd=short_tmp, stdout=f"{short_tmp}/o",
                          stderr=f"{short_tmp}/o").to_json() | {"version": 2}
    proc = _run_supervisor(job_dir, launch)
    assert proc.returncode != 0 and "version 2" in proc.stderr
    outcome = read_outcome(job_dir)
    assert outcome.state == "FAILED" and "launch.json has version 2" in outcome.error
    assert not os.path.exists(marker)


def _run_supervisor(job_dir: str, launch: dict) -> subprocess.CompletedProcess[str]:
    """Write `launch` as launch.json and start the supervisor on it as spawn_supervisor does, handing it the lock."""
    lock_fd = os.open(os.path.join(job_dir, files.LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        files.write_json_atomic(os.path.join(job_dir, files.LAUNCH), {**launch, "lock_fd": lock_fd})
        return subprocess.run([sys.executable, "-m", "corral.executor.supervisor", job_dir], pass_fds=(lock_fd,),
                              capture_output=True, text=True, timeout=20, cwd="/")
    finally:
        os.close(lock_fd)
