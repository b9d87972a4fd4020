// Media logged with run.log (corral.sdk.media), stored as the run's artifacts at
// media/<key>/<step><suffix>: images (.png, .jpg), histograms (.hist.json, {"edges", "counts"}),
// text (.txt) and tables (.table.json, {"columns", "rows"}). The run page shows each key with a
// slider over its steps, the compare page several runs' items side by side: both read and draw
// them here.
//
// What a run logged is data, never markup: text and table cells are set as text (dom.js's `h`),
// so a "<script>" in them shows as those characters and runs nothing.

import {h} from "./dom.js";
import {apiBytes} from "./api.js";
import {fmtBytes, fmtNumber} from "./format.js";
import {artifactUrl, downloadLink} from "./artifacts.js";

export const MEDIA_TYPES = ["image", "histogram", "text", "table"];
export const TABLE_ROWS_SHOWN = 200;
// A long text shows its start (the rest downloads); a table must be parsed whole, so a huge one
// is only offered for download rather than frozen in the page.
const TEXT_BYTES_SHOWN = 256 * 1024;
const TABLE_BYTES_READ = 32 * 1024 * 1024;

export function isMedia(a) {
  return a.stored && MEDIA_TYPES.includes(a.type) && a.path.startsWith("media/");
}

/** media/<key>/<step>.png → key (a key may hold slashes: "val/samples"). */
export function mediaKey(a) {
  return a.path.slice("media/".length, a.path.lastIndexOf("/"));
}

/** The media among `artifacts`, by key (keys sorted), each key's items by step. */
export function mediaByKey(artifacts) {
  const byKey = new Map();
  for (const a of artifacts.filter(isMedia)) {
    const key = mediaKey(a);
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(a);
  }
  const keys = [...byKey.keys()].sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
  return new Map(keys.map((k) => [k, byKey.get(k).sort((a, b) => (a.step ?? 0) - (b.step ?? 0))]));
}

/** Reads media items, each once while the page is open (moving a slider back costs nothing);
 * dispose() frees the images' object URLs. */
export class MediaLoader {
  constructor(signal) {
    this.signal = signal;
    this.cache = new Map();
    this.urls = [];
  }

  /** {url} for an image, {data} for a histogram or a table, {text, partial} for text; or {tooBig}. */
  load(runRef, a) {
    const id = `${runRef}\n${a.path}\n${a.sha256 ?? a.size}`;
    if (!this.cache.has(id)) {
      const reading = this.read(runRef, a);
      this.cache.set(id, reading);
      reading.catch(() => this.cache.delete(id));  // tried again next time
    }
    return this.cache.get(id);
  }

  async read(runRef, a) {
    if (a.type === "table" && a.size > TABLE_BYTES_READ) return {tooBig: true};
    const partial = a.type === "text" && a.size > TEXT_BYTES_SHOWN;
    const {bytes} = await apiBytes(artifactUrl(runRef, a.path), {signal: this.signal,
      headers: partial ? {Range: `bytes=0-${TEXT_BYTES_SHOWN - 1}`} : {}});
    if (a.type === "image") {
      const url = URL.createObjectURL(new Blob([bytes]));
      this.urls.push(url);
      return {url};
    }
    // streaming: a character cut at the end of a partial read is left out, not shown as �
    const text = new TextDecoder().decode(bytes, {stream: partial});
    if (a.type === "text") return {text, partial};
    try {
      return {data: JSON.parse(text)};
    } catch {
      return {data: null};
    }
  }

  dispose() {
    this.urls.forEach((u) => URL.revokeObjectURL(u));
    this.urls = [];
  }
}

/**
 * The item drawn: an <img>, a histogram's <svg>, a <pre> of text, a <table>.
 * Options: key (for an image's alt text), runRef (for the download link of a long text or a huge
 * table), range ([lo, hi]: a histogram's x range, shared by the histograms shown side by side).
 */
export function mediaNode(loaded, a, {key, runRef, range = null}) {
  const step = a.step ?? 0;
  if (a.type === "image") {
    return h("img", {src: loaded.url, alt: a.caption || `${key} at step ${step}`, "data-testid": "media-image",
      "data-step": step, class: "media-image"});
  }
  if (a.type === "histogram") {
    return isHistogram(loaded.data) ? histogramSvg(loaded.data, step, range)
      : problem(a, 'not a histogram: expected {"edges": [...], "counts": [...]} with one more edge than counts');
  }
  if (a.type === "text") {
    return h("div", {class: "media-text-box"},
      h("pre", {class: "media-text", "data-testid": "media-text", "data-step": step}, loaded.text),
      loaded.partial ? h("p", {class: "muted small", "data-testid": "media-text-note"},
        `The first ${fmtBytes(TEXT_BYTES_SHOWN)} of ${fmtBytes(a.size)}: `, downloadLink(runRef, a, "download all of it"), ".") : null);
  }
  if (loaded.tooBig) {
    return h("p", {class: "muted small", "data-testid": "media-table-note"},
      `A table of ${fmtBytes(a.size)}, too big to show here: `, downloadLink(runRef, a, "download it"), ".");
  }
  return isTable(loaded.data) ? tableNode(loaded.data, step)
    : problem(a, 'not a table: expected {"columns": [...], "rows": [[...], ...]}');
}

