"""The local Messages API against Anthropic's current docs, rule by rule (review B): each
test names the docs page it follows and talks to the local server through the real
`anthropic` SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from actors import cost
from frontmind._models import shipped_catalog
from frontmind.localapi import (
    MODELS,
    LocalMessagesAPI,
    Reply,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
)
from storage import TurnUsage

pytestmark = pytest.mark.anyio

HI: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    """The local server; conftest's `client` is an SDK client of it."""
    async with LocalMessagesAPI() as server:
        yield server


async def error_of(client: anthropic.AsyncAnthropic, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("max_tokens", 4096)
    kwargs.setdefault("messages", HI)
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(**kwargs)
    body: Any = info.value.body
    return dict(body["error"])


async def test_thinking_type_refusals_say_what_the_docs_quote(
    client: anthropic.AsyncAnthropic,
) -> None:
    # "What's new in Claude Opus 5.5", "Thinking can't be disabled": both refusals are a
    # 400 invalid_request_error with these messages (the same check on Fable 5.1).
    use = 'Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
    for model in ("claude-opus-5-5", "claude-fable-5-1"):
        disabled = await error_of(client, model=model, thinking={"type": "disabled"})
        assert disabled == {
            "type": "invalid_request_error",
            "message": f'"thinking.type.disabled" is not supported for this model. {use}',
        }
        enabled = await error_of(
            client, model=model, thinking={"type": "enabled", "budget_tokens": 2048}
        )
        assert (
            enabled["message"] == f'"thinking.type.enabled" is not supported for this model. {use}'
        )


async def test_interleaved_thinking_lets_the_budget_exceed_max_tokens(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Extended thinking, "Interleaved thinking": with the beta header and tools, the
    # budget is the whole turn's (every thinking block of it) and may exceed max_tokens;
    # the limit becomes the context window. Without the header the budget stays below
    # max_tokens.
    tools: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]
    request: Any = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": HI,
        "tools": tools,
        "thinking": {"type": "enabled", "budget_tokens": 16_000},
    }
    reply = await client.messages.create(
        **request, extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}
    )
    assert reply.content[0].type == "thinking"
    counted = await client.messages.count_tokens(
        model=request["model"],
        messages=HI,
        tools=tools,
        thinking=request["thinking"],
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )
    assert counted.input_tokens > 0
    plain = await error_of(client, **request)
    assert plain["message"] == "`max_tokens` must be greater than `thinking.budget_tokens`."
    beyond = {**request, "thinking": {"type": "enabled", "budget_tokens": 200_000}}
    with pytest.raises(anthropic.BadRequestError, match="context window"):
        await client.messages.create(
            **beyond, extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}
        )


@pytest.mark.parametrize("name", ["claude-fable-5-2", "claude-mythos-5-2"])
def test_fable_and_mythos_5_2_are_priced_at_their_list_prices(name: str) -> None:
    # The pricing page's Fable 5.2 row (Mythos 5.2 shares it): $8 / $40 per MTok, cache
    # hits $0.20, 5-minute writes $10, 1-hour writes $16; 20% below Fable 5.1.
    row = MODELS[name]
    assert (row.input_price, row.output_price) == (8.0, 40.0)
    per_mtok = 1_000_000
    usage = TurnUsage(
        input_tokens=per_mtok,
        cache_creation_input_tokens=2 * per_mtok,
        cache_read_input_tokens=per_mtok,
        output_tokens=per_mtok,
        cache_creation_5m=per_mtok,
        cache_creation_1h=per_mtok,
    )
    priced = cost(usage, shipped_catalog().lookup(name))
    assert priced.uncached_usd == pytest.approx(8.0)
    assert priced.write_5m_usd == pytest.approx(10.0)
    assert priced.write_1h_usd == pytest.approx(16.0)
    assert priced.total_usd == pytest.approx(8.0 + 10.0 + 16.0 + 0.20 + 40.0)


async def test_two_tools_of_one_name_are_refused(client: anthropic.AsyncAnthropic) -> None:
    # The live API refuses a request whose tools share a name, a custom tool and a server
    # tool alike ("tools: Tool names must be unique.", anthropics/claude-code#10687), and
    # token counting with it: the local API let such a request through.
    lookup: Any = {"name": "lookup", "input_schema": {"type": "object"}}
    search: Any = {"type": "web_search_20250305", "name": "web_search"}
    unique = {"type": "invalid_request_error", "message": "tools: Tool names must be unique."}
    for tools in ([lookup, lookup], [search, {**lookup, "name": "web_search"}]):
        assert await error_of(client, model="claude-sonnet-4-5", tools=tools) == unique
    with pytest.raises(anthropic.BadRequestError, match="Tool names must be unique"):
        await client.messages.count_tokens(
            model="claude-sonnet-4-5", messages=HI, tools=[lookup, lookup]
        )
    fine = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=HI, tools=[lookup, search]
    )
    assert fine.stop_reason is not None


