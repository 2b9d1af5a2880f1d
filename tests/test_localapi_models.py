"""The local API enforces models.toml as the live API does (issue 25, item 3), each rule
through the real `anthropic` SDK: the Models API, per-model thinking / effort / tool
choice / max_tokens / context window, thinking in tool loops and on cache_control,
images checked and counted, newer block types, beta requests, foreign signatures,
usage.server_tool_use; and the calibrated counts (item 4)."""

from __future__ import annotations

import base64
import re
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import pytest

from frontmind.localapi import (
    LocalMessagesAPI,
    Reply,
    ReplyRawBlock,
    ReplyText,
    ScriptedResponder,
)

pytestmark = pytest.mark.anyio

HI: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def client() -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with (
        LocalMessagesAPI() as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as sdk,
    ):
        yield sdk


async def refused(client: anthropic.AsyncAnthropic, match: str, **kwargs: Any) -> None:
    kwargs.setdefault("max_tokens", 1024)
    kwargs.setdefault("messages", HI)
    with pytest.raises(anthropic.BadRequestError, match=match):
        await client.messages.create(**kwargs)


def png(width: int, height: int) -> str:
    """A real PNG of this size (one grey pixel row repeated), base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(data).decode()


def image(data: str, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


async def test_the_models_api_answers_from_the_data_file(
    client: anthropic.AsyncAnthropic,
) -> None:
    fable = await client.models.retrieve("claude-fable-5-1")
    assert (fable.max_input_tokens, fable.max_tokens) == (1_000_000, 128_000)
    assert fable.capabilities is not None
    assert fable.capabilities.thinking.types.adaptive.supported
    assert not fable.capabilities.thinking.types.enabled.supported
    assert not fable.capabilities.thinking.types.disabled.supported
    haiku = await client.models.retrieve("claude-haiku-4-5")
    assert haiku.capabilities is not None
    assert not haiku.capabilities.effort.supported
    assert haiku.capabilities.context_management.clear_tool_uses_20250919 is not None
    assert haiku.capabilities.context_management.clear_tool_uses_20250919.supported
    page = await client.models.list(limit=3)
    assert [m.id for m in page.data][:1] == ["claude-opus-5-5"]
    assert page.has_more
    listed = [m.id async for m in client.models.list(limit=5)]
    assert "claude-haiku-4-5" in listed
    assert "claude-mythos-preview" not in listed
    with pytest.raises(anthropic.NotFoundError):
        await client.models.retrieve("claude-mythos-preview")


async def test_the_models_api_resolves_aliases_and_filters_by_lifecycle(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference, Get a Model: its answer can "resolve a model alias to a model
    # ID"; the local API answered a dated alias with the alias itself, an id the list
    # never shows. List Models' lifecycle filter (the SDK's ModelListParams): active and
    # deprecated by default, retired "only when retired is requested explicitly"; the
    # local API ignored it and listed every row whatever was asked.
    dated = await client.models.retrieve("claude-sonnet-4-5-20250929")
    assert dated.id == "claude-sonnet-4-5"
    listed = [m.id async for m in client.models.list(limit=1000)]
    assert dated.id in listed
    assert "claude-sonnet-4-5-20250929" not in listed
    every = [m async for m in client.models.list(limit=1000, lifecycle=["active", "deprecated"])]
    assert [m.id for m in every] == listed
    assert {m.lifecycle for m in every} <= {"active", "deprecated"}
    retired = await client.models.list(lifecycle=["retired"])
    assert (retired.data, retired.has_more, retired.first_id) == ([], False, None)
    with pytest.raises(anthropic.BadRequestError, match=r"lifecycle\.0: Input should be"):
        await client.models.list(extra_query={"lifecycle": ["gone"]})


async def test_thinking_effort_and_tool_choice_follow_each_model(
    client: anthropic.AsyncAnthropic,
) -> None:
    enabled: Any = {"type": "enabled", "budget_tokens": 1024}
    await refused(
        client,
        r'"thinking.type.enabled" is not supported',
        model="claude-opus-4-8",
        thinking=enabled,
        max_tokens=4096,
    )
    await refused(
        client,
        r'"thinking.type.disabled" is not supported',
        model="claude-fable-5-1",
        thinking={"type": "disabled"},
    )
    await refused(
        client,
        r'"thinking.type.adaptive" is not supported',
        model="claude-haiku-4-5",
        thinking={"type": "adaptive"},
    )
    await refused(
        client,
        'effort "xhigh"',
        model="claude-opus-5",
        thinking={"type": "disabled"},
        output_config={"effort": "xhigh"},
    )
    await refused(
        client,
        re.escape("This model does not support the effort parameter."),
        model="claude-haiku-4-5",
        output_config={"effort": "low"},
    )
    await refused(
        client,
        "'xhigh' is not supported",
        model="claude-opus-4-6",
        output_config={"effort": "xhigh"},
    )
    tools: Any = [{"name": "t", "input_schema": {"type": "object"}}]
    kinds: Any = ({"type": "any"}, {"type": "tool", "name": "t"})
    # The docs' own words (What's new in Claude Opus 5.5), the same on token counting.
    forced = 'tool_choice: type "tool" and "any" are not supported for this model.'
    for kind in kinds:
        await refused(
            client, re.escape(forced), model="claude-fable-5-1", tools=tools, tool_choice=kind
        )
        with pytest.raises(anthropic.BadRequestError, match=re.escape(forced)):
            await client.messages.count_tokens(
                model="claude-fable-5-1", messages=HI, tools=tools, tool_choice=kind
            )
    await refused(
        client,
        "tool_choice forces tool use",
        model="claude-sonnet-4-6",
        tools=tools,
        tool_choice={"type": "any"},
        thinking=enabled,
        max_tokens=4096,
    )
    await refused(
        client,
        "maximum allowed number of output tokens",
        model="claude-haiku-4-5",
        max_tokens=64_001,
        timeout=30,  # else the SDK asks for streaming before sending
    )
    ok = await client.messages.create(
        model="claude-opus-5",
        max_tokens=64,
        messages=HI,
        thinking={"type": "disabled"},
        output_config={"effort": "high"},
    )
    assert ok.stop_reason == "end_turn"


async def test_between_tools_is_refused_above_high_effort(
    client: anthropic.AsyncAnthropic,
) -> None:
    """What's new in Claude Sonnet 5.5, "Turn off up-front thinking": "between_tools is
    available at low, medium, and high effort. At xhigh or max effort, a request with
    between_tools returns a 400 error"."""
    between: Any = {"type": "between_tools"}
    for effort in ("xhigh", "max"):
        await refused(
            client,
            f'"thinking.type.between_tools" is not supported with effort "{effort}"',
            model="claude-sonnet-5-5",
            thinking=between,
            output_config={"effort": effort},
        )
    for effort in ("low", "medium", "high"):
        config: Any = {"effort": effort}
        ok = await client.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=64,
            messages=HI,
            thinking=between,
            output_config=config,
        )
        assert ok.stop_reason == "end_turn"


