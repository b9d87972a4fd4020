"""What a root runtime mounts is what the job's owner was checked for, for real: Podman (runc), real accounts.

The owner flips a link, many times a second, between a directory of their own and one behind another
user's 0700 home; their jobs name that link as a mount, as their working directory and as the folder of
their image's archive. The supervisor opens each path once as the owner and hands the runtime what it
opened, so no container ever sees the other user's files, however the race falls.
"""

from __future__ import annotations

import io
import os
import pwd
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from corral.backends.base import Recovered
from corral.backends.local.backend import LocalBackend
from corral.backends.local.settings import LaunchSettings
from corral.core.jobspec.job import Job
from corral.executor import files
from corral.executor.containers import ContainerLaunch
from corral.executor.containers.held import hold_paths, stage_for
from corral.executor.containers.mounts import MountRefused
from corral.executor.launch_config import LaunchConfig
from corral.executor.users import run_as_for
from tests.containers import busybox_tar
from tests.executor.test_containers import backend, read, start  # noqa: F401 - `backend` is a fixture
from tests.helpers import wait_for

STARTS = 200
"""Containers that must start (their command ran) with the link flipping under them."""
IN_FLIGHT = 4
OWN, VICTIM = "own-data", "VICTIM-SECRET"
REPORT = 'echo "mount=$(cat /m/secret)"; echo "cwd=$(cat secret)"; echo "image=$(cat /mark)"'


class Flipper(threading.Thread):
    """Swaps `link` between two targets with rename(2), so it always names one of them: the owner's own
    most of the time (the checks pass), the victim's a tenth of it."""

    def __init__(self, link: str, own: str, victim: str, uid: int, gid: int) -> None:
        super().__init__(daemon=True)
        self.link, self.own, self.victim, self.uid, self.gid = link, own, victim, uid, gid
        self.stop = threading.Event()
        self.flips = 0

    def point(self, target: str) -> None:
        new = f"{self.link}.new"
        if os.path.lexists(new):
            os.unlink(new)
        os.symlink(target, new)
        os.lchown(new, self.uid, self.gid)
        os.replace(new, self.link)

    def run(self) -> None:
        while not self.stop.is_set():
            for target, hold in ((self.own, 0.009), (self.victim, 0.001)):
                self.point(target)
                self.flips += 1
                time.sleep(hold)
        self.point(self.own)


def _image_archive(podman: str, path: str, mark: str, tag: str) -> None:
    """A busybox image whose /mark says whose it is, saved as a docker-archive (tagged `tag`) at `path`."""
    buffer = io.BytesIO(busybox_tar())
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        info = tarfile.TarInfo("mark")
        info.size, info.mode = len(mark) + 1, 0o644
        tar.addfile(info, io.BytesIO(mark.encode() + b"\n"))
    with tempfile.NamedTemporaryFile(suffix=".tar") as f:
        f.write(buffer.getvalue())
        f.flush()
        subprocess.run([podman, "import", "--change", "ENV PATH=/bin", f.name, tag], check=True, capture_output=True)
    subprocess.run([podman, "save", "--format", "docker-archive", "-o", path, tag], check=True, capture_output=True)
    subprocess.run([podman, "rmi", "--force", tag], capture_output=True)  # each job's pull brings it back


def _place(path: str, owner: pwd.struct_passwd, mode: int, content: str | None = None) -> None:
    if content is None:
        os.makedirs(path, exist_ok=True)
    else:
        with open(path, "w") as f:
            f.write(content + "\n")
    os.chown(path, owner.pw_uid, owner.pw_gid)
    os.chmod(path, mode)


