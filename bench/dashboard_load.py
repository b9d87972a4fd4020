"""The dashboard's load figures, in headless Chromium: a run page with 20 metrics of 1,000,000 points
each, and a queue of 10,000 jobs turned page by page.

Starts a server with one declared GPU in a fresh temporary home, creates a run and logs --metrics
keys of --points steps each through the API (packed columns, large batches, a few clients), then
drives Debian's Chromium with Playwright (1280x800, a fresh browser context per load, so nothing is
cached) to load /runs/ID --loads times after --warmup loads:

  * ready: navigation start -> document.body.dataset.chartsReady === "true" (every chart drew),
    noted by a MutationObserver inside the page on performance.now(), whose zero is navigation
    start, and the frame after it (requestAnimationFrame, then a task: painted), which the floor
    is on; also the first chart drawn and the longest main-thread task (PerformanceObserver
    "longtask") during the load;
  * zoom: after each load, a mouse drag across the first chart's middle fifth; mouse-up -> the chart
    redrew with the refetched range (data-zoomed="true").

Then it submits a blocker job holding the GPU and --jobs 1-GPU jobs behind it (all PENDING,
--clients concurrent connections), and loads /queue --loads times: navigation start -> the first
page's rows and "Showing 1–100 of N" painted, then --turns clicks on pager-next, each timed inside
the page from the click to the new range in the summary and its rows in the table, painted.

Checks: the run holds every point (API); the page shows one chart per key, each drew points and
says it stands for all --points; no page raised an error; the zoomed chart drew points; every
page of the queue showed 100 rows, the expected range and total, and none of the page before's.
Floors (issue 7): run page painted, median <= 1,000 ms; queue first page painted, median
<= 1,000 ms; page turn, median <= 300 ms. Exit status 1 when a floor is missed or a check fails.

    .venv/bin/python bench/dashboard_load.py       # 20 x 1,000,000 points, 10,000 jobs, 5 loads, 5 turns
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import shutil
import sys
import threading
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _common import (  # noqa: E402
    Http, Server, add_common_args, background_cores, emit, list_active, loadavg, log, median, verdict, wait_state,
)
from submit_throughput import RawPoster  # noqa: E402

RUN_PAGE_FLOOR_MS = 1000.0
QUEUE_FIRST_FLOOR_MS = 1000.0
QUEUE_TURN_FLOOR_MS = 300.0
PAGE = 100  # rows per queue page (pages/queue.js)
VIEWPORT = {"width": 1280, "height": 800}

# Installed before any page script: records, on performance.now() (0 = navigation start), when the
# first chart drew, when chartsReady turned "true" and the frame after it, the longest main-thread
# task, and the page's errors.
PROBE = """
(() => {
  const probe = window.__probe = {firstChart: null, ready: null, painted: null, longestTask: 0, errors: []};
  window.addEventListener("error", (e) => probe.errors.push(String(e.message || e)));
  window.addEventListener("unhandledrejection", (e) => probe.errors.push(String(e.reason)));
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) probe.longestTask = Math.max(probe.longestTask, entry.duration);
    }).observe({type: "longtask", buffered: true});
  } catch (err) { probe.longestTask = null; }
  new MutationObserver(() => {
    const now = performance.now();
    if (probe.firstChart === null && document.querySelector("[data-testid=chart][data-points]")) probe.firstChart = now;
    if (probe.ready === null && document.body && document.body.dataset.chartsReady === "true") {
      probe.ready = now;
      requestAnimationFrame(() => setTimeout(() => { probe.painted = performance.now(); }, 0));
    }
  }).observe(document, {subtree: true, childList: true, attributes: true,
    attributeFilter: ["data-charts-ready", "data-points"]});
})();
"""

# Installed before the queue's scripts: when (performance.now(), 0 = navigation start) the first
# page's rows and the summary EXPECTED were in the DOM, and the frame after that.
QUEUE_PROBE = """
(() => {
  const probe = window.__queueProbe = {shown: null, painted: null, errors: []};
  window.addEventListener("error", (e) => probe.errors.push(String(e.message || e)));
  window.addEventListener("unhandledrejection", (e) => probe.errors.push(String(e.reason)));
  const observer = new MutationObserver(() => {
    const summary = document.querySelector("[data-testid=pager-summary]");
    if (summary && summary.textContent === EXPECTED && document.querySelector("[data-testid=queue-row]")) {
      probe.shown = performance.now();
      observer.disconnect();
      requestAnimationFrame(() => setTimeout(() => { probe.painted = performance.now(); }, 0));
    }
  });
  observer.observe(document, {subtree: true, childList: true, characterData: true});
})();
"""

# One page turn: click pager-next, and time (inside the page) until the summary shows `expected`
# and the table's rows are new, plus the frame that paints them.
QUEUE_TURN = """
([expected, before]) => new Promise((resolve, reject) => {
  const rows = () => [...document.querySelectorAll("[data-testid=queue-row]")].map((r) => r.dataset.jobId);
  const shown = () => {
    const summary = document.querySelector("[data-testid=pager-summary]");
    const ids = rows();
    return summary && summary.textContent === expected && ids.length && ids[0] !== before;
  };
  const button = document.querySelector("[data-testid=pager-next]");
  if (!button || button.disabled) { reject(new Error("pager-next is missing or disabled")); return; }
  const t0 = performance.now();
  const observer = new MutationObserver(() => {
    if (!shown()) return;
    observer.disconnect();
    const dom = performance.now() - t0;
    requestAnimationFrame(() => setTimeout(() => resolve({dom, painted: performance.now() - t0, ids: rows()}), 0));
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
  button.click();
})
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", type=int, default=20, help="Metric keys in the run (charts on its page).")
    parser.add_argument("--points", type=int, default=1_000_000, help="Points per metric.")
    parser.add_argument("--batch-points", type=int, default=500_000,
                        help="Points per logged batch (the server takes at most 1,000,000).")
    parser.add_argument("--ingest-clients", type=int, default=4,
                        help="Concurrent clients logging the points, each with its own keys.")
    parser.add_argument("--jobs", type=int, default=10_000, help="Pending jobs in the queue (behind a blocker).")
    parser.add_argument("--clients", type=int, default=16, help="Concurrent connections submitting them.")
    parser.add_argument("--loads", type=int, default=5, help="Timed loads of each page (fresh browser context each).")
    parser.add_argument("--warmup", type=int, default=1, help="Untimed loads of each page first.")
    parser.add_argument("--turns", type=int, default=5, help="pager-next clicks timed on each queue load.")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium",
                        help="The Chromium to drive (default: Debian's, from PATH or /usr/bin/chromium).")
    parser.add_argument("--timeout", type=float, default=60.0, help="Seconds to wait for one page to get ready.")
    add_common_args(parser)
    args = parser.parse_args()
    if args.metrics < 1 or args.points < 2 or args.loads < 1 or args.warmup < 0 or args.turns < 0:
        parser.error("--metrics, --loads must be >= 1, --points >= 2, --warmup and --turns >= 0")
    if not 1 <= args.batch_points <= 1_000_000:
        parser.error("--batch-points must be 1 to 1,000,000 (the server's limit per request)")
    if args.turns and (args.turns + 1) * PAGE > args.jobs + 1:
        parser.error(f"--turns {args.turns} needs at least {(args.turns + 1) * PAGE} jobs in the queue")
    if not os.path.exists(args.chromium):
        parser.error(f"no Chromium at {args.chromium} (Debian: apt-get install chromium)")

    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with Server(gpus=1, keep_home=args.keep_home, profile=args.profile, prefix="corral-bench-dash-") as server:
        http = Http(server.url, timeout=300)
        run_id, ingest_s = log_run(server.url, http, args, problems)
        submit_s = fill_queue(server, http, args, problems)
        # On a shared machine the figures move with other work: note how much there was.
        load = {"background_cores_before": background_cores(1.0), "loadavg_1m_before": loadavg()}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            try:
                run_page = time_run_page(browser, server.url, run_id, args, problems)
                queue_page = time_queue_page(browser, server.url, args, problems)
            finally:
                browser.close()
        load["loadavg_1m_after"] = loadavg()
        # As many points as the charts drew: what the page asked for (its plot width).
        api_ms = time_series_api(server.url, run_id, max(run_page["points_drawn"], default=600), args)
        http.close()

    run_page["api_ms"] = api_ms
    result = report(args, run_page, queue_page, ingest_s, submit_s, load, problems)
    if problems:
        print("ERROR: " + "; ".join(problems[:10]), file=sys.stderr)
        return 1
    return 0 if result["verdict"] == "PASS" else 1


# -- the data ---------------------------------------------------------------------------------------


def log_run(url: str, http: Http, args: argparse.Namespace, problems: list[str]) -> tuple[str, float]:
    """One run holding --metrics keys x --points steps, logged in packed batches; returns (run id, seconds).

    The store skips steps that do not move a series forward, so each client owns some of the keys
    and sends their steps in order.
    """
    run_id = str(http.call("POST", "/api/v1/runs", {"project": "bench", "name": "dashboard",
                                                     "config": {"lr": 3e-4, "batch_size": 256}})["id"])
    keys = [f"train/metric_{k:02d}" for k in range(args.metrics)]
    clients = max(1, min(args.ingest_clients, args.metrics))
    owned = [list(range(c, args.metrics, clients)) for c in range(clients)]
    errors: list[str] = []

    def client(mine: list[int]) -> None:
        conn = Http(url, timeout=300)
        rng = np.random.default_rng(mine[0])
        per_batch = max(1, args.batch_points // len(mine))
        try:
            for lo in range(0, args.points, per_batch):
                if errors:
                    return
                steps = np.arange(lo, min(lo + per_batch, args.points), dtype="<i8")
                packed_steps = _b64(steps)
                packed_times = _b64((1.7e9 + steps * 0.05).astype("<f8"))
                metrics = []
                for k in mine:
                    # A decaying curve per key, with noise: what a loss looks like.
                    values = (1 + k) * np.exp(-steps / (args.points / (1 + k % 5))) + 0.02 * rng.standard_normal(len(steps))
                    metrics.append({"key": keys[k], "steps_i64": packed_steps, "values_f64": _b64(values.astype("<f8")),
                                    "times_f64": packed_times})
                answer = conn.call("POST", f"/api/v1/runs/{run_id}/metrics",
                                   {"batch_id": uuid.uuid4().hex, "metrics": metrics})
                if answer.get("accepted") != len(steps) * len(mine):
                    raise RuntimeError(f"batch at step {lo}: {answer}")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            conn.close()

    total = args.metrics * args.points
    log(f"logging {total:,} points to run {run_id}: {args.metrics} keys x {args.points:,} steps, "
        f"{clients} clients, batches of about {args.batch_points:,} points")
    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(mine,)) for mine in owned]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError("logging the run failed: " + "; ".join(errors[:3]))
    metrics = http.call("GET", f"/api/v1/runs/{run_id}")["metrics"]
    wrong = {k: metrics.get(k, {}).get("count") for k in keys if metrics.get(k, {}).get("count") != args.points}
    if wrong:
        problems.append(f"the run does not hold {args.points:,} points per key: {dict(list(wrong.items())[:3])}")
    log(f"stored {total:,} points in {elapsed:.1f} s ({total / elapsed:,.0f} points/s)")
    return run_id, elapsed


