"""Newer blocks a live conversation carries back: `tool_addition`, `advisor_tool_result`
and `text_editor_code_execution_tool_result` are accepted by the local Messages API (the
beta ones on the beta client), take `cache_control`, and replay: the same history sent
again is read from the cache. Frontmind's layout marks them (and `compaction` blocks),
as the docs list them among the blocks that take `cache_control`."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import msgspec
import pytest

from actors import CacheSettings, build_request
from actors._layout import CACHEABLE_KINDS
from frontmind.localapi import LocalMessagesAPI
from storage import Message, RawBlock, TextBlock

pytestmark = pytest.mark.anyio

MODEL = "claude-opus-4-8"
MARK: Any = {"type": "ephemeral"}
TOOLS: Any = [
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "advisor_20260301", "name": "advisor", "model": MODEL},
    {"name": "lookup", "description": "Look a word up. " * 300, "input_schema": {"type": "object"}},
]
EDITOR_RESULT: Any = {
    "type": "text_editor_code_execution_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": {
        "type": "text_editor_code_execution_view_result",
        "content": "def main():\n    return 1\n" * 40,
        "file_type": "text",
    },
}
ADVISOR_RESULT: Any = {
    "type": "advisor_tool_result",
    "tool_use_id": "srvtoolu_2",
    "content": {"type": "advisor_result", "text": "Return early; keep main small."},
}
ADDITION: Any = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "lookup"}}


def history(*, marked: bool) -> list[Any]:
    def mark(block: dict[str, Any]) -> dict[str, Any]:
        return {**block, "cache_control": MARK} if marked else block

    return [
        {"role": "user", "content": "fix main.py"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "text_editor_code_execution",
                    "input": {"command": "view", "path": "main.py"},
                },
                mark(EDITOR_RESULT),
                {"type": "server_tool_use", "id": "srvtoolu_2", "name": "advisor", "input": {}},
                mark(ADVISOR_RESULT),
                {"type": "text", "text": "Fixed."},
            ],
        },
        {"role": "user", "content": [mark(ADDITION), {"type": "text", "text": "now look it up"}]},
    ]


async def test_the_newer_blocks_are_accepted_marked_and_replayed() -> None:
    async with (
        LocalMessagesAPI() as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as sdk,
    ):
        first = await sdk.beta.messages.create(
            model=MODEL, max_tokens=64, tools=TOOLS, messages=history(marked=True), betas=["x-1"]
        )
        again = await sdk.beta.messages.create(
            model=MODEL, max_tokens=64, tools=TOOLS, messages=history(marked=True), betas=["x-1"]
        )
        written = first.usage.cache_creation_input_tokens or 0
        assert written > 0  # the breakpoints wrote, the last one on the tool_addition
        # The replay reads everything up to it; only the text after it is uncached.
        assert again.usage.cache_read_input_tokens == written
        assert again.usage.input_tokens == first.usage.input_tokens
        assert first.usage.input_tokens < 20
        # The beta blocks are the beta client's; the text editor's result is not beta.
        with pytest.raises(anthropic.BadRequestError, match=r"advisor_tool_result.*beta block"):
            await sdk.messages.create(
                model=MODEL, max_tokens=64, tools=TOOLS, messages=history(marked=False)
            )
        plain: Any = history(marked=False)
        plain[1]["content"] = [*plain[1]["content"][:2], {"type": "text", "text": "Fixed."}]
        plain[2] = {"role": "user", "content": "thanks"}
        reply = await sdk.messages.create(model=MODEL, max_tokens=64, tools=TOOLS, messages=plain)
        assert reply.stop_reason == "end_turn"


@pytest.mark.parametrize("kind", ["compaction", "advisor_tool_result", "tool_addition"])
def test_the_layout_marks_the_blocks_that_take_cache_control(kind: str) -> None:
    block = {
        "compaction": {"type": "compaction", "content": "A summary."},
        "advisor_tool_result": ADVISOR_RESULT,
        "tool_addition": ADDITION,
    }[kind]
    assert kind in CACHEABLE_KINDS
    history = [
        Message("user", (TextBlock("hi"),), turn_id="t1"),
        Message("assistant", (TextBlock("seen"), RawBlock(kind, json.dumps(block))), turn_id="t1"),
    ]
    request = build_request(
        model=MODEL,
        max_tokens=100,
        tools=(),
        system=(),
        history=history,
        boundary=None,
        notification="",
        tail=[Message("user", (TextBlock("next"),))],
        cache=CacheSettings(),
        rolling=False,
        previous_message_id=None,
    )
    body = json.loads(msgspec.json.encode(request))
    marked = [
        (i, j, b["type"])
        for i, m in enumerate(body["messages"])
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marked == [(1, 1, kind)]  # the last block itself, not the text before it
