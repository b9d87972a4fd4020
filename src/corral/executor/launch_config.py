"""launch.json: what the server tells a job's supervisor to run, as one frozen, versioned value.

The server writes it (`corral.executor.launch.spawn_supervisor`) and the supervisor reads
it once, at its start; the server reads it again only to recover a job whose supervisor
died. Jobs outlive the server, so a newer server may meet a file an older one wrote: a
file without `version` is today's version 1 (the shape before the field existed), and a
version this code does not know is refused with `LaunchConfigError` rather than guessed at.

Only the standard library: the supervisor imports this, and it starts for every job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LAUNCH_VERSION = 1


class LaunchConfigError(ValueError):
    """launch.json cannot be read as a `LaunchConfig`: an unknown version, or a field missing or wrong."""


@dataclass(frozen=True)
class LaunchConfig:
    """One job's launch, as its supervisor needs it. The field names are launch.json's keys."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    stdout: str
    stderr: str  # the same path as stdout when the job has no separate stderr
    job_ref: str | None = None  # "ID" or "ARRAY_TASK", for the stop lines in its stderr
    node: str | None = None  # the node its stop lines name, as Slurm's do
    time_limit_s: float | None = None
    mem_limit_mb: int | None = None
    kill_grace_s: float = 10.0
    max_log_mb: int | None = None
    log_reserve_mb: int | None = None
    log_quota: Mapping[str, Any] | None = None  # {"ledger", "user", "quota_mb"}: its owner's user_log_quota_mb
    append_logs: bool = False  # a requeued job appends (the earlier runs' output is part of its story), as does --open-mode=append
    run_as: Mapping[str, Any] | None = None  # `corral.executor.users.RunAs.to_dict()`; None: as the supervisor
    umask: int | None = None
    max_processes: int | None = None
    cgroup: Mapping[str, Any] | None = None  # {"layout", "name", "deny_devices"}; None without cgroups
    warn_signal: int | None = None  # --signal=SIG@T: SIG, sent T = warn_before_s before the time limit
    warn_before_s: float = 0.0
    warn_batch: bool = False  # the batch shell alone gets it (B:, or a command, its own batch shell); else the steps
    condor_log: Mapping[str, Any] | None = None  # {"path", "cluster", "proc", "submit_time"}: HTCondor's job event log
    interactive: Mapping[str, Any] | None = None  # {"socket", "mode": "pty"|"stream", "grace_s", "connect_timeout_s"}: srun/salloc's
    container: Mapping[str, Any] | None = None  # `corral.executor.containers.ContainerLaunch.to_json()`: the image it runs in
    lock_fd: int | None = None  # the job lock's descriptor the supervisor inherits (set by spawn_supervisor)
    version: int = field(default=LAUNCH_VERSION)

    def to_json(self) -> dict[str, Any]:
        """The JSON object launch.json holds."""
        data = dataclasses.asdict(self)
        data["argv"] = list(self.argv)
        data["env"] = dict(self.env)
        return data

    @classmethod
    def from_json(cls, data: object) -> LaunchConfig:
        """Read launch.json's object, of this version or of the version-less shape that came before.

        Raises:
            LaunchConfigError: a version this code does not know, a required field missing, or
                (in a versioned file) a field it does not know, each named.
        """
        if not isinstance(data, Mapping):
            raise LaunchConfigError(f"launch.json must hold a JSON object, not {type(data).__name__}")
        version = data.get("version", LAUNCH_VERSION)
        if version != LAUNCH_VERSION:
            raise LaunchConfigError(
                f"launch.json has version {version!r}, and this supervisor reads only version {LAUNCH_VERSION}: "
                "it was written by another corral; restart the job under the server that runs this one"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown and "version" in data:
            raise LaunchConfigError(f"launch.json version {version} has unknown fields {', '.join(unknown)}")
        missing = [name for name in ("argv", "env", "cwd", "stdout", "stderr") if name not in data]
        if missing:
            raise LaunchConfigError(f"launch.json lacks the field(s) {', '.join(missing)}")
        # a version-less file (written before the field existed) is read for what it holds; its None
        # values stand for "not set", as they always did
        values = {k: v for k, v in data.items() if k in known and not (v is None and _has_default(k))}
        if not isinstance(values["argv"], list) or not values["argv"]:
            raise LaunchConfigError("launch.json's argv must be a non-empty list of strings")
        if not isinstance(values["env"], Mapping):
            raise LaunchConfigError("launch.json's env must be an object of strings")
        values["argv"] = tuple(values["argv"])
        values["env"] = dict(values["env"])
        return cls(**values)


def _has_default(name: str) -> bool:
    return name not in ("argv", "env", "cwd", "stdout", "stderr")
