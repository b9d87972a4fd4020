#!/usr/bin/env python3
"""Under load and faults: 64 clients submit jobs and log metrics; optionally the server is kill -9'd.

    .venv/bin/python bench/stress_load.py [--seconds 60] [--clients 64] [--processes 8] [--db URL]
    .venv/bin/python bench/stress_load.py --kill              # kill -9 the server every 5-15 s, restart it
    .venv/bin/python bench/stress_load.py --quick [--kill]    # 10 s, 16 clients

Starts a server with one declared GPU in a fresh temporary home (SQLite there, or --db),
submits a blocker job that holds the GPU (`sleep 3600`), then runs --clients clients
(--processes processes of threads, each client on its own kept-alive socket through a
minimal HTTP/1.1 client) for --seconds. Each client creates its own run, then loops:
submit a job (`true`, 1 GPU: it stays PENDING behind the blocker, so nothing runs and
this measures the API and the store, not process spawning), then post one metrics batch
to its run (--keys keys x --steps steps, packed columns as the SDK sends them, a batch id
each, steps moving forward batch after batch, value = step / 4 + key index).

A client records every acknowledged submit (HTTP 201 with an id) and every acknowledged
batch (200). On a connection error it retries the same request (same job name, same
batch id); a submit whose answer was lost is not acknowledged, so the job it may have
created counts as "unacknowledged but stored", which is allowed. An HTTP error answer
is recorded by kind and not retried.

With --kill a chaos thread kill -9's the server at random moments (every --kill-every
5 15 seconds) and restarts it (`corral up --detach`) on the same home and port.

Afterwards, on the (last) server, it checks through the API:
  jobs:   the queue and history (paged) list no id twice; every acknowledged id is
          there with the name its client gave it; no job name is stored more times
          than it was sent without an answer (+1 if answered); nothing else is there.
  points: every run's series (read back raw, in windows of 50,000 steps) hold every
          point of every acknowledged batch exactly once with its value, and nothing
          that was never sent; each metric's count in GET /runs/{id} agrees.
  errors: HTTP 5xx, 503 "database is locked", 429, other 4xx and connection errors,
          counted by kind: must all be zero (with --kill, connection errors are the
          expected result of the kills and are reported, not failed).
Exits 1 when a check fails. A PostgreSQL --db URL without `options=` gets a fresh schema
(created and dropped here, like the tests' pg_schema_url).
"""

from __future__ import annotations

import argparse
import array
import base64
import json
import multiprocessing as mp
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    CORRAL, Http, Server, add_common_args, emit, list_active, log, percentile, process_cpu_s, wait_state,
)

WINDOW = 50_000  # steps per series read: distinct integer steps, so never more than /series' 100,000 points
CONNECTION_KINDS = ("connection refused", "connection reset", "timeout", "connection error")


# -- the clients ------------------------------------------------------------------------------------------


class Lost(Exception):
    """The request may or may not have reached the server; its answer did not come back."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class RawClient:
    """One kept-alive HTTP/1.1 connection over a raw socket; reconnects after an error.

    Cheaper than http.client (the clients share two cores with the server), and every
    failure to get an answer surfaces as `Lost`, so the caller decides whether to retry.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self.file: Any = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        try:
            if self.sock is None:
                self._connect()
            assert self.sock is not None
            self.sock.sendall(head + payload)
            return self._answer()
        except ConnectionRefusedError as exc:
            self.close()
            raise Lost("connection refused", str(exc)) from None
        except (ConnectionResetError, BrokenPipeError, EOFError) as exc:
            self.close()
            raise Lost("connection reset", f"{type(exc).__name__}: {exc}") from None
        except socket.timeout as exc:
            self.close()
            raise Lost("timeout", str(exc)) from None
        except OSError as exc:
            self.close()
            raise Lost("connection error", f"{type(exc).__name__}: {exc}") from None

    def _connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.file = sock, sock.makefile("rb")

    def _line(self) -> bytes:
        line = self.file.readline()
        if not line.endswith(b"\n"):
            raise EOFError("the server closed the connection mid-answer")
        return line

    def _answer(self) -> tuple[int, bytes]:
        status = int(self._line().split(b" ", 2)[1])
        length, chunked, close = 0, False, False
        while (line := self._line()) != b"\r\n":
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value == b"chunked"
            elif name == b"connection":
                close = value == b"close"
        if chunked:
            parts = []
            while (size := int(self._line().split(b";")[0], 16)) > 0:
                parts.append(self._read(size))
                self._line()
            while self._line() != b"\r\n":
                pass
            data = b"".join(parts)
        else:
            data = self._read(length)
        if close:
            self.close()
        return status, data

    def _read(self, n: int) -> bytes:
        data = self.file.read(n)
        if len(data) < n:
            raise EOFError("the server closed the connection mid-answer")
        return data

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.file.close()
                self.sock.close()
            except OSError:
                pass
        self.sock = self.file = None


