// Building DOM without a framework: `h` makes elements (text is always set as text, never
// parsed as HTML, so names and log lines from the server cannot inject markup).

/**
 * Make an element.
 * h("a", {href: "/jobs/1", "data-testid": "x", onclick: fn}, "text", child, [more, children])
 * Attributes: `class`, `style` (string), `on<event>` listeners, booleans (true → present,
 * false/null/undefined → absent), anything else set as an attribute. Children: nodes,
 * strings/numbers (as text), arrays (flattened), null/false/undefined (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "value" && "value" in el) {
      el.value = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A labelled definition list from [label, value] pairs (pairs with a null value are left out). */
export function facts(pairs, attrs = {}) {
  return h("dl", {class: "facts", ...attrs},
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

/** A horizontal bar with its number as text beside it (the text carries the meaning, not the bar). */
export function bar(fraction, text, {label = "", warn = false} = {}) {
  const known = fraction !== null && fraction !== undefined && Number.isFinite(fraction);
  const pct = known ? Math.max(0, Math.min(1, fraction)) * 100 : 0;
  return h("span", {class: "meter" + (warn ? " warn" : "") + (known ? "" : " unknown")},
    h("span", {class: "meter-track", "aria-hidden": "true"},
      h("span", {class: "meter-fill", style: `width:${pct.toFixed(1)}%`})),
    h("span", {class: "meter-text"}, label ? h("span", {class: "sr-only"}, label + ": ") : null, text));
}

const ROW_KEYS = ["data-job-id", "data-run-id", "data-firing-id", "data-rule"];
const FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";

/**
 * Re-render `container` with `render()` and put the keyboard focus back where it was (the same
 * control of the same job/run/firing row), so live refreshes never throw a keyboard user out.
 */
export function keepFocus(container, render) {
  const active = document.activeElement;
  if (!active || active === document.body || !container.contains(active)) {
    render();
    return;
  }
  const row = active.closest(ROW_KEYS.map((k) => `[${k}]`).join(","));
  const rowSelector = row && container.contains(row)
    ? ROW_KEYS.filter((k) => row.hasAttribute(k)).map((k) => `[${k}="${CSS.escape(row.getAttribute(k))}"]`).join("")
    : null;
  const index = [...(rowSelector ? row : container).querySelectorAll(FOCUSABLE)].indexOf(active);
  render();
  const scope = rowSelector ? container.querySelector(rowSelector) : container;
  const again = scope && index >= 0 ? scope.querySelectorAll(FOCUSABLE)[index] : null;
  if (again) again.focus({preventScroll: true});
}
