"""The local Messages API follows the documented rules (issue 12, items 1-9, and extended
thinking), each checked through the real `anthropic` SDK. Token figures come from the
documented estimator: a text block of N ASCII bytes is ceil(N / 4) + 3 tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import httpx2
import pytest

from frontmind.localapi import (
    MODELS,
    DropConnection,
    LocalMessagesAPI,
    MidStreamError,
    Reply,
    ReplyRawBlock,
    ReplyToolUse,
    ScriptedResponder,
    min_cacheable_tokens,
)

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"  # minimum cacheable prefix 1024; no thinking by default
SYSTEM = "S" * 4400  # 1103 tokens
CC = {"type": "ephemeral"}


def tok(text: str) -> int:
    return -(-len(text.encode()) // 4) + 3


def text(content: str, cached: bool = False, ttl: str = "5m") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": content}
    if cached:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return block


def user(*blocks: dict[str, Any]) -> Any:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> Any:
    return {"role": "assistant", "content": list(blocks)}


def sys_blocks(content: str = SYSTEM, cached: bool = False) -> list[dict[str, Any]]:
    return [text(content, cached)]


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI(token_counts="plain") as server:
        yield server


async def create(client: anthropic.AsyncAnthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 64)
    return await client.messages.create(**kwargs)


def usage_of(message: Any) -> tuple[int, int, int]:
    u = message.usage
    return u.input_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens


def total_input(message: Any) -> int:
    return sum(usage_of(message))


# -- 1. the lookback window: 20 positions counting the breakpoint --------------------


def numbered(count: int, cached_last: bool) -> list[dict[str, Any]]:
    return [
        text(f"block {i:03d} " + "x" * 20, cached_last and i == count - 1) for i in range(count)
    ]


async def test_lookback_is_twenty_positions_counting_the_breakpoint(
    client: anthropic.AsyncAnthropic,
) -> None:
    """The docs' example: an entry at block 15 and a breakpoint at block 35 is a miss."""
    entry = 16  # the entry is on message block 15 (0-based)
    await create(client, system=sys_blocks(), messages=[user(*numbered(entry, True))])
    prefix = tok(SYSTEM) + sum(tok(f"block {i:03d} " + "x" * 20) for i in range(entry))
    miss = await create(client, system=sys_blocks(), messages=[user(*numbered(entry + 20, True))])
    assert miss.usage.cache_read_input_tokens == 0  # breakpoint at block 35: 21 positions
    hit = await create(client, system=sys_blocks(), messages=[user(*numbered(entry + 19, True))])
    assert hit.usage.cache_read_input_tokens == prefix  # breakpoint at block 34: 20 positions


# -- 2. a run of tool_use (or tool_result) blocks is one position ----------------------


async def test_parallel_tool_calls_count_as_one_position_each_side(
    client: anthropic.AsyncAnthropic,
) -> None:
    question = "which cities are warm?"
    tools: Any = [{"name": "weather", "input_schema": {"type": "object"}}]
    first = await create(
        client, system=sys_blocks(), tools=tools, messages=[user(text(question, True))]
    )
    head = first.usage.cache_creation_input_tokens
    assert head > tok(SYSTEM)
    uses = [
        {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "weather", "input": {"city": i}}
        for i in range(25)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": f"{i} degrees"}
        for i in range(25)
    ]
    # 52 blocks from the entry to the breakpoint, but four positions: the question, the run
    # of tool_use blocks, the run of tool_result blocks, the closing text.
    later = await create(
        client,
        system=sys_blocks(),
        tools=tools,
        messages=[user(text(question)), assistant(*uses), user(*results, text("and now?", True))],
    )
    assert later.usage.cache_read_input_tokens == head


# -- 3. automatic caching ------------------------------------------------------------------