def error_kind(status: int, data: bytes) -> str:
    """The kind an HTTP error answer is counted under."""
    if status == 503 and b"locked" in data.lower():
        return "HTTP 503 database is locked"
    return f"HTTP {status}"


def _packed(values: array.array) -> str:
    if sys.byteorder != "little":
        values = array.array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode()


def batch_body(batch_id: str, batch: int, keys: int, steps: int) -> dict[str, Any]:
    """Batch number `batch` of a client: steps [batch*steps, (batch+1)*steps), value = step/4 + key index."""
    lo = batch * steps
    step_list = array.array("q", range(lo, lo + steps))
    times = _packed(array.array("d", (1.7e9 + s for s in step_list)))
    packed_steps = _packed(step_list)
    return {"batch_id": batch_id, "metrics": [
        {"key": f"stress/k{k}", "steps_i64": packed_steps, "values_f64": _packed(array.array("d", (s / 4 + k for s in step_list))),
         "times_f64": times} for k in range(keys)]}


class ClientLog:
    """What one client saw: acknowledgements, answers lost, error answers, latencies."""

    def __init__(self, client: int) -> None:
        self.client = client
        self.run_uid = ""
        self.jobs: list[tuple[int, str]] = []  # acknowledged (id, name)
        self.lost_submits: dict[str, int] = {}  # name -> attempts whose answer was lost
        self.unanswered_names: list[str] = []  # given up on (out of time) or answered with an error
        self.acked_batches: list[int] = []
        self.sent_unacked_batches: list[int] = []  # sent, maybe stored, never acknowledged
        self.batch_retries = 0
        self.retried_answers: Counter[str] = Counter()  # how a retried batch was answered
        self.partial_batches: list[str] = []  # acknowledged but not all its points accepted
        self.errors: Counter[str] = Counter()
        self.samples: dict[str, str] = {}
        self.submit_lat: list[float] = []
        self.batch_lat: list[float] = []

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        self.samples.setdefault(kind, detail[:300])


