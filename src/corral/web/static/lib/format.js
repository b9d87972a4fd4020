// How values read on screen: times in the viewer's time zone, durations, sizes, numbers,
// and state/severity badges that carry a symbol and a word (never colour alone).

import {h} from "./dom.js";

/** A Date from an ISO-8601 string or epoch seconds; null for null/invalid. */
export function toDate(value) {
  if (value === null || value === undefined || value === "") return null;
  const d = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** Epoch seconds from an ISO string or epoch seconds. */
export function toEpoch(value) {
  const d = toDate(value);
  return d ? d.getTime() / 1000 : null;
}

/** The time in the viewer's locale and time zone ("—" when unknown). */
export function fmtTime(value) {
  const d = toDate(value);
  return d ? d.toLocaleString() : "—";
}

/** A <time> element: local time as text, ISO in `datetime`, relative time in the tooltip. */
export function timeEl(value, {relative = false} = {}) {
  const d = toDate(value);
  if (!d) return h("span", {class: "muted"}, "—");
  const rel = fmtRelative(d);
  return h("time", {datetime: d.toISOString(), title: relative ? d.toLocaleString() : rel},
    relative ? rel : d.toLocaleString());
}

const RELATIVE = new Intl.RelativeTimeFormat(undefined, {numeric: "auto"});

/** "3 minutes ago", "in 2 hours". */
export function fmtRelative(value, now = Date.now()) {
  const d = toDate(value);
  if (!d) return "—";
  const s = (d.getTime() - now) / 1000;
  const a = Math.abs(s);
  if (a < 45) return RELATIVE.format(Math.round(s), "second");
  if (a < 2700) return RELATIVE.format(Math.round(s / 60), "minute");
  if (a < 86400 * 1.5) return RELATIVE.format(Math.round(s / 3600), "hour");
  return RELATIVE.format(Math.round(s / 86400), "day");
}

/** A duration in seconds as "45s", "3m 12s", "2h 05m", "3d 4h". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  let s = Math.round(Math.abs(seconds));
  const neg = seconds < 0 && s > 0;  // never "-0s"
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  const pad = (n) => String(n).padStart(2, "0");
  const text = d ? `${d}d ${hr}h` : hr ? `${hr}h ${pad(m)}m` : m ? `${m}m ${pad(s)}s` : `${s}s`;
  return neg ? "-" + text : text;
}

/** A limit as "4h", "10m", "1h 30m" (no zero parts at the end). */
export function fmtLimit(seconds) {
  return fmtDuration(seconds).replace(/ 0+[smh]$/, "");
}

/** An element whose text counts up from `since` (app.js refreshes every [data-since] each second). */
export function elapsedEl(since, until = null) {
  const start = toEpoch(since);
  if (start === null) return h("span", {class: "muted"}, "—");
  const end = toEpoch(until);
  if (end !== null) return h("span", {}, fmtDuration(end - start));
  return h("span", {"data-since": String(start)}, fmtDuration(Date.now() / 1000 - start));
}

/** Megabytes as "512 MB" or "12.5 GB" (1 GB = 1024 MB, as corral's --mem counts). */
export function fmtMB(mb) {
  if (mb === null || mb === undefined || !Number.isFinite(Number(mb))) return "—";
  mb = Number(mb);
  if (Math.abs(mb) >= 1024 * 1024) return `${trim(mb / 1024 / 1024, 1)} TB`;
  if (Math.abs(mb) >= 1024) return `${trim(mb / 1024, 1)} GB`;
  return `${Math.round(mb)} MB`;
}

/** Bytes as "812 B", "3.4 MB". */
export function fmtBytes(bytes) {
  if (bytes === null || bytes === undefined) return "—";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${trim(bytes / 1024, 1)} KB`;
  return fmtMB(bytes / 1024 / 1024);
}

function trim(v, digits) {
  return Number(v.toFixed(digits)).toLocaleString();
}

const INT = new Intl.NumberFormat();

/** A number as people read it: integers grouped, others with 4 significant digits; "NaN"/"Infinity" kept. */
export function fmtNumber(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "string") return v;  // "NaN", "Infinity", "-Infinity" as the server sends them
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return INT.format(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-4 || a >= 1e7)) return v.toExponential(3);
  return Number(v.toPrecision(4)).toLocaleString(undefined, {maximumSignificantDigits: 4});
}

/** A percentage from a fraction (0.73 → "73%"). */
export function fmtPct(fraction) {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return "—";
  return `${Math.round(fraction * 100)}%`;
}

/** A number from a value the server may send as "NaN"/"Infinity"; null for missing. */
export function num(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "number") return v;
  if (v === "NaN") return NaN;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  const n = Number(v);
  return Number.isNaN(n) ? null : n;
}

// Job and run states: a symbol and the word, so they read without colour.
const STATE_SYMBOLS = {
  RUNNING: "●", PENDING: "◌", COMPLETED: "✓", FAILED: "✗", TIMEOUT: "◷", CANCELLED: "⊘",
  OUT_OF_MEMORY: "▲", NODE_FAIL: "⚡", PREEMPTED: "↺", HELD: "‖", DEADLINE: "◷",
  running: "●", finished: "✓", failed: "✗", crashed: "☠",
};

/** A state badge: symbol + word. A held pending job shows as HELD. */
export function stateBadge(state, {held = false, testid = null} = {}) {
  const shown = held && state === "PENDING" ? "HELD" : state || "unknown";
  const word = String(shown).replaceAll("_", " ").toLowerCase();
  return h("span", {class: `badge state state-${String(shown).toLowerCase()}`, "data-testid": testid, "data-state": state},
    h("span", {class: "sym", "aria-hidden": "true"}, STATE_SYMBOLS[shown] || "•"), " ", word);
}

const SEVERITY_SYMBOLS = {info: "ℹ", warning: "▲", critical: "◆"};

/** A severity badge (info, warning, critical; any case): symbol + word. */
export function severityBadge(severity) {
  const s = String(severity || "info").toLowerCase();
  return h("span", {class: `badge sev sev-${s}`}, h("span", {class: "sym", "aria-hidden": "true"}, SEVERITY_SYMBOLS[s] || "•"), " ", s);
}

/** Flatten a nested config into dotted keys: {"opt": {"lr": 1}} → {"opt.lr": 1}. */
export function flatten(obj, prefix = "", out = {}) {
  for (const [k, v] of Object.entries(obj || {})) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) flatten(v, key, out);
    else out[key] = v;
  }
  return out;
}

/** A config value as text (lists and objects as compact JSON). */
export function fmtValue(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return fmtNumber(v);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
