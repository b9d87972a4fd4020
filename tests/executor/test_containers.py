"""Jobs in container images under a root server, for real: Podman (runc), real accounts, real cgroups.

The images are made by tests/containers.py (busybox, imported; nothing is pulled from a registry).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from dataclasses import replace

import pytest

from corral.backends.local import LaunchSettings, LocalBackend
from corral.backends.local.containers import LocalContainers
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.executor.cgroups import read_pids
from corral.executor.cgroups.placement import find_layout
from corral.executor.containers.start import read_state
from corral.executor.users import owned_dir, run_as_for, share_home_with_jobs
from tests.helpers import alive, make_spec, wait_for
from tests.users import user_pids

_next_id = iter(range(1, 10_000))


@pytest.fixture
def backend(os_users, shared_dir, podman):
    home = os.path.join(shared_dir, "home")
    os.makedirs(home)
    share_home_with_jobs(home)
    layout = find_layout(home).layout
    settings = LaunchSettings(kill_grace_s=2.0, server_env=dict(os.environ), server_url=lambda: None,
                              max_job_processes=200, cgroup_layout=layout, gpu_minors={i: i for i in range(4)})
    containers = LocalContainers("podman", podman, rootless=False, home_key=f"t{os.getpid()}")
    return LocalBackend(home, settings, owner_lookup=run_as_for, containers=containers)


def start(backend: LocalBackend, user: str, gpus: tuple[int, ...] = (), workdir: str | None = None,
          **request) -> Job:
    logs = owned_dir(os.path.join(backend.home, "logs"), user)
    request.setdefault("gpus", len(gpus))
    spec = replace(make_spec(workdir=workdir or pwd.getpwnam(user).pw_dir, log_dir=logs, **request), user=user)
    job = Job(id=next(_next_id), spec=spec, state=JobState.RUNNING, submit_time=time.time(),
              start_time=time.time(), node="n1", gpu_ids=gpus)
    backend.start(job, Allocation(job.id, "n1", gpus, job.spec.cpus, job.spec.mem_mb))
    return job


def finish(backend: LocalBackend, job: Job, timeout: float = 60.0):
    return wait_for(lambda: backend.poll([job]), timeout=timeout)[0][1]


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def containers_named(podman: str, job: Job, backend: LocalBackend) -> str:
    name = f"corral-{backend.containers.home_key}-{job.ref}"  # type: ignore[union-attr]
    return subprocess.run([podman, "ps", "--all", "--quiet", "--filter", f"name=^{name}$"],
                          capture_output=True, text=True).stdout.strip()


def test_a_container_job_runs_as_its_owner_in_its_workdir_with_its_gpus_environment_and_exit_code(
        backend, os_users, busybox_image, podman):
    alice = pwd.getpwnam(os_users[0])
    show = ('id -u; id -g; pwd; echo "gpus=$CUDA_VISIBLE_DEVICES"; echo "own=$IMAGE_OWN"; echo "mine=$MY_VAR"; '
            'echo "path=$PATH"; echo "home=$HOME"; echo "job=$CORRAL_JOB_ID"; touch made-inside; '
            'echo to-stderr >&2; exit 7')
    job = start(backend, alice.pw_name, gpus=(2, 3), command=["sh", "-c", show], image=busybox_image,
                env={"MY_VAR": "kept", "PATH": "/host/only/bin:/usr/bin"})
    outcome = finish(backend, job)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 7), read(job.log_path("stderr"))
    lines = read(job.log_path("stdout")).splitlines()
    assert lines == [str(alice.pw_uid), str(alice.pw_gid), alice.pw_dir, "gpus=0,1", "own=from-the-image",
                     "mine=kept", "path=/bin", f"home={alice.pw_dir}", f"job={job.id}"]
    assert "to-stderr" in read(job.log_path("stderr"))
    made = os.stat(os.path.join(alice.pw_dir, "made-inside"))
    assert (made.st_uid, made.st_gid) == (alice.pw_uid, alice.pw_gid)
    assert read_state(backend.job_dir(job.id))["pulled"] is False
    assert containers_named(podman, job, backend) == ""  # removed with the job
    env_file = os.stat(os.path.join(backend.job_dir(job.id), "container.env"))
    assert (env_file.st_uid, env_file.st_mode & 0o777) == (0, 0o600)


def test_container_env_names_make_the_jobs_value_win_over_the_images(backend, os_users, busybox_image):
    job = start(backend, os_users[0], command=["sh", "-c", 'echo "$IMAGE_OWN"'], image=busybox_image,
                env={"IMAGE_OWN": "from-the-job"}, container_env="IMAGE_OWN")
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")) == "from-the-job\n"


def test_cancel_reaches_the_process_inside_once_and_leaves_nothing(backend, os_users, busybox_image, podman):
    alice = pwd.getpwnam(os_users[0])
    script = "trap 'echo got TERM; exit 0' TERM; echo ready; while true; do sleep 0.1; done"
    job = start(backend, alice.pw_name, command=["sh", "-c", script], image=busybox_image)
    wait_for(lambda: "ready" in read(job.log_path("stdout")), timeout=30)
    inside = backend.job_processes(job.id)
    assert inside is not None and inside.procs_file
    pids = read_pids(inside.procs_file)
    assert any(pid in user_pids(alice.pw_uid) for pid in pids)  # the container's sh, alice's, in the job's cgroup
    backend.cancel(job, by="tester")
    outcome = finish(backend, job)
    assert outcome.state == "CANCELLED"
    assert read(job.log_path("stdout")).count("got TERM") == 1
    assert not [p for p in pids if alive(p)]
    assert containers_named(podman, job, backend) == ""


def test_the_time_limit_stops_the_container(backend, os_users, busybox_image):
    job = start(backend, os_users[0], command=["sleep", "300"], image=busybox_image, time="0:02")
    began = time.monotonic()
    outcome = finish(backend, job)
    assert outcome.state == "TIMEOUT"
    assert time.monotonic() - began < 30
    assert "DUE TO TIME LIMIT" in read(job.log_path("stderr"))


def test_going_over_the_memory_limit_inside_ends_the_job_out_of_memory(backend, os_users, busybox_image):
    job = start(backend, os_users[0], command=["dd", "if=/dev/zero", "of=/dev/null", "bs=300M", "count=1"],
                image=busybox_image, mem="64M")
    outcome = finish(backend, job)
    assert outcome.state == "OUT_OF_MEMORY", read(job.log_path("stderr"))
    assert "exceeded its memory limit" in read(job.log_path("stderr"))


@pytest.mark.parametrize("what", ["shadow", "other home", "corral home"])
def test_a_mount_its_owner_may_not_read_is_refused_and_nothing_runs(backend, os_users, busybox_image, what):
    alice, bob = os_users
    private = os.path.join(pwd.getpwnam(bob).pw_dir, "private")
    os.makedirs(private, exist_ok=True)
    os.chown(private, pwd.getpwnam(bob).pw_uid, pwd.getpwnam(bob).pw_gid)
    os.chmod(private, 0o700)
    source = {"shadow": "/etc/shadow", "other home": private, "corral home": os.path.join(backend.home, "jobs")}[what]
    job = start(backend, alice, command=["sh", "-c", "echo ran"], image=busybox_image,
                container_mounts=f"{source}:/mnt/x:ro")
    outcome = finish(backend, job)
    assert outcome.state == "FAILED"
    assert outcome.error is not None and outcome.error.startswith("container_mounts: ") and source in outcome.error
    assert read(job.log_path("stdout")) == ""


def test_a_mount_of_the_owners_own_data_is_seen_inside_read_only(backend, os_users, busybox_image, shared_dir):
    alice = pwd.getpwnam(os_users[0])
    data = os.path.join(alice.pw_dir, "dataset")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "x.txt"), "w") as f:
        f.write("rows\n")
    job = start(backend, alice.pw_name, command=["sh", "-c", "cat /data/x.txt; touch /data/y || echo read-only"],
                image=busybox_image, container_mounts=f"{data}:/data:ro", container_workdir="/data")
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")) == "rows\nread-only\n"


def test_an_image_that_cannot_be_had_fails_the_job_saying_why(backend, os_users, podman):
    job = start(backend, os_users[0], command=["true"], image="localhost/no-such-image:1")
    outcome = finish(backend, job)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 125)
    assert outcome.error is not None and "cannot bring in the image localhost/no-such-image:1" in outcome.error
    assert "pulling localhost/no-such-image:1" in read(job.log_path("stderr"))


def test_an_archive_is_brought_in_and_its_time_recorded_apart(backend, os_users, busybox_image, podman):
    alice = pwd.getpwnam(os_users[0])
    archive = os.path.join(alice.pw_dir, "image.tar")
    if os.path.exists(archive):
        os.unlink(archive)
    subprocess.run([podman, "save", "--format", "docker-archive", "-o", archive, busybox_image], check=True,
                   capture_output=True)
    os.chown(archive, alice.pw_uid, alice.pw_gid)
    os.chmod(archive, 0o600)
    job = start(backend, alice.pw_name, command=["sh", "-c", "echo from-the-archive"], image="docker-archive:image.tar")
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")) == "from-the-archive\n"
    state = read_state(backend.job_dir(job.id))
    assert state["pulled"] is True and float(state["pull_s"]) > 0  # type: ignore[arg-type]
    usage = json.loads(read(os.path.join(backend.job_dir(job.id), "result.json")))["usage"]
    assert usage["image_pull_s"] == state["pull_s"]
    # bob may not run alice's archive: root's runtime would read it for him
    bobs = start(backend, os_users[1], command=["true"], image=f"docker-archive:{archive}")
    outcome = finish(backend, bobs)
    assert outcome.state == "FAILED" and outcome.error is not None and outcome.error.startswith("image: ")


def test_a_batch_script_runs_inside_the_image(backend, os_users, busybox_image):
    script = f"#!/bin/sh\n#SBATCH --container-image={busybox_image}\necho \"in $(head -c 4 /etc/passwd) as $(id -u)\"\n"
    job = start(backend, os_users[0], command=None, script=script)
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")) == f"in root as {pwd.getpwnam(os_users[0]).pw_uid}\n"  # the image's passwd


def test_the_warning_signal_before_the_time_limit_reaches_the_program_inside(backend, os_users, busybox_image):
    script = "trap 'echo warned' USR1; echo ready; i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done"
    job = start(backend, os_users[0], command=["sh", "-c", script], image=busybox_image, time="0:06",
                signal="USR1@4")
    outcome = finish(backend, job)
    assert outcome.state == "TIMEOUT"
    assert read(job.log_path("stdout")).splitlines()[:2] == ["ready", "warned"]


def test_remap_root_is_root_inside_and_the_owner_outside(backend, os_users, busybox_image):
    alice = pwd.getpwnam(os_users[0])
    marker = os.path.join(alice.pw_dir, "made-as-root-inside")
    if os.path.exists(marker):
        os.unlink(marker)
    job = start(backend, alice.pw_name, command=["sh", "-c", f"id -u; touch {marker}; cat /etc/shadow 2>&1 | head -1"],
                image=busybox_image, container_remap_root=True)
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")).splitlines()[0] == "0"
    assert os.stat(marker).st_uid == alice.pw_uid  # root inside is alice on the host


def test_the_working_directory_inside_is_entered_as_the_owner_never_as_root(backend, os_users, busybox_image):
    """runc would enter (and make) `--workdir` as root: through a mount of a directory above another user's 0700
    one, the job would start in what it may not reach, or make a directory there on the host as root."""
    alice, bob = (pwd.getpwnam(u) for u in os_users)
    vault = os.path.join(bob.pw_dir, f"vault-{os.getpid()}")
    os.makedirs(os.path.join(vault, "data"), exist_ok=True)
    with open(os.path.join(vault, "data", "secret"), "w") as f:
        f.write("VICTIM\n")
    os.chmod(os.path.join(vault, "data", "secret"), 0o644)
    os.chmod(os.path.join(vault, "data"), 0o755)
    os.chmod(vault, 0o700)  # bob's alone to pass through
    parent = os.path.dirname(bob.pw_dir)  # which alice may read, and mount
    inside = f"/u/{os.path.basename(bob.pw_dir)}/{os.path.basename(vault)}"
    try:
        for workdir in (f"{inside}/data", f"{inside}/made"):
            job = start(backend, alice.pw_name, command=["cat", "secret"], image=busybox_image,
                        container_mounts=f"{parent}:/u", container_workdir=workdir)
            outcome = finish(backend, job)
            assert (outcome.state, outcome.exit_code) == ("FAILED", 1)
            assert read(job.log_path("stdout")) == ""
            assert f"cannot enter the working directory {workdir} in the container" in read(job.log_path("stderr"))
        assert sorted(os.listdir(vault)) == ["data"]  # nothing made there as root
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", vault], check=True)


def test_the_images_entrypoint_still_runs_before_the_jobs_command(backend, os_users, podman, busybox_image):
    image = "localhost/corral-test-entrypoint:1"
    made = subprocess.run([podman, "create", busybox_image, "true"], capture_output=True, text=True, check=True)
    container = made.stdout.strip()
    try:
        subprocess.run([podman, "commit", "--change", 'ENTRYPOINT ["/bin/echo", "entrypoint says"]', container,
                        image], check=True, capture_output=True)
    finally:
        subprocess.run([podman, "rm", "--force", container], capture_output=True)
    job = start(backend, os_users[0], command=["the", "job's", "argv"], image=image)
    assert finish(backend, job).state == "COMPLETED", read(job.log_path("stderr"))
    assert read(job.log_path("stdout")) == "entrypoint says the job's argv\n"
