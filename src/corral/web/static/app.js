// corral's dashboard: routes on location.pathname (History API), keeps the live connection,
// and mounts one page module from ./pages/ at a time. Plain ES modules, no build step.
//
// Pages: /  (cluster)  /queue  /jobs/ID  /runs  /runs/ID  /compare?runs=1,2,3  /alerts  /plan  /login
// The server answers each of these paths with index.html; links are real <a href>s that we
// intercept for client-side navigation, so back/forward and opening in a new tab both work.
//
// Who we are comes first (GET /api/v1/whoami, shown in the nav): a browser on the server's
// machine is its user; elsewhere any 401 takes the dashboard to /login?next=PAGE, which logs in
// with an API token (also from the URL fragment, /login#token=corral_...) and returns to PAGE.
//
// TEST HOOKS (browser tests rely on these; keep them stable)
//   data-testid              where                                         extra attributes / text
//   nav-cluster nav-queue    top navigation links                           aria-current="page" on the active one
//   nav-runs nav-alerts
//   nav-plan nav-new
//   new-job-form             new job (/new, /new?from=ID): the form       data-mode = new | rerun
//   field-NAME               new job: each field's input (command, script, name, gpus, cpus, mem, time, partition,
//                            env, labels, workdir, params, samples, seed, concurrency, metric)
//   field-error-NAME         new job: the server's message beside the field it names (role=alert)
//   form-error               new job: a refusal that names no field of the form
//   new-job-submit           new job: its button
//   rerun rerun-changes      job, run: "Run again" (submits at once) and "Run again with changes" (opens /new?from=);
//                            rerun's data-owner: the job's owner, as whom it runs ("Run again as OWNER…" when not you)
//   rerun-confirm            job, run: another user's job: whose it is (rerun-owner) and the choice, rerun-confirm-yes
//                            (sends confirm_owner) or rerun-confirm-no
//   field-confirm-owner      new job from another user's job: the box that confirms it runs as its owner
//   job-parent run-parent    job, run: the job (run) this one runs again
//   job-sweep                job: the sweep an array is
//   sweep-row                sweep: one per task (<tr>)                    data-task, data-state
//   sweep-sort-KEY           sweep: header sort buttons (task, state, final, best, param.NAME)
//   sweep-best               sweep: the best configuration named
//   sweep-parallel           sweep: the parallel-coordinates chart (<svg>)   data-lines = tasks drawn
//   sweep-metric             sweep: the metric picker
//   live-status              live indicator                                 text "connecting" | "live" | "reconnecting"
//                                                                           | "paused" (a tab hidden for 10 s)
//                                                                           | "offline" (logged out)
//   whoami                   nav: who the dashboard speaks as               data-user, data-scope (read | submit | admin),
//                                                                           data-via (socket | local | token | session);
//                                                                           text "alice · submit"; absent when logged out
//   logout                   nav: "Log out" button, only when via = session
//   login-form               login: the form                                (/login, or any page after a 401)
//   login-token              login: the token field
//   login-submit             login: its button
//   login-error              login: the server's message when a login fails (role=alert)
//   login-ended              login: "your session has ended", after a 401 ended a login session
//   login-current            login: who this browser already is, when the server knows it
//   empty-state              any page or section with nothing to show       says what to do
//   error-state              any page or section whose request failed       the server's message + a Retry button
//   gpu-card                 cluster: one per GPU                           data-index, data-node, data-job-id ("" when free)
//   queue-row                queue: one per job (<tr>)                      data-job-id, data-state (PENDING, RUNNING, ...)
//   queue-reason             queue: a pending job's reason cell             the reason code (e.g. "Resources") + its meaning
//   pager-prev pager-next    queue: page buttons                            disabled at either end
//   pager-summary            queue: "Showing 101–200 of 10,000"
//   job-state                job: the state badge                           data-state; text symbol + word, e.g.
//                                                                           "● running", "◌ pending", "‖ held" (a held
//                                                                           pending job), "⊘ cancelled", "✗ failed"
//   job-cancel job-hold      job: action buttons, present only when the state allows and the viewer
//   job-release                   may (its owner, an admin; kept where a coordinator might: the server decides)
//   job-actions-note         job: why there are no buttons (a read-only credential, someone else's job)
//   confirm-yes confirm-no   job: confirm or drop a cancel (shown after job-cancel is pressed)
//   action-error             job: the server's message when an action is refused (role=alert)
//   log-stdout log-stderr    job: the log panes (<pre>), both in the DOM; the hidden one keeps its text
//                            (log-stderr only when stderr goes to its own file); live text is appended
//   log-tab-stdout           job: the tabs that switch panes (aria-selected)
//   log-tab-stderr
//   timeline                 job: the state timeline (<ol>); items carry data-event = submitted |
//                            started | requeued | run_again | pending | running | ended
//   logs-forbidden           job: in place of the log panes when the server refuses them (403):
//                            "Only OWNER or an admin can read this job's logs." and the server's words
//   diagnosis                job: findings (each .finding with data-cause), or "nothing found"
//                            (data-forbidden="true" when refused, with the same words as logs-forbidden)
//   unchecked                job: inside diagnosis, what it could not check and why (a <ul>), when anything
//   efficiency               job: the efficiency report
//   run-row                  runs: one per run (<tr>)                       data-run-id
//   run-select               runs: the row's checkbox                       value = run id
//   compare-button           runs: opens /compare?runs=... (disabled until 2 runs are picked)
//   sort-KEY                 runs: header sort buttons (KEY = project, name, state, start, duration,
//                            config.NAME, final.METRIC, best.METRIC)        aria-sort on the <th>
//   chart                    run, compare and job pages: one per chart      data-key (metric); data-points (points
//                                                                           drawn, all runs together on compare) once
//                                                                           drawn; data-zoomed="true" while zoomed
//                            (the job page's four system charts are charts too: select by data-key)
//   smoothing                run, compare: EMA slider (0–0.99)
//   x-axis-toggle            run, compare: button switching step/time       data-mode = "step" | "time"
//   config-table             run: the config; compare: configs side by side, differing rows
//                            have class "differs" and data-differs="true"
//   run-state                run: the state badge                           data-state (running, finished, ...)
//   artifacts                run: artifacts and checkpoints table
//   artifact-row             run: one per artifact (<tr>)                   data-path
//   artifact-download        run: the row's download link (<a href=.../artifacts/content?path=...>)
//   run-name run-archived    run: the name in the heading; the "archived" mark
//   run-manage               run: the owner's (or an admin's) controls, hidden for others:
//   run-rename run-tags           buttons; rename-input rename-save, tag-input tag-add tag-remove (data-tag)
//   run-edit-notes run-archive    open their forms; confirm-yes confirm-no confirm a delete
//   run-delete
//   media media-card         run: media logged with run.log; a card per key (data-key, data-type
//                            image | histogram | text | table) with media-slider (one position per step),
//                            media-step ("step N (i of n)"), media-caption, and the item, each with
//                            data-step: media-image (<img>), media-histogram (<svg>; bars carry
//                            data-count, the x range data-lo data-hi), media-text (<pre>; media-text-note
//                            when only its start is shown), media-table (<table>, data-rows = all its rows;
//                            media-table-note "200 of N rows"), or media-error
//   media-row media-cell     compare: a row per media key (data-key, data-type) with one media-slider over
//                            every run's steps and media-step; a cell per run (data-run-id, data-step = the
//                            step shown: the one picked or the last before it, "" when none) holding the
//                            item as on the run page (histograms share data-lo data-hi), or media-missing
//                            ("no KEY at step N")
//   manage-error             run: the server's message when a change is refused (role=alert)
//   run-notes notes-view     run: the notes card; the Markdown rendered (as DOM, never HTML)
//   notes-input notes-save   run: the notes editor
//   firing-row               alerts: one per firing (<tr>)                  data-firing-id, data-status (firing | fired | resolved)
//   ack-button               alerts: acknowledge that firing (not for a read-only credential)
//   rule-row                 alerts: one per rule (<tr>)                    data-rule
//   show-acknowledged        alerts: checkbox including acknowledged firings
//   plan-gpu                 plan: one timeline row per GPU                 data-node, data-index
//   plan-bar                 plan: a bar on a row                           data-kind (running | reserved | whatif),
//                                                                           data-job-id ("" for the what-if)
//   plan-gpus plan-time      plan: the what-if form's fields and button
//   plan-cpus plan-submit
//   plan-forecast            plan: the what-if's answer                     .plan-when carries data-start (ISO; "" never)
//   plan-blocker             plan: a job holding what the what-if needs     data-job-id, data-kind
//   plan-alternative         plan: a sooner what-if                         data-change (time | gpus)
// document.body.dataset.chartsReady === "true" once every chart of the current page has drawn
// (run, compare and job pages); it is removed whenever the page changes.

