"""A tiny real HTTP server for tests that need an answer no local server gives (raw CRLF
streams, a Models API): one connection per request, closed after the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

__all__ = ["read_request", "tiny_server"]


async def read_request(client: anyio.abc.SocketStream) -> tuple[bytes, bytes]:
    """The request's head and its body (by its content-length)."""
    request = b""
    while b"\r\n\r\n" not in request:
        request += await client.receive()
    head, _, body = request.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += await client.receive()
    return head, body


@asynccontextmanager
async def tiny_server(
    answer: Callable[[anyio.abc.SocketStream], Awaitable[None]],
) -> AsyncIterator[str]:
    """Serve `answer` on a loopback port; yields the base URL."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            await answer(client)

    async with listener, anyio.create_task_group() as tg:  # closed after the server stops
        tg.start_soon(listener.serve, serve)
        port = listener.extra(anyio.abc.SocketAttribute.local_address)[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tg.cancel_scope.cancel()
