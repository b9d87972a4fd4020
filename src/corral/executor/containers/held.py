"""What a root runtime is given of the host: the files and directories the job's owner opened, never
their paths again.

A root runtime (Podman, Docker) resolves each path it is told with root's rights, and later than the
supervisor checked it as the owner: a link the owner flips in between would have root mount another
user's directory, or load another user's image. So the supervisor opens each mount source and the
image's archive once, as the owner (`mounts.open_checked`), and hands on what it opened:

- a mount source is bound, from its descriptor, onto an entry of the job's stage, a directory of
  root's (0700) under `/run/corral/container-mounts`, and the runtime mounts that entry, whose path no
  one else can change. The stage is kept out of the job's directory: whoever deletes a corral home
  (`rm -rf`, a test's cleanup) while a bind is still there would delete what it binds, the owner's
  files. The runtime cannot be given `/proc/PID/fd/N` itself: runc mounts in a mount namespace of its
  own, and the kernel refuses to bind what a descriptor holds in another one (EINVAL);
- an archive is read through `/proc/PID/fd/N` of the supervisor, which holds it open until the job
  ends: the runtime opens that as often as it likes, and always gets the file that was checked.

The entries are unmounted and removed when the job ends (`HeldPaths.release`), and any that a killed
supervisor left are removed before the job's next run; nothing here ever deletes a directory's
contents, which would be the owner's files while one is mounted. A runtime that runs as the owner
(Apptainer, rootless Podman) resolves paths with the owner's own rights: there, paths are only checked.

Standard library only: the supervisor imports this for a container job.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import stat
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from corral.executor.containers import ARCHIVE_TRANSPORTS, ContainerLaunch, driver_for
from corral.executor.containers.mounts import MountRefused, open_checked
from corral.executor.job_owner import as_owner

if TYPE_CHECKING:
    from corral.executor.launch_config import LaunchConfig

STAGES = "/run/corral/container-mounts"
"""Root's: one stage per job, holding the entries the runtime mounts, each a bind of what the owner opened."""
_MS_BIND, _MS_REC, _MNT_DETACH = 0x1000, 0x4000, 2


@dataclass
class HeldPaths:
    """One container job's host paths as the runtime gets them, held until `release`."""

    launch: ContainerLaunch
    """The job's launch with each host path replaced by what was opened."""
    stage: str | None = None
    entries: list[str] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)

    def release(self) -> None:
        """Unmount and remove the entries, close the descriptors; again is a no-op."""
        for entry in reversed(self.entries):
            _unmount(entry)
            _remove(entry)
        self.entries.clear()
        if self.stage is not None:
            try:
                os.rmdir(self.stage)
            except OSError:
                pass
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def hold_paths(launch: ContainerLaunch, config: LaunchConfig, job_dir: str, corral_home: str,
               allowed: tuple[str, ...]) -> HeldPaths:
    """Open every host path the container would see (and its image's archive) as the owner, and hold them.

    Raises:
        MountRefused: naming the field (`container_mounts: ...`, `image: ...`) and why.
        OSError: what was opened could not be bound for the runtime (the job then fails, saying so).
    """
    held = HeldPaths(launch)
    # only root has to be kept from resolving a path again: an owner's runtime resolves as the owner
    binds = not driver_for(launch.runtime, launch.rootless).runs_as_owner and os.geteuid() == 0
    try:
        mounts = []
        for index, (source, target, read_only) in enumerate(launch.mounts):
            fd = _open(config, source, corral_home, allowed, "container_mounts")
            try:
                if binds:
                    if held.stage is None:
                        held.stage = _fresh_stage(stage_for(job_dir))
                    entry = os.path.join(held.stage, str(index))
                    _bind(fd, entry, held)
                    source = entry
            finally:
                os.close(fd)
            mounts.append((source, target, read_only))
        image = launch.image
        archive = launch.archive
        if archive is not None:
            fd = _open(config, archive, corral_home, allowed, "image")
            transport = next((t for t in ARCHIVE_TRANSPORTS if image.startswith(t)), None)
            if binds and transport is not None:
                held.fds.append(fd)
                image = f"{transport}/proc/{os.getpid()}/fd/{fd}{image[len(transport) + len(archive):]}"
            else:
                os.close(fd)
        held.launch = replace(launch, mounts=tuple(mounts), held_image=image if image != launch.image else None)
    except BaseException:
        held.release()
        raise
    return held


