"""Breakpoints cover every request of a turn: a `pause_turn` continuation, and any request
whose last message ends in server-tool blocks, marks the last block that takes
`cache_control`, so the server tools' results are read from the cache on the next call
instead of billed uncached on every continuation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors import CacheSettings, build_request
from actors._layout import CACHEABLE_KINDS
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyRawBlock, ReplyText, ScriptedResponder
from storage import Message, RawBlock, TextBlock
from tests._harness import completed, config, frontmind, run_turn

# Room for the long search results the scripted model "writes".
CFG = config(model={"max_tokens": 32_000})

pytestmark = pytest.mark.anyio


def _search(n: int, size: int = 24_000) -> tuple[dict[str, Any], dict[str, Any]]:
    use = {
        "type": "server_tool_use",
        "id": f"srvtoolu_{n}",
        "name": "web_search",
        "input": {"query": f"cats {n}"},
    }
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": f"srvtoolu_{n}",
        "content": [
            {
                "type": "web_search_result",
                "url": f"https://example.com/{n}",
                "title": "Cats",
                "encrypted_content": "x" * size,  # a long page: thousands of tokens
                "page_age": None,
            }
        ],
    }
    return use, result


def _marks(body: dict[str, Any]) -> list[tuple[int, int, str]]:
    """(message, block, type) of every block with `cache_control`."""
    return [
        (i, j, block["type"])
        for i, message in enumerate(body["messages"])
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    ]


async def test_paused_replies_of_only_server_tool_blocks_are_read_from_cache(
    tmp_path: Path,
) -> None:
    first, second = _search(1), _search(2)
    responder = ScriptedResponder()
    responder.push(
        Reply((ReplyRawBlock(first[0]), ReplyRawBlock(first[1])), stop_reason="pause_turn"),
        Reply((ReplyRawBlock(second[0]), ReplyRawBlock(second[1])), stop_reason="pause_turn"),
        "Cats are found.",
    )
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, cfg=CFG) as fm,
    ):
        done = completed(await run_turn(fm, "c1", "find cats twice"))
        bodies = api.message_bodies()
        records = await fm.turns("c1")
    assert done.model_calls == 3
    # Each continuation marks the last block that takes cache_control: the search result
    # the paused reply ends in (the reply is nothing but server-tool blocks).
    for call in (1, 2):
        last = len(bodies[call]["messages"]) - 1
        assert (last, 1, "web_search_tool_result") in _marks(bodies[call]), call
    # Sent back as they came, the mark aside.
    sent = dict(bodies[1]["messages"][-1]["content"][1])
    assert sent.pop("cache_control") == {"ttl": "5m", "type": "ephemeral"}
    assert sent == first[1]
    calls = records[-1].call_usage
    # The second call writes the first search (thousands of tokens); the third reads it.
    assert calls[1].cache_creation_input_tokens > 5_000
    assert calls[2].cache_read_input_tokens >= (
        calls[1].cache_read_input_tokens + calls[1].cache_creation_input_tokens
    )
    assert calls[2].input_tokens < 100  # only what follows the last mark is uncached


async def test_a_paused_reply_ending_in_results_after_text_marks_the_results(
    tmp_path: Path,
) -> None:
    use, result = _search(1)
    again = _search(2)
    responder = ScriptedResponder()
    responder.push(
        Reply(
            (ReplyText("Searching."), ReplyRawBlock(use), ReplyRawBlock(result)),
            stop_reason="pause_turn",
        ),
        Reply((ReplyText("More."), ReplyRawBlock(again[0])), stop_reason="pause_turn"),
        "Done.",
    )
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, cfg=CFG) as fm,
    ):
        completed(await run_turn(fm, "c1", "look it up"))
        bodies = api.message_bodies()
        records = await fm.turns("c1")
    last = len(bodies[1]["messages"]) - 1
    tail_marks = [m for m in _marks(bodies[1]) if m[0] == last]
    assert tail_marks == [(last, 2, "web_search_tool_result")]  # not on the text before it
    # A reply ending in a server tool's use: the mark goes on that block.
    last = len(bodies[2]["messages"]) - 1
    assert [m for m in _marks(bodies[2]) if m[0] == last] == [(last, 1, "server_tool_use")]
    calls = records[-1].call_usage
    assert calls[2].cache_read_input_tokens >= (
        calls[1].cache_read_input_tokens + calls[1].cache_creation_input_tokens
    )
    assert calls[1].cache_creation_input_tokens > 5_000  # the search results, written once


def test_thinking_is_never_marked_and_a_marked_block_keeps_its_bytes() -> None:
    thinking = RawBlock("thinking", '{"type":"thinking","thinking":"hm","signature":"c2ln"}')
    image = RawBlock(
        "image", '{"type":"image","source":{"type":"url","url":"https://x.test/a.png"}}'
    )
    history = [
        Message("user", (TextBlock("hi"), image), turn_id="t1"),
        Message("assistant", (TextBlock("seen"), thinking), turn_id="t1"),
    ]
    request = build_request(
        model="claude-sonnet-4-6",
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
    assert _marks(body) == [(1, 0, "text")]  # walked back past the thinking block
    assert "thinking" not in CACHEABLE_KINDS
    assert "redacted_thinking" not in CACHEABLE_KINDS
    # An all-thinking-and-image tail: the image takes the mark, spliced in.
    tail = [Message("user", (image,)), Message("assistant", (thinking,))]
    rolled = build_request(
        model="claude-sonnet-4-6",
        max_tokens=100,
        tools=(),
        system=(),
        history=[],
        boundary=None,
        notification="",
        tail=[*tail, Message("user", (image,))],
        cache=CacheSettings(),
        rolling=True,
        previous_message_id=None,
    )
    encoded = msgspec.json.encode(rolled)
    assert image.json[:-1].encode() + b',"cache_control":{"ttl":"5m","type":"ephemeral"}}' in (
        encoded
    )
    assert rolled.breakpoints() == 1
