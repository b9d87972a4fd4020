// Job (/jobs/ID): spec, state timeline, its srun steps, live log tail, system charts, alerts, diagnosis,
// efficiency, its runs; cancel (with a confirm step), hold and release where the state allows
// and the viewer may. Its logs and diagnosis are its owner's (and admins'): for anyone else the
// server answers 403 and the page says who may read them. Once the server has shown us the logs,
// the live connection asks for ?job=ID, so `log` events carry this job's new text.

import {h, replace, facts, bar} from "../lib/dom.js";
import {api, apiBytes, post, errorState, emptyState, isAbort, withQuery, ApiError} from "../lib/api.js";
import {elapsedEl, fmtDuration, fmtLimit, fmtMB, fmtNumber, fmtPct, severityBadge, stateBadge, timeEl, toEpoch} from "../lib/format.js";
import {allowedActions, commandText, reasonText, resourcesText} from "../lib/jobs.js";
import {TimeChart, readyCounter} from "../lib/chart.js";
import {identity, mayManage, onIdentity} from "../lib/session.js";
import {ArrayTasks, isArrayJob} from "./job_array.js";
import {rerunButtons} from "../lib/relaunch.js";

const SYSTEM_CHARTS = [
  ["gpu_utilization", "GPU utilization", "%"],
  ["gpu_memory_mb", "GPU memory", "MB"],
  ["cpu_utilization", "CPU utilization", "%"],
  ["rss_mb", "Memory (RSS)", "MB"],
];
const LOG_LIMIT = 512 * 1024;  // characters kept per pane; older text is dropped from the top

/** When the job should end, and on what grounds: its run's ETA is a guess, its time limit a bound. */
function expectedEnd(job) {
  if (!job.expected_end) return null;
  const grounds = job.expected_end_source === "eta" ? "its tracked run's ETA"
    : job.state === "PENDING" ? "estimated start + time limit" : "its time limit";
  return h("span", {class: "muted", "data-testid": "expected-end", "data-source": job.expected_end_source},
    " · expected end ", timeEl(job.expected_end), ` (${grounds})`);
}

