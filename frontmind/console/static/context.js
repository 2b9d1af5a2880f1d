// The context window: a request body drawn as the stack Frontmind lays out, with its
// breakpoints marked and a token estimate per block.

import { fmt, h } from "./dom.js";
import { layers } from "./measure.js";

const PREVIEW_CHARS = 160;

function clip(text) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS - 1)}…` : flat;
}

function breakpoint(cache) {
  return h("div", { class: "breakpoint" }, `▲ breakpoint · cache_control ${cache.type}${cache.ttl ? ` · ttl ${cache.ttl}` : ""}`);
}

function block(layer) {
  const summary = h("summary", {},
    h("span", { class: "label" }, layer.label),
    h("span", { class: "tokens" }, `≈${fmt(layer.tokens)} tok`));
  if (layer.sections) {
    // The notification center: each section labelled, its exact text one click away.
    return h("div", { class: `block ${layer.kind}` },
      h("ul", { class: "sections" }, layer.sections.map((s) =>
        h("li", { class: "section", "data-section": s.name },
          h("span", { class: "label" }, s.name),
          h("span", { class: "tokens" }, `≈${fmt(s.tokens)} tok`),
          h("div", { class: "clip" }, clip(s.text))))),
      h("details", { class: "block raw" }, h("summary", {}, h("span", { class: "label" }, "exact text"), h("span", { class: "tokens" }, `≈${fmt(layer.tokens)} tok`)),
        h("pre", { class: "full" }, layer.text)));
  }
  return h("details", { class: `block ${layer.kind}` }, summary,
    h("div", { class: "clip" }, clip(layer.text)),
    h("pre", { class: "full" }, layer.text));
}

function sectionsOf(record) {
  return h("ul", { class: "statuses" }, record.sections.map((s) =>
    h("li", { class: `status-${s.status}` }, `${s.name} (${s.placement}): ${s.status === "empty" ? "empty / left out" : s.status}`,
      s.age_s ? ` · ${fmt(s.age_s)} s old` : "", ` · ${fmt(s.elapsed_ms, 1)} ms`)));
}

export function contextPanel(target, request, title, record) {
  const parts = [h("p", { class: "muted", id: "context-title" }, title)];
  if (record) {
    parts.push(h("p", {}, h("strong", {}, "You: "), record.user_text));
    if (record.sections.length) parts.push(sectionsOf(record));
    if (record.cache_miss_reason) parts.push(h("p", { class: "error" }, `cache miss: ${record.cache_miss_reason}`));
  }
  if (!request) {
    target.replaceChildren(...parts);
    return;
  }
  const all = layers(request);
  const total = all.reduce((n, l) => n + l.tokens, 0);
  const marks = all.filter((l) => l.cache).length;
  parts.push(h("p", { class: "summary" },
    `${request.model} · ≈${fmt(total)} input tokens estimated · ${marks} breakpoint${marks === 1 ? "" : "s"}`));
  const stack = h("div", { class: "stack", id: "stack" });
  let group = null;
  let groupKind = null;
  for (const layer of all) {
    if (layer.kind !== groupKind) {
      groupKind = layer.kind;
      const count = all.filter((l) => l.kind === layer.kind);
      const sum = count.reduce((n, l) => n + l.tokens, 0);
      group = h("section", { class: `layer ${layer.kind}`, "data-kind": layer.kind },
        h("h3", {}, layer.kind === "notification" ? "notification center" : layer.kind === "current" ? "current message" : layer.kind,
          h("span", { class: "tokens" }, `${count.length} block${count.length === 1 ? "" : "s"} · ≈${fmt(sum)} tok`)));
      stack.append(group);
    }
    group.append(block(layer));
    if (layer.cache) group.append(breakpoint(layer.cache));
  }
  parts.push(stack);
  target.replaceChildren(...parts);
}
