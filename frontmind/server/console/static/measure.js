// Frontmind's numbers, computed the way the daemon computes them.

const encoder = new TextEncoder();

// actors/_tokens.py: one token per 4 UTF-8 bytes (rounded up) plus 3 per content block.
export const BLOCK_FRAMING_TOKENS = 3;

export function estimateTokens(text) {
  return Math.floor((encoder.encode(text).length + 3) / 4);
}

export function blockTokens(text) {
  return estimateTokens(text) + BLOCK_FRAMING_TOKENS;
}

// Costs are the daemon's own (actors/_cost.py, each turn priced on its model's row of
// the model data): turn records carry `input_cost_tokens`, `input_cost_usd` and
// `cost_usd`; the console shows them and computes none.

export function dollars(value) {
  return value === null || value === undefined ? "price unknown" : `$${value.toFixed(4)}`;
}

export function totalInput(u) {
  return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
}

const FRAME = /^═+$/;
const SECTION = /<([A-Za-z_][\w-]*)>\n([\s\S]*?)\n<\/\1>/g;

// Images and PDFs as Frontmind counts them (actors/_history_cost.py), never by the
// length of their base64 data: a 1 MB photo was shown as some 350,000 tokens, and its
// base64 text filled the block.
export const IMAGE_TOKENS = 1600;
export const PDF_PAGE_TOKENS = 3000;
const PDF_PAGE = /\/Type\s*\/Page(?![a-zA-Z])/g;

function binaryTokens(block) {
  if (!block || typeof block !== "object" || Array.isArray(block)) return null;
  if (block.type === "image") return IMAGE_TOKENS;
  const source = block.source;
  if (block.type !== "document" || !source || typeof source !== "object") return null;
  if (source.type === "url" || source.type === "file") return PDF_PAGE_TOKENS;
  if (source.type !== "base64" || source.media_type !== "application/pdf") return null;
  let pdf;
  try {
    pdf = atob(String(source.data || ""));
  } catch {
    return null; // not base64: counted as its JSON, as the daemon does
  }
  return Math.max(1, (pdf.match(PDF_PAGE) || []).length) * PDF_PAGE_TOKENS;
}

// `value` without its image and PDF blocks (wherever they are: a server tool result
// holds a fetched PDF in its own content), and those blocks' estimate.
function withoutBinaries(value) {
  const binary = binaryTokens(value);
  if (binary !== null) return [undefined, binary + BLOCK_FRAMING_TOKENS];
  if (Array.isArray(value)) {
    let total = 0;
    const kept = [];
    for (const item of value) {
      const [rest, tokens] = withoutBinaries(item);
      total += tokens;
      if (rest !== undefined) kept.push(rest);
    }
    return [kept, total];
  }
  if (value && typeof value === "object") {
    let total = 0;
    const kept = {};
    for (const [key, item] of Object.entries(value)) {
      const [rest, tokens] = withoutBinaries(item);
      total += tokens;
      kept[key] = rest;
    }
    return [kept, total];
  }
  return [value, 0];
}

function jsonTokens(value) {
  const [rest, binary] = withoutBinaries(value);
  return (rest === undefined ? 0 : estimateTokens(JSON.stringify(rest))) + binary;
}

// A block's JSON to read, its base64 data said in a few words.
function shown(value) {
  return JSON.stringify(value, (key, v) =>
    key === "data" && typeof v === "string" && v.length > 64 ? `(${v.length.toLocaleString("en-US")} characters of base64)` : v);
}

function blockText(block) {
  if (block.type === "text") return block.text;
  if (block.type === "tool_use") return `${block.name} ${JSON.stringify(block.input)}`;
  if (block.type === "tool_result") {
    return typeof block.content === "string" ? block.content : shown(block.content);
  }
  return shown(block);
}