export function mount(main, ctx) {
  const id = ctx.params[0];
  let job = null;
  let confirming = false;
  const rerunState = {};  // a rerun of another user's job being confirmed (lib/relaunch.js)
  let charts = [];

  const head = h("div", {class: "page-head job-head"}, h("h1", {}, `Job #${id}`));
  const actions = h("div", {class: "actions"});
  const message = h("div", {class: "action-error", role: "alert", "data-testid": "action-error", hidden: true});
  const specBox = h("section", {class: "card", "aria-labelledby": "spec-h"}, h("h2", {id: "spec-h"}, "Spec"));
  const timelineBox = h("section", {class: "card", "aria-labelledby": "timeline-h"}, h("h2", {id: "timeline-h"}, "Timeline"));
  const logs = new Logs(id, ctx);
  const chartsBox = h("div", {class: "charts small-charts"});
  const diagnosisBox = h("div", {"data-testid": "diagnosis"}, h("p", {class: "muted"}, "Loading…"));
  const efficiencyBox = h("div", {"data-testid": "efficiency"}, h("p", {class: "muted"}, "Loading…"));
  const alertsBox = h("div", {}, h("p", {class: "muted"}, "Loading…"));
  const runsBox = h("div", {}, h("p", {class: "muted"}, "Loading…"));
  const tasks = new ArrayTasks(id, ctx);
  const stepsBox = h("section", {class: "card", "aria-labelledby": "steps-h", "data-testid": "steps", hidden: true});
  const chartsCard = h("section", {class: "card", "aria-labelledby": "charts-h"}, h("h2", {id: "charts-h"}, "Resources over time"), chartsBox);
  const body = h("div", {class: "job-body", hidden: true},
    h("div", {class: "two"}, specBox, timelineBox),
    tasks.el,
    stepsBox,
    logs.el,
    chartsCard,
    h("div", {class: "two"},
      h("section", {class: "card", "aria-labelledby": "diag-h"}, h("h2", {id: "diag-h"}, "Diagnosis"), diagnosisBox),
      h("section", {class: "card", "aria-labelledby": "eff-h"}, h("h2", {id: "eff-h"}, "Efficiency"), efficiencyBox)),
    h("div", {class: "two"},
      h("section", {class: "card", "aria-labelledby": "alerts-h"}, h("h2", {id: "alerts-h"}, "Alerts"), alertsBox),
      h("section", {class: "card", "aria-labelledby": "runs-h"}, h("h2", {id: "runs-h"}, "Runs"), runsBox)));
  const status = h("div", {}, h("p", {class: "muted"}, "Loading the job…"));
  main.append(head, message, status, body);
  ctx.onLeave(() => charts.forEach((c) => c.destroy()));
  ctx.onLeave(onIdentity(() => { if (job) renderActions(); }));

  async function loadJob() {
    let fresh;
    try {
      fresh = await api(`/api/v1/jobs/${encodeURIComponent(id)}`, {signal: ctx.signal});
    } catch (err) {
      if (isAbort(err)) return;
      if (!job) {
        replace(status, err instanceof ApiError && err.status === 404
          ? emptyState(`No job ${id}. `, h("a", {href: "/queue"}, "See the queue"), " for the jobs there are.")
          : errorState(err, loadJob, {what: `job ${id}`}));
        document.body.dataset.chartsReady = "true";  // no charts will come
      }
      return;
    }
    apply(fresh);
  }

  /** Show a newer view of the job; reload what its change of state affects. */
  function apply(fresh) {
    const before = job;
    if (before && JSON.stringify(before) === JSON.stringify(fresh)) return;  // nothing to redraw (keeps focus)
    job = fresh;
    status.replaceChildren();
    body.hidden = false;
    ctx.title(`Job #${job.ref || job.id} ${job.name || ""}`);
    renderHead();
    renderSpec();
    renderTimeline();
    logs.setJob(job);
    if (isArrayJob(job)) {
      showArray(!before);
      return;
    }
    if (job.start_time && (!job.command?.length || job.interactive)) loadSteps();  // srun in a script or salloc makes steps
    if (!before) {
      logs.start(job);
      makeCharts();
      loadDiagnosis();
      loadEfficiency();
      loadAlerts();
      loadRuns();
    } else if (before.state !== job.state || before.restarts !== job.restarts) {
      if (before.restarts !== job.restarts) logs.start(job);
      else logs.catchUp();
      if (before.state === "PENDING" && job.state !== "PENDING") makeCharts();
      loadDiagnosis();
      loadEfficiency();
      loadRuns();
    }
  }

  /** An array never runs itself: its tasks take the place of logs, charts and the reports. */
  function showArray(first) {
    tasks.load();
    if (!first) return;
    tasks.el.hidden = false;
    logs.el.hidden = true;
    chartsCard.hidden = true;
    document.body.dataset.chartsReady = "true";  // no charts will come
    const perTask = (what) => h("p", {class: "muted"}, `An array's ${what} is each task's: open a task below.`);
    replace(diagnosisBox, perTask("diagnosis"));
    replace(efficiencyBox, perTask("efficiency report"));
    loadAlerts();
    loadRuns();
  }

  function renderHead() {
    replace(head,
      h("h1", {}, `Job #${job.ref || job.id} `, h("span", {class: "job-name"}, job.name || "")),
      stateBadge(job.state, {held: job.held, testid: "job-state"}),
      actions);
    renderActions();
  }

  function renderActions() {
    const reruns = rerunButtons(job, job.ref && !job.ref.includes("[") ? job.ref : String(job.id), {
      navigate: ctx.navigate, signal: ctx.signal, state: rerunState,
      onError: (err) => {
        replace(message, h("strong", {}, `✗ Could not run job #${id} again: `), err.message, err.hint ? ` (${err.hint})` : "");
        message.hidden = false;
      }});
    renderJobActions();
    if (reruns.length) actions.append(" ", ...reruns);
  }

  function renderJobActions() {
    const allowed = allowedActions(job);
    if (mayManage(job) === "no") {
      // the server would refuse: say why instead of offering buttons that cannot work
      confirming = false;
      const me = identity();
      replace(actions, allowed.cancel || allowed.hold || allowed.release
        ? h("span", {class: "muted small", "data-testid": "job-actions-note"}, me && me.scope === "read"
          ? "Read-only access (read scope): no actions."
          : `Only ${job.user} or an admin can cancel, hold or release this job.`)
        : null);
      return;
    }
    const buttons = [];
    if (confirming && allowed.cancel) {
      buttons.push(h("span", {class: "confirm", role: "group", "aria-label": "Confirm cancel"},
        `Cancel job #${job.id}${job.state === "RUNNING" ? " (it is running: its process is stopped)" : ""}? `,
        h("button", {type: "button", class: "danger", "data-testid": "confirm-yes", onclick: () => act("cancel")}, "Yes, cancel it"),
        " ",
        h("button", {type: "button", "data-testid": "confirm-no", onclick: () => { confirming = false; renderActions(); focusAction("job-cancel"); }}, "Keep it")));
    } else {
      confirming = false;
      if (allowed.cancel) buttons.push(h("button", {type: "button", class: "danger", "data-testid": "job-cancel",
        onclick: () => { confirming = true; renderActions(); focusAction("confirm-yes"); }}, "Cancel…"));
    }
    if (allowed.hold) buttons.push(h("button", {type: "button", "data-testid": "job-hold", onclick: () => act("hold")}, "Hold"));
    if (allowed.release) buttons.push(h("button", {type: "button", "data-testid": "job-release", onclick: () => act("release")}, "Release"));
    replace(actions, buttons);
  }

  function focusAction(testid) {
    const el = actions.querySelector(`[data-testid=${testid}]`);
    if (el) el.focus();
  }

  async function act(action) {
    confirming = false;
    message.hidden = true;
    for (const b of actions.querySelectorAll("button")) b.disabled = true;
    try {
      apply(await post(`/api/v1/jobs/${encodeURIComponent(id)}/${action}`, undefined, {signal: ctx.signal}));
      renderActions();
    } catch (err) {
      if (isAbort(err)) return;
      replace(message, h("strong", {}, `✗ Could not ${action} job #${id}: `), err.message, err.hint ? ` (${err.hint})` : "");
      message.hidden = false;
      renderActions();
    }
  }

  function renderSpec() {
    const labels = Object.entries(job.labels || {});
    replace(specBox, h("h2", {id: "spec-h"}, "Spec"),
      facts([
        ["Command", h("code", {class: "cmd"}, commandText(job))],
        ["User", job.user],
        ["Run again from", job.parent ? h("a", {href: `/jobs/${job.parent}`, "data-testid": "job-parent"}, `#${job.parent}`) : null],
        ["Sweep", isArrayJob(job) && job.script && job.script.includes("# corral sweep:")
          ? h("a", {href: `/sweeps/${job.id}`, "data-testid": "job-sweep"}, `sweep ${job.id}`) : null],
        ["Resources", resourcesText(job)],
        ["GPUs held", job.gpu_ids && job.gpu_ids.length ? `${job.gpu_ids.join(", ")}${job.node ? " on " + job.node : ""}` : null],
        ["Partition", job.partition || "default"],
        ["QoS", job.qos],
        ["Labels", labels.length ? h("span", {}, labels.map(([k, v]) => h("span", {class: "tag"}, `${k}=${v}`))) : null],
        ["Workdir", job.workdir ? h("code", {}, job.workdir) : null],
        ["Image", job.image ? h("code", {}, job.image) : null],
        ["Mounts", job.container && job.container.mounts && job.container.mounts.length
          ? h("code", {}, job.container.mounts.join(", ")) : null],
        ["Exit", job.exit_code !== null && job.exit_code !== undefined ? `code ${job.exit_code}${job.signal ? `, signal ${job.signal}` : ""}` : job.signal ? `signal ${job.signal}` : null],
        ["Logs", h("span", {class: "small"}, h("code", {}, job.stdout_path || "—"),
          job.stderr_path && job.stderr_path !== job.stdout_path ? [h("br"), h("code", {}, job.stderr_path)] : null)],
      ]),
      job.script ? h("details", {}, h("summary", {}, "Batch script"), h("pre", {class: "script"}, job.script)) : null);
  }

  function renderTimeline() {
    const items = [];
    const item = (event, sym, what, when, extra = null) => h("li", {"data-event": event},
      h("span", {class: "tl-sym", "aria-hidden": "true"}, sym), h("strong", {}, what), " ", when ? timeEl(when) : null,
      extra ? h("span", {class: "muted"}, " ", extra) : null);
    items.push(item("submitted", "○", "Submitted", job.submit_time));
    // the server's stored events: earlier runs, each preemption (and the job it made room for), each requeue
    const stored = (job.events || []).filter((e) => !["submitted", "ended"].includes(e.kind));
    const latestStart = job.start_time ? stored.map((e) => e.kind).lastIndexOf("started") : -1;  // shown below, with its wait
    const eventItem = (e) => e.kind === "preempted"
      ? item("preempted", "⏏", "Preempted", e.time, e.by_job ? ["to make room for ", h("a", {href: `/jobs/${e.by_job}`}, `job #${e.by_job}`)] : null)
      : e.kind === "requeued" ? item("requeued", "↺", "Requeued", e.time, "waiting to run again")
      : e.kind === "cancelled" ? item("cancelled", "✕", "Cancelled", e.time, e.by_user ? `by ${e.by_user}` : null)
      : e.kind === "run_again" ? item("run_again", "↻", "Run again", e.time, ["of ", h("a", {href: `/jobs/${e.of_job}`}, `job #${e.of_job}`), ` by ${e.by_user}`])
      : item(e.kind, "●", e.kind === "started" ? "Started" : e.kind, e.time, e.node ? `on ${e.node}` : null);
    stored.slice(0, Math.max(latestStart, 0)).forEach((e) => items.push(eventItem(e)));
    if (job.start_time) {
      const waited = toEpoch(job.start_time) - toEpoch(job.submit_time);
      items.push(item("started", "●", "Started", job.start_time, Number.isFinite(waited) ? `after waiting ${fmtDuration(waited)}` : null));
    }
    stored.slice(latestStart + 1).forEach((e) => items.push(eventItem(e)));
    if (job.restarts && !stored.some((e) => e.kind === "requeued")) {  // recorded before events were kept
      items.push(item("requeued", "↺", `Requeued ×${job.restarts}`, null, "(preempted or requeued; started again)"));
    }
    if (job.state === "PENDING") {
      items.push(h("li", {"data-event": "pending"}, h("span", {class: "tl-sym", "aria-hidden": "true"}, "◌"),
        h("strong", {}, job.held ? "Held" : "Waiting"), " ",
        job.reason ? h("span", {}, reasonText(job.reason)) : null,
        job.estimated_start ? h("span", {class: "muted"}, " · estimated start ", timeEl(job.estimated_start)) : null,
        expectedEnd(job)));
    } else if (job.state === "RUNNING") {
      items.push(h("li", {"data-event": "running"}, h("span", {class: "tl-sym", "aria-hidden": "true"}, "▸"),
        h("strong", {}, "Running for "), elapsedEl(job.start_time),
        job.time_limit_s ? h("span", {class: "muted"}, ` of ${fmtLimit(job.time_limit_s)}`) : null,
        expectedEnd(job)));
    }
    if (job.end_time) {
      const ran = job.start_time ? toEpoch(job.end_time) - toEpoch(job.start_time) : null;
      items.push(item("ended", "■", `Ended ${job.state.toLowerCase().replaceAll("_", " ")}`, job.end_time,
        [ran !== null ? `after running ${fmtDuration(ran)}` : isArrayJob(job) ? "when its last task did" : "without starting",
          job.reason && job.state !== "COMPLETED" ? ` · ${job.reason}` : ""].join("")));
    }
    replace(timelineBox, h("h2", {id: "timeline-h"}, "Timeline"), h("ol", {class: "timeline", "data-testid": "timeline"}, items));
  }

  /** The steps srun ran in the job (`12.0`, `12.1`...), as sacct lists them; none: the card stays hidden. */
  async function loadSteps() {
    let steps;
    try {
      steps = (await api(`/api/v1/jobs/${encodeURIComponent(id)}/steps`, {signal: ctx.signal})).steps;
    } catch (err) {
      if (isAbort(err)) return;
      replace(stepsBox, h("h2", {id: "steps-h"}, "Steps"), errorState(err, loadSteps, {what: "steps"}));
      stepsBox.hidden = false;
      return;
    }
    stepsBox.hidden = steps.length === 0;
    const ref = job.ref || job.id;
    replace(stepsBox, h("h2", {id: "steps-h"}, "Steps"),
      h("div", {class: "table-box"}, h("table", {class: "grid"},
        h("thead", {}, h("tr", {}, ["Step", "Name", "Tasks", "State", "Exit", "Started", "Ran", "Max RSS", "CPU time"]
          .map((t) => h("th", {scope: "col"}, t)))),
        h("tbody", {}, steps.map((s) => {
          const ran = s.start_time && s.end_time ? toEpoch(s.end_time) - toEpoch(s.start_time) : null;
          const exit = s.end_time ? `${s.exit_code ?? 0}:${s.signal ?? 0}` : "—";
          return h("tr", {"data-testid": "step-row", "data-step-id": s.step_id, "data-state": s.state},
            h("td", {}, `${ref}.${s.step_id}`),
            h("td", {title: s.command}, s.name),
            h("td", {class: "num"}, String(s.ntasks)),
            h("td", {}, stateBadge(s.state)),
            h("td", {class: "num"}, exit),
            h("td", {class: "small"}, timeEl(s.start_time)),
            h("td", {class: "num"}, ran !== null ? fmtDuration(ran) : elapsedEl(s.start_time)),
            h("td", {class: "num"}, s.max_rss_mb !== null ? fmtMB(s.max_rss_mb) : "—"),
            h("td", {class: "num"}, s.cpu_time_s !== null ? fmtDuration(s.cpu_time_s) : "—"));
        })))));
  }

  function makeCharts() {
    charts.forEach((c) => c.destroy());
    charts = [];
    if (!job.start_time) {
      replace(chartsBox, h("p", {class: "muted"}, job.end_time ? "No samples: the job never started." : "No samples: the job has not started."));
      document.body.dataset.chartsReady = "true";
      return;
    }
    chartsBox.replaceChildren();
    const ready = readyCounter(SYSTEM_CHARTS.length, () => { if (!ctx.signal.aborted) document.body.dataset.chartsReady = "true"; });
    for (const [key, title, unit] of SYSTEM_CHARTS) {
      const el = h("div", {});
      chartsBox.append(el);
      const chart = new TimeChart(el, {
        key, title, unit, onDrawn: ready,
        // the axis covers the job's life: one sample reads as a moment in it, not a span of years
        span: () => [toEpoch(job.start_time), job.end_time ? toEpoch(job.end_time) : Date.now() / 1000],
        emptyText: key.startsWith("gpu") ? "No GPU samples (no GPU driver answered, or the job used none)."
          : job.end_time ? "No samples: the job ended before the first one." : "No samples yet.",
        fetch: ({maxPoints, signal}) => api(withQuery("/api/v1/metrics", {
          job: id, metric: key, start: job.start_time, end: job.end_time, max_points: maxPoints}), {signal}),
      });
      charts.push(chart);
      chart.load();
    }
  }

  async function loadDiagnosis() {
    try {
      const d = await api(`/api/v1/jobs/${encodeURIComponent(id)}/diagnosis`, {signal: ctx.signal});
      delete diagnosisBox.dataset.forbidden;
      const findings = d.findings || [];
      // what it could not look at (no GPU driver, no samples): "nothing looks wrong" means no more than that
      const unchecked = (d.unchecked || []).length
        ? h("div", {"data-testid": "unchecked"}, h("h4", {}, "Not checked"), h("ul", {}, d.unchecked.map((x) => h("li", {}, x))))
        : null;
      if (!findings.length) {
        const c = d.checked || {};
        replace(diagnosisBox, h("p", {}, h("span", {"aria-hidden": "true"}, "✓ "), "Nothing looks wrong. ",
          h("span", {class: "muted small"}, `Checked ${fmtNumber(c.samples || 0)} samples, ${fmtNumber(c.log_lines || 0)} log lines, ${fmtNumber(c.tracked_series || 0)} tracked series.`)),
        unchecked);
        return;
      }
      replace(diagnosisBox, h("ol", {class: "findings"}, findings.map((f) => h("li", {class: "finding", "data-cause": f.cause},
        h("p", {}, severityBadge(f.severity), " ", h("strong", {}, f.title), h("span", {class: "muted small"}, ` (${f.cause})`)),
        f.evidence && f.evidence.length ? h("div", {}, h("h4", {}, "Evidence"), h("ul", {class: "evidence"}, f.evidence.map((e) => h("li", {}, h("code", {}, e))))) : null,
        f.fixes && f.fixes.length ? h("div", {}, h("h4", {}, "Fixes"), h("ul", {}, f.fixes.map((x) => h("li", {}, x)))) : null))),
      unchecked);
    } catch (err) {
      if (isAbort(err)) return;
      if (err instanceof ApiError && err.status === 403) {
        diagnosisBox.dataset.forbidden = "true";
        replace(diagnosisBox, forbidden(job, err, "this job's diagnosis (it quotes the logs)"));
      } else {
        replace(diagnosisBox, errorState(err, loadDiagnosis, {what: "the diagnosis"}));
      }
    }
  }

  async function loadEfficiency() {
    if (!job.start_time) {
      replace(efficiencyBox, h("p", {class: "muted"}, job.end_time ? "No report: the job never ran." : "No report yet: the job has not started."));
      return;
    }
    try {
      const e = await api(`/api/v1/jobs/${encodeURIComponent(id)}/efficiency`, {signal: ctx.signal});
      const pct = (f) => bar(f, fmtPct(f), {warn: f !== null && f !== undefined && f < 0.3});
      replace(efficiencyBox,
        facts([
          ["CPU", e.cpu_efficiency !== null && e.cpu_efficiency !== undefined ? pct(e.cpu_efficiency) : "—"],
          ["Memory", e.mem_efficiency !== null && e.mem_efficiency !== undefined
            ? h("span", {}, pct(e.mem_efficiency), h("span", {class: "muted small"}, ` peak ${fmtMB(e.max_rss_mb)} of ${fmtMB(e.mem_requested_mb)}`))
            : e.max_rss_mb ? `peak ${fmtMB(e.max_rss_mb)}` : "—"],
          ["GPU utilization (mean)", e.gpu_utilization_mean !== null && e.gpu_utilization_mean !== undefined
            ? pct(e.gpu_utilization_mean / 100) : null],
          ["GPU memory (peak)", e.gpu_memory_peak_mb !== null && e.gpu_memory_peak_mb !== undefined ? fmtMB(e.gpu_memory_peak_mb) : null],
        ]),
        e.advice && e.advice.length ? h("ul", {class: "advice"}, e.advice.map((a) => h("li", {}, a))) : null,
        job && job.state === "RUNNING" ? h("p", {class: "muted small"}, "So far; final figures once it ends.") : null);
    } catch (err) {
      if (isAbort(err)) return;
      if (err instanceof ApiError && err.status === 409) {
        replace(efficiencyBox, h("p", {class: "muted"}, "No report yet: ", err.message));
      } else {
        replace(efficiencyBox, errorState(err, loadEfficiency, {what: "the efficiency report"}));
      }
    }
  }

  async function loadAlerts() {
    try {
      const firings = await api(withQuery("/api/v1/alerts", {job: String(id).split("_")[0], limit: 20}), {signal: ctx.signal});
      if (!firings.length) {
        replace(alertsBox, h("p", {class: "muted"}, "No alerts fired for this job. ", h("a", {href: "/alerts"}, "See the rules"), "."));
        return;
      }
      replace(alertsBox, h("ul", {class: "plain"}, firings.map((f) => h("li", {},
        severityBadge(f.severity), " ",
        h("strong", {}, f.rule), " ", h("span", {class: "badge"}, f.status === "firing" ? "◉ firing" : f.status === "fired" ? "● fired (ended job)" : "✓ resolved"), " ",
        timeEl(f.fired_at), h("div", {class: "small"}, f.message || f.condition)))),
      h("p", {}, h("a", {href: "/alerts"}, "All alerts")));
    } catch (err) {
      if (isAbort(err)) return;
      replace(alertsBox, errorState(err, loadAlerts, {what: "alerts"}));
    }
  }

  async function loadRuns() {
    try {
      const {runs} = await api(withQuery("/api/v1/runs", {job: String(id).split("_")[0], limit: 50}), {signal: ctx.signal});
      if (!runs.length) {
        replace(runsBox, h("p", {class: "muted"}, "No tracked runs. Log metrics from the job with ",
          h("code", {}, "import corral; run = corral.init(project=...)"), "."));
        return;
      }
      replace(runsBox, h("ul", {class: "plain"}, runs.map((r) => h("li", {},
        stateBadge(r.state), " ", h("a", {href: `/runs/${r.id}`}, `${r.project} / ${r.name}`),
        r.last_step !== null && r.last_step !== undefined ? h("span", {class: "muted"}, ` · step ${fmtNumber(r.last_step)}`) : null))),
      runs.length > 1 ? h("p", {}, h("a", {href: `/compare?runs=${runs.map((r) => r.id).join(",")}`}, "Compare these runs")) : null);
    } catch (err) {
      if (isAbort(err)) return;
      replace(runsBox, errorState(err, loadRuns, {what: "runs"}));
    }
  }

  loadJob();
  // `jobs` events say only that something changed (often with no ids): refetch this job.
  ctx.refreshOn(["jobs"], loadJob, {wait: 300, filter: (name, data) => !data.ids || data.ids.map(String).includes(String(id))});
  // an array's tasks change under other ids than its own
  ctx.refreshOn(["jobs"], () => { if (job && isArrayJob(job)) tasks.load(); }, {wait: 1000});
  ctx.refreshOn(["samples"], async () => {
    if (job && job.state === "RUNNING") {
      await Promise.all(charts.map((c) => c.load()));
      loadEfficiency();
      if (!job.command?.length || job.interactive) loadSteps();  // steps start and end without changing the job
    }
  }, {wait: 1000});
  ctx.refreshOn(["alerts"], loadAlerts, {wait: 500});
  ctx.refreshOn(["runs"], loadRuns, {wait: 2000, filter: (name, data) =>
    !data.runs || data.runs.some((r) => String(r.job_id) === String(id).split("_")[0])});
  ctx.on("log", (data) => logs.onEvent(data));
  ctx.on("reconnect", () => logs.catchUp());
}

