// Compare (/compare?runs=1,2,3): the runs' shared metrics overlaid, one chart per key (each run
// its own colour AND dash pattern, named in a legend), and their configs side by side with the
// differing values highlighted (bold and a ≠ marker, not colour alone); and their media (images,
// histograms, text, tables) side by side, one row per key with one slider over every run's steps.

import {h, replace} from "../lib/dom.js";
import {api, errorState, emptyState, isAbort, withQuery} from "../lib/api.js";
import {flatten, fmtNumber, fmtValue, stateBadge} from "../lib/format.js";
import {MediaLoader, histogramRange, mediaByKey, mediaError, mediaNode, stepSlider} from "../lib/media.js";
import {MetricChart, readyCounter, smoothingControl, styleFor, xAxisToggle} from "../lib/chart.js";
import {orderKeys} from "./run.js";
import {seriesLoader} from "../lib/series.js";

const loaders = new Map();  // run id -> its batched series loader
function loaderFor(runId) {
  if (!loaders.has(runId)) loaders.set(runId, seriesLoader(runId));
  return loaders.get(runId);
}

export function mount(main, ctx) {
  const ids = [...new Set((ctx.query().get("runs") || "").split(",").map((s) => s.trim()).filter(Boolean))];
  const charts = [];
  let smoothing = 0;
  let onlyDiffs = false;
  let runs = [];

  const status = h("div", {}, h("p", {class: "muted"}, "Loading runs…"));
  const legend = h("ul", {class: "run-legend", "aria-label": "Runs"});
  const controls = h("div", {class: "toolbar chart-controls", hidden: true},
    smoothingControl((w) => { smoothing = w; charts.forEach((c) => c.setSmoothing(w)); }),
    xAxisToggle((mode) => charts.forEach((c) => c.setXMode(mode))),
    h("span", {class: "muted small"}, "Drag to zoom; double-click to zoom out."));
  const chartsBox = h("div", {class: "charts"});
  const note = h("p", {class: "muted small"});
  const mediaBox = h("section", {"aria-labelledby": "media-h", "data-testid": "media", hidden: true});
  const configBox = h("section", {class: "card", "aria-labelledby": "config-h"});
  main.append(h("div", {class: "page-head"}, h("h1", {}, "Compare runs")), status, legend, controls, note, chartsBox,
    mediaBox, configBox);
  ctx.onLeave(() => charts.forEach((c) => c.destroy()));
  const media = new MediaLoader(ctx.signal);
  ctx.onLeave(() => media.dispose());

  if (ids.length < 1) {
    replace(status, emptyState("No runs to compare. Pick two or more on the ", h("a", {href: "/runs"}, "runs page"),
      " and press Compare (the address lists them: ", h("code", {}, "/compare?runs=1,2"), ")."));
    document.body.dataset.chartsReady = "true";
    return;
  }

  async function load() {
    try {
      runs = await Promise.all(ids.map((id) => api(`/api/v1/runs/${encodeURIComponent(id)}`, {signal: ctx.signal})));
    } catch (err) {
      if (isAbort(err)) return;
      replace(status, errorState(err, load, {what: "the runs"}));
      document.body.dataset.chartsReady = "true";
      return;
    }
    status.replaceChildren();
    ctx.title(`Compare ${runs.map((r) => r.name).join(", ")}`);
    renderLegend();
    renderCharts();
    renderConfig();
    loadMedia();
  }

  function label(r) {
    return `${r.name || "run"} (#${r.id})`;
  }

  function renderLegend() {
    replace(legend, runs.map((r, i) => {
      const s = styleFor(i);
      return h("li", {"data-run-id": r.id},
        swatch(s), " ",
        h("a", {href: `/runs/${r.id}`}, label(r)), " ",
        h("span", {class: "muted small"}, `${r.project} · ${s.dashName} line${s.points ? " with markers" : ""}`), " ",
        stateBadge(r.state));
    }));
  }

  function renderCharts() {
    const keySets = runs.map((r) => new Set(Object.keys(r.metrics || {})));
    const all = [...new Set(keySets.flatMap((s) => [...s]))];
    const shared = orderKeys(all.filter((k) => keySets.every((s) => s.has(k))));
    const notShared = all.filter((k) => !shared.includes(k));
    note.textContent = notShared.length ? `Not logged by every run (not shown): ${orderKeys(notShared).join(", ")}` : "";
    controls.hidden = !shared.length;
    if (!shared.length) {
      replace(chartsBox, emptyState("These runs share no metric, so there is nothing to overlay."));
      document.body.dataset.chartsReady = "true";
      return;
    }
    const ready = readyCounter(shared.length, () => { if (!ctx.signal.aborted) document.body.dataset.chartsReady = "true"; });
    chartsBox.replaceChildren();
    for (const key of shared) {
      const el = h("div", {});
      chartsBox.append(el);
      charts.push(new MetricChart(el, {
        key, smoothing, onDrawn: ready, fixedX: key.startsWith("system/") ? "time" : null,  // samples, not steps
        sources: runs.map((r, i) => ({
          label: label(r), origin: r.start_time, style: styleFor(i),
          fetch: ({start, end, maxPoints, signal}) => loaderFor(r.id)({key, start, end, maxPoints, signal}),
        })),
      }));
    }
    charts.forEach((c) => c.load());
  }

  function renderConfig() {
    const configs = runs.map((r) => flatten(r.config || {}));
    const keys = [...new Set(configs.flatMap((c) => Object.keys(c)))].sort();
    const differs = (k) => new Set(configs.map((c) => JSON.stringify(c[k] ?? null))).size > 1;
    const rows = keys.map((k) => ({k, diff: differs(k)})).sort((a, b) => (b.diff - a.diff) || a.k.localeCompare(b.k));
    const nDiff = rows.filter((r) => r.diff).length;
    const toggle = h("label", {class: "control"}, h("input", {type: "checkbox", checked: onlyDiffs,
      onchange: (e) => { onlyDiffs = e.target.checked; renderConfig(); }}), " Only differences");
    replace(configBox, h("div", {class: "card-head"}, h("h2", {id: "config-h"}, "Config"), toggle,
      h("span", {class: "muted small"}, `${nDiff} of ${keys.length} keys differ (marked ≠)`)),
    keys.length
      ? h("div", {class: "table-box"}, h("table", {class: "grid kv compare-config", "data-testid": "config-table"},
        h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "Key"), runs.map((r, i) => h("th", {scope: "col"}, swatch(styleFor(i)), " ", label(r))))),
        h("tbody", {}, rows.filter((r) => r.diff || !onlyDiffs).map(({k, diff}) => h("tr", {class: diff ? "differs" : "", "data-differs": diff ? "true" : "false", "data-key": k},
          h("th", {scope: "row"}, diff ? h("span", {class: "diff-mark", title: "differs between runs"}, "≠ ") : null, k,
            diff ? h("span", {class: "sr-only"}, " (differs)") : null),
          configs.map((c) => h("td", {}, fmtValue(c[k]))))))))
      : h("p", {class: "muted", "data-testid": "config-table"}, "None of these runs logged a config."));
  }

  // -- media: per key, each run's item at one step picked for them all -----------------------------

  async function loadMedia() {
    const listed = await Promise.allSettled(runs.map((r) =>
      api(`/api/v1/runs/${encodeURIComponent(r.id)}/artifacts`, {signal: ctx.signal})));
    if (ctx.signal.aborted) return;
    // another user's run lists no artifacts to this viewer: its cells say so, the others still show
    const perRun = listed.map((l) => (l.status === "fulfilled" ? {byKey: mediaByKey(l.value.artifacts)} : {error: l.reason}));
    const keys = [...new Set(perRun.flatMap((p) => (p.byKey ? [...p.byKey.keys()] : [])))]
      .sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
    mediaBox.hidden = !keys.length;
    if (!keys.length) return;
    replace(mediaBox, h("h2", {id: "media-h"}, "Media"),
      h("p", {class: "muted small"}, "Each run's item at the step picked; a run that has none there shows its last one before it."),
      keys.map((key) => mediaRow(key, perRun)));
  }

  function mediaRow(key, perRun) {
    const items = perRun.map((p) => (p.byKey && p.byKey.get(key)) || []);
    const steps = [...new Set(items.flat().map((a) => a.step ?? 0))].sort((a, b) => a - b);
    const stepLabel = h("span", {class: "small", "data-testid": "media-step"});
    const cells = runs.map((r) => h("div", {class: "media-cell", "data-testid": "media-cell", "data-run-id": r.id}));
    let shown = -1;
    async function show(s) {
      shown = s;
      const step = steps[s];
      stepLabel.textContent = `step ${fmtNumber(step)} (${s + 1} of ${steps.length})`;
      const picked = items.map((list) => lastAtOrBefore(list, step));
      // every cell drawn at once, once all are read: histograms side by side share one x range
      const loaded = await Promise.all(picked.map((a, i) => (a ? media.load(runs[i].id, a).catch((error) => ({error})) : null)));
      if (shown !== s || ctx.signal.aborted) return;  // the slider moved on, or the page was left
      const range = histogramRange(loaded);
      cells.forEach((cell, i) => fillCell(cell, i, {key, step, item: picked[i], loaded: loaded[i], listing: perRun[i], range}));
    }
    show(steps.length - 1);
    const type = items.flat()[0].type;
    return h("div", {class: "card media-card media-row", "data-testid": "media-row", "data-key": key, "data-type": type},
      h("div", {class: "card-head"}, h("h3", {}, key), stepLabel),
      h("div", {class: "media-cells", style: `--runs: ${runs.length}`}, cells),
      stepSlider(steps.length, key, show));
  }

  /** Run i's cell: its item at `step` (or the last before it), or why there is none. */
  function fillCell(cell, i, {key, step, item, loaded, listing, range}) {
    const at = item && (item.step ?? 0);
    cell.dataset.step = item ? String(at) : "";
    replace(cell,
      h("div", {class: "media-cell-head small"}, swatch(styleFor(i)), " ", h("strong", {}, label(runs[i])),
        item ? h("span", {class: "muted"}, at === step ? ` · step ${fmtNumber(at)}`
          : ` · step ${fmtNumber(at)}, the last before ${fmtNumber(step)}`) : null),
      h("div", {class: "media-view"},
        !item ? h("p", {class: "muted small", "data-testid": "media-missing"}, listing.error
          ? `Its media could not be listed: ${listing.error.message}` : `no ${key} at step ${fmtNumber(step)}`)
          : loaded.error ? mediaError(item, loaded.error)
            : mediaNode(loaded, item, {key, runRef: runs[i].id, range: item.type === "histogram" ? range : null})),
      item && item.caption ? h("p", {class: "muted small", "data-testid": "media-caption"}, item.caption) : null);
  }

  load();
  const mine = new Set(ids);
  ctx.refreshOn(["runs"], async () => {
    await Promise.all(charts.map((c) => c.load()));
  }, {wait: 1500, filter: (name, data) => !data.runs || data.runs.some((r) => mine.has(String(r.id ?? r)))});
}

/** The item of `items` (sorted by step) at `step`, or the last one before it; null when none. */
function lastAtOrBefore(items, step) {
  let found = null;
  for (const a of items) {
    if ((a.step ?? 0) > step) break;
    found = a;
  }
  return found;
}

/** A short line drawn in the run's colour and dash pattern (so the legend works without colour). */
function swatch(style) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", "28");
  svg.setAttribute("height", "10");
  svg.setAttribute("aria-hidden", "true");
  svg.classList.add("swatch");
  const line = document.createElementNS(ns, "line");
  for (const [k, v] of Object.entries({x1: 1, y1: 5, x2: 27, y2: 5, stroke: style.color, "stroke-width": 2.5,
    "stroke-dasharray": style.dash.length ? style.dash.join(" ") : "none"})) line.setAttribute(k, String(v));
  svg.append(line);
  if (style.points) {
    const dot = document.createElementNS(ns, "circle");
    for (const [k, v] of Object.entries({cx: 14, cy: 5, r: 3, fill: style.color})) dot.setAttribute(k, String(v));
    svg.append(dot);
  }
  return svg;
}
