// Queue (/queue): running jobs (GPUs, utilization, progress, elapsed), then pending jobs in
// priority order (reason, estimated start). Filters and the page live in the URL
// (?state=&user=&label=&partition=&offset=) so a filtered view can be linked.
// GET /api/v1/queue, one page of 100; refetched on `jobs` (and `samples`, for utilization).

import {h, replace, bar, keepFocus} from "../lib/dom.js";
import {api, errorState, emptyState, isAbort, withQuery} from "../lib/api.js";
import {elapsedEl, fmtDuration, fmtLimit, fmtNumber, fmtPct, fmtRelative, fmtTime, stateBadge} from "../lib/format.js";
import {reasonText, resourcesText} from "../lib/jobs.js";

const PAGE = 100;
const FILTERS = ["state", "user", "label", "partition"];

export function mount(main, ctx) {
  const summary = h("p", {class: "muted page-sub"});
  const form = h("form", {class: "filters", role: "search", "aria-label": "Filter the queue"});
  const tableBox = h("div", {class: "table-box"}, h("p", {class: "muted"}, "Loading the queue…"));
  const pager = h("nav", {class: "pager", "aria-label": "Pages"});
  main.append(h("div", {class: "page-head"}, h("h1", {}, "Queue"), summary), form, tableBox, pager);
  let lastOptions = {users: [], partitions: []};

  function params() {
    const q = ctx.query();
    const out = {};
    for (const k of FILTERS) out[k] = q.get(k) || "";
    out.offset = Math.max(0, parseInt(q.get("offset") || "0", 10) || 0);
    return out;
  }

  function go(changes) {
    const p = {...params(), ...changes};
    ctx.navigate(withQuery("/queue", {...p, offset: p.offset || null}));
  }

  function renderForm(p) {
    const select = (name, label, options) => h("label", {},
      label, " ",
      h("select", {name, onchange: () => go({[name]: form.elements[name].value, offset: 0})},
        h("option", {value: ""}, "all"),
        [...new Set([...options, p[name]].filter(Boolean))].map((o) =>
          h("option", {value: o, selected: o === p[name]}, name === "state" ? o.toLowerCase() : o))));
    replace(form,
      select("state", "State", ["RUNNING", "PENDING"]),
      select("user", "User", lastOptions.users),
      select("partition", "Partition", lastOptions.partitions),
      h("label", {}, "Label ", h("input", {name: "label", value: p.label, placeholder: "team=vision", size: 14,
        pattern: "[^=]+=.*", title: "KEY=VALUE"})),
      h("button", {type: "submit"}, "Apply"),
      FILTERS.some((k) => p[k]) ? h("a", {href: "/queue", class: "clear"}, "Clear filters") : null);
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    go({label: form.elements.label.value.trim(), offset: 0});
  });

  let seq = 0;
  async function load() {
    const p = params();
    const mySeq = ++seq;
    let queue;
    try {
      queue = await api(withQuery("/api/v1/queue", {...p, limit: PAGE}), {signal: ctx.signal});
    } catch (err) {
      if (isAbort(err) || mySeq !== seq) return;
      renderForm(p);
      replace(tableBox, errorState(err, load, {what: "the queue"}));
      pager.replaceChildren();
      return;
    }
    if (mySeq !== seq) return;
    lastOptions = {users: queue.users || [], partitions: queue.partitions || []};
    render(p, queue);
  }

  function render(p, queue) {
    const hadFocus = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.testid : null;
    if (!form.contains(document.activeElement)) renderForm(p);
    summary.textContent = `${fmtNumber(queue.running)} running · ${fmtNumber(queue.pending)} pending`;
    const jobs = queue.jobs || [];
    const filtered = FILTERS.some((k) => p[k]);
    if (!jobs.length) {
      replace(tableBox, queue.total === 0 && !filtered
        ? emptyState("No jobs yet — submit one with ", h("code", {}, "corral submit -- python train.py"), ".")
        : queue.total === 0
          ? emptyState("No jobs match these filters. ", h("a", {href: "/queue"}, "Clear filters"), ".")
          : emptyState("No jobs on this page. ", h("a", {href: withQuery("/queue", {...p, offset: null})}, "Go to the first page"), "."));
    } else {
      keepFocus(tableBox, () => replace(tableBox, table(jobs)));
    }
    renderPager(p, queue);
    if (hadFocus === "pager-next" || hadFocus === "pager-prev") {
      const el = pager.querySelector(`[data-testid=${hadFocus}]`);
      (el && !el.disabled ? el : pager.querySelector("button:not([disabled])") || main).focus();
    }
  }

  function renderPager(p, queue) {
    const total = queue.total || 0;
    const first = total ? p.offset + 1 : 0;
    const last = Math.min(p.offset + (queue.jobs || []).length, total);
    replace(pager,
      h("button", {type: "button", "data-testid": "pager-prev", disabled: p.offset <= 0,
        onclick: () => go({offset: Math.max(0, p.offset - PAGE)})}, "← Previous"),
      h("span", {"data-testid": "pager-summary", "aria-live": "polite"},
        total ? `Showing ${fmtNumber(first)}–${fmtNumber(last)} of ${fmtNumber(total)}` : "Showing 0 of 0"),
      h("button", {type: "button", "data-testid": "pager-next", disabled: p.offset + PAGE >= total,
        onclick: () => go({offset: p.offset + PAGE})}, "Next →"));
  }

  load();
  ctx.refreshOn(["jobs"], load, {wait: 300});
  ctx.refreshOn(["samples"], load, {wait: 5000});  // live GPU figures: every few seconds is enough
  return {update: load};
}