/**
 * What the viewer sees in place of what the server refused (403): who may read it, then the
 * server's own words (which name a coordinator too, where the job's account has one).
 */
function forbidden(job, err, what, testid = null) {
  const me = identity();
  let headline = null;
  if (me && me.user === job.user && me.scope === "read") {
    headline = `Read-only access cannot read ${what}, even of your own jobs: log in with a submit-scope token.`;
  } else if (mayManage(job) !== "yes") {
    headline = `Only ${job.user} or an admin can read ${what}.`;
  }
  return h("div", {class: "forbidden", "data-testid": testid},
    h("p", {}, h("strong", {}, headline || err.message)),
    headline ? h("p", {class: "muted small"}, `The server says: ${err.message}`) : null);
}

/** The stdout/stderr tabs and panes: a tail, then live text appended by offset. */
class Logs {
  constructor(id, ctx) {
    this.id = id;
    this.ctx = ctx;
    this.job = null;
    this.denied = false;  // the server refused us the logs (403): no more reads, no live text
    this.streams = {};
    this.active = "stdout";
    this.emptyText = "(no output yet)";
    this.tabs = h("div", {class: "tabs", role: "tablist", "aria-label": "Log streams", onkeydown: (e) => this.onKey(e)});
    this.panes = h("div", {});
    this.follow = h("button", {type: "button", class: "small follow", hidden: true, onclick: () => this.jump()}, "↓ Jump to the end");
    this.el = h("section", {class: "card logs", "aria-labelledby": "logs-h"},
      h("div", {class: "logs-head"}, h("h2", {id: "logs-h"}, "Logs"), this.tabs, this.follow), this.panes);
  }

