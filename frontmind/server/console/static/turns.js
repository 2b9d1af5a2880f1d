// Per-turn numbers: a stacked bar chart (inline SVG) of where each turn's input came
// from, and a table with the cost, the latencies, the section statuses and the miss reason.

import { fmt, h, s, when } from "./dom.js";
import { dollars, totalInput } from "./measure.js";

const PARTS = [
  ["read", (u) => u.cache_read_input_tokens],
  ["written", (u) => u.cache_creation_input_tokens],
  ["uncached", (u) => u.input_tokens],
];

export function turnsChart(target, turns) {
  if (!turns.length) {
    target.replaceChildren(h("p", { class: "muted" }, "No turns yet."));
    return;
  }
  const height = 170;
  const bar = 26;
  const gap = 12;
  const left = 44;
  const width = left + turns.length * (bar + gap) + gap;
  const max = Math.max(1, ...turns.map((t) => totalInput(t.usage)));
  const scale = (height - 44) / max;
  const base = height - 16;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "input tokens per turn", id: "turns-chart" });
  svg.append(
    s("line", { x1: left - 4, x2: width, y1: base, y2: base, class: "axis" }),
    s("text", { x: left - 8, y: base - max * scale + 4, class: "tick", "text-anchor": "end" }, fmt(max)),
    s("text", { x: left - 8, y: base, class: "tick", "text-anchor": "end" }, "0"));
  turns.forEach((t, i) => {
    const x = left + gap + i * (bar + gap);
    let y = base;
    const g = s("g", { class: "turn", "data-turn": t.turn_id });
    for (const [name, pick] of PARTS) {
      const value = pick(t.usage);
      const tall = value * scale;
      y -= tall;
      if (value > 0) {
        g.append(s("rect", { x, y, width: bar, height: Math.max(tall, 0.5), class: name, "data-value": value },
          s("title", {}, `turn ${i + 1}: ${name} ${fmt(value)} tokens`)));
      }
    }
    // The turn's number under its bar, its input cost (base-price tokens) above it.
    g.append(
      s("text", { x: x + bar / 2, y: height - 4, class: "tick", "text-anchor": "middle" }, i + 1),
      s("text", { x: x + bar / 2, y: y - 3, class: "cost", "text-anchor": "middle" }, fmt(t.input_cost_tokens)));
    svg.append(g);
  });
  target.replaceChildren(svg);
}

function statuses(sections) {
  return h("span", { class: "badges" }, sections.map((sec) =>
    h("span", { class: `badge status-${sec.status}`, title: `${sec.name} (${sec.placement}): ${sec.status}` },
      `${sec.name}: ${sec.status === "empty" ? "left out" : sec.status}`)));
}

export function turnsTable(target, turns, onPick, isRecorded) {
  const rows = turns.map((t, i) => {
    const u = t.usage;
    const row = h("tr", { class: `turn-row${isRecorded(t) ? " recorded" : ""}`, "data-turn": t.turn_id, tabindex: 0, title: "show this turn's request" },
      h("td", { class: "num" }, i + 1),
      h("td", {}, when(t.started_at)),
      h("td", { class: "clip" }, t.user_text),
      h("td", { class: "num read" }, fmt(u.cache_read_input_tokens)),
      h("td", { class: "num written" }, fmt(u.cache_creation_input_tokens),
        u.cache_creation_1h ? h("small", {}, ` (1h ${fmt(u.cache_creation_1h)})`) : ""),
      h("td", { class: "num uncached" }, fmt(u.input_tokens)),
      h("td", { class: "num cost", title: `input ${dollars(t.input_cost_usd)}, with output ${dollars(t.cost_usd)}` }, fmt(t.input_cost_tokens, 1)),
      h("td", { class: "num" }, fmt(u.output_tokens)),
      h("td", { class: "num first" }, t.first_token_ms === null ? "–" : fmt(t.first_token_ms, 0)),
      // A running turn's record was written as it started: it has no total yet.
      h("td", { class: "num total" }, t.status === "running" ? "–" : fmt(t.total_ms, 0)),
      h("td", { class: "sections" }, statuses(t.sections)),
      h("td", { class: "miss" }, t.status !== "completed" ? `${t.status}${t.error ? `: ${t.error}` : ""}` : t.cache_miss_reason || "–"));
    row.addEventListener("click", () => onPick(t));
    row.addEventListener("keydown", (e) => { if (e.key === "Enter") onPick(t); });
    return row;
  });
  target.replaceChildren(h("table", { class: "grid", id: "turns-table" },
    h("thead", {}, h("tr", {},
      ["#", "started", "message"].map((c) => h("th", {}, c)),
      ["read", "written", "uncached", "cost", "output", "first token ms", "total ms"].map((c) => h("th", { class: "num" }, c)),
      h("th", {}, "sections"), h("th", {}, "cache miss"))),
    h("tbody", {}, rows)));
}