async def test_automatic_caching_moves_forward_with_the_conversation(
    client: anthropic.AsyncAnthropic,
) -> None:
    auto: Any = {"type": "ephemeral"}
    first = await create(client, system=SYSTEM, cache_control=auto, messages=[user(text("u" * 40))])
    assert usage_of(first) == (0, tok(SYSTEM) + tok("u" * 40), 0)
    second = await create(
        client,
        system=SYSTEM,
        cache_control=auto,
        messages=[user(text("u" * 40)), assistant(text("a" * 80)), user(text("v" * 40))],
    )
    assert usage_of(second) == (0, tok("a" * 80) + tok("v" * 40), tok(SYSTEM) + tok("u" * 40))


async def test_automatic_caching_takes_a_slot_and_obeys_the_ttl_order(
    client: anthropic.AsyncAnthropic,
) -> None:
    four = [text(f"part {i}", True) for i in range(4)]
    with pytest.raises(anthropic.BadRequestError, match="Found 5"):
        await create(client, cache_control=CC, messages=[user(*four)])
    ok = await create(client, cache_control=CC, messages=[user(*four[:3])])
    assert ok.stop_reason == "end_turn"
    with pytest.raises(anthropic.BadRequestError) as info:
        await create(
            client,
            system=sys_blocks(cached=True),
            cache_control={"type": "ephemeral", "ttl": "1h"},
            messages=[user(text("hi"))],
        )
    message = info.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith("cache_control: a ttl='1h'")
    assert "`tools`, `system`, `messages`" in message


# -- 4. per-model minimum cacheable lengths ----------------------------------------------


async def test_minimum_cacheable_length_per_model(client: anthropic.AsyncAnthropic) -> None:
    expected = {
        "claude-opus-5": 512,
        "claude-fable-5": 512,
        "claude-mythos-5": 512,
        "claude-opus-4-8": 1024,
        "claude-sonnet-5": 1024,
        "claude-sonnet-4-5": 1024,
        "claude-opus-4-1": 1024,
        "claude-opus-4-0": 1024,
        "claude-opus-4-7": 2048,
        "claude-opus-4-6": 4096,
        "claude-opus-4-5": 4096,
        "claude-haiku-4-5": 4096,
    }
    assert {name: min_cacheable_tokens(name) for name in expected} == expected
    prefix = "p" * 2400  # 603 tokens
    for model, writes in [("claude-opus-5", True), ("claude-sonnet-5", False)]:
        m = await create(
            client, model=model, system=sys_blocks(prefix, True), messages=[user(text("hi"))]
        )
        assert m.usage.cache_creation_input_tokens == (tok(prefix) if writes else 0), model
    big = "q" * 5000  # 1253 tokens: enough for Opus 4.8 (1024), not for Opus 4.7 (2048)
    for model, writes in [("claude-opus-4-8", True), ("claude-opus-4-7", False)]:
        m = await create(
            client, model=model, system=sys_blocks(big, True), messages=[user(text("hi"))]
        )
        assert m.usage.cache_creation_input_tokens == (tok(big) if writes else 0), model


# -- 5. tool_choice and thinking invalidate the messages only --------------------------------


async def test_tool_choice_and_thinking_changes_rewrite_messages_only(
    client: anthropic.AsyncAnthropic,
) -> None:
    tools: Any = [
        {"name": "lookup", "input_schema": {"type": "object"}, "cache_control": CC},
    ]
    history = [user(text("h" * 400)), assistant(text("a" * 400)), user(text("h" * 400, True))]
    history_tokens = tok("h" * 400) * 2 + tok("a" * 400)
    base: dict[str, Any] = {
        "model": "claude-opus-4-1",
        "max_tokens": 4000,
        "tools": tools,
        "system": sys_blocks(cached=True),
        "messages": history,
    }
    first = await create(client, **base)
    head = first.usage.cache_creation_input_tokens - history_tokens
    assert head > tok(SYSTEM)
    same = await create(client, **base)
    assert usage_of(same) == (0, 0, head + history_tokens)
    variants: list[dict[str, Any]] = [
        {"tool_choice": {"type": "any"}},
        {"thinking": {"type": "enabled", "budget_tokens": 2000}},
        {"thinking": {"type": "enabled", "budget_tokens": 3000}},
        {"thinking": {"type": "disabled"}},  # the same as none for this model: a hit
    ]
    outcomes = []
    for variant in variants:
        m = await create(client, **{**base, **variant})
        outcomes.append(usage_of(m))
    assert outcomes[:3] == [(0, history_tokens, head)] * 3
    assert outcomes[3] == (0, 0, head + history_tokens)


