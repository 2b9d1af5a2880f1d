"""uvicorn's h11 protocol with the daemon's limits at the socket (`SocketLimits`).

- Connections are shared fairly (frontmind/server/_shares.py): by peer address, and by
  bearer token once a request head names one. A connection refused gets a JSON 503
  with Retry-After and is closed at once, before anything is read (uvicorn's own limit
  answers plain text and still holds the connection). One taken to make room for a
  client holding fewer is closed if idle; if its body was still arriving, its request
  is answered 503 through the guard; if it is a turn still waiting for its slot, its
  event stream ends with an `overloaded` error event, and the connection with it.
- A header timeout: a connection must deliver a complete request head within
  `header_timeout` seconds of connecting (or of its previous response), so slow-loris
  clients that trickle headers are closed rather than held forever (uvicorn's
  keep-alive timer stops at the first byte).
- A chunk's announced size is checked against the body cap as soon as its size line
  is in (h11 would otherwise wait for bytes that never come): 413 at once.
- A request answered before its body was read (401, 403, 413...) closes its
  connection: the rest of that body, however slowly it comes, is not waited for.
- A client that stops taking its responses (never reads: its socket's buffers fill and
  the transport pauses writing) is watched: while bytes wait in its write buffer, each
  `send_timeout` seconds it must have taken at least `send_min_rate` bytes a second of
  them (or all that waited). One that has not is dropped: the transport aborted, with
  a reset, so that neither the process nor the kernel keeps what it would not read.
  A paused connection may be taken for a client holding fewer (`stalled`, after idle
  ones and slow bodies); an address whose paused connections hold over
  `max_client_send_buffer` bytes between them loses the one that took it over, and
  its new connections are refused until it is back under. The next pipelined request
  of a connection is not begun while its writes are paused, so a client that sends
  many and reads none has one response in memory, not one each. A client that reads
  as the response comes (an SSE stream read as it streams) never waits in a full
  buffer and is never cut, however long the response lasts.
- A request head over `max_header_bytes` (whether it comes in pieces or in one read) is
  a JSON 414 if its request line is not even finished, else a JSON 431; any other
  request h11 cannot parse is a JSON 400. Where
  a request is already running (a malformed chunked body), the guard answers it.

What reaches the guard goes through `EdgeSignal` in the request's scope: the protocol
sets its `cut` and wakes the request's `receive`; the guard answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import re
import socket
import struct
import termios
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import h11
from h11._readers import ChunkedReader
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from actors import Overloaded

from ._guard import DEFAULT_MAX_BODY_BYTES, EDGE_KEY, Cut, EdgeSignal, bearer_token
from ._shares import Backlogs, Holding, Shares, address_key

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
    # While bytes wait in a connection's write buffer, its client must take at least
    # `send_min_rate` bytes a second of them (or all that waited), judged over each
    # `send_timeout` seconds; else the connection is dropped.
    send_timeout: float = 30.0
    send_min_rate: int = 1024
    # What one address's paused connections may hold in their write buffers together.
    max_client_send_buffer: int = 64 << 20


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


def _kernel_send_queue(transport: asyncio.BaseTransport) -> int:
    """The bytes in the socket's send queue the client has not acknowledged (Linux's
    SIOCOUTQ); 0 where it cannot be read."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        answer = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except (OSError, ValueError):  # not a socket any more, or closed
        return 0
    queued: int = struct.unpack("i", answer)[0]
    return queued


