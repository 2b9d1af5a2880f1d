"""Helpers to run Frontmind against a local Messages API server in tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from actors import (
    AnthropicModel,
    Settings,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnEvent,
    UserInput,
)
from frontmind import Config, Frontmind
from frontmind.localapi import LocalMessagesAPI

START = 1_795_000_000.0  # Wed 18 Nov 2026, 11:06:40 UTC


class FakeClock:
    """The app's wall clock, moved by the test."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def config(**sections: Any) -> Config:
    """A Config with some sections replaced, e.g. config(tools={"max_iterations": 3})."""
    base = msgspec.to_builtins(Config())
    for key, value in sections.items():
        if isinstance(value, dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return msgspec.convert(base, Config)


@asynccontextmanager
async def frontmind(
    api: LocalMessagesAPI,
    data_dir: Path,
    *,
    cfg: Settings | None = None,
    clock: FakeClock | None = None,
    max_retries: int = 2,
    tools: Sequence[Callable[..., Any]] = (),
) -> AsyncIterator[Frontmind]:
    model = AnthropicModel(
        api_key="test-key", base_url=api.base_url, max_retries=max_retries, timeout=10
    )
    try:
        async with Frontmind.open(
            data_dir,
            cfg if isinstance(cfg, Config) else config(),
            model=model,
            clock=clock or FakeClock(),
            tools=tools,
        ) as fm:
            yield fm
    finally:
        await model.aclose()


async def run_turn(fm: Frontmind, continuum: str, text: UserInput) -> list[TurnEvent]:
    return [event async for event in fm.turn(continuum, text)]


def tool_finishes(events: list[TurnEvent]) -> list[ToolFinished]:
    """Each tool call's finish, in the order the calls were made: the calls of one reply
    run side by side and finish in any order."""
    order = [e.id for e in events if isinstance(e, ToolStarted)]
    done = {e.id: e for e in events if isinstance(e, ToolFinished)}
    return [done[i] for i in order if i in done]


def completed(events: list[TurnEvent]) -> TurnCompleted:
    last = events[-1]
    assert isinstance(last, TurnCompleted), last
    return last


def failed(events: list[TurnEvent]) -> TurnError:
    last = events[-1]
    assert isinstance(last, TurnError), last
    return last


def cache_marks(body: Any) -> list[tuple[str, int, int, str]]:
    """Where the breakpoints are: (section, message index, block index, ttl)."""
    marks = []
    for i, block in enumerate(body.get("system", [])):
        if "cache_control" in block:
            marks.append(("system", -1, i, block["cache_control"]["ttl"]))
    for m, message in enumerate(body["messages"]):
        for b, block in enumerate(message["content"]):
            if "cache_control" in block:
                marks.append(("messages", m, b, block["cache_control"]["ttl"]))
    return marks


def unmarked(messages: list[Any]) -> list[Any]:
    """The messages without their cache breakpoints (which move every turn)."""
    return [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in messages
    ]
