"""cgroup v2: one directory in the unified hierarchy holds the whole job.

`memory.max` (with `memory.swap.max` 0 and `memory.oom.group`, so an OOM kill takes the
whole job, not a random worker), `pids.max`, `cpu.stat` for CPU time, `memory.peak` for
the peak, `cgroup.freeze` and `cgroup.kill`; devices through a BPF program
(`corral.executor.cgroups.devices`), v2 having no devices files.
"""

from __future__ import annotations

import os
import time

from corral.executor.cgroups import (
    FREEZE_WAIT_S, CgroupError, CgroupUsage, JobCgroup, JobLimits, make_dir, read_value, write_value,
)


class V2JobCgroup(JobCgroup):
    def __init__(self, path: str) -> None:
        self.path = path
        self.procs_file = os.path.join(path, "cgroup.procs")

    def paths(self) -> list[str]:
        return [self.path]

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def create(self, limits: JobLimits) -> None:
        if make_dir(self.path) and self.pids():
            self.kill_until_empty()  # a dead supervisor's job of this id in this home: never two at once
        controllers = set((read_value(self._file("cgroup.controllers")) or "").split())
        self.holds_memory, self.holds_processes = "memory" in controllers, "pids" in controllers
        if "memory" in controllers:
            write_value(self._file("memory.max"), limits.memory_bytes or "max")
            if os.path.exists(self._file("memory.swap.max")):
                write_value(self._file("memory.swap.max"), 0 if limits.memory_bytes else "max")
            write_value(self._file("memory.oom.group"), 1)
        if "pids" in controllers:
            write_value(self._file("pids.max"), limits.max_processes or "max")
        if limits.deny_devices:
            from corral.executor.cgroups.devices import attach_device_filter

            attach_device_filter(self.path, limits.deny_devices)

    def attach(self, pid: int, leaf: str | None = None) -> None:
        target = self.path if leaf is None else os.path.join(self.path, leaf)
        if leaf is not None:
            make_dir(target)
        write_value(os.path.join(target, "cgroup.procs"), pid)

    def freeze(self) -> None:
        try:
            write_value(self._file("cgroup.freeze"), 1)
        except CgroupError:
            return
        deadline = time.monotonic() + FREEZE_WAIT_S
        while time.monotonic() < deadline and _field(read_value(self._file("cgroup.events")), "frozen") == 0:
            time.sleep(0.001)

    def thaw(self) -> None:
        try:
            write_value(self._file("cgroup.freeze"), 0)
        except CgroupError:
            pass

    def kill(self) -> None:
        kill_file = self._file("cgroup.kill")  # Linux 5.14: the kernel kills them all at once
        if os.path.exists(kill_file):
            try:
                write_value(kill_file, 1)
                return
            except CgroupError:
                pass
        super().kill()

    def oom_kills(self) -> int:
        return _field(read_value(self._file("memory.events")), "oom_kill") or 0

    def usage(self) -> CgroupUsage:
        cpu = _field(read_value(self._file("cpu.stat")), "usage_usec")
        peak = read_value(self._file("memory.peak"))  # Linux 5.19
        return CgroupUsage(cpu_time_s=round(cpu / 1e6, 3) if cpu is not None else None,
                           peak_memory_mb=round(int(peak) / (1 << 20), 1) if peak and peak.isdigit() else None)


def _field(text: str | None, key: str) -> int | None:
    """A value from a flat-keyed file (`cpu.stat`, `memory.events`, `cgroup.events`)."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


def enable_controllers(path: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """Enable what it can of `wanted` for the children of `path`; returns what is enabled."""
    available = set((read_value(os.path.join(path, "cgroup.controllers")) or "").split())
    enabled = set((read_value(os.path.join(path, "cgroup.subtree_control")) or "").split())
    missing = [c for c in wanted if c in available and c not in enabled]
    if missing:
        write_value(os.path.join(path, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing))
    return tuple(c for c in wanted if c in available)


def prepare_base(mount: str, base: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """Make `base` (under the hierarchy's `mount`) with `wanted` controllers enabled down to its children.

    Every directory between them must hold no process (cgroup v2's rule for one that
    hands controllers down): true of the root, and of corral's own directories.
    """
    make_dir(base)
    relative = os.path.relpath(base, mount).split(os.sep)
    current, enabled = mount, tuple(wanted)
    for part in ["", *relative]:
        current = os.path.join(current, part) if part else current
        enabled = enable_controllers(current, enabled)
    return enabled
