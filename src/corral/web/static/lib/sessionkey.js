// The key of the dashboard's login session. A login is two halves: an HttpOnly cookie, which a
// browser sends to every port of this host (another user's TensorBoard on localhost:9555 sees
// it), and this key, which the login answers in its body. The key stays in localStorage, which
// belongs to this origin alone (scheme, host AND port), and goes with every API request as the
// X-Corral-Session header; the server accepts the cookie only with it.

const STORAGE = "corral.session-key";
export const SESSION_HEADER = "X-Corral-Session";

/** The header that carries the key ({} when this browser has no login session). */
export function sessionHeaders() {
  let key = null;
  try {
    key = localStorage.getItem(STORAGE);
  } catch { /* site data blocked: no session to send */ }
  return key ? {[SESSION_HEADER]: key} : {};
}

/** Keep a new session's key (null: forget it). Returns false when this browser will not store it. */
export function keepSessionKey(key) {
  try {
    if (key) localStorage.setItem(STORAGE, key);
    else localStorage.removeItem(STORAGE);
    return true;
  } catch {
    return false;
  }
}
