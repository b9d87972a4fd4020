// A run's notes as Markdown, safely: a small subset (headings, paragraphs, lists, quotes, code
// blocks, inline code, bold, italic, links) built as DOM nodes with `h`, never as HTML. Text
// stays text, so notes cannot inject markup or script; links are followed only to http(s) and
// relative addresses, and open without handing the page over (rel="noopener noreferrer").

import {h} from "./dom.js";

/** The notes as an array of block elements. */
export function renderMarkdown(text) {
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) { i++; continue; }
    const fence = line.match(/^\s*```/);
    if (fence) {
      const code = [];
      i++;
      while (i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i++]);
      i++;  // the closing fence (or the end)
      blocks.push(h("pre", {}, h("code", {}, code.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      // the page has its h1 and the section its h2: notes' headings start below them
      const level = Math.min(6, heading[1].length + 2);
      blocks.push(h(`h${level}`, {}, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
      blocks.push(h("blockquote", {}, renderMarkdown(quoted.join("\n"))));
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const items = [];
      while (i < lines.length && item.test(lines[i])) items.push(h("li", {}, inline(lines[i++].replace(item, ""))));
      blocks.push(h(ordered ? "ol" : "ul", {}, items));
      continue;
    }
    const para = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !/^(#{1,6})\s|^\s*```|^\s*>/.test(lines[i]) && !item.test(lines[i])) {
      para.push(lines[i++]);
    }
    blocks.push(h("p", {}, inline(para.join("\n"))));
  }
  return blocks;
}

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*|__[^_]+__)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\([^)\s]+\))/;

/** Inline Markdown as nodes: `code`, **bold**, *italic*, [text](url); the rest as text. */
export function inline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    const m = rest.match(INLINE);
    if (!m) { out.push(rest); break; }
    if (m.index > 0) out.push(rest.slice(0, m.index));
    const token = m[0];
    if (m[1]) out.push(h("code", {}, token.slice(1, -1)));
    else if (m[2]) out.push(h("strong", {}, inline(token.slice(2, -2))));
    else if (m[3]) out.push(h("em", {}, inline(token.slice(1, -1))));
    else {
      const [, label, href] = token.match(/^\[([^\]]+)\]\(([^)\s]+)\)$/);
      out.push(safeHref(href)
        ? h("a", {href, rel: "noopener noreferrer", target: "_blank"}, inline(label))
        : token);  // a javascript: or data: link stays text
    }
    rest = rest.slice(m.index + token.length);
  }
  return out;
}

function safeHref(href) {
  if (/^(https?:)?\/\//i.test(href)) return /^https?:/i.test(href) || href.startsWith("//");
  return !/^[a-z][a-z0-9+.-]*:/i.test(href);  // relative: no scheme at all
}
