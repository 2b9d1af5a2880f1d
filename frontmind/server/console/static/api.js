// The daemon's HTTP API, as the console uses it: the bearer token from this tab's
// session storage, JSON bodies with their Content-Type (the daemon refuses writes
// without it), errors as thrown ApiError, and a turn's server-sent events.

const TOKEN_KEY = "frontmind.token";

// Where the daemon's routes start, as the browser sees them: "" when it is served at
// the root, "/fm" behind a proxy (or a mount) that serves it under /fm/. Read from this
// module's own address (<root>/ui/api.js), so no setting is needed for it.
export const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
export const UI = `${ROOT}/ui`;

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(hasBody) {
  const h = { Accept: "application/json" };
  if (hasBody) h["Content-Type"] = "application/json";
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function failure(response) {
  let type = "http_error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) ({ type, message } = body.error);
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, type, message);
}

export async function api(path, { method = "GET", body } = {}) {
  const hasBody = body !== undefined;
  const response = await fetch(ROOT + path, {
    method,
    headers: headers(hasBody),
    body: hasBody ? JSON.stringify(body) : undefined,
    credentials: "omit",
  });
  if (!response.ok) throw await failure(response);
  if (response.status === 204) return null;
  return response.json();
}

export const q = encodeURIComponent;

// POST a turn and call onEvent(name, data) for each server-sent event as it arrives.
// EventSource cannot POST, so the stream is read and split here ("\n\n" ends a frame;
// lines starting with ":" are keep-alive comments).
export async function streamTurn(continuumId, message, onEvent, signal) {
  const response = await fetch(`${ROOT}/v1/continuums/${q(continuumId)}/turns`, {
    method: "POST",
    headers: { ...headers(true), Accept: "text/event-stream" },
    body: JSON.stringify({ message }),
    credentials: "omit",
    signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}
