"""Running the server: lock the home, open and migrate the store, settle old jobs, wire the parts and serve."""

from __future__ import annotations

import gc
import getpass
import os
import sys
import time

from corral.compose.config import ServerOptions
from corral.compose.home import acquire_home, user_log_dirs, webhook_token
from corral.compose.parts import build_artifacts, build_monitor, import_mlflow_files, job_isolation, job_mail_relay, job_token
from corral.compose.sockets import bind_socket, bind_unix_socket
from corral.core.access.identity import AccessPolicy
from corral.errors import InvalidRequest
from corral.home import remove_server_info, write_server_info


def serve(options: ServerOptions) -> None:
    """Run the server in the foreground until SIGINT or SIGTERM."""
    import uvicorn

    from corral.api.app import create_app
    from corral.executor.gpus import build_node
    from corral.executor.users import run_as_for, share_home_with_jobs
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
        user_log_dir=user_log_dirs(home) if shared else None, isolation=(placement.mode, placement.summary),
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