def _client(index: int, cfg: dict[str, Any], stop_at: float, give_up_at: float, out: ClientLog) -> None:
    """One client's loop: create its run, then submit + batch until stop_at (finishing the request under way)."""
    conn = RawClient(cfg["host"], cfg["port"], timeout=cfg["timeout"])
    rng = random.Random(index)

    def until_answered(method: str, path: str, body: Any) -> tuple[int, bytes, int] | None:
        """Retries on a lost answer (same body); the answer and how many sends were lost, or None past give_up_at."""
        lost = 0
        while True:
            try:
                status, data = conn.request(method, path, body)
                return status, data, lost
            except Lost as exc:
                out.error(exc.kind, str(exc))
                lost += 1
                if time.monotonic() > give_up_at:
                    return None
                time.sleep(min(0.5, 0.02 * 2 ** min(lost, 5)) * (0.5 + rng.random()))

    uid = f"stress-{cfg['tag']}-{index}"
    answer = until_answered("POST", "/api/v1/runs", {"project": "stress", "name": f"client-{index}", "uid": uid})
    if answer is None or answer[0] not in (200, 201):
        out.error("run not created", repr(answer)[:300])
        return
    out.run_uid = uid
    metrics_path = f"/api/v1/runs/{uid}/metrics"
    job = {"command": ["true"], "gpus": 1, "workdir": cfg["workdir"]}
    seq = batch = 0
    perf = time.perf_counter
    while time.monotonic() < stop_at:
        name = f"s{index}-{seq}"
        seq += 1
        t0 = perf()
        answer = until_answered("POST", "/api/v1/jobs", {**job, "name": name})
        if answer is None:
            out.unanswered_names.append(name)
            out.lost_submits[name] = cfg["max_attempts_unknown"]
            break
        status, data, lost = answer
        if lost:
            out.lost_submits[name] = lost
        if status == 201:
            out.submit_lat.append(perf() - t0)
            out.jobs.append((json.loads(data)["id"], name))
        else:
            out.error(error_kind(status, data), f"submit: HTTP {status}: {data[:200]!r}")
            out.unanswered_names.append(name)

        body = batch_body(f"c{index}-b{batch}-{cfg['tag']}", batch, cfg["keys"], cfg["steps"])
        t0 = perf()
        answer = until_answered("POST", metrics_path, body)
        if answer is None:
            out.sent_unacked_batches.append(batch)
            break
        status, data, lost = answer
        if lost:
            out.batch_retries += 1
        if status == 200:
            out.batch_lat.append(perf() - t0)
            got = json.loads(data)
            expected = cfg["keys"] * cfg["steps"]
            if lost:
                # A retry of a batch the server may already hold: batch_id must catch it (duplicate),
                # not the "steps move forward" rule (skipped).
                out.retried_answers["duplicate" if got["duplicate"] else
                                    "accepted" if got["accepted"] == expected else "skipped"] += 1
            if not got["duplicate"] and got["accepted"] != expected:
                out.partial_batches.append(f"batch {batch}: {got}")
            out.acked_batches.append(batch)
        else:
            out.error(error_kind(status, data), f"batch: HTTP {status}: {data[:200]!r}")
            out.sent_unacked_batches.append(batch)
        batch += 1
    conn.close()