  /** Follow the job's state: an ended job's empty log has no output, rather than none yet. */
  setJob(job) {
    this.job = job;
    const ended = !["PENDING", "RUNNING", "PREEMPTED"].includes(job.state);
    this.emptyText = ended ? "(no output)" : job.state === "PENDING" ? "(no output yet: the job has not started)" : "(no output yet)";
    for (const s of Object.values(this.streams)) if (s.pre.dataset.empty !== undefined) s.pre.dataset.empty = this.emptyText;
  }

  /** (Re)load the tails of the job's streams (stderr only when it is a separate file). */
  start(job) {
    if (this.denied) return;
    const names = job.stderr_path && job.stderr_path !== job.stdout_path ? ["stdout", "stderr"] : ["stdout"];
    this.streams = {};
    this.tabs.replaceChildren();
    this.panes.replaceChildren();
    for (const name of names) {
      const pre = h("pre", {class: "log", id: `log-${name}`, "data-testid": `log-${name}`, role: "tabpanel",
        "aria-labelledby": `log-tab-${name}`, tabindex: "0", hidden: name !== this.active});
      const tab = h("button", {type: "button", role: "tab", id: `log-tab-${name}`, "data-testid": `log-tab-${name}`,
        "aria-controls": `log-${name}`, "aria-selected": String(name === this.active), onclick: () => this.show(name)}, name);
      const s = {name, pre, tab, offset: null, stick: true, loading: null, decoder: new TextDecoder()};
      pre.addEventListener("scroll", () => {
        s.stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
        if (name === this.active) this.follow.hidden = s.stick;
      });
      this.streams[name] = s;
      this.tabs.append(tab);
      this.panes.append(pre);
    }
    if (!this.streams[this.active]) this.show("stdout");
    const first = Object.values(this.streams).map((s) => this.fetch(s, true));
    Promise.all(first).then(() => {
      // shown to us: their new text may come with the live events now
      if (Object.values(this.streams).some((s) => s.offset !== null)) this.ctx.followJob(this.id);
      // Only stderr has something to say (a crash before any output): show it first.
      const out = this.streams.stdout;
      const err = this.streams.stderr;
      if (err && this.active === "stdout" && !out.pre.textContent && err.pre.textContent) this.show("stderr");
    });
  }

