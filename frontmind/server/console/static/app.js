// The console's router and views. Paths under /ui/ are views; the daemon answers any of
// them with this page, so a deep link such as /ui/continuums/c1 loads directly.

import { api, ApiError, q, ROOT, setToken, streamTurn, token, UI } from "./api.js";
import { fmt, h, when } from "./dom.js";
import { contextPanel } from "./context.js";
import { turnsChart, turnsTable } from "./turns.js";
import { libraryView } from "./library.js";
import { dollars } from "./measure.js";

const view = document.getElementById("view");
const statusLine = document.getElementById("status");
const tokenForm = document.getElementById("token-form");
const tokenInput = document.getElementById("token-input");

// The requests this tab previewed just before sending each turn, by turn id. The daemon
// stores no request bodies; this is what the console can show for the turns it sent.
const sentRequests = new Map();

// The turns this tab is streaming, by continuum: their question and live reply, and a
// promise of their end. A continuum opened again while its turn streams (the operator
// looked elsewhere and came back) shows that turn going on; its reply was gone from
// view, for good, until the page was loaded again. Keyed by token too: continuum ids
// are each user's own, and another token's "notes" is another continuum, whose view
// showed this one's question and reply (and kept its send button disabled).
const streaming = new Map();
const flightKey = (id) => `${token()}\n${id}`;

// The status line is a live region: it stays in the page, empty when there is nothing
// to say, since a screen reader does not read a region that appears with its text.
export function say(message, kind = "info") {
  statusLine.textContent = message || "";
  statusLine.className = `status ${kind}`;
}

export function failed(error) {
  if (error instanceof ApiError && error.status === 401) {
    askToken(token() ? "That token was refused." : "This daemon needs its bearer token.");
  }
  say(error instanceof ApiError ? `${error.type}: ${error.message}` : String(error), "error");
}

function askToken(why) {
  tokenForm.hidden = false;
  tokenInput.value = "";
  tokenInput.focus();
  if (why) say(why, "error");
}

document.getElementById("token-button").addEventListener("click", () => {
  if (tokenForm.hidden) askToken();
  else tokenForm.hidden = true;
});

tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  setToken(tokenInput.value.trim());
  tokenForm.hidden = true;
  say("");
  // The view is drawn anew for the token; what its forms hold (a message refused with
  // 401 went back in the chat box, a document refused stays in its form) stays in them,
  // not typed again.
  const drafts = [...view.querySelectorAll("form[id] input[name], form[id] textarea[name]")]
    .filter((field) => field.type !== "checkbox" && field.value)
    .map((field) => [field.form.id, field.name, field.value]);
  render();
  for (const [form, name, value] of drafts) {
    const field = document.getElementById(form)?.elements.namedItem(name);
    if (field) field.value = value;
  }
});

// The page's own links are written relative to where it was loaded (the daemon cannot
// know a proxy's prefix); made absolute now, they stay right as the views change.
for (const link of document.querySelectorAll("header a[data-link]")) {
  link.setAttribute("href", new URL(link.getAttribute("href"), location.href).pathname);
}

export function go(path) {
  history.pushState(null, "", path);
  render();
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-link]");
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  go(link.getAttribute("href"));
});

window.addEventListener("popstate", render);

function render() {
  say("");
  // The path inside the daemon: its root (a proxy's prefix) left out.
  const path = location.pathname.slice(ROOT.length).replace(/\/+$/, "");
  const match = /^\/ui\/continuums\/([^/]+)$/.exec(path);
  let task;
  if (match) task = continuumView(decodeURIComponent(match[1]));
  else if (path === "/ui/library") task = libraryView(view, failed);
  else task = listView();
  task.catch(failed);
}

// -- the continuums ------------------------------------------------------------------

