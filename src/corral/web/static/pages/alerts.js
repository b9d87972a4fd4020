// Alerts (/alerts): the rules, and the firings newest first with their delivery per channel and an
// Acknowledge button (not for a read-only login); acknowledged firings are hidden unless "show acknowledged" is ticked
// (?acknowledged=1 in the URL). Refetched on `alerts`.

import {h, replace, keepFocus} from "../lib/dom.js";
import {api, post, errorState, emptyState, isAbort, withQuery} from "../lib/api.js";
import {fmtNumber, fmtTime, severityBadge, timeEl} from "../lib/format.js";
import {mayAct} from "../lib/session.js";

const LIMIT = 200;

export function mount(main, ctx) {
  const rulesBox = h("div", {}, h("p", {class: "muted"}, "Loading rules…"));
  const firingsBox = h("div", {}, h("p", {class: "muted"}, "Loading firings…"));
  const message = h("div", {class: "action-error", role: "alert", hidden: true});
  const showAcked = h("input", {type: "checkbox", "data-testid": "show-acknowledged", checked: ctx.query().get("acknowledged") === "1",
    onchange: () => ctx.navigate(withQuery("/alerts", {acknowledged: showAcked.checked ? "1" : null}), {replace: true})});
  main.append(
    h("div", {class: "page-head"}, h("h1", {}, "Alerts")),
    message,
    h("section", {class: "card", "aria-labelledby": "firings-h"},
      h("div", {class: "card-head"}, h("h2", {id: "firings-h"}, "Firings"),
        h("label", {class: "control"}, showAcked, " Show acknowledged")),
      firingsBox),
    h("section", {class: "card", "aria-labelledby": "rules-h"}, h("h2", {id: "rules-h"}, "Rules"), rulesBox));

  async function loadRules() {
    try {
      const rules = await api("/api/v1/alerts/rules", {signal: ctx.signal});
      if (!rules.length) {
        replace(rulesBox, emptyState("No alert rules. Add one with ",
          h("code", {}, "corral alert create failed -c 'state == FAILED'"),
          " (conditions like ", h("code", {}, "gpu_utilization < 10 for 15m"), ", ", h("code", {}, "metric.loss is nan"), ")."));
        return;
      }
      replace(rulesBox, h("div", {class: "table-box"}, h("table", {class: "grid"},
        h("thead", {}, h("tr", {}, ["Name", "Severity", "Condition", "Scope", "Channels"].map((t) => h("th", {scope: "col"}, t)))),
        h("tbody", {}, rules.map((r) => h("tr", {"data-testid": "rule-row", "data-rule": r.name},
          h("td", {}, h("strong", {}, r.name), r.message ? h("div", {class: "muted small"}, r.message) : null),
          h("td", {}, severityBadge(r.severity)),
          h("td", {}, h("code", {}, r.condition)),
          h("td", {}, scope(r)),
          h("td", {}, r.channels && r.channels.length ? r.channels.join(", ") : h("span", {class: "muted"}, "none (shown here only)"))))))));
    } catch (err) {
      if (isAbort(err)) return;
      replace(rulesBox, errorState(err, loadRules, {what: "alert rules"}));
    }
  }

  let seq = 0;
  async function loadFirings() {
    const acked = ctx.query().get("acknowledged") === "1";
    showAcked.checked = acked;
    const mySeq = ++seq;
    try {
      const firings = await api(withQuery("/api/v1/alerts", {limit: LIMIT, unacknowledged: acked ? null : "true"}), {signal: ctx.signal});
      if (mySeq !== seq) return;
      if (!firings.length) {
        replace(firingsBox, emptyState(acked
          ? "Nothing has fired yet. Firings appear here when a rule's condition holds."
          : "No unacknowledged firings. Tick “Show acknowledged” to see the earlier ones."));
        return;
      }
      const sorted = [...firings].sort((a, b) => (b.fired_at || 0) - (a.fired_at || 0));
      keepFocus(firingsBox, () => replace(firingsBox, h("div", {class: "table-box"}, h("table", {class: "grid firings"},
        h("thead", {}, h("tr", {}, ["Fired", "Severity", "Status", "Rule", "Job", "Value", "Message", "Deliveries", ""]
          .map((t) => h("th", {scope: "col"}, t)))),
        h("tbody", {}, sorted.map(firingRow)))),
      firings.length >= LIMIT ? h("p", {class: "muted small"}, `The newest ${LIMIT}.`) : null));
    } catch (err) {
      if (isAbort(err) || mySeq !== seq) return;
      replace(firingsBox, errorState(err, loadFirings, {what: "firings"}));
    }
  }

  function firingRow(f) {
    return h("tr", {"data-testid": "firing-row", "data-firing-id": f.id, "data-status": f.status,
      class: f.acknowledged_at ? "acked" : ""},
    h("td", {class: "small"}, timeEl(f.fired_at), f.resolved_at ? h("div", {class: "muted"}, "resolved ", timeEl(f.resolved_at, {relative: true})) : null),
    h("td", {}, severityBadge(f.severity)),
    h("td", {}, f.status === "firing"
      ? h("span", {class: "badge status-firing"}, h("span", {"aria-hidden": "true"}, "◉ "), "firing")
      : f.status === "fired"  // about a job that ended: an event, not an all-clear
        ? h("span", {class: "badge status-firing"}, h("span", {"aria-hidden": "true"}, "● "), "fired (ended job)")
        : h("span", {class: "badge status-resolved"}, h("span", {"aria-hidden": "true"}, "✓ "), "resolved")),
    h("td", {}, h("strong", {}, f.rule), h("div", {class: "muted small"}, h("code", {}, f.condition))),
    h("td", {}, f.job_id ? [h("a", {href: `/jobs/${f.job_id}`}, `#${f.job_id}${f.job_name ? " " + f.job_name : ""}`),
      f.user ? h("div", {class: "muted small"}, f.user) : null] : "—"),
    h("td", {class: "num"}, f.value === null || f.value === undefined ? "—" : typeof f.value === "number" ? fmtNumber(f.value) : String(f.value)),
    h("td", {class: "small"}, f.message || ""),
    h("td", {}, deliveries(f.deliveries || [])),
    h("td", {}, f.acknowledged_at
      ? h("span", {class: "muted small", title: fmtTime(f.acknowledged_at)}, `✓ acknowledged${f.acknowledged_by ? " by " + f.acknowledged_by : ""}`)
      : mayAct() ? h("button", {type: "button", "data-testid": "ack-button", onclick: (e) => ack(f, e.target)}, "Acknowledge")
        : h("span", {class: "muted small"}, "not acknowledged")));
  }

  async function ack(f, button) {
    button.disabled = true;
    message.hidden = true;
    try {
      await post(`/api/v1/alerts/${f.id}/ack`, undefined, {signal: ctx.signal});
      await loadFirings();
      const next = firingsBox.querySelector("[data-testid=ack-button]");
      (next || showAcked).focus();
    } catch (err) {
      if (isAbort(err)) return;
      button.disabled = false;
      replace(message, h("strong", {}, `✗ Could not acknowledge firing ${f.id}: `), err.message);
      message.hidden = false;
    }
  }

  loadRules();
  loadFirings();
  ctx.refreshOn(["alerts"], () => Promise.all([loadFirings(), loadRules()]), {wait: 500});
  return {update: loadFirings};
}

