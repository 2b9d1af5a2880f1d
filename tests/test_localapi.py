"""The local Messages API server, driven through the real `anthropic` SDK (and raw HTTP
for malformed input). Cache numbers are computed by hand from the documented estimator:
a text block of N ASCII bytes is ceil(N / 4) + 3 tokens."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import anthropic
import anyio
import httpx2
import pytest

from frontmind.localapi import (
    DefaultResponder,
    DropConnection,
    Latency,
    LocalMessagesAPI,
    ManualClock,
    MessagesRequest,
    MidStreamError,
    Reply,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
    Stall,
    StatusFault,
)

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"  # minimum cacheable prefix: 1024 estimated tokens
SYSTEM = "S" * 4400  # 1100 + 3 = 1103 tokens
USER = "u" * 40  # 13 tokens
ASSISTANT = "a" * 80  # 23 tokens


def tok(text: str) -> int:
    return -(-len(text.encode()) // 4) + 3


def sys_blocks(text: str = SYSTEM, ttl: str = "5m") -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral", "ttl": ttl}}]


def text(content: str, cached: bool = False, ttl: str = "5m") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": content}
    if cached:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return block


def conversation(turn: int) -> list[dict[str, Any]]:
    """Turn n (from 1): n-1 full exchanges, breakpoint on the last assistant, then a user."""
    messages: list[dict[str, Any]] = []
    for i in range(turn - 1):
        messages.append({"role": "user", "content": [text(USER)]})
        messages.append({"role": "assistant", "content": [text(ASSISTANT, i == turn - 2)]})
    messages.append({"role": "user", "content": [text(USER)]})
    return messages


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
async def api(clock: ManualClock) -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI(clock=clock, token_counts="plain") as server:
        yield server


async def create(client: anthropic.AsyncAnthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 64)
    return await client.messages.create(**kwargs)


def first_text(message: Any) -> str:
    block = message.content[0]
    assert block.type == "text"
    return str(block.text)


def usage_of(message: Any) -> tuple[int, int, int]:
    u = message.usage
    return u.input_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens


# -- cache accounting ----------------------------------------------------------------


async def test_first_request_writes_system_and_second_reads_it(
    client: anthropic.AsyncAnthropic,
) -> None:
    first = await create(client, system=sys_blocks(), messages=conversation(1))
    assert usage_of(first) == (13, 1103, 0)
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == 1103
    assert first.id.startswith("msg_")
    second = await create(client, system=sys_blocks(), messages=conversation(1))
    assert usage_of(second) == (13, 0, 1103)


async def test_growing_conversation_reads_all_but_the_newest_exchange(
    client: anthropic.AsyncAnthropic,
) -> None:
    exchange = tok(USER) + tok(ASSISTANT)  # 36
    assert exchange == 36
    previous_read = previous_write = None
    for turn in range(1, 8):
        m = await create(client, system=sys_blocks(), messages=conversation(turn))
        uncached, written, read = usage_of(m)
        assert uncached == 13  # only the new user message
        if turn == 1:
            assert (written, read) == (1103, 0)
        else:
            assert written == exchange
            assert read == 1103 + exchange * (turn - 2)
            assert previous_read is not None
            assert previous_write is not None
            assert read == previous_read + previous_write
        previous_read, previous_write = read, written


async def test_system_change_invalidates_history_and_says_so(
    client: anthropic.AsyncAnthropic,
) -> None:
    first = await create(
        client,
        system=sys_blocks(),
        messages=conversation(3),
        diagnostics={"previous_message_id": None},
    )
    changed = await create(
        client,
        system=sys_blocks("T" + SYSTEM[1:]),
        messages=conversation(3),
        diagnostics={"previous_message_id": first.id},
    )
    assert usage_of(changed) == (13, 1103 + 72, 0)
    reason = changed.diagnostics.cache_miss_reason
    assert reason.type == "system_changed"
    assert reason.cache_missed_input_tokens == 1103 + 72


async def test_history_change_reports_messages_changed(client: anthropic.AsyncAnthropic) -> None:
    first = await create(
        client,
        system=sys_blocks(),
        messages=conversation(3),
        diagnostics={"previous_message_id": None},
    )
    edited = conversation(3)
    edited[1] = {"role": "assistant", "content": [text("b" * 80)]}
    second = await create(
        client,
        system=sys_blocks(),
        messages=edited,
        diagnostics={"previous_message_id": first.id},
    )
    assert usage_of(second) == (13, 72, 1103)
    reason = second.diagnostics.cache_miss_reason
    assert reason.type == "messages_changed"
    assert reason.cache_missed_input_tokens == 72


async def test_appended_turn_reports_no_miss_and_unknown_id_is_not_found(
    client: anthropic.AsyncAnthropic,
) -> None:
    first = await create(
        client,
        system=sys_blocks(),
        messages=conversation(2),
        diagnostics={"previous_message_id": None},
    )
    second = await create(
        client,
        system=sys_blocks(),
        messages=conversation(3),
        diagnostics={"previous_message_id": first.id},
    )
    assert second.diagnostics.cache_miss_reason is None
    third = await create(
        client,
        system=sys_blocks(),
        messages=conversation(3),
        diagnostics={"previous_message_id": "msg_unknown"},
    )
    assert third.diagnostics.cache_miss_reason.type == "previous_message_not_found"
    model = await create(
        client,
        model="claude-opus-4-8",
        system=sys_blocks(),
        messages=conversation(3),
        diagnostics={"previous_message_id": third.id},
    )
    assert model.diagnostics.cache_miss_reason.type == "model_changed"


async def test_a_request_without_diagnostics_leaves_no_fingerprint(
    client: anthropic.AsyncAnthropic,
) -> None:
    # "It stores nothing for requests that omit the object" (cache diagnostics): a
    # request naming one of those is answered as naming an unknown id, not compared.
    silent = await create(client, system=sys_blocks(), messages=conversation(2))
    assert getattr(silent, "diagnostics", None) is None
    later = await create(
        client,
        system=sys_blocks("T" + SYSTEM[1:]),
        messages=conversation(3),
        diagnostics={"previous_message_id": silent.id},
    )
    assert later.diagnostics.cache_miss_reason.type == "previous_message_not_found"
    # A request that sends the object (with no id to compare with) leaves one.
    asked = await create(
        client,
        system=sys_blocks(),
        messages=conversation(2),
        diagnostics={"previous_message_id": None},
    )
    assert asked.diagnostics.cache_miss_reason is None
    compared = await create(
        client,
        system=sys_blocks("T" + SYSTEM[1:]),
        messages=conversation(3),
        diagnostics={"previous_message_id": asked.id},
    )
    assert compared.diagnostics.cache_miss_reason.type == "system_changed"


def _many_blocks(extra: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [text(USER)]},
        {"role": "assistant", "content": [text(ASSISTANT)]},
        {"role": "user", "content": [text(f"block {i:03d} " + "x" * 20) for i in range(extra)]},
        {"role": "assistant", "content": [text(ASSISTANT, cached=True)]},
        {"role": "user", "content": [text(USER)]},
    ]


async def test_more_than_twenty_blocks_between_breakpoints_miss(
    client: anthropic.AsyncAnthropic,
) -> None:
    head = [
        {"role": "user", "content": [text(USER)]},
        {"role": "assistant", "content": [text(ASSISTANT, cached=True)]},
        {"role": "user", "content": [text(USER)]},
    ]
    await create(client, system=sys_blocks(), messages=head)
    # 18 new blocks + the assistant = 19 back to the entry: found.
    near = await create(client, system=sys_blocks(), messages=_many_blocks(18))
    assert near.usage.cache_read_input_tokens == 1103 + 36
    # 21 new blocks + the assistant: the entry is 22 blocks back, past the lookback.
    far = await create(client, system=sys_blocks(), messages=_many_blocks(21))
    assert far.usage.cache_read_input_tokens == 1103


async def test_ttl_expires_from_last_use_and_hits_refresh(
    client: anthropic.AsyncAnthropic, clock: ManualClock
) -> None:
    await create(client, system=sys_blocks(), messages=conversation(1))
    clock.advance(299)
    assert usage_of(await create(client, system=sys_blocks(), messages=conversation(1)))[2] == 1103
    clock.advance(299)  # 598 s after the write, 299 s after the last hit
    assert usage_of(await create(client, system=sys_blocks(), messages=conversation(1)))[2] == 1103
    clock.advance(301)
    expired = await create(client, system=sys_blocks(), messages=conversation(1))
    assert usage_of(expired) == (13, 1103, 0)
    # A 1h mark on a prefix read from the 5m entry writes nothing (only what lies after
    # the highest hit is billed as a write), so the entry stays a 5m one.
    marked = await create(client, system=sys_blocks(ttl="1h"), messages=conversation(1))
    assert usage_of(marked) == (13, 0, 1103)
    clock.advance(301)
    rewritten = await create(client, system=sys_blocks(ttl="1h"), messages=conversation(1))
    assert usage_of(rewritten) == (13, 1103, 0)
    assert rewritten.usage.cache_creation.ephemeral_1h_input_tokens == 1103
    clock.advance(3000)
    long_lived = await create(client, system=sys_blocks(ttl="1h"), messages=conversation(1))
    assert usage_of(long_lived) == (13, 0, 1103)


async def test_a_delta_written_at_1h_after_a_5m_hit_keeps_the_whole_prefix_for_an_hour(
    client: anthropic.AsyncAnthropic, clock: ManualClock
) -> None:
    await create(client, system=sys_blocks(), messages=conversation(1))  # system at 5m
    clock.advance(60)
    messages = [
        {"role": "user", "content": [text(USER)]},
        {"role": "assistant", "content": [text(ASSISTANT, cached=True, ttl="1h")]},
        {"role": "user", "content": [text(USER)]},
    ]
    delta = await create(client, system=sys_blocks(ttl="1h"), messages=messages)
    # Only what lies after the hit is written, and at 1h: 13 + 23 tokens.
    assert usage_of(delta) == (13, 36, 1103)
    assert delta.usage.cache_creation.ephemeral_1h_input_tokens == 36
    clock.advance(1800)  # the 5m system entry is long gone; the 1h entry holds it all
    later = await create(client, system=sys_blocks(ttl="1h"), messages=messages)
    assert usage_of(later) == (13, 0, 1103 + 36)


async def test_a_message_resent_without_its_breakpoint_is_read_only_up_to_the_system(
    client: anthropic.AsyncAnthropic,
) -> None:
    marked = conversation(2)
    first = await create(client, system=sys_blocks(), messages=marked)
    assert usage_of(first) == (13, 1103 + 36, 0)
    unmarked = [marked[0], {"role": "assistant", "content": [text(ASSISTANT)]}, marked[2]]
    second = await create(client, system=sys_blocks(), messages=unmarked)
    assert usage_of(second) == (36 + 13, 0, 1103)
    again = await create(client, system=sys_blocks(), messages=marked)
    assert usage_of(again) == (13, 0, 1103 + 36)


async def test_kept_message_blocks_follow_the_breakpoints_and_the_prefix_before_them(
    clock: ManualClock, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    """The server keeps each message's prefix blocks between requests (calibrated
    counts): the same text at the same place without its `cache_control` is no
    breakpoint any more, and after another system prompt it is another prefix."""
    async with LocalMessagesAPI(clock=clock) as server:
        client = clients(server.base_url)
        marked = conversation(2)
        first = await create(client, system=sys_blocks(), messages=marked)
        _, written, _ = usage_of(first)
        system_only = await create(client, system=sys_blocks(), messages=conversation(1))
        system_tokens = usage_of(system_only)[2]
        assert 0 < system_tokens < written
        unmarked = [marked[0], {"role": "assistant", "content": [text(ASSISTANT)]}, marked[2]]
        second = await create(client, system=sys_blocks(), messages=unmarked)
        assert usage_of(second)[1:] == (0, system_tokens)
        assert sum(usage_of(second)) == sum(usage_of(first))
        again = await create(client, system=sys_blocks(), messages=marked)
        assert usage_of(again)[1:] == (0, written)
        for budget in (1024, 2048):  # the same weight, another messages prefix
            thinking = await create(
                client,
                system=sys_blocks(),
                messages=marked,
                max_tokens=4096,
                thinking={"type": "enabled", "budget_tokens": budget},
            )
            assert usage_of(thinking)[2] == system_tokens, "the settings re-write the messages"
        other = await create(client, system=sys_blocks("T" * 4400), messages=marked)
        assert usage_of(other)[2] == 0, "another system prompt: nothing before it is read"
        assert usage_of(other)[1] == written


async def test_per_model_minimum_cacheable_prefix(client: anthropic.AsyncAnthropic) -> None:
    short = "S" * 4000  # 1003 tokens: under sonnet's 1024
    below = await create(client, system=sys_blocks(short), messages=conversation(1))
    assert usage_of(below) == (1003 + 13, 0, 0)
    haiku = await create(
        client, model="claude-haiku-4-5", system=sys_blocks(), messages=conversation(1)
    )
    assert usage_of(haiku) == (1103 + 13, 0, 0)  # haiku 4.5 needs 4096
    sonnet = await create(client, system=sys_blocks(), messages=conversation(1))
    assert usage_of(sonnet) == (13, 1103, 0)


async def test_both_ttls_in_the_usage_split(client: anthropic.AsyncAnthropic) -> None:
    messages = conversation(2)
    m = await create(client, system=sys_blocks(ttl="1h"), messages=messages)
    assert m.usage.cache_creation.ephemeral_1h_input_tokens == 1103
    assert m.usage.cache_creation.ephemeral_5m_input_tokens == 36
    assert usage_of(m) == (13, 1139, 0)


# -- streaming ----------------------------------------------------------------------


async def test_stream_through_sdk_matches_non_streaming(client: anthropic.AsyncAnthropic) -> None:
    request: Any = {"system": sys_blocks(), "messages": conversation(1)}
    async with client.messages.stream(model=MODEL, max_tokens=64, **request) as stream:
        deltas = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(deltas) == first_text(final)
    assert first_text(final).startswith("You said:")
    assert usage_of(final) == (13, 1103, 0)
    assert final.stop_reason == "end_turn"


async def test_raw_stream_has_named_events_in_order(api: LocalMessagesAPI) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "remember that tea is green"}],
        "tools": [{"name": "remember", "input_schema": {"type": "object"}}],
    }
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            f"{api.base_url}/v1/messages",
            json=body,
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        )
    assert response.headers["request-id"].startswith("req_")
    events = [chunk for chunk in response.text.split("\n\n") if chunk.strip()]
    names = [e.split("\n")[0].removeprefix("event: ") for e in events]
    import json

    for e in events:
        name, data = e.split("\n")
        assert json.loads(data.removeprefix("data: "))["type"] == name.removeprefix("event: ")
    assert names[0] == "message_start"
    assert names[1] == "ping"
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    assert "input_json_delta" in response.text
    assert '"stop_reason":"tool_use"' in response.text


async def test_tool_use_from_scripted_responder_and_max_tokens(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> None:
    script = ScriptedResponder()
    script.push(
        Reply((ReplyText("Let me check."), ReplyToolUse("lookup", {"q": "x" * 30}, "toolu_1"))),
        Reply((ReplyText("word " * 200),)),
    )
    async with LocalMessagesAPI(responder=script, token_counts="plain") as api:
        client = clients(api.base_url, max_retries=0)
        tools: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]
        async with client.messages.stream(
            model=MODEL,
            max_tokens=64,
            tools=tools,
            messages=[{"role": "user", "content": "go"}],
        ) as stream:
            first = await stream.get_final_message()
        assert first.stop_reason == "tool_use"
        tool_use: Any = first.content[1]
        assert tool_use.input == {"q": "x" * 30}
        second = await create(client, messages=[{"role": "user", "content": "long"}], max_tokens=10)
        assert second.stop_reason == "max_tokens"
        assert second.usage.output_tokens <= 10
        with pytest.raises(anthropic.InternalServerError, match="no reply left"):
            await create(client, messages=[{"role": "user", "content": "more"}])
        assert len(script.requests) == 3


async def test_the_default_reply_follows_tool_choice(client: anthropic.AsyncAnthropic) -> None:
    """Docs: tool use, "Forcing tool use"
    (https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use):
    `any` must use one of the tools, `tool` that one, `none` none; with `any` or `tool`
    the assistant turn is prefilled, so no text comes before the tool_use blocks."""
    tools: Any = [
        {"name": "lookup", "input_schema": {"type": "object"}},
        {
            "name": "weather",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    ]
    hi: Any = [{"role": "user", "content": "hello there"}]
    forced = await create(client, tools=tools, messages=hi, tool_choice={"type": "any"})
    assert forced.stop_reason == "tool_use"
    assert [b.type for b in forced.content] == ["tool_use"]
    named = await create(
        client, tools=tools, messages=hi, tool_choice={"type": "tool", "name": "weather"}
    )
    assert named.stop_reason == "tool_use"
    assert [b.type for b in named.content] == ["tool_use"]
    call: Any = named.content[0]
    assert call.name == "weather"
    assert "city" in call.input
    asked: Any = [{"role": "user", "content": "use lookup please"}]
    unforced = await create(client, tools=tools, messages=asked, tool_choice={"type": "none"})
    assert unforced.stop_reason == "end_turn"
    assert [b.type for b in unforced.content] == ["text"]
    chosen = await create(client, tools=tools, messages=asked, tool_choice={"type": "any"})
    assert [b.name for b in chosen.content if b.type == "tool_use"] == ["lookup"]


async def test_count_tokens_matches_the_estimator(client: anthropic.AsyncAnthropic) -> None:
    request: Any = {"system": sys_blocks(), "messages": conversation(1)}
    counted = await client.messages.count_tokens(model=MODEL, **request)
    assert counted.input_tokens == 1103 + 13


# -- validation -----------------------------------------------------------------------


async def raw(api: LocalMessagesAPI, body: Any, **headers: str) -> httpx2.Response:
    base = {"x-api-key": "k", "anthropic-version": "2026-10-21", "content-type": "application/json"}
    base.update(headers)
    content = body if isinstance(body, bytes) else None
    async with httpx2.AsyncClient() as http:
        return await http.post(
            f"{api.base_url}/v1/messages",
            headers=base,
            content=content,
            json=None if content is not None else body,
        )


GOOD: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"messages": [{"role": "user", "content": [text("a", True)] * 5}]}, "Found 5"),
        (
            {
                "system": sys_blocks(ttl="5m"),
                "messages": [{"role": "user", "content": [text("a", True, "1h")]}],
            },
            "must not come after",
        ),
        ({"messages": [{"role": "user", "content": ""}]}, "must be non-empty"),
        ({"messages": [{"role": "user", "content": [text("  \n ")]}]}, "non-whitespace"),
        ({"messages": [{"role": "user", "content": []}]}, "non-empty content"),
        ({"messages": []}, "at least one message"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
            "must end with a user message",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "toolu_9", "name": "t", "input": {}}
                        ],
                    },
                    {"role": "user", "content": "no result"},
                ]
            },
            "toolu_9",
        ),
        ({"temperature": 0.5}, "temperature"),
        ({"top_k": 5}, "top_k"),
        ({"model": None}, "model"),
        ({"max_tokens": None}, "max_tokens"),
    ],
)
async def test_bad_requests_get_the_api_error_shape(
    api: LocalMessagesAPI, patch: dict[str, Any], fragment: str
) -> None:
    body = {**GOOD, **patch}
    body = {k: v for k, v in body.items() if v is not None}
    response = await raw(api, body)
    assert response.status_code == 400
    payload = response.json()
    assert payload["type"] == "error"
    assert payload["error"]["type"] == "invalid_request_error"
    assert fragment in payload["error"]["message"]
    assert response.headers["request-id"] == payload["request_id"]


async def test_malformed_json_auth_and_version(api: LocalMessagesAPI) -> None:
    bad = await raw(api, b"{not json")
    assert bad.status_code == 400
    assert "Malformed JSON" in bad.json()["error"]["message"]
    # Parsed before it is checked: a field of the wrong type does not hide broken JSON.
    broken = await raw(api, b'{"model": 5, "max_tokens": 10, "messages": [')
    assert broken.status_code == 400
    assert "Malformed JSON" in broken.json()["error"]["message"]
    wrong_type = await raw(api, {**GOOD, "max_tokens": "ten"})
    assert "max_tokens" in wrong_type.json()["error"]["message"]
    no_key = await raw(api, GOOD, **{"x-api-key": ""})
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "authentication_error"
    bearer = await raw(api, GOOD, **{"x-api-key": "", "authorization": "Bearer sk-test"})
    assert bearer.status_code == 200
    old = await raw(api, {**GOOD, "temperature": 0.2}, **{"anthropic-version": "2023-06-01"})
    assert old.status_code == 200, "sampling parameters are fine under the old version"
    wrong = await raw(api, GOOD, **{"anthropic-version": "1999-01-01"})
    assert wrong.status_code == 400
    async with httpx2.AsyncClient() as http:
        missing = await http.get(f"{api.base_url}/v1/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    # None of it hurt the server.
    assert (await raw(api, GOOD)).status_code == 200


async def test_consecutive_same_role_messages_are_merged(client: anthropic.AsyncAnthropic) -> None:
    merged = await create(
        client,
        messages=[
            {"role": "user", "content": "a" * 40},
            {"role": "user", "content": "b" * 40},
        ],
    )
    assert merged.usage.input_tokens == 26
    # merged first, so "ends with a user message" holds for user+user after assistant+assistant
    ok = await create(
        client,
        messages=[
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "y"},
            {"role": "assistant", "content": "z"},
            {"role": "user", "content": "w"},
        ],
    )
    assert ok.stop_reason == "end_turn"


# -- faults and the SDK's retries -------------------------------------------------------


async def drain(client: anthropic.AsyncAnthropic) -> None:
    async with client.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        async for _ in stream:
            pass


async def test_overload_then_success_is_retried_by_the_sdk(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    api.schedule(StatusFault(529, retry_after_ms=1), StatusFault(429, retry_after_ms=1))
    client = clients(api.base_url, max_retries=2)
    message = await create(client, messages=[{"role": "user", "content": "hi"}])
    assert first_text(message).startswith("You said")
    counts = [r.headers.get("x-stainless-retry-count") for r in api.requests]
    assert counts == ["0", "1", "2"]


async def test_retries_exhausted_surface_the_status(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    api.schedule(*[StatusFault(529, retry_after_ms=1)] * 3)
    client = clients(api.base_url, max_retries=2)
    with pytest.raises(anthropic.APIStatusError) as info:
        await create(client, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 529
    assert len(api.requests) == 3


async def test_mid_stream_error_surfaces_and_is_not_retried(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    api.schedule(MidStreamError(after_events=3))
    client = clients(api.base_url, max_retries=2)
    with pytest.raises(anthropic.APIError, match="Overloaded"):
        await drain(client)
    assert len(api.requests) == 1


async def test_dropped_connection_and_stall_are_errors_not_hangs(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    client = clients(api.base_url, max_retries=0, timeout=0.5)
    api.schedule(DropConnection(after_events=3))
    with pytest.raises((anthropic.APIError, httpx2.HTTPError)):
        await drain(client)
    api.schedule(Stall(30))
    with pytest.raises(anthropic.APITimeoutError):
        await create(client, messages=[{"role": "user", "content": "hi"}])
    assert (await create(client, messages=[{"role": "user", "content": "ok"}])).id


async def test_per_request_fault_header(api: LocalMessagesAPI) -> None:
    response = await raw(api, GOOD, **{"x-localapi-fault": '{"type":"status","status":500}'})
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "api_error"


async def test_injected_statuses_carry_the_documented_error_type(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    """Docs: API errors, "HTTP errors" (https://platform.claude.com/docs/en/api/errors):
    402 billing_error, 409 conflict_error, 504 timeout_error, beside the others."""
    documented = {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        409: "conflict_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }
    client = clients(api.base_url, max_retries=0)
    for status, kind in documented.items():
        api.schedule(StatusFault(status))
        with pytest.raises(anthropic.APIStatusError) as info:
            await create(client, messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == status
        body: Any = info.value.body
        assert body["type"] == "error"
        assert body["error"]["type"] == kind, status
        assert body["request_id"] == info.value.response.headers["request-id"]


async def test_a_rate_limit_says_when_to_retry_and_the_limits_as_the_docs_do(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    """Docs: rate limits (https://platform.claude.com/docs/en/api/rate-limits): a 429
    "describing which rate limit was exceeded, along with a retry-after header", and the
    `anthropic-ratelimit-*` headers (limit, remaining, reset in RFC 3339; `tokens-*` input
    and output combined). The local 429 carried `retry-after` only when a test asked."""
    client = clients(api.base_url, max_retries=0)
    api.schedule(StatusFault(429))
    with pytest.raises(anthropic.RateLimitError) as info:
        await create(client, messages=[{"role": "user", "content": "hi"}])
    headers = info.value.response.headers
    assert headers["retry-after"] == "1"
    body: Any = info.value.body
    assert body["error"]["type"] == "rate_limit_error"
    assert "would exceed the rate limit" in body["error"]["message"]
    assert "30,000 input tokens per minute" in body["error"]["message"]
    resets: dict[str, datetime] = {}
    for name in ("requests", "tokens", "input-tokens", "output-tokens"):
        prefix = f"anthropic-ratelimit-{name}"
        assert int(headers[f"{prefix}-limit"]) >= int(headers[f"{prefix}-remaining"]) >= 0
        assert headers[f"{prefix}-reset"].endswith("Z")
        resets[name] = datetime.fromisoformat(headers[f"{prefix}-reset"])
        assert resets[name].tzinfo is not None
    assert headers["anthropic-ratelimit-input-tokens-remaining"] == "0"  # the one exceeded
    # tokens-* are input and output combined (the page as Claude Platform on AWS repeats
    # it, and a recorded live answer).
    for part in ("limit", "remaining"):
        combined = sum(
            int(headers[f"anthropic-ratelimit-{kind}-tokens-{part}"])
            for kind in ("input", "output")
        )
        assert int(headers[f"anthropic-ratelimit-tokens-{part}"]) == combined
    assert resets["input-tokens"] >= resets["output-tokens"]  # emptied, refilled last
    # A wait the test gives is the one said.
    api.schedule(StatusFault(429, retry_after=7))
    with pytest.raises(anthropic.RateLimitError) as info:
        await create(client, messages=[{"role": "user", "content": "hi"}])
    assert info.value.response.headers["retry-after"] == "7"
    # Other statuses say no wait unless asked (the docs give them none).
    api.schedule(StatusFault(529))
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        await create(client, messages=[{"role": "user", "content": "hi"}])
    assert overloaded.value.status_code == 529
    assert "retry-after" not in overloaded.value.response.headers
    assert "anthropic-ratelimit-requests-limit" not in overloaded.value.response.headers


class _Working(DefaultResponder):
    """The default replies, after `seconds` of the server's own work on each request (as
    its checks take on a long history)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def respond(self, request: MessagesRequest) -> Reply:
        time.sleep(self.seconds)  # work, not a wait: it holds the server as work would
        return super().respond(request)


async def test_time_to_first_token_counts_from_the_request_arrival(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> None:
    """The configured time to first token is the one a client sees: the server's work on
    the request is inside it, not added to it (a benchmark's model server then adds its
    latency, not its CPU time). A stall fault still comes on top."""
    work = ttft = 0.6
    latency = Latency(time_to_first_token=ttft)
    async with LocalMessagesAPI(responder=_Working(work), latency=latency) as api:
        client = clients(api.base_url)

        async def first_event() -> float:
            started = time.perf_counter()
            async with client.messages.stream(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                async for event in stream:
                    assert event.type == "message_start"
                    return time.perf_counter() - started
            raise AssertionError("no event")

        took = await first_event()
        assert ttft <= took < work + ttft - 0.2  # added, it would be 1.2 s or more
        api.schedule(Stall(0.5))
        assert await first_event() >= 0.5 + ttft


async def test_entries_are_readable_only_once_the_writer_responds(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> None:
    latency = Latency(time_to_first_token=0.2)
    async with LocalMessagesAPI(latency=latency, token_counts="plain") as api:
        client = clients(api.base_url)
        results: list[Any] = []

        async def send() -> None:
            results.append(await create(client, system=sys_blocks(), messages=conversation(1)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            tg.start_soon(send)  # arrives while the first is still before its response
        assert [usage_of(r) for r in results] == [(13, 1103, 0), (13, 1103, 0)]
        later = await create(client, system=sys_blocks(), messages=conversation(1))
        assert usage_of(later) == (13, 0, 1103)


async def test_recorded_requests_are_bounded_by_count_and_by_bytes(
    api: LocalMessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    sizes = (100, 2_000, 4_000, 300)  # characters of each request's user text
    for size in sizes:
        await create(client, messages=[{"role": "user", "content": "x" * size}])
    assert [len(b["messages"][0]["content"]) for b in api.message_bodies()] == list(sizes)
    api.state.record_bytes = 5_000  # the two newest bodies fit, the third does not
    await create(client, messages=[{"role": "user", "content": "y" * 200}])
    kept = [b["messages"][0]["content"] for b in api.message_bodies()]
    assert kept == ["x" * 4_000, "x" * 300, "y" * 200]
    assert sum(len(r.body) for r in api.requests) <= 5_000
    api.state.record_bytes = 1  # the newest request is always kept
    api.state.record_limit = 2
    await create(client, messages=[{"role": "user", "content": "z" * 50}])
    assert [b["messages"][0]["content"] for b in api.message_bodies()] == ["z" * 50]
    api.state.record_bytes = 64 * 1024 * 1024
    for _ in range(3):
        await create(client, messages=[{"role": "user", "content": "w"}])
    assert len(api.requests) == 2


async def test_serving_leaves_the_process_logging_alone(caplog: pytest.LogCaptureFixture) -> None:
    """uvicorn's loggers are the process's: an application served by uvicorn that runs
    the local API keeps its log level and its own lines; the local API's are dropped."""
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.setLevel(logging.INFO)
    with caplog.at_level(logging.INFO, logger="uvicorn.error"):
        async with LocalMessagesAPI():
            uvicorn_log.info("the application's own line")
        assert uvicorn_log.level == logging.INFO
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.error"]
    assert lines == ["the application's own line"]


async def test_a_block_that_raises_gets_its_own_error_and_the_next_server_answers() -> None:
    """The block's error comes out as itself (not in a task group's ExceptionGroup), and
    the server is stopped before its socket closes: a socket closed under a running
    server stayed in the event loop's selector, and the next one given its descriptor
    (another local API here) took connections and never answered."""
    with pytest.raises(ValueError, match="the block's own") as raised:
        async with LocalMessagesAPI():
            raise ValueError("the block's own") from KeyError("its cause")
    assert isinstance(raised.value.__cause__, KeyError)  # kept, not cut by `from None`
    with pytest.raises(ExceptionGroup):  # a group the block raised stays one
        async with LocalMessagesAPI():
            raise ExceptionGroup("the block's", [KeyError("x")])
    with anyio.CancelScope() as scope:
        async with LocalMessagesAPI():
            scope.cancel()
            await anyio.sleep_forever()
    with anyio.move_on_after(0):  # cancelled while it starts
        async with LocalMessagesAPI():
            await anyio.sleep_forever()
    async with LocalMessagesAPI() as api, httpx2.AsyncClient(timeout=10) as client:
        answer = await client.get(f"{api.base_url}/v1/models")
    assert answer.status_code == 401  # answered (no key given), not left hanging
