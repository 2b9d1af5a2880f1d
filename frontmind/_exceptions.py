"""Frontmind's errors: the whole tree, the process edge's own errors, and the one table
that maps them to the wire.

Everything Frontmind raises on purpose is a `FrontmindError`. Each error has one type
string, its class's `type` (inherited until a subclass gives its own): the library's
`TurnError` events, the daemon's SSE `error` events and its HTTP error bodies
(`{"error": {"type": ..., "message": ...}}`) all say the same. `HTTP_STATUS` below is
the daemon's status for each; `frontmind.Client` reads a type back as the class in
`FROM_WIRE`, with the attributes the library's error carries (`error_from_wire`: the
body's ids, `wire_ids`, and its exact wait, `wire_retry_seconds`). Classes that share a type
share a status (tests/test_errors.py walks the tree and checks this drawing, the types
and the statuses)::

    FrontmindError                    internal_error          500
    ├── StorageError                  storage_unavailable     503
    │   ├── InvalidInput              invalid_request         400  also a ValueError
    │   │   └── MessageTooLarge       request_too_large       413
    │   ├── NotFound                  not_found               404  also a LookupError
    │   │   └── UnknownContinuum      not_found               404
    │   ├── UserExists                conflict                409
    │   ├── ImportCollision           conflict                409
    │   ├── SchemaTooNew              storage_unavailable     503
    │   ├── MigrationMismatch         storage_unavailable     503
    │   └── StorageUnavailable        storage_unavailable     503
    ├── Busy                          busy                    429
    │   └── Overloaded                overloaded              503
    ├── ShuttingDown                  shutting_down           503
    ├── McpUnavailable                mcp_unavailable         503
    ├── ComposeTimeout                compose_timeout         504
    ├── ModelError                    model_error             502
    │   ├── ModelUnavailable          model_unavailable       503
    │   ├── ModelOverloaded           model_overloaded        503
    │   ├── ModelRejected             model_rejected          502
    │   ├── ModelRefused              refusal                 422
    │   └── ModelStreamError          stream_error            502
    │       └── ModelStreamOverloaded stream_error            502  also a ModelOverloaded
    ├── SettingsError                 configuration_error     400
    │   ├── SectionConfigError        configuration_error     400
    │   ├── TrinketLoadError          configuration_error     400
    │   ├── ToolDefinitionError       configuration_error     400
    │   └── InvalidModelSettings      invalid_request         400  also an InvalidInput
    └── EdgeError                     internal_error          500
        ├── ConfigError               configuration_error     400
        ├── BadBody                   invalid_request         400
        ├── BodyTooLarge              request_too_large       413
        ├── BudgetExceeded            budget_exceeded         413
        ├── Forbidden                 forbidden               403
        ├── UnsupportedMediaType      unsupported_media_type  415
        ├── RequestTimeout            request_timeout         408
        ├── DataDirLocked             data_dir_locked         409
        └── ClientError               client_error            502

    KernelError                       internal_error          500
    ├── ActorStopped                  internal_error          500
    ├── MailboxFull                   internal_error          500
    ├── DeadlineExceeded              internal_error          500
    ├── RestartLimitReached           internal_error          500
    ├── ActorCrashed                  internal_error          500
    ├── ActorRestart                  internal_error          500
    │   └── McpServerDown             internal_error          500
    ├── CodecError                    internal_error          500
    └── MessageFailed                 internal_error          500

Where each part lives, since imports run one way (frontmind → actors → runtime,
storage) and `runtime` and `storage` import nothing of the rest: the root and the
storage errors are storage's (`storage/_exceptions.py`, the lowest layer that raises
errors to callers), the domain's are the actors' (`actors/_exceptions.py`), and the
process edge's (config, daemon, CLI, client) are here, under `EdgeError`.
`KernelError` (`runtime/_exceptions.py`) stays beside the tree: the actor kernel is a
general library and keeps its own root. None of its errors is Frontmind's answer to a
caller: the engine turns those it expects into `Busy` (a full mailbox, a restart limit),
and any other is a bug, reported as `internal_error` with the details in the log.
`ActorRestart` is a crash an actor expects and has reported (`McpServerDown`, in
`actors/_mcp/`): restarted as any crash, logged in one line.

The HTTP edge also answers a few types that are no error of the library: `unauthorized`
(401, no or a wrong token), `not_found` (404, no such route), `method_not_allowed`
(405), `overloaded` (503, a connection refused at the socket: too many open; the same
type as `Overloaded`, too many turns waiting), `invalid_request` (400, malformed HTTP),
`uri_too_long` (414, a request line over the head's cap) and `headers_too_large` (431, a
request head over it). Every 429 and 503 says when to retry (`Retry-After`): a `Busy`
error's own `retry_after` when it has one, rounded up to whole seconds as HTTP requires,
else 1; the body's `retry_after` is the error's own wait, exact, absent when it has none.
"""

