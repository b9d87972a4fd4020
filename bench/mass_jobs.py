#!/usr/bin/env python3
"""Mass starts and mass endings: does the scheduler reuse freed CPUs at once, and does the API stay responsive?

    .venv/bin/python bench/mass_jobs.py [--baseline REF] [--no-baseline] [--only reuse|health]
                                        [--queued 3000] [--window 40] [--jobs 1000] [--json [PATH]]

The two scenarios of issue 15 (item 3), each run on this checkout's code and, side by
side in the same run, on the code of --baseline (default `a0bfac0`, the last commit before the launcher, extracted with
`git archive` into a temporary directory and put first on the server's PYTHONPATH):

reuse   A server declaring 64 CPUs (no GPUs). A blocker holds all 64 CPUs while
        --queued jobs of one CPU each (`sleep 1`) are submitted; then it is
        cancelled and the queue drains for --window seconds. For every CPU that
        frees (a job's end, from its supervisor's result.json) while jobs are
        still waiting, the delay until a waiting job starts on it (the next job's
        start, from its started.json): the i-th end after the first 64 starts is
        matched with start number 64 + i. A freed CPU not reused when the window
        closes counts with the delay it had by then (a lower bound, marked >=).
        Reported twice: until the scheduler gave the CPU to a waiting job (the API's
        start_time: the scheduler's own delay) and until that job's process started
        (which adds the wait for the launch: a supervisor is a Python process, and a
        small machine boots only so many a second).
        Target: every freed CPU reused within 1 s.

health  A server declaring 1,000 CPUs. A probe thread sends `GET /api/v1/health`
        every 10 ms on its own connection for the whole scenario; a phase's figure
        is the longest any probe sent during it waited for its answer.
        launch: --jobs jobs (`cat FIFO`: each blocks until the benchmark opens and
                closes the FIFO's write end, so they all end together) wait behind
                a blocker holding every CPU; the blocker is cancelled and one pass
                starts them all. The phase lasts until every job's started.json exists.
        ending: the FIFO is opened and closed: every job ends at once. The phase
                lasts until every job's result.json exists and the API shows the
                first and the last COMPLETED (a listing of a thousand jobs every
                0.1 s would load the loop itself).
        batch2: a new batch of --jobs jobs (`true`) is submitted at once, every
                CPU free. The phase lasts until all of them have started (at most
                --window seconds: the figure is then a lower bound).
        Target: worst stall under 100 ms in each phase.

The figures depend on the machine: on a box with few cores, the supervisors that
start (a Python process each) compete with the server for the CPUs, which shows in
both the reuse delays and the stalls; the baseline runs under the same conditions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    REPO, Http, Server, add_common_args, background_cores, emit, iso_to_epoch, log, median, verdict, wait_state,
)

REUSE_TARGET_S = 1.0
STALL_TARGET_MS = 100.0


# -- code under test ---------------------------------------------------------------------------------


def extract_src(ref: str) -> str:
    """The `src` folder of a git ref, in a temporary directory (removed at exit by the caller)."""
    target = tempfile.mkdtemp(prefix="corral-bench-src-")
    archive = subprocess.run(["git", "-C", REPO, "archive", ref, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return os.path.join(target, "src")


@contextlib.contextmanager
def python_path(src: str) -> Iterator[None]:
    """Servers started inside run this code (PYTHONPATH comes before the venv's editable install)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


# -- helpers -------------------------------------------------------------------------------------------


def submit_all(url: str, bodies: list[dict[str, Any]], clients: int = 4) -> list[int]:
    """Submit jobs over a few kept-alive connections; their ids, in order."""
    local = threading.local()

    def one(body: dict[str, Any]) -> int:
        if not hasattr(local, "http"):
            local.http = Http(url, timeout=600)
        return int(local.http.call("POST", "/api/v1/jobs", body)["id"])

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, bodies))