async function listView() {
  document.title = "Continuums · Frontmind";
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "More");
  const openForm = h(
    "form",
    { class: "inline", onsubmit: (e) => { e.preventDefault(); const id = e.target.elements.id.value.trim(); if (id) go(`${UI}/continuums/${q(id)}`); } },
    h("label", {}, "Open or start ", h("input", { name: "id", placeholder: "continuum id", pattern: "[A-Za-z0-9_\\-]{1,64}", maxlength: 64, required: true })),
    h("button", { type: "submit" }, "Open"),
  );
  view.replaceChildren(
    h("section", { class: "panel" },
      h("h1", {}, "Continuums"),
      openForm,
      h("div", { class: "scroll" },
        h("table", { class: "grid", id: "continuums" },
          h("thead", {}, h("tr", {},
            h("th", {}, "id"), h("th", { class: "num" }, "turns"), h("th", {}, "last activity"),
            h("th", { class: "num" }, "cached share"), h("th", { class: "num", title: "the daemon's figure, each turn priced on its model: uncached 1×, cache write 1.25× (5 m) or 2× (1 h), cache read 0.1× (or the model's own multipliers)" }, "cost so far (base-price tokens)"),
            h("th", { class: "num" }, "output"))),
          body)),
      more));
  let cursor = null;
  const load = async () => {
    const page = await api(`/v1/continuums?limit=50${cursor ? `&cursor=${q(cursor)}` : ""}`);
    for (const c of page.continuums) {
      body.append(h("tr", {},
        h("td", {}, h("a", { href: `${UI}/continuums/${q(c.id)}`, "data-link": true }, c.id)),
        h("td", { class: "num" }, fmt(c.turns)),
        h("td", {}, when(c.last_activity_at)),
        h("td", { class: "num" }, `${fmt(c.cached_share * 100, 1)}%`),
        h("td", { class: "num", title: `with output: ${dollars(c.cost_usd)}` }, fmt(c.input_cost_tokens, 1)),
        h("td", { class: "num" }, fmt(c.output_tokens))));
    }
    if (!body.children.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No continuums yet: open one by id to start it.")));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", () => {
    // Until its page is in: a second click would ask for the same page and add it twice.
    more.disabled = true;
    load().catch(failed).finally(() => { more.disabled = false; });
  });
  await load();
}

// -- one continuum -------------------------------------------------------------------