@asynccontextmanager
async def old_version_client() -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The SDK against a local API, sending `anthropic-version: 2023-06-01` as older
    clients and curl do (under which sampling parameters are still taken)."""
    async with (
        LocalMessagesAPI() as api,
        anthropic.AsyncAnthropic(
            api_key="k",
            base_url=api.base_url,
            max_retries=0,
            default_headers={"anthropic-version": "2023-06-01"},
        ) as old,
    ):
        yield old


async def test_models_from_opus_4_7_refuse_sampling_parameters_under_any_version() -> None:
    """Migration guide, "Migrating to Claude Opus 4.7" (sampling parameters): temperature,
    top_p and top_k at a non-default value answer 400 on Claude 4.7 and later models
    (the API says "`temperature` is deprecated for this model."), whatever the
    anthropic-version; the 4.6 models and earlier still take them."""
    async with old_version_client() as old:
        for model in ("claude-opus-4-7", "claude-sonnet-5", "claude-fable-5-1"):
            for name, value in (("temperature", 0.5), ("top_p", 0.9), ("top_k", 5)):
                await refused(
                    old,
                    f"`{name}` is deprecated for this model",
                    model=model,
                    extra_body={name: value},
                )
        ok = await old.messages.create(
            model="claude-opus-4-7", max_tokens=64, messages=HI, extra_body={"temperature": 1.0}
        )
        assert ok.stop_reason == "end_turn", "the default value is no change"
        taken = await old.messages.create(
            model="claude-opus-4-6", max_tokens=64, messages=HI, extra_body={"temperature": 0.5}
        )
        assert taken.stop_reason == "end_turn"


async def test_thinking_refuses_temperature_and_top_k_and_a_low_top_p() -> None:
    """Extended thinking, "Feature compatibility"
    (https://platform.claude.com/docs/en/build-with-claude/extended-thinking): thinking
    "isn't compatible with temperature or top_k modifications"; with thinking on, top_p
    may be set between 0.95 and 1."""
    enabled: Any = {"type": "enabled", "budget_tokens": 1024}
    async with old_version_client() as old:
        for thinking in (enabled, {"type": "adaptive"}):
            model = "claude-sonnet-4-5" if thinking is enabled else "claude-opus-4-6"
            for extra, match in (
                ({"temperature": 0.5}, "temperature"),
                ({"top_k": 5}, "top_k"),
                ({"top_p": 0.9}, "top_p"),
            ):
                await refused(
                    old, match, model=model, thinking=thinking, max_tokens=4096, extra_body=extra
                )
        ok = await old.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=4096,
            messages=HI,
            thinking=enabled,
            extra_body={"top_p": 0.95, "temperature": 1.0},
        )
        assert ok.stop_reason == "end_turn"
        plain = await old.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=HI, extra_body={"top_k": 5}
        )
        assert plain.stop_reason == "end_turn", "without thinking they stay free"


async def test_a_prompt_over_the_context_window_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    words = " ".join(f"w{i}" for i in range(120_000))  # some 240K tokens
    await refused(
        client,
        "prompt is too long",
        model="claude-haiku-4-5",
        messages=[{"role": "user", "content": words}],
    )


async def test_thinking_rules_in_tool_loops_and_on_cache_control(
    client: anthropic.AsyncAnthropic,
) -> None:
    tools: Any = [{"name": "t", "input_schema": {"type": "object"}}]
    loop: Any = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}],
        },
    ]
    await refused(
        client,
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
        model="claude-sonnet-4-6",
        tools=tools,
        messages=loop,
        thinking={"type": "adaptive"},
    )
    plain = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, tools=tools, messages=loop
    )
    assert plain.stop_reason == "end_turn"
    first = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=HI, thinking={"type": "adaptive"}
    )
    thought = first.content[0].model_dump(exclude_none=True)
    marked = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {**thought, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "ok"},
            ],
        },
        {"role": "user", "content": "and?"},
    ]
    await refused(
        client,
        "thinking blocks cannot be marked with cache_control",
        model="claude-sonnet-4-6",
        messages=marked,
        thinking={"type": "adaptive"},
    )


async def test_images_are_checked_and_counted_by_their_size(
    client: anthropic.AsyncAnthropic,
) -> None:
    def ask(*blocks: Any) -> Any:
        return [{"role": "user", "content": [*blocks, {"type": "text", "text": "what?"}]}]

    model = "claude-sonnet-4-6"
    bare = await client.messages.count_tokens(model=model, messages=ask())
    small = await client.messages.count_tokens(model=model, messages=ask(image(png(200, 150))))
    assert small.input_tokens - bare.input_tokens == pytest.approx(200 * 150 / 750, abs=2)
    big = await client.messages.count_tokens(model=model, messages=ask(image(png(3000, 3000))))
    # scaled down to about 1.15 megapixels: about 1,533 tokens, not 12,000
    assert 1_450 <= big.input_tokens - bare.input_tokens <= 1_600
    await refused(client, "not valid base64", model=model, messages=ask(image("%%%")))
    await refused(
        client,
        "appears to be a image/png image",
        model=model,
        messages=ask(image(png(10, 10), "image/jpeg")),
    )
    await refused(
        client, "max allowed size: 8000 pixels", model=model, messages=ask(image(png(8001, 1)))
    )
    huge = base64.b64encode(base64.b64decode(png(10, 10)) + b"\0" * (5 * 1024 * 1024)).decode()
    await refused(client, "image exceeds 5 MB maximum", model=model, messages=ask(image(huge)))


async def test_newer_block_types_are_accepted_and_replayable(
    client: anthropic.AsyncAnthropic,
) -> None:
    tools: Any = [{"name": "t", "input_schema": {"type": "object"}, "defer_loading": True}]
    history: Any = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "find a tool"},
                {"type": "container_upload", "file_id": "file_1"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "bash_code_execution",
                    "input": {"command": "ls"},
                },
                {
                    "type": "bash_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": {
                        "type": "bash_code_execution_result",
                        "stdout": "a",
                        "stderr": "",
                        "return_code": 0,
                        "content": [],
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_2",
                    "name": "tool_search_tool_regex",
                    "input": {"query": "t"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_2",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [{"type": "tool_reference", "tool_name": "t"}],
                    },
                },
                {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "tool_reference", "tool_name": "t"}],
                }
            ],
        },
    ]
    reply = await client.messages.create(
        model="claude-opus-4-8", max_tokens=64, tools=tools, messages=history
    )
    assert reply.stop_reason == "end_turn"
    beta_history: Any = [
        {"role": "user", "content": "long ago"},
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": "A summary."},
                {
                    "type": "mcp_tool_use",
                    "id": "mcptoolu_1",
                    "name": "x",
                    "server_name": "s",
                    "input": {},
                },
                {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "content": "y"},
                {"type": "text", "text": "ok"},
            ],
        },
        {"role": "user", "content": "next"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="beta block type"):
        await client.messages.create(model="claude-opus-4-8", max_tokens=64, messages=beta_history)
    beta = await client.beta.messages.create(
        model="claude-opus-4-8",
        max_tokens=64,
        messages=beta_history,
        betas=["compact-2026-01-12"],
    )
    assert beta.stop_reason == "end_turn"


async def test_the_beta_client_takes_beta_fields(client: anthropic.AsyncAnthropic) -> None:
    edits: Any = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    reply = await client.beta.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=64,
        messages=HI,
        context_management=edits,
        betas=["context-management-2025-06-27"],
    )
    assert reply.stop_reason == "end_turn"
    with pytest.raises(anthropic.BadRequestError, match="Extra inputs are not permitted"):
        await client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            messages=HI,
            extra_body={"context_management": edits},
        )


async def test_foreign_signatures_are_opaque_unless_verified() -> None:
    live_signed: Any = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "", "signature": "EqQBCkgIBxABGAIqQKlive"},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3live"},
                {"type": "text", "text": "hello"},
            ],
        },
        {"role": "user", "content": "again"},
    ]
    thinking: Any = {"type": "adaptive"}
    for verify in (False, True):
        async with (
            LocalMessagesAPI(verify_foreign_signatures=verify) as api,
            anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as sdk,
        ):
            if verify:
                with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
                    await sdk.messages.create(
                        model="claude-opus-4-8",
                        max_tokens=64,
                        messages=live_signed,
                        thinking=thinking,
                    )
            else:
                reply = await sdk.messages.create(
                    model="claude-opus-4-8",
                    max_tokens=64,
                    messages=live_signed,
                    thinking=thinking,
                )
                assert reply.stop_reason == "end_turn"


async def test_usage_counts_server_tool_calls() -> None:
    script = ScriptedResponder()
    script.push(
        Reply(
            (
                ReplyRawBlock(
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "x"},
                    }
                ),
                ReplyRawBlock(
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
                ),
                ReplyText("found"),
            )
        )
    )
    async with (
        LocalMessagesAPI(responder=script) as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as sdk,
    ):
        reply = await sdk.messages.create(
            model="claude-opus-4-8",
            max_tokens=512,
            messages=HI,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    assert reply.usage.server_tool_use is not None
    assert reply.usage.server_tool_use.web_search_requests == 1
    assert reply.usage.server_tool_use.web_fetch_requests == 0


async def test_a_server_tool_version_the_model_lacks_is_a_400(
    client: anthropic.AsyncAnthropic,
) -> None:
    """models.toml's server_tools, as the product reads them: Haiku 4.5 takes the basic
    web search, not the dynamic-filtering version; the Models API says so per family."""
    dynamic: Any = [{"type": "web_search_20260209", "name": "web_search"}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(
            model="claude-haiku-4-5", max_tokens=64, messages=HI, tools=dynamic
        )
    body: Any = caught.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"] == (
        "tools.0: the tool type 'web_search_20260209' is not supported by the model "
        "'claude-haiku-4-5'"
    )
    # Refused before anything else: token counting answers the same.
    with pytest.raises(anthropic.BadRequestError, match="web_search_20260209"):
        await client.messages.count_tokens(model="claude-haiku-4-5", messages=HI, tools=dynamic)
    basic: Any = [{"type": "web_search_20250305", "name": "web_search"}]
    reply = await client.messages.create(
        model="claude-haiku-4-5", max_tokens=64, messages=HI, tools=basic
    )
    assert reply.stop_reason == "end_turn"
    ok = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=HI, tools=dynamic
    )
    assert ok.stop_reason == "end_turn"
    haiku = await client.models.retrieve("claude-haiku-4-5")
    assert haiku.capabilities is not None
    assert haiku.capabilities.server_tools.web_search.supported  # some version of it
    assert not haiku.capabilities.code_execution.supported  # no dynamic filtering
    sonnet = await client.models.retrieve("claude-sonnet-4-6")
    assert sonnet.capabilities is not None
    assert sonnet.capabilities.code_execution.supported


async def test_counts_near_the_live_apis_published_figures(
    client: anthropic.AsyncAnthropic,
) -> None:
    """Figures the live API reported for these requests (bench/README.md, "Token
    counts"): within 25% each, and the tool-use system prompt present."""
    hello = await client.messages.count_tokens(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hello, world"}]
    )
    assert abs(hello.input_tokens - 10) <= 2
    weather: Any = [
        {
            "name": "get_weather",
            "description": "Get weather for a city",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    ask: Any = [{"role": "user", "content": "What's the weather in Paris?"}]
    auto = await client.messages.count_tokens(
        model="claude-sonnet-4-5", messages=ask, tools=weather, tool_choice={"type": "auto"}
    )
    forced = await client.messages.count_tokens(
        model="claude-sonnet-4-5", messages=ask, tools=weather, tool_choice={"type": "any"}
    )
    assert abs(auto.input_tokens - 572) / 572 <= 0.25  # the live API: 572
    assert abs(forced.input_tokens - 655) / 655 <= 0.25  # the live API: 655
    assert forced.input_tokens > auto.input_tokens


async def test_a_reply_cut_at_max_tokens_reports_no_more_output_than_that() -> None:
    # Docs (Messages API, max_tokens): the most tokens the model generates. The cut
    # follows the calibrated count, so punctuation-dense text is cut shorter, never over.
    prose = "It's 3:45 p.m. -- see https://example.com/a/b?c=d, (twice); ok?! " * 4
    script = ScriptedResponder()
    async with (
        LocalMessagesAPI(responder=script) as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as sdk,
    ):
        for limit in (1, 2, 5, 17):
            script.push(prose)
            reply = await sdk.messages.create(
                model="claude-opus-4-8", max_tokens=limit, messages=HI
            )
            assert reply.stop_reason == "max_tokens"
            assert 1 <= reply.usage.output_tokens <= limit
            text = "".join(b.text for b in reply.content if b.type == "text")
            assert prose.startswith(text)
            assert len(text) < len(prose)
        script.push(prose)
        whole = await sdk.messages.create(model="claude-opus-4-8", max_tokens=4096, messages=HI)
        assert whole.stop_reason == "end_turn"
        assert "".join(b.text for b in whole.content if b.type == "text") == prose


async def test_citations_for_documents_and_search_results(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Docs ("Citations", "Search results"): a source with citations enabled is cited by
    # its location; indexes count documents and search results apart, in request order.
    earlier: Any = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Old notes."},
    }
    plain: Any = {
        "type": "document",
        "title": "Launch plan",
        "source": {
            "type": "text",
            "media_type": "text/plain",
            "data": "The launch is on Friday. Marketing starts on Monday.",
        },
        "citations": {"enabled": True},
    }
    custom: Any = {
        "type": "document",
        "title": "Checklist",
        "source": {
            "type": "content",
            "content": [{"type": "text", "text": "Book the hall."}, {"type": "text", "text": "x"}],
        },
        "citations": {"enabled": True},
    }
    uncited: Any = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Not to be cited."},
    }
    found: Any = {
        "type": "search_result",
        "source": "https://example.com/cats",
        "title": "Cats",
        "content": [{"type": "text", "text": "Cats sleep 15 hours a day."}],
        "citations": {"enabled": True},
    }
    search: Any = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}
    answer: Any = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [found]}
    messages: Any = [
        {"role": "user", "content": [earlier, {"type": "text", "text": "Keep this."}]},
        {"role": "assistant", "content": "Kept."},
        {"role": "user", "content": "Search please."},
        {"role": "assistant", "content": [search]},
        {"role": "user", "content": [answer, plain, custom, uncited]},
    ]
    tools: Any = [{"name": "search", "description": "Search", "input_schema": {"type": "object"}}]
    reply = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, tools=tools, messages=messages
    )
    cited = [b.citations for b in reply.content if b.type == "text" and b.citations]
    assert [[c.model_dump(exclude_none=True) for c in cs] for cs in cited] == [
        [
            {
                "type": "search_result_location",
                "cited_text": "Cats sleep 15 hours a day.",
                "search_result_index": 0,
                "source": "https://example.com/cats",
                "title": "Cats",
                "start_block_index": 0,
                "end_block_index": 1,
            }
        ],
        [
            {
                "type": "char_location",
                "cited_text": "The launch is on Friday.",
                "document_index": 1,  # the earlier message's document is index 0
                "document_title": "Launch plan",
                "start_char_index": 0,
                "end_char_index": 24,
            }
        ],
        [
            {
                "type": "content_block_location",
                "cited_text": "Book the hall.",
                "document_index": 2,
                "document_title": "Checklist",
                "start_block_index": 0,
                "end_block_index": 1,
            }
        ],
    ]
    # Streamed: the same citations arrive as citations_delta events.
    async with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=1024, tools=tools, messages=messages
    ) as stream:
        streamed = await stream.get_final_message()
    assert [b.citations for b in streamed.content if b.type == "text" and b.citations] == cited
    # The cited reply goes back as history and is accepted.
    history = [*messages, {"role": "assistant", "content": reply.to_dict()["content"]}]
    history.append({"role": "user", "content": "thanks"})
    again = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, tools=tools, messages=history
    )
    assert not any(b.type == "text" and b.citations for b in again.content)