def job_file(home: str, job_id: int, name: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(home, "jobs", str(job_id), name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def count_started(home: str, ids: list[int]) -> int:
    return sum(os.path.exists(os.path.join(home, "jobs", str(i), "started.json")) for i in ids)


class Prober(threading.Thread):
    """`GET /api/v1/health` every `interval` seconds; keeps (sent at, seconds to answer)."""

    def __init__(self, url: str, interval: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.http = Http(url, timeout=600)
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self.in_flight: float | None = None
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            sent = time.monotonic()
            self.in_flight = sent
            try:
                self.http.request("GET", "/api/v1/health")
            except Exception:  # noqa: BLE001 - counted, and the probe goes on
                self.errors += 1
                self.http.close()
                self.http = Http(self.url, timeout=600)
            took = time.monotonic() - sent
            self.in_flight = None
            self.samples.append((sent, took))
            self._halt.wait(max(0.0, self.interval - took))

    def worst_ms(self, start: float, end: float) -> float:
        """The longest wait of a probe sent in [start, end] (one still unanswered counts as waiting until now)."""
        waits = [took for sent, took in list(self.samples) if start <= sent <= end]
        if self.in_flight is not None and self.in_flight <= end:
            waits.append(time.monotonic() - self.in_flight)
        return 1000 * max(waits, default=0.0)

    def slow(self, start: float, end: float, over_s: float = 0.1) -> list[tuple[float, float]]:
        """Probes sent in [start, end] that waited longer than `over_s`: (sent, seconds after start; waited, ms)."""
        return [(round(sent - start, 2), round(1000 * took)) for sent, took in list(self.samples)
                if start <= sent <= end and took > over_s]

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=600)


# -- scenario: reuse ---------------------------------------------------------------------------------------


def scenario_reuse(queued: int, window: float, cpus: int = 64, profile: str | None = None) -> dict[str, Any]:
    with Server(0, prefix="corral-bench-mass-", profile=profile, extra=["--cpus", str(cpus), "--mem", "1000G", "--kill-grace", "1"]) as server:
        http = Http(server.url, timeout=600)
        blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "600"], "cpus": cpus, "workdir": server.home})
        wait_state(http, blocker["id"], {"RUNNING"}, 60)
        body = {"command": ["sleep", "1"], "cpus": 1, "workdir": server.home, "time": "10"}
        ids = submit_all(server.url, [body] * queued)
        log(f"reuse: {queued} jobs queued behind the blocker; cancelling it")
        http.call("POST", f"/api/v1/jobs/{blocker['id']}/cancel")
        released = time.time()
        deadline = time.monotonic() + window
        while time.monotonic() < deadline:
            done = sum(job_file(server.home, i, "result.json") is not None for i in ids[-cpus:])
            if done == cpus:
                break
            time.sleep(0.5)
        closed = time.time()
        starts = sorted(s["start_time"] for i in ids if (s := job_file(server.home, i, "started.json")))
        ends = sorted(r["end_time"] for i in ids if (r := job_file(server.home, i, "result.json")))
        # when the scheduler gave each job its CPU (the API's start_time), as opposed to when its process started
        decided = sorted(iso_to_epoch(j["start_time"]) for i in ids
                         if (j := http.call("GET", f"/api/v1/jobs/{i}"))["start_time"])
    delays, censored = _reuse_delays(starts, ends, cpus, queued, closed)
    decision_delays, decision_censored = _reuse_delays(decided, ends, cpus, queued, closed)
    first_wave = starts[min(cpus, len(starts)) - 1] - released if starts else float("nan")
    return {
        "cpus": cpus, "queued": queued, "window_s": window, "ran": len(ends),
        "reuses": len(delays), "not_reused_in_window": censored,
        "reuse_max_s": max(delays, default=float("nan")), "reuse_median_s": median(delays),
        "decision_max_s": max(decision_delays, default=float("nan")), "decision_median_s": median(decision_delays),
        "decision_censored": decision_censored,
        "first_wave_s": first_wave, "jobs_per_s": len(ends) / max(1e-9, closed - released),
    }


