"""Where a server's jobs' cgroups go, found once at start-up; or why there are none.

`find_layout` reads the machine's mounts and this process's own cgroup and answers with
a `Placement`: the layout each supervisor gets in launch.json (None without cgroups) and
a sentence for people (the start-up line, `corral nodes`, the health check).

- cgroup v2 with the memory controller (pure v2, what systemd machines mostly run):
  a root server uses `/sys/fs/cgroup/corral/<home key>`; a personal server uses a subtree
  delegated to it (`systemd-run --user --scope -p Delegate=yes corral up`, or a unit with
  `Delegate=yes` and `DelegateSubgroup=server`), moving itself into a `server` leaf first
  (v2 lets a cgroup that hands controllers down hold no process itself).
- cgroup v1 controllers (hybrid machines): a root server uses
  `/sys/fs/cgroup/<controller>/corral/<home key>`, as Slurm uses `.../slurm/uid_N`.
- Otherwise (a personal server with no delegation; `[cgroups] mode = "off"`): none. Jobs
  are then followed by process group and session, as before.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from corral.executor.cgroups import CgroupError, make_dir, read_value, write_value

MODES = ("auto", "v1", "v2", "off")
V2_CONTROLLERS = ("memory", "pids", "cpu")
FALLBACK = ("jobs are followed by process group and session: a process that calls setsid escapes cancel and "
            "the memory limit, and the process cap is per user")


@dataclass(frozen=True)
class Placement:
    layout: dict[str, Any] | None
    """What supervisors get (`{"version": 1, "paths": {...}}` or `{"version": 2, "path": ...}`); None: no cgroups."""
    summary: str
    """One line for people: the mode and what it guarantees, or why there are no cgroups."""

    @property
    def mode(self) -> str:
        return f"cgroup v{self.layout['version']}" if self.layout else "none"

    def release(self) -> None:
        """Remove the server's own cgroup directories if no job is left in them (a stopping server's tidy-up)."""
        if self.layout is None:
            return
        for path in self.layout["paths"].values() if self.layout["version"] == 1 else [self.layout["path"]]:
            try:
                os.rmdir(path)
            except OSError:
                pass  # jobs still run there (they outlive the server), or it is gone


def home_key(home: str) -> str:
    """A short name for a home: two servers on one machine never share a job's cgroup."""
    return hashlib.sha256(os.path.realpath(home).encode()).hexdigest()[:12]


def find_layout(home: str, mode: str = "auto", *, mountinfo: str = "/proc/self/mountinfo",
                own: str = "/proc/self/cgroup") -> Placement:
    """Where this server's jobs' cgroups go (making the base directories), or why nowhere.

    Raises:
        CgroupError: `mode` names a version this machine cannot give (with `auto` nothing is raised).
    """
    if mode == "off":
        return Placement(None, f"off ([cgroups] mode = \"off\"): {FALLBACK}")
    v1_mounts, v2_mount = _mounts(mountinfo)
    key = home_key(home)
    reasons = []
    if mode in ("auto", "v2") and v2_mount is not None:
        try:
            placement = _v2(v2_mount, _own_v2_path(own), key, strict=mode == "v2")
            if placement is not None:
                return placement
        except (CgroupError, OSError) as exc:
            if mode == "v2":
                raise CgroupError(exc.errno or 0, f"cgroup v2: {exc.strerror or exc}") from None
            reasons.append(f"cgroup v2: {exc.strerror or exc}")
    if mode in ("auto", "v1") and "memory" in v1_mounts or mode == "v1":
        try:
            return _v1(v1_mounts, key, v2_mount)
        except (CgroupError, OSError) as exc:
            if mode == "v1":
                raise CgroupError(exc.errno or 0, f"cgroup v1: {exc.strerror or exc}") from None
            reasons.append(f"cgroup v1: {exc.strerror or exc}")
    if mode != "auto":
        raise CgroupError(0, f"this machine has no usable cgroup {mode} hierarchy")
    why = "; ".join(reasons) or (
        "this user may not make cgroups (start the server as root, or in a delegated scope: "
        "systemd-run --user --scope -p Delegate=yes corral up)" if os.geteuid() != 0 else
        "no cgroup hierarchy with the memory controller is mounted")
    return Placement(None, f"none ({why}): {FALLBACK}")


