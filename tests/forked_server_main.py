"""The process that test servers are forked from (tests/forked_servers.py): it imports the server once, then
forks a `corral up` for each request, as `corral up --detach` would start one, without paying for the imports
again. Requests come one JSON line at a time on stdin; each answer is the new server's pid on stdout.

Run by path, so that it imports corral and the standard library alone. Single-threaded: a fork copies only
the thread that forks."""

from __future__ import annotations

import json
import os
import random
import sys

# What `corral up` imports before it answers (corral.compose.serve.serve and the backends), so that a forked
# server finds it imported; anything missing here is imported by the server itself, only slower.
PRELOAD = (
    "corral.cli.entry", "corral.cli.main", "corral.compose.serve", "corral.api.app", "corral.server.service",
    "corral.server.settings", "corral.store.migrate", "corral.store.db", "corral.store.jobs", "corral.store.runs",
    "corral.store.sessions", "corral.store.tokens", "corral.tracking.service", "corral.executor.gpus",
    "corral.executor.users", "corral.backends.registry", "corral.backends.local.backend",
    "corral.backends.slurm.backend", "uvicorn", "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto", "uvicorn.lifespan.on",
)


def become_server(request: dict) -> None:
    """In the forked child: the environment, directory and files of a fresh `corral up`, then run it."""
    os.umask(request["umask"])
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]
    os.environ.clear()
    os.environ.update(request["env"])
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    random.seed()  # every fork would draw the same numbers from the parent's state
    from corral.cli import entry

    sys.argv = [os.path.join(os.path.dirname(entry.__file__), "__main__.py"), *request["args"]]
    status = 1
    try:
        entry.main()
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: S110 - a closed log: nothing left to say
                pass
        os._exit(status)


def fork_server(request: dict) -> int:
    """Start a server in a session of its own, a child of init as a detached one is; returns its pid."""
    ready, announce = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(ready)
        os.setsid()
        server = os.fork()
        if server == 0:
            os.close(announce)
            become_server(request)
        os.write(announce, str(server).encode())
        os._exit(0)
    os.close(announce)
    pid = int(os.read(ready, 32))
    os.close(ready)
    os.waitpid(middle, 0)
    return pid


def main() -> None:
    sys.path[0] = os.getcwd()  # as `python -m corral.cli` has it, not this file's folder (tests/users.py...)
    for name in PRELOAD:
        __import__(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps({"pid": fork_server(request)}), flush=True)


if __name__ == "__main__":
    main()
