// Series fetches of one run, batched: the charts a page makes in one go each ask for their series,
// and the requests made in the same tick with the same range go out as one
// GET /api/v1/runs/ID/series/batch. Twenty charts are one request, not twenty queued behind the
// browser's six connections per server (one of which the live event stream holds).
import {api, withQuery} from "./api.js";

const MAX_KEYS = 100;  // the server's limit per batch

export function seriesLoader(runId) {
  let pending = new Map();  // "start|end|maxPoints" -> [{key, resolve, reject, signal}]
  let scheduled = false;

  function flush() {
    scheduled = false;
    const groups = pending;
    pending = new Map();
    for (const [range, waiters] of groups) {
      const [start, end, maxPoints] = range.split("|").map((v) => (v === "" ? undefined : Number(v)));
      for (let i = 0; i < waiters.length; i += MAX_KEYS) send(waiters.slice(i, i + MAX_KEYS), start, end, maxPoints);
    }
  }

  async function send(waiters, start, end, maxPoints) {
    const live = [];
    for (const w of waiters) {
      if (w.signal && w.signal.aborted) w.reject(new DOMException("aborted", "AbortError"));
      else live.push(w);
    }
    if (!live.length) return;
    const keys = [...new Set(live.map((w) => w.key))];
    const controller = new AbortController();
    // the batch is dropped only when every chart that asked has gone
    let left = live.length;
    for (const w of live) {
      if (w.signal) w.signal.addEventListener("abort", () => { if (--left === 0) controller.abort(); }, {once: true});
    }
    try {
      const path = withQuery(`/api/v1/runs/${encodeURIComponent(runId)}/series/batch`,
        {max_points: maxPoints, start, end});
      const query = keys.map((k) => `key=${encodeURIComponent(k)}`).join("&");
      const body = await api(`${path}${path.includes("?") ? "&" : "?"}${query}`, {signal: controller.signal});
      const byKey = new Map(body.series.map((s) => [s.key, s]));
      for (const w of live) w.resolve(byKey.get(w.key));
    } catch (err) {
      for (const w of live) w.reject(err);
    }
  }

  /** The series `key`, as /series answers it; batched with the other calls of this tick. */
  return function fetchSeries({key, start, end, maxPoints, signal}) {
    return new Promise((resolve, reject) => {
      const range = [start ?? "", end ?? "", maxPoints].join("|");
      if (!pending.has(range)) pending.set(range, []);
      pending.get(range).push({key, resolve, reject, signal});
      if (!scheduled) {
        scheduled = true;
        setTimeout(flush, 0);
      }
    });
  };
}