/** What is drawn in place of an item that could not be read. */
export function mediaError(a, err) {
  return problem(a, err && err.message ? err.message : String(err));
}

function problem(a, message) {
  return h("p", {class: "error-state", role: "alert", "data-testid": "media-error"}, `Could not show ${a.path}: ${message}`);
}

/** A slider over `count` steps, at the last one; onStep(index) as it moves. */
export function stepSlider(count, key, onStep) {
  return h("input", {type: "range", min: 0, max: count - 1, value: count - 1, step: 1,
    "data-testid": "media-slider", "aria-label": `Step of ${key}`, disabled: count < 2,
    oninput: (e) => onStep(Number(e.target.value))});
}

// -- histograms ------------------------------------------------------------------------------------

function isHistogram(d) {
  return !!d && Array.isArray(d.edges) && Array.isArray(d.counts) && d.counts.length > 0
    && d.edges.length === d.counts.length + 1 && d.edges.every(Number.isFinite) && d.counts.every(Number.isFinite);
}

/** The x range that holds every one of these (loaded) histograms, or null when none is one. */
export function histogramRange(loadedItems) {
  const hists = loadedItems.map((l) => l && l.data).filter(isHistogram);
  if (!hists.length) return null;
  return [Math.min(...hists.map((d) => d.edges[0])), Math.max(...hists.map((d) => d.edges[d.edges.length - 1]))];
}

/** A histogram's bars as SVG, placed on [lo, hi] (its own edges unless given); each bar's count in
 * its title (for hover) and data-count, the range in data-lo and data-hi (for tests). */
function histogramSvg({edges, counts}, step, range) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  const W = 320, H = 120, most = Math.max(1, ...counts);
  const [lo, hi] = range || [edges[0], edges[edges.length - 1]];
  const span = hi > lo ? hi - lo : 1;
  const x = (v) => ((v - lo) / span) * W;
  svg.setAttribute("viewBox", `0 0 ${W} ${H + 16}`);
  svg.setAttribute("class", "histogram");
  svg.setAttribute("data-testid", "media-histogram");
  svg.setAttribute("data-step", String(step));
  svg.setAttribute("data-lo", String(lo));
  svg.setAttribute("data-hi", String(hi));
  counts.forEach((c, i) => {
    const bar = document.createElementNS(ns, "rect");
    const left = x(edges[i]), width = x(edges[i + 1]) - left, height = (c / most) * H;
    const gap = width > 2 ? 0.5 : 0;  // narrow bars touch rather than vanish
    bar.setAttribute("x", String(left + gap));
    bar.setAttribute("y", String(H - height));
    bar.setAttribute("width", String(Math.max(width - 2 * gap, 0.5)));
    bar.setAttribute("height", String(height));
    bar.setAttribute("data-count", String(c));
    const title = document.createElementNS(ns, "title");
    title.textContent = `${fmtNumber(edges[i])} – ${fmtNumber(edges[i + 1])}: ${c}`;
    bar.append(title);
    svg.append(bar);
  });
  for (const [at, anchor, value] of [[0, "start", lo], [W, "end", hi]]) {
    const text = document.createElementNS(ns, "text");
    text.setAttribute("x", String(at));
    text.setAttribute("y", String(H + 13));
    text.setAttribute("text-anchor", anchor);
    text.textContent = fmtNumber(value);
    svg.append(text);
  }
  return svg;
}

// -- tables ----------------------------------------------------------------------------------------

function isTable(d) {
  return !!d && Array.isArray(d.columns) && Array.isArray(d.rows);
}

/** A cell as logged: numbers in full (a table is data, not a summary), null as nothing. */
function cellText(v) {
  if (v === null || v === undefined) return "";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

function tableNode({columns, rows}, step) {
  const shown = rows.slice(0, TABLE_ROWS_SHOWN).map((r) => (Array.isArray(r) ? r : [r]));
  return h("div", {class: "media-table-wrap"},
    h("div", {class: "media-table-box"},
      h("table", {class: "grid media-table", "data-testid": "media-table", "data-step": step, "data-rows": rows.length},
        h("thead", {}, h("tr", {}, columns.map((c) => h("th", {scope: "col"}, cellText(c))))),
        h("tbody", {}, shown.map((r) => h("tr", {},
          r.map((c) => h("td", {class: typeof c === "number" ? "num" : null}, cellText(c)))))))),
    rows.length > shown.length ? h("p", {class: "muted small", "data-testid": "media-table-note"},
      `${fmtNumber(shown.length)} of ${fmtNumber(rows.length)} rows`) : null);
}
