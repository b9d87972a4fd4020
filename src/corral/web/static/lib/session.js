// Who the dashboard speaks as (GET /api/v1/whoami), for the nav and for what pages offer;
// logging in with an API token and out again. A login is a session of its own, never the token:
// an HttpOnly cookie the server sets, and a key this page keeps (./sessionkey.js).
//
// A browser on the server's machine is who the kernel says it is (via "local"); elsewhere it
// logs in with a token (via "session"). The server decides every action; what is known here
// only spares the viewer buttons that could not work.

import {ApiError, api} from "./api.js";
import {keepSessionKey} from "./sessionkey.js";

let me;  // undefined: not known yet (server unreachable); null: nobody (log in); else whoami's answer
let ended = false;  // a login session was refused: the login page says so once
const listeners = new Set();

/** The caller: {user, scope, via, admin, personal_queue_of}; null when logged out, undefined when unknown. */
export function identity() {
  return me;
}

/** Call fn(identity) whenever it changes; returns a function that stops it. */
export function onIdentity(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function set(value) {
  const changed = JSON.stringify(value) !== JSON.stringify(me);
  me = value;
  if (changed) for (const fn of [...listeners]) fn(me);
}

/** Ask the server who we are. Returns the identity, or null (401: log in). Throws ApiError otherwise. */
export async function loadIdentity() {
  try {
    set(await api("/api/v1/whoami", {login: true}));
  } catch (err) {
    if (err.status !== 401) throw err;
    set(null);
  }
  return me;
}

/** The server said 401 somewhere: whoever we were, we are nobody now. */
export function forgetIdentity() {
  if (me && me.via === "session") ended = true;
  set(null);
}

/** Whether a login session ended under us since the last call (its token expired or was revoked). */
export function takeSessionEnded() {
  const was = ended;
  ended = false;
  return was;
}

/**
 * Log in with an API token: the server opens a session (its cookie) and answers its key, kept here.
 * Throws ApiError (401: a bad token).
 */
export async function logIn(token) {
  const session = await api("/api/v1/session", {method: "POST", body: {token}, login: true});
  if (!keepSessionKey(session.session_key)) {
    throw new ApiError(0, {code: "storage", message: "this browser does not let the dashboard keep its login",
      hint: "allow this site to store data (cookies and site data), then log in again"});
  }
  return loadIdentity();
}

/** Log out: the server ends the session (the cookie and key are worthless from now on) and drops the cookie. */
export async function logOut() {
  await api("/api/v1/session", {method: "DELETE", login: true});
  keepSessionKey(null);
  ended = false;
  set(null);
}

/** May the viewer act (submit, cancel, acknowledge) at all? False for a read-only credential. */
export function mayAct() {
  return !me || me.scope !== "read";
}

/**
 * May the viewer cancel, hold or release this job, and read its logs?
 * "yes" (its owner, an admin), "no" (a read-only credential, or someone else's job outside any
 * account), "maybe" (someone else's job in an account: its coordinators may, and only the server
 * knows who they are; also when the viewer is not known).
 */
export function mayManage(job) {
  if (!me) return "maybe";
  if (me.admin) return "yes";
  if (me.scope === "read") return "no";
  if (me.user === job.user) return "yes";
  return job.account ? "maybe" : "no";
}
