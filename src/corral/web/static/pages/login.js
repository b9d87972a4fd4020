// Log in (/login?next=PAGE): a browser that is not on the server's machine (or comes through a
// proxy) proves who it is with an API token; the server opens a session of its own for it (an
// HttpOnly cookie and a key this page keeps; the token itself is kept nowhere) and the dashboard
// returns to PAGE. `corral token create` output becomes a one-click link with the
// token in the fragment (/login#token=corral_...): the fragment never reaches the server's logs,
// and leaves the address bar (and the history) as soon as it is read.

import {h, replace} from "../lib/dom.js";
import {isAbort} from "../lib/api.js";
import {identity, logIn, takeSessionEnded} from "../lib/session.js";

export function mount(main, ctx) {
  const fromFragment = takeFragmentToken();
  const field = h("input", {type: "password", id: "login-token", name: "token", "data-testid": "login-token",
    autocomplete: "off", spellcheck: "false", required: true, size: 48, placeholder: "corral_…",
    "aria-describedby": "login-help"});
  const button = h("button", {type: "submit", class: "primary", "data-testid": "login-submit"}, "Log in");
  const error = h("div", {class: "action-error", role: "alert", "data-testid": "login-error", hidden: true});
  const form = h("form", {class: "card login", "data-testid": "login-form", "aria-labelledby": "login-h"},
    h("h1", {id: "login-h"}, "Log in to corral"),
    takeSessionEnded() ? h("p", {class: "notice", "data-testid": "login-ended"},
      "Your session has ended (it expired, or its token expired or was revoked): log in again.") : null,
    h("p", {}, "The server knows a browser on its own machine by who runs it; from anywhere else ",
      "(or through a proxy), log in with an API token."),
    h("p", {}, h("label", {for: "login-token"}, "API token")),
    h("p", {class: "login-row"}, field, " ", button),
    h("p", {id: "login-help", class: "muted small"}, "Paste a token from ",
      h("code", {}, "corral token create --scope read"), " (run on the server's machine; ",
      h("code", {}, "--scope submit"), " to also cancel, hold and release your jobs). ",
      "Logging in opens a session for this browser alone; it ends after a few hours, when its token expires or is ",
      "revoked, or when you log out. The token itself is not kept."),
    error);
  const me = identity();
  const already = me ? h("p", {class: "muted", "data-testid": "login-current"},
    `You are ${me.user} (${me.scope}) already; a token logs this browser in as its user instead.`) : null;
  main.append(h("div", {class: "login-page"}, form, already));

  async function submit(token) {
    error.hidden = true;
    button.disabled = true;
    try {
      await logIn(token);
    } catch (err) {
      if (isAbort(err) || ctx.signal.aborted) return;
      replace(error, h("strong", {}, "✗ Could not log in: "), err.message, err.hint ? ` (${err.hint})` : "");
      error.hidden = false;
      button.disabled = false;
      field.focus();
      return;
    }
    if (!ctx.signal.aborted) ctx.navigate(nextPage(ctx.query().get("next")), {replace: true});
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const token = field.value.trim();
    if (token) submit(token);
  });

  if (fromFragment) submit(fromFragment);
  else field.focus();
}

/** The token in /login#token=..., removed from the address bar whether or not it works. */
function takeFragmentToken() {
  if (!location.hash) return null;
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  history.replaceState(history.state, "", location.pathname + location.search);
  return token && token.trim() ? token.trim() : null;
}

/** Where to go after logging in: a page of this dashboard, never another site nor the login page again. */
function nextPage(next) {
  if (!next || !next.startsWith("/") || next.startsWith("//") || next.startsWith("/\\")) return "/";
  const url = new URL(next, location.origin);
  if (url.origin !== location.origin || /^\/login\/?$/.test(url.pathname)) return "/";
  return url.pathname + url.search + url.hash;
}
