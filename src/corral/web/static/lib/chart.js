// Charts on uPlot (the global from /static/vendor/uplot): metric charts of tracked runs, with
// zoom that refetches, EMA smoothing and a step/time x-axis; and plain time charts for a job's
// system metrics.
//
// Speed with long series comes from never asking for more points than the chart has pixels:
// each fetch passes max_points ≈ the plot's width, and a zoom refetches only the visible range
// (the server keeps each bucket's min and max, so spikes survive the downsampling).

import {h, replace} from "./dom.js";
import {fmtDuration, fmtNumber, num} from "./format.js";
import {isAbort} from "./api.js";

/* global uPlot */

// Okabe–Ito colours (distinguishable with colour-vision deficiency); runs also differ by dash.
export const COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#444444"];
export const DASHES = [[], [8, 4], [2, 3], [12, 3, 3, 3]];
export const DASH_NAMES = ["solid", "dashed", "dotted", "dash-dot"];

/** The line style of the i-th run: colour, dash, and markers from the fifth run on. */
export function styleFor(i) {
  return {color: COLORS[i % COLORS.length], dash: DASHES[i % DASHES.length], points: i >= DASHES.length,
    dashName: DASH_NAMES[i % DASHES.length]};
}

/** Exponential moving average with the start-up bias removed (as TensorBoard does); gaps stay gaps. */
export function ema(values, weight) {
  if (!weight) return values;
  const out = new Array(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) { out[i] = v; continue; }
    last = last * weight + (1 - weight) * v;
    n += 1;
    out[i] = last / (1 - Math.pow(weight, n));
  }
  return out;
}

/** Compact axis numbers: 1.2M, 350K, 0.0012. */
export function fmtAxis(v) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  if (a >= 1e4) return new Intl.NumberFormat(undefined, {notation: "compact", maximumSignificantDigits: 3}).format(v);
  if (a !== 0 && a < 1e-3) return v.toExponential(1);
  return String(Number(v.toPrecision(4)));
}

/** Seconds on a time axis: "250ms"-like spans get decimals ("0.25s"), longer ones "1m 30s". */
export function fmtElapsed(v, incr) {
  if (incr !== undefined && incr < 1) return `${v.toFixed(Math.min(3, Math.ceil(-Math.log10(incr))))}s`;
  return fmtDuration(v);
}

/** A series answer ({steps, values, times} with "NaN" strings) as plain arrays, non-finite values as gaps. */
export function parseSeries(body) {
  const steps = body.steps || [];
  const raw = body.values || [];
  const values = new Array(raw.length);
  let firstNonFinite = null;
  for (let i = 0; i < raw.length; i++) {
    const v = typeof raw[i] === "number" ? raw[i] : num(raw[i]);
    if (v === null || !Number.isFinite(v)) {
      values[i] = null;
      if (v !== null && firstNonFinite === null) firstNonFinite = {step: steps[i], value: raw[i]};
    } else {
      values[i] = v;
    }
  }
  return {steps, values, times: body.times || [], count: body.count || 0, downsampled: !!body.downsampled, firstNonFinite};
}

function plotWidth(el) {
  return Math.max(240, Math.floor(el.getBoundingClientRect().width || el.clientWidth || 600));
}

/**
 * A chart of one metric key from one or more runs ("sources").
 *
 * container: the element to fill (gets data-testid="chart", data-key, data-points).
 * sources: [{label, origin (epoch s the time axis counts from), style: styleFor(i),
 *            fetch: ({start, end, maxPoints, signal}) => Promise<series JSON>}]
 */
