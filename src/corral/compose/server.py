"""Starting the server: lock the home, open and migrate the store, settle old jobs, serve."""

from __future__ import annotations

import fcntl
import gc
import getpass
import logging
import os
import socket
import sys
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from corral.api.identity import AuthSettings
from corral.core.jobspec.features import FEATURE_PATTERN
from corral.core.access.identity import AccessPolicy, Account, parse_accounts
from corral.core.monitoring.outside_use import check_mode
from corral.core.scheduling.topology import topology_settings as gpu_topology_settings
from corral.core.scheduling.resources import DeclaredInventory
from corral.core.scheduling.schedconfig import SchedulerConfig, parse_scheduler_config
from corral.core.scheduling.sharing import SHARING_KEYS, SharingSettings, sharing_settings
from corral.core.access.sessions import MAX_SESSION_HOURS
from corral.core.jobspec.spec import DEFAULT_MAX_SCRIPT_MB, MAX_SCRIPT_MB_RANGE
from corral.errors import Conflict, InvalidRequest
from corral.home import CONFIG_FILE, HomeLayout, read_server_info, remove_server_info, write_server_info

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from corral.monitor.channels.notification import SmtpSettings
    from corral.monitor.jobs import JobReader
    from corral.monitor.service import MonitorService
    from corral.store.runs import RunStore
    from corral.tracking.artifacts import ArtifactService
    from corral.tracking.service import TrackingService

log = logging.getLogger("corral.server")
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


