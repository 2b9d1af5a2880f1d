"""`frontmind chat`: an interactive terminal chat, against a daemon or in-process."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import msgspec

from actors import TextDelta, ToolFinished, ToolStarted, TurnCompleted, TurnError, TurnEvent

from ._exceptions import EdgeError
from ._frontmind import Frontmind

__all__ = ["chat_in_process", "chat_remote"]

_event_decoder = msgspec.json.Decoder(TurnEvent)
PROMPT = "you> "


async def _lines(stdin: TextIO) -> AsyncIterator[str]:
    while True:
        line = await anyio.to_thread.run_sync(stdin.readline)
        if not line:
            return
        text = line.strip()
        if text in ("/quit", "/exit"):
            return
        if text:
            yield text


def _show(event: TurnEvent, out: Callable[[str], None]) -> None:
    if isinstance(event, TextDelta):
        out(event.text)
    elif isinstance(event, ToolStarted):
        out(f"\n  [tool {event.name} …]")
    elif isinstance(event, ToolFinished):
        out(f" {'failed' if event.is_error else 'done'}\n")
    elif isinstance(event, TurnCompleted):
        u = event.usage
        out(
            f"\n  (cache read {u.cache_read_input_tokens}, write {u.cache_creation_input_tokens}, "
            f"uncached {u.input_tokens}; {event.timings_ms.total:.0f} ms)\n"
        )
    elif isinstance(event, TurnError):
        out(f"\n  error ({event.type}): {event.message}\n")


def _writer(stdout: TextIO) -> Callable[[str], None]:
    def write(text: str) -> None:
        stdout.write(text)
        stdout.flush()

    return write


async def _converse(
    turns: Callable[[str], AsyncIterator[TurnEvent]], stdin: TextIO, stdout: TextIO
) -> None:
    out = _writer(stdout)
    out(PROMPT)
    async for text in _lines(stdin):
        out("frontmind> ")
        async for event in turns(text):
            _show(event, out)
        out(PROMPT)


async def chat_in_process(
    data_dir: Path,
    continuum: str,
    *,
    offline: bool,
    config_file: Path | None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> None:
    async with Frontmind.open(data_dir, config_file=config_file, offline=offline) as fm:
        await _converse(lambda text: fm.turn(continuum, text), stdin, stdout)


async def chat_remote(
    url: str,
    continuum: str,
    *,
    token: str | None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> None:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=None) as http:
        try:
            (await http.get("/healthz")).raise_for_status()
        except httpx2.HTTPError as exc:
            raise EdgeError(f"no Frontmind daemon answers at {url}: {exc}") from None

        async def turns(text: str) -> AsyncIterator[TurnEvent]:
            async with http.stream(
                "POST", f"/v1/continuums/{continuum}/turns", json={"message": text}
            ) as response:
                if response.status_code != 200:
                    error: Any = msgspec.json.decode(await response.aread())["error"]
                    yield TurnError(error["type"], error["message"])
                    return
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        yield _event_decoder.decode(line[6:])

        await _converse(turns, stdin, stdout)
