// Run (/runs/ID): a chart per metric (training metrics, then system/... ones), each with zoom by
// drag (refetched at the new range), double-click to reset, EMA smoothing and a step/time x-axis;
// the config; artifacts and checkpoints, each a download; the media it logged (images, histograms,
// text, tables) by step; its notes (Markdown); and, for its owner or an admin, rename, tags,
// archive and delete (after a confirmation).
//
// Fast with long series: every series is fetched at once, downsampled to the chart's width, and
// each chart draws as its answer arrives. body.dataset.chartsReady = "true" once all have drawn.

import {h, replace, facts} from "../lib/dom.js";
import {api, errorState, emptyState, isAbort, post, withQuery, ApiError} from "../lib/api.js";
import {downloadLink} from "../lib/artifacts.js";
import {MediaLoader, isMedia, mediaByKey, mediaError, mediaNode, stepSlider} from "../lib/media.js";
import {renderMarkdown} from "../lib/markdown.js";
import {mayManage, onIdentity} from "../lib/session.js";
import {elapsedEl, flatten, fmtBytes, fmtDuration, fmtNumber, fmtValue, stateBadge, timeEl} from "../lib/format.js";
import {MetricChart, readyCounter, smoothingControl, styleFor, xAxisToggle} from "../lib/chart.js";
import {seriesLoader} from "../lib/series.js";
import {duration} from "./runs.js";
import {rerunButtons} from "../lib/relaunch.js";

/** Metric keys in display order: training metrics by name, then system/... ones. */
export function orderKeys(keys) {
  const sys = (k) => k.startsWith("system/");
  return [...keys].sort((a, b) => (sys(a) - sys(b)) || a.localeCompare(b, undefined, {numeric: true}));
}