# -- 6. what the API accepts, the local API accepts -------------------------------------------

PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


async def test_images_and_documents_in_user_turns_and_tool_results(
    client: anthropic.AsyncAnthropic,
) -> None:
    images: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_011abc"}},
    ]
    documents: list[dict[str, Any]] = [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_011def"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "plain words"},
            "title": "notes",
        },
    ]
    m = await create(client, messages=[user(*images, *documents, text("describe these"))])
    assert m.stop_reason == "end_turn"
    counted = await client.messages.count_tokens(
        model=MODEL, messages=[user(*images, *documents, text("describe these"))]
    )
    assert counted.input_tokens == total_input(m)
    assert counted.input_tokens > 3 * 1600
    tools: Any = [{"name": "screenshot", "input_schema": {"type": "object"}}]
    with_result = await create(
        client,
        tools=tools,
        messages=[
            user(text("take a screenshot")),
            assistant({"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}),
            user(
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [images[0], text("the screen")],
                }
            ),
        ],
    )
    assert with_result.content[0].type == "text"
    bad: Any = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/bmp", "data": PNG},
    }
    with pytest.raises(anthropic.BadRequestError, match="media_type"):
        await create(client, messages=[user(bad)])


async def test_server_tools_and_documented_fields_are_accepted(
    client: anthropic.AsyncAnthropic,
) -> None:
    m = await create(
        client,
        tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        messages=[user(text("what happened today?"))],
        output_config={"effort": "low"},
        inference_geo="us",
        speed="standard",
        container={"id": "container_1"},
        service_tier="auto",
        metadata={"user_id": "u-1"},
    )
    assert m.stop_reason == "end_turn"
    history = [
        user(text("search the news")),
        assistant(
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"q": "news"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://example.com",
                        "title": "Example",
                        "encrypted_content": "abc",
                    }
                ],
            },
            text("Here is the news."),
        ),
        user(text("thanks")),
    ]
    replay = await create(
        client,
        tools=[{"type": "web_search_20250305", "name": "web_search"}],
        messages=history,
    )
    assert replay.stop_reason == "end_turn"
    counted = await client.messages.count_tokens(
        model=MODEL, cache_control={"type": "ephemeral"}, messages=[user(text("hi"))]
    )
    assert counted.input_tokens == tok("hi")


async def test_scripted_server_tool_blocks_stream_and_replay(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> None:
    search: dict[str, Any] = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "news"},
    }
    result: dict[str, Any] = {
        "type": "web_search_result",
        "url": "https://example.com",
        "title": "Example",
        "encrypted_content": "abc",
    }
    found: dict[str, Any] = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [result],
    }
    reply = Reply((ReplyRawBlock(search), ReplyRawBlock(found)), stop_reason="pause_turn")
    script = ScriptedResponder()
    script.push(reply, reply, "Here is the news.")
    tools: Any = [{"type": "web_search_20250305", "name": "web_search"}]
    async with LocalMessagesAPI(responder=script, token_counts="plain") as api:
        client = clients(api.base_url)
        ask = [user(text("news?"))]
        plain = await create(client, max_tokens=1024, tools=tools, messages=ask)
        async with client.messages.stream(
            model=MODEL, max_tokens=1024, tools=tools, messages=ask
        ) as stream:
            streamed = await stream.get_final_message()
        for message in (plain, streamed):
            assert message.stop_reason == "pause_turn"
            assert [b.model_dump(exclude_none=True) for b in message.content] == [
                search,
                found,
            ]
        again = await create(
            client,
            tools=tools,
            messages=[*ask, assistant(*[b.model_dump() for b in plain.content])],
        )
        assert again.content[0].text == "Here is the news."


