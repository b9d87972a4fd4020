"""Each runtime's argv, pinned: one job with two of the node's GPUs (devices NVML found), a CPU and memory
limit, its mounts and an environment file; one argument per line in golden/containers/. A changed argv is
a changed contract with the runtime, and shows here as a diff.
"""

from __future__ import annotations

import os

import pytest

from corral.executor.containers import ENTER_WORKDIR, ContainerLaunch, driver_for, find_runtime, visible_devices
from corral.executor.containers.start import container_environment

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "containers")

LAUNCH = ContainerLaunch(
    runtime="podman", binary="/usr/bin/podman", image="nvcr.io#nvidia/pytorch:24.01-py3", name="corral-3f2a9c1e-42",
    workdir="/home/ada/proj", gpus=(2, 3), gpu_devices=True, cpus=8, memory_mb=None,
    mounts=(("/home/ada/proj", "/home/ada/proj", False), ("/home/ada", "/home/ada", False),
            ("/var/lib/corral/checkpoints/42", "/var/lib/corral/checkpoints/42", False),
            ("/datasets/imagenet", "/data", True)),
    user=(1001, 1001, (1001, 2000)), cgroup_parent="/corral/3f2a9c1e0d4b/job_42",
)
ARGV = ["python", "train.py", "--lr", "3e-4"]
ENTRYPOINT = ("/opt/nvidia/nvidia_entrypoint.sh",)  # NGC's, which the job's command follows
ENV_FILE = "/var/lib/corral/jobs/42/container.env"


def _variants():
    yield "podman", driver_for("podman"), LAUNCH
    yield "podman-remap-root", driver_for("podman"), ContainerLaunch(**{**LAUNCH.__dict__, "remap_root": True})
    yield "podman-rootless", driver_for("podman", rootless=True), ContainerLaunch(
        **{**LAUNCH.__dict__, "user": None, "rootless": True, "cgroup_parent": None})
    yield "podman-declared-gpus", driver_for("podman"), ContainerLaunch(
        **{**LAUNCH.__dict__, "gpu_devices": False, "memory_mb": 16384, "cgroup_parent": None})
    yield "podman-srun-pty", driver_for("podman"), ContainerLaunch(**{**LAUNCH.__dict__, "interactive": "pty"})
    yield "podman-lowered-ulimits", driver_for("podman"), ContainerLaunch(
        **{**LAUNCH.__dict__, "ulimits": ("nofile=4096:4096", "nproc=32768:32768")})
    yield "docker", driver_for("docker"), ContainerLaunch(**{**LAUNCH.__dict__, "runtime": "docker",
                                                               "binary": "/usr/bin/docker"})
    yield "apptainer", driver_for("apptainer"), ContainerLaunch(
        **{**LAUNCH.__dict__, "runtime": "apptainer", "binary": "/usr/bin/apptainer", "user": None,
           "image": "/shared/images/pytorch.sif", "cgroup_parent": None})
    yield "apptainer-registry", driver_for("apptainer"), ContainerLaunch(
        **{**LAUNCH.__dict__, "runtime": "apptainer", "binary": "/usr/bin/apptainer", "user": None,
           "cgroup_parent": None, "mount_home": False})