def _reuse_delays(starts: list[float], ends: list[float], cpus: int, queued: int, closed: float) -> tuple[list[float], int]:
    """For the k-th CPU freed while jobs waited, the delay until start number cpus + k; (delays, how many cut off)."""
    delays, censored = [], 0
    for k, end in enumerate(ends):
        if cpus + k >= queued:
            break  # nothing was waiting any more for this CPU
        if cpus + k < len(starts):
            delays.append(max(0.0, starts[cpus + k] - end))
        else:
            delays.append(max(0.0, closed - end))
            censored += 1
    return delays, censored


# -- scenario: health ---------------------------------------------------------------------------------------


def scenario_health(jobs: int, window: float, profile: str | None = None) -> dict[str, Any]:
    cpus = jobs
    with Server(0, prefix="corral-bench-mass-", profile=profile, extra=["--cpus", str(cpus), "--mem", "10000G", "--kill-grace", "1"]) as server:
        http = Http(server.url, timeout=600)
        fifo = os.path.join(server.home, "gate")
        os.mkfifo(fifo)
        blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "600"], "cpus": cpus, "workdir": server.home})
        wait_state(http, blocker["id"], {"RUNNING"}, 60)
        ids = submit_all(server.url, [{"command": ["cat", fifo], "cpus": 1, "workdir": server.home, "time": "30"}] * jobs)
        prober = Prober(server.url)
        prober.start()
        time.sleep(1)
        out: dict[str, Any] = {"jobs": jobs, "idle_worst_ms": prober.worst_ms(0, time.monotonic())}

        log(f"health: {jobs} jobs queued; cancelling the blocker: one pass starts them all")
        t0 = time.monotonic()
        http.call("POST", f"/api/v1/jobs/{blocker['id']}/cancel")
        deadline = t0 + 600
        while count_started(server.home, ids) < jobs and time.monotonic() < deadline:
            time.sleep(0.1)
        t1 = time.monotonic()
        out["launch_all_started_s"] = t1 - t0
        out["launch_worst_ms"] = prober.worst_ms(t0, t1)
        out["launch_slow_probes"] = prober.slow(t0, t1)

        log("health: opening the gate: every job ends at once")
        t0 = time.monotonic()
        writer = os.open(fifo, os.O_WRONLY)
        time.sleep(1.0)  # a reader that opens the FIFO a moment late still sees the writer
        os.close(writer)
        deadline = t0 + 600
        # watched through the files and one job at a time: listing a thousand jobs would load the loop itself
        while time.monotonic() < deadline:
            if all(job_file(server.home, i, "result.json") for i in ids) and \
                    http.call("GET", f"/api/v1/jobs/{ids[-1]}")["state"] == "COMPLETED" and \
                    http.call("GET", f"/api/v1/jobs/{ids[0]}")["state"] == "COMPLETED":
                break
            time.sleep(0.1)
        t1 = time.monotonic()
        out["ending_all_ended_s"] = t1 - t0
        out["ending_worst_ms"] = prober.worst_ms(t0, t1)
        out["ending_slow_probes"] = prober.slow(t0, t1)

        log(f"health: a new batch of {jobs} with every CPU free")
        t0 = time.monotonic()
        batch = submit_all(server.url, [{"command": ["true"], "cpus": 1, "workdir": server.home, "time": "5"}] * jobs)
        submitted = time.monotonic()
        deadline = submitted + window
        while count_started(server.home, batch) < jobs and time.monotonic() < deadline:
            time.sleep(0.1)
        t1 = time.monotonic()
        started = count_started(server.home, batch)
        out["batch2_submit_s"] = submitted - t0
        out["batch2_started"] = started
        out["batch2_all_started_s"] = t1 - submitted
        out["batch2_censored"] = started < jobs
        out["batch2_worst_ms"] = prober.worst_ms(t0, t1)
        prober.stop()
        out["probe_errors"] = prober.errors
        if started < jobs:
            http.call("GET", "/api/v1/health")
    return out


# -- main ---------------------------------------------------------------------------------------------------