async def test_the_sdk_tool_runner_falls_back_from_thread(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> None:
    script = ScriptedResponder()
    script.push(
        Reply((ReplyToolUse("get_weather", {"city": "Oslo"}, "toolu_w"),)),
        "It is 3 degrees in Oslo.",
    )
    calls: list[str] = []

    @anthropic.beta_async_tool
    async def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "3 degrees"

    async with LocalMessagesAPI(responder=script, token_counts="plain") as api:
        client = clients(api.base_url)
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=256,
            tools=[get_weather],
            messages=[{"role": "user", "content": "weather in Oslo?"}],
        )
        final = await runner.until_done()
        bodies = api.message_bodies()
    assert calls == ["Oslo"]
    assert final.content[0].type == "text"
    assert "thread" in bodies[0]
    assert all("thread" not in body for body in bodies[1:])


async def test_thread_is_refused_with_the_error_code_the_sdk_falls_back_on(
    api: LocalMessagesAPI,
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
        "thread": {"type": "create"},
    }
    response = await _raw(api.base_url, body)
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert details["error_code"] == "thread_unsupported_request"
    assert isinstance(details["unsupported"], list)


async def _raw(api_url: str | None, body: Any, path: str = "/v1/messages") -> httpx2.Response:
    assert api_url is not None
    headers = {"x-api-key": "k", "anthropic-version": "2026-10-21"}
    async with httpx2.AsyncClient() as http:
        return await http.post(f"{api_url}{path}", json=body, headers=headers)


# -- 7. stop sequences ---------------------------------------------------------------------


async def test_stop_sequences_end_the_reply(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> None:
    script = ScriptedResponder()
    script.push("Hello there. END and more words", "Hello there. END and more words")
    async with LocalMessagesAPI(responder=script, token_counts="plain") as api:
        client = clients(api.base_url)
        m = await create(client, messages=[user(text("hi"))], stop_sequences=["END", "words"])
        assert (m.stop_reason, m.stop_sequence) == ("stop_sequence", "END")
        assert m.content[0].text == "Hello there. "
        async with client.messages.stream(
            model=MODEL, max_tokens=64, messages=[user(text("hi"))], stop_sequences=["END"]
        ) as stream:
            final = await stream.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "END")


# -- 8. models, prefill, error texts -------------------------------------------------------


@pytest.mark.filterwarnings("ignore:The model 'claude-mythos-preview' is deprecated")
async def test_unknown_and_retired_models_are_not_found(client: anthropic.AsyncAnthropic) -> None:
    for name in ["claude-nonexistent-9", "claude-3-opus-20240229", "claude-mythos-preview"]:
        with pytest.raises(anthropic.NotFoundError) as info:
            await create(client, model=name, messages=[user(text("hi"))])
        assert info.value.body["error"] == {  # type: ignore[index]
            "type": "not_found_error",
            "message": f"model: {name}",
        }
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.count_tokens(model="claude-2.1", messages=[user(text("hi"))])
    for row in MODELS.values():
        assert row.context_window >= 200_000
        assert row.min_cacheable in (512, 1024, 2048, 4096)


async def test_prefill_is_refused_only_by_models_that_refuse_it(
    client: anthropic.AsyncAnthropic,
) -> None:
    prefilled = [user(text("list three colours as JSON")), assistant(text("{"))]
    accepted = await create(client, model="claude-opus-4-1", messages=prefilled)
    assert accepted.stop_reason == "end_turn"
    for model in ["claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-5"]:
        with pytest.raises(anthropic.BadRequestError, match="does not support assistant message"):
            await create(client, model=model, messages=prefilled)


