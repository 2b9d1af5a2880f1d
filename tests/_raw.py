"""Raw HTTP/1.1 over a socket, for what an HTTP client library will not send."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.abc import SocketStream


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


async def read_response(stream: SocketStream) -> RawResponse:
    """Read one response (its body by Content-Length); 15 s at most."""
    data = b""
    with anyio.fail_after(15):
        while b"\r\n\r\n" not in data:
            data += await stream.receive()
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            body += await stream.receive()
    return RawResponse(status, headers, body)


async def raw_request(url: str, request: bytes) -> RawResponse:
    host, port = address(url)
    async with await anyio.connect_tcp(host, port) as stream:
        await stream.send(request)
        return await read_response(stream)


async def closed_by_server(stream: SocketStream, within: float) -> bool:
    """True once the server has closed the stream (EOF or reset), False after `within`."""
    with anyio.move_on_after(within):
        try:
            while await stream.receive():
                pass
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return True
    return False


async def answer_or_close(stream: SocketStream) -> bytes:
    """What the server sends before it closes the stream (b"" if it closes silently)."""
    data = b""
    try:
        while True:
            data += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
        return data
