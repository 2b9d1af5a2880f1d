"""The daemon's API: one named handler per operation and the one table of them.

`ENDPOINTS` is read by both the router (`build_app` serves each row's handler at its
method and path, behind its auth level) and the OpenAPI description (`describe`), so a
route cannot be served undescribed, or described with a different body, reply or auth.
A handler finds the daemon it serves (the `Frontmind`, the metrics, the turn streams)
in the app's state, and the user a request acts as in the request's state (`UserAuth`).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import compile_path
from starlette.types import Scope

from actors import NO_COST, Busy, ModelRequest, ShuttingDown, ToolsReload, TurnEvent, cost
from storage import (
    MAX_ROW_ID,
    Document,
    FrontmindError,
    InvalidInput,
    Memory,
    Reminder,
    StorageUnavailable,
    TurnUsage,
    UserForgotten,
    check_continuum_id,
    check_user_name,
    excerpt,
)

from .._exceptions import (
    INTERNAL_MESSAGE,
    Forbidden,
    wire_error,
    wire_ids,
    wire_message,
    wire_retry_after,
    wire_retry_seconds,
)
from .._frontmind import Frontmind
from .._wire import (
    BackupBody,
    BackupDone,
    ContinuumPage,
    CursorId,
    CursorLabel,
    CursorTime,
    DocumentBody,
    DocumentPage,
    EmptyBody,
    ErrorBody,
    ErrorDetail,
    Health,
    JobPage,
    McpServers,
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
from ._console import is_console_path
from ._guard import loggable_path
from ._metrics import CONTENT_TYPE, Metrics
from ._openapi import DOCS_PAGE, Endpoint, Param, openapi
from ._sse import TurnEvents, TurnStreams

__all__ = [
    "ADMIN_KEY",
    "ENDPOINTS",
    "PATH_KEY",
    "USER_KEY",
    "Daemon",
    "describe",
    "error_response",
    "json_response",
    "known_error",
    "not_allowed",
    "not_found",
    "parse_id",
    "route_path",
    "unexpected",
]

K = TypeVar("K")
T = TypeVar("T")

log = logging.getLogger("frontmind.daemon")
_encoder = msgspec.json.Encoder()
MAX_LIMIT = 10_000
BACKUP_SUFFIXES = (".db", ".sqlite", ".sqlite3")  # what the backup route writes
USER_KEY = "frontmind_user"  # in the request's state: the user it acts as
ADMIN_KEY = "frontmind_admin"  # and whether it holds the admin's rights
PATH_KEY = "frontmind_path"  # and its path inside the app (`route_path`)


@dataclass(frozen=True, slots=True)
class Daemon:
    """What the handlers serve, kept in the app's state (`request.app.state.daemon`)."""

    fm: Frontmind
    metrics: Metrics
    streams: TurnStreams
    ping_seconds: float


def _daemon(request: Request) -> Daemon:
    daemon: Daemon = request.app.state.daemon
    return daemon


def _scoped(request: Request) -> Frontmind:
    """The library scoped to the request's user: every route reads and writes through
    this, so no route can see another user's data."""
    user: str = request.scope["state"][USER_KEY]  # set by UserAuth on every route
    return _daemon(request).fm.user(user)


def _continuum(request: Request) -> str:
    return check_continuum_id(request.path_params["continuum_id"])


def json_response(value: Any, status: int = 200) -> Response:
    return Response(
        _encoder.encode(to_wire(value)), status_code=status, media_type="application/json"
    )


