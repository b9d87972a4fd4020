// Plan (/plan): "when would my job start if I submitted it now?" A timeline per GPU of the running jobs
// (to their time limits) and the reservations the scheduler made for pending ones (GET /api/v1/plan),
// with a what-if drawn in: the form's job, forecast by the scheduler's own pass (POST /api/v1/forecast,
// nothing is submitted), what decides its start (GPUs, CPUs or memory: `waits_for`) and who holds it, and the
// shorter --time or fewer GPUs that would start it sooner. The what-if is "your job": it has no id yet.
// Reservations (corral reservation create) are bands over their GPUs and windows, named, with who may use them.
// Refetched on `jobs` (the queue changed).

import {h, replace} from "../lib/dom.js";
import {api, post, errorState, emptyState, isAbort} from "../lib/api.js";
import {fmtDuration, fmtLimit, fmtTime, toEpoch} from "../lib/format.js";

const MIN_SPAN_S = 3600;
const RESOURCE = {gpus: "GPUs", cpus: "CPUs", memory: "memory"};
const MAX_SPAN_S = 7 * 86400;

export function mount(main, ctx) {
  let plan = null;
  let whatIf = null;  // {answer, gpus, time}
  const gpusField = h("input", {type: "number", min: "0", max: "1024", value: "1", id: "plan-gpus", "data-testid": "plan-gpus"});
  const timeField = h("input", {type: "text", value: "1h", size: "8", id: "plan-time", "data-testid": "plan-time"});
  const cpusField = h("input", {type: "number", min: "1", value: "1", id: "plan-cpus", "data-testid": "plan-cpus"});
  const button = h("button", {type: "submit", "data-testid": "plan-submit"}, "Forecast");
  const answerBox = h("section", {class: "card plan-answer", "data-testid": "plan-forecast", "aria-live": "polite", hidden: true});
  const form = h("form", {class: "card plan-form", "aria-label": "What if I submitted"},
    h("h2", {}, "What if I submitted…"),
    h("label", {for: "plan-gpus"}, "GPUs "), gpusField,
    h("label", {for: "plan-time"}, " time limit "), timeField,
    h("label", {for: "plan-cpus"}, " CPUs "), cpusField, " ", button,
    h("p", {class: "muted small"}, "Nothing is submitted: the scheduler's own pass says when it would start. ",
      "The CLI: ", h("code", {}, "corral plan -G 2 -t 4h -- python train.py"), "."));
  const timeline = h("div", {class: "plan-timeline"}, h("p", {class: "muted"}, "Loading the plan…"));
  main.append(h("div", {class: "page-head"}, h("h1", {}, "Plan"),
    h("p", {class: "muted page-sub"}, "Each GPU over time: running jobs to their time limits, reservations of pending jobs.")),
  form, answerBox, timeline);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    const body = {command: ["true"], gpus: Number(gpusField.value || 0), cpus: Number(cpusField.value || 1)};
    if (timeField.value.trim()) body.time = timeField.value.trim();
    try {
      const answer = await post("/api/v1/forecast", body, {signal: ctx.signal});
      whatIf = {answer};
      renderAnswer(answer);
      draw();
    } catch (err) {
      if (isAbort(err)) return;
      whatIf = null;
      answerBox.hidden = false;
      replace(answerBox, errorState(err));
      draw();
    } finally {
      button.disabled = false;
    }
  });

  async function load() {
    try {
      plan = await api("/api/v1/plan", {signal: ctx.signal});
    } catch (err) {
      if (isAbort(err)) return;
      replace(timeline, errorState(err, load, {what: "the plan"}));
      return;
    }
    draw();
  }

  function renderAnswer(a) {
    answerBox.hidden = false;
    const head = a.start === null
      ? h("p", {class: "plan-when", "data-start": ""}, h("strong", {}, "Would not start"), " as things stand: ", a.reason, ".")
      : h("p", {class: "plan-when", "data-start": a.start},
        h("strong", {}, a.start_in_s ? `Would start ${fmtTime(a.start)}` : "Would start now"),
        a.start_in_s ? ` (in ${fmtDuration(a.start_in_s)})` : "",
        a.node ? ` on ${a.node}` : "", a.gpus.length ? `, GPUs ${a.gpus.join(",")}` : "",
        a.start_in_s ? h("span", {class: "muted"}, ` — ${a.reason}.`) : null);
    const waits = (a.waits_for || []).length ? h("p", {class: "plan-waits-for", "data-testid": "plan-waits-for",
      "data-waits-for": a.waits_for.join(",")}, "Waits for ", h("strong", {}, a.waits_for.map((r) => RESOURCE[r] || r).join(", ")),
      " on ", a.node || "its node", ".") : null;
    const blockers = (a.blockers || []).length ? h("div", {},
      h("h3", {}, "Held by"),
      h("ul", {class: "plan-blockers"}, a.blockers.map((b) => h("li", {"data-testid": "plan-blocker", "data-job-id": b.job_id, "data-kind": b.kind},
        h("a", {href: `/jobs/${b.job_id}`}, `#${b.job_id}`), ` ${b.user}, ${b.kind}`,
        b.gpus.length ? `, GPUs ${b.gpus.join(",")}` : "",
        b.cpus ? `, ${b.cpus} CPU${b.cpus === 1 ? "" : "s"}` : "",
        b.end ? `, until ${fmtTime(b.end)}` : b.kind === "waiting" ? "" : ", no time limit")))) : null;
    const sooner = (a.alternatives || []).length ? h("div", {},
      h("h3", {}, "Sooner"),
      h("ul", {class: "plan-alternatives"}, a.alternatives.map((alt) => h("li", {"data-testid": "plan-alternative", "data-change": alt.change},
        h("code", {}, alt.option), alt.start_in_s ? ` starts ${fmtTime(alt.start)} (in ${fmtDuration(alt.start_in_s)})` : " starts now",
        alt.change === "time" ? h("span", {class: "muted"}, ` (a ${fmtLimit(alt.time_limit_s)} limit)`) : null)))) : null;
    replace(answerBox, head, waits, blockers, sooner, (a.notes || []).map((n) => h("p", {class: "muted small"}, n)));
  }

  function draw() {
    if (!plan) return;
    const now = toEpoch(plan.now);
    const rows = plan.nodes.flatMap((n) => n.gpus.map((g) => ({node: n.name, gpu: g})));
    if (!rows.length) {
      replace(timeline, emptyState("No GPUs: the server declares none. Start it with GPUs, e.g. ",
        h("code", {}, "corral up --gpus 4 --gpu-type A100"), "."));
      return;
    }
    const bars = plan.jobs.map((j) => ({...j, start: toEpoch(j.start), end: toEpoch(j.end)}));
    const answer = whatIf && whatIf.answer;
    if (answer && answer.start !== null && answer.node) {
      const start = toEpoch(answer.start);
      bars.push({kind: "whatif", job_id: "", name: "what-if", user: "", node: answer.node, gpus: answer.gpus, start,
        end: answer.time_limit_s ? start + answer.time_limit_s : null});
    }
    const bands = (plan.reservations || []).map((r) => ({...r, start: toEpoch(r.start), end: toEpoch(r.end)}));
    const ends = [...bars.map((b) => (b.end ?? b.start) - now), ...bands.map((r) => r.end - now)];
    const span = Math.min(MAX_SPAN_S, Math.max(MIN_SPAN_S, ...ends) * 1.05);
    const at = (t) => Math.max(0, Math.min(100, ((t - now) / span) * 100));
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => h("span", {class: "plan-tick", style: `left: ${f * 100}%`},
      f === 0 ? "now" : `+${fmtDuration(f * span)}`));
    replace(timeline,
      h("div", {class: "plan-row plan-axis", "aria-hidden": "true"}, h("span", {class: "plan-label"}), h("div", {class: "plan-track"}, ticks)),
      rows.map(({node, gpu}) => h("div", {class: "plan-row", "data-testid": "plan-gpu", "data-node": node, "data-index": gpu.index},
        h("span", {class: "plan-label"}, `${node} · GPU ${gpu.index}`, h("span", {class: "muted small"}, ` ${gpu.type}`)),
        h("div", {class: "plan-track"}, bands.filter((r) => r.node === node && r.gpus.includes(gpu.index)).map((r) => {
          const left = at(r.start);
          const who = [...r.users, ...r.accounts.map((a) => `account ${a}`)].join(", ");
          return h("span", {class: "plan-band", "data-testid": "plan-reservation", "data-name": r.name,
            title: `reservation ${r.name} for ${who}: ${fmtTime(r.start)} – ${fmtTime(r.end)}`,
            style: `left: ${left}%; width: ${Math.max(0.5, at(r.end) - left)}%`}, `${r.name} · ${who}`);
        }), bars.filter((b) => b.node === node && b.gpus.includes(gpu.index)).map((b) => {
          const left = at(b.start);
          const right = b.end === null ? 100 : at(b.end);
          const what = b.kind === "whatif" ? "your job (what-if)" : `#${b.job_id} ${b.name} (${b.user})`;
          const title = `${what}: ${b.kind}, ${fmtTime(b.start)} – ${b.end === null ? "no time limit" : fmtTime(b.end)}`;
          return h(b.kind === "whatif" ? "span" : "a", {class: `plan-bar ${b.kind}${b.end === null ? " open" : ""}`,
            href: b.kind === "whatif" ? null : `/jobs/${b.job_id}`, title, "data-testid": "plan-bar",
            "data-kind": b.kind, "data-job-id": b.job_id, style: `left: ${left}%; width: ${Math.max(0.5, right - left)}%`},
          b.kind === "whatif" ? "what-if" : `#${b.job_id}`);
        })))),
      h("p", {class: "muted small plan-legend"}, "▮ running  ▯ reserved (a pending job's expected start)  ┆ what-if  ",
        "░ a reservation (its GPUs kept for its users over its window). ",
        "A bar reaching the right edge has no time limit or ends later."));
  }

  load();
  ctx.refreshOn(["jobs"], load, {wait: 500});
}