from __future__ import annotations

import math

from actors import (
    Busy,
    ComposeTimeout,
    InvalidModelSettings,
    McpUnavailable,
    ModelError,
    ModelOverloaded,
    ModelRefused,
    ModelRejected,
    ModelStreamError,
    ModelUnavailable,
    Overloaded,
    SettingsError,
    ShuttingDown,
)
from runtime import KernelError
from storage import (
    FrontmindError,
    ImportCollision,
    InvalidInput,
    MessageTooLarge,
    NotFound,
    StorageError,
    StorageUnavailable,
    UnknownContinuum,
    UserExists,
    error_type,
    excerpt,
)

__all__ = [
    "FROM_WIRE",
    "HTTP_STATUS",
    "INTERNAL_MESSAGE",
    "BadBody",
    "BodyTooLarge",
    "BudgetExceeded",
    "ClientError",
    "ConfigError",
    "DataDirLocked",
    "EdgeError",
    "Forbidden",
    "RequestTimeout",
    "UnsupportedMediaType",
    "error_from_wire",
    "wire_error",
    "wire_event_message",
    "wire_ids",
    "wire_message",
    "wire_retry_after",
    "wire_retry_seconds",
]


class EdgeError(FrontmindError):
    """Root of the errors raised by the process edge itself."""


class ConfigError(EdgeError):
    """The configuration file or environment is wrong; the message names the key."""

    type = "configuration_error"


class BadBody(EdgeError):
    """A request body is not valid JSON of the expected shape (HTTP 400)."""

    type = "invalid_request"


class BodyTooLarge(EdgeError):
    """A request body is over `server.max_body_bytes` (HTTP 413), refused unread."""

    type = "request_too_large"


class BudgetExceeded(EdgeError):
    """A write would take a total over its configured budget (HTTP 413); names the key."""

    type = "budget_exceeded"


class Forbidden(EdgeError):
    """The request may not do this (HTTP 403): a foreign `Host` or `Origin` (cross-site
    use, DNS rebinding), or a user's token on a route for the admin token alone."""

    type = "forbidden"


class UnsupportedMediaType(EdgeError):
    """A state-changing request without `Content-Type: application/json` (HTTP 415)."""

    type = "unsupported_media_type"


class RequestTimeout(EdgeError):
    """The request body stalled, or came too slowly: past its pause timeout, its
    deadline or its minimum rate (HTTP 408)."""

    type = "request_timeout"


class DataDirLocked(EdgeError):
    """Another process holds the data directory's lock."""

    type = "data_dir_locked"


class ClientError(EdgeError):
    """`frontmind.Client` could not reach the daemon, or could not read its answer."""

    type = "client_error"


# The one table from errors to the wire: the daemon's HTTP status for each class that
# gives its own type. The most specific class wins (the table is searched along the
# exception's MRO), so a new subclass answers as its parent until it gets its own row.
HTTP_STATUS: dict[type[BaseException], int] = {
    FrontmindError: 500,
    StorageError: 503,
    InvalidInput: 400,
    MessageTooLarge: 413,
    NotFound: 404,
    UserExists: 409,
    ImportCollision: 409,  # an import that would overwrite stored rows
    Busy: 429,
    Overloaded: 503,  # the process, not this client's continuum, is past its capacity
    ShuttingDown: 503,
    McpUnavailable: 503,  # a required MCP server did not start (only ever at startup)
    # RFC 9110 §15.6.5: a server acting for another did not get its answer in time.
    ComposeTimeout: 504,
    ModelError: 502,
    ModelUnavailable: 503,
    ModelOverloaded: 503,
    ModelRejected: 502,
    ModelRefused: 422,  # the content was understood and declined (only ever mid-stream)
    ModelStreamError: 502,
    SettingsError: 400,
    InvalidModelSettings: 400,
    ConfigError: 400,
    BadBody: 400,
    BodyTooLarge: 413,
    BudgetExceeded: 413,
    Forbidden: 403,
    UnsupportedMediaType: 415,
    RequestTimeout: 408,
    DataDirLocked: 409,
    ClientError: 502,
    KernelError: 500,
}