def error_response(
    status: int,
    kind: str,
    message: str,
    headers: dict[str, str] | None = None,
    ids: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> Response:
    """An error answer; `ids`: the error's own (`wire_ids`), beside its type, and
    `retry_after` its exact wait (`wire_retry_seconds`)."""
    detail = ErrorDetail(kind, message, **(ids or {}), retry_after=retry_after)
    response = json_response(ErrorBody(detail), status)
    response.headers.update(headers or {})
    return response


# --- continuums and turns ---------------------------------------------------------------


async def list_continuums(request: Request) -> Response:
    mine = _scoped(request)
    limit, after = _page(request, CursorTime)
    found = await mine.continuums(limit=limit + 1, after=None if after is None else after.key())
    shown = found[:limit]
    ids = [c.id for c in shown]
    usage = await mine.storage.usage_by_continuum(mine.user_name, ids)
    by_model = await mine.storage.usage_by_model(mine.user_name, ids)
    summaries = []
    for c in shown:
        turns, used = usage.get(c.id, (0, TurnUsage()))
        total = used.total_input
        share = used.cache_read_input_tokens / total if total else 0.0
        spent = NO_COST
        for model, part in by_model.get(c.id, {}).items():
            spent += cost(part, mine.models.lookup(model))
        summaries.append(summarize(c, turns, spent, share, used.output_tokens))
    more = len(found) > limit
    last = summaries[-1] if summaries else None
    cursor = encode_cursor([last.last_activity_at, last.id]) if more and last else None
    return json_response(ContinuumPage(cursor, summaries))


async def delete_continuum(request: Request) -> Response:
    await _scoped(request).delete_continuum(_continuum(request))
    return Response(status_code=204)


async def create_turn(request: Request) -> Response:
    cid = _continuum(request)
    body = decode_body(await request.body(), TurnBody)
    daemon = _daemon(request)
    stream = _scoped(request).turn(cid, body.user_input())
    # Bad input (400/413) and Busy (429) are answered now, before any byte of the stream;
    # from here the SSE response owns the stream and closes it, however it ends.
    await stream.start()
    return TurnEvents(stream, daemon.metrics, daemon.ping_seconds, daemon.streams)


async def list_turns(request: Request) -> Response:
    limit, before = _page(request, CursorTime)
    scope = _scoped(request)
    key = None if before is None else before.key()
    found = await scope.turns(_continuum(request), limit=limit + 1, before=key)
    # Pages run from the latest turns back; each page is in time order.
    more = len(found) > limit
    found = found[1:] if more else found
    cursor = encode_cursor([found[0].started_at, found[0].turn_id]) if more else None
    catalog = _daemon(request).fm.models
    priced_records = [priced(r, cost(r.usage, catalog.lookup(r.model))) for r in found]
    return json_response(TurnPage(cursor, priced_records))


async def list_messages(request: Request) -> Response:
    limit, after = _page(request, CursorId)
    start = -1 if after is None else after
    found = await _scoped(request).history(_continuum(request), limit=limit + 1, after=start)
    return json_response(MessagePage(*_one_page(found, limit, lambda m: m.seq)))


async def get_context(request: Request) -> Response:
    text = request.query_params.get("message", "")
    if not text.strip():
        raise InvalidInput("the query parameter 'message' is required")
    return Response(
        _encoder.encode(await _scoped(request).context(_continuum(request), text)),
        media_type="application/json",
    )


async def get_settings(request: Request) -> Response:
    own, choice = await _scoped(request).model_settings(_continuum(request))
    return json_response(ModelSettingsReply(own, choice))


async def put_settings(request: Request) -> Response:
    cid = _continuum(request)
    body = decode_body(await request.body(), ModelSettingsBody)
    own, choice = await _scoped(request).set_model_settings(
        cid,
        model=body.model,
        thinking=body.thinking,
        budget_tokens=body.budget_tokens,
        max_tokens=body.max_tokens,
        effort=body.effort,
        thinking_display=body.thinking_display,
    )
    return json_response(ModelSettingsReply(own, choice))


# --- reminders, memories, documents -----------------------------------------------------


async def list_reminders(request: Request) -> Response:
    limit, after = _page(request, CursorId)
    include = _flag(request, "include_completed")
    found = await _scoped(request).reminders(include, limit=limit + 1, after=after or 0)
    return json_response(ReminderPage(*_one_page(found, limit, lambda r: r.id)))


async def create_reminder(request: Request) -> Response:
    body = decode_body(await request.body(), ReminderBody)
    return json_response(await _scoped(request).add_reminder(body.text, body.due_at), 201)


async def _no_input(request: Request) -> None:
    """A POST that takes `{}`: any other body (unknown fields, an array) is refused, as
    every body is; none at all is taken too."""
    body = await request.body()
    if body:
        decode_body(body, EmptyBody)


async def complete_reminder(request: Request) -> Response:
    reminder_id = parse_id(request.path_params["reminder_id"])
    await _no_input(request)
    return json_response(await _scoped(request).complete_reminder(reminder_id))


async def delete_reminder(request: Request) -> Response:
    await _scoped(request).delete_reminder(parse_id(request.path_params["reminder_id"]))
    return Response(status_code=204)


async def list_memories(request: Request) -> Response:
    mine = _scoped(request)
    query = request.query_params.get("q")
    if query is not None:
        # Search results are ranked, not listed: one page of the best `limit`.
        if "cursor" in request.query_params:
            raise InvalidInput("cursor: a search (`q`) answers one ranked page; send no cursor")
        hits = await mine.search_memories(query, limit=_limit(request))
        return json_response(MemoryHitPage(None, hits))
    limit, before = _page(request, CursorId)
    found = await mine.memories(limit + 1, before=before)
    return json_response(MemoryPage(*_one_page(found, limit, lambda m: m.id)))


async def create_memory(request: Request) -> Response:
    body = decode_body(await request.body(), MemoryBody)
    memory = await _scoped(request).remember(body.text, body.importance, body.expires_at)
    return json_response(memory, 201)


async def delete_memory(request: Request) -> Response:
    memory_id = parse_id(request.path_params["memory_id"], "memory id")
    await _scoped(request).delete_memory(memory_id)
    return Response(status_code=204)


async def list_documents(request: Request) -> Response:
    limit, after = _page(request, CursorLabel)
    found = await _scoped(request).documents(limit=limit + 1, after=after or "")
    return json_response(DocumentPage(*_one_page(found, limit, lambda d: d.label)))


async def put_document(request: Request) -> Response:
    body = decode_body(await request.body(), DocumentBody)
    return json_response(await _scoped(request).put_document(body.label, body.content), 201)


async def delete_document(request: Request) -> Response:
    await _scoped(request).delete_document(request.path_params["label"])
    return Response(status_code=204)


# --- users and the service itself -------------------------------------------------------


async def create_user(request: Request) -> Response:
    body = decode_body(await request.body(), UserBody)
    token = await _daemon(request).fm.add_user(body.name)
    return json_response(UserCreated(body.name, token), 201)


async def list_users(request: Request) -> Response:
    return json_response(UserList(await _daemon(request).fm.users()))


async def list_mcp_servers(request: Request) -> Response:
    fm = _daemon(request).fm
    return json_response(McpServers(fm.mcp_servers(), fm.offered_tools()))


async def reload_mcp_tools(request: Request) -> Response:
    await _no_input(request)
    return json_response(await _daemon(request).fm.reload_tools())


def _user_named(request: Request) -> str:
    name: str = request.path_params["name"]
    check_user_name(name)
    return name


async def delete_user(request: Request) -> Response:
    return json_response(await _daemon(request).fm.delete_user(_user_named(request)))


async def rotate_token(request: Request) -> Response:
    name = _user_named(request)
    await _no_input(request)
    return json_response(UserCreated(name, await _daemon(request).fm.rotate_token(name)))


async def backup_store(request: Request) -> Response:
    body = decode_body(await request.body(), BackupBody)
    if not body.path or not Path(body.path).is_absolute():
        raise InvalidInput(
            f"path {excerpt(body.path)!r}: give an absolute path on the daemon's machine"
        )
    if not body.path.lower().endswith(BACKUP_SUFFIXES):
        # A backup holds every user's text byte for byte, a line of it on a line of its
        # own: as ~/.ssh/authorized_keys, a .pth or a .bashrc, a program would take it
        # as its own (a key sshd accepts: the token a shell on the machine).
        raise InvalidInput(
            f"path {excerpt(body.path)!r}: name the backup file .db, .sqlite or .sqlite3"
        )
    return json_response(BackupDone(body.path, await _daemon(request).fm.backup(body.path)))


async def list_jobs(request: Request) -> Response:
    cid = request.query_params.get("continuum_id")
    continuum = None if cid is None else check_continuum_id(cid)
    limit, after = _page(request, CursorId)
    found = await _scoped(request).jobs(continuum, limit=limit + 1, after=after or 0)
    return json_response(JobPage(*_one_page(found, limit, lambda j: j.id)))


async def get_health(request: Request) -> Response:
    return json_response(Health("ok"))


async def get_ready(request: Request) -> Response:
    fm = _daemon(request).fm
    if fm.draining:  # a balancer keeping its connection open must stop sending turns
        raise ShuttingDown("the daemon is shutting down: it takes no new turns")
    # The store's error, when it cannot answer, goes out through the one error table.
    await fm.check_storage()
    return json_response(Health("ready"))


async def get_metrics(request: Request) -> Response:
    return Response(_daemon(request).metrics.render(), media_type=CONTENT_TYPE)


async def get_openapi(request: Request) -> Response:
    return Response(_openapi_json(), media_type="application/json")


async def get_docs(request: Request) -> Response:
    return HTMLResponse(DOCS_PAGE)


# --- the table --------------------------------------------------------------------------

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 1}
_LABEL = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}
USER = Param("name", "path", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"})
CONTINUUM = Param("continuum_id", "path", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"})
PAGE = (
    Param(
        "limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100}
    ),
    Param("cursor", "query", _STR, "the `next_cursor` of the previous page"),
)

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "GET",
        "/v1/continuums",
        list_continuums,
        "listContinuums",
        "continuums",
        "List continuums, the most recently active first.",
        reply=ContinuumPage,
        params=PAGE,
    ),
    Endpoint(
        "DELETE",
        "/v1/continuums/{continuum_id}",
        delete_continuum,
        "deleteContinuum",
        "continuums",
        "Delete a continuum with its turns, messages and search index entries.",
        ok=204,
        params=(CONTINUUM,),
        errors=(400, 404, 429),
    ),
    Endpoint(
        "POST",
        "/v1/continuums/{continuum_id}/turns",
        create_turn,
        "createTurn",
        "turns",
        "Run a turn; its events stream as server-sent events (each with an `id:`; a"
        " `: ping` comment every 15 s while nothing else is sent). The turn waits for one"
        " of the process's turn slots (`[turns] max_active`, a fair queue by user and"
        " continuum) before its first event; when that wait would pass `[turns]"
        " max_wait_s` it is refused (503 `overloaded`, with `Retry-After`) before"
        " anything is stored.",
        reply=TurnEvent,
        body=TurnBody,
        params=(CONTINUUM,),
        errors=(400, 413, 429, 503),
        media="text/event-stream",
    ),
    Endpoint(
        "GET",
        "/v1/continuums/{continuum_id}/turns",
        list_turns,
        "listTurns",
        "turns",
        "The continuum's turn records: the latest first page, each page in time order;"
        " `next_cursor` leads to earlier turns. A turn still running reads `running`;"
        " one whose process ended before it finished reads `failed` with the error"
        ' "interrupted: …" (once the store is opened again, or the continuum\'s next turn'
        " starts).",
        reply=TurnPage,
        params=(CONTINUUM, *PAGE),
        errors=(400, 404),
    ),
    Endpoint(
        "GET",
        "/v1/continuums/{continuum_id}/messages",
        list_messages,
        "listMessages",
        "continuums",
        "The continuum's messages, in order.",
        reply=MessagePage,
        params=(CONTINUUM, *PAGE),
        errors=(400, 404),
    ),
    Endpoint(
        "GET",
        "/v1/continuums/{continuum_id}/context",
        get_context,
        "getContext",
        "turns",
        "The Messages API request a turn with `message` would send now (nothing is sent).",
        reply=ModelRequest,
        params=(CONTINUUM, Param("message", "query", _STR, "the would-be user message")),
        # It asks the continuum's actors (429 when they are busy or given up on for now)
        # to compose (504 when the composer does not answer).
        errors=(400, 429, 504),
    ),
    Endpoint(
        "GET",
        "/v1/continuums/{continuum_id}/settings",
        get_settings,
        "getModelSettings",
        "continuums",
        "The continuum's own model settings, and those its turns run with.",
        reply=ModelSettingsReply,
        params=(CONTINUUM,),
    ),
    Endpoint(
        "PUT",
        "/v1/continuums/{continuum_id}/settings",
        put_settings,
        "setModelSettings",
        "continuums",
        "Choose the continuum's model settings (null: the config's).",
        reply=ModelSettingsReply,
        body=ModelSettingsBody,
        params=(CONTINUUM,),
    ),
    Endpoint(
        "GET",
        "/v1/reminders",
        list_reminders,
        "listReminders",
        "reminders",
        "List reminders (open ones unless include_completed).",
        reply=ReminderPage,
        params=(*PAGE, Param("include_completed", "query", {"type": "boolean"})),
    ),
    Endpoint(
        "POST",
        "/v1/reminders",
        create_reminder,
        "createReminder",
        "reminders",
        "Add a reminder.",
        ok=201,
        reply=Reminder,
        body=ReminderBody,
    ),
    Endpoint(
        "DELETE",
        "/v1/reminders/{reminder_id}",
        delete_reminder,
        "deleteReminder",
        "reminders",
        "Delete a reminder.",
        ok=204,
        params=(Param("reminder_id", "path", _INT),),
        errors=(400, 404),
    ),
    Endpoint(
        "POST",
        "/v1/reminders/{reminder_id}/complete",
        complete_reminder,
        "completeReminder",
        "reminders",
        "Mark a reminder done.",
        reply=Reminder,
        body=EmptyBody,
        params=(Param("reminder_id", "path", _INT),),
        errors=(400, 404),
    ),
    Endpoint(
        "GET",
        "/v1/memories",
        list_memories,
        "listMemories",
        "memories",
        "List memories, the newest first; with `q`, one ranked page of search hits"
        " (a MemoryHitPage, whose next_cursor is always null; a `cursor` beside `q` is"
        " refused, 400).",
        reply=MemoryPage,
        alt=MemoryHitPage,
        params=(*PAGE, Param("q", "query", _STR, "search text")),
    ),
    Endpoint(
        "POST",
        "/v1/memories",
        create_memory,
        "createMemory",
        "memories",
        "Add a memory.",
        ok=201,
        reply=Memory,
        body=MemoryBody,
    ),
    Endpoint(
        "DELETE",
        "/v1/memories/{memory_id}",
        delete_memory,
        "deleteMemory",
        "memories",
        "Delete a memory and its search index entry.",
        ok=204,
        params=(Param("memory_id", "path", _INT),),
        errors=(400, 404),
    ),
    Endpoint(
        "GET",
        "/v1/documents",
        list_documents,
        "listDocuments",
        "documents",
        "List documents by label.",
        reply=DocumentPage,
        params=PAGE,
    ),
    Endpoint(
        "POST",
        "/v1/documents",
        put_document,
        "putDocument",
        "documents",
        "Create or replace a document.",
        ok=201,
        reply=Document,
        body=DocumentBody,
        errors=(400, 413),  # 413: over documents.budget_tokens with the others
    ),
    Endpoint(
        "DELETE",
        "/v1/documents/{label}",
        delete_document,
        "deleteDocument",
        "documents",
        "Delete a document.",
        ok=204,
        params=(Param("label", "path", _LABEL),),
        errors=(404,),
    ),
    Endpoint(
        "POST",
        "/v1/users",
        create_user,
        "createUser",
        "users",
        "Add a user; the answer holds its token, shown this once.",
        auth="admin",
        ok=201,
        reply=UserCreated,
        body=UserBody,
        errors=(400, 409),
    ),
    Endpoint(
        "GET",
        "/v1/users",
        list_users,
        "listUsers",
        "users",
        "List the added users (`default` is built in).",
        auth="admin",
        reply=UserList,
        errors=(),
    ),
    Endpoint(
        "DELETE",
        "/v1/users/{name}",
        delete_user,
        "deleteUser",
        "users",
        "Forget a user: their token and every row of theirs, in one transaction; the"
        " answer counts the rows deleted from each table.",
        auth="admin",
        reply=UserForgotten,
        params=(USER,),
        errors=(400, 404, 429),
    ),
    Endpoint(
        "POST",
        "/v1/users/{name}/token",
        rotate_token,
        "rotateUserToken",
        "users",
        "Give a user a new token; the old one stops working at once. The answer holds"
        " the new token, shown this once.",
        auth="admin",
        reply=UserCreated,
        body=EmptyBody,
        params=(USER,),
        errors=(400, 404),
    ),
    Endpoint(
        "POST",
        "/v1/admin/backup",
        backup_store,
        "backupStore",
        "service",
        "Back up the store to a file on the daemon's machine: a consistent snapshot"
        " taken while turns run (SQLite; PostgreSQL: use pg_dump). The file is named"
        " .db, .sqlite or .sqlite3, and replaces only an earlier backup.",
        auth="admin",
        reply=BackupDone,
        body=BackupBody,
        errors=(400,),
    ),
    Endpoint(
        "GET",
        "/v1/mcp",
        list_mcp_servers,
        "listMcpServers",
        "mcp",
        "The MCP servers: each one's state, the tools it offers and a newer tool list it"
        " announced; and the request's `tools` array by name.",
        auth="admin",
        reply=McpServers,
        errors=(),
    ),
    Endpoint(
        "POST",
        "/v1/mcp/reload",
        reload_mcp_tools,
        "reloadMcpTools",
        "mcp",
        "Apply the MCP servers' current tool lists. The answer says what changed; each"
        " continuum's next turn then writes its whole prefix once.",
        auth="admin",
        reply=ToolsReload,
        body=EmptyBody,
        errors=(),
    ),
    Endpoint(
        "GET",
        "/v1/jobs",
        list_jobs,
        "listJobs",
        "jobs",
        "The background jobs (segment summaries) of the token's user, oldest first: their"
        " state, tries, last error and the usage of their model call.",
        reply=JobPage,
        params=(*PAGE, Param("continuum_id", "query", CONTINUUM.schema, "only this continuum's")),
    ),
    Endpoint(
        "GET",
        "/healthz",
        get_health,
        "getHealth",
        "service",
        "Liveness: the process answers (whatever the state of its store).",
        auth="public",
        reply=Health,
        errors=(),
    ),
    Endpoint(
        "GET",
        "/readyz",
        get_ready,
        "getReady",
        "service",
        "Readiness: not shutting down (else 503 shutting_down), and the store answers a"
        " read within 2 s (else 503 storage_unavailable).",
        auth="public",
        reply=Health,
        errors=(503,),
    ),
    Endpoint(
        "GET",
        "/metrics",
        get_metrics,
        "getMetrics",
        "service",
        "Prometheus metrics (text exposition format); they count every user's turns.",
        auth="admin",
        reply=str,
        errors=(),
        media="text/plain",
    ),
    Endpoint(
        "GET",
        "/openapi.json",
        get_openapi,
        "getOpenAPI",
        "service",
        "This description.",
        auth="public",
        reply=dict,
        errors=(),
    ),
    Endpoint(
        "GET",
        "/docs",
        get_docs,
        "getDocs",
        "service",
        "A readable page of this description.",
        auth="public",
        reply=str,
        errors=(),
        media="text/html",
    ),
)


