"""`frontmind serve`: the HTTP daemon (Starlette on uvicorn), server-sent events for turns.

Errors are `{"error": {"type": ..., "message": ...}}` with a fitting status. Bad input
never changes what is stored, and the daemon keeps serving. A client that disconnects
mid-stream cancels its turn cleanly. SIGTERM/SIGINT: stop accepting, let running turns
finish within the grace period (then cancel them cleanly), exit 0. The routes, bodies
and events are described at /openapi.json (frontmind/_openapi.py).
"""

from __future__ import annotations

import hmac
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actors import FrontmindError, TurnCompleted, TurnError, TurnEvent, TurnStarted
from runtime import KernelError
from storage import InvalidInput, StorageError, TurnUsage, check_continuum_id

from ._console import console_routes, is_console_path
from ._demo import input_cost
from ._errors import wire_error
from ._exceptions import ConfigError
from ._frontmind import Frontmind, TurnStream
from ._metrics import CONTENT_TYPE, Metrics
from ._openapi import DOCS_PAGE, openapi_json
from ._wire import (
    ContinuumPage,
    DocumentBody,
    DocumentPage,
    ErrorBody,
    ErrorDetail,
    Health,
    MemoryBody,
    MemoryHitPage,
    MemoryPage,
    MessagePage,
    ModelSettingsBody,
    ModelSettingsReply,
    ReminderBody,
    ReminderPage,
    TurnBody,
    TurnPage,
    decode_body,
    decode_cursor,
    encode_cursor,
    summarize,
    to_wire,
)
from .config import load_config
from .localapi._asgi import is_loopback, serve_app

K = TypeVar("K")

__all__ = ["build_app", "serve"]

log = logging.getLogger("frontmind.daemon")
access_log = logging.getLogger("frontmind.access")
_encoder = msgspec.json.Encoder()
PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json", "/docs"})
PING_SECONDS = 15.0
MAX_LIMIT = 10_000
PING = b": ping\n\n"


def _sse_frame(event: TurnEvent, event_id: str) -> bytes:
    name = str(type(event).__struct_config__.tag)
    data = _encoder.encode(to_wire(event))
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id.encode(), name.encode(), data)


def _error(status: int, kind: str, message: str) -> Response:
    return _json(ErrorBody(ErrorDetail(kind, message)), status)


def _json(value: Any, status: int = 200) -> Response:
    return Response(
        _encoder.encode(to_wire(value)), status_code=status, media_type="application/json"
    )