async def test_a_tool_name_outside_the_pattern_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API checks a client tool's name against ^[a-zA-Z0-9_-]{1,128}$ and names
    # the pattern (modelcontextprotocol/modelcontextprotocol#1345: a name with spaces);
    # the local API took any name, dots, spaces and 200 characters included.
    pattern = "String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"
    for name in ("service.lookup", "look up", "", "x" * 129):
        tools: Any = [
            {"name": "fine", "input_schema": {"type": "object"}},
            {"name": name, "input_schema": {"type": "object"}},
        ]
        refused = await error_of(client, model="claude-sonnet-4-5", tools=tools)
        assert refused["message"] == f"tools.1.custom.name: {pattern}"
    longest: Any = [{"name": "x-_" * 42 + "yz", "input_schema": {"type": "object"}}]
    reply = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=HI, tools=longest
    )
    assert reply.stop_reason is not None


async def test_a_tool_property_name_outside_the_pattern_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API checks the names of a client tool's top-level properties against
    # ^[a-zA-Z0-9_.-]{1,64}$ and refuses the whole request (twilio-labs/mcp#56: MCP tools
    # with `StartTime<`; freee/freee-mcp#15); the local API took any name.
    pattern = "Property keys should match pattern '^[a-zA-Z0-9_.-]{1,64}$'"
    for key in ("StartTime<", "a b", "größe", "x" * 65, ""):
        schema = {"type": "object", "properties": {"fine": {}, key: {"type": "string"}}}
        tools: Any = [
            {"name": "fine", "input_schema": {"type": "object"}},
            {"name": "dated", "input_schema": schema},
        ]
        refused = await error_of(client, model="claude-sonnet-4-5", tools=tools)
        assert refused["message"] == f"tools.1.custom.input_schema.properties: {pattern}"
    # Names the pattern takes, and nested properties, which it does not look into.
    nested = {"type": "object", "properties": {"x<": {"type": "string"}}}
    schema = {"type": "object", "properties": {"a.b-c_D9": {}, "x" * 64: {}, "n": nested}}
    taken: Any = [{"name": "dated", "input_schema": schema}]
    reply = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=HI, tools=taken
    )
    assert reply.stop_reason is not None


async def test_a_tool_schema_that_is_not_valid_json_schema_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The SDKs' Tool.input_schema is a JSON Schema 2020-12; the live API refuses the
    # whole request for one that is not (acomagu/vscode-as-mcp-server#6, an MCP server's
    # tool); the local API took any object schema.
    invalid = (
        {"type": "object", "properties": {"text": {"type": "strnig"}}},
        {"type": "object", "required": "text"},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": "one"}}},
    )
    for schema in invalid:
        tools: Any = [
            {"name": "fine", "input_schema": {"type": "object"}},
            {"name": "broken", "input_schema": schema},
        ]
        refused = await error_of(client, model="claude-sonnet-4-5", tools=tools)
        assert refused["message"].startswith(
            "tools.1.custom.input_schema: JSON schema is invalid. It must match JSON Schema "
            "draft 2020-12"
        ), refused
    # What 2020-12 allows is taken: $defs and $ref, unknown keywords, boolean schemas.
    valid: Any = {
        "type": "object",
        "$defs": {"when": {"type": "string", "format": "date"}},
        "properties": {"day": {"$ref": "#/$defs/when"}, "any": True, "x-note": {"hint": 1}},
        "required": ["day"],
    }
    reply = await client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=4096,
        messages=HI,
        tools=[{"name": "valid", "input_schema": valid}],
    )
    assert reply.stop_reason is not None


async def test_a_prefill_ending_on_whitespace_is_refused(client: anthropic.AsyncAnthropic) -> None:
    # The live API refuses a request whose final assistant turn ends on whitespace
    # ("messages: final assistant content cannot end with trailing whitespace",
    # tailcallhq/forgecode#1872), on the models that take a prefill at all; the local
    # API continued from it.
    for content in ("Sure, ", [{"type": "text", "text": "Sure,\n"}]):
        messages: Any = [*HI, {"role": "assistant", "content": content}]
        refused = await error_of(client, model="claude-sonnet-4-5", messages=messages)
        assert refused == {
            "type": "invalid_request_error",
            "message": "messages: final assistant content cannot end with trailing whitespace",
        }
    trimmed: Any = [*HI, {"role": "assistant", "content": "Sure,"}]
    reply = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=trimmed
    )
    assert reply.stop_reason is not None
    # Whitespace inside the history, before a user turn, is no prefill.
    earlier: Any = [*HI, {"role": "assistant", "content": "Sure, "}, *HI]
    assert (
        await client.messages.create(model="claude-sonnet-4-5", max_tokens=4096, messages=earlier)
    ).stop_reason is not None


