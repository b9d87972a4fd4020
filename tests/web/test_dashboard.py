"""The dashboard in a real browser (headless Chromium) against a live server with real jobs and runs.

One server for the module, with 4 declared GPUs whose figures come from recorded NVML frames
(so the cluster page has something to show on a machine without a GPU). Each test drives the
pages through their `data-testid` hooks (listed at the top of web/static/app.js) and writes a
screenshot of what it looked at into docs/screenshots/, which the README shows.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from corral.client import Client
from tests.conftest import Server, _kill_leftover_supervisors
from tests.helpers import wait_for
from tests.web.conftest import screenshot

REPLAY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "monitor", "data", "nvml_8gpu.jsonl")
SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]
STEPS = 5000


@dataclass
class Site:
    server: Server
    client: Client
    jobs: dict[str, int]
    runs: dict[str, int]

    def url(self, path: str) -> str:
        return self.server.url + path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[Site]:
    home = str(tmp_path_factory.mktemp("dash"))
    os.environ["CORRAL_GPU_REPLAY"] = REPLAY
    try:
        server = Server(home=home, extra=["--sample-interval", "0.5", "--cpus", "16", "--mem", "64G"]).start()
    finally:
        del os.environ["CORRAL_GPU_REPLAY"]
    try:
        yield _populate(server)
    finally:
        server.stop()
        _kill_leftover_supervisors(home)  # jobs outlive servers by design; not this test's


def _populate(server: Server) -> Site:
    """Jobs running, waiting, failed; two tracked runs; an alert rule that fired."""
    client = server.client()
    client.create_alert("job-failed", "state == FAILED", severity="critical", message="{name} failed")
    jobs = {
        "train": client.submit([sys.executable, "-u", "-c",
                                "import time\nfor i in range(10**6):\n print('epoch', i // 50, 'step', i, flush=True); time.sleep(0.2)"],
                               gpus=2, name="llama-ft", cpus=1, mem="2G", time="2h", labels={"team": "nlp"})["id"],
        "eval": client.submit(SLEEP, gpus=1, name="resnet-eval", time="1h", labels={"team": "vision"})["id"],
    }
    wait_for(lambda: all(client.get(j)["state"] == "RUNNING" for j in jobs.values()), timeout=30)
    jobs["failed"] = client.submit([sys.executable, "-c", "import sys; sys.stderr.write('RuntimeError: CUDA error: "
                                    "out of memory\\n'); sys.exit(1)"], name="oom-run")["id"]
    client.wait(jobs["failed"], timeout=30)
    jobs["big"] = client.submit(SLEEP, gpus=4, name="big-sweep", time="1h")["id"]  # waits: GPUs are taken
    runs = {}
    began = time.time() - 120  # two minutes of training: 5,000 steps at ~42 steps/s
    for name, lr in (("baseline", 3e-4), ("high-lr", 1e-3)):
        run = client.create_run(project="llama", name=name, job_id=jobs["train"] if name == "baseline" else None,
                                config={"lr": lr, "batch_size": 32, "total_steps": 20_000, "optimizer": "adamw"},
                                start_time=began)
        runs[name] = run["id"]
        steps = list(range(STEPS))
        times = [began + 120 * s / STEPS for s in steps]
        loss = [2.5 * math.exp(-s / (1500 if name == "baseline" else 900)) + 0.1 + 0.02 * math.sin(s / 7) for s in steps]
        client.log_metrics(run["id"], {"metrics": [
            {"key": "train/loss", "steps": steps, "values": loss, "times": times},
            {"key": "val/acc", "steps": steps[::100], "values": [1 - v / 3 for v in loss[::100]], "times": times[::100]},
            {"key": "lr", "steps": steps[::10], "values": [lr] * len(steps[::10]), "times": times[::10]},
        ]})
    client.finish_run(runs["high-lr"])
    wait_for(lambda: client.alerts(), timeout=20)
    return Site(server, client, jobs, runs)


def test_the_cluster_page_shows_each_gpu_its_holder_and_live_utilization(site, page):
    page.goto(site.url("/"))
    cards = page.locator("[data-testid=gpu-card]")
    cards.first.wait_for()
    assert cards.count() == 4
    held = page.locator(f"[data-testid=gpu-card][data-job-id='{site.jobs['train']}']")
    assert held.count() == 2
    wait_for(lambda: "%" in held.first.inner_text(), timeout=15)  # the replayed NVML figures, live
    assert "llama-ft" in held.first.inner_text()
    page.wait_for_function("document.querySelector('[data-testid=live-status]').textContent.includes('live')")
    screenshot(page, "cluster")


def test_the_queue_shows_a_pending_jobs_reason_and_filters_by_label(site, page):
    page.goto(site.url("/queue"))
    row = page.locator(f"[data-testid=queue-row][data-job-id='{site.jobs['big']}']")
    row.wait_for()
    assert row.get_attribute("data-state") == "PENDING"
    assert "Resources" in row.locator("[data-testid=queue-reason]").inner_text()
    running = page.locator("[data-testid=queue-row][data-state=RUNNING]")
    assert running.count() == 2
    screenshot(page, "queue")
    page.goto(site.url("/queue?label=team%3Dvision"))
    page.locator(f"[data-testid=queue-row][data-job-id='{site.jobs['eval']}']").wait_for()
    assert page.locator("[data-testid=queue-row]").count() == 1


def test_the_queue_takes_no_config_key_named_steps_for_a_jobs_total(site, page):
    # `steps` is as often an interval as a total: a run past it shows its step alone, not 1,299 / 200 (650%)
    began = time.time() - 60
    run = site.client.create_run(project="vision", name="eval-steps", job_id=site.jobs["eval"],
                                 config={"steps": 200}, start_time=began)
    steps = list(range(1300))
    site.client.log_metrics(run["id"], {"metrics": [{"key": "loss", "steps": steps, "values": [1.0] * len(steps),
                                                     "times": [began + s / 25 for s in steps]}]})
    page.goto(site.url("/queue"))
    row = page.locator(f"[data-testid=queue-row][data-job-id='{site.jobs['eval']}']")
    row.wait_for()
    wait_for(lambda: "step 1,299" in row.inner_text(), timeout=20)
    assert "/ 200" not in row.inner_text() and "650" not in row.inner_text()


def test_a_job_submitted_elsewhere_appears_in_the_queue_without_a_reload(site, page):
    page.goto(site.url("/queue"))
    page.locator("[data-testid=queue-row]").first.wait_for()
    page.wait_for_function("document.querySelector('[data-testid=live-status]').textContent.includes('live')")
    page.evaluate("window.__notReloaded = true")
    job = site.client.submit(SLEEP, gpus=4, name="late-arrival")["id"]
    try:
        # sooner than the 5 s between refreshes for GPU figures: it is the `jobs` event that brought it
        page.locator(f"[data-testid=queue-row][data-job-id='{job}']").wait_for(timeout=4_000)
        assert page.evaluate("window.__notReloaded") is True
    finally:
        site.client.cancel(job)


def test_the_job_page_tails_the_log_live_and_shows_timeline_and_charts(site, page):
    page.goto(site.url(f"/jobs/{site.jobs['train']}"))
    log = page.locator("[data-testid=log-stdout]")
    log.wait_for()
    wait_for(lambda: "step" in log.inner_text(), timeout=15)
    before = log.inner_text().count("\n")
    wait_for(lambda: log.inner_text().count("\n") > before, timeout=15)  # new lines arrive without a reload
    assert page.locator("[data-testid=job-state]").inner_text().endswith("running")
    events = page.locator("[data-testid=timeline] [data-event]")
    assert {"submitted", "started"} <= {events.nth(i).get_attribute("data-event") for i in range(events.count())}
    page.wait_for_function("document.body.dataset.chartsReady === 'true'", timeout=30_000)
    screenshot(page, "job")


def test_cancelling_from_the_job_page_cancels_the_job(site, page):
    job = site.client.submit(SLEEP, name="to-cancel", gpus=0, time="10m")["id"]  # backfilled beside big-sweep
    wait_for(lambda: site.client.get(job)["state"] == "RUNNING", timeout=20)
    page.goto(site.url(f"/jobs/{job}"))
    page.locator("[data-testid=job-cancel]").click()
    page.locator("[data-testid=confirm-yes]").click()
    wait_for(lambda: site.client.get(job)["state"] == "CANCELLED", timeout=20)
    page.wait_for_function("document.querySelector('[data-testid=job-state]').dataset.state === 'CANCELLED'",
                           timeout=30_000)
    assert page.locator("[data-testid=job-cancel]").count() == 0  # no cancel for what has ended


def test_the_failed_jobs_page_shows_its_diagnosis(site, page):
    page.goto(site.url(f"/jobs/{site.jobs['failed']}"))
    finding = page.locator("[data-testid=diagnosis] [data-cause=cuda_oom]")
    finding.wait_for(timeout=30_000)
    assert "out of memory" in finding.inner_text()


def test_the_job_page_says_what_diagnosis_could_not_check(site, page):
    page.goto(site.url(f"/jobs/{site.jobs['eval']}"))
    unchecked = page.locator("[data-testid=diagnosis] [data-testid=unchecked]")
    unchecked.wait_for(timeout=30_000)
    # a job running for seconds: its GPU samples are too few to judge, and the page says so
    assert "GPU use of its GPU" in unchecked.inner_text() and "GPU findings need" in unchecked.inner_text()


def test_a_runs_chart_draws_the_logged_points_and_zooms_by_asking_the_server(site, page):
    page.goto(site.url(f"/runs/{site.runs['baseline']}"))
    page.wait_for_function("document.body.dataset.chartsReady === 'true'", timeout=30_000)
    chart = page.locator("[data-testid=chart][data-key='train/loss']")
    points = int(chart.get_attribute("data-points"))
    assert 100 <= points <= STEPS  # downsampled to the chart's width, never more than was logged
    assert int(page.locator("[data-testid=chart][data-key='val/acc']").get_attribute("data-points")) == STEPS // 100
    assert "batch_size" in page.locator("[data-testid=config-table]").inner_text()
    screenshot(page, "run")
    refetched: list[str] = []
    page.on("request", lambda r: refetched.append(r.url) if "/series" in r.url and "start=" in r.url else None)
    box = chart.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.40, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    page.wait_for_function("document.querySelector(\"[data-testid=chart][data-key='train/loss']\").dataset.zoomed === 'true'",
                           timeout=30_000)
    wait_for(lambda: refetched, timeout=30)  # the zoomed range comes from the server, not from what was shown
    assert int(chart.get_attribute("data-points")) > 0
    chart.locator(".u-over").dblclick()
    page.wait_for_function("document.querySelector(\"[data-testid=chart][data-key='train/loss']\").dataset.zoomed !== 'true'",
                           timeout=30_000)
    page.locator("[data-testid=x-axis-toggle]").click()
    page.wait_for_function("document.querySelector('[data-testid=x-axis-toggle]').dataset.mode === 'time'")


def test_new_metrics_reach_an_open_run_page_live(site, page):
    run = site.runs["baseline"]
    page.goto(site.url(f"/runs/{run}"))
    page.wait_for_function("document.body.dataset.chartsReady === 'true'", timeout=30_000)
    site.client.log_metrics(run, {"points": [{"key": "grad_norm", "step": s, "value": 1.0 / (s + 1)} for s in range(50)]})
    page.locator("[data-testid=chart][data-key='grad_norm']").wait_for(timeout=30_000)


def test_runs_table_and_compare_overlay_two_runs_with_their_config_differences(site, page):
    page.goto(site.url("/runs"))
    rows = page.locator("[data-testid=run-row]")
    rows.first.wait_for()
    assert rows.count() >= 2
    screenshot(page, "runs")
    for run in site.runs.values():
        page.locator(f"[data-testid=run-select][value='{run}']").check()
    page.locator("[data-testid=compare-button]").click()
    page.wait_for_url("**/compare?runs=*")
    page.wait_for_function("document.body.dataset.chartsReady === 'true'", timeout=30_000)
    differs = page.locator("[data-testid=config-table] [data-differs=true]")
    assert differs.count() >= 1 and "lr" in differs.first.inner_text()
    screenshot(page, "compare")


def test_the_alerts_page_lists_the_firing_and_acknowledges_it(site, page):
    page.goto(site.url("/alerts"))
    row = page.locator("[data-testid=firing-row]").first
    row.wait_for()
    assert "job-failed" in row.inner_text() and "critical" in row.inner_text().lower()
    # about a job that failed: "fired (ended job)", never a reassuring "resolved"
    assert row.get_attribute("data-status") == "fired" and "fired (ended job)" in row.inner_text()
    assert page.locator("[data-testid=rule-row]").count() == 1
    screenshot(page, "alerts")
    firing = int(row.get_attribute("data-firing-id"))
    row.locator("[data-testid=ack-button]").click()
    wait_for(lambda: site.client.alerts(unacknowledged=True) == [], timeout=10)
    assert any(f["id"] == firing and f["acknowledged_at"] for f in site.client.alerts())


def test_pages_are_keyboard_reachable_and_readable_at_1024_wide(site, page):
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(site.url("/queue"))
    page.locator("[data-testid=queue-row]").first.wait_for()
    reached = set()
    for _ in range(8):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement && document.activeElement.dataset.testid"))
    assert {"nav-cluster", "nav-queue", "nav-runs", "nav-alerts"} <= reached
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0  # nothing cut off sideways


def test_an_unknown_job_page_says_what_happened(site, page):
    page.goto(site.url("/jobs/999999"))
    said = page.locator("[data-testid=empty-state]")
    said.wait_for()
    assert "No job 999999" in said.inner_text() and "queue" in said.inner_text()


def test_empty_pages_say_what_to_do(page, tmp_path):
    server = Server(home=str(tmp_path / "empty")).start()
    try:
        for path, advice in (("/queue", "corral submit"), ("/runs", "corral.init"), ("/alerts", "corral alert create")):
            page.goto(server.url + path)
            page.locator("[data-testid=empty-state]").first.wait_for()
            said = " ".join(page.locator("[data-testid=empty-state]").all_inner_texts())
            assert advice in said, (path, said)
    finally:
        server.stop()
        _kill_leftover_supervisors(str(tmp_path))


def test_times_are_shown_in_the_viewers_time_zone(site, page):
    started = site.client.get(site.jobs["eval"])["start_time"]
    page.goto(site.url(f"/jobs/{site.jobs['eval']}"))
    page.locator("[data-testid=timeline]").wait_for()
    expected = page.evaluate(f"new Date({started!r}).toLocaleTimeString()")  # Europe/Berlin in this context
    shown = page.locator("[data-testid=timeline]").inner_text()
    assert expected[:5] in shown



# -- issue 16: charts, arrays, the runs table and durations read right -------------------------------

T0 = 1_700_000_000.0  # when the imported TensorBoard events were written (Nov 2023)
CLOCK = r"^\d{1,2}:\d{2}(:\d{2})?( ?[AP]M)?$"  # a time of day, as the axis of a short span reads
ELAPSED = r"^(\d+(\.\d+)?s|\d+m \d\ds|\d+h \d\dm|\d+d \d+h)$"  # fmtDuration's forms


@pytest.fixture(scope="module")
def imported(site, tmp_path_factory) -> dict[str, dict]:
    """Two TensorBoard runs imported: one whose events were logged over 4 minutes in 2023 (its writer
    opened the file today), one whose single event is stamped a moment before its writer opened."""
    import tensorboardX

    from corral.sdk.tensorboard import import_tensorboard

    root = tmp_path_factory.mktemp("tb")
    with tensorboardX.SummaryWriter(str(root / "relogged")) as writer:
        for i in range(5):
            writer.add_scalar("loss", 1.0 / (i + 1), i, walltime=T0 + 60 * i)
    with tensorboardX.SummaryWriter(str(root / "instant")) as writer:
        writer.add_scalar("loss", 0.5, 0, walltime=time.time() - 0.3)
    return {r["name"]: r for r in import_tensorboard(str(root), client=site.client, project="tb-import")}


def test_a_one_sample_chart_spans_minutes_around_its_sample_not_years(page, tmp_path):
    # samples every 3 s: the job is killed for its memory right after its first one
    server = Server(home=str(tmp_path / "oom"), extra=["--sample-interval", "3"]).start()
    try:
        client = server.client()
        go = tmp_path / "go"
        job = client.submit([sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(go)!r}): "
                             "time.sleep(0.01)\nb = bytearray(400 << 20)\ntime.sleep(60)"], mem="100M", time="2")["id"]
        wait_for(lambda: client.metrics(job, "rss_mb")["points"], timeout=30)
        go.touch()
        ended = client.wait(job, timeout=60)
        assert ended["state"] == "OUT_OF_MEMORY"
        (sample_time, _), *_ = client.metrics(job, "rss_mb")["points"]
        page.goto(server.url + f"/jobs/{job}")
        page.wait_for_function("document.body.dataset.chartsReady === 'true'", timeout=30_000)
        for key in ("cpu_utilization", "rss_mb"):
            chart = page.locator(f"[data-testid=chart][data-key={key}]")
            assert int(chart.get_attribute("data-points")) >= 1
            low, high = float(chart.get_attribute("data-x-min")), float(chart.get_attribute("data-x-max"))
            assert low <= sample_time <= high and high - low <= 600, (key, low, high)  # minutes, not 2027-2029
            ticks = json.loads(chart.get_attribute("data-x-ticks"))
            assert ticks and all(re.match(CLOCK, t) for t in ticks), ticks
        page.locator("[data-testid=chart][data-key=rss_mb]").scroll_into_view_if_needed()
        screenshot(page, "job-oom-one-sample")
    finally:
        server.stop()
        _kill_leftover_supervisors(str(tmp_path / "oom"))


def test_an_array_jobs_page_lists_its_tasks_their_states_and_summary(site, page):
    array = site.client.submit([sys.executable, "-c", "import os, sys; sys.exit(os.environ['CORRAL_ARRAY_TASK_ID'] == '2')"],
                               array="0-3", name="sweep-array", time="5m")["id"]
    wait_for(lambda: site.client.get(array)["state"] not in ("PENDING", "RUNNING"), timeout=60)
    page.goto(site.url(f"/jobs/{array}"))
    rows = page.locator("[data-testid=array-task-row]")
    rows.first.wait_for()
    assert rows.count() == 4
    states = {rows.nth(i).get_attribute("data-task-id"): rows.nth(i).get_attribute("data-state") for i in range(4)}
    assert states == {"0": "COMPLETED", "1": "COMPLETED", "2": "FAILED", "3": "COMPLETED"}
    links = [rows.nth(i).locator("a").get_attribute("href") for i in range(4)]
    assert links == [f"/jobs/{array}_{t}" for t in range(4)]
    summary = page.locator("[data-testid=array-summary]").inner_text()
    assert "4 tasks" in summary and "3 completed" in summary and "1 failed" in summary and "ended failed" in summary
    text = page.locator("main").inner_text()
    assert "never started" not in text and "without starting" not in text
    screenshot(page, "job-array")
    rows.nth(2).locator("a").click()
    page.wait_for_url(f"**/jobs/{array}_2")
    page.wait_for_function("document.querySelector('[data-testid=job-state]') && "
                           "document.querySelector('[data-testid=job-state]').dataset.state === 'FAILED'")


def test_a_runs_system_charts_are_drawn_against_time_not_as_steps(site, page):
    run = site.runs["baseline"]  # its job's samples reach it as system/... metrics
    wait_for(lambda: any(k.startswith("system/") for k in site.client.get_run(run)["metrics"]), timeout=30)
    page.goto(site.url(f"/runs/{run}"))
    page.wait_for_function("document.body.dataset.chartsReady === 'true'", timeout=30_000)
    system = page.locator("[data-testid=chart][data-key^='system/']").first
    loss = page.locator("[data-testid=chart][data-key='train/loss']")
    assert system.get_attribute("data-x-axis") == "time"
    assert "time since the run started" in system.locator("[data-testid=chart-x-axis]").inner_text()
    ticks = json.loads(system.get_attribute("data-x-ticks"))
    assert ticks and all(re.match(ELAPSED, t) for t in ticks), ticks  # "2m 05s", not "125" read as a step
    assert loss.get_attribute("data-x-axis") == "step"
    page.locator("[data-testid=x-axis-toggle]").click()  # the toggle moves training charts only
    page.wait_for_function("document.querySelector(\"[data-testid=chart][data-key='train/loss']\").dataset.xAxis === 'time'")
    assert system.get_attribute("data-x-axis") == "time"


def test_the_runs_table_fits_a_1400_px_window(site, imported, page):
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(site.url("/runs"))
    page.locator("[data-testid=run-row]").first.wait_for()
    assert page.locator("[data-testid=run-row]").count() >= 4  # configs that differ, seven metrics
    page.wait_for_function("document.querySelectorAll('[data-testid=run-row]').length >= 4")
    # a refresh (the running run logs) redraws it, as a new table: measure that one
    page.evaluate("document.querySelector('table.runs').dataset.drawn = 'first'")
    page.wait_for_function("document.querySelector('table.runs') && "
                           "document.querySelector('table.runs').dataset.drawn !== 'first'", timeout=30_000)
    right = page.evaluate("document.querySelector('table.runs').getBoundingClientRect().right")
    box = page.evaluate("document.querySelector('table.runs').parentElement.getBoundingClientRect().right")
    assert right <= box <= 1400, (right, box)
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    screenshot(page, "runs-1400")


def test_an_imported_tensorboard_runs_duration_is_the_span_of_its_events(site, imported, page):
    expected = {"relogged": "4m 00s", "instant": "0s"}
    page.goto(site.url("/runs?project=tb-import"))
    rows = page.locator("[data-testid=run-row]")
    rows.first.wait_for()
    column = page.evaluate("[...document.querySelectorAll('table.runs thead th')].findIndex((th) => "
                           "th.innerText.trim().startsWith('Duration'))")
    for name, shown in expected.items():
        cell = page.locator(f"[data-testid=run-row][data-run-id='{imported[name]['id']}'] td").nth(column)
        assert cell.inner_text() == shown, name  # never "-0s", nor minus three years
    for name, shown in expected.items():
        page.goto(site.url(f"/runs/{imported[name]['id']}"))
        assert page.locator("[data-testid=run-duration]").inner_text() == shown, name