  onKey(e) {
    if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
    const order = Object.keys(this.streams);
    const next = order[(order.indexOf(this.active) + (e.key === "ArrowRight" ? 1 : order.length - 1)) % order.length];
    this.show(next);
    this.streams[next].tab.focus();
  }

  show(name) {
    this.active = name;
    for (const s of Object.values(this.streams)) {
      s.pre.hidden = s.name !== name;
      s.tab.setAttribute("aria-selected", String(s.name === name));
    }
    const s = this.streams[name];
    if (s) this.follow.hidden = s.stick;
  }

  /** Read the tail (first time) or everything after our offset. */
  async fetch(s, tail = false) {
    if (s.loading) return s.loading;
    const path = withQuery(`/api/v1/jobs/${encodeURIComponent(this.id)}/logs`,
      tail || s.offset === null ? {stream: s.name, tail: 200} : {stream: s.name, offset: s.offset});
    s.loading = (async () => {
      try {
        const {bytes, headers} = await apiBytes(path, {signal: this.ctx.signal});
        const next = Number(headers.get("X-Corral-Offset"));
        const text = s.decoder.decode(bytes, {stream: true});
        if (tail || s.offset === null) {
          s.pre.textContent = "";
          if (!text) s.pre.dataset.empty = this.emptyText;
        }
        this.append(s, text);
        if (Number.isFinite(next)) s.offset = next;
      } catch (err) {
        if (isAbort(err)) return;
        if (err instanceof ApiError && err.status === 403) this.deny(err);
        else if (s.offset === null) s.pre.textContent = `✗ Could not read ${s.name}: ${err.message}`;
      } finally {
        s.loading = null;
      }
    })();
    return s.loading;
  }