@functools.cache
def describe() -> dict[str, Any]:
    """The OpenAPI description of `ENDPOINTS`."""
    return openapi(ENDPOINTS)


@functools.cache
def _openapi_json() -> bytes:
    return msgspec.json.encode(describe())


def admin_only(endpoint: Endpoint) -> Any:
    """The handler behind the admin check its row asks for (built once, with the app)."""
    handler = endpoint.handler

    async def checked(request: Request) -> Response:
        if not request.scope["state"][ADMIN_KEY]:
            raise Forbidden(f"only the admin token may use {endpoint.method} {endpoint.path}")
        return await handler(request)

    return checked


# --- errors -----------------------------------------------------------------------------


async def known_error(request: Request, exc: Exception) -> Response:
    status, kind = wire_error(exc)
    if isinstance(exc, Busy | ShuttingDown):
        # The service's state, said to the client with Retry-After: under overload one
        # of these a request, and no fault to trace (the queue's metrics count them).
        log.info("%s on %s: %s", kind, loggable_path(request.url.path), exc)
    elif isinstance(exc, StorageUnavailable):
        # The database is down or unreachable: the outage's cause, in one line a
        # request (a readiness probe's every few seconds), not a bug's traceback.
        log.warning("%s on %s: %s", kind, loggable_path(request.url.path), exc)
    elif status >= 500:
        log.error("%s on %s", kind, loggable_path(request.url.path), exc_info=exc)
    return exception_response(exc)