async function continuumView(id) {
  document.title = `${id} · Frontmind`;
  // A log (a polite live region): a screen reader reads each reply once it is complete
  // (a reply is aria-busy while it streams), and not the history loaded with the page.
  const transcript = h("div", { class: "transcript", id: "transcript", role: "log", "aria-label": "Conversation", "aria-busy": "true" });
  const input = h("textarea", { name: "message", rows: 2, placeholder: "Say something…", "aria-label": "Message", required: true });
  const send = h("button", { type: "submit" }, "Send");
  const chat = h("form", { class: "chat", id: "chat" }, input, send);
  const chart = h("div", { class: "chart", id: "chart" });
  const table = h("div", { class: "scroll", id: "turns" });
  const context = h("div", { id: "context" });
  const contextMessage = h("input", { name: "preview", value: "(the next message)", "aria-label": "message to preview" });
  const preview = h("form", { class: "inline", id: "preview" }, h("label", {}, "Next request with ", contextMessage), h("button", { type: "submit" }, "Show"));

  view.replaceChildren(
    h("div", { class: "crumbs" }, h("a", { href: `${UI}/`, "data-link": true }, "Continuums"), " / ", h("strong", {}, id)),
    h("div", { class: "columns" },
      h("section", { class: "panel" }, h("h2", {}, "Chat"), transcript, chat),
      h("section", { class: "panel", id: "context-panel" }, h("h2", {}, "Context window"), preview, context)),
    h("section", { class: "panel" }, h("h2", {}, "Turns"),
      h("p", { class: "legend" },
        h("span", { class: "key read" }), "read from cache ",
        h("span", { class: "key written" }), "written to cache ",
        h("span", { class: "key uncached" }), "uncached ",
        h("span", { class: "muted" }, "· cost in base-price input tokens, priced by the daemon on each turn's model: write 1.25× (5 m) or 2× (1 h), read 0.1× (or the model's own)")),
      chart, table));

  const showNext = async () => {
    const text = contextMessage.value.trim() || "(the next message)";
    const request = await api(`/v1/continuums/${q(id)}/context?message=${q(text)}`);
    contextPanel(context, request, "The next request (nothing is sent)");
  };
  const showTurn = (record) => {
    const request = sentRequests.get(record.turn_id);
    if (request) contextPanel(context, request, `Turn ${record.turn_id}: the request previewed just before it was sent`, record);
    else contextPanel(context, null, `Turn ${record.turn_id}: its request was not recorded (this tab records the turns it sends)`, record);
    document.getElementById("context-panel").scrollIntoView({ block: "start" });
  };
  const refreshTurns = async () => {
    let page;
    try {
      page = await api(`/v1/continuums/${q(id)}/turns?limit=100`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) page = { turns: [] };
      else throw error;
    }
    turnsChart(chart, page.turns);
    turnsTable(table, page.turns, showTurn, (t) => sentRequests.has(t.turn_id));
  };
  preview.addEventListener("submit", (e) => { e.preventDefault(); showNext().catch(failed); });

  chat.addEventListener("submit", (event) => {
    event.preventDefault();
    // A reply still streaming: Enter's requestSubmit() goes past the disabled button.
    if (send.disabled) return;
    // Less leading blank lines and trailing whitespace: the first line's indentation
    // stays (a pasted block of code or a stack trace keeps its shape).
    const text = input.value.replace(/^\s*\n/, "").trimEnd();
    if (!text) return;
    input.value = "";
    send.disabled = true;
    say(""); // a refusal of the last try said in the status line is over: this one runs
    runTurn(id, text, transcript)
      .then(() => Promise.all([refreshTurns(), showNext()]))
      .catch((error) => {
        // Refused before it started (overloaded, token refused, daemon gone): nothing
        // was sent, so the message goes back in the box, to send again with Enter.
        if (error.accepted === false && !input.value) input.value = text;
        failed(error);
      })
      .finally(() => { send.disabled = false; input.focus(); });
  });
  input.addEventListener("keydown", (e) => {
    // Enter that ends an input method's composition (choosing the kanji for a kana, say)
    // belongs to the input method; only Enter outside one sends.
    if (e.isComposing || e.keyCode === 229) return;
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); chat.requestSubmit(); }
  });

  // Taken before the history is read: a turn that ends meanwhile may not be in it.
  const flight = streaming.get(flightKey(id));
  const showHistory = async () => {
    const [history] = await Promise.all([
      latestMessages(id, 200).catch((error) => {
        if (error instanceof ApiError && error.status === 404) return { messages: [] };
        throw error;
      }),
      refreshTurns(),
    ]);
    for (const m of history.messages) transcript.append(messageView(m));
    // Unless it was stored before the history was read (its messages are in it already).
    const running = flight && !history.messages.some((m) => m.turn_id && m.turn_id === flight.turnId);
    if (running) {
      transcript.append(...flight.nodes);
      send.disabled = true;
      flight.done
        .then(() => Promise.all([refreshTurns(), showNext()]))
        .catch(failed)
        .finally(() => { send.disabled = false; });
    }
    if (!history.messages.length && !running) transcript.append(h("p", { class: "muted" }, "No messages yet."));
    transcript.scrollTop = transcript.scrollHeight;
    transcript.removeAttribute("aria-busy");
  };
  // The transcript does not wait for the next request's preview: that waits for a turn
  // running in this continuum to end, and the transcript stayed empty until then.
  await Promise.all([showHistory(), showNext()]);
}