def _process(indices: list[int], cfg: dict[str, Any], ready: Any, go: Any, results: Any) -> None:
    """A client process: one thread per client; reports each client's log when all are done."""
    logs = [ClientLog(i) for i in indices]
    ready.release()
    go.wait()
    stop_at = time.monotonic() + cfg["seconds"]
    give_up_at = stop_at + cfg["grace"]
    cpu0 = time.process_time()
    threads = [threading.Thread(target=_client, args=(i, cfg, stop_at, give_up_at, lg), daemon=True)
               for i, lg in zip(indices, logs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put({"cpu_s": time.process_time() - cpu0, "end": time.monotonic(),
                 "logs": [vars(lg) for lg in logs]})


# -- faults -----------------------------------------------------------------------------------------------


class Chaos(threading.Thread):
    """Kill -9's the server at random moments and restarts it on the same home and port."""

    def __init__(self, server: Server, port: int, every: tuple[float, float], stop_at: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.port, self.every, self.stop_at = server, port, every, stop_at
        self.rng = random.Random(seed)
        self.kills: list[dict[str, Any]] = []
        self.failure = ""

    def run(self) -> None:
        try:
            while True:
                # Never later than a second before the load ends, so a short run still sees a kill.
                lo, hi = self.every[0], min(self.every[1], self.stop_at - time.monotonic() - 1.0)
                if hi < lo:
                    return
                time.sleep(self.rng.uniform(lo, hi))
                self.kills.append(self.kill_and_restart())
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.failure = f"{type(exc).__name__}: {exc}"

    def kill_and_restart(self) -> dict[str, Any]:
        old = self.server.pid
        t0 = time.monotonic()
        os.kill(old, signal.SIGKILL)
        while _alive(old):
            time.sleep(0.005)
        t_dead = time.monotonic()
        up = [CORRAL, "up", "--home", self.server.home, "--port", str(self.port), "--gpus", str(self.server.gpus),
              "--gpu-type", "A100", "--gpu-mem", "80G", *(["--db", self.server.db] if self.server.db else []),
              "--detach"]
        proc = subprocess.run(up, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"restart failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        with open(os.path.join(self.server.home, "server.json")) as f:
            self.server.pid = int(json.load(f)["pid"])
        t_up = time.monotonic()
        log(f"kill -9 server {old}; restarted as {self.server.pid} in {t_up - t_dead:.2f} s")
        return {"killed_pid": old, "new_pid": self.server.pid, "at_s": t0, "down_s": t_up - t0}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


# -- verification ---------------------------------------------------------------------------------------------


def list_finished(http: Http, page: int = 10_000) -> list[dict[str, Any]]:
    """Every finished job, newest first, following the history's cursor."""
    out: list[dict[str, Any]] = []
    before = ""
    while True:
        data = http.call("GET", f"/api/v1/jobs?scope=finished&limit={page}{before}")
        out.extend(data["jobs"])
        if data.get("next_cursor") is None:
            return out
        before = f"&before={data['next_cursor']}"


def verify_jobs(http: Http, logs: list[dict[str, Any]], blocker_id: int) -> dict[str, Any]:
    """Every acknowledged job exactly once, with its name; nothing stored that was never sent."""
    listed = list_active(http) + list_finished(http)
    id_counts = Counter(j["id"] for j in listed)
    by_id = {j["id"]: j for j in listed}
    by_name: dict[str, list[int]] = {}
    for j in listed:
        by_name.setdefault(j["name"], []).append(j["id"])
    acked = [(jid, name) for lg in logs for jid, name in lg["jobs"]]
    acked_names = {name for _, name in acked}
    lost = {name: n for lg in logs for name, n in lg["lost_submits"].items()}
    sent_names = acked_names | set(lost) | {n for lg in logs for n in lg["unanswered_names"]}
    missing = [jid for jid, _ in acked if jid not in by_id]
    misnamed = [jid for jid, name in acked if jid in by_id and by_id[jid]["name"] != name]
    too_many = []  # names stored more often than they were sent without an answer (+1 when acknowledged)
    unacked_stored = 0
    for name, ids in by_name.items():
        if name not in sent_names:
            continue
        # Each send whose answer was lost may have stored the job; an error answer stores nothing.
        allowed = lost.get(name, 0) + (1 if name in acked_names else 0)
        if len(ids) > allowed:
            too_many.append(name)
        unacked_stored += len(ids) - (1 if name in acked_names else 0)
    unknown = [j["id"] for j in listed if j["id"] != blocker_id and j["name"] not in sent_names]
    states = Counter(j["state"] for j in listed if j["id"] != blocker_id)
    blocker_state = by_id[blocker_id]["state"] if blocker_id in by_id else "missing"
    checks = {
        "no_id_listed_twice": all(n == 1 for n in id_counts.values()),
        "acknowledged_ids_unique": len({jid for jid, _ in acked}) == len(acked),
        "every_acknowledged_job_stored": not missing,
        "acknowledged_jobs_keep_their_name": not misnamed,
        "no_job_duplicated": not too_many,
        "no_unknown_job": not unknown,
    }
    return {"listed": len(listed), "acknowledged": len(acked), "missing": missing[:20], "misnamed": misnamed[:20],
            "duplicated_names": too_many[:20], "unknown_ids": unknown[:20], "unacknowledged_but_stored": unacked_stored,
            "submits_with_lost_answer": len(lost), "states": dict(states), "blocker_state": blocker_state,
            "checks": checks}


def _ranges(batches: list[int], steps: int) -> set[int]:
    return {s for b in batches for s in range(b * steps, (b + 1) * steps)}


def verify_points(http: Http, logs: list[dict[str, Any]], keys: int, steps: int) -> dict[str, Any]:
    """Every point of every acknowledged batch stored exactly once with its value; nothing never sent."""
    acked_points = stored_points = unacked_stored = 0
    problems: list[str] = []
    for lg in logs:
        if not lg["run_uid"]:
            continue
        run = http.call("GET", f"/api/v1/runs/{lg['run_uid']}")
        must = _ranges(lg["acked_batches"], steps)
        may = must | _ranges(lg["sent_unacked_batches"], steps)
        acked_points += len(must) * keys
        top = max(may, default=-1)
        for k in range(keys):
            key = f"stress/k{k}"
            count = run["metrics"].get(key, {}).get("count", 0)
            got_steps: list[int] = []
            got_values: list[float] = []
            for lo in range(0, top + 1, WINDOW):
                series = http.call("GET", f"/api/v1/runs/{lg['run_uid']}/series?"
                                   + urllib.parse.urlencode({"key": key, "start": lo, "end": lo + WINDOW - 1,
                                                             "max_points": 100_000}))
                if series["downsampled"]:
                    problems.append(f"{lg['run_uid']} {key}: window at {lo} came back downsampled")
                got_steps += series["steps"]
                got_values += series["values"]
            stored = set(got_steps)
            stored_points += len(got_steps)
            where = f"run {lg['run_uid']} {key}"
            if len(stored) != len(got_steps):
                problems.append(f"{where}: {len(got_steps) - len(stored)} steps stored twice")
            if count != len(got_steps):
                problems.append(f"{where}: GET /runs says {count} points, the series holds {len(got_steps)}")
            if lost := must - stored:
                problems.append(f"{where}: {len(lost)} acknowledged points missing, e.g. step {min(lost)}")
            if extra := stored - may:
                problems.append(f"{where}: {len(extra)} points never sent, e.g. step {min(extra)}")
            wrong = [s for s, v in zip(got_steps, got_values) if v != s / 4 + k]
            if wrong:
                problems.append(f"{where}: {len(wrong)} points with a wrong value, e.g. step {wrong[0]}")
            unacked_stored += len(stored - must)
    return {"acknowledged_points": acked_points, "stored_points": stored_points,
            "unacknowledged_but_stored_points": unacked_stored, "problems": problems[:20],
            "checks": {"every_acknowledged_point_stored_once_with_its_value": not problems}}


# -- the run ------------------------------------------------------------------------------------------------


@contextmanager
def database(url: str | None) -> Iterator[str | None]:
    """The URL to use: a PostgreSQL URL without options= gets a fresh schema, dropped afterwards."""
    if not url or not url.startswith("postgresql") or "options=" in url:
        yield url
        return
    import psycopg

    schema = f"corral_stress_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')  # a generated identifier, not user input
    log(f"PostgreSQL schema {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def server_log_lines(home: str, limit: int = 40) -> list[str]:
    """The server log's lines that tell of trouble (errors, tracebacks, locks)."""
    try:
        with open(os.path.join(home, "server.log"), errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    words = ("error", "traceback", "locked", "exception", "critical")
    return [line for line in lines if any(w in line.lower() for w in words)][-limit:]


def run(args: argparse.Namespace, db: str | None) -> dict[str, Any]:
    with Server(gpus=1, keep_home=args.keep_home, profile=args.profile, db=db, prefix="corral-stress-") as server:
        try:
            return _load_and_verify(args, server)
        finally:
            trouble = server_log_lines(server.home)  # every server this home had, the killed ones too
            if trouble:
                log("server log lines that tell of trouble:\n  " + "\n  ".join(trouble))


def _load_and_verify(args: argparse.Namespace, server: Server) -> dict[str, Any]:
    http = Http(server.url)
    blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "3600"], "gpus": 1, "workdir": server.home,
                                                 "name": "blocker"})
    wait_state(http, blocker["id"], {"RUNNING"}, timeout=30)
    parts = urllib.parse.urlsplit(server.url)
    cfg = {"host": parts.hostname, "port": parts.port, "timeout": 30.0, "seconds": args.seconds, "grace": 90.0,
           "keys": args.keys, "steps": args.steps, "workdir": server.home, "tag": uuid.uuid4().hex[:8],
           "max_attempts_unknown": 1_000_000}
    shares = [list(range(p, args.clients, args.processes)) for p in range(args.processes)]
    shares = [s for s in shares if s]
    ctx = mp.get_context("fork")
    ready, go, results = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_process, args=(s, cfg, ready, go, results), daemon=True) for s in shares]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=60):
            raise RuntimeError("a client process did not start within 60 s")
    log(f"blocker job {blocker['id']} holds the GPU; {args.clients} clients in {len(procs)} processes for "
        f"{args.seconds:.0f} s" + (f", kill -9 every {args.kill_every[0]:.0f}-{args.kill_every[1]:.0f} s" if args.kill else ""))
    t0 = time.monotonic()
    chaos = None
    if args.kill:
        chaos = Chaos(server, parts.port, tuple(args.kill_every), t0 + args.seconds, args.seed)
        chaos.start()
    first_pid, cpu0 = server.pid, process_cpu_s(server.pid)
    go.set()
    reports = [results.get(timeout=args.seconds + cfg["grace"] + 120) for _ in procs]
    for p in procs:
        p.join(timeout=10)
    if chaos is not None:
        chaos.join(timeout=180)
    wall = max(r["end"] for r in reports) - t0
    server_cpu = process_cpu_s(server.pid) - cpu0 if server.pid == first_pid else float("nan")
    logs = [lg for r in reports for lg in r["logs"]]

    log("verifying jobs and points through the API")
    http = Http(server.url, timeout=120)
    jobs = verify_jobs(http, logs, blocker["id"])
    points = verify_points(http, logs, args.keys, args.steps)
    http.close()

    errors: Counter[str] = Counter()
    samples: dict[str, str] = {}
    for lg in logs:
        errors.update(lg["errors"])
        for kind, text in lg["samples"].items():
            samples.setdefault(kind, text)
    retried: Counter[str] = Counter()
    for lg in logs:
        retried.update(lg["retried_answers"])
    partial = [p for lg in logs for p in lg["partial_batches"]]
    connection_errors = sum(n for kind, n in errors.items() if kind in CONNECTION_KINDS)
    other_errors = sum(n for kind, n in errors.items() if kind not in CONNECTION_KINDS)
    checks = {**jobs["checks"], **points["checks"],
              "no_http_error": other_errors == 0,
              "no_connection_error": connection_errors == 0 or args.kill,
              "acknowledged_batches_accepted_whole": not partial,
              "retried_batches_caught_by_batch_id": retried.get("skipped", 0) == 0,
              "chaos_ran": chaos is None or (not chaos.failure and len(chaos.kills) > 0)}
    acked_batches = sum(len(lg["acked_batches"]) for lg in logs)
    sub_lat = [x for lg in logs for x in lg["submit_lat"]]
    bat_lat = [x for lg in logs for x in lg["batch_lat"]]
    return {
        "benchmark": "stress_load",
        "database": "PostgreSQL" if server.db else "SQLite",
        "clients": args.clients, "processes": len(procs), "seconds": args.seconds, "wall_s": wall,
        "kill": args.kill,
        "restarts": len(chaos.kills) if chaos else 0,
        "restart_down_s": [k["down_s"] for k in chaos.kills] if chaos else [],
        "chaos_failure": chaos.failure if chaos else "",
        "submits_acknowledged": jobs["acknowledged"],
        "submits_per_s": jobs["acknowledged"] / wall,
        "batches_acknowledged": acked_batches,
        "batches_per_s": acked_batches / wall,
        "points_acknowledged": points["acknowledged_points"],
        "points_per_s": points["acknowledged_points"] / wall,
        "submit_latency_ms": {"p50": percentile(sub_lat, 50) * 1e3, "p99": percentile(sub_lat, 99) * 1e3,
                              "max": max(sub_lat, default=float("nan")) * 1e3},
        "batch_latency_ms": {"p50": percentile(bat_lat, 50) * 1e3, "p99": percentile(bat_lat, 99) * 1e3,
                             "max": max(bat_lat, default=float("nan")) * 1e3},
        "errors": dict(errors), "error_samples": samples,
        "batch_retries": sum(lg["batch_retries"] for lg in logs), "retried_batch_answers": dict(retried),
        "partial_batches": partial[:10],
        "jobs": {k: v for k, v in jobs.items() if k != "checks"},
        "points": {k: v for k, v in points.items() if k != "checks"},
        "server_cpu_s": server_cpu,
        "clients_cpu_s": sum(r["cpu_s"] for r in reports),
        "checks": checks,
        "verified": all(checks.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="Seconds of load (default 60).")
    parser.add_argument("--clients", type=int, default=64, help="Concurrent clients (default 64).")
    parser.add_argument("--processes", type=int, default=8, help="Client processes, clients spread over them (default 8).")
    parser.add_argument("--keys", type=int, default=4, help="Metric keys per batch (default 4).")
    parser.add_argument("--steps", type=int, default=100, help="Steps per key per batch (default 100).")
    parser.add_argument("--db", help="Database URL (default: SQLite in the server's home); PostgreSQL without "
                                     "options= gets a fresh schema, dropped afterwards.")
    parser.add_argument("--kill", action="store_true", help="kill -9 the server at random moments and restart it.")
    parser.add_argument("--kill-every", type=float, nargs=2, default=[5.0, 15.0], metavar=("MIN", "MAX"),
                        help="Seconds between kills, drawn uniformly (default 5 15).")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the kill moments (default 1).")
    parser.add_argument("--quick", action="store_true", help="10 s, 16 clients in 4 processes.")
    add_common_args(parser)
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.clients, args.processes = 10.0, 16, 4
    if args.clients < 1 or args.processes < 1 or args.seconds <= 0 or args.keys < 1 or args.steps < 1:
        parser.error("--clients, --processes, --keys, --steps and --seconds must be positive")
    if args.kill and args.profile:
        parser.error("--profile and --kill do not mix (the profiled server is the one killed)")
    if args.kill and args.seconds <= args.kill_every[0]:
        parser.error(f"--seconds must exceed the shortest time between kills ({args.kill_every[0]:.0f} s)")
    with database(args.db) as db:
        r = run(args, db)
    j, p, e = r["jobs"], r["points"], r["errors"]
    conn = sum(n for kind, n in e.items() if kind in CONNECTION_KINDS)
    http_errors = {kind: n for kind, n in e.items() if kind not in CONNECTION_KINDS}
    lines = [
        ("benchmark", "stress_load" + (" with kill -9" if r["kill"] else ""), ""),
        ("database", r["database"], ""),
        ("clients", r["clients"], f"in {r['processes']} processes, {r['seconds']:.0f} s of load ({r['wall_s']:.1f} s wall)"),
        ("submits", f"{r['submits_acknowledged']:,} = {r['submits_per_s']:.0f}", "acknowledged/s"),
        ("metric batches", f"{r['batches_acknowledged']:,} = {r['batches_per_s']:.0f}", "acknowledged/s"),
        ("metric points", f"{r['points_acknowledged']:,} = {r['points_per_s']:.0f}", "acknowledged/s"),
        ("submit latency", f"p50 {r['submit_latency_ms']['p50']:.1f}  p99 {r['submit_latency_ms']['p99']:.1f}  "
                           f"max {r['submit_latency_ms']['max']:.1f}", "ms"),
        ("batch latency", f"p50 {r['batch_latency_ms']['p50']:.1f}  p99 {r['batch_latency_ms']['p99']:.1f}  "
                          f"max {r['batch_latency_ms']['max']:.1f}", "ms"),
        ("HTTP errors", sum(http_errors.values()),
         " ".join(f"{k!r}={v}" for k, v in sorted(http_errors.items())) or "(5xx, 503 locked, 429, 4xx)"),
        ("connection errors", conn, " ".join(f"{k!r}={v}" for k, v in sorted(e.items()) if k in CONNECTION_KINDS)
         + (" (expected: the kills)" if r["kill"] else "")),
    ]
    if r["kill"]:
        down = r["restart_down_s"]
        lines += [
            ("restarts", r["restarts"], (f"kill -9 -> answering again: median {sorted(down)[len(down) // 2]:.2f} s, "
                                         f"max {max(down):.2f} s" if down else "") + (f" FAILED: {r['chaos_failure']}"
                                                                                     if r["chaos_failure"] else "")),
            ("lost answers", f"{j['submits_with_lost_answer']} submits, {r['batch_retries']} batches",
             "retried; retried batches answered " + (" ".join(f"{k}={v}" for k, v in
                                                              sorted(r["retried_batch_answers"].items())) or "-")),
        ]
    lines += [
        ("jobs listed", j["listed"], f"blocker {j['blocker_state']}, the others "
                                      + " ".join(f"{k}={v}" for k, v in sorted(j["states"].items()))),
        ("unacknowledged but stored", f"{j['unacknowledged_but_stored']} jobs, "
                                      f"{p['unacknowledged_but_stored_points']} points", "(allowed)"),
        ("server CPU", r["server_cpu_s"], "s" if r["server_cpu_s"] == r["server_cpu_s"] else "(restarted)"),
        ("clients CPU", r["clients_cpu_s"], "s"),
        ("verified", "yes" if r["verified"] else "NO: " + ", ".join(k for k, v in r["checks"].items() if not v), ""),
    ]
    emit(r, lines, args.json)
    if not r["verified"]:
        detail = {"jobs": {k: j[k] for k in ("missing", "misnamed", "duplicated_names", "unknown_ids")},
                  "points": p["problems"], "error_samples": r["error_samples"], "partial": r["partial_batches"]}
        print("verification failed: " + json.dumps(detail, indent=2), file=sys.stderr)
    return 0 if r["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
