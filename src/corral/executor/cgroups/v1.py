"""cgroup v1: one directory per controller (memory, pids, devices, freezer, cpuacct).

What each holds for a job: `memory` the limit (and `memsw`, so swap cannot stretch it) and
the OOM-kill count; `pids` the process cap; `devices` the GPUs it may not open; `freezer`
a job that cannot fork while it is being killed; `cpuacct` its CPU time.
"""

from __future__ import annotations

import os
import time

from corral.executor.cgroups import (
    FREEZE_WAIT_S, CgroupError, CgroupUsage, JobCgroup, JobLimits, make_dir, read_value, write_value,
)

CONTROLLERS = ("freezer", "memory", "pids", "devices", "cpuacct")
"""The controllers a job is held in, where mounted; the first present lists the job's processes."""


class V1JobCgroup(JobCgroup):
    def __init__(self, paths: dict[str, str]) -> None:
        """`paths`: the job's directory in each controller's hierarchy."""
        if not paths:
            raise CgroupError(0, "no cgroup v1 controller to hold the job in")
        self._paths = paths
        self.holds_memory = "memory" in paths
        self.holds_processes = "pids" in paths
        self.procs_file = os.path.join(paths[next(c for c in CONTROLLERS if c in paths)], "cgroup.procs")
        self._oom_events = -1  # the eventfd the kernel signals when the job's memory limit is hit; -1: none
        self._oom_seen = 0
        self._own_before = 0

    def paths(self) -> list[str]:
        return list(self._paths.values())

    def _file(self, controller: str, name: str) -> str | None:
        path = self._paths.get(controller)
        return os.path.join(path, name) if path is not None else None

    def create(self, limits: JobLimits) -> None:
        reused = [make_dir(path) for path in self._paths.values()]
        if any(reused) and self.pids():
            self.kill_until_empty()  # a dead supervisor's job of this id in this home: never two at once
        memory = self._file("memory", "memory.limit_in_bytes")
        if memory is not None:
            memsw = self._file("memory", "memory.memsw.limit_in_bytes")
            if memsw is not None and not os.path.exists(memsw):
                memsw = None  # a kernel without swap accounting
            # memsw may never be below the limit: lift it first, lower it last
            if memsw is not None:
                write_value(memsw, -1)
            write_value(memory, limits.memory_bytes or -1)
            if memsw is not None and limits.memory_bytes:
                write_value(memsw, limits.memory_bytes)  # no swap beyond the limit, as Slurm's AllowedSwapSpace=0
            _reset(self._file("memory", "memory.max_usage_in_bytes"))
            self._watch_oom()
        pids_max = self._file("pids", "pids.max")
        if pids_max is not None:
            write_value(pids_max, limits.max_processes or "max")
        if "devices" in self._paths:
            if any(reused):
                write_value(self._file("devices", "devices.allow"), "a")  # type: ignore[arg-type]
            for kind, major, minor in limits.deny_devices:
                write_value(self._file("devices", "devices.deny"), f"{kind} {major}:{minor} rwm")  # type: ignore[arg-type]
        _reset(self._file("cpuacct", "cpuacct.usage"))

    def attach(self, pid: int, leaf: str | None = None) -> None:
        for path in self._paths.values():
            write_value(os.path.join(path, "cgroup.procs"), pid)

    def freeze(self) -> None:
        state = self._file("freezer", "freezer.state")
        if state is None:
            return
        try:
            write_value(state, "FROZEN")
        except CgroupError:
            return  # gone (the job ended and was removed): nothing to hold
        deadline = time.monotonic() + FREEZE_WAIT_S
        while read_value(state) == "FREEZING" and time.monotonic() < deadline:
            time.sleep(0.001)

    def thaw(self) -> None:
        state = self._file("freezer", "freezer.state")
        if state is not None:
            try:
                write_value(state, "THAWED")
            except CgroupError:
                pass

    def _watch_oom(self) -> None:
        """Ask the kernel to count the times the job's limit sends it out of memory.

        Why: v1's `oom_kill` count is kept in the cgroup of the process killed, and a container
        runtime (Podman, Docker) runs the container in a cgroup nested in the job's, which it removes
        as the container ends: the count would go with it. The event is the job's cgroup's own.
        """
        control = self._file("memory", "memory.oom_control")
        events = self._file("memory", "cgroup.event_control")
        if control is None or events is None:
            return
        try:
            efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except (AttributeError, OSError):
            return
        try:
            cfd = os.open(control, os.O_RDONLY | os.O_CLOEXEC)
            try:
                write_value(events, f"{efd} {cfd}")
            finally:
                os.close(cfd)
        except OSError:
            os.close(efd)
            return
        self._oom_events = efd
        self._own_before = self._own_oom_kills()

    def oom_kills(self) -> int:
        if self._oom_events >= 0:
            try:
                self._oom_seen += os.eventfd_read(self._oom_events)
            except (BlockingIOError, OSError):
                pass
        # the job's own count, or the events where the kills were counted in a nested cgroup since gone
        return self._own_before + max(self._own_oom_kills() - self._own_before, self._oom_seen)

    def _own_oom_kills(self) -> int:
        control = self._file("memory", "memory.oom_control")
        text = read_value(control) if control is not None else None
        for line in (text or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def usage(self) -> CgroupUsage:
        cpu = _number(self._file("cpuacct", "cpuacct.usage"))
        peak = _number(self._file("memory", "memory.max_usage_in_bytes"))
        return CgroupUsage(cpu_time_s=round(cpu / 1e9, 3) if cpu is not None else None,
                           peak_memory_mb=round(peak / (1 << 20), 1) if peak is not None else None)


def _number(path: str | None) -> int | None:
    value = read_value(path) if path is not None else None
    return int(value) if value and value.isdigit() else None


def _reset(path: str | None) -> None:
    if path is not None:
        try:
            write_value(path, 0)
        except CgroupError:
            pass  # a counter that cannot be reset reads high on a requeued job, nothing worse
