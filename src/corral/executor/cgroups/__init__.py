"""Each job in a cgroup of its own, as Slurm's proctrack/cgroup and task/cgroup hold it.

A cgroup is the only container a job cannot leave: `setsid`, a double fork or a daemon
leave the process group and the session, never the cgroup (moving out needs write access
to another cgroup's `cgroup.procs`, which is root's). So a job's end, cancel, time limit
and preemption reach every process it started; its memory limit is the kernel's, and an
OOM kill inside it is counted by the kernel; its process count is capped per job (pids);
its GPUs other than its own cannot be opened (devices, or a BPF filter on cgroup v2).

Two small drivers behind one interface (`JobCgroup`), one per hierarchy:

- `v1`: a controller per mount (memory, pids, devices, freezer, cpuacct), as on this
  kind of hybrid machine: `/sys/fs/cgroup/<controller>/corral/<home key>/job_<id>`.
- `v2`: the unified hierarchy: `/sys/fs/cgroup/corral/<home key>/job_<id>` for a root
  server (as Docker's cgroupfs driver does), or a subtree delegated to a personal server
  (`systemd-run --user --scope -p Delegate=yes corral up`; systemd's `DelegateSubgroup=`).

`<home key>` keeps two servers' job 1 apart. The server finds the layout once at start-up
(`corral.executor.cgroups.placement`) and hands it to each job's supervisor in launch.json;
the supervisor makes the job's cgroup, puts the job in it before it runs, kills what is
left when it ends, and removes it. Standard library only: every supervisor imports this.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

FREEZE_WAIT_S = 1.0
DEVICE_NVIDIA_MAJOR = 195  # /dev/nvidiaN is character device 195:N (nvidiactl is 195:255)


class CgroupError(OSError):
    """A cgroup could not be made, joined or limited."""


@dataclass(frozen=True)
class JobLimits:
    """What the kernel holds a job to."""

    memory_bytes: int | None = None
    max_processes: int | None = None
    deny_devices: tuple[tuple[str, int, int], ...] = ()
    """(type 'c' or 'b', major, minor) the job may not open: the node's GPUs that are not its own."""


@dataclass(frozen=True)
class CgroupUsage:
    """What the kernel counted for the job's cgroup over its life."""

    cpu_time_s: float | None
    peak_memory_mb: float | None


class JobCgroup:
    """One job's cgroup: made, joined, signalled as a whole, read, removed."""

    procs_file: str
    """The file listing the job's processes (what the sampler reads)."""
    holds_memory: bool = False
    """The kernel holds its memory limit and counts its OOM kills (the memory controller is there)."""
    holds_processes: bool = False
    """Its process count is capped (the pids controller is there)."""

    def create(self, limits: JobLimits) -> None:
        raise NotImplementedError

    def attach(self, pid: int, leaf: str | None = None) -> None:
        """Move `pid` (not yet running the job's program) into the cgroup, in every hierarchy.

        `leaf`: into a cgroup of that name nested in the job's, where v2 needs one (a container runtime
        hands controllers down to the container's cgroup, and v2 allows that only from a cgroup without
        processes of its own); v1 has no such rule and ignores it."""
        raise NotImplementedError

    def paths(self) -> list[str]:
        """Every directory that makes up the job's cgroup (one per hierarchy)."""
        raise NotImplementedError

    def freeze(self) -> None:
        raise NotImplementedError

    def thaw(self) -> None:
        raise NotImplementedError

    def oom_kills(self) -> int:
        """How many of the job's processes the kernel killed for going over the memory limit."""
        raise NotImplementedError

    def usage(self) -> CgroupUsage:
        raise NotImplementedError

    def pids(self) -> list[int]:
        """The job's processes, those in cgroups nested in its own included (a container runtime's)."""
        return read_pids(self.procs_file)

    def nested_pids(self, own: tuple[str, ...] = ()) -> list[int]:
        """The processes in the cgroups nested in the job's (a container's), but for those named in `own`
        (the runtime's monitor, conmon): what a signal for the job's program reaches in a container."""
        top = os.path.dirname(self.procs_file)
        pids: list[int] = []
        for path, dirs, _ in os.walk(top):
            if path == top:
                dirs[:] = [d for d in dirs if d not in own]
                continue
            pids.extend(_read_own_pids(os.path.join(path, "cgroup.procs")))
        return pids

    def signal(self, sig: int, pids: list[int] | None = None) -> None:
        """Send `sig` to every process of the job (or those of `pids`), frozen meanwhile so that none forks
        out of the count."""
        self.freeze()
        try:
            for pid in self.pids() if pids is None else pids:
                _kill(pid, sig)
        finally:
            self.thaw()

    def kill(self) -> None:
        """SIGKILL every process of the job (freeze, kill, thaw: a fork bomb cannot outrun it)."""
        self.signal(signal.SIGKILL)

    def kill_until_empty(self, note: Any = None, patience_s: float = 60.0) -> None:
        """Kill the job's processes until none is left; only then may its GPUs go to another job.

        A process stuck in the kernel (uninterruptible I/O on a dead NFS server) cannot die
        at once: this waits for it, saying so through `note` every `patience_s`.
        """
        started = time.monotonic()
        told = started
        delay = 0.002
        while True:
            if not self.pids():
                return
            self.kill()
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
            if note is not None and time.monotonic() - told > patience_s:
                told = time.monotonic()
                note(f"processes of the job are still alive {told - started:.0f} s after the kill: "
                     f"{' '.join(map(str, self.pids()[:10]))}")

    def remove(self) -> None:
        """Remove the (empty) cgroup, and the cgroups a container runtime nested in it; it is gone already
        if a reboot emptied the hierarchy."""
        for path in reversed(self.paths()):
            remove_tree(path)