class _LingeringTransport:
    """A transport whose close() lingers while the client is still sending a body.

    When a request is refused before its body is read (413), closing at once with the
    body unread makes the kernel reset the connection, and the client loses the answer.
    So: half-close, keep reading (and dropping) for up to `LINGER_SECONDS`, then close.
    `on_close` is told at once: a lingering connection no longer counts as held.

    It also counts what is written (`sent`: what has left its buffer for the kernel),
    and can `drop` the connection: abort it with a reset, its unsent bytes thrown away.
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
        self.written = 0

    @property
    def sent(self) -> int:
        """Bytes written that the client has taken: gone from the write buffer here and
        from the kernel's send queue too. The kernel's buffer grows to megabytes and
        takes more only once a third of it is gone: a client reading steadily at many
        times the minimum rate would show no progress here for longer than a window."""
        queued = _kernel_send_queue(self._transport)
        return self.written - self._transport.get_write_buffer_size() - queued

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

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

    def drop(self) -> None:
        """Abort: a reset, the unsent bytes dropped here and in the kernel (a plain
        close would wait, for ever, for a client that reads nothing to take them)."""
        self._on_close()
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._transport.abort()

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
        Overloaded.type,
        "too many open connections (server.max_connections, shared fairly by client "
        "address and token); retry",
        "retry-after: 1\r\n",
    )
    every = limits.max_connections
    per_client = min(limits.max_client_connections or every, every)
    shares: Shares[LimitedH11] = Shares(limits.max_connections, per_client)
    backlogs = Backlogs(limits.max_client_send_buffer)
    send_window = limits.send_timeout
    send_owed = max(1, int(limits.send_min_rate * send_window))

    class LimitedH11(H11Protocol):
        _refused = False
        _head_timer: asyncio.TimerHandle | None = None
        _cut_timer: asyncio.TimerHandle | None = None
        _edge: EdgeSignal | None = None
        _edge_cycle: RequestResponseCycle | None = None
        _address = ""
        _lost = False
        _send_timer: asyncio.TimerHandle | None = None
        _send_mark = 0  # `sent` when the watch's window began
        _send_due = 0  # what the client must have taken by its end
        _backlog = 0  # bytes counted in `backlogs`
        _backlogged = False  # counted there (its writes paused)
        _next_waits = False  # the next pipelined request waits for writes to resume

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._h11 = _Connection(h11.SERVER, limits.max_header_bytes)
            self.conn = self._h11
            self._head = bytearray()  # the request head read so far, up to the cap

        # --- the connection's life -----------------------------------------------------

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            key = address_key(transport.get_extra_info("peername"))
            # An address whose paused responses hold over their cap gets no more until
            # its clients take them (or they are dropped): refused, cheaply, at the door.
            admitted, victim = (False, None) if backlogs.over(key) else shares.admit(key)
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
            self._address = key
            lingering = _LingeringTransport(
                cast(asyncio.Transport, transport),
                self.loop,
                lambda: self.conn.their_state is h11.SEND_BODY,
                self._closing,
            )
            super().connection_made(cast(asyncio.Transport, lingering))
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            if self._cut_timer is not None:
                self._cut_timer.cancel()
            if self._refused:
                return
            self._lost = True
            if self._send_timer is not None:
                self._send_timer.cancel()
                self._send_timer = None
            self._unbacklog()
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
            if self.flow is not None and self.flow.write_paused:
                return "stalled"
            edge = self._edge
            if edge is not None and edge.queued and edge.cut is None and cycle is not None:
                return "queued"
            return "busy"

        def evict(self) -> None:
            """Give this connection's place to a client holding fewer."""
            shares.remove(self)
            holding = self.holding()
            if holding == "body":
                self._cut("evicted")
            elif holding == "queued":
                self._cut("evicted", answered=True)  # its answer ends it (TurnEvents)
            elif holding == "stalled":
                self._drop()
            else:
                self.transport.close()

        def _closing(self) -> None:
            """The transport is being closed: its place is free. What it still has to
            send is watched like any other (a close waits for it to be sent)."""
            shares.remove(self)
            self._watch_send()

        # --- a client that does not take what it is sent -----------------------------

        def pause_writing(self) -> None:
            if self._refused or self._lost:
                return
            super().pause_writing()
            if not self._backlogged:
                self._backlogged = True
                backlogs.change(self._address, 0, 1)
            self._count_backlog()
            if backlogs.over(self._address):
                # Not from inside the transport's write, which called this.
                self.loop.call_soon(self._drop)
            self._watch_send()

        def resume_writing(self) -> None:
            if self._refused or self._lost:
                return
            super().resume_writing()
            self._unbacklog()
            if self._next_waits:
                self._next_waits = False
                self.loop.call_soon(self._begin_next)

        def _count_backlog(self) -> None:
            if self._backlogged:
                now = self.transport.get_write_buffer_size()
                backlogs.change(self._address, now - self._backlog)
                self._backlog = now

        def _unbacklog(self) -> None:
            if self._backlogged:
                self._backlogged = False
                backlogs.change(self._address, -self._backlog, -1)
                self._backlog = 0

        def _watch_send(self) -> None:
            """While bytes wait to be sent, check every `send_timeout` seconds that the
            client took its due of them."""
            if self._send_timer is not None or self._lost or self._refused:
                return
            waiting = self.transport.get_write_buffer_size()
            if not waiting:
                return
            self._send_mark = cast(_LingeringTransport, self.transport).sent
            self._send_due = min(waiting, send_owed)
            self._send_timer = self.loop.call_later(send_window, self._send_check)

        def _send_check(self) -> None:
            self._send_timer = None
            if self._lost:
                return
            taken = cast(_LingeringTransport, self.transport).sent - self._send_mark
            if taken < self._send_due:
                self._drop()
                return
            self._count_backlog()
            self._watch_send()

        def _drop(self) -> None:
            """Abort the connection: its client does not take what it is sent."""
            if self._lost:
                return
            transport = self.transport
            if isinstance(transport, _LingeringTransport):
                transport.drop()
            else:
                transport.abort()

        def _begin_next(self) -> None:
            """Writes resumed: what `on_response_complete` left waiting goes on."""
            if not self._lost:
                self.on_response_complete()

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

        def _cut(self, why: Cut, detail: str = "", *, answered: bool = False) -> None:
            """End the running request: the guard answers it (it is woken here), or,
            `answered`, the response already begun ends itself (a queued turn's)."""
            started = self.cycle is not None and self.cycle.response_started
            if self._edge is None or self.cycle is None or (started and not answered):
                self.transport.close()
                return
            self._edge.cut = why
            self._edge.detail = detail
            self.cycle.message_event.set()
            self._cut_timer = self.loop.call_later(CUT_GRACE_SECONDS, self.transport.close)

        def on_response_complete(self) -> None:
            self._head.clear()
            if self._edge is not None and self._edge.cut is not None:
                self.transport.close()  # its place went to another client
            if self.conn.their_state is h11.SEND_BODY:
                # Answered before its body was read: close (lingering, so the answer is
                # not lost) rather than wait for the rest of the body at any pace.
                self.transport.close()
            if self.flow.write_paused and not self.transport.is_closing():
                # The client has not taken this response yet: a pipelined request is
                # not begun (its response would wait in memory beside this one) until
                # it has; the send watch is on meanwhile.
                self._next_waits = True
                return
            pending = self.conn.trailing_data[0]
            if pending and not self.transport.is_closing() and self._head_too_long(pending):
                # A pipelined request read with the one before it: its head was never
                # checked as it came (the connection was not idle), and h11 checks only
                # a head still incomplete.
                return
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

        def _head_too_long(self, data: bytes | bytearray) -> bool:
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
