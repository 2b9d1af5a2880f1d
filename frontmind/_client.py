"""`frontmind.Client`: the daemon over HTTP, in the library's shape.

    async with Client("http://127.0.0.1:8765", token=...) as c:
        async for event in c.turn("ada", "hello"):
            ...

It returns the library's own event and record types (decoded with msgspec through the
wire rules of `_wire`), and raises the library's own errors: an error answer is mapped
back through `_exceptions.FROM_WIRE`, from the table the daemon answered with.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypeVar

import httpx2
import msgspec

from actors import (
    InvalidModelSettings,
    McpServerStatus,
    ModelChoice,
    ModelRequest,
    SSEDecoder,
    ToolsReload,
    TurnCompleted,
    TurnError,
    TurnEvent,
    UserInput,
)
from storage import (
    ContinuumModel,
    Document,
    InvalidInput,
    Job,
    Memory,
    MemoryHit,
    Message,
    Reminder,
    TurnRecord,
    User,
    UserForgotten,
    check_continuum_id,
    check_label,
    check_row_id,
    check_user_name,
    to_epoch,
)

from ._exceptions import FROM_WIRE, ClientError, error_from_wire
from ._wire import (
    BackupDone,
    ContinuumPage,
    ContinuumSummary,
    DocumentPage,
    JobPage,
    McpServers,
    MemoryHitPage,
    MemoryPage,
    MessagePage,
    ModelSettingsReply,
    ReminderPage,
    TurnPage,
    UserCreated,
    UserList,
    from_wire,
)

__all__ = ["Client", "ContinuumSummary", "Page", "RemoteTurn"]

T = TypeVar("T")
_encoder = msgspec.json.Encoder()


class Page(list[T], Generic[T]):
    """One page of a list: a list, with the cursor of the next page (None at the end)."""

    def __init__(self, items: list[T], next_cursor: str | None) -> None:
        super().__init__(items)
        self.next_cursor = next_cursor


def _instant(moment: datetime | None, what: str) -> str | None:
    """A time to send, checked here as the library checks it (an aware `datetime`, in
    range), so a bad one gets the library's `InvalidInput` before any request."""
    if moment is None:
        return None
    to_epoch(moment, what)
    return moment.isoformat()


def _continuum(continuum_id: str) -> str:
    """`/v1/continuums/{id}`, the id checked as the library checks it. A path parameter
    is checked before it is put in a path: the daemon decodes `%2F` before routing, so
    no quoting keeps `../users/bob` or `a#b` to its own segment, and such a name
    would reach another route (a delete, a rotation) than the one called."""
    return f"/v1/continuums/{check_continuum_id(continuum_id)}"


def _raise_for(response: httpx2.Response, body: bytes) -> None:
    status = response.status_code
    try:
        error: Any = msgspec.json.decode(body)["error"]
        kind, message = str(error["type"]), str(error["message"])
    except (msgspec.DecodeError, KeyError, TypeError):
        raise ClientError(f"HTTP {status}: {body[:200]!r}") from None
    cls = FROM_WIRE.get(kind)
    if cls is None:
        raise ClientError(f"{kind} (HTTP {status}): {message}")
    turn_id, continuum_id = error.get("turn_id"), error.get("continuum_id")
    raise error_from_wire(
        cls,
        message,
        # The body's, not the Retry-After header's: that one is whole seconds, and 1
        # where the daemon's error has no wait (its `retry_after` None, as here).
        retry_after=_seconds(error.get("retry_after")),
        turn_id=turn_id if isinstance(turn_id, str) else None,
        continuum_id=continuum_id if isinstance(continuum_id, str) else None,
    )


def _seconds(value: object) -> float | None:
    """An error body's `retry_after`: seconds, a finite number from 0 on; None for
    anything else (absent: the error said no wait)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class _Closing:
    """`async with` for an object whose `aclose()` ends it, however the block is left."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        raise NotImplementedError


class RemoteTurn(_Closing):
    """The events of one turn run by the daemon, like the library's `TurnStream`."""

    def __init__(self, events: AsyncGenerator[TurnEvent, None]) -> None:
        self._events = events

    async def aclose(self) -> None:
        await self._events.aclose()

    def __aiter__(self) -> RemoteTurn:
        return self

    async def __anext__(self) -> TurnEvent:
        return await self._events.__anext__()


