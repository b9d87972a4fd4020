"""Shared plumbing for the benchmarks in bench/ (standard library only).

Each benchmark starts its own server in a fresh temporary home on port 0 (so only
127.0.0.1 traffic), measures, stops the server and removes the home. Nothing here
is imported by corral itself.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
# The venv's `corral`, next to the interpreter that runs the benchmark (falls back to the repo's venv).
CORRAL = os.path.join(os.path.dirname(sys.executable), "corral")
if not os.path.exists(CORRAL):
    CORRAL = os.path.join(REPO, ".venv", "bin", "corral")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}


def log(msg: str) -> None:
    """Progress notes go to stderr; figures go to stdout."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- statistics --------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of unsorted values; nan for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# -- HTTP --------------------------------------------------------------------------------------------


class Http:
    """One kept-alive HTTP/1.1 connection to the server."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.timeout = timeout
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            self.conn.request(method, path, body=payload, headers=headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # The server closes idle kept-alive connections (uvicorn: after 5 s). Retry once, only for GET.
            self.conn.close()
            if method != "GET":
                raise
            self.conn.request(method, path, body=payload, headers=headers)
            response = self.conn.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else None)

    def call(self, method: str, path: str, body: Any = None, expect: int | tuple[int, ...] = (200, 201)) -> Any:
        status, data = self.request(method, path, body)
        if status not in ((expect,) if isinstance(expect, int) else expect):
            raise RuntimeError(f"{method} {path} answered HTTP {status}: {json.dumps(data)[:500]}")
        return data

    def close(self) -> None:
        self.conn.close()


def list_active(http: Http, page: int = 10_000) -> list[dict[str, Any]]:
    """Every pending and running job, following the API's cursor (a page holds at most 10,000)."""
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        data = http.call("GET", f"/api/v1/jobs?scope=active&limit={page}&after={after}")
        out.extend(data["jobs"])
        if data.get("next_cursor") is None:
            return out
        after = data["next_cursor"]


