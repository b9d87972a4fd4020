"""Root Podman's ulimits, kept within the hard limits its runtime inherits.

Rootful Podman gives each container RLIMIT_NOFILE 1048576:1048576 and, through containers.conf's built-in
default, RLIMIT_NPROC pid_max:pid_max (or what `default_ulimits` says, nofile and nproc at 1048576 where it
names neither), and runc sets them as root. Root
may raise a hard limit only with CAP_SYS_RESOURCE (in the initial user namespace): a server without it (in
a container, under a unit with a capability bounding set) whose hard limits are lower would see every
container job end 126 with runc's `error setting rlimit`. There, and only there, corral passes `--ulimit`
for each limit Podman would set, lowered to the hard limit; `--ulimit host` would not do (Podman 4 still
sets nofile and nproc to 1048576 with it). One `--ulimit` makes Podman drop containers.conf's whole list,
so every limit it names is passed, so lowered where it must be.

The server works this out once (`container_ulimits`), from its own limits, which its supervisors and
their runtimes inherit.
"""

from __future__ import annotations

import glob
import os
import resource
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence

PODMAN_DEFAULT = 1048576
"""What Podman gives nofile (and nproc, once any --ulimit is passed) unless told otherwise."""
UNLIMITED = resource.RLIM_INFINITY
_RESOURCES = {"as": "RLIMIT_AS", "core": "RLIMIT_CORE", "cpu": "RLIMIT_CPU", "data": "RLIMIT_DATA",
              "fsize": "RLIMIT_FSIZE", "locks": "RLIMIT_LOCKS", "memlock": "RLIMIT_MEMLOCK",
              "msgqueue": "RLIMIT_MSGQUEUE", "nice": "RLIMIT_NICE", "nofile": "RLIMIT_NOFILE",
              "nproc": "RLIMIT_NPROC", "rss": "RLIMIT_RSS", "rtprio": "RLIMIT_RTPRIO", "rttime": "RLIMIT_RTTIME",
              "sigpending": "RLIMIT_SIGPENDING", "stack": "RLIMIT_STACK"}
_PROBE = """
import resource, sys
for limit in (resource.RLIMIT_NPROC, resource.RLIMIT_MEMLOCK, resource.RLIMIT_NOFILE):
    soft, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(limit, (soft, hard + 1))  # nofile may be at fs.nr_open: the others first
        except (OSError, ValueError):
            continue
        sys.exit(0)
sys.exit(1)
"""


def podman_ulimits(conf: Mapping[str, object], pid_max: int, nproc_hard: int) -> dict[str, tuple[int, int]]:
    """What rootful Podman sets, by name (`nofile`: (soft, hard), UNLIMITED for -1), given containers.conf's
    merged settings and the hard nproc limit it starts with."""
    table = conf.get("containers")
    configured = table.get("default_ulimits") if isinstance(table, dict) else None
    if configured is None:
        # containers.conf's built-in default: nproc at pid_max, else 1048576, the first Podman may give itself
        # (it tries, at its start); where it may give itself neither, none, and Podman then sets no limit at all
        configured = next(([f"nproc={value}:{value}"] for value in (pid_max, PODMAN_DEFAULT)
                           if nproc_hard == UNLIMITED or value <= nproc_hard), [])
    if not configured:
        return {}  # an empty list: Podman sets none, the container inherits the runtime's
    wanted = {}
    for item in configured:
        name, _, values = str(item).partition("=")
        soft, _, hard = values.partition(":")
        try:
            wanted[name.strip()] = (_number(soft), _number(hard or soft))
        except ValueError:
            continue  # Podman itself refuses the list then, with its own message
    for name in ("nofile", "nproc"):  # Podman's own for the two it always sets
        wanted.setdefault(name, (PODMAN_DEFAULT, PODMAN_DEFAULT))
    return wanted


def clamped(wanted: Mapping[str, tuple[int, int]], hard_limits: Mapping[str, int]) -> tuple[str, ...]:
    """`--ulimit` values for every wanted limit, lowered to the hard limit; () when all of them fit."""
    if all(_fits(limits, hard_limits.get(name, UNLIMITED)) for name, limits in wanted.items()):
        return ()
    out = []
    for name, (soft, hard) in sorted(wanted.items()):
        most = hard_limits.get(name, UNLIMITED)
        hard = _lower(hard, most)
        out.append(f"{name}={_text(_lower(soft, hard))}:{_text(hard)}")
    return tuple(out)


def container_ulimits(server_env: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """The `--ulimit` values root Podman needs here (none where its own fit or may be raised), and a note
    for the server's log saying why and what an admin may set instead."""
    conf = containers_conf(server_env.get("CONTAINERS_CONF"))
    pid_max = _pid_max()
    limits = {name: resource.getrlimit(getattr(resource, constant))[1] for name, constant in _RESOURCES.items()
              if hasattr(resource, constant)}
    wanted = podman_ulimits(conf, pid_max, limits.get("nproc", UNLIMITED))
    # Podman lowers its own nproc to pid_max where it may: its runtime has no more than that
    limits["nproc"] = _lower(limits.get("nproc", UNLIMITED), pid_max)
    flags = clamped(wanted, limits)
    if not flags or can_raise_hard_limits():
        return (), None
    over = ", ".join(f"{name} {_text(hard)} (hard limit {_text(limits.get(name, UNLIMITED))})"
                     for name, (_, hard) in sorted(wanted.items()) if not _fits((0, hard), limits.get(name, UNLIMITED)))
    return flags, (f"Podman's ulimits for containers exceed this server's hard limits, which it may not raise "
                   f"(no CAP_SYS_RESOURCE): {over}. Container jobs get --ulimit {' '.join(flags)}; to choose "
                   "others, set default_ulimits in containers.conf within these limits, or raise the hard limits "
                   "(`ulimit -H`, systemd's LimitNOFILE=) of the corral server.")


def containers_conf(path: str | None) -> dict[str, object]:
    """containers.conf as Podman reads it: CONTAINERS_CONF alone where it is set, else the system's files,
    a later one's settings over an earlier one's; {} where none can be read."""
    paths = [path] if path else ["/usr/share/containers/containers.conf", "/etc/containers/containers.conf",
                                 *sorted(glob.glob("/etc/containers/containers.conf.d/*.conf"))]
    merged: dict[str, object] = {}
    for each in paths:
        try:
            with open(each, "rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for table, values in data.items():
            if isinstance(values, dict) and isinstance(merged.get(table), dict):
                merged[table] = {**merged[table], **values}  # type: ignore[dict-item]
            else:
                merged[table] = values
    return merged


def can_raise_hard_limits(python: Sequence[str] = (sys.executable,)) -> bool:
    """Whether a process of this server's may raise a hard limit (CAP_SYS_RESOURCE where it counts), asked
    of the kernel by a short-lived child trying."""
    try:
        done = subprocess.run([*python, "-c", _PROBE], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return PODMAN_DEFAULT


def _number(text: str) -> int:
    value = int(text.strip())
    return UNLIMITED if value < 0 else value


def _fits(limits: tuple[int, int], most: int) -> bool:
    return most == UNLIMITED or all(value != UNLIMITED and value <= most for value in limits)


def _lower(value: int, most: int) -> int:
    if most == UNLIMITED:
        return value
    return most if value == UNLIMITED else min(value, most)


def _text(value: int) -> str:
    return "-1" if value == UNLIMITED else str(value)