export class MetricChart {
  constructor(container, {key, title = key, sources, xMode = "step", fixedX = null, smoothing = 0, height = 200, onDrawn = null, extraNote = null}) {
    this.extraNote = extraNote;  // () => text added to the chart's note (e.g. "last value NaN")
    this.container = container;
    this.key = key;
    this.sources = sources;
    // "time" for series whose steps are not training steps (system/... samples): the step toggle leaves them be
    this.fixedX = fixedX;
    this.xMode = fixedX || xMode;
    this.smoothing = smoothing;
    this.height = height;
    this.onDrawn = onDrawn;
    this.drawnOnce = false;
    this.range = null;      // the zoomed x range {min, max}, or null for everything
    this.parsed = sources.map(() => null);
    this.plot = null;
    this.controller = null;
    this.seq = 0;
    container.classList.add("chart");
    container.dataset.testid = "chart";
    container.dataset.key = key;
    this.resetButton = h("button", {type: "button", class: "small", hidden: true, onclick: () => this.resetZoom(),
      title: "Show every step again (or double-click the chart)"}, "Reset zoom");
    this.note = h("span", {class: "chart-note"});
    this.xCaption = h("span", {class: "chart-x", "data-testid": "chart-x-axis"});
    this.body = h("div", {class: "chart-body", style: `min-height:${height + 40}px`},
      h("p", {class: "muted chart-loading"}, "Loading…"));
    replace(container,
      h("div", {class: "chart-head"}, h("h3", {}, title), this.note, this.xCaption, this.resetButton),
      this.body);
    this.showXMode();
    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(this.body);
  }

  /** Fetch every source for the current range (null: all steps) and draw. */
  async load() {
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    const seq = ++this.seq;
    const range = this.range;
    const maxPoints = Math.min(4000, Math.max(200, plotWidth(this.body)));
    this.container.classList.add("loading");
    try {
      const answers = await Promise.all(this.sources.map((source, i) => {
        const steps = range ? this.stepRange(i, range) : null;
        if (range && !steps) return Promise.resolve({steps: [], values: [], times: []});
        return source.fetch({start: steps ? steps[0] : null, end: steps ? steps[1] : null, maxPoints, signal: controller.signal});
      }));
      if (seq !== this.seq) return;
      this.parsed = answers.map(parseSeries);
      this.draw();
    } catch (err) {
      if (isAbort(err) || seq !== this.seq) return;
      this.showError(err);
    } finally {
      if (seq === this.seq) this.container.classList.remove("loading");
    }
  }

  /** The steps [first, last] of source i that cover the x range (null when it has none there). */
  stepRange(i, {min, max}) {
    if (this.xMode === "step") return [Math.max(0, Math.floor(min)), Math.max(0, Math.ceil(max))];
    const p = this.parsed[i];
    if (!p || !p.steps.length) return null;
    const xs = this.xValues(i);
    // The points just outside the range bound it, so a sparse view still refetches all of it.
    let lo = 0;
    while (lo + 1 < xs.length && xs[lo + 1] <= min) lo++;
    let hi = xs.length - 1;
    while (hi - 1 >= 0 && xs[hi - 1] >= max) hi--;
    if (hi < lo) return null;
    return [p.steps[lo], p.steps[hi]];
  }

  xValues(i) {
    const p = this.parsed[i];
    if (this.xMode === "step") return p.steps;
    const origin = this.sources[i].origin ?? (p.times.length ? p.times[0] : 0);
    return p.times.map((t) => t - origin);
  }

  /** The uPlot data table: x, then per source its (smoothed) values, plus the raw line for one source. */
  table() {
    if (this.sources.length === 1) {
      const p = this.parsed[0];
      return [this.xValues(0), p.values, ema(p.values, this.smoothing)];
    }
    const tables = this.parsed.map((p, i) => [this.xValues(i), ema(p.values, this.smoothing)]);
    return tables.length ? uPlot.join(tables) : [[]];
  }

  pointsDrawn() {
    return this.parsed.reduce((n, p) => n + (p ? p.steps.length : 0), 0);
  }