@pytest.fixture
def race(os_users, podman) -> Iterator[tuple[str, str, str]]:
    """(link, alice's own directory, bob's directory behind his 0700 vault), each holding a `secret` and an
    `image.tar`; the link names alice's own."""
    alice, bob = (pwd.getpwnam(u) for u in os_users)
    key = uuid.uuid4().hex[:8]  # the accounts are shared with other test runs on this machine
    base = os.path.join(alice.pw_dir, f"race-{key}")
    vault = os.path.join(bob.pw_dir, f"vault-{key}")
    own, victim = os.path.join(base, "own"), os.path.join(vault, "data")
    _place(base, alice, 0o755)
    _place(own, alice, 0o755)
    _place(vault, bob, 0o700)  # alice cannot pass through here...
    _place(victim, bob, 0o755)  # ...to what bob would otherwise let anyone read
    _place(os.path.join(own, "secret"), alice, 0o644, OWN)
    _place(os.path.join(victim, "secret"), bob, 0o644, VICTIM)
    _image_archive(podman, os.path.join(own, "image.tar"), OWN, f"localhost/corral-race-own:{key}")
    _image_archive(podman, os.path.join(victim, "image.tar"), VICTIM, f"localhost/corral-race-victim:{key}")
    for name in ("image.tar",):
        os.chown(os.path.join(own, name), alice.pw_uid, alice.pw_gid)
        os.chown(os.path.join(victim, name), bob.pw_uid, bob.pw_gid)
    link = os.path.join(base, "link")
    os.symlink(own, link)
    os.lchown(link, alice.pw_uid, alice.pw_gid)
    yield link, own, victim
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(vault, ignore_errors=True)
    for name in ("own", "victim"):
        subprocess.run([podman, "rmi", "--force", f"localhost/corral-race-{name}:{key}"], capture_output=True)


@pytest.mark.timeout(600)
def test_a_link_flipped_to_another_users_directory_never_shows_it_inside_a_container(backend, os_users, race):
    link, own, victim = race
    alice = pwd.getpwnam(os_users[0])
    flipper = Flipper(link, own, victim, alice.pw_uid, alice.pw_gid)
    seen: Counter[str] = Counter()  # "mount=own-data", "cwd=VICTIM-SECRET", ...
    started = refused = 0
    running: list[Job] = []
    stages: list[str] = []
    flipper.start()
    try:
        while started < STARTS:
            while len(running) < IN_FLIGHT:
                # the home unmounted: inside, the working directory is then the mount alone, not a path
                # through the owner's home, where the container's own view would follow the link too
                running.append(start(backend, alice.pw_name, workdir=link, command=["sh", "-c", REPORT],
                                     image=f"docker-archive:{link}/image.tar", container_mounts=f"{link}:/m:ro",
                                     container_mount_home=False))
                stages.append(stage_for(backend.job_dir(running[-1].id)))
            for ended in wait_for(lambda: backend.poll(running), timeout=120):
                running.remove(ended.job)
                lines = read(ended.job.log_path("stdout")).splitlines()
                assert not [line for line in lines if VICTIM in line], \
                    f"container {started + 1} read bob's files: {lines}"
                if lines:
                    started += 1  # the container ran the job's command
                    seen.update(lines)
                else:
                    refused += 1  # the link named bob's directory when the owner's check opened it
                    assert ended.outcome.state == "FAILED", read(ended.job.log_path("stderr"))
    finally:
        flipper.stop.set()
        flipper.join()
        for job in running:
            wait_for(lambda j=job: backend.poll([j]), timeout=120)
    assert seen == Counter({f"mount={OWN}": started, f"cwd={OWN}": started, f"image={OWN}": started})
    assert flipper.flips > 2 * (started + refused)  # the link moved between every two starts
    assert _mounted_under(backend.home) == []  # each job's binds went with it
    assert [stage for stage in stages if os.path.lexists(stage)] == []


def _mounted_under(path: str) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(os.path.realpath(path) + "/")]


def _same(a: str, b: str) -> bool:
    return (os.stat(a).st_dev, os.stat(a).st_ino) == (os.stat(b).st_dev, os.stat(b).st_ino)


def _point(link: str, target: str) -> None:
    os.symlink(target, f"{link}.x")
    os.replace(f"{link}.x", link)


