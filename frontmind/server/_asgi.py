"""Serving an ASGI app with uvicorn inside our own task group.

The socket is bound (and listening) before uvicorn starts, so port 0 works and the URL
is known at once. Signals are left to the owner: uvicorn's own handlers would re-raise
SIGTERM after shutdown and make a graceful exit look like a crash.

Limits at the socket (`SocketLimits`), in uvicorn's h11 protocol:
- a connection limit: a connection over it gets a JSON 503 with Retry-After and is
  closed at once, before anything is read (uvicorn's own limit answers plain text and
  still holds the connection);
- a header timeout: a connection must deliver a complete request head within
  `header_timeout` seconds of connecting (or of its previous response), so slow-loris
  clients that trickle headers are closed rather than held forever (uvicorn's
  keep-alive timer stops at the first byte);
- the keep-alive timeout between requests and h11's cap on a request head's size;
- a request h11 cannot parse is answered with a JSON 400, as every other error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from typing import Any, cast

import anyio
import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "ServedApp",
    "SocketLimits",
    "bind_socket",
    "format_url",
    "is_loopback",
    "serve_app",
]


@dataclass(frozen=True)
class SocketLimits:
    max_connections: int = 1000
    header_timeout: float = 10.0  # seconds to deliver a whole request head
    keep_alive_timeout: int = 5  # seconds an idle kept-alive connection stays open
    max_header_bytes: int = 16 * 1024  # h11's cap on an incomplete request head


def _busy_response() -> bytes:
    body = json.dumps(
        {"error": {"type": "overloaded", "message": "too many open connections; retry"}}
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _LingeringTransport:
    """A transport whose close() lingers while the client is still sending a body.

    When a request is refused before its body is read (413), closing at once with the
    body unread makes the kernel reset the connection, and the client loses the answer.
    So: half-close, keep reading (and dropping) for up to `LINGER_SECONDS`, then close.
    """

    LINGER_SECONDS = 2.0

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        sending_body: Callable[[], bool],
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._sending_body = sending_body
        self.lingering = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        if self._transport.is_closing() or self.lingering:
            return
        if not (self._sending_body() and self._transport.can_write_eof()):
            self._transport.close()
            return
        self.lingering = True
        self._transport.write_eof()
        self._transport.resume_reading()
        self._loop.call_later(self.LINGER_SECONDS, self._transport.close)

    def abort(self) -> None:
        self._transport.close()


def _limited_protocol(limits: SocketLimits) -> type[H11Protocol]:
    busy = _busy_response()

    class LimitedH11(H11Protocol):
        _refused = False
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if len(self.connections) >= limits.max_connections:
                # Answer and half-close, then drain what the client sends until it hangs
                # up (or a second passes): closing with its request unread would reset
                # the connection and lose the answer.
                self._refused = True
                self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
                self.transport.write(busy)
                self.transport.write_eof()
                self._head_timer = self.loop.call_later(1.0, self.transport.close)
                return
            lingering = _LingeringTransport(
                cast(asyncio.Transport, transport),
                self.loop,
                lambda: self.conn.their_state is h11.SEND_BODY,
            )
            super().connection_made(cast(asyncio.Transport, lingering))
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                self._disarm_head_timer()
                return
            self._disarm_head_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused or getattr(self.transport, "lingering", False):
                return  # drained, unread
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm_head_timer()  # the head is in; the app's timeouts take over

        def send_400_response(self, msg: str) -> None:
            # A request h11 cannot parse (or a head over max_header_bytes): JSON like
            # every other error, not uvicorn's plain text.
            body = json.dumps(
                {"error": {"type": "invalid_request", "message": f"{msg} (malformed HTTP)"}}
            ).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
            self.transport.close()

        def eof_received(self) -> None:
            if self._refused:
                self.transport.close()
            elif isinstance(self.transport, _LingeringTransport) and self.transport.lingering:
                self.transport.abort()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_timer()  # the next request's head gets the same deadline

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


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@dataclass
class ServedApp:
    url: str
    host: str
    port: int
    _server: _Server

    def request_shutdown(self, *, force: bool = False) -> None:
        self._server.should_exit = True
        if force:
            self._server.force_exit = True


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def format_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.asynccontextmanager
async def serve_app(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    graceful_seconds: int | None = None,
    force_exit_on_close: bool = True,
    log_level: str = "warning",
    limits: SocketLimits | None = None,
) -> AsyncIterator[ServedApp]:
    """Serve `app` until the block ends (or `request_shutdown` is called)."""
    limits = limits or SocketLimits()
    sock = bind_socket(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level=log_level,
        access_log=False,
        ws="none",
        timeout_graceful_shutdown=graceful_seconds,
        http=_limited_protocol(limits),
        timeout_keep_alive=limits.keep_alive_timeout,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
    server = _Server(config)
    served = ServedApp(format_url(host, bound_port), host, bound_port, server)

    async def run() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            server.ready.set()
            sock.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await server.ready.wait()
        if not server.started:
            raise OSError(f"the HTTP server on {served.url} failed to start")
        try:
            yield served
        finally:
            served.request_shutdown(force=force_exit_on_close)