def fill_queue(server: Server, http: Http, args: argparse.Namespace, problems: list[str]) -> float:
    """A blocker holding the GPU and --jobs pending jobs behind it; returns the seconds the submits took."""
    blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "600"], "gpus": 1, "workdir": server.home,
                                                 "name": "blocker"})
    wait_state(http, blocker["id"], {"RUNNING"}, timeout=30)
    log(f"blocker job {blocker['id']} holds the GPU; submitting {args.jobs:,} jobs on {args.clients} connections")
    shares = [args.jobs // args.clients + (1 if i < args.jobs % args.clients else 0) for i in range(args.clients)]
    errors: list[str] = []

    def client(count: int, index: int) -> None:
        body = {"command": ["true"], "gpus": 1, "workdir": server.home, "name": f"train-{index}"}
        try:
            poster = RawPoster(server.url, "/api/v1/jobs", body)
            for _ in range(count):
                status, job = poster.post()
                if status != 201 or job.get("state") != "PENDING":
                    raise RuntimeError(f"submit answered HTTP {status}: {str(job)[:300]}")
            poster.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n, i)) for i, n in enumerate(shares) if n]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError("submitting the queue failed: " + "; ".join(errors[:3]))
    active = list_active(http)
    pending = sum(1 for j in active if j["state"] == "PENDING")
    if pending != args.jobs or len(active) != args.jobs + 1:
        problems.append(f"the queue holds {pending} pending of {len(active)} active jobs, expected {args.jobs} + 1")
    log(f"submitted {args.jobs:,} jobs in {elapsed:.1f} s ({args.jobs / elapsed:,.0f} submits/s)")
    return elapsed


