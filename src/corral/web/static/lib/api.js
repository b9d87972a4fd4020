// Talking to the corral server's /api/v1: JSON in and out, errors as ApiError carrying the
// server's {"error": {code, message, field, hint}} so pages can show its words. Every request
// carries the login session's key (./sessionkey.js). A 401 (no credential, or the session ended)
// also calls the handler set with onUnauthenticated, which takes the dashboard to its login page.

import {h} from "./dom.js";
import {sessionHeaders} from "./sessionkey.js";

export const UNREACHABLE = "cannot reach the corral server: is `corral up` running?";

export class ApiError extends Error {
  constructor(status, {code = "error", message = "", field = null, hint = null} = {}) {
    super(message || `the server answered ${status}`);
    this.status = status;
    this.code = code;
    this.field = field;
    this.hint = hint;
  }
}

/** True for the error an aborted fetch throws (a page was left): callers ignore it. */
export function isAbort(err) {
  return err && (err.name === "AbortError" || (err instanceof DOMException && err.code === 20));
}

let unauthenticated = null;

/** Call `fn(error)` whenever a request answers 401 (unless it was made with {login: true}). */
export function onUnauthenticated(fn) {
  unauthenticated = fn;
}

/** Tell the handler of onUnauthenticated that a request (the live stream's) was answered 401. */
export function reportUnauthenticated(error) {
  if (unauthenticated) unauthenticated(error);
}

async function request(path, {method = "GET", body, signal, login = false, headers = {}} = {}) {
  let response;
  try {
    response = await fetch(path, {
      method, signal,
      headers: {...sessionHeaders(), ...(body === undefined ? {} : {"Content-Type": "application/json"}), ...headers},
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (isAbort(err)) throw err;
    throw new ApiError(0, {code: "unreachable", message: UNREACHABLE});
  }
  if (!response.ok) {
    let detail = {message: `${method} ${path} answered ${response.status} ${response.statusText}`};
    try {
      const payload = await response.json();
      if (payload && payload.error) detail = payload.error;
      else if (payload && payload.detail) detail = {message: String(payload.detail)};
    } catch { /* not JSON: keep the status line */ }
    const error = new ApiError(response.status, detail);
    if (response.status === 401 && !login && unauthenticated) unauthenticated(error);
    throw error;
  }
  return response;
}

/**
 * GET (or another method with `body`) a JSON endpoint. Options: method, body, signal, and
 * login: true for the calls that log in or ask who we are (their 401 is an answer, not a redirect).
 */
export async function api(path, options = {}) {
  const response = await request(path, options);
  if (response.status === 204) return null;
  return response.json();
}

/** POST a JSON body (or none) and read the JSON answer. */
export function post(path, body = undefined, options = {}) {
  return api(path, {...options, method: "POST", body});
}

/** Read raw bytes (logs, artifacts; options.headers may ask for a Range): {bytes: Uint8Array, headers}. */
export async function apiBytes(path, options = {}) {
  const response = await request(path, options);
  return {bytes: new Uint8Array(await response.arrayBuffer()), headers: response.headers};
}

/** A path with query parameters, leaving out null/undefined/"" values. */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === "") continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/**
 * The error state: the server's message, its hint, and a Retry button.
 * `retry` is called when the button is pressed (omit it for no button).
 */
export function errorState(err, retry = null, {what = ""} = {}) {
  const message = err instanceof ApiError ? err.message : `${err && err.message ? err.message : err}`;
  const hint = err instanceof ApiError ? err.hint : null;
  return h("div", {class: "error-state", role: "alert", "data-testid": "error-state"},
    h("p", {class: "error-title"}, h("span", {"aria-hidden": "true"}, "✗ "),
      what ? `Could not load ${what}: ` : "", message),
    hint ? h("p", {class: "hint"}, hint) : null,
    err instanceof ApiError && err.status === 0
      ? h("p", {class: "hint"}, "Start it with ", h("code", {}, "corral up"), ", then retry.") : null,
    retry ? h("button", {type: "button", onclick: retry}, "Retry") : null);
}

/** The empty state: what is missing and what to do about it (children may hold code and links). */
export function emptyState(...children) {
  return h("div", {class: "empty-state", "data-testid": "empty-state"}, h("p", {}, ...children));
}