function scope(rule) {
  const parts = [];
  if (rule.job) parts.push(h("a", {href: `/jobs/${rule.job}`}, `job #${rule.job}`));
  if (rule.label) parts.push(h("span", {}, "label ", h("code", {}, rule.label)));
  if (rule.user) parts.push(h("span", {}, `user ${rule.user}`));
  if (!parts.length) return h("span", {class: "muted"}, "all jobs");
  return parts.flatMap((p, i) => (i ? [", ", p] : [p]));
}

/** Each channel's delivery: sent ✓, retrying (n) ↻, FAILED ✗ with the error in details. */
function deliveries(list) {
  if (!list.length) return h("span", {class: "muted small"}, "no channels");
  return h("ul", {class: "plain deliveries"}, list.map((d) => {
    const event = d.event && d.event !== "firing" ? ` (${d.event})` : "";
    if (d.status === "sent") {
      return h("li", {class: "delivery sent"}, h("span", {"aria-hidden": "true"}, "✓ "), `${d.channel}: sent${event}`);
    }
    if (d.status === "failed") {
      return h("li", {class: "delivery failed"},
        h("details", {}, h("summary", {title: d.last_error || ""}, h("span", {"aria-hidden": "true"}, "✗ "), `${d.channel}: FAILED${event}`),
          h("p", {class: "small"}, `after ${d.attempts} attempt${d.attempts === 1 ? "" : "s"}: `, d.last_error || "no error recorded")));
    }
    const retrying = d.attempts > 0;
    return h("li", {class: "delivery pending", title: d.last_error || null},
      h("span", {"aria-hidden": "true"}, retrying ? "↻ " : "… "),
      retrying ? `${d.channel}: retrying (${d.attempts})${event}` : `${d.channel}: sending${event}`,
      retrying && d.last_error ? h("div", {class: "muted small"}, d.last_error) : null);
  }));
}
