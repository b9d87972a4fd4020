// The live connection: one EventSource on /api/v1/events (with ?job=ID on a job page, which
// adds that job's `log` events), its state for the indicator, and listeners by event name.
//
// EventSource reconnects by itself after a dropped connection; when the server refuses the
// stream (an error status closes it for good) we reopen it ourselves with a backoff. After any
// reconnection, listeners of "reconnect" are called: events were missed, so pages refetch.

export const EVENT_TYPES = ["jobs", "runs", "samples", "alerts", "log"];
const HIDDEN_GRACE_MS = 10000;

export class LiveConnection {
  constructor(onState) {
    this.onState = onState;
    this.url = null;
    this.source = null;
    this.state = "connecting";
    this.listeners = new Map();  // name -> Set(fn)
    this.lost = false;  // the connection dropped since it was last open: events were missed
    this.retryDelay = 1000;
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
    if (url === this.url && (this.source || this.suspended)) return;
    if (this.source) this.lost = true;
    this.url = url;
    if (!this.suspended) this.open();
  }

  /** Close the stream (logged out: the server would refuse it, and should tell us nothing more). */
  disconnect() {
    clearTimeout(this.retryTimer);
    if (this.source) this.source.close();
    this.source = null;
    this.url = null;
    this.suspended = false;
    this.lost = false;
    this.setState("offline");
  }

  suspend() {
    if (!this.source) return;
    clearTimeout(this.retryTimer);
    this.source.close();
    this.source = null;
    this.suspended = true;
    this.lost = true;  // events will be missed: pages refetch when the stream is back
    this.setState("paused");
  }

  resume() {
    this.suspended = false;
    if (this.url) this.open();
  }

  open() {
    clearTimeout(this.retryTimer);
    if (this.source) this.source.close();
    const source = new EventSource(this.url);
    this.source = source;
    source.onopen = () => {
      if (source !== this.source) return;
      const missed = this.lost;
      this.lost = false;
      this.retryDelay = 1000;
      this.setState("live");
      if (missed) this.emit("reconnect", {});
    };
    source.onerror = () => {
      if (source !== this.source) return;
      this.lost = true;
      this.setState("reconnecting");
      if (source.readyState === EventSource.CLOSED) {
        // Refused (HTTP error or wrong type): the browser gives up, so we retry, slower each time.
        this.retryTimer = setTimeout(() => { if (source === this.source) this.open(); }, this.retryDelay);
        this.retryDelay = Math.min(this.retryDelay * 2, 30000);
      }
    };
    for (const name of EVENT_TYPES) {
      source.addEventListener(name, (event) => {
        if (source !== this.source) return;
        let data = {};
        try { data = event.data ? JSON.parse(event.data) : {}; } catch { return; }
        this.emit(name, data);
      });
    }
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