async def test_error_texts_are_the_apis(api: LocalMessagesAPI) -> None:
    base = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    unknown = await _raw(api.base_url, {**base, "frobnicate": 1})
    assert unknown.json()["error"]["message"] == "frobnicate: Extra inputs are not permitted"
    nested = await _raw(
        api.base_url, {**base, "messages": [{"role": "user", "content": "hi", "name": "x"}]}
    )
    assert nested.json()["error"]["message"] == "messages.0.name: Extra inputs are not permitted"
    beta_only = await _raw(api.base_url, {**base, "mcp_servers": []})
    assert beta_only.json()["error"]["message"] == "mcp_servers: Extra inputs are not permitted"
    order = await _raw(
        api.base_url,
        {
            **base,
            "system": [text("s", True)],
            "messages": [{"role": "user", "content": [text("hi", True, "1h")]}],
        },
    )
    message = order.json()["error"]["message"]
    assert message.startswith("messages.0.content.0.cache_control: a ttl='1h'")
    assert message.endswith("processed in the following order: `tools`, `system`, `messages`.")


async def test_a_tool_schema_the_api_refuses_is_refused(api: LocalMessagesAPI) -> None:
    # A client tool's input_schema is an object schema with no oneOf, allOf or anyOf at
    # its top: the API answers 400 for the whole request otherwise (as reported by users
    # of MCP servers whose schemas use JSON Schema 2020-12 at the root).
    base = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    good = {"name": "good", "input_schema": {"type": "object", "properties": {}}}
    cases = {
        "tools.1.custom.input_schema.type: Field required": {"properties": {}},
        "tools.1.custom.input_schema.type: Input should be 'object'": {"type": "array"},
        **{
            "tools.1.custom.input_schema: input_schema does not support oneOf, allOf, or "
            f"anyOf at the top level#{key}": {"type": "object", key: [{"required": ["a"]}]}
            for key in ("oneOf", "allOf", "anyOf")
        },
    }
    for expected, schema in cases.items():
        tools = [good, {"name": "bad", "input_schema": schema}]
        answer = await _raw(api.base_url, {**base, "tools": tools})
        assert answer.status_code == 400, schema
        assert answer.json()["error"]["message"] == expected.partition("#")[0]
    nested = {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}}
    answer = await _raw(api.base_url, {**base, "tools": [{"name": "n", "input_schema": nested}]})
    assert answer.status_code == 200, answer.text


async def test_role_system_messages_on_models_that_take_them(
    client: anthropic.AsyncAnthropic,
) -> None:
    late = {"role": "system", "content": "The user is on a phone."}
    m = await create(client, model="claude-opus-4-8", messages=[user(text("hi")), late])
    assert m.stop_reason == "end_turn"
    followed = await create(
        client,
        model="claude-opus-4-8",
        messages=[user(text("hi")), late, assistant(text("Hello.")), user(text("bye"))],
    )
    assert followed.stop_reason == "end_turn"
    with pytest.raises(anthropic.BadRequestError, match="not supported by claude-sonnet-5"):
        await create(client, model="claude-sonnet-5", messages=[user(text("hi")), late])
    with pytest.raises(anthropic.BadRequestError, match="must follow a user message"):
        await create(client, model="claude-opus-4-8", messages=[late, user(text("hi"))])
    assert MODELS["claude-fable-5"].system_messages
    assert MODELS["claude-opus-5"].system_messages


# -- 9. faults at the very start of a stream -------------------------------------------------


async def test_faults_with_after_events_zero_fire(
    api: LocalMessagesAPI, clients: Callable[..., anthropic.AsyncAnthropic]
) -> None:
    client = clients(api.base_url, max_retries=0)
    api.schedule(MidStreamError(after_events=0))
    with pytest.raises(anthropic.APIError, match="Overloaded"):
        async with client.messages.stream(
            model=MODEL, max_tokens=32, messages=[user(text("hi"))]
        ) as stream:
            await stream.get_final_message()
    api.schedule(DropConnection(after_events=0))
    with pytest.raises((anthropic.APIError, httpx2.HTTPError)):
        async with client.messages.stream(
            model=MODEL, max_tokens=32, messages=[user(text("hi"))]
        ) as stream:
            await stream.get_final_message()