// The continuum's last `keep` messages: pages come oldest first (the API's cursor goes
// forward only), so they are read to the end and the tail kept. The first 200 showed
// a long continuum's beginning, months old, under its newest turns.
async function latestMessages(id, keep) {
  let cursor = null;
  let messages = [];
  do {
    const page = await api(`/v1/continuums/${q(id)}/messages?limit=1000${cursor ? `&cursor=${q(cursor)}` : ""}`);
    messages = messages.concat(page.messages).slice(-keep);
    cursor = page.next_cursor;
  } while (cursor);
  return { messages };
}

// A tool result's blocks as their text, an image or a document as its kind: the JSON
// array showed each image's base64, a screenful of characters, in the transcript.
function resultText(content) {
  if (typeof content === "string") return content;
  return (content || []).map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join(" ");
}

function thinkingView(label, text) {
  return h("details", { class: "thinking" }, h("summary", {}, label), h("pre", { class: "full" }, text));
}

function messageView(m) {
  const parts = m.content.map((b) => {
    // Each text takes its direction from itself: Hebrew or Arabic reads right to left.
    if (b.type === "text") return h("div", { class: "text", dir: "auto" }, b.text);
    if (b.type === "tool_use") return h("div", { class: "tool" }, `⚙ ${b.name} ${JSON.stringify(b.input)}`);
    if (b.type === "tool_result") return h("div", { class: "tool" }, `↳ ${resultText(b.content)}`);
    // Folded above the reply, as while it streamed: a bare "[thinking]" once the page
    // was loaded again put its text out of reach. Redacted thinking is encrypted.
    if (b.type === "thinking") return thinkingView("thinking", b.thinking || "");
    if (b.type === "redacted_thinking") return thinkingView("redacted thinking (encrypted, not shown)", "");
    return h("div", { class: "tool" }, `[${b.type}]`);
  });
  return h("div", { class: `msg ${m.role}` }, h("span", { class: "role" }, m.role), parts);
}

// The daemon caps a request line at 16 KB; a preview's URL past this is not asked for.
const PREVIEW_URL_MAX = 8 * 1024;

// The request a turn with `text` would send, previewed just before sending it, or null.
// It is a record for the context panel only: a message too long to ride in a URL, or a
// preview refused, leaves the turn unrecorded but never keeps it from being sent.
async function previewFor(id, text) {
  const path = `/v1/continuums/${q(id)}/context?message=${q(text)}`;
  if (path.length > PREVIEW_URL_MAX) return null;
  try {
    return await api(path);
  } catch {
    return null;
  }
}