async def test_a_forcing_tool_choice_needs_its_tool(client: anthropic.AsyncAnthropic) -> None:
    # The live API, probed (aakshintala/fiber, "tool_choice with no tools"): without
    # tools, auto and none pass, any is a 400 and so is a tool choice naming a tool the
    # request does not give; the local API answered all four, and token counting too.
    lookup: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]
    choices: Any = ({"type": "auto"}, {"type": "none"})
    for choice in choices:
        reply = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=4096, messages=HI, tool_choice=choice
        )
        assert reply.stop_reason == "end_turn"
    any_choice: Any = {"type": "any"}
    refused = await error_of(client, model="claude-sonnet-4-5", tool_choice=any_choice)
    assert refused["message"] == "tool_choice.any may only be specified while providing tools"
    missing: Any = {"type": "tool", "name": "get_weather"}
    for tools in (None, lookup):
        extra = {} if tools is None else {"tools": tools}
        refused = await error_of(client, model="claude-sonnet-4-5", tool_choice=missing, **extra)
        assert refused["message"] == "Tool 'get_weather' not found in provided tools"
    with pytest.raises(anthropic.BadRequestError, match="not found in provided tools"):
        await client.messages.count_tokens(
            model="claude-sonnet-4-5", messages=HI, tools=lookup, tool_choice=missing
        )
    forced = await client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=4096,
        messages=HI,
        tools=lookup,
        tool_choice={"type": "tool", "name": "lookup"},
    )
    assert forced.stop_reason == "tool_use"


async def test_service_tier_and_speed_take_only_the_api_values(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference: a request's service_tier is "auto" or "standard_only" ("priority"
    # is what usage.service_tier reports) and its speed "standard" or "fast"; any other
    # value is a 400. The local API took any string, so a typo passed every test.
    for field, wrong in (("service_tier", "priority"), ("speed", "turbo")):
        refused = await error_of(client, model="claude-sonnet-4-5", extra_body={field: wrong})
        assert refused["type"] == "invalid_request_error"
        assert refused["message"].startswith(f"{field}: ")
    with pytest.raises(anthropic.BadRequestError, match="speed: "):
        await client.messages.count_tokens(
            model="claude-sonnet-4-5", messages=HI, extra_body={"speed": "turbo"}
        )
    for field, right in (("service_tier", "standard_only"), ("speed", "standard")):
        reply = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=4096, messages=HI, extra_body={field: right}
        )
        assert reply.stop_reason == "end_turn"


async def test_metadata_takes_user_id_alone(client: anthropic.AsyncAnthropic) -> None:
    # The API reference's `metadata` has one field, user_id (the SDK's MetadataParam);
    # another key is refused as every unknown field is. The local API took any dict.
    refused = await error_of(
        client, model="claude-sonnet-4-5", extra_body={"metadata": {"session": "s-1"}}
    )
    assert refused["message"] == "metadata.session: Extra inputs are not permitted"
    reply = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=HI, metadata={"user_id": "u-1"}
    )
    assert reply.stop_reason == "end_turn"


async def test_disable_parallel_tool_use_gives_one_call_a_reply() -> None:
    # Docs, "Parallel tool use": with tool_choice auto and disable_parallel_tool_use, the
    # model "uses at most one tool". A scripted reply of two calls keeps its first; the
    # flag must be a boolean.
    responder = ScriptedResponder()
    two = Reply((ReplyText("Both."), ReplyToolUse("a", {}, "toolu_a"), ReplyToolUse("b", {})))
    responder.push(two, two)
    tools: Any = [{"name": n, "input_schema": {"type": "object"}} for n in ("a", "b")]
    single: Any = {"type": "auto", "disable_parallel_tool_use": True}
    wrong: Any = {"type": "auto", "disable_parallel_tool_use": "yes"}
    model = "claude-sonnet-4-5"
    async with (
        LocalMessagesAPI(responder=responder) as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as client,
    ):
        one = await client.messages.create(
            model=model, max_tokens=4096, messages=HI, tools=tools, tool_choice=single
        )
        both = await client.messages.create(model=model, max_tokens=4096, messages=HI, tools=tools)
        refused = await error_of(client, model=model, tools=tools, tool_choice=wrong)
    assert [b.type for b in one.content] == ["text", "tool_use"]
    assert one.content[1].type == "tool_use"
    assert one.content[1].id == "toolu_a"
    assert one.stop_reason == "tool_use"
    assert [b.type for b in both.content] == ["text", "tool_use", "tool_use"]
    assert refused["message"] == (
        "tool_choice.auto.disable_parallel_tool_use: Input should be a valid boolean"
    )