function table(jobs) {
  return h("table", {class: "grid queue"},
    h("thead", {}, h("tr", {},
      ["State", "Job", "User", "Resources", "GPUs / utilization", "Progress", "Time", "Partition", "Priority"]
        .map((t) => h("th", {scope: "col"}, t)))),
    h("tbody", {}, jobs.map(row)));
}

function row(job) {
  const running = job.state === "RUNNING";
  return h("tr", {"data-testid": "queue-row", "data-job-id": job.id, "data-state": job.state},
    h("td", {}, stateBadge(job.state, {held: job.held})),
    h("td", {}, h("a", {href: `/jobs/${job.id}`}, `#${job.ref || job.id}`), " ", h("span", {class: "job-name"}, job.name || "")),
    h("td", {}, job.user || "—"),
    h("td", {class: "small"}, resourcesText(job)),
    h("td", {}, running ? gpus(job) : h("span", {class: "muted"}, job.gpus ? `${job.gpus} wanted` : "—")),
    h("td", {}, running ? progress(job.progress) : pendingCell(job)),
    h("td", {class: "small"}, running
      ? [h("span", {class: "sr-only"}, "elapsed "), elapsedEl(job.start_time), job.time_limit_s ? h("span", {class: "muted"}, ` / ${fmtLimit(job.time_limit_s)}`) : null]
      : estimated(job)),
    h("td", {}, job.partition || "—"),
    h("td", {class: "num"}, job.priority === null || job.priority === undefined ? "—" : fmtNumber(job.priority)));
}

function pendingCell(job) {
  return h("span", {class: "reason", "data-testid": "queue-reason", title: reasonText(job.reason)},
    h("strong", {}, job.held && job.reason !== "JobHeldUser" ? "held" : job.reason || "—"),
    job.reason ? h("span", {class: "muted small reason-text"}, " " + (reasonText(job.reason).split(": ")[1] || "")) : null);
}

function estimated(job) {
  if (!job.estimated_start) return h("span", {class: "muted"}, "start unknown");
  return h("span", {title: fmtTime(job.estimated_start)}, "starts ≈ ",
    h("time", {datetime: job.estimated_start}, fmtRelative(job.estimated_start)));
}

function gpus(job) {
  const sample = job.sample;
  const perGpu = sample && sample.gpus && sample.gpus.length ? sample.gpus : null;
  const ids = job.gpu_ids && job.gpu_ids.length ? job.gpu_ids : [];
  if (perGpu) {
    return h("ul", {class: "gpu-utils"}, perGpu.map((g) => h("li", {},
      h("span", {class: "gpu-id"}, `GPU ${g.index}`),
      bar(g.utilization === null || g.utilization === undefined ? null : g.utilization / 100,
        g.utilization === null || g.utilization === undefined ? "—" : fmtPct(g.utilization / 100), {label: `GPU ${g.index} utilization`}))));
  }
  const text = ids.length ? `GPU ${ids.join(", ")}` : job.gpus ? `${job.gpus} GPU${job.gpus > 1 ? "s" : ""}` : "no GPU";
  const util = sample && sample.gpu_utilization !== null && sample.gpu_utilization !== undefined ? ` · ${fmtPct(sample.gpu_utilization / 100)}` : "";
  return h("span", {}, text + util);
}

function progress(p) {
  if (!p) return h("span", {class: "muted small"}, "no tracked run");
  // a total the run went past was never its total (the server drops it; an older one may not)
  const fraction = p.total && p.step <= p.total ? p.step / p.total : null;
  return h("div", {class: "progress"},
    fraction !== null
      ? bar(fraction, `${fmtNumber(p.step)} / ${fmtNumber(p.total)} (${fmtPct(fraction)})`, {label: "Steps"})
      : h("span", {}, `step ${fmtNumber(p.step)}`),
    h("span", {class: "muted small"},
      p.rate ? `${fmtNumber(Number(p.rate.toPrecision(3)))} steps/s` : "",
      p.eta_s !== null && p.eta_s !== undefined ? ` · ETA ${fmtDuration(p.eta_s)}` : "",
      p.run_id ? [" · ", h("a", {href: `/runs/${p.run_id}`}, p.run || `run ${p.run_id}`)] : null));
}