async function runTurn(id, text, transcript) {
  transcript.querySelector("p.muted")?.remove();
  const asked = messageView({ role: "user", content: [{ type: "text", text }] });
  const reply = h("div", { class: "text streaming", dir: "auto" });
  const bubble = h("div", { class: "msg assistant live", id: "live", "aria-busy": "true" }, h("span", { class: "role" }, "assistant"), reply);
  transcript.append(asked, bubble);
  let over = () => {};
  const flight = { nodes: [asked, bubble], turnId: null, done: new Promise((resolve) => { over = resolve; }) };
  const key = flightKey(id); // the token now: it may change while the turn streams
  streaming.set(key, flight);
  const tools = new Map();
  let request = null; // the request previewed just before the turn, for the context panel
  let thinking = null; // the open stretch of thinking: folded, its text inside
  let accepted = false; // the daemon took the turn (turn.started)
  let ended = false; // its last event came (turn.completed or error)
  let streamed = false; // some of its reply came (text, thinking or a tool call)
  // An error event before any of the reply: a turn taken in and ended while it waited
  // for a slot (shutting down, its connection given to another client) has its
  // turn.started and error all the same (as has a model's refusal or an API error
  // before its first token). Nothing of it is stored, so it fails as a refusal at the
  // door does and the message goes back in the box, to send again.
  let unstarted = null;
  const end = (message) => {
    ended = true;
    bubble.removeAttribute("aria-busy");
    bubble.classList.remove("live");
    reply.classList.remove("streaming");
    if (message) bubble.append(h("div", { class: "error" }, message));
  };
  try {
    // After the message is shown: a preview waits for a turn slot as the turn does, and
    // at capacity the message sent would stay out of sight for that whole wait.
    request = await previewFor(id, text);
    await streamTurn(id, text, onEvent);
  } catch (error) {
    // Refused (429, 503, 401…) or cut off mid-stream: the bubble says so, not a reply
    // that looks as if it were still coming.
    if (!ended) end(`${accepted ? "cut off" : "not sent"}: ${error instanceof ApiError ? `${error.type}: ${error.message}` : String(error)}`);
    error.accepted = accepted;
    throw error;
  } finally {
    bubble.removeAttribute("id");
    if (streaming.get(key) === flight) streaming.delete(key);
    over();
  }
  // The stream closed without its last event (the daemon stopped, the connection dropped).
  if (!ended) end("cut off: the connection closed before the reply finished");
  if (unstarted) throw unstarted;

  function onEvent(name, data) {
    if (name !== "thinking.delta") thinking = null;
    if (name === "text.delta" || name === "thinking.delta" || name === "tool.started") streamed = true;
    if (name === "turn.started") {
      accepted = true;
      if (request) sentRequests.set(data.turn_id, request);
      bubble.dataset.turn = data.turn_id;
      flight.turnId = data.turn_id;
    } else if (name === "thinking.delta") {
      if (!thinking) {
        thinking = h("pre", { class: "full" });
        reply.before(h("details", { class: "thinking" },
          h("summary", {}, data.redacted ? "redacted thinking (encrypted, not shown)" : "thinking"), thinking));
      }
      thinking.textContent += data.text;
    } else if (name === "text.delta") {
      reply.textContent += data.text;
    } else if (name === "tool.started") {
      const line = h("div", { class: "tool running" }, `⚙ ${data.name} ${JSON.stringify(data.input)}`);
      tools.set(data.id, line);
      reply.before(line);
    } else if (name === "tool.finished") {
      const line = tools.get(data.id);
      if (line) {
        line.classList.remove("running");
        line.append(h("div", { class: data.is_error ? "error" : "muted" }, `↳ ${data.content}`));
      }
    } else if (name === "turn.completed") {
      reply.textContent = data.text;
      end();
      // A reply cut off (max_tokens, the context window) ends as any other: its warnings
      // say the rest is missing, which the text alone does not.
      bubble.append(...(data.warnings || []).map((w) => h("div", { class: "warning" }, `⚠ ${w}`)), completedLine(data));
    } else if (name === "error") {
      if (!streamed) unstarted = Object.assign(new ApiError(0, data.type, data.message), { accepted: false });
      end(`${data.type}: ${data.message}`);
    }
    const shownIn = bubble.parentElement; // the transcript it is shown in now
    if (shownIn) shownIn.scrollTop = shownIn.scrollHeight;
  }
}

function completedLine(done) {
  const u = done.usage;
  return h("div", { class: "completed" },
    `read ${fmt(u.cache_read_input_tokens)} · written ${fmt(u.cache_creation_input_tokens)} · uncached ${fmt(u.input_tokens)} · out ${fmt(u.output_tokens)} · `,
    `first token ${fmt(done.timings_ms.first_token, 0)} ms · total ${fmt(done.timings_ms.total, 0)} ms`,
    done.cache_miss_reason ? ` · miss: ${done.cache_miss_reason}` : "");
}

// Whether this daemon wants a token, asked without one (so no request is refused).
fetch(`${UI}/settings.json`, { credentials: "omit" })
  .then((r) => r.json())
  .then((settings) => {
    if (settings.token_required && !token()) askToken("This daemon needs its bearer token.");
    else render();
  })
  .catch(failed);
