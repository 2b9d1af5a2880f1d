"""Serving an ASGI app with uvicorn inside our own task group.

The socket is bound (and listening) before uvicorn starts, so port 0 works and the URL
is known at once. Signals are left to the owner: uvicorn's own handlers would re-raise
SIGTERM after shutdown and make a graceful exit look like a crash.

The limits at the socket (fair shares of the connections, the header timeout, the
chunk and head size checks, the watch on clients that stop reading) are uvicorn's h11
protocol as frontmind/server/_protocol.py changes it; `SocketLimits` holds them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn

from ._protocol import SocketLimits, limited_protocol

__all__ = [
    "ServedApp",
    "SocketLimits",
    "bind_socket",
    "format_url",
    "is_loopback",
    "serve_app",
]


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

    def open_connections(self) -> int:
        """Connections not yet lost (closing ones still sending included)."""
        return len(self._server.server_state.connections)

    def write_buffered(self) -> int:
        """Bytes waiting in the connections' write buffers, not yet taken by the kernel."""
        return sum(
            protocol.transport.get_write_buffer_size()
            for protocol in list(self._server.server_state.connections)
            if getattr(protocol, "transport", None) is not None
        )

    def write_paused(self) -> int:
        """Connections whose writes are paused: their clients have not taken what was
        sent (the socket's buffers and the transport's are full)."""
        return sum(
            1
            for protocol in list(self._server.server_state.connections)
            if getattr(getattr(protocol, "flow", None), "write_paused", False)
        )

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
    """The URL to reach a server bound to `host`. Bound to every address (0.0.0.0, ::),
    it names the loopback one: the wildcard is no address a connection comes in on, so
    the edge's Host check refused every request sent to http://0.0.0.0:PORT."""
    try:
        every = ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a name, as `localhost`
        every = False
    if every:
        host = "::1" if ":" in host else "127.0.0.1"
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
        http=limited_protocol(limits),
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
