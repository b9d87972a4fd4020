// The live connection: one stream of server-sent events from /api/v1/events (with ?job=ID on a
// job page, which adds that job's `log` events), its state for the indicator, and listeners by
// event name.
//
// The stream is read with fetch(), not EventSource: EventSource cannot send headers, and every
// request must carry the login session's key (./sessionkey.js), which never goes in a cookie.
// Like EventSource, a dropped stream is reopened after the server's `retry:` delay; a refused one
// (an error status) is reopened with a growing backoff, and a 401 (the session ended) also tells
// the handler of onUnauthenticated. After any reconnection, listeners of "reconnect" are called:
// events were missed, so pages refetch.

import {ApiError, reportUnauthenticated} from "./api.js";
import {sessionHeaders} from "./sessionkey.js";

export const EVENT_TYPES = ["jobs", "runs", "samples", "alerts", "log"];
const HIDDEN_GRACE_MS = 10000;
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30000;

export class LiveConnection {
  constructor(onState) {
    this.onState = onState;
    this.url = null;
    this.stream = null;  // the open (or opening) stream's AbortController
    this.state = "connecting";
    this.listeners = new Map();  // name -> Set(fn)
    this.lost = false;  // the connection dropped since it was last open: events were missed
    this.reopenDelay = 2000;  // after a dropped stream: the server's `retry:`
    this.retryDelay = FIRST_BACKOFF_MS;  // after a refused one: grows up to MAX_BACKOFF_MS
    this.retryTimer = null;
    // A browser keeps at most six connections to one server, for all its tabs together: a tab
    // hidden for a while gives its stream back (and catches up when shown again), so that a
    // seventh tab of the dashboard still loads.
    this.suspended = false;
    this.hiddenTimer = null;
    document.addEventListener("visibilitychange", () => {
      clearTimeout(this.hiddenTimer);
      if (document.hidden) this.hiddenTimer = setTimeout(() => this.suspend(), HIDDEN_GRACE_MS);
      else if (this.suspended) this.resume();
    });
  }

  /**
   * Connect to the stream for this job (or the global one for null); a no-op if already there.
   * Switching streams misses what happens between them, so listeners of "reconnect" hear of it.
   */
  connect(jobId = null) {
    const url = jobId === null ? "/api/v1/events" : `/api/v1/events?job=${encodeURIComponent(jobId)}`;
    if (url === this.url && (this.stream || this.suspended)) return;
    if (this.stream) this.lost = true;
    this.url = url;
    if (!this.suspended) this.open();
  }

  /** Close the stream (logged out: the server would refuse it, and should tell us nothing more). */
  disconnect() {
    this.close();
    this.url = null;
    this.suspended = false;
    this.lost = false;
    this.setState("offline");
  }

  suspend() {
    if (!this.stream) return;
    this.close();
    this.suspended = true;
    this.lost = true;  // events will be missed: pages refetch when the stream is back
    this.setState("paused");
  }

  resume() {
    this.suspended = false;
    if (this.url) this.open();
  }

  close() {
    clearTimeout(this.retryTimer);
    if (this.stream) this.stream.abort();
    this.stream = null;
  }

  open() {
    this.close();
    const stream = new AbortController();
    this.stream = stream;
    this.read(stream).catch((err) => console.error("corral: the live stream failed", err));
  }