def _v2(mount: str, own_path: str | None, key: str, strict: bool) -> Placement | None:
    from corral.executor.cgroups.v2 import prepare_base

    available = set((read_value(os.path.join(mount, "cgroup.controllers")) or "").split())
    if "memory" not in available and not strict:
        return None  # a hybrid machine: its controllers are v1's
    if os.geteuid() == 0:
        parent = os.path.join(mount, "corral")
    elif own_path is not None and os.access(os.path.join(mount, own_path.lstrip("/")), os.W_OK):
        parent = _delegated_parent(os.path.join(mount, own_path.lstrip("/")))
    else:
        return None
    base = os.path.join(parent, key)
    enabled = prepare_base(mount, base, V2_CONTROLLERS)
    devices = _bpf_works(base)
    held = ", ".join([*enabled, *(["devices (BPF)"] if devices else [])])
    # "parent": the base as a container runtime names a cgroup parent (under the hierarchy's root)
    return Placement({"version": 2, "path": base, "devices": devices, "parent": "/" + os.path.relpath(base, mount)},
                     f"cgroup v2 at {base} ({held}): {_guarantees(enabled, devices)}")


def _delegated_parent(own: str) -> str:
    """A delegated subtree's top, once this server sits in a leaf of it (v2: no processes beside children)."""
    if os.path.basename(own) == "server":  # put there by DelegateSubgroup=server, or by us earlier
        return os.path.dirname(own)
    leaf = os.path.join(own, "server")
    make_dir(leaf)
    write_value(os.path.join(leaf, "cgroup.procs"), os.getpid())
    return own


def _v1(mounts: dict[str, str], key: str, v2_mount: str | None = None) -> Placement:
    from corral.executor.cgroups.v1 import CONTROLLERS

    if os.geteuid() != 0:
        raise CgroupError(0, "only root may make cgroups in the v1 hierarchies")
    paths = {}
    for controller in CONTROLLERS:
        if controller in mounts:
            paths[controller] = os.path.join(mounts[controller], "corral", key)
            make_dir(paths[controller])
    held = list(paths)
    # a container runtime makes the job's cgroup in every hierarchy, those corral holds nothing in too
    held_mounts = {mounts[c] for c in paths}
    others = sorted(m for m in {*mounts.values(), v2_mount or ""} if m and m not in held_mounts)
    return Placement({"version": 1, "paths": paths, "devices": "devices" in paths,
                      "parent": f"/corral/{key}", "others": [os.path.join(m, "corral", key) for m in others]},
                     f"cgroup v1 ({', '.join(held)}): {_guarantees(held, 'devices' in paths)}")


def _guarantees(controllers: Any, devices: bool) -> str:
    parts = ["every process a job starts stays in its cgroup and dies with it"]
    if "memory" in controllers:
        parts.append("the kernel holds its memory limit")
    if "pids" in controllers:
        parts.append("its process count is capped per job")
    if devices:
        parts.append("it cannot open GPUs that are not its own")
    return "; ".join(parts)


def _bpf_works(base: str) -> bool:
    """Whether a device filter can be attached here (root, a kernel with cgroup BPF): tried once on a probe."""
    from corral.executor.cgroups.devices import attach_device_filter

    probe = os.path.join(base, "probe")
    try:
        make_dir(probe)
        attach_device_filter(probe, (("c", 195, 254),))
        return True
    except OSError:
        return False
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _mounts(mountinfo: str) -> tuple[dict[str, str], str | None]:
    """{v1 controller: its mount point}, and the cgroup2 mount point (None if none)."""
    v1: dict[str, str] = {}
    v2 = None
    try:
        with open(mountinfo) as f:
            lines = f.read().splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        fields = line.split(" ")
        if "-" not in fields:
            continue
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""
        point = fields[4].replace("\\040", " ")
        if fstype == "cgroup2" and v2 is None:
            v2 = point
        elif fstype == "cgroup" and fields[3] == "/":  # the hierarchy's root, not a bind mount of a subtree
            for option in options.split(","):
                v1.setdefault(option, point)
    return v1, v2


def _own_v2_path(own: str) -> str | None:
    try:
        with open(own) as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None