import {LiveConnection, refresher} from "./lib/live.js";
import {fmtDuration} from "./lib/format.js";
import {ApiError, UNREACHABLE, errorState, onUnauthenticated} from "./lib/api.js";
import {forgetIdentity, loadIdentity, logOut, onIdentity} from "./lib/session.js";

const ROUTES = [
  {pattern: /^\/$/, page: "cluster", nav: "cluster", title: "Cluster"},
  {pattern: /^\/queue\/?$/, page: "queue", nav: "queue", title: "Queue"},
  {pattern: /^\/jobs\/([0-9]+(?:_[0-9]+)?)\/?$/, page: "job", nav: "queue", title: "Job"},
  {pattern: /^\/runs\/?$/, page: "runs", nav: "runs", title: "Runs"},
  {pattern: /^\/runs\/([A-Za-z0-9_-]+)\/?$/, page: "run", nav: "runs", title: "Run"},
  {pattern: /^\/compare\/?$/, page: "compare", nav: "runs", title: "Compare runs"},
  {pattern: /^\/alerts\/?$/, page: "alerts", nav: "alerts", title: "Alerts"},
  {pattern: /^\/plan\/?$/, page: "plan", nav: "plan", title: "Plan"},
  {pattern: /^\/new\/?$/, page: "new_job", nav: "new", title: "New job"},
  {pattern: /^\/sweeps\/([0-9]+)\/?$/, page: "sweep", nav: "queue", title: "Sweep"},
  {pattern: /^\/login\/?$/, page: "login", nav: null, title: "Log in"},
];

