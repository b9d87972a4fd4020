#!/usr/bin/env python3
"""One user's flood of connections and of made-up tokens, against this checkout and an older one, side by side.

    sudo .venv/bin/python bench/connection_flood.py [--user corral-alice] [--connections 3000]
                                                    [--guess-seconds 5] [--rows 6000]
                                                    [--baseline /tmp/mainsrc-peers] [--json [PATH]]

1. Naming a peer: microseconds to find the owner of one TCP connection's client end with
   NETLINK_SOCK_DIAG (`corral.server.sockdiag`) and by reading `/proc/net/tcp` (the baseline's
   `tcp_peer_uid`), with `--rows` rows in the table (loopback connections this script holds).
2. For each source tree (this checkout; `--baseline`, a worktree of older code, e.g.
   `git worktree add /tmp/mainsrc-peers a0bfac0`): a shared server (root) in a fresh home;
   `--user` (a real account, via runuser and the system's python3) opens `--connections` TCP
   connections and holds them while root probes `GET /api/v1/health` on a fresh connection every
   10 ms: worst, p99 and median health latency from the flood's start until 1 s after it has
   opened them all and the server has caught up (three answers in a row under 100 ms). Then `--user` sends random bearer tokens on one kept-alive connection for
   `--guess-seconds`: answers by status, and the server's token lookups in the database, counted
   by `tests/token_lookups/sitecustomize.py` inside the server.

Root only (the flood must come from another uid than the probe). Figures to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COUNTER = os.path.join(REPO, "tests", "token_lookups")

HOLDER = textwrap.dedent("""
    import json, resource, socket, sys, time
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    socks, failed, began = [], 0, time.monotonic()
    for _ in range(n):
        try:
            socks.append(socket.create_connection((host, port), timeout=120))
        except OSError:
            failed += 1
    print(json.dumps({"open": len(socks), "failed": failed, "seconds": time.monotonic() - began}), flush=True)
    sys.stdin.read()
""")

GUESSER = textwrap.dedent("""
    import collections, http.client, json, secrets, sys, time
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    conn = http.client.HTTPConnection(host, port, timeout=60)
    statuses, sent = collections.Counter(), 0
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        try:
            conn.request("GET", "/api/v1/jobs", headers={"Authorization": "Bearer corral_" + secrets.token_urlsafe(32)})
            r = conn.getresponse()
            r.read()
            statuses[r.status] += 1
        except (OSError, http.client.HTTPException):
            statuses["error"] += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=60)
    print(json.dumps({"statuses": statuses, "seconds": time.monotonic() - began}), flush=True)
