"""`frontmind serve`: the HTTP daemon (Starlette on uvicorn), server-sent events for turns.

Errors are `{"error": {"type": ..., "message": ...}}` with a fitting status. Bad input
never changes what is stored, and the daemon keeps serving. A client that disconnects
mid-stream cancels its turn cleanly. SIGTERM/SIGINT: stop accepting, let running turns
finish within the grace period (then cancel them cleanly), exit 0. The routes, bodies
and events are described at /openapi.json (frontmind/server/_openapi.py).

Users: every request acts as one user and sees only that user's data, on every route.
The admin token (`--token` / FRONTMIND_TOKEN) acts as user `default` and alone may add
users (`POST /v1/users`); a user's token (from `frontmind users add` or that route)
acts as that user. With no admin token (loopback only), a request without a token acts
as `default` with the admin's rights, and one with a user's token as that user.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import re
import signal
import time
from collections.abc import Callable, Generator
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
from storage import DEFAULT_USER, InvalidInput, StorageError, TurnUsage, check_continuum_id

from .._cost import NO_COST, cost
from .._errors import wire_error
from .._exceptions import ConfigError, Forbidden
from .._frontmind import Frontmind, TurnStream
from .._wire import (
    ContinuumPage,
    DocumentBody,
    DocumentPage,
    ErrorBody,
    ErrorDetail,
    Health,
    JobList,
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
    UserBody,
    UserCreated,
    UserList,
    decode_body,
    decode_cursor,
    encode_cursor,
    priced,
    summarize,
    to_wire,
)
from ..config import Config, RuntimeConfig, load_config
from ._asgi import SocketLimits, is_loopback, serve_app
from ._console import console_routes, is_console_path
from ._guard import DEFAULT_MAX_BODY_BYTES, EdgeGuard, bearer_token
from ._metrics import CONTENT_TYPE, Metrics
from ._openapi import DOCS_PAGE, openapi_json
from ._startup import freeze_startup_objects
from ._tracing import setup_tracing

K = TypeVar("K")

__all__ = ["TurnStreams", "build_app", "serve"]

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


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Response:
    response = _json(ErrorBody(ErrorDetail(kind, message)), status)
    response.headers.update(headers or {})
    return response


def _json(value: Any, status: int = 200) -> Response:
    return Response(
        _encoder.encode(to_wire(value)), status_code=status, media_type="application/json"
    )


_USER_KEY = "frontmind_user"  # in the request's state: the user it acts as
_ADMIN_KEY = "frontmind_admin"  # and whether it holds the admin's rights
_TURN_KEY = "frontmind_turn_id"  # the turn a request started, for the access log


class UserAuth:
    """Pure ASGI middleware (streaming-safe): settles which user a request acts as.

    Every route but /healthz: the admin token acts as `default` (with the right to add
    users), a user's token as that user; no token acts as `default` only when no admin
    token is configured; anything else is 401.
    """

    def __init__(self, app: ASGIApp, fm: Frontmind, token: str | None) -> None:
        self.app = app
        self.fm = fm
        self.admin = token.encode() if token else None

    async def _resolve(self, scope: Scope) -> tuple[str, bool] | None:
        given = bearer_token(scope["headers"])
        if given is None:
            return None if self.admin else (DEFAULT_USER, True)
        if self.admin is not None and hmac.compare_digest(given, self.admin):
            return DEFAULT_USER, True
        try:
            user = await self.fm.user_for_token(given.decode("ascii")) if given else None
        except UnicodeDecodeError:
            user = None
        return None if user is None else (user, False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The health check, the API description and the console's files (none of which
        # holds data) are public.
        path = scope["path"] if scope["type"] == "http" else ""
        if path and path not in PUBLIC_PATHS and not is_console_path(path):
            try:
                resolved = await self._resolve(scope)
            except StorageError as exc:
                log.error("token lookup failed", exc_info=exc)
                await _error(503, "storage_unavailable", str(exc))(scope, receive, send)
                return
            if resolved is None:
                response = _error(401, "unauthorized", "missing or wrong bearer token")
                await response(scope, receive, send)
                return
            user, admin = resolved
            # In the request's own state dict, which the access log reads afterwards.
            scope.setdefault("state", {}).update({_USER_KEY: user, _ADMIN_KEY: admin})
        await self.app(scope, receive, send)


class TurnStreams:
    """The turn streams being served, so that shutdown can wait for them and, after the
    grace period, end each one cleanly: the turn is cancelled (its record says so) and
    the stream's last event is an error, not a cut connection."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self._active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.cancelled = False

    @contextlib.contextmanager
    def serving(self) -> Generator[None, None, None]:
        self._active += 1
        self._idle = anyio.Event() if self._active == 1 else self._idle
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    @contextlib.contextmanager
    def waiting(self) -> Generator[anyio.CancelScope, None, None]:
        """A scope around waiting for the next event; cancelled by `cancel_all`."""
        with anyio.CancelScope() as scope:
            if self.cancelled:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)

    def cancel_all(self) -> None:
        self.cancelled = True
        for scope in list(self._scopes):
            scope.cancel()

    async def wait_idle(self) -> None:
        await self._idle.wait()


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

        state = scope.setdefault("state", {})  # filled by the layers inside
        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.response(status)
            if self.access:
                duration_ms = round((time.perf_counter() - started) * 1000, 1)
                user = state.get(_USER_KEY)
                access_log.info(
                    "%s %s %d %.1fms user=%s",
                    scope["method"],
                    scope["path"],
                    status,
                    duration_ms,
                    user or "-",
                    # Fields of their own in the JSON log (frontmind/cli/_logs.py).
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "duration_ms": duration_ms,
                        "user": user,
                        "turn_id": state.get(_TURN_KEY),
                    },
                )