// A message block's estimate, as the daemon's history budget counts it.
function messageBlockTokens(block, text) {
  if (block.type === "image") return IMAGE_TOKENS + BLOCK_FRAMING_TOKENS;
  if (block.type === "text" || block.type === "tool_use") return blockTokens(text);
  if (block.type === "tool_result" && typeof block.content !== "string") {
    return jsonTokens(block.content || []) + BLOCK_FRAMING_TOKENS;
  }
  if (block.type === "tool_result") return blockTokens(text);
  return jsonTokens(block) + BLOCK_FRAMING_TOKENS;
}

function firstTag(text) {
  const m = /^\s*<([A-Za-z_][\w-]*)>/.exec(text);
  return m ? m[1] : null;
}

// Frontmind's built-in tools; any other client tool is the user's own or an MCP server's.
const BUILT_IN = new Set(["add_reminder", "list_reminders", "complete_reminder", "remember", "search_context"]);

// Where a tool came from: built in, yours, an MCP server (mcp__server__tool), or one of
// Anthropic's server tools (a `type` and no schema).
export function toolOrigin(tool) {
  if (tool.type && !tool.input_schema) return `server tool ${tool.name} (${tool.type})`;
  const mcp = /^mcp__(.+?)__(.+)$/.exec(tool.name);
  if (mcp) return `mcp server ${mcp[1]} · ${mcp[2]}`;
  return `${BUILT_IN.has(tool.name) ? "built-in" : "yours"} · ${tool.name}`;
}

// A request body (POST /v1/messages) as the layers Frontmind lays out, top to bottom:
// tools, system blocks, history, the delimiter, the notification center (with its
// sections), the current message, then any tool loop. Each entry has a kind, a label,
// its text, its token estimate and its breakpoint (cache_control) if it has one.
export function layers(request) {
  const out = [];
  for (const tool of request.tools || []) {
    const text = tool.input_schema
      ? `${tool.name}\n${tool.description}\n${JSON.stringify(tool.input_schema)}`
      : JSON.stringify(tool);
    out.push({ kind: "tools", label: `tool · ${toolOrigin(tool)}`, text, tokens: blockTokens(text), cache: tool.cache_control });
  }
  (request.system || []).forEach((block, i) => {
    const tag = firstTag(block.text);
    out.push({
      kind: "system",
      label: tag ? `system · ${tag}` : i === 0 ? "system · prompt" : `system · block ${i + 1}`,
      text: block.text,
      tokens: blockTokens(block.text),
      cache: block.cache_control,
    });
  });
  const messages = request.messages || [];
  // The delimiter is a user message that is one frame rule; the notification center is
  // the assistant message right after it. The current message is the first user message
  // after those (or the last message that is not part of a tool loop).
  let delim = -1;
  messages.forEach((m, i) => {
    if (m.role === "user" && m.content.length === 1 && m.content[0].type === "text" && FRAME.test(m.content[0].text)) delim = i;
  });
  let current = -1;
  if (delim >= 0) current = delim + 2;
  else {
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i];
      if (m.role === "user" && m.content.some((b) => b.type === "text")) { current = i; break; }
    }
  }
  const historyEnd = delim >= 0 ? delim : current;
  messages.forEach((m, i) => {
    let kind = "history";
    if (i === delim) kind = "delimiter";
    else if (delim >= 0 && i === delim + 1) kind = "notification";
    else if (i === current) kind = "current";
    else if (i > historyEnd && current >= 0 && i > current) kind = "loop";
    m.content.forEach((block, j) => {
      const text = blockText(block);
      const entry = {
        kind,
        label: kind === "history" ? `history · ${m.role}${block.type === "text" ? "" : " · " + block.type}` : kind === "loop" ? `tool loop · ${m.role} · ${block.type}` : kind === "current" ? "current message" : kind,
        text,
        tokens: messageBlockTokens(block, text),
        cache: block.cache_control,
        index: i,
        block: j,
      };
      if (kind === "notification") {
        entry.label = "notification center";
        entry.sections = [...text.matchAll(SECTION)].map((s) => ({ name: s[1], text: s[2], tokens: estimateTokens(s[0]) }));
      }
      out.push(entry);
    });
  });
  return out;
}
