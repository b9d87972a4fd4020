// Runs (/runs): a table of tracked runs: project, name, state, duration, the config values that
// differ between the listed runs, and the final and best value of each metric (one column per
// metric, the two stacked). Filter by project and state (in the URL), sort by clicking a header (a
// button: keyboard too), pick runs and Compare. GET /api/v1/runs and /api/v1/projects; refetched on
// `runs` and `jobs`.
//
// It fits its box (the window's width): columns share the width (table-layout: fixed), long values
// are cut (paths to their ends) with the whole in a tooltip, and headers wrap. Only when each column
// would get less than MIN_COLUMN_PX does the table scroll sideways, inside its own box.

import {h, replace, keepFocus} from "../lib/dom.js";
import {api, errorState, emptyState, isAbort, withQuery} from "../lib/api.js";
import {flatten, fmtDuration, fmtNumber, fmtTime, fmtValue, num, stateBadge, toDate} from "../lib/format.js";

const LIMIT = 500;
const STATES = ["running", "finished", "failed", "crashed"];

/** The best value of a metric: min for losses, max otherwise (with the step it was reached). */
export function best(key, m) {
  return key.toLowerCase().includes("loss") ? {value: m.min, step: m.min_step, how: "min"} : {value: m.max, step: m.max_step, how: "max"};
}

