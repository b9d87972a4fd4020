// Sweep (/sweeps/ID): every task's parameters, state, and its run's final and best metric, sortable; a
// parallel-coordinates chart (plain SVG) of the parameters against the chosen metric; the best named.

import {h, replace} from "../lib/dom.js";
import {api, errorState, isAbort, withQuery} from "../lib/api.js";
import {fmtValue, stateBadge} from "../lib/format.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(c);
  return el;
}

/** An axis for one column: numbers placed linearly (log where all are positive and span 100x), text by order. */
function axis(values) {
  const nums = values.map(Number);
  if (values.length && nums.every(Number.isFinite)) {
    const lo = Math.min(...nums), hi = Math.max(...nums);
    const log = lo > 0 && hi / lo >= 100;
    const f = log ? Math.log10 : (x) => x;
    const a = f(lo), b = f(hi);
    return {pos: (v) => (b === a ? 0.5 : (f(Number(v)) - a) / (b - a)), lo, hi};
  }
  const order = [...new Set(values.map(String))].sort();
  return {pos: (v) => (order.length < 2 ? 0.5 : order.indexOf(String(v)) / (order.length - 1)), labels: order};
}

export function parallelChart(view) {
  const names = view.params.map((p) => p.name);
  const rows = view.tasks;
  const columns = [...names.map((n) => ({key: n, title: n, get: (r) => r.values[n]})),
    {key: "metric", title: `${view.metric || "metric"} (best)`, get: (r) => r.best}];
  const W = 760, H = 260, top = 24, bottom = 30, left = 40, right = 60;
  const x = (i) => left + (i * (W - left - right)) / Math.max(1, columns.length - 1);
  const axes = columns.map((c) => axis(rows.map(c.get).filter((v) => v !== null && v !== undefined)));
  const scored = rows.filter((r) => r.best !== null && r.best !== undefined);
  const metricAxis = axes[axes.length - 1];
  const y = (frac) => top + (1 - frac) * (H - top - bottom);
  const root = svg("svg", {viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "data-testid": "sweep-parallel",
    "data-lines": rows.length, "aria-label": `Parallel coordinates: ${names.join(", ")} against ${view.metric || "the metric"}`});
  const bestTask = view.best ? view.best.task : null;
  for (const r of rows) {
    const points = columns.map((c, i) => {
      const v = c.get(r);
      return v === null || v === undefined ? null : `${x(i).toFixed(1)},${y(axes[i].pos(v)).toFixed(1)}`;
    });
    const shown = points.filter(Boolean);
    if (shown.length < 2) continue;
    let colour = "#999";
    if (r.best !== null && r.best !== undefined && scored.length > 1) {
      let goodness = metricAxis.pos(r.best);
      if (view.lower_is_better) goodness = 1 - goodness;
      colour = `hsl(${Math.round(goodness * 120)}, 70%, 40%)`;  // red (worst) to green (best)
    }
    const line = svg("polyline", {points: shown.join(" "), fill: "none", stroke: colour,
      "stroke-width": r.task === bestTask ? 3 : 1.2, opacity: r.task === bestTask ? 1 : 0.7, "data-task": r.task});
    line.append(svg("title", {}, document.createTextNode(
      `task ${r.task}: ${names.map((n) => `${n}=${r.values[n]}`).join(", ")}; ${view.metric} ${fmtValue(r.best)}`)));
    root.append(line);
  }
  columns.forEach((c, i) => {
    root.append(svg("line", {x1: x(i), x2: x(i), y1: top, y2: H - bottom, stroke: "currentColor", "stroke-width": 1}));
    root.append(svg("text", {x: x(i), y: H - 10, "text-anchor": "middle", "font-size": 12, fill: "currentColor"},
      document.createTextNode(c.title)));
    const a = axes[i];
    const ends = a.labels ? [a.labels[0], a.labels[a.labels.length - 1]] : [a.lo, a.hi];
    if (ends[0] !== undefined) {
      root.append(svg("text", {x: x(i) + 4, y: H - bottom, "font-size": 10, fill: "currentColor"}, document.createTextNode(fmtValue(ends[0]))));
      root.append(svg("text", {x: x(i) + 4, y: top + 4, "font-size": 10, fill: "currentColor"}, document.createTextNode(fmtValue(ends[1]))));
    }
  });
  return root;
}