""")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_peers(tree: str, name: str):
    """A tree's `corral/server/peers.py` as a module of its own (the baseline's alongside ours)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(tree, "src", "corral", "server", "peers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def identification(rows: int, baseline: str | None) -> dict:
    """Microseconds per peer lookup: sock_diag, and a read of the socket table, with about `rows` rows."""
    sys.path.insert(0, os.path.join(REPO, "src"))
    from corral.server.peers import tcp_peer_uid
    from corral.server.sockdiag import SockDiag

    old_lookup = load_peers(baseline, "baseline_peers").tcp_peer_uid if baseline else tcp_peer_uid
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    pairs = []
    try:
        for _ in range(max(1, rows // 2)):  # two rows each: the client's end and the server's
            client = socket.create_connection(listener.getsockname())
            pairs.append((client, listener.accept()[0]))
        with open("/proc/net/tcp") as f:
            table_rows = sum(1 for _ in f) - 1
        server, client = listener.getsockname(), pairs[len(pairs) // 2][0].getsockname()
        diag = SockDiag()
        assert diag.find(client, server).uid == old_lookup(server, client) == os.geteuid()

        def per_call_us(fn, calls: int) -> float:
            samples = []
            for _ in range(5):
                began = time.perf_counter()
                for _ in range(calls):
                    fn(server, client)
                samples.append((time.perf_counter() - began) / calls * 1e6)
            return statistics.median(samples)

        return {"table_rows": table_rows, "sock_diag_us": per_call_us(lambda s, c: diag.find(c, s), 2000),
                "proc_scan_us": per_call_us(old_lookup, 20)}
    finally:
        for a, b in pairs:
            a.close()
            b.close()
        listener.close()


class Prober(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.latencies, self.errors = port, [], 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                conn.request("GET", "/api/v1/health")
                conn.getresponse().read()
                conn.close()
            except (OSError, http.client.HTTPException):
                self.errors += 1
            self.latencies.append(time.monotonic() - began)
            time.sleep(0.01)


def as_user(user: str, script: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen(["runuser", "-u", user, "--", "/usr/bin/python3", "-c", script, *map(str, args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")


def measure_tree(tree: str, user: str, connections: int, guess_seconds: float) -> dict:
    root = tempfile.mkdtemp(prefix="corral-flood-", dir="/tmp")
    os.chmod(root, 0o711)
    home = os.path.join(root, "home")
    lookups = os.path.join(root, "lookups")
    env = {**os.environ, "PYTHONPATH": f"{COUNTER}:{os.path.join(tree, 'src')}", "CORRAL_COUNT_TOKEN_LOOKUPS": lookups}
    subprocess.run([sys.executable, "-m", "corral.cli", "up", "--home", home, "--port", "0", "--gpus", "0", "--detach"],
                   check=True, capture_output=True, timeout=120, env=env)
    load = os.getloadavg()[0]
    try:
        with open(os.path.join(home, "server.json")) as f:
            info = json.load(f)
        port = int(info["url"].rsplit(":", 1)[1])
        prober = Prober(port)
        prober.start()
        time.sleep(0.5)
        before = len(prober.latencies)
        holder = as_user(user, HOLDER, "127.0.0.1", port, connections)
        opened = json.loads(holder.stdout.readline())
        time.sleep(1.0)
        caught_up = time.monotonic() + 300  # until the server has handled the flood: 3 quick answers in a row
        while time.monotonic() < caught_up and not (len(prober.latencies) > 3
                                                    and all(t < 0.1 for t in prober.latencies[-3:])):
            time.sleep(0.05)
        prober.stop.set()
        prober.join()
        during = prober.latencies[before:]
        holder.stdin.close()
        holder.wait(timeout=120)
        time.sleep(1.0)
        guesser = as_user(user, GUESSER, "127.0.0.1", port, guess_seconds)
        guessed = json.loads(guesser.stdout.read())
        guesser.wait(timeout=60)
        time.sleep(0.5)
        try:
            with open(lookups) as f:
                counted = sum(1 for _ in f)
        except FileNotFoundError:
            counted = 0
        sent = sum(guessed["statuses"].values())
        return {"tree": tree, "load_average": round(load, 1), "connections_opened": opened["open"], "connect_failures": opened["failed"],
                "open_seconds": round(opened["seconds"], 2), "probes": len(during), "probe_errors": prober.errors,
                "health_worst_ms": round(max(during) * 1000, 1), "health_p99_ms": round(_pct(during, 99) * 1000, 1),
                "health_median_ms": round(statistics.median(during) * 1000, 1),
                "guesses": sent, "guesses_per_s": round(sent / guessed["seconds"]), "guess_statuses": guessed["statuses"],
                "token_lookups": counted}
    finally:
        subprocess.run([sys.executable, "-m", "corral.cli", "--home", home, "down"], capture_output=True, timeout=60, env=env)
        shutil.rmtree(root, ignore_errors=True)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="corral-alice")
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--guess-seconds", type=float, default=5.0)
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--baseline", default="/tmp/mainsrc-peers", help="an older checkout to compare ('' for none)")
    parser.add_argument("--json", nargs="?", const="-", default=None)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root: the flood comes from another account than the health probe", file=sys.stderr)
        return 2
    baseline = args.baseline if args.baseline and os.path.isdir(args.baseline) else None
    log(f"naming a peer with ~{args.rows} rows in /proc/net/tcp")
    ident = identification(args.rows, baseline)
    trees = [REPO] + ([baseline] if baseline else [])
    results = []
    for tree in trees:
        log(f"{tree}: {args.user} opens {args.connections} connections, then guesses tokens for {args.guess_seconds:g} s")
        results.append(measure_tree(tree, args.user, args.connections, args.guess_seconds))
    document = {"identification": ident, "servers": results}
    if args.json == "-":
        print(json.dumps(document, indent=2))
        return 0
    print(f"peer lookup, {ident['table_rows']} rows in /proc/net/tcp: sock_diag {ident['sock_diag_us']:.1f} µs, "
          f"socket-table read {ident['proc_scan_us']:.0f} µs")
    print(f"{'':34}" + "".join(f"{os.path.basename(r['tree'].rstrip('/')) or r['tree']:>22}" for r in results))
    for key, label in (("load_average", "machine load average (1 min)"), ("connections_opened", "connections opened"), ("open_seconds", "seconds to open them"),
                       ("probes", "health probes"), ("health_worst_ms", "health worst (ms)"),
                       ("health_p99_ms", "health p99 (ms)"), ("health_median_ms", "health median (ms)"),
                       ("guesses_per_s", "random-token requests/s"), ("guess_statuses", "answers"),
                       ("token_lookups", "token lookups in the database")):
        print(f"{label:34}" + "".join(f"{json.dumps(r[key]) if isinstance(r[key], dict) else r[key]!s:>22}"
                                      for r in results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(document, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
