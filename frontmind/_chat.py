"""`frontmind chat`: an interactive terminal chat, against a daemon or in-process."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TextIO

import anyio

from actors import (
    FrontmindError,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnEvent,
)
from storage import StorageError

from ._client import Client
from ._frontmind import Frontmind

__all__ = ["chat_in_process", "chat_remote"]

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
    async with Client(url, token=token) as client:
        await client.health()

        async def turns(text: str) -> AsyncIterator[TurnEvent]:
            try:
                async for event in client.turn(continuum, text):
                    yield event
            except (
                FrontmindError,
                StorageError,
            ) as exc:  # refused (busy, bad input): shown, chat goes on
                yield TurnError(getattr(exc, "kind", "error"), str(exc))

        await _converse(turns, stdin, stdout)