# The other way, for `frontmind.Client`: the class raised for each type, the first (most
# general) of the table's classes with that type, except where the one callers catch
# is another: the edge's `ConfigError`, and `StorageUnavailable` (a `StorageError`, so
# either catches it) for a store the daemon could not reach, which `except
# StorageUnavailable` around a client call did not catch.
def _from_wire() -> dict[str, type[FrontmindError]]:
    found: dict[str, type[FrontmindError]] = {}
    for cls in HTTP_STATUS:
        if issubclass(cls, FrontmindError):
            found.setdefault(cls.type, cls)
    return {
        **found,
        "configuration_error": ConfigError,
        "storage_unavailable": StorageUnavailable,
    }


FROM_WIRE = _from_wire()


def wire_ids(exc: BaseException) -> dict[str, str]:
    """The ids an error body carries beside the type and message (`turn_id`,
    `continuum_id`): the attributes a caller reads on the library's error, which the
    client's must carry too. The wait is `wire_retry_seconds`'s."""
    if isinstance(exc, Busy) and exc.turn_id is not None:
        return {"turn_id": exc.turn_id}
    if isinstance(exc, UnknownContinuum):
        return {"continuum_id": exc.continuum_id}
    return {}


def error_from_wire(
    cls: type[FrontmindError],
    message: str,
    *,
    retry_after: float | None = None,
    turn_id: str | None = None,
    continuum_id: str | None = None,
) -> FrontmindError:
    """The error `frontmind.Client` raises for an error answer of type `cls.type`: the
    library's own class, with the attributes the library's carries (`wire_ids`, and the
    body's `retry_after`). The type alone cannot tell `UnknownContinuum` from another
    `not_found` (a memory, a route): the body's `continuum_id` does."""
    if issubclass(cls, Busy):
        return cls(message, retry_after=retry_after, turn_id=turn_id)
    if issubclass(cls, ModelOverloaded):
        return cls(message, retry_after=retry_after)
    if cls is NotFound and continuum_id is not None:
        return UnknownContinuum(continuum_id)
    return cls(message)


def _status_of(error: type[BaseException]) -> int | None:
    """The table's status for `error`, by its nearest class in the table."""
    return next((HTTP_STATUS[c] for c in error.__mro__ if c in HTTP_STATUS), None)


def wire_error(exc: BaseException) -> tuple[int, str]:
    """The (HTTP status, type) of `exc`; anything not in the tree is a bug: 500,
    `internal_error`."""
    status = _status_of(type(exc))
    if status is None:
        return 500, FrontmindError.type
    return status, error_type(exc)


def wire_retry_seconds(exc: BaseException) -> float | None:
    """The error's own wait before a retry is worth it, exact (a `Busy`'s, a
    `ModelOverloaded`'s `retry_after`), None when it has none: what an error body and a
    turn's error event carry, so that the client's error reads what the library's does
    (the Retry-After header, in whole seconds and never absent, cannot say it)."""
    if isinstance(exc, Busy | ModelOverloaded):
        return exc.retry_after
    return None


def wire_retry_after(exc: BaseException, status: int) -> str | None:
    """The Retry-After of an error answer (RFC 9110 §10.2.3: when a 429/503 is worth
    retrying): the error's own wait (`wire_retry_seconds`) rounded up to whole seconds,
    at least 1, and 1 when it has none; None for the other statuses."""
    if status not in (429, 503):
        return None
    seconds = wire_retry_seconds(exc)
    return str(max(1, math.ceil(seconds))) if seconds is not None else "1"


INTERNAL_MESSAGE = "internal error (logged by the daemon)"
# The longest message an error body carries. A message may quote a rejected input (a
# decoder's "Invalid enum value '…'" quotes all of it): past this, its start and end
# are kept, so no request is answered with the megabytes it sent. Frontmind's own
# messages are shorter, and quote inputs as excerpts already.
MAX_WIRE_MESSAGE = 1000


def wire_event_message(type_: str, message: str) -> str:
    """What a turn's error event says on the wire (the SSE stream), by its type, as
    `wire_message` for a body: a bug's or the kernel's details (a 500) stay in the log
    (the turn's actor logged them, and its record keeps them)."""
    cls = FROM_WIRE.get(type_)
    status = None if cls is None else _status_of(cls)
    return _wire_text(message or type_, status or 500)


def wire_message(exc: BaseException, status: int) -> str:
    """What an error body says: the error's own message (at most `MAX_WIRE_MESSAGE`
    characters), but never a bug's or the kernel's (a 500), whose details stay in the
    log."""
    return _wire_text(str(exc) or error_type(exc), status)


def _wire_text(text: str, status: int) -> str:
    return INTERNAL_MESSAGE if status == 500 else excerpt(text, MAX_WIRE_MESSAGE)