def _profile(prefix: str | None, variant: str, scenario: str) -> str | None:
    return f"{prefix}.{variant}.{scenario}.prof" if prefix else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="a0bfac0",
                        help="git ref to compare with (default: a0bfac0, the last commit before the launcher)")
    parser.add_argument("--no-baseline", action="store_true", help="run only this checkout's code")
    parser.add_argument("--only", choices=["reuse", "health"], help="run one scenario")
    parser.add_argument("--queued", type=int, default=3000, help="reuse: one-second jobs queued (default 3000)")
    parser.add_argument("--window", type=float, default=40.0, help="seconds a phase may take before it is cut off")
    parser.add_argument("--jobs", type=int, default=1000, help="health: jobs (and CPUs) per batch (default 1000)")
    add_common_args(parser)
    args = parser.parse_args()

    variants = [("this", os.path.join(REPO, "src"))]
    extracted = None
    if not args.no_baseline:
        extracted = extract_src(args.baseline)
        variants.append((args.baseline, extracted))
    result: dict[str, Any] = {"background_cores": background_cores(), "cores": os.cpu_count()}
    lines: list[tuple[str, Any, str]] = [("background load", result["background_cores"], "cores busy")]
    try:
        for name, src in variants:
            with python_path(src):
                if args.only in (None, "reuse"):
                    log(f"[{name}] reuse scenario")
                    reuse = result.setdefault(name, {})["reuse"] = scenario_reuse(args.queued, args.window, profile=_profile(args.profile, name, "reuse"))
                    bound = ">= " if reuse["not_reused_in_window"] else ""
                    lines += [
                        (f"[{name}] reuse: first 64 started after", reuse["first_wave_s"], "s"),
                        (f"[{name}] reuse: freed CPU given to a job, median", reuse["decision_median_s"], "s"),
                        (f"[{name}] reuse: freed CPU given to a job, max",
                         f"{'>= ' if reuse['decision_censored'] else ''}{reuse['decision_max_s']:.2f}", "s"),
                        (f"[{name}] reuse: freed CPU reused, median", reuse["reuse_median_s"], "s"),
                        (f"[{name}] reuse: freed CPU reused, max", f"{bound}{reuse['reuse_max_s']:.2f}",
                         f"s  ({reuse['not_reused_in_window']} of {reuse['reuses']} not within the window) "
                         f"{verdict(reuse['reuse_max_s'], REUSE_TARGET_S, False)}"),
                        (f"[{name}] reuse: jobs run / throughput", reuse["ran"], f"in {args.window:.0f} s "
                         f"({reuse['jobs_per_s']:.1f} jobs/s)"),
                    ]
                if args.only in (None, "health"):
                    log(f"[{name}] health scenario")
                    health = result.setdefault(name, {})["health"] = scenario_health(args.jobs, args.window, profile=_profile(args.profile, name, "health"))
                    n = args.jobs
                    lines += [
                        (f"[{name}] health: idle worst probe", health["idle_worst_ms"], "ms"),
                        (f"[{name}] health: {n}-job pass, worst probe", health["launch_worst_ms"],
                         f"ms  (all started in {health['launch_all_started_s']:.1f} s) "
                         f"{verdict(health['launch_worst_ms'], STALL_TARGET_MS, False)}"),
                        (f"[{name}] health: {n} jobs ending, worst probe", health["ending_worst_ms"],
                         f"ms  (all ended in {health['ending_all_ended_s']:.1f} s) "
                         f"{verdict(health['ending_worst_ms'], STALL_TARGET_MS, False)}"),
                        (f"[{name}] health: new batch of {n}, worst probe", health["batch2_worst_ms"],
                         f"ms  {verdict(health['batch2_worst_ms'], STALL_TARGET_MS, False)}"),
                        (f"[{name}] health: new batch of {n}, all started after",
                         f"{'>= ' if health['batch2_censored'] else ''}{health['batch2_all_started_s']:.1f}",
                         f"s  ({health['batch2_started']} of {n} started)"),
                    ]
    finally:
        if extracted is not None:
            shutil.rmtree(os.path.dirname(extracted), ignore_errors=True)
    emit(result, lines, args.json)


if __name__ == "__main__":
    main()