def wait_state(http: Http, job_id: int, states: set[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = http.call("GET", f"/api/v1/jobs/{job_id}")
        if job["state"] in states:
            return job
        if time.monotonic() >= deadline:
            raise RuntimeError(f"job {job_id} is {job['state']} after {timeout:.0f} s (wanted {sorted(states)})")
        time.sleep(0.02)


def wait_end(http: Http, job_id: int, timeout: float) -> dict[str, Any]:
    """Long-poll the job until it is final."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.0, deadline - time.monotonic())
        job = http.call("GET", f"/api/v1/jobs/{job_id}/wait?timeout={min(left, 30.0):.3f}")
        if job["state"] in TERMINAL:
            return job
        if time.monotonic() >= deadline:
            raise RuntimeError(f"job {job_id} is still {job['state']} after {timeout:.0f} s")


def iso_to_epoch(value: str) -> float:
    """The API's ISO 8601 UTC times (2026-01-02T03:04:05.678Z) as epoch seconds."""
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# -- the server ----------------------------------------------------------------------------------------


class Server:
    """A corral server in a fresh temporary home; use as a context manager.

    On exit it stops the server (`corral down`, which leaves running jobs alive on
    purpose), then ends the supervisors of this home still around and their jobs
    (by pid, SIGKILL), and removes the home.
    """

    def __init__(self, gpus: int, *, keep_home: bool = False, profile: str | None = None,
                 prefix: str = "corral-bench-", db: str | None = None, extra: list[str] | None = None) -> None:
        self.gpus = gpus
        self.db = db
        self.extra = list(extra or [])
        self.keep_home = keep_home
        self.profile = os.path.abspath(profile) if profile else None
        self.home = tempfile.mkdtemp(prefix=prefix)
        self.url = ""
        self.pid = 0
        self._fg: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        up = ["up", "--home", self.home, "--port", "0", "--gpus", str(self.gpus), "--gpu-type", "A100",
              "--gpu-mem", "80G"]
        if self.db:
            up += ["--db", self.db]
        up += self.extra
        if self.profile:
            self._start_profiled(up)
        else:
            proc = subprocess.run([CORRAL, *up, "--detach"], capture_output=True, text=True, timeout=90)
            if proc.returncode != 0:
                raise RuntimeError(f"`corral up` failed ({proc.returncode}): {proc.stderr.strip()}")
            with open(os.path.join(self.home, "server.json")) as f:
                info = json.load(f)
            self.url, self.pid = info["url"], int(info["pid"])
        profiled = f", profiled to {self.profile}" if self.profile else ""
        log(f"server pid {self.pid} at {self.url}, home {self.home}{profiled}")

    def _start_profiled(self, up: list[str]) -> None:
        """The server in the foreground under cProfile (SIGINT at stop makes it write the profile)."""
        assert self.profile is not None
        with open(os.path.join(self.home, "server.log"), "ab") as out:
            self._fg = subprocess.Popen(
                [sys.executable, "-m", "cProfile", "-o", self.profile, "-m", "corral.cli", *up],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with open(os.path.join(self.home, "server.json")) as f:
                    info = json.load(f)
                if int(info["pid"]) == self._fg.pid:
                    self.url, self.pid = info["url"], self._fg.pid
                    return
            except (OSError, ValueError, KeyError):
                pass
            if self._fg.poll() is not None:
                raise RuntimeError(f"the profiled server exited at start ({self._fg.returncode})")
            time.sleep(0.05)
        raise RuntimeError("the profiled server did not start within 90 s")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CORRAL_HOME"] = self.home
        env.pop("CORRAL_URL", None)
        return env

    def stop(self) -> None:
        # Stop the server first, so no queued job starts while we clean up; then end what it left
        # running (supervisors of this home and their jobs), by pid.
        if self._fg is not None:
            if self._fg.poll() is None:
                self._fg.send_signal(signal.SIGINT)
                try:
                    self._fg.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    pass
        elif self.pid:
            try:
                subprocess.run([CORRAL, "--home", self.home, "down", "--timeout", "30"], capture_output=True,
                               timeout=45)
            except subprocess.TimeoutExpired:
                pass
        if self.pid:
            if _alive(self.pid):
                log(f"cleanup: server {self.pid} still alive; SIGKILL")
                _kill(self.pid)
        for pid in _processes_mentioning(self.home):
            log(f"cleanup: ending what the server left running: {_cmdline(pid)}")
            _kill_session(pid)
        if not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_session(pid: int) -> None:
    """A leftover supervisor: SIGKILL its job's process group, then the supervisor itself."""
    try:
        with open(os.path.join(f"/proc/{pid}", "cmdline"), "rb") as f:
            argv = f.read().split(b"\0")
        job_dir = argv[-2].decode() if len(argv) >= 2 else ""
        with open(os.path.join(job_dir, "started.json")) as f:
            os.killpg(int(json.load(f)["pid"]), signal.SIGKILL)
    except (OSError, ValueError, KeyError, IndexError):
        pass
    _kill(pid)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _processes_mentioning(home: str) -> list[int]:
    """Pids (not ours) whose command line names a path inside `home`: supervisors left behind."""
    found = []
    needle = home.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle in cmdline and _alive(int(entry)):
            found.append(int(entry))
    return found


# -- CPU accounting ---------------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (not idle or iowait), summed over CPUs."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _TICK


def background_cores(seconds: float = 1.0) -> float:
    """How many CPUs other work keeps busy right now (sampled over `seconds` while we sit idle)."""
    b0, t0 = machine_busy_s(), time.monotonic()
    time.sleep(seconds)
    return (machine_busy_s() - b0) / (time.monotonic() - t0)


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# -- output --------------------------------------------------------------------------------------------


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH",
                        help="Print the figures as one JSON document instead of lines (--json), "
                             "or also write them to PATH (--json PATH).")
    parser.add_argument("--keep-home", action="store_true", help="Leave the temporary home behind (for debugging).")
    parser.add_argument("--profile", metavar="PATH",
                        help="Run the server in the foreground under cProfile and write its profile to PATH "
                             "(figures are then slower than normal; read it with pstats).")


def emit(result: dict[str, Any], lines: list[tuple[str, Any, str]], json_opt: str | None) -> None:
    """Print `lines` (label, value, unit) aligned, or the JSON `result`."""
    if json_opt == "-":
        print(json.dumps(result, indent=2))
        return
    width = max(len(label) for label, _, _ in lines)
    for label, value, unit in lines:
        if isinstance(value, float):
            value = f"{value:.2f}" if abs(value) < 1e6 else f"{value:.0f}"
        print(f"{label:<{width}}  {value} {unit}".rstrip())
    if json_opt:
        with open(json_opt, "w") as f:
            json.dump(result, f, indent=2)


def verdict(value: float, floor: float, higher_is_better: bool) -> str:
    if math.isnan(value) or math.isnan(floor):  # nothing measured, or nothing to compare with: neither PASS nor MISS
        return "n/a"
    ok = value >= floor if higher_is_better else value <= floor
    return "PASS" if ok else "MISS"