def exception_response(exc: Exception) -> Response:
    """The one error answer of an exception: its status and type from the table, its
    message as the wire carries it, Retry-After on a 429/503."""
    status, kind = wire_error(exc)
    retry = wire_retry_after(exc, status)
    headers = None if retry is None else {"retry-after": retry}
    message = wire_message(exc, status)
    return error_response(status, kind, message, headers, wire_ids(exc), wire_retry_seconds(exc))


async def unexpected(request: Request, exc: Exception) -> Response:
    # A bug: Starlette re-raises after this answer, and the guard logs it once.
    return error_response(500, FrontmindError.type, INTERNAL_MESSAGE)


async def not_found(request: Request, exc: Exception) -> Response:
    # The path is the client's: quoted as an excerpt, never echoed whole.
    path = excerpt(request.url.path, 120)  # a real route's path fits whole
    message = f"no route {excerpt(request.method)} {path}"
    inside: str = request.scope.get("state", {}).get(PATH_KEY, "")
    bare = inside.rstrip("/")
    if bare != inside and bare and any(p.match(bare) for p, _ in _path_patterns()):
        # A stray trailing slash: the route it meant, named as the client sent it (with
        # the prefix it came under, if any). Not redirected: see `build_app`.
        meant = excerpt(request.url.path.rstrip("/"), 120)
        message += f": the API's paths end without a slash ({meant})"
    return error_response(404, "not_found", message)