class TurnEvents(Response):
    """A turn as server-sent events: an `id:` on every event, and a `: ping` comment
    whenever nothing was sent for `ping_seconds`, so an idle proxy keeps the stream.

    The turn's events are pumped by a child task into a channel; waiting on the channel
    (never on the turn itself) can time out for a ping without disturbing the turn. A
    client that disconnects cancels the pump, which cancels the turn cleanly. Shutdown
    after the grace period (`TurnStreams.cancel_all`) ends the stream with a final
    `shutting_down` error event, and the turn is cancelled with a record saying so.
    """

    media_type = "text/event-stream"

    def __init__(
        self, stream: TurnStream, metrics: Metrics, ping_seconds: float, served: TurnStreams
    ) -> None:
        super().__init__(
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            media_type=self.media_type,
        )
        # A stream has no length: drop the content-length Response set for an empty body.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.stream = stream
        self.metrics = metrics
        self.ping_seconds = ping_seconds
        self.served = served
        self.turn_id: str | None = None
        self.state: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = relayed = False
        self.state = scope.setdefault("state", {})
        with self.served.serving():
            try:
                async with self.stream, anyio.create_task_group() as tg:
                    tg.start_soon(self._watch_disconnect, receive, tg.cancel_scope)
                    events, received = anyio.create_memory_object_stream[TurnEvent](1)
                    tg.start_soon(self._pump, events)
                    await send(
                        {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                    )
                    finished = await self._relay(received, send)
                    relayed = True
                    tg.cancel_scope.cancel()
                # The turn is closed (cancelled and recorded, if it had not ended) before
                # the stream ends.
                if relayed:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                if not finished:
                    self.metrics.cancelled()

    async def _relay(self, received: MemoryObjectReceiveStream[TurnEvent], send: Send) -> bool:
        """Send every event with its id; True once the turn ended with a final event."""
        count, finished = 0, False
        async with received:
            while True:
                with self.served.waiting() as shutdown:
                    with anyio.move_on_after(self.ping_seconds) as waited:
                        try:
                            event = await received.receive()
                        except anyio.EndOfStream:
                            return finished
                if shutdown.cancelled_caught:
                    self.metrics.error("shutting_down")
                    event = TurnError(
                        "shutting_down",
                        "the service shut down before this turn finished; "
                        "it was cancelled and nothing of it was stored",
                        self.turn_id,
                    )
                    count += 1
                    await send(self._body(event, count))
                    return True
                if waited.cancelled_caught:
                    await send({"type": "http.response.body", "body": PING, "more_body": True})
                    continue
                if isinstance(event, TurnCompleted):
                    self.metrics.completed(event)
                    finished = True
                elif isinstance(event, TurnError):
                    self.metrics.error(event.type)
                    finished = True
                count += 1
                await send(self._body(event, count))

    def _body(self, event: TurnEvent, count: int) -> Message:
        event_id = f"{self.turn_id}:{count}" if self.turn_id else str(count)
        return {
            "type": "http.response.body",
            "body": _sse_frame(event, event_id),
            "more_body": True,
        }

    async def _pump(self, events: MemoryObjectSendStream[TurnEvent]) -> None:
        async with events:
            try:
                async for event in self.stream:
                    if isinstance(event, TurnStarted):
                        self.turn_id = self.state[_TURN_KEY] = event.turn_id
                    await events.send(event)
            except KernelError as exc:
                # A bug in the turn's actor (it is restarted): end with an error event
                # rather than a broken stream.
                log.error("turn failed inside the runtime", exc_info=exc)
                await events.send(TurnError("internal_error", str(exc), self.turn_id))

    @staticmethod
    async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()


def build_app(
    fm: Frontmind,
    *,
    token: str | None = None,
    streams: TurnStreams | None = None,
    metrics: Metrics | None = None,
    ping_seconds: float = PING_SECONDS,
    access_log: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_idle_seconds: float = 30.0,
) -> ASGIApp:
    stats = metrics or Metrics()
    stats.watch_warm_ups(fm.warm_ups)
    served = streams or TurnStreams()

    def continuum(request: Request) -> str:
        return check_continuum_id(request.path_params["continuum_id"])

    def scoped(request: Request) -> Frontmind:
        """The library scoped to the request's user: every route reads and writes
        through this, so no route can see another user's data."""
        user: str = request.scope["state"][_USER_KEY]  # set by UserAuth on every route
        return fm.user(user)

    async def users(request: Request) -> Response:
        if not request.scope["state"][_ADMIN_KEY]:
            raise Forbidden("only the admin token may list or add users")
        if request.method == "POST":
            body = decode_body(await request.body(), UserBody)
            token = await fm.add_user(body.name)
            return _json(UserCreated(body.name, token), 201)
        return _json(UserList(await fm.users()))

    async def run_turn(request: Request) -> Response:
        cid = continuum(request)
        body = decode_body(await request.body(), TurnBody)
        stream = scoped(request).turn(cid, body.user_input())
        # Bad input (400/413) and Busy (429) are answered now, before any byte of the stream.
        await stream.__aenter__()
        return TurnEvents(stream, stats, ping_seconds, served)

    async def list_continuums(request: Request) -> Response:
        mine = scoped(request)
        limit, after = _page(request, tuple[float, str])
        found = await mine.continuums(limit=limit + 1, after=after)
        shown = found[:limit]
        ids = [c.id for c in shown]
        usage = await fm.storage.usage_by_continuum(mine.user_name, ids)
        by_model = await fm.storage.usage_by_model(mine.user_name, ids)
        summaries = []
        for c in shown:
            turns, used = usage.get(c.id, (0, TurnUsage()))
            total = used.total_input
            share = used.cache_read_input_tokens / total if total else 0.0
            spent = NO_COST
            for model, part in by_model.get(c.id, {}).items():
                spent += cost(part, fm.models.lookup(model))
            summaries.append(summarize(c, turns, spent, share, used.output_tokens))
        more = len(found) > limit
        last = summaries[-1] if summaries else None
        cursor = encode_cursor([last.last_activity_at, last.id]) if more and last else None
        return _json(ContinuumPage(cursor, summaries))

    async def delete_continuum(request: Request) -> Response:
        await scoped(request).delete_continuum(continuum(request))
        return Response(status_code=204)

    async def messages(request: Request) -> Response:
        limit, after = _page(request, int)
        start = -1 if after is None else after
        found = await scoped(request).history(continuum(request), limit=limit + 1, after=start)
        cursor = encode_cursor(found[limit - 1].seq) if len(found) > limit else None
        return _json(MessagePage(cursor, found[:limit]))

    async def context(request: Request) -> Response:
        text = request.query_params.get("message", "")
        if not text.strip():
            raise InvalidInput("the query parameter 'message' is required")
        return Response(
            _encoder.encode(await scoped(request).context(continuum(request), text)),
            media_type="application/json",
        )

    async def settings(request: Request) -> Response:
        cid = continuum(request)
        if request.method == "PUT":
            body = decode_body(await request.body(), ModelSettingsBody)
            own, choice = await scoped(request).set_model_settings(
                cid,
                model=body.model,
                thinking=body.thinking,
                budget_tokens=body.budget_tokens,
                max_tokens=body.max_tokens,
                effort=body.effort,
            )
        else:
            own, choice = await scoped(request).model_settings(cid)
        return _json(ModelSettingsReply(own, choice))

    async def turns(request: Request) -> Response:
        limit, before = _page(request, tuple[float, str])
        found = await scoped(request).turns(continuum(request), limit=limit + 1, before=before)
        # Pages run from the latest turns back; each page is in time order.
        more = len(found) > limit
        found = found[1:] if more else found
        cursor = encode_cursor([found[0].started_at, found[0].turn_id]) if more else None
        catalog = fm.models
        return _json(
            TurnPage(cursor, [priced(r, cost(r.usage, catalog.lookup(r.model))) for r in found])
        )

    async def reminders(request: Request) -> Response:
        mine = scoped(request)
        if request.method == "POST":
            body = decode_body(await request.body(), ReminderBody)
            return _json(await mine.add_reminder(body.text, body.due_at), 201)
        limit, after = _page(request, int)
        include = request.query_params.get("include_completed") in ("1", "true")
        found = await mine.reminders(include, limit=limit + 1, after=after or 0)
        cursor = encode_cursor(found[limit - 1].id) if len(found) > limit else None
        return _json(ReminderPage(cursor, found[:limit]))

    async def complete(request: Request) -> Response:
        return _json(
            await scoped(request).complete_reminder(parse_id(request.path_params["reminder_id"]))
        )

    async def delete_reminder(request: Request) -> Response:
        await scoped(request).delete_reminder(parse_id(request.path_params["reminder_id"]))
        return Response(status_code=204)

    async def memories(request: Request) -> Response:
        mine = scoped(request)
        if request.method == "POST":
            body = decode_body(await request.body(), MemoryBody)
            return _json(await mine.remember(body.text, body.importance, body.expires_at), 201)
        query = request.query_params.get("q")
        if query is not None:
            # Search results are ranked, not listed: one page of the best `limit`.
            limit = _limit(request)
            return _json(MemoryHitPage(None, await mine.search_memories(query, limit=limit)))
        limit, before = _page(request, int)
        found = await mine.memories(limit + 1, before=before)
        cursor = encode_cursor(found[limit - 1].id) if len(found) > limit else None
        return _json(MemoryPage(cursor, found[:limit]))

    async def delete_memory(request: Request) -> Response:
        await scoped(request).delete_memory(parse_id(request.path_params["memory_id"], "memory id"))
        return Response(status_code=204)

    async def documents(request: Request) -> Response:
        mine = scoped(request)
        if request.method == "POST":
            body = decode_body(await request.body(), DocumentBody)
            return _json(await mine.put_document(body.label, body.content), 201)
        limit, after = _page(request, str)
        found = await mine.documents(limit=limit + 1, after=after or "")
        cursor = encode_cursor(found[limit - 1].label) if len(found) > limit else None
        return _json(DocumentPage(cursor, found[:limit]))

    async def delete_document(request: Request) -> Response:
        await scoped(request).delete_document(request.path_params["label"])
        return Response(status_code=204)

    async def jobs(request: Request) -> Response:
        cid = request.query_params.get("continuum_id")
        return _json(
            JobList(await scoped(request).jobs(None if cid is None else check_continuum_id(cid)))
        )

    async def healthz(request: Request) -> Response:
        return _json(Health("ok"))

    async def metrics_route(request: Request) -> Response:
        if not request.scope["state"][_ADMIN_KEY]:
            raise Forbidden("the metrics count every user's turns: only the admin token sees them")
        return Response(stats.render(), media_type=CONTENT_TYPE)

    async def openapi(request: Request) -> Response:
        return Response(openapi_json(), media_type="application/json")

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_PAGE)

    async def known_error(request: Request, exc: Exception) -> Response:
        status, kind = wire_error(exc) or (500, "internal_error")
        if status >= 500:
            log.error("%s on %s", kind, request.url.path, exc_info=exc)
        # RFC 9110 §10.2.3: Retry-After tells a client when a 429/503 is worth retrying.
        headers = {"retry-after": "1"} if status in (429, 503) else None
        return _error(status, kind, str(exc) or kind, headers)

    async def unexpected(request: Request, exc: Exception) -> Response:
        # A bug: Starlette re-raises after this answer, and the guard logs it once.
        return _error(500, "internal_error", "internal error (logged by the daemon)")

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
        Route("/v1/users", users, methods=["GET", "POST"]),
        Route("/v1/jobs", jobs, methods=["GET"]),
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
            Exception: unexpected,
        },
    )
    app = UserAuth(app, fm, token)
    guarded = EdgeGuard(
        app,
        allowed_hosts=allowed_hosts,
        max_body_bytes=max_body_bytes,
        body_idle_seconds=body_idle_seconds,
    )
    # Outermost: the guard's refusals (403/413/415...) are counted and logged too.
    return Observed(guarded, stats, access=access_log)