def _open(config: LaunchConfig, path: str, corral_home: str, allowed: tuple[str, ...], name: str) -> int:
    try:
        return as_owner(config, lambda: open_checked(path, corral_home, allowed))
    except MountRefused as exc:
        raise MountRefused(f"{name}: {exc}") from None


def stage_for(job_dir: str) -> str:
    """The job's stage: named by its directory, so that the server finds what a killed supervisor left."""
    return os.path.join(STAGES, hashlib.sha256(os.path.realpath(job_dir).encode()).hexdigest()[:32])


def _stages() -> None:
    """Make `/run/corral/container-mounts` (root's, 0700), refusing any part that is not root's own."""
    path = "/"
    for part in STAGES.strip("/").split("/"):
        path = os.path.join(path, part)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
            raise OSError(f"{path} is not a directory of root's alone: container mounts are not staged there")


def _fresh_stage(stage: str) -> str:
    """The job's stage directory, empty: what a killed supervisor of an earlier run left is unmounted."""
    _stages()
    try:
        os.mkdir(stage, 0o700)
        return stage
    except FileExistsError:
        pass
    _clear(stage)
    os.chmod(stage, 0o700)
    return stage


def release_left(job_dir: str) -> None:
    """Unmount and remove what a supervisor that died left in the job's stage: binds of its owner's
    directories must not outlive the job, where root's own tools (a backup, a `find`) would reach through them.

    Raises:
        OSError: the stage is not corral's own directory, or an entry could not be removed.
    """
    stage = stage_for(job_dir)
    if not os.path.lexists(stage):
        return
    _clear(stage)
    os.rmdir(stage)


def _clear(stage: str) -> None:
    """Unmount everything under `stage` (deepest first) and remove its entries."""
    info = os.lstat(stage)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise OSError(f"{stage} is not a directory of corral's own")
    real = os.path.realpath(stage)
    for point in sorted(_mount_points(real + "/"), key=len, reverse=True):
        _unmount(point)
    for name in os.listdir(stage):
        if not _remove(os.path.join(stage, name)):
            raise OSError(f"cannot remove {os.path.join(stage, name)}, left by an earlier run of the job")


def _bind(fd: int, entry: str, held: HeldPaths) -> None:
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.mkdir(entry, 0o700)
    else:
        os.close(os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    held.entries.append(entry)
    # what the descriptor holds, with what is mounted below it (as the runtime's own bind would have)
    if _libc().mount(f"/proc/self/fd/{fd}".encode(), entry.encode(), None, _MS_BIND | _MS_REC, None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot bind what the owner opened for the runtime: {os.strerror(error)}", entry)


def _unmount(entry: str) -> None:
    _libc().umount2(entry.encode(), _MNT_DETACH)  # not mounted (EINVAL) is fine: removing it says the rest


def _remove(entry: str) -> bool:
    """Remove an entry; the kernel refuses to remove one still mounted (EBUSY), so nothing below it goes."""
    try:
        if stat.S_ISDIR(os.lstat(entry).st_mode):
            os.rmdir(entry)
        else:
            os.unlink(entry)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _mount_points(prefix: str) -> list[str]:
    """Mount points under `prefix` in this mount namespace."""
    found = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            point = _unescape(line.split(b" ")[4].decode(errors="surrogateescape"))
            if point.startswith(prefix):
                found.append(point)
    return found


def _unescape(text: str) -> str:
    """mountinfo's octal escapes (a space is `\\040`)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _LIBC = libc
    return _LIBC