const main = document.getElementById("main");
const liveBox = document.getElementById("live");
const liveText = liveBox.querySelector("[data-testid=live-status]");
const live = new LiveConnection((state) => {
  liveBox.dataset.state = state;
  liveText.textContent = state;
  liveBox.title = state === "live" ? "Live: pages update as things change"
    : "Lost the live connection to the server; reconnecting (pages may be stale)";
});

let current = null;  // {key, route, params, instance, controller, cleanups}

// Who we are, in the nav: "alice · submit", and "Log out" for a session the login page made.
const meBox = document.getElementById("me");
const meText = document.getElementById("whoami");
const meError = document.getElementById("me-error");
const logoutButton = document.getElementById("logout");

function showIdentity(me) {
  meBox.hidden = !me;
  meError.hidden = true;
  if (!me) return;
  meText.dataset.user = me.user;
  meText.dataset.scope = me.scope;
  meText.dataset.via = me.via;
  meText.replaceChildren(Object.assign(document.createElement("strong"), {textContent: me.user}), ` · ${me.scope}`);
  meText.title = me.via === "session" ? `Logged in as ${me.user} with a ${me.scope}-scope token`
    : me.via === "token" ? `${me.user}, by an API token with ${me.scope} scope`
      : `${me.user} (this browser runs on the server's machine as ${me.user}), ${me.scope} scope`;
  logoutButton.hidden = me.via !== "session";
}
onIdentity(showIdentity);

logoutButton.addEventListener("click", async () => {
  logoutButton.disabled = true;
  try {
    await logOut();
    const me = await loadIdentity().catch(() => null);
    if (me) {  // a browser on the server's machine: it is who runs it again
      leave();
      render();
    } else {
      live.disconnect();
      navigate("/login");
    }
  } catch (err) {
    meError.textContent = `✗ Could not log out: ${err.message}`;
    meError.hidden = false;
  } finally {
    logoutButton.disabled = false;
  }
});

/** The login page's URL, returning to `next` (this page unless given) once logged in. */
function loginUrl(next = location.pathname + location.search) {
  return next === "/" || match(next.split("?")[0])?.route.page === "login" ? "/login" : `/login?next=${encodeURIComponent(next)}`;
}

// A 401 anywhere: the session ended, or this browser was never logged in. The page goes; the
// login page takes its place in history, and comes back to it.
function toLogin() {
  forgetIdentity();
  live.disconnect();
  if (!current || current.route.page !== "login") navigate(loginUrl(), {replace: true});
}
onUnauthenticated(toLogin);

function match(pathname) {
  for (const route of ROUTES) {
    const m = pathname.match(route.pattern);
    if (m) return {route, params: m.slice(1).map(decodeURIComponent)};
  }
  return null;
}

/** Go to a URL inside the dashboard (pushState, or replaceState with {replace: true}). */
export function navigate(url, {replace = false} = {}) {
  const target = new URL(url, location.href);
  if (target.href === location.href && !replace) return;
  history[replace ? "replaceState" : "pushState"]({}, "", target.pathname + target.search + target.hash);
  render({focus: !replace, scroll: !replace});
}