_ID = re.compile(r"[0-9]{1,19}")
SQLITE_MAX_INT = 2**63 - 1


def parse_id(raw: str, what: str = "id") -> int:
    """An id as ASCII digits within SQLite's integer range: `int()` alone would take
    `+1`, `١`, `１` and `1_000`, and a 20-digit id would overflow the binding."""
    if not _ID.fullmatch(raw) or int(raw) > SQLITE_MAX_INT:
        raise InvalidInput(f"{what} must be ASCII digits from 0 to {SQLITE_MAX_INT}, not {raw!r}")
    return int(raw)


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "100")
    if not re.fullmatch(r"[0-9]{1,5}", raw) or not 1 <= int(raw) <= MAX_LIMIT:
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
    token_file: Path | None = None,
    access_log: bool = False,
    database: str | None = None,
    otel: bool = False,
) -> None:
    """Run the daemon until SIGTERM or SIGINT, then shut down gracefully."""
    config = load_config(config_file, data_dir)
    stop_tracing = setup_tracing(otel)  # --otel, or the standard OTEL_* variables
    try:
        await _serve(
            config,
            data_dir=data_dir,
            host=host,
            port=port,
            offline=offline,
            token=token,
            announce=announce,
            token_file=token_file,
            access_log=access_log,
            database=database,
        )
    finally:
        if stop_tracing is not None:
            stop_tracing()  # the spans still batched are exported before the exit