  /** Read one stream to its end, then plan the next (unless it was closed or replaced meanwhile). */
  async read(stream) {
    const current = () => stream === this.stream;
    let response;
    try {
      response = await fetch(this.url, {headers: {Accept: "text/event-stream", ...sessionHeaders()},
        cache: "no-store", signal: stream.signal});
    } catch {
      if (current()) this.dropped(stream);  // unreachable: try again as EventSource would
      return;
    }
    if (!current()) return;
    const type = response.headers.get("Content-Type") || "";
    if (!response.ok || !type.startsWith("text/event-stream")) {
      response.body?.cancel().catch(() => {});
      this.refused(stream, response.status);
      return;
    }
    const missed = this.lost;
    this.lost = false;
    this.retryDelay = FIRST_BACKOFF_MS;
    this.setState("live");
    if (missed) this.emit("reconnect", {});
    const parser = new EventStreamParser((name, data) => {
      if (!current() || !EVENT_TYPES.includes(name)) return;
      let parsed = {};
      try { parsed = data ? JSON.parse(data) : {}; } catch { return; }
      this.emit(name, parsed);
    }, (ms) => { this.reopenDelay = ms; });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const {value, done} = await reader.read();
        if (done || !current()) break;
        parser.push(value);
      }
    } catch { /* dropped mid-stream, or aborted */ }
    if (current()) this.dropped(stream);
    else reader.cancel().catch(() => {});
  }

  /** The stream ended or never reached the server: reopen it after the server's retry delay. */
  dropped(stream) {
    this.lost = true;
    this.setState("reconnecting");
    this.retryTimer = setTimeout(() => { if (stream === this.stream) this.open(); }, this.reopenDelay);
  }

  /** The server refused the stream: reopen it, slower each time; a 401 also takes the viewer to log in. */
  refused(stream, status) {
    this.lost = true;
    this.setState("reconnecting");
    this.retryTimer = setTimeout(() => { if (stream === this.stream) this.open(); }, this.retryDelay);
    this.retryDelay = Math.min(this.retryDelay * 2, MAX_BACKOFF_MS);
    if (status === 401) reportUnauthenticated(new ApiError(401, {code: "unauthenticated", message: "the live stream was refused"}));
  }

  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.onState(state);
  }

  /** Call fn(data) for each event of this name until the returned function is called. */
  on(name, fn) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(fn);
    return () => this.listeners.get(name).delete(fn);
  }

  emit(name, data) {
    for (const fn of [...(this.listeners.get(name) || [])]) {
      try { fn(data); } catch (err) { console.error(`corral: a ${name} listener failed`, err); }
    }
  }
}

/**
 * The text/event-stream format, fed in pieces as they arrive: calls onEvent(name, data) for each
 * event (name "message" when it has none) and onRetry(ms) for each `retry:` field. Our server ends
 * lines with "\n"; a "\r\n" is read too.
 */
export class EventStreamParser {
  constructor(onEvent, onRetry = () => {}) {
    this.onEvent = onEvent;
    this.onRetry = onRetry;
    this.buffer = "";
    this.name = "";
    this.data = [];
  }

  push(text) {
    this.buffer += text;
    let start = 0;
    let end;
    while ((end = this.buffer.indexOf("\n", start)) >= 0) {
      const line = this.buffer.slice(start, end);
      start = end + 1;
      this.line(line.endsWith("\r") ? line.slice(0, -1) : line);
    }
    this.buffer = this.buffer.slice(start);
  }

  line(line) {
    if (line === "") {  // the end of an event
      if (this.data.length) this.onEvent(this.name || "message", this.data.join("\n"));
      this.name = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;  // a comment (the keepalive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.name = value;
    else if (field === "data") this.data.push(value);
    else if (field === "retry" && /^[0-9]+$/.test(value)) this.onRetry(Number(value));
  }
}

/**
 * A refresher: call `trigger()` as often as events come; `fn` runs at most once per `wait`
 * milliseconds, never twice at once, and once more after a run if triggered during it.
 * Returns {trigger, cancel}.
 */
export function refresher(fn, wait = 300) {
  let timer = null;
  let running = false;
  let again = false;
  let cancelled = false;
  const fire = async () => {
    timer = null;
    if (cancelled) return;
    if (running) { again = true; return; }
    running = true;
    try { await fn(); } catch (err) { console.error("corral: refresh failed", err); }
    running = false;
    if (again && !cancelled) { again = false; schedule(); }
  };
  const schedule = () => { if (timer === null && !cancelled) timer = setTimeout(fire, wait); };
  return {
    trigger: schedule,
    cancel: () => { cancelled = true; clearTimeout(timer); },
  };
}
