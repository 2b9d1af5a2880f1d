"""uvicorn's h11 protocol with the daemon's limits at the socket (`SocketLimits`).

- Connections are shared fairly (frontmind/server/_shares.py): by peer address, and by
  bearer token once a request head names one. A connection refused gets a JSON 503
  with Retry-After and is closed at once, before anything is read (uvicorn's own limit
  answers plain text and still holds the connection). One taken to make room for a
  client holding fewer is closed if idle; if its body was still arriving, its request
  is answered 503 through the guard.
- A header timeout: a connection must deliver a complete request head within
  `header_timeout` seconds of connecting (or of its previous response), so slow-loris
  clients that trickle headers are closed rather than held forever (uvicorn's
  keep-alive timer stops at the first byte).
- A chunk's announced size is checked against the body cap as soon as its size line
  is in (h11 would otherwise wait for bytes that never come): 413 at once.
- A request answered before its body was read (401, 403, 413...) closes its
  connection: the rest of that body, however slowly it comes, is not waited for.
- A request head over `max_header_bytes` (whether it comes in pieces or in one read) is
  a JSON 414 if its request line is not even finished, else a JSON 431; any other
  request h11 cannot parse is a JSON 400. Where
  a request is already running (a malformed chunked body), the guard answers it.

What reaches the guard goes through `EdgeSignal` in the request's scope: the protocol
sets its `cut` and wakes the request's `receive`; the guard answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import h11
from h11._readers import ChunkedReader
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from ._guard import DEFAULT_MAX_BODY_BYTES, EDGE_KEY, Cut, EdgeSignal, bearer_token
from ._shares import Holding, Shares, address_key

__all__ = ["SocketLimits", "limited_protocol"]

# How long a request whose connection was cut may take to be answered by the guard
# before its connection is closed regardless (a route that stopped reading its body).
CUT_GRACE_SECONDS = 5.0
# h11 reads at most 20 hex digits of a chunk size and calls a longer one illegal; what
# that size is decides between 413 and 400.
_CHUNK_SIZE = re.compile(r"illegal chunk header: (?:bytearray\()?b'([0-9A-Fa-f]{21,})")


@dataclass(frozen=True)
class SocketLimits:
    max_connections: int = 1000
    max_client_connections: int | None = None  # per address and per token; None: all
    header_timeout: float = 10.0  # seconds to deliver a whole request head
    keep_alive_timeout: int = 5  # seconds an idle kept-alive connection stays open
    max_header_bytes: int = 16 * 1024  # h11's cap on an incomplete request head
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # what an announced chunk may take


def _json_response(status: int, reason: str, kind: str, message: str, extra: str = "") -> bytes:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Connection(h11.Connection):
    """h11's connection, remembering the protocol error it raised (uvicorn drops it, and
    with it the hint that a head was too long)."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


class _LingeringTransport:
    """A transport whose close() lingers while the client is still sending a body.

    When a request is refused before its body is read (413), closing at once with the
    body unread makes the kernel reset the connection, and the client loses the answer.
    So: half-close, keep reading (and dropping) for up to `LINGER_SECONDS`, then close.
    `on_close` is told at once: a lingering connection no longer counts as held.
    """

    LINGER_SECONDS = 2.0

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        sending_body: Callable[[], bool],
        on_close: Callable[[], None],
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._sending_body = sending_body
        self._on_close = on_close
        self.lingering = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self, *, linger: bool = False) -> None:
        """Close; lingering if the client is still sending a body (or `linger`: a head
        refused while it still comes)."""
        if self._transport.is_closing() or self.lingering:
            return
        self._on_close()
        if not ((linger or self._sending_body()) and self._transport.can_write_eof()):
            self._transport.close()
            return
        self.lingering = True
        self._transport.write_eof()
        self._transport.resume_reading()
        self._loop.call_later(self.LINGER_SECONDS, self._transport.close)

    def abort(self) -> None:
        self._on_close()
        self._transport.close()

    def forget(self) -> None:
        """The connection is gone: drop the callbacks (they refer to its protocol, which
        refers to this transport: a cycle only a full collection would free)."""
        self._sending_body = _not_sending
        self._on_close = _nothing