def time_series_api(url: str, run_id: str, max_points: int, args: argparse.Namespace) -> list[float]:
    """The server's share of the run page: every key's series at a chart's width, all at once, no browser.

    Returns the ms from the first request sent to the last answer read, per round (--loads rounds).
    """
    keys = [f"train/metric_{k:02d}" for k in range(args.metrics)]
    conns = [Http(url, timeout=60) for _ in keys]
    rounds: list[float] = []
    try:
        for i in range(args.warmup + args.loads):
            gate = threading.Barrier(len(keys) + 1)
            threads = [threading.Thread(target=lambda c=c, k=k: (gate.wait(), c.call(
                "GET", f"/api/v1/runs/{run_id}/series?key={k}&max_points={max_points}"))) for c, k in zip(conns, keys)]
            for t in threads:
                t.start()
            gate.wait()
            began = time.perf_counter()
            for t in threads:
                t.join()
            if i >= args.warmup:
                rounds.append((time.perf_counter() - began) * 1000)
    finally:
        for c in conns:
            c.close()
    log(f"the {len(keys)} series from the API at once: " + " ".join(f"{ms:.0f}" for ms in rounds) + " ms")
    return rounds


# -- the browser ------------------------------------------------------------------------------------


def _context(browser: Any) -> Any:
    # en-US, so the pager's numbers read "10,001" whatever the machine's locale is.
    return browser.new_context(viewport=VIEWPORT, locale="en-US", timezone_id="UTC")