function leave() {
  if (!current) return;
  current.controller.abort();
  for (const fn of current.cleanups.splice(0)) {
    try { fn(); } catch (err) { console.error("corral: cleanup failed", err); }
  }
  if (current.instance && current.instance.unmount) current.instance.unmount();
  current = null;
}

async function render({focus = false, scroll = false} = {}) {
  const found = match(location.pathname);
  const key = found ? `${found.route.page}:${found.params.join("/")}` : "notfound";
  // Same page, other query (a filter, a page of the queue): let the page update in place.
  if (current && current.key === key && current.instance && current.instance.update) {
    current.instance.update();
    return;
  }
  leave();
  delete document.body.dataset.chartsReady;
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (found && link.dataset.nav === found.route.nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  // The job page asks for its job's stream itself, once the server has shown it may read the logs.
  if (found && found.route.page === "login") live.disconnect();
  else live.connect(null);
  liveBox.hidden = Boolean(found && found.route.page === "login");
  main.replaceChildren();
  if (scroll) window.scrollTo(0, 0);
  if (!found) {
    document.title = "Not found · corral";
    const p = document.createElement("p");
    p.dataset.testid = "empty-state";
    p.className = "empty-state";
    p.append("No page here. Try the ");
    const a = document.createElement("a");
    a.href = "/queue";
    a.textContent = "queue";
    p.append(a, ".");
    main.append(p);
    return;
  }
  const controller = new AbortController();
  const state = {key, route: found.route, params: found.params, instance: null, controller, cleanups: []};
  current = state;
  document.title = `${found.route.title} · corral`;
  const ctx = {
    params: found.params,
    signal: controller.signal,
    query: () => new URLSearchParams(location.search),
    navigate,
    title: (text) => { document.title = `${text} · corral`; },
    onLeave: (fn) => state.cleanups.push(fn),
    on: (name, fn) => state.cleanups.push(live.on(name, fn)),
    /**
     * Run `fn` on each of these events (those `filter(name, data)` accepts) and after a
     * reconnection, at most once per `wait` ms and never twice at once; returns the trigger.
     */
    refreshOn: (names, fn, {wait = 300, filter = null} = {}) => {
      const r = refresher(fn, wait);
      state.cleanups.push(r.cancel);
      for (const name of [...names, "reconnect"]) state.cleanups.push(live.on(name, (data) => {
        if (name === "reconnect" || !filter || filter(name, data)) r.trigger();
      }));
      return r.trigger;
    },
    live,
    /** Add this job's `log` events to the live stream (the server refuses them to who may not read its logs). */
    followJob: (jobId) => { if (!controller.signal.aborted) live.connect(jobId); },
  };
  let module;
  try {
    module = await import(`./pages/${found.route.page}.js`);
  } catch (err) {
    if (current !== state) return;
    // A module that failed to load is not fetched again by import(): only a reload retries it.
    main.replaceChildren(errorState(new ApiError(0, {message: `${UNREACHABLE} (${err.message})`}), () => location.reload()));
    state.cleanups.push(live.on("reconnect", () => location.reload()));
    return;
  }
  if (current !== state) return;
  state.instance = module.mount(main, ctx) || null;
  if (focus) main.focus({preventScroll: true});
}

// Links: same-origin page links navigate without a reload; API, static and modified clicks don't.
document.addEventListener("click", (event) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const a = event.target.closest("a[href]");
  if (!a || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || /^\/(api|static|docs|openapi)/.test(url.pathname)) return;
  if (!match(url.pathname) && url.pathname !== "/") return;
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return;
  event.preventDefault();
  navigate(url.href);
});

window.addEventListener("popstate", () => render());

// After the server was away, ask again who we are (it may not have answered the first time,
// and a session may have ended meanwhile).
live.on("reconnect", () => {
  loadIdentity().then((me) => { if (me === null) toLogin(); }, () => {});
});

// Elapsed times count up in place once a second (cheap: only the [data-since] elements).
setInterval(() => {
  const now = Date.now() / 1000;
  for (const el of main.querySelectorAll("[data-since]")) el.textContent = fmtDuration(now - Number(el.dataset.since));
}, 1000);

async function start() {
  let me;
  try {
    me = await loadIdentity();
  } catch {
    me = undefined;  // unreachable: each page says so, with a Retry
  }
  if (me === null && match(location.pathname)?.route.page !== "login") navigate(loginUrl(), {replace: true});
  else render();
}

start();

// Fetch the other pages' modules once the first page is up, so moving between pages is instant
// (and still works if the server goes away for a moment).
setTimeout(() => {
  for (const page of new Set(ROUTES.map((r) => r.page))) import(`./pages/${page}.js`).catch(() => {});
}, 1500);