def remove_tree(path: str) -> None:
    """rmdir an empty cgroup and every cgroup nested in it, deepest first."""
    for inner, _, _ in sorted(os.walk(path), key=lambda entry: -entry[0].count("/")):
        try:
            os.rmdir(inner)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise


def open_job_cgroup(layout: dict[str, Any], job_name: str) -> JobCgroup:
    """The job's cgroup under the server's `layout` (from `placement.find_layout`), not made yet."""
    if layout["version"] == 1:
        from corral.executor.cgroups.v1 import V1JobCgroup

        return V1JobCgroup({c: os.path.join(p, job_name) for c, p in layout["paths"].items()})
    from corral.executor.cgroups.v2 import V2JobCgroup

    return V2JobCgroup(os.path.join(layout["path"], job_name))


def counted_usage(cgroup: JobCgroup, usage: dict[str, float]) -> dict[str, float]:
    """The kernel's count for the whole cgroup (detached processes included) over what wait4 saw."""
    counted = cgroup.usage()
    usage = dict(usage)
    if counted.cpu_time_s is not None:
        usage["cpu_time_s"] = counted.cpu_time_s
    if counted.peak_memory_mb is not None:
        usage["max_rss_mb"] = counted.peak_memory_mb
        usage["memory_source"] = "cgroup"  # type: ignore[assignment]
    return usage


def read_pids(procs_file: str) -> list[int]:
    """The pids in a `cgroup.procs` file and in those of the cgroups nested in it (a container runtime puts
    a container's in one of its own, under the job's); none when the cgroup is gone."""
    top = os.path.dirname(procs_file)
    pids = _read_own_pids(procs_file)
    for path, dirs, _ in os.walk(top):
        if path != top:
            pids.extend(_read_own_pids(os.path.join(path, "cgroup.procs")))
    return pids


def _read_own_pids(procs_file: str) -> list[int]:
    try:
        with open(procs_file, "rb") as f:
            return [int(line) for line in f.read().split()]
    except FileNotFoundError:
        return []


def write_value(path: str, value: str | int) -> None:
    """Write one value to a cgroup control file, naming the file if the kernel refuses it."""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, str(value).encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise CgroupError(exc.errno, f"cannot write {value!r} to {path}: {exc.strerror}") from None


def read_value(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def make_dir(path: str) -> bool:
    """Make a cgroup directory (and its parents); True if it was already there."""
    if os.path.isdir(path):
        return True
    try:
        os.makedirs(path, mode=0o755)
    except FileExistsError:
        return True
    except OSError as exc:
        raise CgroupError(exc.errno, f"cannot make the cgroup {path}: {exc.strerror}") from None
    return False


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