def _watch_errors(page: Any, problems: list[str], what: str) -> None:
    page.on("pageerror", lambda exc: problems.append(f"{what}: the page raised {exc}"))


def _wait(page: Any, condition: str, timeout_s: float) -> bool:
    """Wait until the JavaScript `condition` holds in the page; False when it did not in time."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(condition, timeout=timeout_s * 1000)
    except PlaywrightTimeout:
        return False
    return True


def time_run_page(browser: Any, url: str, run_id: str, args: argparse.Namespace,
                  problems: list[str]) -> dict[str, Any]:
    """Load /runs/ID --warmup + --loads times; the load times, the zoom times and what was drawn."""
    ready, painted, first, longest, zoom, asked, answered = [], [], [], [], [], [], []
    charts_seen: list[int] = []
    drawn: list[int] = []
    for i in range(args.warmup + args.loads):
        timed = i >= args.warmup
        context = _context(browser)
        try:
            context.add_init_script(PROBE)
            page = context.new_page()
            _watch_errors(page, problems, f"run page load {i + 1}")
            page.goto(f"{url}/runs/{run_id}", wait_until="commit")
            if not _wait(page, "window.__probe && window.__probe.painted !== null", args.timeout):
                problems.append(f"run page load {i + 1}: the charts were not all drawn within {args.timeout:.0f} s")
                continue
            probe = page.evaluate("window.__probe")
            # Where the time went: the series requests' first start and last answer (Resource Timing).
            fetched = page.evaluate("""() => {
              const s = performance.getEntriesByType("resource").filter((e) => e.name.includes("/series?") || e.name.includes("/series/batch?"));
              return s.length ? [Math.min(...s.map((e) => e.startTime)), Math.max(...s.map((e) => e.responseEnd))] : null;
            }""")
            points = page.eval_on_selector_all("[data-testid=chart]", "els => els.map(e => Number(e.dataset.points || 0))")
            keys = page.eval_on_selector_all("[data-testid=chart]", "els => els.map(e => e.dataset.key)")
            if len(points) != args.metrics or any(p <= 0 for p in points):
                problems.append(f"run page load {i + 1}: {len(points)} charts (expected {args.metrics}), "
                                f"{sum(p <= 0 for p in points)} without points")
            if probe["errors"]:
                problems.append(f"run page load {i + 1}: {probe['errors'][:3]}")
            # Each chart says how many points it stands for: all of them, though it drew a few hundred.
            notes = page.eval_on_selector_all("[data-testid=chart] .chart-note", "els => els.map(e => e.textContent)")
            whole = f"of {args.points:,} points"
            short = [n for n, drew in zip(notes, points) if drew < args.points and whole not in n]
            if short:
                problems.append(f"run page load {i + 1}: {len(short)} charts do not say '{whole}': {short[:2]}")
            zoom_ms = time_zoom(page, keys[0], args, problems) if keys else None
            if timed:
                ready.append(probe["ready"])
                painted.append(probe["painted"])
                first.append(probe["firstChart"])
                if fetched:
                    asked.append(fetched[0])
                    answered.append(fetched[1])
                if probe["longestTask"] is not None:
                    longest.append(probe["longestTask"])
                if zoom_ms is not None:
                    zoom.append(zoom_ms)
                charts_seen.append(len(points))
                drawn.extend(points)
            log(f"run page load {i + 1}{'' if timed else ' (warm-up)'}: ready {probe['ready']:.0f} ms, "
                f"painted {probe['painted']:.0f} ms, "
                f"first chart {probe['firstChart']:.0f} ms, longest task {probe['longestTask'] or 0:.0f} ms, "
                f"zoom {zoom_ms if zoom_ms is None else round(zoom_ms)} ms")
        finally:
            context.close()
    return {"ready_ms": ready, "painted_ms": painted, "first_chart_ms": first, "longest_task_ms": longest,
            "zoom_ms": zoom, "series_asked_ms": asked, "series_answered_ms": answered, "charts": charts_seen, "points_drawn": drawn}


def time_zoom(page: Any, key: str, args: argparse.Namespace, problems: list[str]) -> float | None:
    """Drag across the middle fifth of chart `key`; ms from mouse-up to its redraw with the refetched range."""
    over = page.locator(f'[data-testid=chart][data-key="{key}"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    if not box:
        problems.append(f"zoom: chart {key} has no plot area")
        return None
    page.evaluate("""() => {
      window.__mouseUp = null;
      window.addEventListener("mouseup", () => { window.__mouseUp = performance.now(); }, {capture: true, once: true});
    }""")
    page.evaluate("""(key) => {
      const chart = document.querySelector(`[data-testid=chart][data-key="${key}"]`);
      window.__zoomedAt = null;
      new MutationObserver((_, observer) => {
        if (chart.dataset.zoomed === "true" && !chart.classList.contains("loading")) {
          window.__zoomedAt = performance.now();
          observer.disconnect();
        }
      }).observe(chart, {attributes: true, attributeFilter: ["data-zoomed", "class", "data-points"]});
    }""", key)
    refetched: list[str] = []
    page.on("request", lambda request: refetched.append(request.url) if ("/series?" in request.url
            or "/series/batch?" in request.url) and "start=" in request.url else None)
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.4, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=4)
    page.mouse.up()
    if not _wait(page, "window.__zoomedAt !== null && window.__mouseUp !== null", args.timeout):
        problems.append(f"zoom: chart {key} did not redraw zoomed within {args.timeout:.0f} s")
        return None
    points = int(page.eval_on_selector(f'[data-testid=chart][data-key="{key}"]', "e => Number(e.dataset.points || 0)"))
    if points <= 0:
        problems.append(f"zoom: chart {key} drew no points in the zoomed range")
    if not refetched:
        problems.append(f"zoom: chart {key} did not ask the server for the zoomed range")
    return float(page.evaluate("window.__zoomedAt - window.__mouseUp"))


def time_queue_page(browser: Any, url: str, args: argparse.Namespace, problems: list[str]) -> dict[str, Any]:
    """Load /queue --warmup + --loads times, each followed by --turns pager-next clicks."""
    total = args.jobs + 1
    first_ms, first_dom_ms, turn_ms, turn_dom_ms = [], [], [], []
    for i in range(args.warmup + args.loads):
        timed = i >= args.warmup
        context = _context(browser)
        try:
            context.add_init_script(QUEUE_PROBE.replace("EXPECTED", json.dumps(_summary(0, total))))
            page = context.new_page()
            _watch_errors(page, problems, f"queue load {i + 1}")
            page.goto(f"{url}/queue", wait_until="commit")
            if not _wait(page, "window.__queueProbe && window.__queueProbe.painted !== null", args.timeout):
                problems.append(f"queue load {i + 1}: the first page was not shown within {args.timeout:.0f} s")
                continue
            probe = page.evaluate("window.__queueProbe")
            shown, shown_painted = float(probe["shown"]), float(probe["painted"])
            if probe["errors"]:
                problems.append(f"queue load {i + 1}: {probe['errors'][:3]}")
            ids = page.eval_on_selector_all("[data-testid=queue-row]", "els => els.map(e => e.dataset.jobId)")
            if len(ids) != min(PAGE, total):
                problems.append(f"queue load {i + 1}: the first page shows {len(ids)} rows, expected {min(PAGE, total)}")
            turns = []
            for k in range(1, args.turns + 1):
                expected = _summary(k * PAGE, total)
                try:
                    answer = page.evaluate(QUEUE_TURN, [expected, ids[0] if ids else ""])
                except Exception as exc:  # noqa: BLE001 - reported, and the page's other turns are skipped
                    problems.append(f"queue load {i + 1}, turn {k}: {str(exc).splitlines()[0]}")
                    break
                if len(answer["ids"]) != min(PAGE, total - k * PAGE) or set(answer["ids"]) & set(ids):
                    problems.append(f"queue load {i + 1}, turn {k}: {len(answer['ids'])} rows, "
                                    f"{len(set(answer['ids']) & set(ids))} repeated from the page before")
                ids = answer["ids"]
                turns.append(answer["painted"])
                if timed:
                    turn_ms.append(answer["painted"])
                    turn_dom_ms.append(answer["dom"])
            if timed:
                first_ms.append(shown_painted)
                first_dom_ms.append(shown)
            log(f"queue load {i + 1}{'' if timed else ' (warm-up)'}: first page {shown_painted:.0f} ms, turns "
                + " ".join(f"{t:.0f}" for t in turns) + " ms")
        finally:
            context.close()
    return {"first_page_ms": first_ms, "first_page_dom_ms": first_dom_ms, "turn_ms": turn_ms, "turn_dom_ms": turn_dom_ms, "total": total}


def _summary(offset: int, total: int) -> str:
    """The pager's text for the page at `offset` (en-US numbers, an en dash)."""
    return f"Showing {offset + 1:,}\u2013{min(offset + PAGE, total):,} of {total:,}"