export function mount(root, ctx) {
  const id = ctx.params[0];
  const head = h("div", {class: "page-head"});
  const best = h("p", {"data-testid": "sweep-best"});
  const chartBox = h("section", {class: "card"});
  const tableBox = h("section", {class: "card"});
  root.append(head, best, chartBox, tableBox);
  let view = null;
  let sort = {key: "task", dir: 1};
  let metric = ctx.query().get("metric") || null;

  async function load() {
    try {
      view = await api(withQuery(`/api/v1/sweeps/${id}`, {metric}), {signal: ctx.signal});
      render();
    } catch (err) {
      if (!isAbort(err)) replace(tableBox, errorState(err, load, {what: `sweep ${id}`}));
    }
  }

  function value(r, key) {
    if (key === "task") return r.task;
    if (key === "state") return r.state || "";
    if (key === "final" || key === "best") return r[key];
    return r.values[key.slice("param.".length)];
  }

  function sorted() {
    return [...view.tasks].sort((a, b) => {
      const va = value(a, sort.key), vb = value(b, sort.key);
      if (va === null || va === undefined) return 1;
      if (vb === null || vb === undefined) return -1;
      const na = Number(va), nb = Number(vb);
      const cmp = Number.isFinite(na) && Number.isFinite(nb) ? na - nb : String(va).localeCompare(String(vb));
      return cmp * sort.dir;
    });
  }

  function header(key, title) {
    const active = sort.key === key;
    return h("th", {"aria-sort": active ? (sort.dir > 0 ? "ascending" : "descending") : "none"},
      h("button", {type: "button", class: "sort", "data-testid": `sweep-sort-${key}`, onclick: () => {
        sort = {key, dir: active ? -sort.dir : 1};
        renderTable();
      }}, title, active ? (sort.dir > 0 ? " ▲" : " ▼") : ""));
  }

  function renderTable() {
    const names = view.params.map((p) => p.name);
    replace(tableBox, h("h2", {}, "Tasks"), h("table", {class: "table"},
      h("thead", {}, h("tr", {}, header("task", "Task"), names.map((n) => header(`param.${n}`, n)), header("state", "State"),
        h("th", {}, "Run"), header("final", `Final ${view.metric || ""}`), header("best", `Best ${view.metric || ""}`))),
      h("tbody", {}, sorted().map((r) => h("tr", {"data-testid": "sweep-row", "data-task": r.task, "data-state": r.state || "",
        class: view.best && view.best.task === r.task ? "best" : null},
        h("td", {}, r.job_id ? h("a", {href: `/jobs/${r.ref}`}, r.ref) : r.ref),
        names.map((n) => h("td", {}, String(r.values[n]))),
        h("td", {}, stateBadge(r.state || "PENDING")),
        h("td", {}, r.run ? h("a", {href: `/runs/${r.run.uid || r.run.id}`}, r.run.name || r.run.uid) : "—"),
        h("td", {class: "num"}, fmtValue(r.final)), h("td", {class: "num"}, fmtValue(r.best)))))));
  }

  function render() {
    ctx.title(`Sweep ${view.id}`);
    const picker = h("select", {"data-testid": "sweep-metric", onchange: (e) => { metric = e.target.value; load(); }},
      (view.metrics.length ? view.metrics : [view.metric || ""]).map((m) => h("option", {value: m, selected: m === view.metric}, m)));
    replace(head, h("h1", {}, `Sweep #${view.id} `, h("span", {class: "job-name"}, view.name || "")),
      stateBadge(view.state),
      h("p", {class: "muted"}, `${view.method}${view.seed !== null && view.seed !== undefined ? `, seed ${view.seed}` : ""}`,
        view.concurrency ? `, at most ${view.concurrency} at once` : "", ` · `, h("a", {href: `/jobs/${view.id}`}, "its job array"),
        " · ", h("code", {}, view.command.join(" "))),
      h("label", {}, "Metric ", picker, view.metric ? ` (${view.lower_is_better ? "lower" : "higher"} is better)` : ""));
    const names = view.params.map((p) => p.name);
    replace(best, view.best
      ? h("span", {}, h("strong", {}, "Best: "), `task ${view.best.ref}: `,
        names.map((n) => `${n}=${view.best.values[n]}`).join(", "), ` (${view.metric} ${fmtValue(view.best.best)})`)
      : `No task's run has logged ${view.metric || "a metric"} yet.`);
    replace(chartBox, h("h2", {}, "Parameters against the metric"), parallelChart(view));
    renderTable();
  }

  ctx.refreshOn(["jobs", "runs"], load, {wait: 1000});
  load();
}