async def test_an_effort_change_rewrites_messages_only(client: anthropic.AsyncAnthropic) -> None:
    # Prompt caching, "What invalidates the cache": "Changing the `output_config.effort`
    # value always invalidates message blocks"; the system stays cached. The local API
    # read the whole prefix back at any effort. Sending the model's default (high on
    # Sonnet 4.6) is the same as sending none.
    history = [user(text("h" * 400)), assistant(text("a" * 400)), user(text("h" * 400, True))]
    history_tokens = tok("h" * 400) * 2 + tok("a" * 400)
    base: dict[str, Any] = {"system": sys_blocks(cached=True), "messages": history}
    first = await create(client, **base)
    head = first.usage.cache_creation_input_tokens - history_tokens
    assert head >= tok(SYSTEM)
    default = await create(client, **base, output_config={"effort": "high"})
    assert usage_of(default) == (0, 0, head + history_tokens)
    low = await create(client, **base, output_config={"effort": "low"})
    assert usage_of(low) == (0, history_tokens, head)
    again = await create(client, **base, output_config={"effort": "low"})
    assert usage_of(again) == (0, 0, head + history_tokens)


def cached_tools_and_history() -> tuple[Any, list[Any]]:
    """Tools long enough to cache on their own (a breakpoint on the last), and a short
    history with a breakpoint: each part of the prefix can hit or miss apart."""
    tools = [
        {"name": "lookup", "description": "d" * 4400, "input_schema": {"type": "object"}},
        {"name": "find", "input_schema": {"type": "object"}, "cache_control": CC},
    ]
    history = [user(text("h" * 400)), assistant(text("a" * 400)), user(text("h" * 400, True))]
    return tools, history


async def test_a_speed_change_rewrites_system_and_messages(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Prompt caching, "What invalidates the cache": "Switching between `speed: "fast"` and
    # standard speed invalidates system and message caches"; the tools stay cached. The
    # local API read the whole prefix back at either speed.
    tools, history = cached_tools_and_history()
    base: dict[str, Any] = {
        "tools": tools,
        "system": sys_blocks(cached=True),
        "messages": history,
    }
    first = await create(client, **base)
    whole = first.usage.cache_creation_input_tokens
    standard = await create(client, **base, speed="standard")
    assert usage_of(standard) == (0, 0, whole)
    fast = await create(client, **base, speed="fast")
    _, written, read = usage_of(fast)
    assert 0 < read < whole - tok(SYSTEM)  # the tools alone
    assert written == whole - read
    again = await create(client, **base, speed="fast")
    assert usage_of(again) == (0, 0, whole)


async def test_enabling_citations_rewrites_system_and_messages(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Prompt caching, "What invalidates the cache": "Enabling/disabling citations modifies
    # the system prompt", so the system and messages caches miss while the tools stay.
    # The local API read the system back once a document with citations was added.
    tools, history = cached_tools_and_history()
    base: dict[str, Any] = {"tools": tools, "system": sys_blocks(cached=True)}
    first = await create(client, **base, messages=history)
    whole = first.usage.cache_creation_input_tokens

    def asking(cited: bool) -> Any:
        source = {"type": "text", "media_type": "text/plain", "data": "The sky is blue."}
        document = {"type": "document", "source": source, "citations": {"enabled": cited}}
        return [*history, assistant(text("b" * 40)), user(document, text("why?"))]

    plain = await create(client, **base, messages=asking(False))
    assert plain.usage.cache_read_input_tokens == whole
    cited = await create(client, **base, messages=asking(True))
    assert 0 < cited.usage.cache_read_input_tokens < whole - tok(SYSTEM)  # the tools alone
