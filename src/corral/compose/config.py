"""The server's settings: what `corral up` takes (`ServerOptions`) and `<home>/config.toml` merged under it."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from corral.api.identity import AuthSettings
from corral.core.access.identity import Account, parse_accounts
from corral.core.access.sessions import MAX_SESSION_HOURS
from corral.core.jobspec.features import FEATURE_PATTERN
from corral.core.jobspec.spec import DEFAULT_MAX_SCRIPT_MB, MAX_SCRIPT_MB_RANGE
from corral.core.monitoring.outside_use import check_mode
from corral.core.scheduling.resources import DeclaredInventory
from corral.core.scheduling.schedconfig import SchedulerConfig, parse_scheduler_config
from corral.core.scheduling.sharing import SHARING_KEYS, SharingSettings, sharing_settings
from corral.core.scheduling.topology import topology_settings as gpu_topology_settings
from corral.errors import InvalidRequest
from corral.home import CONFIG_FILE, HomeLayout

CGROUP_MODES = ("auto", "v1", "v2", "off")


@dataclass(frozen=True)
class ServerOptions:
    home: str
    host: str = "127.0.0.1"
    port: int = 8765
    db: str | None = None
    kill_grace_s: float = 10.0
    interactive_grace_s: float = 30.0  # an srun/salloc job whose client is gone this long is ended
    max_log_mb: int | None = 20_480  # a job whose logs pass this is killed (FAILED): they would fill the disk
    user_log_quota_mb: int | None = 51_200  # each user's running jobs' logs together (corral.executor.log_quota)
    max_script_mb: int = DEFAULT_MAX_SCRIPT_MB  # the largest batch script taken (Slurm's max_script_size)
    log_reserve_mb: int | None = 256  # logs stop growing here: the last of their disk is the server's and every job's
    inventory: DeclaredInventory = field(default_factory=DeclaredInventory)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    backend: str = "local"
    slurm_partition: str | None = None
    slurm_account: str | None = None
    sample_interval_s: float = 10.0
    sample_retention_days: float = 90.0
    smtp: dict[str, Any] = field(default_factory=dict)  # [smtp]: where email alerts go out (TOML values, checked)
    smtp_section: bool = False  # config.toml has [smtp]: only then do jobs' --mail-type mails go out
    max_job_processes: int | None = 4096  # per job (its cgroup's pids.max; else RLIMIT_NPROC of its owner)
    cgroups: str = "auto"  # [cgroups] mode: auto, v1, v2 or off (corral.executor.cgroups.placement)
    admins: frozenset[str] = frozenset()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    auth: AuthSettings = field(default_factory=AuthSettings)
    slurm_commands: str | None = None  # corral's Slurm commands (`corral slurm-path`), first on local jobs' PATH
    container_runtime: str | None = None  # [containers] runtime: podman, apptainer, singularity, docker or a path
    artifact_dir: str | None = None  # [tracking] artifact_dir: the artifact store (default <home>/artifacts)
    max_artifact_mb: int | None = 10_240  # [tracking]: the largest file one artifact may be
    user_artifact_quota_mb: int | None = 102_400  # [tracking]: what one user's runs' uploaded artifacts may hold
    outside_processes: str = "avoid"  # [node]: a GPU a process outside corral uses (corral.core.monitoring.outside_use)
    sharing: SharingSettings = field(default_factory=SharingSettings)  # [node]: jobs sharing a GPU (core.scheduling.sharing)


def load_config(options: ServerOptions, explicit: set[str]) -> ServerOptions:
    """Merge `<home>/config.toml` under the command line (flags named in `explicit` win).

    Raises:
        InvalidRequest: an unreadable file or an unknown key, named.
    """
    path = HomeLayout(options.home).config
    try:
        with open(path, "rb") as f:
            config = tomllib.load(f)
    except FileNotFoundError:
        return options
    except tomllib.TOMLDecodeError as exc:
        raise InvalidRequest(CONFIG_FILE, f"{path} is not valid TOML: {exc}") from None
    server = config.pop("server", {})
    node = config.pop("node", {})
    monitor = config.pop("monitor", {})
    smtp_section = "smtp" in config
    smtp = config.pop("smtp", {})
    auth = config.pop("auth", {})
    cgroups = config.pop("cgroups", {})
    containers = config.pop("containers", {})
    tracking = config.pop("tracking", {})
    accounts = parse_accounts(config.pop("accounts", {}), path)
    scheduler = parse_scheduler_config(
        config.pop("scheduler", {}), config.pop("partitions", {}), config.pop("qos", {}), path
    )
    if config:
        raise InvalidRequest(
            CONFIG_FILE, f"unknown section [{next(iter(config))}] in {path}",
            "known: [server], [node], [monitor], [smtp], [auth], [cgroups], [containers], [tracking], [accounts.NAME], [scheduler], "
            "[partitions.NAME], [qos.NAME]",
        )
    # Each key's TOML type; a value is checked against it before it is taken (so `updates` holds TOML values).
    server_keys: dict[str, type | tuple[type, ...]] = {"host": str, "port": int, "db": str, "kill_grace_s": (int, float), "max_log_mb": int,
                   "interactive_grace_s": (int, float), "max_job_processes": int, "user_log_quota_mb": int, "log_reserve_mb": int,
                   "max_script_mb": int}
    node_keys: dict[str, type | tuple[type, ...]] = {"gpus": int, "gpu_type": str, "gpu_mem": str, "cpus": int, "mem": str,
                                                     "features": list, "outside_processes": str, "nvlink": list,
                                                     "gpu_features": dict, "shards_per_gpu": int, "gpu_share_over_budget": str,
                                                     "gpu_share_grace_s": (int, float)}
    monitor_keys: dict[str, type | tuple[type, ...]] = {"sample_interval_s": (int, float), "sample_retention_days": (int, float)}
    smtp_keys: dict[str, type | tuple[type, ...]] = {"host": str, "port": int, "sender": str, "username": str, "password": str, "starttls": bool,
                 "timeout_s": (int, float), "domain": str}
    auth_keys: dict[str, type | tuple[type, ...]] = {"admins": list, "trust_local": bool, "rate_per_s": (int, float), "burst": (int, float), "host_names": list,
                 "session_hours": (int, float), "unauthenticated_per_s": (int, float),
                 "unauthenticated_burst": (int, float), "max_connections_per_user": int, "max_streams_per_user": int}
    cgroups_keys: dict[str, type | tuple[type, ...]] = {"mode": str}
    containers_keys: dict[str, type | tuple[type, ...]] = {"runtime": str}
    tracking_keys: dict[str, type | tuple[type, ...]] = {"artifact_dir": str, "max_artifact_mb": int,
                                                         "user_artifact_quota_mb": int}
    updates: dict[str, Any] = {}
    for section, table, keys in (("server", server, server_keys), ("node", node, node_keys),
                                 ("monitor", monitor, monitor_keys), ("smtp", smtp, smtp_keys),
                                 ("auth", auth, auth_keys), ("cgroups", cgroups, cgroups_keys),
                                 ("containers", containers, containers_keys), ("tracking", tracking, tracking_keys)):
        for key, value in table.items():
            if key not in keys:
                raise InvalidRequest(f"{section}.{key}", f"unknown key in {path}", f"known: {', '.join(keys)}")
            if not isinstance(value, keys[key]) or (isinstance(value, bool) and keys[key] is not bool):
                raise InvalidRequest(f"{section}.{key}", f"has the wrong type in {path}: {value!r}")
            if section in ("smtp", "auth"):
                continue
            if section == "cgroups":
                key = "cgroups"
            if section == "containers":
                key = "container_runtime"
            if key not in explicit:
                updates[key] = value
    if updates.get("cgroups", "auto") not in CGROUP_MODES:
        raise InvalidRequest("cgroups.mode", f"is {updates['cgroups']!r} in {path}", f"use one of {', '.join(CGROUP_MODES)}")
    if float(smtp.get("timeout_s", 1)) <= 0 or not 0 < int(smtp.get("port", 25)) < 65536:
        raise InvalidRequest("smtp.timeout_s" if float(smtp.get("timeout_s", 1)) <= 0 else "smtp.port",
                             f"is out of range in {path}")
    for key in ("admins", "host_names"):
        if not all(isinstance(v, str) and v for v in auth.get(key, [])):
            raise InvalidRequest(f"auth.{key}", f"must be a list of names in {path}", 'e.g. admins = ["alice"]')
    if float(auth.get("rate_per_s", 0)) < 0 or float(auth.get("burst", 1)) < 1:
        raise InvalidRequest("auth.rate_per_s" if float(auth.get("rate_per_s", 0)) < 0 else "auth.burst",
                             f"is out of range in {path}", "rate_per_s >= 0 (0: no limit), burst >= 1")
    if float(auth.get("unauthenticated_per_s", 0)) < 0 or float(auth.get("unauthenticated_burst", 1)) < 1:
        raise InvalidRequest("auth.unauthenticated_per_s" if float(auth.get("unauthenticated_per_s", 0)) < 0
                             else "auth.unauthenticated_burst", f"is out of range in {path}",
                             "unauthenticated_per_s >= 0 (0: no limit), unauthenticated_burst >= 1")
    for key in ("max_connections_per_user", "max_streams_per_user"):
        if int(auth.get(key, 0)) < 0:
            raise InvalidRequest(f"auth.{key}", f"must not be negative in {path}", "0 means no limit, e.g. 256")
    if not 0 < float(auth.get("session_hours", 1)) <= MAX_SESSION_HOURS:
        raise InvalidRequest("auth.session_hours", f"is out of range in {path}",
                             f"a dashboard login lasts more than 0 and at most {MAX_SESSION_HOURS:g} hours, e.g. 8")
    if int(updates.get("max_job_processes", 64)) < 16:
        raise InvalidRequest("server.max_job_processes", f"must be at least 16 in {path}")
    for key in ("max_log_mb", "user_log_quota_mb"):
        if int(updates.get(key, 1)) < 1:
            raise InvalidRequest(f"server.{key}", f"must be at least 1 in {path}")
    low, high = MAX_SCRIPT_MB_RANGE
    if not low <= int(updates.get("max_script_mb", low)) <= high:
        raise InvalidRequest("server.max_script_mb", f"must be between {low} and {high} in {path}",
                             f"the default is {DEFAULT_MAX_SCRIPT_MB}, as Slurm's max_script_size")
    for key in ("max_artifact_mb", "user_artifact_quota_mb"):
        if int(updates.get(key, 1)) < 1:
            raise InvalidRequest(f"tracking.{key}", f"must be at least 1 in {path}")
    if "artifact_dir" in updates and not os.path.isabs(os.path.expanduser(updates["artifact_dir"])):
        raise InvalidRequest("tracking.artifact_dir", f"must be an absolute path in {path}", "e.g. /shared/corral/artifacts")
    if int(updates.get("log_reserve_mb", 0)) < 0:
        raise InvalidRequest("server.log_reserve_mb", f"must not be negative in {path}", "0 turns the reserve off")
    if float(updates.get("sample_retention_days", 1)) <= 0:
        raise InvalidRequest("monitor.sample_retention_days", f"must be positive in {path}")
    interval = updates.get("sample_interval_s", options.sample_interval_s)
    if not 0.1 <= float(interval) <= 3600:
        raise InvalidRequest("monitor.sample_interval_s", f"must be between 0.1 and 3600 seconds in {path}, got {interval}")
    if "features" in updates:
        features = updates["features"]
        if not all(isinstance(f, str) and FEATURE_PATTERN.match(f) for f in features):
            raise InvalidRequest("node.features", f"must be a list of feature names in {path}",
                                 'e.g. features = ["a100", "nvlink"] (letters, digits, _ . -)')
        updates["features"] = tuple(features)
    if "outside_processes" in updates:
        updates["outside_processes"] = check_mode(updates["outside_processes"], str(path))
    sharing = sharing_settings(options.sharing, {k: updates.pop(k) for k in SHARING_KEYS if k in updates}, str(path))
    updates.update(gpu_topology_settings(updates, str(path)))
    inventory = replace(options.inventory, **{k: v for k, v in updates.items()
                                             if k in node_keys and k != "outside_processes"})
    auth_settings: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in auth.items() if k != "admins"}
    settings = AuthSettings(**auth_settings)
    return replace(options, inventory=inventory, scheduler=scheduler, smtp=dict(smtp), smtp_section=smtp_section,
                   accounts=accounts, sharing=sharing,
                   admins=frozenset(auth.get("admins", [])), auth=settings,
                   **{k: v for k, v in updates.items() if k in server_keys or k in monitor_keys or k in tracking_keys
                      or k in ("cgroups", "container_runtime", "outside_processes")})