class Client(_Closing):
    """An async client for `frontmind serve`; use it with `async with`."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float | None = 60.0) -> None:
        # The daemon's edge takes a POST only as JSON, a bodyless one too (it refuses 415
        # otherwise, so no cross-site form can post): every request says it is JSON.
        headers = {"content-type": "application/json"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        # Every call waits at most `timeout` for each step (connect, write, each read);
        # a turn's stream alone has no read timeout: it runs as long as the model talks.
        try:
            base = httpx2.URL(url.rstrip("/"))
        except httpx2.InvalidURL as exc:  # the caller's mistake, said as the client's error
            raise ClientError(f"not a daemon URL: {url!r} ({exc})") from exc
        if base.scheme not in ("http", "https"):
            # `127.0.0.1:8765` parses (as a path, or a scheme `localhost`): refused now,
            # not as a failure of every call, a turn's said as a stream that broke.
            raise ClientError(f"not a daemon URL: {url!r} (give http://host:port)")
        self._http = httpx2.AsyncClient(
            base_url=base, headers=headers, timeout=httpx2.Timeout(timeout)
        )
        self._stream_timeout = httpx2.Timeout(timeout, read=None)
        self.url = url
        self._timeout = timeout

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> bytes:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx2.TimeoutException as exc:
            raise ClientError(
                f"the daemon at {self.url} did not answer {method} {path} within"
                f" {self._timeout} s ({type(exc).__name__})"
            ) from exc
        except httpx2.HTTPError as exc:
            raise ClientError(f"no Frontmind daemon answers at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            _raise_for(response, response.content)
        return response.content

    @staticmethod
    def _params(limit: int, cursor: str | None, **more: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, **more}
        if cursor is not None:
            params["cursor"] = cursor
        return params

    async def health(self) -> None:
        """Return when the daemon answers; `ClientError` if it does not."""
        await self._call("GET", "/healthz")

    async def ready(self) -> None:
        """Return when the daemon's store answers too; its error (503
        `storage_unavailable`) if not."""
        await self._call("GET", "/readyz")

    # -- turns ----------------------------------------------------------------------------

    def turn(self, continuum_id: str, message: UserInput) -> RemoteTurn:
        """Run a turn and stream its events (`async for`; `async with` to leave early
        safely: leaving closes the stream, and the daemon cancels the turn).

        `message` is text, or a list of content blocks in the Messages API's shape (text,
        image and document blocks), as `Frontmind.turn` takes it."""
        return RemoteTurn(self._turn_events(continuum_id, message))

    async def _turn_events(
        self, continuum_id: str, message: UserInput
    ) -> AsyncGenerator[TurnEvent, None]:
        path = f"{_continuum(continuum_id)}/turns"
        body = _encoder.encode(
            {"message": message} if isinstance(message, str) else {"content": list(message)}
        )
        try:
            async with self._http.stream(
                "POST", path, content=body, timeout=self._stream_timeout
            ) as response:
                if response.status_code >= 400:
                    _raise_for(response, await response.aread())
                ended = False
                async for data in _sse_data(response.aiter_bytes()):
                    event: TurnEvent = from_wire(data, TurnEvent)  # type: ignore[arg-type]
                    ended = isinstance(event, TurnCompleted | TurnError)
                    yield event
                if not ended:
                    # The daemon ends every turn's stream with its completion or its
                    # error. A stream closed short of that (a proxy's cut, a URL that
                    # answers something else) ended the turn's loop as if all was said.
                    raise ClientError(
                        f"the turn's stream from {self.url} ended before the turn did"
                    )
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            # Nothing was sent: no stream to have broken (the other calls say the same).
            raise ClientError(f"no Frontmind daemon answers at {self.url}: {exc}") from exc
        except httpx2.HTTPError as exc:
            raise ClientError(f"the turn's stream from {self.url} broke: {exc}") from exc

    async def context(self, continuum_id: str, text: str) -> ModelRequest:
        """The Messages API request a turn with `text` would send now (nothing is sent)."""
        body = await self._call(
            "GET", f"{_continuum(continuum_id)}/context", params={"message": text}
        )
        try:
            return msgspec.json.decode(body, type=ModelRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise ClientError(f"the daemon sent an unreadable request: {exc}") from None

    async def model_settings(self, continuum_id: str) -> tuple[ContinuumModel, ModelChoice]:
        """The continuum's own model settings, and the settings its turns run with."""
        body = await self._call("GET", f"{_continuum(continuum_id)}/settings")
        reply = from_wire(body, ModelSettingsReply)
        return reply.own, reply.effective

    async def set_model_settings(
        self,
        continuum_id: str,
        *,
        model: str | None = None,
        thinking: Literal["off", "enabled", "adaptive"] | None = None,
        budget_tokens: int | None = None,
        max_tokens: int | None = None,
        effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None,
        thinking_display: Literal["summarized", "omitted"] | None = None,
    ) -> tuple[ContinuumModel, ModelChoice]:
        """Choose the continuum's model settings (each None falls back to the daemon's
        `[model]`); refused with `InvalidModelSettings` when the model would refuse them."""
        path = f"{_continuum(continuum_id)}/settings"
        try:
            own = ContinuumModel(
                model=model,
                thinking=thinking,
                budget_tokens=budget_tokens,
                max_tokens=max_tokens,
                effort=effort,
                thinking_display=thinking_display,
            )
            body = await self._call("PUT", path, content=_encoder.encode(own))
        except InvalidInput as exc:
            if type(exc) is not InvalidInput:
                raise
            # Refused here or by the daemon, whose `invalid_request` is InvalidInput's
            # type and InvalidModelSettings' alike (the table reads back the first): on
            # this route it is the settings refused, raised as the library raises it.
            raise InvalidModelSettings(str(exc)) from None
        reply = from_wire(body, ModelSettingsReply)
        return reply.own, reply.effective

    async def history(
        self, continuum_id: str, *, limit: int = 100, cursor: str | None = None
    ) -> Page[Message]:
        body = await self._call(
            "GET", f"{_continuum(continuum_id)}/messages", params=self._params(limit, cursor)
        )
        page = from_wire(body, MessagePage)
        return Page(page.messages, page.next_cursor)

    async def turns(
        self, continuum_id: str, limit: int = 100, *, cursor: str | None = None
    ) -> Page[TurnRecord]:
        """The latest turns in time order; the next page holds earlier ones."""
        body = await self._call(
            "GET", f"{_continuum(continuum_id)}/turns", params=self._params(limit, cursor)
        )
        page = from_wire(body, TurnPage)
        return Page(list[TurnRecord](page.turns), page.next_cursor)

    async def continuums(
        self, *, limit: int = 100, cursor: str | None = None
    ) -> Page[ContinuumSummary]:
        body = await self._call("GET", "/v1/continuums", params=self._params(limit, cursor))
        page = from_wire(body, ContinuumPage)
        return Page(page.continuums, page.next_cursor)

    async def delete_continuum(self, continuum_id: str) -> None:
        await self._call("DELETE", _continuum(continuum_id))

    # -- reminders, memories, documents --------------------------------------------------

    async def add_reminder(self, text: str, due_at: datetime | None = None) -> Reminder:
        payload = {"text": text, "due_at": _instant(due_at, "the reminder's due time")}
        return from_wire(await self._call("POST", "/v1/reminders", json=payload), Reminder)

    async def complete_reminder(self, reminder_id: int) -> Reminder:
        reminder_id = check_row_id(reminder_id, "reminder id")
        body = await self._call("POST", f"/v1/reminders/{reminder_id}/complete")
        return from_wire(body, Reminder)

    async def reminders(
        self, include_completed: bool = False, *, limit: int = 100, cursor: str | None = None
    ) -> Page[Reminder]:
        params = self._params(limit, cursor, include_completed=str(include_completed).lower())
        page = from_wire(await self._call("GET", "/v1/reminders", params=params), ReminderPage)
        return Page(page.reminders, page.next_cursor)

    async def delete_reminder(self, reminder_id: int) -> None:
        await self._call("DELETE", f"/v1/reminders/{check_row_id(reminder_id, 'reminder id')}")

    async def remember(
        self, text: str, importance: float = 0.5, expires_at: datetime | None = None
    ) -> Memory:
        payload = {
            "text": text,
            "importance": importance,
            "expires_at": _instant(expires_at, "the memory's expiry"),
        }
        return from_wire(await self._call("POST", "/v1/memories", json=payload), Memory)

    async def memories(self, limit: int = 100, *, cursor: str | None = None) -> Page[Memory]:
        body = await self._call("GET", "/v1/memories", params=self._params(limit, cursor))
        page = from_wire(body, MemoryPage)
        return Page(page.memories, page.next_cursor)

    async def search_memories(self, query: str, limit: int = 10) -> list[MemoryHit]:
        body = await self._call("GET", "/v1/memories", params={"q": query, "limit": limit})
        return from_wire(body, MemoryHitPage).memories

    async def delete_memory(self, memory_id: int) -> None:
        await self._call("DELETE", f"/v1/memories/{check_row_id(memory_id, 'memory id')}")

    async def put_document(self, label: str, content: str) -> Document:
        body = await self._call("POST", "/v1/documents", json={"label": label, "content": content})
        return from_wire(body, Document)

    async def documents(self, *, limit: int = 100, cursor: str | None = None) -> Page[Document]:
        body = await self._call("GET", "/v1/documents", params=self._params(limit, cursor))
        page = from_wire(body, DocumentPage)
        return Page(page.documents, page.next_cursor)

    async def delete_document(self, label: str) -> None:
        await self._call("DELETE", f"/v1/documents/{check_label(label)}")

    async def backup(self, path: str) -> int:
        """Back the daemon's store up to `path` on its machine (admin token); the size."""
        body = await self._call("POST", "/v1/admin/backup", json={"path": path})
        return from_wire(body, BackupDone).bytes

    # -- background jobs ------------------------------------------------------------------

    async def jobs(
        self, continuum_id: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> Page[Job]:
        """The background jobs (segment summaries) of the token's user, or of one of
        its continuums, with their state, tries and usage: one page, oldest first."""
        params = self._params(limit, cursor)
        if continuum_id is not None:
            params["continuum_id"] = continuum_id
        page = from_wire(await self._call("GET", "/v1/jobs", params=params), JobPage)
        return Page(page.jobs, page.next_cursor)

    # -- MCP servers (the admin token's) --------------------------------------------------

    async def mcp_servers(self) -> list[McpServerStatus]:
        """The daemon's MCP servers: state, the tools each offers, a pending tool list."""
        return from_wire(await self._call("GET", "/v1/mcp"), McpServers).servers

    async def offered_tools(self) -> list[str]:
        """The names in the daemon's request `tools` array, in its order."""
        return from_wire(await self._call("GET", "/v1/mcp"), McpServers).tools

    async def reload_tools(self) -> ToolsReload:
        """Apply the MCP servers' current tool lists (see `Frontmind.reload_tools`)."""
        return from_wire(await self._call("POST", "/v1/mcp/reload", json={}), ToolsReload)

    # -- users (the admin token's) -------------------------------------------------------

    async def add_user(self, name: str) -> str:
        """Add a user; returns its bearer token, shown this once."""
        body = await self._call("POST", "/v1/users", json={"name": name})
        return from_wire(body, UserCreated).token

    async def users(self) -> list[User]:
        return from_wire(await self._call("GET", "/v1/users"), UserList).users

    async def rotate_token(self, name: str) -> str:
        """Give the user a new token (returned, shown this once); the old one stops working."""
        path = f"/v1/users/{check_user_name(name)}/token"
        body = await self._call("POST", path, json={})
        return from_wire(body, UserCreated).token

    async def delete_user(self, name: str) -> UserForgotten:
        """Forget the user and every row of theirs; the rows deleted, by table."""
        path = f"/v1/users/{check_user_name(name)}"
        return from_wire(await self._call("DELETE", path), UserForgotten)


async def _sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The data of each server-sent event (comments such as `: ping` and ids skipped).

    Read as bytes by the same decoder the model's stream goes through: lines end at CR,
    LF or CR LF only. A reply's JSON may hold U+2028, U+2029 or U+0085 raw, at which a
    text line reader (`aiter_lines`, `str.splitlines`) would cut the event in two.
    """
    decoder = SSEDecoder()
    async for chunk in chunks:
        for _name, data in decoder.feed(chunk):
            yield data
