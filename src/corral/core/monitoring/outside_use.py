"""GPUs in use outside corral: a compute process NVML lists on a GPU that belongs to no corral job
(a notebook, a script run by hand), with its pid, its user, the GPU memory it holds and since when.

The monitor finds them each tick (`corral.monitor.outside`); a GPU stays marked until a sample no longer
shows the process. What a node does about them is its `[node] outside_processes` setting:

- `avoid` (the default): no job is placed on such a GPU; a job only such GPUs could run waits with
  ReqNodeNotAvail naming the GPU, the pid and the user, and starts once the process is gone;
- `ignore`: they are shown, and jobs are placed as if they were not there;
- `share`: no whole-GPU job is placed on such a GPU, but sharing jobs (`corral.core.scheduling.sharing`) may use what
  its memory has left: the outside processes' memory counts as used (all of it where NVML cannot say).

What the scheduler is handed is `avoided_by_node`: the GPU indexes of each node to leave alone, the same
shape as the drained GPUs (`corral.core.scheduling.drains`), so the policy stays a function of data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from corral.core.units.iso_times import iso_utc
from corral.errors import InvalidRequest

AVOID, IGNORE, SHARE = "avoid", "ignore", "share"
MODES = (AVOID, IGNORE, SHARE)
SETTING = "node.outside_processes"


@dataclass(frozen=True, slots=True)
class OutsideProcess:
    gpu: int
    pid: int
    user: str
    """The owner of /proc/<pid> (a uid where it has no name)."""
    mem_mb: float | None
    """The GPU memory it holds; None where NVML cannot say per process."""
    since: float
    """When a sample first showed it (epoch seconds)."""

    def to_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "user": self.user,
                "mem_mb": None if self.mem_mb is None else round(self.mem_mb), "since": iso_utc(self.since)}

    def describe(self) -> str:
        """`alice (pid 4242, 2048 MB)`: who holds it, as a reason names them."""
        memory = "" if self.mem_mb is None else f", {round(self.mem_mb)} MB"
        return f"{self.user} (pid {self.pid}{memory})"


def check_mode(value: object, where: str = "config.toml") -> str:
    """The `[node] outside_processes` setting.

    Raises:
        InvalidRequest: anything but "avoid", "ignore" or "share".
    """
    if value in MODES:
        return str(value)
    raise InvalidRequest(SETTING, f"is {value!r} in {where}", f"use one of {', '.join(MODES)}")


def carry_since(previous: Iterable[OutsideProcess], seen: Iterable[OutsideProcess]) -> tuple[OutsideProcess, ...]:
    """This sample's outside processes, each keeping the `since` of the sample that first showed it
    (the same pid of the same user on the same GPU); one no longer seen is dropped."""
    first = {(p.gpu, p.pid, p.user): p.since for p in previous}
    return tuple(sorted((replace(p, since=first.get((p.gpu, p.pid, p.user), p.since)) for p in seen),
                        key=lambda p: (p.gpu, p.since, p.pid)))


def by_gpu(processes: Iterable[OutsideProcess]) -> dict[int, list[OutsideProcess]]:
    out: dict[int, list[OutsideProcess]] = {}
    for process in processes:
        out.setdefault(process.gpu, []).append(process)
    return out


def avoided_by_node(outside: Mapping[str, Iterable[OutsideProcess]], modes: Mapping[str, str]) -> dict[str, frozenset[int]]:
    """What the scheduler reads: each node's GPUs in use outside corral, where its mode is `avoid`."""
    out = {}
    for node, processes in outside.items():
        gpus = frozenset(p.gpu for p in processes)
        if gpus and modes.get(node, AVOID) == AVOID:
            out[node] = gpus
    return out


def shared_by_node(outside: Mapping[str, Iterable[OutsideProcess]], modes: Mapping[str, str],
                   gpu_mem: Mapping[str, Mapping[int, int]]) -> dict[str, dict[int, int]]:
    """Where a node's mode is `share`: each GPU in use outside corral and the megabytes its outside processes
    hold (the GPU's whole memory where NVML gives no figure for one of them)."""
    out: dict[str, dict[int, int]] = {}
    for node, processes in outside.items():
        if modes.get(node, AVOID) != SHARE:
            continue
        for gpu, held in by_gpu(processes).items():
            whole = gpu_mem.get(node, {}).get(gpu, 0)
            mb = whole if any(p.mem_mb is None for p in held) else min(whole, round(sum(p.mem_mb or 0 for p in held)))
            out.setdefault(node, {})[gpu] = mb
    return out


def unavailable(drained: Mapping[str, frozenset[int]], avoided: Mapping[str, frozenset[int]]) -> dict[str, frozenset[int]]:
    """The GPUs no new job is given: drained ones and avoided ones, per node."""
    out = dict(drained)
    for node, gpus in avoided.items():
        out[node] = out.get(node, frozenset()) | gpus
    return out


def note(outside: Mapping[str, Iterable[OutsideProcess]], modes: Mapping[str, str]) -> str:
    """What a job waiting for avoided GPUs shows after ReqNodeNotAvail: which, and whose process holds them."""
    parts = []
    for node, processes in outside.items():
        if modes.get(node, AVOID) == IGNORE:
            continue
        for gpu, held in sorted(by_gpu(processes).items()):
            parts.append(f"{node} GPU {gpu} in use outside corral by {', '.join(p.describe() for p in held)}")
    return "; ".join(parts)