  /** The server will not show us this job's logs: say who may, instead of the panes. */
  deny(err) {
    if (this.denied) return;
    this.denied = true;
    this.tabs.replaceChildren();
    this.follow.hidden = true;
    this.streams = {};
    replace(this.panes, forbidden(this.job, err, "this job's logs", "logs-forbidden"));
  }

  /** A `log` event: {stream, offset (where the next read starts), text}. Append if it follows ours. */
  async onEvent(data) {
    const s = this.streams[data.stream];
    if (!s || typeof data.text !== "string") return;
    if (s.loading) await s.loading;
    if (s.offset === null) return;
    const end = Number(data.offset);
    const start = Number(data.start);
    if (end <= s.offset) return;  // already shown
    if (start === s.offset) {
      this.append(s, data.text);
      s.offset = end;
    } else if (start > s.offset && data.skipped) {
      // the job writes faster than a page can show: the server sent only the newest part
      this.append(s, `\n…(${Number(data.skipped).toLocaleString()} bytes skipped to keep up)\n` + data.text);
      s.offset = end;
    } else {
      this.fetch(s);  // a gap or an overlap: read what we miss from the server
    }
  }

  /** Catch up after a missed stretch (a reconnection, the job ended). */
  catchUp() {
    for (const s of Object.values(this.streams)) if (s.offset !== null) this.fetch(s);
  }

  append(s, text) {
    if (!text) return;
    delete s.pre.dataset.empty;
    const node = s.pre.firstChild;
    if (node && node.nodeType === Node.TEXT_NODE && node.length + text.length <= LOG_LIMIT) {
      node.appendData(text);
    } else {
      // trimmed to three quarters of the limit, so the cheap appendData path serves the next appends
      const all = (s.pre.textContent + text);
      const keep = Math.floor(LOG_LIMIT * 0.75);
      s.pre.textContent = all.length > LOG_LIMIT ? "…(older output not shown)\n" + all.slice(all.length - keep) : all;
    }
    if (s.stick) s.pre.scrollTop = s.pre.scrollHeight;
  }

  jump() {
    const s = this.streams[this.active];
    if (!s) return;
    s.stick = true;
    s.pre.scrollTop = s.pre.scrollHeight;
    this.follow.hidden = true;
  }
}