def acquire_home(home: str) -> IO[str]:
    """Hold the home's lock for the server's life: one server per home.

    Raises:
        Conflict: another server already runs on this home.
    """
    os.makedirs(home, mode=0o700, exist_ok=True)
    lock = open(HomeLayout(home).lock, "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        info = read_server_info(home) or {}
        raise Conflict(
            f"a corral server already runs for home {home} at {info.get('url', '?')} (pid {info.get('pid', '?')}); "
            "stop it with `corral down`, or pick another --home"
        ) from None
    return lock


def webhook_token(home: str) -> str:
    """The shared secret Slurm's epilog sends (`<home>/webhook.token`, made once, mode 600)."""
    import secrets

    path = HomeLayout(home).webhook_token
    try:
        with open(path) as f:
            token = f.read().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except socket.gaierror as exc:
        sock.close()
        raise InvalidRequest("host", f"cannot resolve {host!r}: {exc.strerror}", "use an address such as 127.0.0.1") from None
    except OSError as exc:
        sock.close()
        raise InvalidRequest("port", f"cannot listen on {host}:{port}: {exc.strerror}", "pick another --port, or --port 0") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def bind_unix_socket(home: str, shared: bool) -> socket.socket:
    """`<home>/corral.sock`: local callers connect here and the kernel tells the server who they are.

    Anyone may connect to a shared server's socket (identity comes from SO_PEERCRED, not from
    the file's mode); a personal server's is its user's alone.
    """
    path = HomeLayout(home).socket
    try:
        os.unlink(path)  # a dead server's: this one holds the home's lock
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o111 if shared else 0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def job_isolation(options: ServerOptions, home: str, lock: IO[str], jobs_run_here: bool) -> Any:
    """Where this server's jobs' cgroups go (`corral.executor.cgroups.placement`), or why none.

    Raises:
        InvalidRequest: `[cgroups] mode` (or --cgroups) names a version this machine cannot give.
    """
    from corral.executor.cgroups import CgroupError
    from corral.executor.cgroups.placement import Placement, find_layout

    if not jobs_run_here:
        return Placement(None, "Slurm's own, on its compute nodes (its cgroup plugins, as the cluster configures them)")
    try:
        return find_layout(home, options.cgroups)
    except CgroupError as exc:
        lock.close()
        raise InvalidRequest("cgroups", f"cannot hold jobs in cgroups: {exc.strerror or exc}",
                             'use --cgroups auto (or [cgroups] mode = "auto"), which falls back to process groups') from None


def job_token(tokens: Any, job: Any) -> str:
    """A submit token of the job's owner, for its SDK on a compute node; it lapses a day after the job's time limit."""
    now = time.time()
    lifetime = (job.spec.time_limit_s or 7 * 86400) + 86400
    return tokens.create(job.spec.user, f"job-{job.id}", "submit", min(now + lifetime, now + 365 * 86400), "corral", now)[1]


def job_mail_relay(options: ServerOptions) -> SmtpSettings | None:
    """The relay sbatch --mail-type mails go through: `[smtp]` (its defaults: a relay on this machine); None without
    the section, where a job that asks for mail is told at submit and in `show` that none will be sent."""
    from corral.monitor.channels import SmtpSettings

    return SmtpSettings(**options.smtp) if options.smtp_section else None


def build_artifacts(options: ServerOptions, tracking: TrackingService) -> ArtifactService:
    """The artifact store where `[tracking] artifact_dir` puts it (else in the home), with its limits."""
    from corral.server.accounts import uid_of
    from corral.tracking.artifact_store import ArtifactStore
    from corral.tracking.artifacts import ArtifactLimits, ArtifactService

    root = os.path.expanduser(options.artifact_dir) if options.artifact_dir else HomeLayout(options.home).artifacts
    mb = 1 << 20
    limits = ArtifactLimits(
        max_file_bytes=options.max_artifact_mb * mb if options.max_artifact_mb else None,
        user_quota_bytes=options.user_artifact_quota_mb * mb if options.user_artifact_quota_mb else None)
    return ArtifactService(ArtifactStore(root), tracking, limits=limits, uid_of=uid_of)


def import_mlflow_files(home: str, artifacts: ArtifactService) -> None:
    """Take an older corral's MLflow uploads (kept apart, in the home) into the artifact store, before
    anything is served (`corral.tracking.compat.mlflow_artifacts`); once they are in, this finds nothing to do."""
    import asyncio

    from corral.tracking.compat.mlflow_artifacts import import_legacy_files

    root = HomeLayout(home).mlflow_artifacts
    if not os.path.isdir(root):
        return
    try:
        taken = asyncio.run(import_legacy_files(root, artifacts))
    except Exception as exc:  # noqa: BLE001 - best effort: the files stay, the next start tries again
        print(f"corral: could not take in the MLflow artifacts in {root}: {exc}", file=sys.stderr, flush=True)
        return
    if taken:
        print(f"corral: took {taken} MLflow artifact(s) from {root} into the artifact store", file=sys.stderr, flush=True)


def build_monitor(options: ServerOptions, service: JobReader, engine: Engine, tracking: TrackingService,
                  run_store: RunStore, sample: bool) -> MonitorService:
    """The monitor: samples local jobs (NVML for GPUs, or recorded frames from $CORRAL_GPU_REPLAY)."""
    from corral.monitor.channels import SmtpSettings
    from corral.monitor.service import MonitorService

    sampler = None
    if sample:
        from corral.monitor.nvml import gpu_source_from_env
        from corral.monitor.sampling import JobSampler

        sampler = JobSampler(gpu_source_from_env(os.environ))
    smtp = SmtpSettings(**options.smtp)
    return MonitorService(jobs=service, engine=engine, tracking=tracking, run_store=run_store,
                          sampler=sampler,
                          interval_s=float(options.sample_interval_s), smtp=smtp,
                          retention_days=float(options.sample_retention_days))


def serve(options: ServerOptions) -> None:
    """Run the server in the foreground until SIGINT or SIGTERM."""
    import uvicorn

    from corral.api.app import create_app
    from corral.executor.gpus import build_node
    from corral.executor.users import owned_dir, run_as_for, share_home_with_jobs
    from corral.server.service import JobService
    from corral.server.settings import ServiceSettings
    from corral.store import migrate
    from corral.store.db import database_url, open_engine
    from corral.store.jobs import JobStore
    from corral.store.runs import RunStore
    from corral.store.sessions import SessionStore
    from corral.store.tokens import TokenStore
    from corral.tracking.service import TrackingService

    from corral.backends.registry import BackendSetup, backend_kind

    kind = backend_kind(options.backend)
    here = kind.capabilities.runs_jobs_here
    home = options.home
    lock = acquire_home(home)
    # Shared only where corral itself starts jobs as their owners. On Slurm, sbatch run by root would
    # submit as root for everybody: such a server stays root's own (run one per user on a login node).
    shared = os.geteuid() == 0 and here
    policy = AccessPolicy(admins=options.admins, accounts=options.accounts, owner=None if shared else getpass.getuser())

    log_dirs: dict[str, str] = {}  # made once per user: a submit must not pay for pwd and mkdir each time

    def user_log_dir(user: str) -> str:
        if user not in log_dirs:
            log_dirs[user] = make_user_dirs(user)
        return log_dirs[user]

    def make_user_dirs(user: str) -> str:
        """A user's log directory (returned) and, for one whose jobs run as themselves, their spool."""
        layout = HomeLayout(home)
        base = layout.logs
        if run_as_for(user) is None:  # root's own jobs (an unknown user is refused here, at submit)
            path = layout.user_logs(user)
            os.makedirs(path, mode=0o700, exist_ok=True)  # the logs' names are guessable; their directory is not open
            return path
        owned_dir(layout.spool, user)  # where the SDK in their jobs spools (corral.sdk.places)
        return owned_dir(base, user)

    try:
        nodes = kind.nodes(options)
    except InvalidRequest:
        lock.close()
        raise
    node = nodes[0] if nodes else build_node(options.inventory)
    sock = bind_socket(options.host, options.port)
    unix_sock = bind_unix_socket(home, shared)
    host = "127.0.0.1" if options.host in ("0.0.0.0", "") else options.host
    url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    engine = open_engine(database_url(options.db, home))
    migrate.upgrade(engine)
    tokens = TokenStore(engine)
    if shared:
        share_home_with_jobs(home)  # users reach their jobs' files by name; the database (their environments) stays root's
    server_env = dict(os.environ)
    placement = job_isolation(options, home, lock, here)
    backend = kind.open(BackendSetup(
        home=home, settings=options, nodes=nodes, server_env=server_env, server_url=lambda: url,
        job_token=lambda job: job_token(tokens, job), owner_lookup=run_as_for if shared else None,
        cgroup_layout=placement.layout,
    ))
    settings = ServiceSettings(
        home=home, user=getpass.getuser(), server_env=server_env, access=policy,
        user_log_dir=user_log_dir if shared else None, isolation=(placement.mode, placement.summary),
        max_script_mb=options.max_script_mb, smtp=job_mail_relay(options), outside_processes=options.outside_processes,
        sharing=options.sharing,
    )
    service = JobService(store=JobStore(engine), backend=backend, nodes=nodes, settings=settings, config=options.scheduler)
    run_store = RunStore(engine)
    tracking = TrackingService(run_store, user=service.user, job_info=service.job_info)
    artifact_service = build_artifacts(options, tracking)
    import_mlflow_files(home, artifact_service)
    service.on_job_ended.append(tracking.job_ended)
    monitor = build_monitor(options, service, engine, tracking, run_store, sample=kind.capabilities.samples_processes)
    service.on_job_ended.append(monitor.job_ended)
    service.recover()
    monitor.start()
    # Everything loaded so far lives as long as the server: keep it out of the collector's full
    # passes, which otherwise rescan every queued job each time a pass allocates heavily.
    gc.freeze()

    def announce() -> None:
        write_server_info(home, {"url": url, "socket": unix_sock.getsockname(), "host": os.uname().nodename,
                                 "pid": os.getpid(), "started": time.time(),
                                 "db": engine.url.render_as_string(hide_password=True), "shared": shared})
        gpus = ", ".join(f"{g.index}:{g.type}" for g in node.gpus) or "none"
        print(f"corral server at {url} (home {home}; {node.cpus} CPUs, GPUs: {gpus})", file=sys.stderr, flush=True)
        mode = ("a shared service: every local user may submit, and jobs run as their owners" if shared else
                f"{policy.owner}'s personal queue: nobody else may use it")
        print(f"corral: {mode}; other machines need an API token (corral token create)", file=sys.stderr, flush=True)
        if here:
            print(f"corral: job isolation: {placement.summary}", file=sys.stderr, flush=True)

    def retire() -> None:
        # Here, not after run(): uvicorn re-raises SIGTERM once it has shut down, ending the process.
        remove_server_info(home, os.getpid())
        placement.release()
        engine.dispose()

    server: uvicorn.Server | None = None
    app = create_app(service, home=home, tracking=tracking, monitor=monitor, policy=policy, tokens=tokens,
                     sessions=SessionStore(engine), artifact_service=artifact_service,
                     auth=options.auth, listen_host=options.host, webhook_token=webhook_token(home),
                     on_started=announce, on_stopped=retire,
                     stopping=lambda: server is not None and server.should_exit)
    from corral.server.peers import peer_protocol

    # Per-peer connection caps live in the protocol (uvicorn's limit_concurrency is one number for everybody);
    # no websockets are served, so none are upgraded to.
    config = uvicorn.Config(
        app, loop="uvloop", http=peer_protocol(options.auth.max_connections_per_user), ws="none", lifespan="on",
        log_level="warning", access_log=False, timeout_graceful_shutdown=5, timeout_keep_alive=30,
    )
    try:
        server = uvicorn.Server(config)
        server.run(sockets=[sock, unix_sock])
    finally:
        lock.close()