  draw() {
    const total = this.pointsDrawn();
    const notes = [];
    this.parsed.forEach((p, i) => {
      if (p.firstNonFinite) notes.push(`⚠ ${p.firstNonFinite.value} from step ${fmtNumber(p.firstNonFinite.step)}` +
        (this.sources.length > 1 ? ` (${this.sources[i].label})` : ""));
    });
    const extra = this.extraNote ? this.extraNote() : "";
    if (extra) notes.push(extra);
    const count = this.parsed.reduce((n, p) => n + (p ? p.count : 0), 0);
    if (count > total) notes.push(`${fmtNumber(total)} of ${fmtNumber(count)} points`);
    this.note.textContent = notes.join(" · ");
    if (total === 0 && !this.range) {
      if (this.plot) { this.plot.destroy(); this.plot = null; }
      replace(this.body, h("p", {class: "muted"}, "No points logged yet."));
      this.markDrawn(0);
      return;
    }
    const data = this.table();
    if (this.plot) {
      if (this.sources.length === 1 && this.plot.series[2].show !== this.smoothing > 0) {
        this.plot.setSeries(2, {show: this.smoothing > 0});
      }
      this.plot.setData(data, !this.range);
      if (this.range) this.plot.setScale("x", {...this.range});
    } else {
      this.body.replaceChildren();
      this.plot = new uPlot(this.options(), data, this.body);
    }
    this.resetButton.hidden = !this.range;
    if (this.range) this.container.dataset.zoomed = "true";
    else delete this.container.dataset.zoomed;
    this.markDrawn(total);
  }

  markDrawn(total) {
    this.container.dataset.points = String(total);
    if (!this.drawnOnce) {
      this.drawnOnce = true;
      if (this.onDrawn) this.onDrawn(this);
    }
  }

  showError(err) {
    if (this.plot) { this.plot.destroy(); this.plot = null; }
    replace(this.body, h("div", {class: "error-state", role: "alert", "data-testid": "error-state"},
      h("p", {}, "✗ Could not load this metric: ", err.message || String(err)),
      h("button", {type: "button", class: "small", onclick: () => this.load()}, "Retry")));
    this.markDrawn(0);
  }

  options() {
    const chart = this;
    const single = this.sources.length === 1;
    const series = [{
      label: this.xMode === "step" ? "step" : "time",
      value: (u, v) => v === null || v === undefined ? "—"
        : chart.xMode === "step" ? `step ${fmtNumber(v)}` : `+${fmtElapsed(v, Math.abs(v) < 10 ? 0.01 : 1)}`,
    }];
    if (single) {
      const color = this.sources[0].style.color;
      series.push({
        label: this.key, width: 1.5, spanGaps: false,
        stroke: () => (chart.smoothing > 0 ? color + "55" : color),
        value: (u, v) => fmtNumber(v),
      });
      series.push({label: "smoothed", stroke: color, width: 2, show: this.smoothing > 0, value: (u, v) => fmtNumber(v)});
    } else {
      this.sources.forEach((source) => series.push({
        label: source.label, stroke: source.style.color, dash: source.style.dash, width: 2, spanGaps: true,
        points: source.style.points ? {show: true, size: 5, fill: source.style.color} : {},
        value: (u, v) => fmtNumber(v),
      }));
    }
    return {
      width: plotWidth(this.body),
      height: this.height,
      scales: {x: {time: false}},
      series,
      axes: [
        {values: (u, splits, ax, space, incr) => {
          const labels = splits.map((v) => chart.xMode === "step" ? fmtAxis(v) : fmtElapsed(v, incr));
          chart.container.dataset.xTicks = JSON.stringify(labels);
          return labels;
        }, size: 36},
        {values: (u, splits) => splits.map(fmtAxis), size: 56},
      ],
      legend: {live: true},
      cursor: {
        drag: {x: true, y: false, setScale: true},
        // Double-click resets the zoom by refetching every step (uPlot's own reset would only
        // show the points fetched for the zoomed range).
        bind: {dblclick: () => (e) => { if (e.button === 0) chart.resetZoom(); return null; }},
      },
      hooks: {
        setSelect: [(u) => {
          const {left, width} = u.select;
          if (width < 2) return;
          const min = u.posToVal(left, "x");
          const max = u.posToVal(left + width, "x");
          if (!(max > min)) return;
          chart.range = {min, max};
          chart.load();
        }],
      },
    };
  }

  resetZoom() {
    if (!this.range) return;
    this.range = null;
    this.load();
  }

  setSmoothing(weight) {
    this.smoothing = weight;
    if (this.plot && this.parsed.every(Boolean)) this.draw();
  }

  /** Say what the x axis counts (uPlot draws its labels on the canvas, where no one can read them out). */
  showXMode() {
    this.container.dataset.xAxis = this.xMode;
    this.xCaption.textContent = this.xMode === "step" ? "x: step" : "x: time since the run started";
  }