class TokenAuth:
    """Pure ASGI middleware (streaming-safe): every route but the public ones needs the
    token (the health check, and the API description, which holds no data)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"] if scope["type"] == "http" else ""
        if path and path not in PUBLIC_PATHS and not is_console_path(path):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = _error(401, "unauthorized", "missing or wrong bearer token")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Observed:
    """Outermost ASGI middleware: counts responses by status and writes the access log."""

    def __init__(self, app: ASGIApp, metrics: Metrics, *, access: bool) -> None:
        self.app = app
        self.metrics = metrics
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app fails before answering, the server answers 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.response(status)
            if self.access:
                access_log.info(
                    "%s %s %d %.1fms",
                    scope["method"],
                    scope["path"],
                    status,
                    (time.perf_counter() - started) * 1000,
                )


class TurnEvents(Response):
    """A turn as server-sent events: an `id:` on every event, and a `: ping` comment
    whenever nothing was sent for `ping_seconds`, so an idle proxy keeps the stream.

    The turn's events are pumped by a child task into a channel; waiting on the channel
    (never on the turn itself) can time out for a ping without disturbing the turn. A
    client that disconnects cancels the pump, which cancels the turn cleanly.
    """

    media_type = "text/event-stream"

    def __init__(self, stream: TurnStream, metrics: Metrics, ping_seconds: float) -> None:
        super().__init__(
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            media_type=self.media_type,
        )
        # A stream has no length: drop the content-length Response set for an empty body.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.stream = stream
        self.metrics = metrics
        self.ping_seconds = ping_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = False
        async with self.stream, anyio.create_task_group() as tg:
            tg.start_soon(self._watch_disconnect, receive, tg.cancel_scope)
            events, received = anyio.create_memory_object_stream[TurnEvent](1)
            tg.start_soon(self._pump, events)
            try:
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
                finished = await self._relay(received, send)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                if not finished:
                    self.metrics.cancelled()
            tg.cancel_scope.cancel()

    async def _relay(self, received: MemoryObjectReceiveStream[TurnEvent], send: Send) -> bool:
        """Send every event with its id; True once the turn ended with a final event."""
        count, turn_id, finished = 0, "", False
        async with received:
            while True:
                with anyio.move_on_after(self.ping_seconds) as waited:
                    try:
                        event = await received.receive()
                    except anyio.EndOfStream:
                        return finished
                if waited.cancelled_caught:
                    await send({"type": "http.response.body", "body": PING, "more_body": True})
                    continue
                if isinstance(event, TurnStarted):
                    turn_id = event.turn_id
                elif isinstance(event, TurnCompleted):
                    self.metrics.completed(event)
                    finished = True
                elif isinstance(event, TurnError):
                    self.metrics.error(event.type)
                    finished = True
                count += 1
                frame = _sse_frame(event, f"{turn_id}:{count}" if turn_id else str(count))
                await send({"type": "http.response.body", "body": frame, "more_body": True})

    async def _pump(self, events: MemoryObjectSendStream[TurnEvent]) -> None:
        async with events:
            try:
                async for event in self.stream:
                    await events.send(event)
            except KernelError as exc:
                # A bug in the turn's actor (it is restarted): end with an error event
                # rather than a broken stream.
                log.error("turn failed inside the runtime", exc_info=exc)
                await events.send(TurnError("internal_error", str(exc)))

    @staticmethod
    async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()


def build_app(
    fm: Frontmind,
    *,
    token: str | None = None,
    metrics: Metrics | None = None,
    ping_seconds: float = PING_SECONDS,
    access_log: bool = False,
) -> ASGIApp:
    stats = metrics or Metrics()

    def continuum(request: Request) -> str:
        return check_continuum_id(request.path_params["continuum_id"])

    async def run_turn(request: Request) -> Response:
        cid = continuum(request)
        body = decode_body(await request.body(), TurnBody)
        stream = fm.turn(cid, body.user_input())
        # Bad input (400/413) and Busy (429) are answered now, before any byte of the stream.
        await stream.__aenter__()
        return TurnEvents(stream, stats, ping_seconds)

    async def list_continuums(request: Request) -> Response:
        limit, after = _page(request, tuple[float, str])
        found = await fm.continuums(limit=limit + 1, after=after)
        shown = found[:limit]
        usage = await fm.storage.usage_by_continuum([c.id for c in shown])
        summaries = []
        for c in shown:
            turns, used = usage.get(c.id, (0, TurnUsage()))
            total = used.total_input
            share = used.cache_read_input_tokens / total if total else 0.0
            summaries.append(summarize(c, turns, input_cost(used), share, used.output_tokens))
        more = len(found) > limit
        last = summaries[-1] if summaries else None
        cursor = encode_cursor([last.last_activity_at, last.id]) if more and last else None
        return _json(ContinuumPage(cursor, summaries))

    async def delete_continuum(request: Request) -> Response:
        await fm.delete_continuum(continuum(request))
        return Response(status_code=204)

    async def messages(request: Request) -> Response:
        limit, after = _page(request, int)
        start = -1 if after is None else after
        found = await fm.history(continuum(request), limit=limit + 1, after=start)
        cursor = encode_cursor(found[limit - 1].seq) if len(found) > limit else None
        return _json(MessagePage(cursor, found[:limit]))

    async def context(request: Request) -> Response:
        text = request.query_params.get("message", "")
        if not text.strip():
            raise InvalidInput("the query parameter 'message' is required")
        return Response(
            _encoder.encode(await fm.context(continuum(request), text)),
            media_type="application/json",
        )

    async def settings(request: Request) -> Response:
        cid = continuum(request)
        if request.method == "PUT":
            body = decode_body(await request.body(), ModelSettingsBody)
            own, choice = await fm.set_model_settings(
                cid,
                model=body.model,
                thinking=body.thinking,
                budget_tokens=body.budget_tokens,
                max_tokens=body.max_tokens,
                effort=body.effort,
            )
        else:
            own, choice = await fm.model_settings(cid)
        return _json(ModelSettingsReply(own, choice))

    async def turns(request: Request) -> Response:
        limit, before = _page(request, tuple[float, str])
        found = await fm.turns(continuum(request), limit=limit + 1, before=before)
        # Pages run from the latest turns back; each page is in time order.
        more = len(found) > limit
        found = found[1:] if more else found
        cursor = encode_cursor([found[0].started_at, found[0].turn_id]) if more else None
        return _json(TurnPage(cursor, found))

    async def reminders(request: Request) -> Response:
        if request.method == "POST":
            body = decode_body(await request.body(), ReminderBody)
            return _json(await fm.add_reminder(body.text, body.due_at), 201)
        limit, after = _page(request, int)
        include = request.query_params.get("include_completed") in ("1", "true")
        found = await fm.reminders(include, limit=limit + 1, after=after or 0)
        cursor = encode_cursor(found[limit - 1].id) if len(found) > limit else None
        return _json(ReminderPage(cursor, found[:limit]))

    def reminder_id(request: Request) -> int:
        raw = request.path_params["reminder_id"]
        if not raw.isdigit():
            raise InvalidInput("reminder id must be a positive integer")
        return int(raw)

    async def complete(request: Request) -> Response:
        return _json(await fm.complete_reminder(reminder_id(request)))

    async def delete_reminder(request: Request) -> Response:
        await fm.delete_reminder(reminder_id(request))
        return Response(status_code=204)

    async def memories(request: Request) -> Response:
        if request.method == "POST":
            body = decode_body(await request.body(), MemoryBody)
            return _json(await fm.remember(body.text, body.importance, body.expires_at), 201)
        query = request.query_params.get("q")
        if query is not None:
            # Search results are ranked, not listed: one page of the best `limit`.
            limit = _limit(request)
            return _json(MemoryHitPage(None, await fm.search_memories(query, limit=limit)))
        limit, before = _page(request, int)
        found = await fm.memories(limit + 1, before=before)
        cursor = encode_cursor(found[limit - 1].id) if len(found) > limit else None
        return _json(MemoryPage(cursor, found[:limit]))

    async def delete_memory(request: Request) -> Response:
        raw = request.path_params["memory_id"]
        if not raw.isdigit():
            raise InvalidInput("memory id must be a positive integer")
        await fm.delete_memory(int(raw))
        return Response(status_code=204)

    async def documents(request: Request) -> Response:
        if request.method == "POST":
            body = decode_body(await request.body(), DocumentBody)
            return _json(await fm.put_document(body.label, body.content), 201)
        limit, after = _page(request, str)
        found = await fm.documents(limit=limit + 1, after=after or "")
        cursor = encode_cursor(found[limit - 1].label) if len(found) > limit else None
        return _json(DocumentPage(cursor, found[:limit]))

    async def delete_document(request: Request) -> Response:
        await fm.delete_document(request.path_params["label"])
        return Response(status_code=204)

    async def healthz(request: Request) -> Response:
        return _json(Health("ok"))

    async def metrics_route(request: Request) -> Response:
        return Response(stats.render(), media_type=CONTENT_TYPE)

    async def openapi(request: Request) -> Response:
        return Response(openapi_json(), media_type="application/json")

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_PAGE)

    async def known_error(request: Request, exc: Exception) -> Response:
        status, kind = wire_error(exc) or (500, "internal_error")
        if status >= 500:
            log.error("%s on %s", kind, request.url.path, exc_info=exc)
        return _error(status, kind, str(exc) or kind)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, "not_found", f"no route {request.method} {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return _error(
            405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"
        )

    routes = [
        Route("/v1/continuums", list_continuums, methods=["GET"]),
        Route("/v1/continuums/{continuum_id}", delete_continuum, methods=["DELETE"]),
        Route("/v1/continuums/{continuum_id}/turns", run_turn, methods=["POST"]),
        Route("/v1/continuums/{continuum_id}/turns", turns, methods=["GET"]),
        Route("/v1/continuums/{continuum_id}/messages", messages, methods=["GET"]),
        Route("/v1/continuums/{continuum_id}/context", context, methods=["GET"]),
        Route("/v1/continuums/{continuum_id}/settings", settings, methods=["GET", "PUT"]),
        Route("/v1/reminders", reminders, methods=["GET", "POST"]),
        Route("/v1/reminders/{reminder_id}", delete_reminder, methods=["DELETE"]),
        Route("/v1/reminders/{reminder_id}/complete", complete, methods=["POST"]),
        Route("/v1/memories", memories, methods=["GET", "POST"]),
        Route("/v1/memories/{memory_id}", delete_memory, methods=["DELETE"]),
        Route("/v1/documents", documents, methods=["GET", "POST"]),
        Route("/v1/documents/{label}", delete_document, methods=["DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        *console_routes(token_required=bool(token)),
    ]
    app: ASGIApp = Starlette(
        routes=routes,
        exception_handlers={
            404: not_found,
            405: not_allowed,
            FrontmindError: known_error,
            StorageError: known_error,
        },
    )
    if token:
        app = TokenAuth(app, token)
    return Observed(app, stats, access=access_log)


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "100")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return int(raw)


def _page(request: Request, key: type[K]) -> tuple[int, K | None]:
    """`?limit=&cursor=`: the page size, and the decoded sort key to continue after."""
    cursor = request.query_params.get("cursor")
    return _limit(request), None if cursor is None else decode_cursor(cursor, key)


async def serve(
    *,
    data_dir: Path,
    config_file: Path | None,
    host: str | None,
    port: int | None,
    offline: bool,
    token: str | None,
    announce: Callable[[str], None],
    access_log: bool = False,
    database: str | None = None,
) -> None:
    """Run the daemon until SIGTERM or SIGINT, then shut down gracefully."""
    config = load_config(config_file, data_dir)
    if database is not None:  # --database wins over FRONTMIND_DATABASE_URL and the file
        config = msgspec.structs.replace(
            config, storage=msgspec.structs.replace(config.storage, url=database)
        )
    host = host or config.server.host
    port = config.server.port if port is None else port
    token = token or config.server.token
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"binding to {host}, which is not a loopback address, requires a token: "
            "pass --token or set FRONTMIND_TOKEN"
        )
    async with Frontmind.open(data_dir, config, offline=offline) as fm:
        app = build_app(fm, token=token, access_log=access_log)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with serve_app(
                app,
                host,
                port,
                graceful_seconds=config.server.grace_seconds,
                force_exit_on_close=False,
                log_level="warning",
            ) as served:
                announce(served.url)
                async for signum in signals:
                    log.info("received %s: shutting down", signal.Signals(signum).name)
                    break