def _not_sending() -> bool:
    return False


def _nothing() -> None:
    pass


def limited_protocol(limits: SocketLimits) -> type[H11Protocol]:
    """The protocol class for one server: its connections share one `Shares`."""
    busy = _json_response(
        503,
        "Service Unavailable",
        "overloaded",
        "too many open connections (server.max_connections, shared fairly by client "
        "address and token); retry",
        "retry-after: 1\r\n",
    )
    every = limits.max_connections
    per_client = min(limits.max_client_connections or every, every)
    shares: Shares[LimitedH11] = Shares(limits.max_connections, per_client)

    class LimitedH11(H11Protocol):
        _refused = False
        _head_timer: asyncio.TimerHandle | None = None
        _cut_timer: asyncio.TimerHandle | None = None
        _edge: EdgeSignal | None = None
        _edge_cycle: RequestResponseCycle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._h11 = _Connection(h11.SERVER, limits.max_header_bytes)
            self.conn = self._h11
            self._head = bytearray()  # the request head read so far, up to the cap

        # --- the connection's life -----------------------------------------------------

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            key = address_key(transport.get_extra_info("peername"))
            admitted, victim = shares.admit(key)
            if not admitted:
                # Answer and half-close, then drain what the client sends until it hangs
                # up (or a second passes): closing with its request unread would reset
                # the connection and lose the answer.
                self._refused = True
                self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
                self.transport.write(busy)
                self.transport.write_eof()
                self._head_timer = self.loop.call_later(1.0, self.transport.close)
                return
            if victim is not None:
                victim.evict()
            shares.add(self, key)
            lingering = _LingeringTransport(
                cast(asyncio.Transport, transport),
                self.loop,
                lambda: self.conn.their_state is h11.SEND_BODY,
                lambda: shares.remove(self),
            )
            super().connection_made(cast(asyncio.Transport, lingering))
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            if self._cut_timer is not None:
                self._cut_timer.cancel()
            if self._refused:
                return
            shares.remove(self)
            super().connection_lost(exc)
            # Nothing of the connection runs from here on but the app's task, which
            # holds its own request cycle (uvicorn's, told it is disconnected). The
            # references back from the transport and to the cycle go, so that the
            # connection is freed when that task ends, not at the next full collection
            # (which the `idle` policy runs rarely under load: bench/README, "What the
            # high-water mark is made of").
            self.cycle = None  # type: ignore[assignment]  # uvicorn's own "no request"
            self._edge_cycle = None
            if isinstance(self.transport, _LingeringTransport):
                self.transport.forget()

        def holding(self) -> Holding:
            their = self.conn.their_state
            if their is h11.IDLE:
                return "idle"
            cycle = self.cycle
            if (
                their is h11.SEND_BODY
                and cycle is not None
                and not cycle.response_started
                and self._edge is not None
                and self._edge.cut is None
            ):
                return "body"
            return "busy"

        def evict(self) -> None:
            """Give this connection's place to a client holding fewer."""
            shares.remove(self)
            if self.holding() == "body":
                self._cut("evicted")
            else:
                self.transport.close()

        # --- requests ----------------------------------------------------------------

        def data_received(self, data: bytes) -> None:
            if self._refused or getattr(self.transport, "lingering", False):
                return  # drained, unread
            if self.conn.their_state is h11.IDLE and self._head_too_long(data):
                return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm_head_timer()  # the head is in; the app's timeouts take over

        def handle_events(self) -> None:
            super().handle_events()
            self._signal_for(self.cycle)
            edge = self._edge
            if edge is not None and self.conn.their_state in (h11.DONE, h11.MUST_CLOSE):
                edge.body_in = True
            if edge is not None and edge.cut is None and self.conn.their_state is h11.SEND_BODY:
                reader = getattr(self.conn, "_reader", None)
                if isinstance(reader, ChunkedReader):
                    # h11 keeps what is left of the chunk whose size line it last read.
                    left = int(getattr(reader, "_bytes_in_chunk", 0))
                    if edge.received + len(self.cycle.body) + left > limits.max_body_bytes:
                        self._cut("too_large")

        def _signal_for(self, cycle: RequestResponseCycle | None) -> None:
            """Give a request that has just begun its EdgeSignal (before its app runs: a
            task starts at the loop's next turn) and count it under its token."""
            if cycle is None or cycle is self._edge_cycle:
                return
            self._edge_cycle = cycle
            edge = EdgeSignal()
            self._edge = edge
            scope = cast(dict[str, Any], cycle.scope)
            scope.setdefault("extensions", {})[EDGE_KEY] = edge
            token = bearer_token(self.headers)
            key = None if token is None else hashlib.blake2b(token, digest_size=16).digest()
            if not shares.set_token(self, key):
                edge.cut = "token_share"  # the guard answers 503 before the app runs

        def _cut(self, why: Cut, detail: str = "") -> None:
            """End the running request: the guard answers it (it is woken here)."""
            if self._edge is None or self.cycle is None or self.cycle.response_started:
                self.transport.close()
                return
            self._edge.cut = why
            self._edge.detail = detail
            self.cycle.message_event.set()
            self._cut_timer = self.loop.call_later(CUT_GRACE_SECONDS, self.transport.close)

        def on_response_complete(self) -> None:
            self._head.clear()
            if self.conn.their_state is h11.SEND_BODY:
                # Answered before its body was read: close (lingering, so the answer is
                # not lost) rather than wait for the rest of the body at any pace.
                self.transport.close()
            super().on_response_complete()
            self._arm_head_timer()  # the next request's head gets the same deadline

        def send_400_response(self, msg: str) -> None:
            error = self._h11.last_error
            cycle = self.cycle
            self._signal_for(cycle)  # the head may have come in the same read as the error
            if cycle is not None and not cycle.response_complete:
                # A running request's body h11 cannot read (a chunked body's framing):
                # the guard answers it, in the request's own response.
                detail = str(error) if error is not None else msg
                announced = _CHUNK_SIZE.match(detail)
                huge = announced is not None and int(announced[1], 16) > limits.max_body_bytes
                why: Cut = "too_large" if huge else "malformed"
                if self._edge is not None and self._edge.cut is None:
                    self._cut(why, detail)
                return
            message = f"{msg} (malformed HTTP)"
            if error is not None and error.error_status_hint == 431:
                self._refuse_head(b"\n" in self.conn.trailing_data[0].lstrip(b"\r\n"))
                return
            self.transport.write(_json_response(400, "Bad Request", "invalid_request", message))
            self.transport.close()

        def _head_too_long(self, data: bytes) -> bool:
            """Whether the request head being read is over the cap (then answered). h11
            checks only a head still incomplete after a read: one that comes whole in
            one read would pass at any size."""
            cap = limits.max_header_bytes
            head = self._head
            if not head:
                data = data.lstrip(b"\r\n")  # blank lines before a request: h11's to refuse
            start = max(0, len(head) - 3)
            head += data[: cap + 4 - len(head)]  # enough to tell
            if head.find(b"\r\n\r\n", start) != -1:
                head.clear()  # whole, within the cap: h11 reads it
                return False
            if len(head) <= cap:
                return False
            self._refuse_head(b"\n" in head.lstrip(b"\r\n"))
            return True

        def _refuse_head(self, line_ended: bool) -> None:
            size = limits.max_header_bytes
            if line_ended:
                message = f"the request head is over {size} bytes"
                answer = _json_response(
                    431, "Request Header Fields Too Large", "headers_too_large", message
                )
            else:
                message = f"the request line is over {size} bytes"
                answer = _json_response(414, "URI Too Long", "uri_too_long", message)
            self.transport.write(answer)
            cast(_LingeringTransport, self.transport).close(linger=True)

        def eof_received(self) -> None:
            if self._refused:
                self.transport.close()
            elif isinstance(self.transport, _LingeringTransport) and self.transport.lingering:
                self.transport.abort()

        # --- the head timer ----------------------------------------------------------

        def _arm_head_timer(self) -> None:
            self._disarm_head_timer()
            self._head_timer = self.loop.call_later(limits.header_timeout, self._head_late)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return LimitedH11
