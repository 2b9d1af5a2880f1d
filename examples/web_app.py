"""Frontmind inside your own web app (Starlette): one `Frontmind` for the app's whole
lifetime, opened and closed by the app's lifespan, and each turn streamed to the
browser as server-sent events.

    python examples/web_app.py              # then open http://127.0.0.1:8000

Without ANTHROPIC_API_KEY it runs offline, on the built-in local Messages API. The
data lives in ./web-app-data (or $FRONTMIND_DATA_DIR); PORT picks the port (0: any).
The same shape works in FastAPI: open Frontmind in the lifespan, stream from a route.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from frontmind import (
    Busy,
    Frontmind,
    FrontmindError,
    InvalidInput,
    TextDelta,
    ToolStarted,
    TurnCompleted,
    TurnError,
)

DATA_DIR = os.environ.get("FRONTMIND_DATA_DIR", "./web-app-data")


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    # One Frontmind for the app: its actors, storage and model client live as long as
    # the app does, and every request shares them.
    offline = not os.environ.get("ANTHROPIC_API_KEY")
    async with Frontmind.open(DATA_DIR, offline=offline) as fm:
        app.state.fm = fm
        yield


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _refusal(exc: FrontmindError) -> Response:
    """A turn refused before its stream starts: busy or shutting down (retry later),
    bad input (400), or the store down (503)."""
    if isinstance(exc, Busy):  # its continuum's queue is full, or the service is loaded
        retry = exc.retry_after
        seconds = str(max(1, math.ceil(retry))) if retry is not None else "1"
        return JSONResponse({"error": str(exc)}, status_code=429, headers={"retry-after": seconds})
    if isinstance(exc, InvalidInput):
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"error": str(exc)}, status_code=503, headers={"retry-after": "1"})


async def chat(request: Request) -> Response:
    fm: Frontmind = request.app.state.fm
    try:
        body = await request.json()
    except ValueError:
        return JSONResponse({"error": "the body must be JSON"}, status_code=400)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str):
        return JSONResponse({"error": "give the message as text: {'message': ...}"}, 400)
    # A null or a number is no user's name: as text it became one ("None"), shared by
    # every client that sent it.
    name = body.get("user", "default")
    if not isinstance(name, str):
        return JSONResponse({"error": "give the user as text: {'user': ...}"}, 400)
    stack = AsyncExitStack()
    try:
        # Your app knows who is asking (a session, a login); each user's data is their
        # own. Entering the turn checks the message: bad input is a 400 here, before
        # any model call and before the stream starts.
        user = fm.user(name)
        events = await stack.enter_async_context(user.turn("web", message))
    except FrontmindError as exc:
        await stack.aclose()
        return _refusal(exc)

    async def stream() -> AsyncIterator[bytes]:
        # A browser that goes away cancels this generator, which cancels the turn
        # cleanly: nothing half-stored.
        async with stack:
            async for event in events:
                if isinstance(event, TextDelta):
                    yield _sse("text", {"text": event.text})
                elif isinstance(event, ToolStarted):
                    yield _sse("tool", {"name": event.name})
                elif isinstance(event, TurnCompleted):
                    usage = event.usage
                    yield _sse(
                        "done",
                        {
                            "cache_read": usage.cache_read_input_tokens,
                            "cache_written": usage.cache_creation_input_tokens,
                            "uncached": usage.input_tokens,
                        },
                    )
                elif isinstance(event, TurnError):
                    yield _sse("error", {"type": event.type, "message": event.message})

    return StreamingResponse(stream(), media_type="text/event-stream")


PAGE = """<!doctype html>
<meta charset="utf-8"><title>Frontmind in a web app</title>
<form id="f"><input id="m" size="60" autofocus><button>Send</button></form>
<pre id="log"></pre>
<script>
const log = document.getElementById("log");
document.getElementById("f").onsubmit = async (e) => {
  e.preventDefault();
  const input = document.getElementById("m");
  log.textContent += "\\nyou: " + input.value + "\\nassistant: ";
  const response = await fetch("/chat", {
    method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({message: input.value}),
  });
  input.value = "";
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\\n\\n")) >= 0) {
      const [head, data] = buffer.slice(0, end).split("\\ndata: ");
      buffer = buffer.slice(end + 2);
      const event = head.slice("event: ".length), body = JSON.parse(data);
      if (event === "text") log.textContent += body.text;
      if (event === "tool") log.textContent += " [" + body.name + "] ";
      if (event === "error") log.textContent += " (error: " + body.message + ")";
    }
  }
};
</script>
"""


async def page(request: Request) -> HTMLResponse:
    return HTMLResponse(PAGE)


app = Starlette(
    routes=[Route("/", page), Route("/chat", chat, methods=["POST"])],
    lifespan=lifespan,
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