export function mount(main, ctx) {
  const selected = new Set();
  let runs = [];
  let projects = [];
  const readSort = () => ({key: ctx.query().get("sort") || "start", dir: ctx.query().get("dir") === "asc" ? "asc" : "desc"});
  let sort = readSort();

  const count = h("p", {class: "muted page-sub", "aria-live": "polite"});
  const compare = h("button", {type: "button", class: "primary", "data-testid": "compare-button", disabled: true,
    onclick: () => ctx.navigate(`/compare?runs=${[...selected].join(",")}`)}, "Compare");
  const compareHint = h("span", {class: "muted small"}, "Pick two or more runs to compare them.");
  const form = h("form", {class: "filters", role: "search", "aria-label": "Filter runs"});
  const tableBox = h("div", {class: "table-box wide"}, h("p", {class: "muted"}, "Loading runs…"));
  main.append(h("div", {class: "page-head"}, h("h1", {}, "Runs"), count),
    h("div", {class: "toolbar"}, form, h("span", {class: "spacer"}), compareHint, compare), tableBox);
  form.addEventListener("submit", (e) => e.preventDefault());

  function filters() {
    const q = ctx.query();
    return {project: q.get("project") || "", state: q.get("state") || "", archived: q.get("archived") === "true" ? "true" : ""};
  }

  function setUrl(changes, push = false) {
    const q = {...filters(), sort: sort.key === "start" ? null : sort.key, dir: sort.key === "start" ? null : sort.dir, ...changes};
    const url = withQuery("/runs", q);
    if (push) ctx.navigate(url);
    else history.replaceState({}, "", url);
  }

  function renderForm() {
    const f = filters();
    const select = (name, label, options) => h("label", {}, label, " ",
      h("select", {name, onchange: (e) => setUrl({[name]: e.target.value}, true)},
        h("option", {value: ""}, "all"),
        [...new Set([...options, f[name]].filter(Boolean))].map((o) => h("option", {value: o, selected: o === f[name]}, o))));
    replace(form, select("project", "Project", projects.map((p) => p.name)), select("state", "State", STATES),
      h("label", {}, h("input", {type: "checkbox", "data-testid": "show-archived", checked: f.archived === "true",
        onchange: (e) => setUrl({archived: e.target.checked ? "true" : null}, true)}), " Archived runs"));
  }

  let seq = 0;
  async function load() {
    const mySeq = ++seq;
    const f = filters();
    try {
      const [found, proj] = await Promise.all([
        api(withQuery("/api/v1/runs", {...f, limit: LIMIT}), {signal: ctx.signal}),
        api("/api/v1/projects", {signal: ctx.signal}).catch(() => ({projects: []})),
      ]);
      if (mySeq !== seq) return;
      runs = found.runs || [];
      projects = proj.projects || [];
    } catch (err) {
      if (isAbort(err) || mySeq !== seq) return;
      renderForm();
      replace(tableBox, errorState(err, load, {what: "runs"}));
      return;
    }
    if (!form.contains(document.activeElement)) renderForm();
    render();
  }

  function render() {
    const f = filters();
    count.textContent = runs.length >= LIMIT ? `the newest ${fmtNumber(LIMIT)} runs` : `${fmtNumber(runs.length)} run${runs.length === 1 ? "" : "s"}`;
    for (const id of [...selected]) if (!runs.some((r) => String(r.id) === id)) selected.delete(id);
    updateCompare();
    if (!runs.length) {
      replace(tableBox, f.project || f.state || f.archived
        ? emptyState("No runs match these filters. ", h("a", {href: "/runs"}, "Show all runs"), ".")
        : emptyState("No runs yet — track one from your training script: ",
          h("code", {}, 'run = corral.init(project="mnist", config=args)'), " then ", h("code", {}, 'run.log({"loss": loss})'), "."));
      return;
    }
    const columns = columnsFor(runs);
    const sorted = sortRuns(runs, columns, sort);
    const fixed = SELECT_PX + columns.reduce((sum, c) => sum + (c.width || 0), 0);
    const minWidth = fixed + MIN_COLUMN_PX * columns.filter((c) => !c.width).length;
    keepFocus(tableBox, () => replace(tableBox, h("table", {class: "grid runs", style: `min-width:${minWidth}px`},
      h("colgroup", {}, h("col", {style: `width:${SELECT_PX}px`}),
        columns.map((c) => h("col", {style: c.width ? `width:${c.width}px` : null}))),
      h("thead", {}, h("tr", {},
        h("th", {scope: "col"}, h("span", {class: "sr-only"}, "Select")),
        columns.map((c) => {
          const sorted = c.sorts.find((s) => s.key === sort.key);
          const button = (s, label) => h("button", {type: "button", class: "sort", "data-testid": `sort-${s.key}`,
            title: s.title || null, onclick: () => sortBy(s.key)}, label,
          h("span", {"aria-hidden": "true", class: "sort-mark"}, sort.key === s.key ? (sort.dir === "asc" ? " ▲" : " ▼") : ""));
          return h("th", {scope: "col", class: c.num ? "num" : "", "data-col": c.key,
            "aria-sort": sorted ? (sort.dir === "asc" ? "ascending" : "descending") : null},
          c.sorts.length === 1 ? button(c.sorts[0], breakable(c.label))
            : [h("span", {class: "col-name", title: c.title || null}, breakable(c.label)), h("span", {class: "sorts"},
              c.sorts.map((s, i) => [i ? " · " : "", button(s, s.label)]))]);
        }))),
      h("tbody", {}, sorted.map((r) => row(r, columns))))));
  }

  function row(r, columns) {
    const id = String(r.id);
    return h("tr", {"data-testid": "run-row", "data-run-id": r.id, class: selected.has(id) ? "selected" : ""},
      h("td", {}, h("input", {type: "checkbox", "data-testid": "run-select", value: id, checked: selected.has(id),
        "aria-label": `Select run ${r.project}/${r.name}`,
        onchange: (e) => {
          if (e.target.checked) selected.add(id); else selected.delete(id);
          e.target.closest("tr").classList.toggle("selected", e.target.checked);
          updateCompare();
        }})),
      columns.map((c) => h("td", {class: c.num ? "num" : "", "data-col": c.key}, c.cell(r))));
  }

  function updateCompare() {
    compare.disabled = selected.size < 2;
    compareHint.textContent = selected.size < 2 ? "Pick two or more runs to compare them." : `${selected.size} runs picked`;
  }

  function sortBy(key) {
    sort = sort.key === key ? {key, dir: sort.dir === "asc" ? "desc" : "asc"} : {key, dir: "asc"};
    setUrl({});
    render();
  }

  load();
  ctx.refreshOn(["runs", "jobs"], load, {wait: 1000});
  return {update: () => { sort = readSort(); load(); }};
}

/** Seconds from start to end (or now, running); null where unknown or where the record ends before it starts. */
export function duration(r) {
  if (!r.start_time) return null;
  const end = r.end_time || (r.state === "running" ? Date.now() / 1000 : null);
  return end && end >= r.start_time ? end - r.start_time : null;
}

const SELECT_PX = 30;  // the checkbox column
const MIN_COLUMN_PX = 76;  // below this a number is cut: scroll instead

/** A value cut to its cell's width (CSS), all of it in the tooltip; a path keeps its end, the part
 * that tells runs apart (cut from the left; the marks keep its characters in order). */
function clippedEl(text) {
  const s = String(text);
  return s.includes("/") ? h("div", {class: "path-end", title: s}, `\u200E${s}\u200E`) : h("div", {title: s}, s);
}