@pytest.mark.parametrize("variant", list(_variants()), ids=lambda v: v[0])
def test_each_drivers_run_argv_is_pinned(variant):
    name, driver, launch = variant
    env_file = None if driver.passes_environment else ENV_FILE
    argv = driver.run_argv(launch, driver.reference(launch.image), ARGV, env_file, ENTRYPOINT)
    path = os.path.join(GOLDEN, f"{name}.txt")
    if os.environ.get("CORRAL_UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write("\n".join(argv) + "\n")
    with open(path) as f:
        assert argv == f.read().splitlines()


def test_the_job_never_runs_as_root_or_with_privileges_under_a_root_runtime():
    for name, driver, launch in _variants():
        argv = driver.run_argv(launch, driver.reference(launch.image), ARGV, ENV_FILE)
        assert "--privileged" not in argv and not any(a.startswith("--cap-add") for a in argv), name
        if driver.runs_as_owner:
            continue
        assert "--security-opt=no-new-privileges" in argv, name
        user = next(a for a in argv if a.startswith("--user="))
        if "--user=0:0" == user:  # root only inside a namespace mapped onto the owner
            assert "--uidmap=0:1001:1" in argv, name
        else:
            assert user == "--user=1001:1001", name
        assert not any("TOKEN" in a or "=" in a and a.split("=", 1)[0] in ("-e", "--env") for a in argv), name


def test_a_root_runtime_never_enters_the_working_directory_itself_the_owner_does_inside():
    """runc enters `--workdir` as root, and makes it where it is missing: through another user's 0700 directory
    mounted in, or as root in a host directory. A root runtime starts in `/`; the owner's `cd` does the rest."""
    for name, driver, launch in _variants():
        argv = driver.run_argv(launch, driver.reference(launch.image), ARGV, ENV_FILE, ENTRYPOINT)
        if driver.runs_as_owner:
            assert f"--workdir={launch.workdir}" in argv or ["--pwd", launch.workdir] == argv[2:4], name
            continue
        image = argv.index(driver.reference(launch.image))
        assert [a for a in argv if a.startswith("--workdir")] == ["--workdir=/"], name
        assert argv[image - 1] == "--entrypoint=/bin/sh", name
        assert argv[image + 1:] == ["-c", ENTER_WORKDIR, "corral", launch.workdir, *ENTRYPOINT, *ARGV], name


def test_gpus_are_numbered_as_the_container_sees_them():
    assert visible_devices(driver_for("podman"), (2, 3)) == "0,1"
    assert visible_devices(driver_for("docker"), (5,)) == "0"
    assert visible_devices(driver_for("apptainer"), (2, 3)) == "2,3"  # --nv binds the host's devices


def test_images_are_named_as_each_runtime_names_them():
    podman, apptainer = driver_for("podman"), driver_for("apptainer")
    assert podman.reference("nvcr.io#nvidia/pytorch:24.01-py3") == "nvcr.io/nvidia/pytorch:24.01-py3"
    assert podman.reference("docker://ubuntu:22.04") == "ubuntu:22.04"
    assert podman.reference("docker-archive:/x/i.tar") == "docker-archive:/x/i.tar"
    assert apptainer.reference("ubuntu:22.04") == "docker://ubuntu:22.04"
    assert apptainer.reference("/x/pytorch.sif") == "/x/pytorch.sif"


def test_the_images_own_variables_win_but_for_those_named_and_corrals():
    job = {"PATH": "/host/bin", "LD_LIBRARY_PATH": "/host/lib", "NCCL_DEBUG": "INFO", "CORRAL_JOB_ID": "4",
           "CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/home/ada"}
    image = ("PATH", "LD_LIBRARY_PATH", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "CORRAL_JOB_ID")
    inside = container_environment(job, image, forced=("NCCL_DEBUG",))
    assert inside == {"NCCL_DEBUG": "INFO", "CORRAL_JOB_ID": "4", "CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/home/ada"}


def test_the_runtime_is_the_configured_one_or_found_on_path_and_docker_only_when_named(tmp_path):
    for name in ("docker", "podman", "apptainer"):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    assert find_runtime(None, str(tmp_path)) == ("podman", str(tmp_path / "podman"))
    (tmp_path / "podman").unlink()
    assert find_runtime(None, str(tmp_path)) == ("apptainer", str(tmp_path / "apptainer"))
    (tmp_path / "apptainer").unlink()
    assert find_runtime(None, str(tmp_path)) is None  # Docker's group is root's equal: an admin must name it
    assert find_runtime("docker", str(tmp_path)) == ("docker", str(tmp_path / "docker"))
    with pytest.raises(ValueError, match="not installed"):
        find_runtime("podman", str(tmp_path))
    with pytest.raises(ValueError, match="not one of"):
        find_runtime("lxc", str(tmp_path))


@pytest.mark.parametrize("runtime, device", [("podman", "--device=nvidia.com/gpu=MIG-a"),
                                             ("docker", '--gpus="device=MIG-a,MIG-b"')])
def test_a_mig_slice_is_passed_and_made_visible_by_its_uuid(runtime, device):
    launch = ContainerLaunch(**{**LAUNCH.__dict__, "runtime": runtime, "gpus": (5, 6), "gpu_uuids": ("MIG-a", "MIG-b")})
    argv = driver_for(runtime).run_argv(launch, "img", ARGV, ENV_FILE)
    assert device in argv and not any(a.endswith(("gpu=5", "device=5,6")) for a in argv)
    assert ContainerLaunch.from_json(launch.to_json()) == launch
    assert visible_devices(driver_for(runtime), launch.gpus, launch.gpu_uuids) == "MIG-a,MIG-b"