def route_path(scope: Scope) -> str:
    """The request's path inside this app, as the router matches it: without the prefix
    of a server that mounts the app (`root_path`), which `path` still holds. Read as the
    request enters the app (`UserAuth` keeps it in the request's state, `PATH_KEY`):
    inside, each mount of the app's own (the console's) lengthens `root_path`."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


async def not_allowed(request: Request, exc: Exception) -> Response:
    # RFC 9110 §15.5.6: a 405 names the methods the resource takes.
    path: str = request.scope["state"][PATH_KEY]
    allowed = {method for pattern, method in _path_patterns() if pattern.match(path)}
    if not allowed and is_console_path(path):
        allowed = {"GET"}  # the console's files
    if "GET" in allowed:
        allowed.add("HEAD")  # the router answers HEAD wherever it answers GET
    headers = {"allow": ", ".join(sorted(allowed))} if allowed else None
    return error_response(
        405,
        "method_not_allowed",
        f"{excerpt(request.method)} is not allowed on {excerpt(request.url.path, 120)}",
        headers,
    )


@functools.cache
def _path_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Each operation's path as the router matches it, with its method."""
    return tuple((compile_path(e.path)[0], e.method) for e in ENDPOINTS)


# --- query parameters -------------------------------------------------------------------

_ID = re.compile(r"[0-9]{1,19}")
SQLITE_MAX_INT = MAX_ROW_ID