/** A header label that may wrap after _ / . (config keys and metric names are one long word otherwise). */
function breakable(label) {
  return String(label).split(/(?<=[_/.])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
}

const SHORT_TIME = {day: "numeric", month: "short", hour: "2-digit", minute: "2-digit"};

/** One sort for a column: its key (in the URL), the value it sorts by. */
function simple(column) {
  return {...column, sorts: [{key: column.key, value: column.value, title: column.title}]};
}

/** The columns: fixed ones, then config keys whose values differ, then a final/best column per metric. */
function columnsFor(runs) {
  const columns = [
    {key: "project", label: "Project", value: (r) => r.project, cell: (r) => clippedEl(r.project)},
    {key: "name", label: "Name", value: (r) => r.name, cell: (r) => h("div", {}, h("a", {href: `/runs/${r.id}`, title: r.name || null}, r.name || `run ${r.id}`))},
    {key: "state", label: "State", width: 106, value: (r) => r.state, cell: (r) => stateBadge(r.state)},
    {key: "start", label: "Started", width: 142, value: (r) => r.start_time, cell: (r) => {
      const d = toDate(r.start_time);
      if (!d) return "—";
      const year = d.getFullYear() === new Date().getFullYear() ? {} : {year: "numeric"};
      return h("time", {class: "small", datetime: d.toISOString(), title: fmtTime(r.start_time)}, d.toLocaleString(undefined, {...SHORT_TIME, ...year}));
    }},
    {key: "duration", label: "Duration", width: 74, num: true, value: duration, cell: (r) => fmtDuration(duration(r))},
  ].map(simple);
  const configs = runs.map((r) => flatten(r.config || {}));
  const keys = [...new Set(configs.flatMap((c) => Object.keys(c)))].sort();
  for (const k of keys) {
    const values = new Set(configs.map((c) => JSON.stringify(c[k] ?? null)));
    if (values.size < 2 && runs.length > 1) continue;  // the same everywhere: says nothing here
    columns.push(simple({key: `config.${k}`, label: k, title: `config: ${k}`, num: configs.some((c) => typeof c[k] === "number"),
      value: (r) => flatten(r.config || {})[k], cell: (r) => clippedEl(fmtValue(flatten(r.config || {})[k]))}));
  }
  const metricKeys = [...new Set(runs.flatMap((r) => Object.keys(r.metrics || {})))]
    .filter((k) => !k.startsWith("system/")).sort();
  for (const k of metricKeys) {
    const get = (r) => (r.metrics || {})[k];
    const how = k.toLowerCase().includes("loss") ? "min" : "max";
    columns.push({key: `metric.${k}`, label: k, title: `${k}: its last value, and below it its best (${how})`, num: true,
      sorts: [
        {key: `final.${k}`, label: "final", title: `sort by the last value of ${k}`, value: (r) => (get(r) ? num(get(r).last) : null)},
        {key: `best.${k}`, label: "best", title: `sort by the ${how === "min" ? "lowest" : "highest"} value of ${k}`,
          value: (r) => (get(r) ? num(best(k, get(r)).value) : null)},
      ],
      cell: (r) => {
        const m = get(r);
        if (!m) return h("span", {class: "muted"}, "—");
        const b = best(k, m);
        return [h("div", {"data-testid": "metric-final"}, metricCell(m.last, m.last_step)),
          h("div", {class: "small muted", "data-testid": "metric-best"}, `${how} `, metricCell(b.value, b.step))];
      }});
  }
  return columns;
}

function metricCell(value, step) {
  if (value === null || value === undefined) return h("span", {class: "muted"}, "—");
  const bad = typeof value === "string";
  return h("span", {title: step !== null && step !== undefined ? `at step ${fmtNumber(step)}` : null, class: bad ? "bad" : ""},
    bad ? h("span", {"aria-hidden": "true"}, "⚠ ") : null, fmtNumber(value));
}

function sortRuns(runs, columns, sort) {
  const sorts = columns.flatMap((c) => c.sorts);
  const column = sorts.find((s) => s.key === sort.key) || sorts.find((s) => s.key === "start");
  const sign = sort.dir === "asc" ? 1 : -1;
  const key = (r) => {
    const v = column.value(r);
    return v === null || v === undefined || (typeof v === "number" && Number.isNaN(v)) ? null : v;
  };
  return [...runs].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    if (x === null && y === null) return 0;
    if (x === null) return 1;  // missing values last, either direction
    if (y === null) return -1;
    if (typeof x === "number" && typeof y === "number") return sign * (x - y);
    return sign * String(x).localeCompare(String(y), undefined, {numeric: true});
  });
}
