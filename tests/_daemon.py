"""Starting the real daemon (or any `frontmind` command) as a child process."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from actors import SSEDecoder

ROOT = Path(__file__).resolve().parent.parent
COMMAND = [sys.executable, "-m", "frontmind"]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FRONTMIND_"))}
    env.update(extra)
    return env


@dataclass
class Daemon:
    url: str
    process: Process
    stderr: BufferedByteReceiveStream

    def client(self, **options: Any) -> httpx2.AsyncClient:
        options.setdefault("base_url", self.url)
        return httpx2.AsyncClient(timeout=30, **options)

    async def read_stderr(self) -> bytes:
        """Everything the process wrote to stderr (call after it has exited)."""
        chunks = []
        while True:
            try:
                chunks.append(await self.stderr.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return b"".join(chunks)

    async def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            return await self.process.wait()


@asynccontextmanager
async def daemon(data_dir: Path, *args: str, **env: str) -> AsyncIterator[Daemon]:
    command = [*COMMAND, "serve", "--port", "0", "--offline", "--data-dir", str(data_dir), *args]
    process = await anyio.open_process(command, cwd=ROOT, env=child_env(**env))
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        stdout = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(30):
            line = await stdout.receive_until(b"\n", 1000)
        url = line.decode().strip()
        assert url.startswith("http://"), url
        yield Daemon(url, process, BufferedByteReceiveStream(process.stderr))
    finally:
        await reap(process)


async def reap(process: Process) -> None:
    """Kill the child if it still runs, wait for it and close its pipes."""
    if process.returncode is None:
        process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()
    await process.aclose()


async def run_cli(*args: str, stdin: bytes | None = None, **env: str) -> tuple[int, str, str]:
    result = await anyio.run_process(
        [*COMMAND, *args], input=stdin, cwd=ROOT, env=child_env(**env), check=False
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


async def sse_events(response: httpx2.Response) -> AsyncIterator[tuple[str, Any]]:
    """(name, data) of each event, read as bytes: a text line reader would also cut at
    the U+2028, U+2029 and U+0085 a reply may hold raw."""
    decoder = SSEDecoder()
    async for chunk in response.aiter_bytes():
        for name, data in decoder.feed(chunk):
            yield name, json.loads(data)


async def turn(client: httpx2.AsyncClient, continuum: str, text: str) -> list[tuple[str, Any]]:
    async with client.stream(
        "POST", f"/v1/continuums/{continuum}/turns", json={"message": text}
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [event async for event in sse_events(response)]
