// The context window: a request body drawn as the stack Frontmind lays out, with its
// breakpoints marked and a token estimate per block.

import { fmt, h } from "./dom.js";
import { layers } from "./measure.js";

const PREVIEW_CHARS = 160;
const FOLD_OVER = 8; // blocks in a run between breakpoints shown unfolded

// Split a layer's blocks into runs that each end at a breakpoint (or at the end).
function runs(members) {
  const out = [[]];
  for (const layer of members) {
    out[out.length - 1].push(layer);
    if (layer.cache) out.push([]);
  }
  return out.filter((run) => run.length);
}

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
  const kinds = [...new Set(all.map((l) => l.kind))];
  for (const kind of kinds) {
    const members = all.filter((l) => l.kind === kind);
    const sum = members.reduce((n, l) => n + l.tokens, 0);
    const group = h("section", { class: `layer ${kind}`, "data-kind": kind },
      h("h3", {}, kind === "notification" ? "notification center" : kind === "current" ? "current message" : kind,
        h("span", { class: "tokens" }, `${members.length} block${members.length === 1 ? "" : "s"} · ≈${fmt(sum)} tok`)));
    for (const run of runs(members)) {
      if (run.length > FOLD_OVER) {
        // A long run without a breakpoint folds away; the breakpoints stay in sight.
        const tokens = run.reduce((n, l) => n + l.tokens, 0);
        group.append(h("details", { class: "fold" },
          h("summary", {}, h("span", { class: "label" }, `${run.length} blocks`), h("span", { class: "tokens" }, `≈${fmt(tokens)} tok`)),
          run.map(block)));
      } else {
        group.append(...run.map(block));
      }
      const last = run[run.length - 1];
      if (last.cache) group.append(breakpoint(last.cache));
    }
    stack.append(group);
  }
  parts.push(stack);
  target.replaceChildren(...parts);
}