def parse_id(raw: str, what: str = "id") -> int:
    """An id as ASCII digits within SQLite's integer range: `int()` alone would take
    `+1`, `١`, `１` and `1_000`, and a 20-digit id would overflow the binding. Ids start
    at 1: 0 is refused here, as the store refuses it (400 for every route, not a 404 on
    one and a 400 on another)."""
    if not _ID.fullmatch(raw) or not 1 <= int(raw) <= SQLITE_MAX_INT:
        raise InvalidInput(
            f"{what} must be ASCII digits from 1 to {SQLITE_MAX_INT}, not {excerpt(raw)!r}"
        )
    return int(raw)


_FLAGS = {"true": True, "1": True, "false": False, "0": False}


def _flag(request: Request, name: str) -> bool:
    """A boolean query parameter: absent is false; `true`/`false` (any case) or `1`/`0`.
    Anything else is refused, not read as false: `include_completed=True` (what
    Python's `requests` sends for `True`) or `=yes` left the completed reminders out
    without a word."""
    raw = request.query_params.get(name)
    if raw is None:
        return False
    value = _FLAGS.get(raw.lower())
    if value is None:
        raise InvalidInput(f"{name} must be true or false, not {excerpt(raw)!r}")
    return value


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "100")
    if not re.fullmatch(r"[0-9]{1,5}", raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return int(raw)


def _one_page(found: list[T], limit: int, key: Callable[[T], Any]) -> tuple[str | None, list[T]]:
    """The page of `found` (asked for `limit + 1` rows) and the cursor of the next one:
    the key of the page's last row, when there is more."""
    more = len(found) > limit
    return (encode_cursor(key(found[limit - 1])) if more else None), found[:limit]


def _page(request: Request, key: type[K]) -> tuple[int, K | None]:
    """`?limit=&cursor=`: the page size, and the decoded sort key to continue after."""
    cursor = request.query_params.get("cursor")
    return _limit(request), None if cursor is None else decode_cursor(cursor, key)