async def _serve(
    config: Config,
    *,
    data_dir: Path,
    host: str | None,
    port: int | None,
    offline: bool,
    token: str | None,
    announce: Callable[[str], None],
    token_file: Path | None,
    access_log: bool,
    database: str | None,
) -> None:
    if database is not None:  # --database wins over FRONTMIND_DATABASE_URL and the file
        config = msgspec.structs.replace(
            config, storage=msgspec.structs.replace(config.storage, url=database)
        )
    if config.runtime.gc is None:  # the daemon owns its process: no full GC in a turn
        config = msgspec.structs.replace(config, runtime=RuntimeConfig(gc="idle"))
    host = host or config.server.host
    port = config.server.port if port is None else port
    token = resolve_token(config, token, token_file)
    limits = socket_limits(config)
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"binding to {host}, which is not a loopback address, requires a token: "
            "pass --token or set FRONTMIND_TOKEN"
        )
    grace = config.server.grace_seconds
    async with Frontmind.open(data_dir, config, offline=offline) as fm:
        streams = TurnStreams()
        app = build_app(
            fm,
            token=token,
            streams=streams,
            access_log=access_log,
            allowed_hosts=config.server.allowed_hosts,
            max_body_bytes=config.server.max_body_bytes,
            body_idle_seconds=config.server.body_timeout_s,
        )
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with serve_app(
                app,
                host,
                port,
                # Ours ends the turns at `grace`; uvicorn only has to flush what is left.
                graceful_seconds=grace + 5,
                force_exit_on_close=False,
                log_level="warning",
                limits=limits,
            ) as served:
                if config.runtime.gc == "idle":
                    freeze_startup_objects()  # the app too, now that it is built
                announce(served.url)
                async for signum in signals:
                    log.warning(
                        "received %s: shutting down within %d s (again to exit now)",
                        signal.Signals(signum).name,
                        grace,
                    )
                    break
                served.request_shutdown()  # stop accepting; requests in flight go on
                fm.drain()  # queued turns: an error event and a record each
                async with anyio.create_task_group() as tg:

                    async def second_signal() -> None:
                        async for signum in signals:
                            log.warning(
                                "received %s again: cancelling turns and exiting now",
                                signal.Signals(signum).name,
                            )
                            streams.cancel_all()
                            with anyio.move_on_after(2):
                                await streams.wait_idle()
                            served.request_shutdown(force=True)
                            tg.cancel_scope.cancel()

                    tg.start_soon(second_signal)
                    with anyio.move_on_after(grace):
                        await streams.wait_idle()
                    streams.cancel_all()  # after the grace: cancelled, with a final event
                    with anyio.move_on_after(5):
                        await streams.wait_idle()
                    tg.cancel_scope.cancel()


def resolve_token(config: Config, given: str | None, token_file: Path | None) -> str | None:
    """--token, else --token-file, else FRONTMIND_TOKEN / server.token, else
    server.token_file: a file keeps the secret out of `ps` and shell history."""
    if given:
        return given
    if token_file is None and config.server.token:
        return config.server.token
    path = token_file or (Path(config.server.token_file) if config.server.token_file else None)
    if path is None:
        return None
    try:
        token = path.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"the token file {path} must hold one token (no spaces)")
    return token


def socket_limits(config: Config) -> SocketLimits:
    server = config.server
    for key in (
        "max_body_bytes",
        "max_connections",
        "header_timeout_s",
        "body_timeout_s",
        "keep_alive_s",
    ):
        if getattr(server, key) <= 0:
            raise ConfigError(f"server.{key} must be positive")
    for entry in server.allowed_hosts:
        try:
            EdgeGuard(_no_app, allowed_hosts=(entry,))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return SocketLimits(
        max_connections=server.max_connections,
        header_timeout=server.header_timeout_s,
        keep_alive_timeout=server.keep_alive_s,
    )


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:
    raise NotImplementedError
