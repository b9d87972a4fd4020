#!/usr/bin/env python3
"""What a run keeps when its shared server is killed and restarted under it (root only).

    sudo .venv/bin/python bench/sdk_restart.py [--user corral-alice] [--steps 700] [--seconds 70]
                                               [--kill-at 6] [--down 5] [--port same|new] [--db URL]

A shared server (root, jobs run as their owners) in a fresh home under /tmp; a job of
`--user` logs `--steps` steps evenly over `--seconds`; `--kill-at` seconds after its run
starts the server is killed with SIGKILL and, `--down` seconds later, started again on
the same port or on a new one (`--port 0`). Reports the steps stored (and any stored
twice or missing), and how long after the restart the run's first new point was stored.
The job runs the system's Python (/usr/bin/python3) on a copy of the package, which the
account can read wherever the checkout lies. Exits 1 unless every step is stored once.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "src"))

import corral  # noqa: E402
from corral.client import Client  # noqa: E402
from corral.home import read_server_info  # noqa: E402

JOB = textwrap.dedent("""
    import corral, sys, time
    steps, seconds = int(sys.argv[1]), float(sys.argv[2])
    run = corral.init(project="bench-restart")
    print(run.id, flush=True)
    began = time.monotonic()
    for i in range(steps):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
        time.sleep(max(0.0, began + (i + 1) * seconds / steps - time.monotonic()))
    run.finish(timeout=120)
""")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def start_server(home: str, port: int, db: str | None) -> dict:
    argv = [sys.executable, "-m", "corral.cli", "up", "--home", home, "--port", str(port), "--gpus", "0", "--detach"]
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "src")}
    subprocess.run([*argv, *(["--db", db] if db else [])], check=True, capture_output=True, timeout=120, env=env)
    info = read_server_info(home)
    assert info is not None
    return info


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    while os.path.exists(f"/proc/{pid}"):
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="corral-alice")
    parser.add_argument("--steps", type=int, default=700)
    parser.add_argument("--seconds", type=float, default=70.0)
    parser.add_argument("--kill-at", type=float, default=6.0)
    parser.add_argument("--down", type=float, default=5.0)
    parser.add_argument("--port", choices=("same", "new"), default="same")
    parser.add_argument("--db", help="a PostgreSQL URL (default: SQLite in the home)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("a shared server runs as root: run this as root")
    pwd.getpwnam(args.user)

    base = tempfile.mkdtemp(prefix="corral-bench-", dir="/tmp")
    os.chmod(base, 0o711)
    home, lib = os.path.join(base, "home"), os.path.join(base, "lib")
    shutil.copytree(os.path.dirname(corral.__file__), os.path.join(lib, "corral"), ignore=shutil.ignore_patterns("__pycache__"))
    info = start_server(home, 0, args.db)
    try:
        with Client(home=home) as root:
            token = root.create_token(user=args.user, expires="1h")["token"]
        with Client(info["url"], token=token) as owner:
            job = owner.submit(["/usr/bin/python3", "-c", JOB, str(args.steps), str(args.seconds)],
                               env={"PYTHONPATH": lib}, submit_dir="/tmp", time="30m")
        root = Client(home=home)
        while not root.logs(job["id"])[0].strip():
            time.sleep(0.05)
        began = time.monotonic()
        run_id = int(root.logs(job["id"])[0].split()[0])
        root.close()
        time.sleep(max(0.0, began + args.kill_at - time.monotonic()))
        kill9(info["pid"])
        log(f"killed the server {time.monotonic() - began:.1f} s into the run")
        time.sleep(args.down)
        port = int(info["url"].rsplit(":", 1)[1]) if args.port == "same" else 0
        info = start_server(home, port, args.db)
        restarted = time.monotonic()
        log(f"restarted it at {info['url']}")
        root = Client(home=home)
        stored_then = root.get_run(run_id)["metrics"].get("loss", {}).get("count", 0)
        reconnect_s = None
        deadline = began + args.seconds + 300
        while time.monotonic() < deadline:
            count = root.get_run(run_id)["metrics"].get("loss", {}).get("count", 0)
            if reconnect_s is None and count > stored_then:
                reconnect_s = time.monotonic() - restarted
            if root.get(job["id"])["state"] not in ("PENDING", "RUNNING"):
                break
            time.sleep(0.05)
        ended = root.wait(job["id"], timeout=60)
        steps = root.series(run_id, "loss", max_points=100_000)["steps"]
        run = root.get_run(run_id)
    finally:
        subprocess.run([sys.executable, "-m", "corral.cli", "--home", home, "down"], capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src")})
        shutil.rmtree(base, ignore_errors=True)
    missing = sorted(set(range(args.steps)) - set(steps))
    result = {
        "stored": len(set(steps)), "steps": args.steps, "stored_twice": len(steps) - len(set(steps)),
        "missing": len(missing), "first_missing": missing[:5], "reconnect_s": reconnect_s, "port": args.port,
        "job_state": ended["state"], "run_state": run["state"],
    }
    print(json.dumps(result))
    print(f"{result['stored']} of {args.steps} steps stored ({result['stored_twice']} twice); first new point "
          f"{reconnect_s if reconnect_s is None else round(reconnect_s, 2)} s after the restart ({args.port} port)")
    return 0 if result["stored"] == args.steps and not result["stored_twice"] else 1


if __name__ == "__main__":
    sys.exit(main())