  setXMode(mode) {
    if (this.fixedX || mode === this.xMode) return;
    // The zoomed range is in the old unit: go back to every step.
    const zoomed = !!this.range;
    this.xMode = mode;
    this.showXMode();
    this.range = null;
    if (this.plot) { this.plot.destroy(); this.plot = null; }
    if (zoomed) this.load();
    else if (this.parsed.every(Boolean)) this.draw();
  }

  resize() {
    if (!this.plot) return;
    const width = plotWidth(this.body);
    if (Math.abs(width - this.plot.width) > 1) this.plot.setSize({width, height: this.height});
  }

  destroy() {
    if (this.controller) this.controller.abort();
    this.resizeObserver.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

// The narrowest span a time axis shows: one sample, or a few close together, read as "around 14:02",
// never as a span of years (what uPlot makes of a range with no width).
export const MIN_TIME_SPAN_S = 120;

/**
 * The x range [min, max] (epoch s) of a time chart: the data's range widened to `span` (the job's
 * life: start, and end or now) where given, then to at least MIN_TIME_SPAN_S around its middle.
 */
export function timeRange(min, max, span = null) {
  let lo = min;
  let hi = max;
  if (span) {
    if (Number.isFinite(span[0])) lo = Number.isFinite(lo) ? Math.min(lo, span[0]) : span[0];
    if (Number.isFinite(span[1])) hi = Number.isFinite(hi) ? Math.max(hi, span[1]) : span[1];
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [lo, hi];
  if (hi - lo < MIN_TIME_SPAN_S) {
    const mid = (lo + hi) / 2;
    return [mid - MIN_TIME_SPAN_S / 2, mid + MIN_TIME_SPAN_S / 2];
  }
  return [lo, hi];
}

/** A time-axis label in the viewer's time zone: "14:02" or "14:02:30" for short steps, "24 Nov" for days. */
export function fmtTimeTick(epoch, incr) {
  const d = new Date(epoch * 1000);
  if (incr >= 86400) return d.toLocaleDateString(undefined, {day: "numeric", month: "short"});
  return d.toLocaleTimeString(undefined, incr < 60 ? {hour: "2-digit", minute: "2-digit", second: "2-digit"}
    : {hour: "2-digit", minute: "2-digit"});
}

/**
 * A chart of a job's system metric over wall-clock time (the viewer's time zone).
 * `load()` fetches points [[epoch, value], ...] through `fetch({maxPoints, signal})`; `span()`
 * gives [start, end] (epoch s) the axis covers at least: the job's life, so one sample reads as a
 * point in it. The drawn range and the axis labels are kept in data-x-min, data-x-max and data-x-ticks.
 */
export class TimeChart {
  constructor(container, {key, title, unit = "", fetch, span = null, height = 160, onDrawn = null, emptyText = "No samples yet."}) {
    this.span = span;
    this.emptyText = emptyText;
    this.container = container;
    this.key = key;
    this.unit = unit;
    this.fetchPoints = fetch;
    this.height = height;
    this.onDrawn = onDrawn;
    this.drawnOnce = false;
    this.plot = null;
    this.controller = null;
    container.classList.add("chart");
    container.dataset.testid = "chart";
    container.dataset.key = key;
    this.body = h("div", {class: "chart-body", style: `min-height:${height + 30}px`}, h("p", {class: "muted"}, "Loading…"));
    replace(container, h("div", {class: "chart-head"}, h("h3", {}, title)), this.body);
    this.resizeObserver = new ResizeObserver(() => {
      if (this.plot) {
        const width = plotWidth(this.body);
        if (Math.abs(width - this.plot.width) > 1) this.plot.setSize({width, height: this.height});
      }
    });
    this.resizeObserver.observe(this.body);
  }

  async load() {
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    try {
      const body = await this.fetchPoints({maxPoints: Math.min(2000, plotWidth(this.body)), signal: controller.signal});
      if (controller.signal.aborted) return;
      const points = body.points || [];
      const xs = points.map((p) => p[0]);
      const ys = points.map((p) => (typeof p[1] === "number" && Number.isFinite(p[1]) ? p[1] : null));
      this.draw([xs, ys]);
    } catch (err) {
      if (isAbort(err)) return;
      if (this.plot) { this.plot.destroy(); this.plot = null; }
      replace(this.body, h("p", {class: "muted"}, "✗ ", err.message || String(err)));
      this.mark(0);
    }
  }

  draw(data) {
    if (!data[1].some((v) => v !== null)) {
      if (this.plot) { this.plot.destroy(); this.plot = null; }
      this.body.style.minHeight = "0";
      replace(this.body, h("p", {class: "muted"}, this.emptyText));
      this.mark(0);
      return;
    }
    this.body.style.minHeight = `${this.height + 30}px`;
    if (this.plot) {
      this.plot.setData(data);
    } else {
      this.body.replaceChildren();
      const unit = this.unit;
      const chart = this;
      this.plot = new uPlot({
        width: plotWidth(this.body), height: this.height,
        scales: {
          // from the data itself: uPlot widens a single point's x range by years before asking
          x: {time: true, range: (u, min, max) => {
            const xs = u.data[0] || [];
            const span = chart.span ? chart.span() : null;
            return xs.length ? timeRange(xs[0], xs[xs.length - 1], span) : timeRange(min, max, span);
          }},
          y: unit === "%" ? {range: [0, 100]} : {},
        },
        series: [{label: "time", value: (u, v) => (v === null || v === undefined ? "—" : new Date(v * 1000).toLocaleTimeString())},
          {label: this.key, stroke: COLORS[0], width: 1.5, fill: COLORS[0] + "18",
            value: (u, v) => (v === null || v === undefined ? "—" : `${fmtNumber(Math.round(v * 10) / 10)}${unit ? " " + unit : ""}`)}],
        axes: [
          {values: (u, splits, ax, space, incr) => {
            const labels = splits.map((v) => fmtTimeTick(v, incr));
            chart.container.dataset.xTicks = JSON.stringify(labels);
            return labels;
          }},
          {values: (u, splits) => splits.map(fmtAxis), size: 50},
        ],
        hooks: {setScale: [(u, key) => {
          if (key !== "x") return;
          chart.container.dataset.xMin = String(u.scales.x.min);
          chart.container.dataset.xMax = String(u.scales.x.max);
        }]},
      }, data, this.body);
    }
    this.mark(data[0].length);
  }

  mark(n) {
    this.container.dataset.points = String(n);
    if (!this.drawnOnce) {
      this.drawnOnce = true;
      if (this.onDrawn) this.onDrawn(this);
    }
  }

  destroy() {
    if (this.controller) this.controller.abort();
    this.resizeObserver.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

/** Calls `done` once `expected` charts have drawn (or failed). Pages use it for chartsReady. */
export function readyCounter(expected, done) {
  let left = expected;
  if (left === 0) done();
  return () => { left -= 1; if (left === 0) done(); };
}

/** The smoothing slider (EMA weight 0–0.99) with its value as text; calls onChange(weight). */
export function smoothingControl(onChange, initial = 0) {
  const out = h("output", {class: "num", for: "smoothing"}, initial.toFixed(2));
  let timer = null;
  const input = h("input", {type: "range", id: "smoothing", min: "0", max: "0.99", step: "0.01", value: String(initial),
    "data-testid": "smoothing", "aria-describedby": "smoothing-help",
    oninput: () => {
      out.textContent = Number(input.value).toFixed(2);
      // One redraw per frame however fast the slider moves.
      if (timer === null) timer = requestAnimationFrame(() => { timer = null; onChange(Number(input.value)); });
    }});
  return h("label", {class: "control"}, "Smoothing ", input, " ", out,
    h("span", {id: "smoothing-help", class: "sr-only"}, "exponential moving average applied to the lines shown"));
}

/** The x-axis button: step ↔ time since the run started; calls onChange(mode). */
export function xAxisToggle(onChange, initial = "step") {
  let mode = initial;
  const label = () => (mode === "step" ? "X axis: step" : "X axis: time since start");
  const button = h("button", {type: "button", "data-testid": "x-axis-toggle", "data-mode": mode,
    title: "Switch the x axis between step and time since the run started",
    onclick: () => {
      mode = mode === "step" ? "time" : "step";
      button.dataset.mode = mode;
      button.textContent = label();
      onChange(mode);
    }}, label());
  return button;
}