export function mount(main, ctx) {
  const id = ctx.params[0];
  let run = null;
  const charts = new Map();  // key -> MetricChart
  const loadSeries = seriesLoader(id);
  let smoothing = 0;
  let xMode = "step";
  const rerunState = {};  // a rerun of another user's job being confirmed (lib/relaunch.js)

  const head = h("div", {class: "page-head"}, h("h1", {}, `Run ${id}`));
  const summary = h("div", {});
  const controls = h("div", {class: "toolbar chart-controls", hidden: true},
    smoothingControl((w) => { smoothing = w; charts.forEach((c) => c.setSmoothing(w)); }),
    xAxisToggle((mode) => { xMode = mode; charts.forEach((c) => c.setXMode(mode)); }),
    h("span", {class: "muted small"}, "Drag across a chart to zoom in; double-click to zoom out."));
  const training = h("div", {class: "charts"});
  const systemHead = h("h2", {hidden: true}, "System ",
    h("span", {class: "muted small"}, "(the job's samples, against time since the run started; the step toggle leaves them be)"));
  const system = h("div", {class: "charts"});
  const chartsBox = h("section", {"aria-label": "Metrics"}, training, systemHead, system);
  const configBox = h("section", {class: "card", "aria-labelledby": "config-h"}, h("h2", {id: "config-h"}, "Config"));
  const artifactsBox = h("section", {class: "card", "aria-labelledby": "art-h"}, h("h2", {id: "art-h"}, "Artifacts and checkpoints"),
    h("p", {class: "muted"}, "Loading…"));
  const status = h("div", {}, h("p", {class: "muted"}, "Loading the run…"));
  const manageBox = h("div", {class: "toolbar run-manage", "data-testid": "run-manage", hidden: true});
  const manageMessage = h("p", {class: "error-state", role: "alert", "data-testid": "manage-error", hidden: true});
  const notesBox = h("section", {class: "card", "aria-labelledby": "notes-h", "data-testid": "run-notes", hidden: true});
  const mediaBox = h("section", {"aria-labelledby": "media-h", "data-testid": "media", hidden: true});
  main.append(head, status, manageBox, manageMessage, summary, notesBox, controls, chartsBox, mediaBox,
    h("div", {class: "two"}, configBox, artifactsBox));
  const media = new MediaLoader(ctx.signal);
  ctx.onLeave(() => media.dispose());
  ctx.onLeave(() => charts.forEach((c) => c.destroy()));
  ctx.onLeave(onIdentity(() => { if (run) { renderManage(); renderNotes(); } }));
  let managing = null;  // null, "rename", "tags", "delete": which control is open
  let editingNotes = false;

  async function load() {
    let fresh;
    try {
      fresh = await api(`/api/v1/runs/${encodeURIComponent(id)}`, {signal: ctx.signal});
    } catch (err) {
      if (isAbort(err)) return;
      if (!run) {
        replace(status, err instanceof ApiError && err.status === 404
          ? emptyState(`No run ${id}. `, h("a", {href: "/runs"}, "See all runs"), ".")
          : errorState(err, load, {what: `run ${id}`}));
        document.body.dataset.chartsReady = "true";
      }
      return;
    }
    const first = !run;
    run = fresh;
    status.replaceChildren();
    ctx.title(`${run.project} / ${run.name}`);
    renderHead();
    renderManage();
    if (!editingNotes) renderNotes();
    if (first) {
      makeCharts();
      renderConfig();
      loadArtifacts();
      loadOrigin();
    } else {
      addNewCharts();
      renderConfig();
    }
  }

  let origin = null;  // {job, parentRun}: the job this run's job runs again, and that job's run
  async function loadOrigin() {
    if (!run.job_id) return;
    try {
      const job = await api(`/api/v1/jobs/${run.job_id}`, {signal: ctx.signal});
      let parentRun = null;
      if (job.parent) {
        const found = await api(withQuery("/api/v1/runs", {job: job.parent, limit: 1}), {signal: ctx.signal});
        parentRun = (found.runs || found)[0] || null;
      }
      origin = {job, parentRun};
      renderHead();
    } catch (err) {
      if (!isAbort(err)) origin = null;
    }
  }

  function renderHead() {
    const reruns = origin ? rerunButtons(origin.job, String(origin.job.ref || origin.job.id), {
      navigate: ctx.navigate, signal: ctx.signal, state: rerunState,
      onError: (err) => replace(status, errorState(err))}) : [];
    replace(head, h("h1", {}, h("a", {href: withQuery("/runs", {project: run.project})}, run.project), " / ",
      h("span", {"data-testid": "run-name"}, run.name || `run ${run.id}`)),
      stateBadge(run.state, {testid: "run-state"}),
      run.archived ? h("span", {class: "tag", "data-testid": "run-archived"}, "archived") : null,
      reruns.length ? h("span", {class: "actions"}, ...reruns) : null);
    const tags = run.tags || [];
    replace(summary, facts([
      ["Job", run.job_id ? h("a", {href: `/jobs/${run.job_id}`}, `#${run.job_id}`) : null],
      ["Run again from", origin && origin.job.parent ? (origin.parentRun
        ? h("a", {href: `/runs/${origin.parentRun.uid || origin.parentRun.id}`, "data-testid": "run-parent"},
          origin.parentRun.name || `run ${origin.parentRun.id}`)
        : h("a", {href: `/jobs/${origin.job.parent}`, "data-testid": "run-parent"}, `job #${origin.job.parent}`)) : null],
      ["User", run.user],
      ["Started", run.start_time ? timeEl(run.start_time) : null],
      ["Duration", run.start_time ? (run.end_time ? h("span", {"data-testid": "run-duration"}, fmtDuration(duration(run)))
        : elapsedEl(run.start_time)) : null],
      ["Last step", run.last_step !== null && run.last_step !== undefined ? fmtNumber(run.last_step) : null],
      ["Tags", tags.length ? h("span", {}, tags.map((t) => h("span", {class: "tag"}, t))) : null],
      ["ID", h("span", {class: "small"}, `${run.id}`, run.uid ? h("code", {}, ` ${run.uid}`) : null)],
    ], {class: "facts inline"}));
  }

  // -- managing the run (its owner or an admin; the server decides, the page only offers) ----------

  function renderManage() {
    manageBox.hidden = mayManage(run) === "no";
    if (manageBox.hidden) return;
    const field = (testid, value, label) => h("input", {type: "text", value, "data-testid": testid, "aria-label": label,
      onkeydown: (e) => { if (e.key === "Escape") { managing = null; renderManage(); } }});
    if (managing === "rename") {
      const input = field("rename-input", run.name || "", "New name");
      replace(manageBox, h("form", {class: "inline", onsubmit: (e) => { e.preventDefault(); change({name: input.value}); }},
        input, " ", h("button", {type: "submit", class: "primary", "data-testid": "rename-save"}, "Save"), " ",
        h("button", {type: "button", onclick: () => { managing = null; renderManage(); }}, "Cancel")));
      input.focus();
      input.select();
      return;
    }
    if (managing === "tags") {
      const input = field("tag-input", "", "Tag to add");
      replace(manageBox, h("form", {class: "inline", onsubmit: (e) => {
        e.preventDefault();
        if (input.value.trim()) tags({add: [input.value.trim()], remove: []});
      }},
      (run.tags || []).map((t) => h("span", {class: "tag"}, t, " ",
        h("button", {type: "button", class: "small", "aria-label": `Remove tag ${t}`, "data-testid": "tag-remove",
          "data-tag": t, onclick: () => tags({add: [], remove: [t]})}, "×"))),
      input, " ", h("button", {type: "submit", "data-testid": "tag-add"}, "Add tag"), " ",
      h("button", {type: "button", onclick: () => { managing = null; renderManage(); }}, "Done")));
      input.focus();
      return;
    }
    if (managing === "delete") {
      replace(manageBox, h("span", {class: "confirm", role: "group", "aria-label": "Confirm delete"},
        `Delete run ${run.id} (${run.name}) with its metrics and uploaded artifacts, for good? `,
        h("button", {type: "button", class: "danger", "data-testid": "confirm-yes", onclick: remove}, "Yes, delete it"), " ",
        h("button", {type: "button", "data-testid": "confirm-no", onclick: () => { managing = null; renderManage(); }}, "Keep it")));
      manageBox.querySelector("[data-testid=confirm-yes]").focus();
      return;
    }
    const open = (what) => () => { managing = what; renderManage(); };
    replace(manageBox,
      h("button", {type: "button", "data-testid": "run-rename", onclick: open("rename")}, "Rename"), " ",
      h("button", {type: "button", "data-testid": "run-tags", onclick: open("tags")}, "Tags"), " ",
      h("button", {type: "button", "data-testid": "run-edit-notes", onclick: () => { editingNotes = true; renderNotes(); }},
        run.notes ? "Edit notes" : "Add notes"), " ",
      h("button", {type: "button", "data-testid": "run-archive", onclick: () => change({archived: !run.archived})},
        run.archived ? "Restore" : "Archive"), " ",
      h("button", {type: "button", class: "danger", "data-testid": "run-delete", onclick: open("delete")}, "Delete…"));
  }

  function renderNotes() {
    if (editingNotes) {
      const area = h("textarea", {rows: 8, class: "notes-editor", "data-testid": "notes-input", "aria-label": "Notes (Markdown)"});
      area.value = run.notes || "";
      replace(notesBox, h("h2", {id: "notes-h"}, "Notes"),
        h("p", {class: "muted small"}, "Markdown: # headings, **bold**, *italic*, `code`, lists, [links](https://…)."),
        area, h("div", {class: "toolbar"},
          h("button", {type: "button", class: "primary", "data-testid": "notes-save",
            onclick: async () => { if (await change({notes: area.value || null})) { editingNotes = false; renderNotes(); } }}, "Save"), " ",
          h("button", {type: "button", onclick: () => { editingNotes = false; renderNotes(); }}, "Cancel")));
      notesBox.hidden = false;
      area.focus();
      return;
    }
    notesBox.hidden = !run.notes;
    if (run.notes) replace(notesBox, h("h2", {id: "notes-h"}, "Notes"), h("div", {class: "notes", "data-testid": "notes-view"}, renderMarkdown(run.notes)));
  }

  async function change(body) {
    return act(() => api(`/api/v1/runs/${encodeURIComponent(id)}`, {method: "PATCH", body, signal: ctx.signal}), "change");
  }

  async function tags(body) {
    return act(() => post(`/api/v1/runs/${encodeURIComponent(id)}/tags`, body, {signal: ctx.signal}), "tag");
  }

  async function act(call, what) {
    manageMessage.hidden = true;
    try {
      const fresh = await call();
      run = {...run, ...fresh};
      if (managing !== "tags") managing = null;
      renderHead();
      renderManage();
      ctx.title(`${run.project} / ${run.name}`);
      return true;
    } catch (err) {
      if (isAbort(err)) return false;
      replace(manageMessage, h("strong", {}, `✗ Could not ${what} run ${id}: `), err.message, err.hint ? ` (${err.hint})` : "");
      manageMessage.hidden = false;
      return false;
    }
  }

  async function remove() {
    manageMessage.hidden = true;
    try {
      await api(`/api/v1/runs/${encodeURIComponent(id)}`, {method: "DELETE", signal: ctx.signal});
    } catch (err) {
      if (isAbort(err)) return;
      managing = null;
      renderManage();
      replace(manageMessage, h("strong", {}, `✗ Could not delete run ${id}: `), err.message);
      manageMessage.hidden = false;
      return;
    }
    ctx.navigate(withQuery("/runs", {project: run.project}));
  }

  function newChart(key) {
    const el = h("div", {});
    const chart = new MetricChart(el, {
      key, sources: [{label: run.name, origin: run.start_time, style: styleFor(0),
        fetch: ({start, end, maxPoints, signal}) => loadSeries({key, start, end, maxPoints, signal})}],
      // system/... points are the job's samples, stepped in seconds since the run started: drawn
      // against that time (their real one), never as if those seconds were training steps
      xMode, fixedX: key.startsWith("system/") ? "time" : null, smoothing, onDrawn: () => ready && ready(),
      // Downsampling keeps finite points where a bucket has any: say so when the series ended badly.
      extraNote: () => {
        const m = (run.metrics || {})[key];
        return m && typeof m.last === "string" ? `⚠ last value ${m.last}` : "";
      },
    });
    charts.set(key, chart);
    return chart;
  }

  let ready = null;
  function makeCharts() {
    const keys = orderKeys(Object.keys(run.metrics || {}));
    controls.hidden = !keys.length;
    if (!keys.length) {
      replace(training, emptyState("No metrics logged yet. Log them from the training script with ",
        h("code", {}, 'run.log({"loss": loss}, step=step)'), "; they appear here as they arrive."));
      document.body.dataset.chartsReady = "true";
      return;
    }
    ready = readyCounter(keys.length, () => { if (!ctx.signal.aborted) document.body.dataset.chartsReady = "true"; });
    const made = keys.map(newChart);
    place();
    for (const chart of made) chart.load();  // all at once: the browser runs them in parallel
  }

  function addNewCharts() {
    const keys = orderKeys(Object.keys(run.metrics || {})).filter((k) => !charts.has(k));
    if (!keys.length) return;
    if (!charts.size) training.replaceChildren();
    controls.hidden = false;
    const made = keys.map(newChart);
    place();
    made.forEach((c) => c.load());
  }

  /** Put chart containers in order (moving a node keeps its chart). */
  function place() {
    const keys = orderKeys([...charts.keys()]);
    training.replaceChildren(...keys.filter((k) => !k.startsWith("system/")).map((k) => charts.get(k).container));
    const sys = keys.filter((k) => k.startsWith("system/"));
    system.replaceChildren(...sys.map((k) => charts.get(k).container));
    systemHead.hidden = !sys.length;
  }

  function renderConfig() {
    const config = flatten(run.config || {});
    const keys = Object.keys(config).sort();
    replace(configBox, h("h2", {id: "config-h"}, "Config"),
      keys.length
        ? h("table", {class: "grid kv", "data-testid": "config-table"},
          h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "Key"), h("th", {scope: "col"}, "Value"))),
          h("tbody", {}, keys.map((k) => h("tr", {"data-key": k}, h("th", {scope: "row"}, k), h("td", {}, fmtValue(config[k]))))))
        : h("p", {class: "muted", "data-testid": "config-table"}, "No config logged. Pass it at the start: ",
          h("code", {}, "corral.init(project=..., config=args)"), "."));
  }

  async function loadArtifacts() {
    try {
      const {artifacts} = await api(`/api/v1/runs/${encodeURIComponent(id)}/artifacts`, {signal: ctx.signal});
      renderMedia(artifacts);
      const sorted = [...artifacts].filter((a) => !isMedia(a))
        .sort((a, b) => (a.type !== "checkpoint") - (b.type !== "checkpoint") || (b.step ?? -1) - (a.step ?? -1));
      replace(artifactsBox, h("h2", {id: "art-h"}, "Artifacts and checkpoints"),
        sorted.length
          ? h("div", {class: "table-box"}, h("table", {class: "grid", "data-testid": "artifacts"},
            h("thead", {}, h("tr", {}, ["Path", "Type", "Step", "Metric", "Size", "Created"].map((t) => h("th", {scope: "col"}, t)))),
            h("tbody", {}, sorted.map((a) => h("tr", {"data-testid": "artifact-row", "data-path": a.path},
              h("td", {}, downloadLink(id, a),
                a.stored ? null : h("span", {class: "muted small", title: "Read from where the job wrote it"}, " (where written)")),
              h("td", {}, a.type || "—"),
              h("td", {class: "num"}, a.step !== null && a.step !== undefined ? fmtNumber(a.step) : "—"),
              h("td", {}, a.metric ? `${a.metric} = ${fmtNumber(a.metric_value)}` : "—"),
              h("td", {class: "num"}, fmtBytes(a.size)),
              h("td", {class: "small"}, timeEl(a.created)))))))
          : h("p", {class: "muted"}, "No artifacts. Files logged with ", h("code", {}, "run.log_artifact(path)"),
            " and checkpoints saved with ", h("code", {}, "run.save_checkpoint(...)"), " appear here."));
    } catch (err) {
      if (isAbort(err)) return;
      replace(artifactsBox, h("h2", {id: "art-h"}, "Artifacts and checkpoints"), errorState(err, loadArtifacts, {what: "artifacts"}));
    }
  }

  // -- media logged with run.log (lib/media.js): one card per key, a slider over its steps ----------

  function renderMedia(artifacts) {
    const byKey = mediaByKey(artifacts);
    mediaBox.hidden = !byKey.size;
    if (!byKey.size) return;
    replace(mediaBox, h("h2", {id: "media-h"}, "Media"),
      h("div", {class: "charts"}, [...byKey].map(([key, items]) => mediaCard(key, items))));
  }

  function mediaCard(key, items) {
    const view = h("div", {class: "media-view"});
    const label = h("span", {class: "small", "data-testid": "media-step"});
    const caption = h("p", {class: "muted small", "data-testid": "media-caption"});
    let shown = -1;
    async function show(i) {
      shown = i;
      const a = items[i];
      label.textContent = `step ${fmtNumber(a.step ?? 0)} (${i + 1} of ${items.length})`;
      caption.textContent = a.caption || "";
      try {
        const loaded = await media.load(id, a);
        if (shown === i) replace(view, mediaNode(loaded, a, {key, runRef: id}));  // unless the slider moved on
      } catch (err) {
        if (!isAbort(err) && shown === i) replace(view, mediaError(a, err));
      }
    }
    show(items.length - 1);
    return h("div", {class: "card media-card", "data-testid": "media-card", "data-key": key, "data-type": items[0].type},
      h("div", {class: "card-head"}, h("h3", {}, key), label), view, caption, stepSlider(items.length, key, show));
  }

  load();
  // New metrics: refresh the summary and each chart (a zoomed chart keeps its range).
  // Redrawing every chart costs the server a downsample of each series: a run page that took
  // T to refresh waits at least 10 T before the next, so a page left open on a huge run that
  // logs all the time costs the server a tenth of a core at most.
  let chartsFreeAt = 0;
  ctx.refreshOn(["runs"], async () => {
    await load();
    if (performance.now() < chartsFreeAt) return;
    const began = performance.now();
    await Promise.all([...charts.values()].map((c) => c.load()));
    chartsFreeAt = performance.now() + 10 * (performance.now() - began);
  }, {wait: 2000, filter: (name, data) => !data.runs || data.runs.some((r) => String(r.id ?? r) === String(id) || r.uid === id)});
  ctx.refreshOn(["jobs"], load, {wait: 1000});
  ctx.refreshOn([], loadArtifacts, {wait: 1000});  // after a reconnection
}
