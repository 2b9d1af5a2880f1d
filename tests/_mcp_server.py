"""An MCP server for the tests, written with the `mcp` SDK; run as a child process.

    python -m tests._mcp_server [--http PORT] [--start crash|hang]

stdio by default, streamable HTTP with `--http` (port 0: a free one; the URL is printed
on stderr as `listening on URL`). Its tools cover what a client must survive: a plain
answer, an error (in its result, or a JSON-RPC error of any code and size), an image,
images and a PDF whose data is not what their type says, an image taller than the API
takes, an embedded resource and a resource link, megabytes of text, a crash in the
middle of a call, a call that never answers, a slow one, one that blocks the whole
server while it runs, a tool list that changes while connected, a gallery of many
images, its working directory and environment, and (over HTTP) the headers a call
arrived with. `--start crash` exits before
answering the handshake; `--start hang` never answers it; `--start-when FILE` exits at
start until FILE exists; `--extra-when FILE` offers one more tool if FILE exists.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import struct
import sys
import time
import zlib
from typing import Annotated

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

# A 1×1 transparent PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

server = MCPServer("tests", instructions="A server for Frontmind's tests.")


@server.tool(description="Echo the text back, with the server's pid.")
def echo(text: Annotated[str, Field(description="What to echo.")]) -> str:
    return f"echo: {text} (pid {os.getpid()})"


@server.tool(description="Its working directory and the environment it was started with.")
def environment() -> str:
    return json.dumps({"cwd": os.getcwd(), "env": dict(os.environ)})


@server.tool(description="Always fails.")
def fail(reason: str = "on purpose") -> str:
    raise ValueError(f"failed {reason}")


@server.tool(description="Refuses the call with a JSON-RPC error of `size` characters.")
def refuse(size: int = 10, code: int = -32001) -> str:
    raise MCPError(code=code, message="refused: " + "r" * size)


@server.tool(description="A chart, as an image.")
def chart() -> list[TextContent | ImageContent]:
    return [
        TextContent(text="the chart:"),
        ImageContent(data=PIXEL, mime_type="image/png"),
    ]


@server.tool(description="Pictures and a PDF whose data is not what their type says.")
def mislabeled() -> list[TextContent | ImageContent | EmbeddedResource]:
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(64)).decode()
    return [
        TextContent(text="three attachments:"),
        ImageContent(data=jpeg, mime_type="image/png"),  # a JPEG, said to be a PNG
        ImageContent(data="not base64 at all!", mime_type="image/png"),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///a.pdf", blob=PIXEL, mime_type="application/pdf"
            )
        ),
        ImageContent(data=PIXEL, mime_type="image/png"),  # a good one, kept
    ]


def _png(width: int, height: int) -> str:
    """A black PNG of this size, as base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    rows = zlib.compress((b"\x00" + bytes(width)) * height)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


@server.tool(description="A screenshot of a page as tall as `height` pixels, and a thumbnail.")
def screenshot(height: int = 9000) -> list[TextContent | ImageContent]:
    return [
        TextContent(text="the page and its thumbnail:"),
        ImageContent(data=_png(4, height), mime_type="image/png"),
        ImageContent(data=PIXEL, mime_type="image/png"),
    ]


@server.tool(description="A report of `pages` pages, as an embedded PDF.")
def report(pages: int = 150) -> list[TextContent | EmbeddedResource]:
    body = b"".join(b"%d 0 obj << /Type /Page >> endobj\n" % (i + 3) for i in range(pages))
    pdf = b"%PDF-1.4\n" + body + b"%%EOF\n"
    blob = base64.b64encode(pdf).decode()
    return [
        TextContent(text=f"the report, {pages} pages:"),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///report.pdf", blob=blob, mime_type="application/pdf"
            )
        ),
    ]


@server.tool(description="Files, embedded, and a link to another.")
def files() -> list[EmbeddedResource | ResourceLink]:
    return [
        EmbeddedResource(
            resource=TextResourceContents(
                uri="file:///notes.txt", text="buy milk", mime_type="text/plain"
            )
        ),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///archive.zip", blob=PIXEL, mime_type="application/zip"
            )
        ),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///pixel.png", blob=PIXEL, mime_type="image/png"
            )
        ),
        ResourceLink(uri="file:///report.pdf", name="report", mime_type="application/pdf"),
    ]


@server.tool(description="Megabytes of text.")
def flood(megabytes: int = 3) -> str:
    return "x" * (megabytes * 1024 * 1024)


@server.tool(description="Exits the server in the middle of the call.")
def crash() -> str:
    sys.stderr.write("crashing now\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Never answers.")
async def hang() -> str:
    await anyio.sleep_forever()
    return "never"  # pragma: no cover


@server.tool(description="Answers after a while.")
async def slow(seconds: float = 0.2) -> str:
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Answers after a while, its event loop blocked meanwhile.")
async def block(seconds: float = 1.0) -> str:
    # A server that does its work in its own loop (as many do) answers nothing else
    # until the call is over: a check sent meanwhile waits too.
    sys.stderr.write(f"blocking for {seconds}s\n")
    sys.stderr.flush()
    time.sleep(seconds)  # noqa: ASYNC251 - the point: the loop answers nothing meanwhile
    return f"blocked {seconds}"


@server.tool(description="Many pictures.")
def gallery(count: int = 25) -> list[TextContent | ImageContent]:
    return [
        TextContent(text=f"{count} pictures:"),
        *(ImageContent(data=PIXEL, mime_type="image/png") for _ in range(count)),
    ]


@server.tool(description="The HTTP headers this call arrived with (none on stdio).")
def headers(ctx: Context) -> str:
    found = ctx.headers or {}
    return "\n".join(f"{k}: {v}" for k, v in sorted(found.items()) if k.startswith("x-"))


def _extra() -> str:
    return "I was added later."


@server.tool(description="Adds a tool named `extra` and tells the client the list changed.")
async def grow(ctx: Context) -> str:
    server.add_tool(_extra, name="extra", description="Added while connected.")
    await ctx.request_context.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "grown"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--start", choices=["crash", "hang"], default=None)
    parser.add_argument("--start-when", default=None, help="crash at start unless this file exists")
    parser.add_argument("--extra-when", default=None, help="offer `extra` if this file exists")
    args = parser.parse_args()
    if args.extra_when and os.path.exists(args.extra_when):
        server.add_tool(_extra, name="extra", description="Offered from the start.")
    sys.stderr.write(f"test server starting (pid {os.getpid()})\n")
    sys.stderr.flush()
    if args.start == "crash" or (args.start_when and not os.path.exists(args.start_when)):
        sys.exit("test server: no API key given, not starting")  # its last words, exit 1
    if args.start == "hang":
        while True:
            anyio.run(anyio.sleep_forever)
    if args.http is None:
        server.run("stdio")
        return
    port = args.http
    if port == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    sys.stderr.write(f"listening on http://127.0.0.1:{port}/mcp\n")
    sys.stderr.flush()
    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