def test_root_is_given_what_the_owner_opened_and_nothing_stays_mounted(os_users, shared_dir, race):
    link, own, victim = race
    alice = run_as_for(os_users[0])
    assert alice is not None
    job_dir = os.path.join(shared_dir, "jobs", "7")
    os.makedirs(job_dir)
    config = LaunchConfig(argv=("true",), env={}, cwd=link, stdout="/dev/null", stderr="/dev/null",
                          run_as=alice.to_dict())
    launch = ContainerLaunch(runtime="podman", binary="/usr/bin/podman", image=f"docker-archive:{link}/image.tar",
                             name="c", workdir=link, mounts=((link, "/m", True), (f"{link}/secret", "/s", False)))
    held = hold_paths(launch, config, job_dir, shared_dir, ())
    entries = [source for source, _, _ in held.launch.mounts]
    stage = stage_for(job_dir)
    assert entries == [os.path.join(stage, "0"), os.path.join(stage, "1")]
    assert [(target, read_only) for _, target, read_only in held.launch.mounts] == [("/m", True), ("/s", False)]
    assert os.stat(stage).st_mode & 0o777 == 0o700  # root's alone: no one can swap an entry
    assert os.path.commonpath([stage, shared_dir]) != shared_dir  # deleting the home never reaches through a bind
    _point(link, victim)  # flipped after the check: what root is given stays what the owner opened
    assert _same(entries[0], own) and _same(entries[1], os.path.join(own, "secret"))
    archive = held.launch.held_image
    assert archive == f"docker-archive:/proc/{os.getpid()}/fd/{held.fds[0]}" and held.launch.image == launch.image
    assert _same(archive.partition(":")[2], os.path.join(own, "image.tar"))
    shutil.rmtree(job_dir)  # the job's directory deleted while its binds are up: the owner's files stay whole
    assert sorted(os.listdir(own)) == ["image.tar", "secret"] and read(os.path.join(own, "secret")).strip() == OWN
    os.makedirs(job_dir)
    # the next run of the job over binds a killed supervisor never released: they are removed first
    _point(link, own)
    again = hold_paths(launch, config, job_dir, shared_dir, ())
    assert _mounted_under(stage) == [os.path.realpath(entry) for entry in entries]
    again.release()
    held.release()
    assert _mounted_under(stage) == [] and not os.path.exists(stage)
    # opened while it names bob's: refused, naming the field, and nothing is bound
    _point(link, victim)
    with pytest.raises(MountRefused, match=r"^container_mounts: .*permission denied \(as the job's owner\)"):
        hold_paths(launch, config, job_dir, shared_dir, ())
    assert _mounted_under(stage) == []


def test_a_container_job_whose_supervisor_was_killed_leaves_nothing_mounted_once_found_lost(backend, os_users,
                                                                                            race):
    link, own, _ = race
    alice = pwd.getpwnam(os_users[0])
    job = start(backend, alice.pw_name, workdir=own, command=["sh", "-c", "cat /m/secret; sleep 60"],
                image=f"docker-archive:{own}/image.tar", container_mounts=f"{own}:/m:ro", container_mount_home=False)
    wait_for(lambda: OWN in read(job.log_path("stdout")), timeout=120)  # running, with its mount bound
    job_dir = backend.job_dir(job.id)
    stage = stage_for(job_dir)
    assert _mounted_under(stage) != [] and _mounted_under(backend.home) == []
    started = files.read_json(os.path.join(job_dir, files.STARTED))
    os.kill(started["supervisor_pid"], signal.SIGKILL)
    backend.supervisors.child(job.id).wait()
    fresh = LocalBackend(os.path.dirname(backend.jobs_dir),
                         LaunchSettings(kill_grace_s=1, server_env={}, server_url=lambda: None))
    assert fresh.recover(job).status is Recovered.LOST
    # the owner's directory is no longer reachable through the job's directory, and is whole
    assert _mounted_under(stage) == [] and not os.path.exists(stage)
    assert read(os.path.join(own, "secret")).strip() == OWN