# -- the figures ------------------------------------------------------------------------------------


def report(args: argparse.Namespace, run_page: dict[str, Any], queue_page: dict[str, Any], ingest_s: float,
           submit_s: float, load: dict[str, float], problems: list[str]) -> dict[str, Any]:
    def stats(values: list[float]) -> dict[str, float]:
        values = [float(v) for v in values]
        return {"median": median(values), "max": max(values, default=math.nan), "min": min(values, default=math.nan)}

    ready, painted = stats(run_page["ready_ms"]), stats(run_page["painted_ms"])
    first_chart, longest, zoom = stats(run_page["first_chart_ms"]), stats(run_page["longest_task_ms"]), stats(run_page["zoom_ms"])
    api, asked, answered = stats(run_page["api_ms"]), stats(run_page["series_asked_ms"]), stats(run_page["series_answered_ms"])
    first_page, first_page_dom = stats(queue_page["first_page_ms"]), stats(queue_page["first_page_dom_ms"])
    turn, turn_dom = stats(queue_page["turn_ms"]), stats(queue_page["turn_dom_ms"])
    verdicts = {
        "run_page": verdict(painted["median"], RUN_PAGE_FLOOR_MS, False),
        "queue_first_page": verdict(first_page["median"], QUEUE_FIRST_FLOOR_MS, False),
        "queue_page_turn": verdict(turn["median"], QUEUE_TURN_FLOOR_MS, False),
    }
    overall = "PASS" if all(v == "PASS" for v in verdicts.values()) else "MISS"
    drawn = run_page["points_drawn"]
    points = args.metrics * args.points
    result = {
        "benchmark": "dashboard_load", "metrics": args.metrics, "points_per_metric": args.points, "points": points,
        "jobs": args.jobs, "loads": args.loads, "warmup": args.warmup, "turns": args.turns,
        "viewport": VIEWPORT, "cpus": os.cpu_count(),
        "run_page": {"ready_ms": ready, "painted_ms": painted, "first_chart_ms": first_chart,
                     "longest_task_ms": longest, "zoom_ms": zoom, "series_api_at_once_ms": api,
                     "series_first_asked_ms": asked, "series_last_answered_ms": answered, "samples_ready_ms": run_page["ready_ms"],
                     "charts": run_page["charts"], "points_drawn_per_chart": {
                         "min": min(drawn) if drawn else 0, "max": max(drawn) if drawn else 0}},
        "queue_page": {"first_page_ms": first_page, "first_page_dom_ms": first_page_dom, "turn_ms": turn, "turn_dom_ms": turn_dom, "total": queue_page["total"],
                       "samples_first_page_ms": queue_page["first_page_ms"], "samples_turn_ms": queue_page["turn_ms"]},
        "setup": {"ingest_s": ingest_s, "ingest_points_per_s": points / ingest_s if ingest_s else float("nan"),
                  "submit_s": submit_s, "submits_per_s": args.jobs / submit_s if submit_s else float("nan")},
        "machine": load,
        "floors_ms": {"run_page_painted_median": RUN_PAGE_FLOOR_MS, "queue_first_page_median": QUEUE_FIRST_FLOOR_MS,
                      "queue_page_turn_median": QUEUE_TURN_FLOOR_MS},
        "verdicts": verdicts, "verdict": overall, "problems": problems, "verified": not problems,
    }
    n_turns = len(queue_page["turn_ms"])
    emit(result, [
        ("benchmark", "dashboard_load", f"(headless Chromium {VIEWPORT['width']}x{VIEWPORT['height']}, "
                                        f"{os.cpu_count()} CPUs shared with the server)"),
        (f"run page, {args.metrics} metrics x {args.points:,} points: all charts drawn and painted, median",
         painted["median"], f"ms ({verdicts['run_page']}, floor {RUN_PAGE_FLOOR_MS:.0f} ms; {args.loads} loads)"),
        ("  drawn and painted, max", painted["max"], "ms"),
        ("  chartsReady (before the paint), median / max", f"{ready['median']:.0f} / {ready['max']:.0f}", "ms"),
        ("  first chart drawn, median", first_chart["median"], "ms"),
        ("  longest main-thread task (those over 50 ms; 0: none), median / max", f"{longest['median']:.0f} / {longest['max']:.0f}", "ms"),
        ("  the page asked for its first series / had its last answer, median", f"{asked['median']:.0f} / "
                                                                                 f"{answered['median']:.0f}", "ms"),
        (f"  the same {args.metrics} series from the API at once (no browser), median / max",
         f"{api['median']:.0f} / {api['max']:.0f}", "ms"),
        ("  zoom (mouse-up -> redrawn with the refetched range), median / max",
         f"{zoom['median']:.0f} / {zoom['max']:.0f}", "ms"),
        ("  charts, points drawn per chart", f"{max(run_page['charts'], default=0)}, "
                                             f"{result['run_page']['points_drawn_per_chart']['min']}-"
                                             f"{result['run_page']['points_drawn_per_chart']['max']}", ""),
        (f"queue of {args.jobs:,} pending jobs: first page painted, median", first_page["median"],
         f"ms ({verdicts['queue_first_page']}, floor {QUEUE_FIRST_FLOOR_MS:.0f} ms; {args.loads} loads)"),
        ("  first page, max", first_page["max"], "ms"),
        ("  first page in the DOM (before the paint), median", first_page_dom["median"], "ms"),
        ("  page turn (click -> new rows painted), median", turn["median"],
         f"ms ({verdicts['queue_page_turn']}, floor {QUEUE_TURN_FLOOR_MS:.0f} ms; {n_turns} turns)"),
        ("  page turn, max", turn["max"], "ms"),
        ("  page turn to the DOM (before paint), median", turn_dom["median"], "ms"),
        ("setup: points logged / jobs submitted", f"{points:,} in {ingest_s:.1f} s / {args.jobs:,} in {submit_s:.1f} s", ""),
        ("other work on the machine", f"{load['background_cores_before']:.2f} CPUs busy before the browser "
         f"phase; load average {load['loadavg_1m_before']:.1f} -> {load['loadavg_1m_after']:.1f}", ""),
        ("verified", "yes" if not problems else f"NO ({len(problems)} problems)", ""),
        ("verdict", overall, ""),
    ], args.json)
    return result


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(array.tobytes()).decode()


if __name__ == "__main__":
    sys.exit(main())
