"""The local Messages API against Anthropic's docs and the live API's quoted 400s, rule
by rule (review C): each test names its source and talks to the local server through the
real `anthropic` SDK."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from frontmind.localapi import LocalMessagesAPI
from tests.test_localapi_doc_rules import HI
from tests.test_localapi_doc_rules import error_of as rules_error_of

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-5"


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    """The local server; conftest's `client` is an SDK client of it."""
    async with LocalMessagesAPI() as server:
        yield server


async def error_of(client: anthropic.AsyncAnthropic, **kwargs: Any) -> dict[str, Any]:
    """The 400's error object (test_localapi_doc_rules' helper, on this file's model)."""
    return await rules_error_of(client, **{"model": MODEL, **kwargs})


async def test_a_stop_sequence_must_hold_more_than_whitespace(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API refuses an empty stop sequence ("stop_sequences: each stop sequence
    # must be non-empty", MegaGrindStone/mcp-web-ui#5, sent ["", "\n"]) and one of
    # whitespace alone ("... must contain non-whitespace", BerriAI/litellm#3286, sent
    # ["\n"]); the local API took both and stopped on them.
    empty = await error_of(client, stop_sequences=["", "\n"])
    assert empty == {
        "type": "invalid_request_error",
        "message": "stop_sequences: each stop sequence must be non-empty",
    }
    for sequences in (["\n"], ["END", " \t"]):
        blank = await error_of(client, stop_sequences=sequences)
        assert blank["message"] == "stop_sequences: each stop sequence must contain non-whitespace"
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=HI, stop_sequences=["\nEND", " said"]
    )
    assert reply.stop_reason == "stop_sequence"
    assert reply.stop_sequence == " said"


async def test_a_user_id_holding_an_email_address_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference, metadata.user_id: "a uuid, hash value, or other opaque
    # identifier ... Do not include any identifying information such as name, email
    # address, or phone number"; the live API answers an email address with a 400
    # ("metadata.user_id: user_id appears to contain an email address. Please send a
    # uuid or hash value in...", BerriAI/litellm#10106). The local API took it.
    for user_id in ("jared@example.com", "user:jared.doe@mail.example.org"):
        refused = await error_of(client, metadata={"user_id": user_id})
        assert refused["type"] == "invalid_request_error"
        assert refused["message"].startswith(
            "metadata.user_id: user_id appears to contain an email address. "
            "Please send a uuid or hash value"
        )
    for opaque in ("3f2b9c1e-8d4a-4f6e-9b7c-2a1d5e8f0c3b", "sha256:ab12cd", "team@"):
        reply = await client.messages.create(
            model=MODEL, max_tokens=4096, messages=HI, metadata={"user_id": opaque}
        )
        assert reply.stop_reason == "end_turn"


async def test_a_user_id_over_256_characters_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference, metadata.user_id: "maxLength 256" (as vercel/ai#12419 quotes
    # https://platform.claude.com/docs/en/api/messages#metadata). The local API took any
    # length, so an id the live API refuses passed every test.
    refused = await error_of(client, metadata={"user_id": "a" * 257})
    assert refused == {
        "type": "invalid_request_error",
        "message": "metadata.user_id: String should have at most 256 characters",
    }
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=HI, metadata={"user_id": "a" * 256}
    )
    assert reply.stop_reason == "end_turn"


async def test_a_request_over_32_mb_gets_the_documented_413(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Docs, API errors: "413 - request_too_large: Request exceeds the maximum allowed
    # number of bytes", 32 MB on the Messages and Token Counting APIs. The local API
    # answered in its own words, naming a byte count.
    huge: Any = [{"role": "user", "content": "x" * (33 * 1024 * 1024)}]
    for call in (
        client.messages.create(model=MODEL, max_tokens=4096, messages=huge),
        client.messages.count_tokens(model=MODEL, messages=huge),
    ):
        with pytest.raises(anthropic.ContentTooLargeError) as info:
            await call
        body: Any = info.value.body
        assert body["error"] == {
            "type": "request_too_large",
            "message": "Request exceeds the maximum allowed number of bytes.",
        }
        assert info.value.response.headers["request-id"] == body["request_id"]


async def test_thinking_text_is_omitted_by_default_from_opus_4_7_on(
    client: anthropic.AsyncAnthropic,
) -> None:
    # "What's new in Claude Opus 4.7", "Thinking content omitted by default": without
    # thinking.display the API answers with thinking blocks of empty text and their
    # signature from Opus 4.7 on (models.toml's thinking_display); Opus 4.6 and earlier
    # still summarize. The local API showed the text unless the request asked otherwise.
    thinking: Any = {"type": "adaptive"}
    omitted = await client.messages.create(
        model="claude-opus-4-7", max_tokens=4096, messages=HI, thinking=thinking
    )
    block = omitted.content[0]
    assert block.type == "thinking"
    assert block.thinking == ""
    assert block.signature
    shown = await client.messages.create(
        model="claude-opus-4-7",
        max_tokens=4096,
        messages=HI,
        thinking={"type": "adaptive", "display": "summarized"},
    )
    assert shown.content[0].type == "thinking"
    assert shown.content[0].thinking
    older = await client.messages.create(
        model="claude-opus-4-6", max_tokens=4096, messages=HI, thinking=thinking
    )
    assert older.content[0].type == "thinking"
    assert older.content[0].thinking
    # Streamed, an omitted block has no thinking_delta: its signature alone.
    async with client.messages.stream(
        model="claude-opus-4-7", max_tokens=4096, messages=HI, thinking=thinking
    ) as stream:
        deltas = [e.delta.type async for e in stream if e.type == "content_block_delta"]
        final = await stream.get_final_message()
    assert "thinking_delta" not in deltas
    assert "signature_delta" in deltas
    assert final.content[0].type == "thinking"
    assert final.content[0].thinking == ""
    # The omitted block goes back as it came, and the next turn takes it.
    history: Any = [
        *HI,
        {"role": "assistant", "content": [b.model_dump() for b in omitted.content]},
        {"role": "user", "content": "and then?"},
    ]
    again = await client.messages.create(
        model="claude-opus-4-7", max_tokens=4096, messages=history, thinking=thinking
    )
    assert again.stop_reason == "end_turn"


async def test_tool_choice_takes_only_the_four_documented_types(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference's tool_choice is one of auto, any, tool (with the tool's name)
    # and none. The local API took any other type as auto, so OpenAI's "required" (the
    # mistake langchain-ai/langchainjs#10519 fixed) passed every test.
    tools: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]
    missing = await error_of(client, tools=tools, tool_choice={"name": "lookup"})
    assert missing["message"] == "tool_choice: Unable to extract tag using discriminator 'type'"
    for wrong in ("required", "function"):
        refused = await error_of(client, tools=tools, tool_choice={"type": wrong})
        assert refused["type"] == "invalid_request_error"
        assert refused["message"] == (
            f"tool_choice: Input tag '{wrong}' found using 'type' does not match any of the "
            "expected tags: 'auto', 'any', 'tool', 'none'"
        )
    nameless = await error_of(client, tools=tools, tool_choice={"type": "tool"})
    assert nameless["message"] == "tool_choice.tool.name: Field required"
    required: Any = {"type": "required"}
    with pytest.raises(anthropic.BadRequestError, match="Input tag 'required'"):
        await client.messages.count_tokens(
            model=MODEL, messages=HI, tools=tools, tool_choice=required
        )
    rights: Any = ({"type": "auto"}, {"type": "none"})
    for right in rights:
        reply = await client.messages.create(
            model=MODEL, max_tokens=4096, messages=HI, tools=tools, tool_choice=right
        )
        assert reply.stop_reason == "end_turn"


async def test_thinking_display_is_summarized_or_omitted(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Docs, thinking, "Controlling thinking display": display is "summarized" or
    # "omitted" (the SDK types it so). The local API took any value and, for anything
    # but "omitted", showed the text, so a typo such as "summary" (anomalyco/opencode
    # #22852's "display: summary override does nothing") passed.
    for model, kind, thinking in (
        ("claude-opus-4-6", "adaptive", {"type": "adaptive", "display": "summary"}),
        (
            "claude-sonnet-4-5",
            "enabled",
            {"type": "enabled", "budget_tokens": 2048, "display": "full"},
        ),
    ):
        refused = await error_of(client, model=model, thinking=thinking)
        assert refused["message"] == (
            f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'"
        )
    fine: Any = {"type": "adaptive", "display": "omitted"}
    reply = await client.messages.create(
        model="claude-opus-4-6", max_tokens=4096, messages=HI, thinking=fine
    )
    assert reply.content[0].type == "thinking"
    assert reply.content[0].thinking == ""


def _png_of(raw_bytes: int, width: int = 10, height: int = 10) -> str:
    """A PNG header of this size padded to `raw_bytes` bytes, as base64."""
    size = width.to_bytes(4, "big") + height.to_bytes(4, "big")
    header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\x0dIHDR" + size
    return base64.b64encode(header + b"\x00" * (raw_bytes - len(header))).decode()


async def test_the_5_mb_image_limit_counts_the_base64_text(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API refuses an image whose base64 text exceeds 5 MB ("image exceeds 5 MB
    # maximum: 5649924 bytes > 5242880 bytes", earendil-works/pi#424), as Anthropic's
    # own client counts it: "the base64 string length ... NOT raw bytes" (Claude Code's
    # apiLimits.ts). The local API counted the decoded bytes, so a 4 MB image (5.3 MB
    # of base64) passed.
    def ask(data: str) -> Any:
        source = {"type": "base64", "media_type": "image/png", "data": data}
        content = [{"type": "image", "source": source}, {"type": "text", "text": "what?"}]
        return [{"role": "user", "content": content}]

    four_mb = _png_of(4 * 1024 * 1024)
    assert len(four_mb) > 5 * 1024 * 1024
    refused = await error_of(client, messages=ask(four_mb))
    assert refused["message"] == (
        f"messages.0.content.0.source.base64: image exceeds 5 MB maximum: {len(four_mb)} "
        "bytes > 5242880 bytes"
    )
    with pytest.raises(anthropic.BadRequestError, match="image exceeds 5 MB maximum"):
        await client.messages.count_tokens(model=MODEL, messages=ask(four_mb))
    fits = _png_of(3 * 1024 * 1024)
    assert len(fits) < 5 * 1024 * 1024
    reply = await client.messages.create(model=MODEL, max_tokens=4096, messages=ask(fits))
    assert reply.stop_reason == "end_turn"


async def test_an_oversized_image_is_refused_in_the_live_api_words(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Vision, "Image size": 8000 px a side, 2000 px when a request holds more than 20
    # images. The live 400s: "At least one of the image dimensions exceed max allowed
    # size: 8000 pixels" (microsoft/vscode-copilot-chat#4688) and "... exceed max allowed
    # size for many-image requests: 2000 pixels", which clients match to shrink and
    # retry; the local API answered in words of its own.
    def image(width: int, height: int) -> Any:
        data = _png_of(64, width, height)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }

    text: Any = {"type": "text", "text": "what?"}
    wide: Any = [{"role": "user", "content": [image(8001, 10), text]}]
    refused = await error_of(client, messages=wide)
    assert refused["message"] == (
        "messages.0.content.0.source.base64.data: At least one of the image dimensions "
        "exceed max allowed size: 8000 pixels"
    )
    many: Any = [
        {"role": "user", "content": [*(image(100, 100) for _ in range(20)), image(10, 2001), text]}
    ]
    refused = await error_of(client, messages=many)
    assert refused["message"] == (
        "messages.0.content.20.source.base64.data: At least one of the image dimensions "
        "exceed max allowed size for many-image requests: 2000 pixels"
    )
    many[0]["content"][20] = image(10, 2000)
    reply = await client.messages.create(model=MODEL, max_tokens=4096, messages=many)
    assert reply.stop_reason == "end_turn"


async def test_a_prefill_is_refused_when_thinking_is_on(
    client: anthropic.AsyncAnthropic,
) -> None:
    # Extended thinking, "Feature compatibility": "You cannot pre-fill responses when
    # thinking is enabled". The live API answers a text prefill with "messages.1.content.
    # 0.type: Expected thinking or redacted_thinking, but found text. When thinking is
    # enabled, a final assistant message must start with a thinking block ..."
    # (n8n-io/n8n#22550); the local API continued from it on the models that take a
    # prefill. Without thinking the prefill still passes.
    prefill: Any = [*HI, {"role": "assistant", "content": "Sure,"}]
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}
    refused = await error_of(client, messages=prefill, thinking=thinking)
    assert refused["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`text`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block"
    )
    with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
        await client.messages.count_tokens(model=MODEL, messages=prefill, thinking=thinking)
    plain = await client.messages.create(model=MODEL, max_tokens=4096, messages=prefill)
    assert plain.stop_reason == "end_turn"
    # A turn that begins with its thinking, as a paused turn sent back does, passes.
    first = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=HI, thinking=thinking
    )
    opened: Any = [
        *HI,
        {
            "role": "assistant",
            "content": [first.content[0].model_dump(), {"type": "text", "text": "Sure,"}],
        },
    ]
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=opened, thinking=thinking
    )
    assert reply.stop_reason == "end_turn"


async def _thinking_block(client: anthropic.AsyncAnthropic) -> Any:
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=HI, thinking=thinking
    )
    assert reply.content[0].type == "thinking"
    return reply.content[0].model_dump()


async def test_an_assistant_turn_holding_thinking_begins_with_it(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API: "messages.51.content.0: If an assistant message contains any thinking
    # blocks, the first block must be thinking or redacted_thinking. Found text."
    # (anthropics/claude-code#20705, a history replayed with text before thinking), with
    # thinking on or off; the local API took the turn.
    block = await _thinking_block(client)
    text: Any = {"type": "text", "text": "Hello."}
    swapped: Any = [*HI, {"role": "assistant", "content": [text, block]}, *HI]
    for extra in ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, {}):
        refused = await error_of(client, messages=swapped, **extra)
        assert refused["message"] == (
            "messages.1.content.0: If an assistant message contains any thinking blocks, the "
            "first block must be thinking or redacted_thinking. Found text."
        )
    in_order: Any = [*HI, {"role": "assistant", "content": [block, text]}, *HI]
    reply = await client.messages.create(model=MODEL, max_tokens=4096, messages=in_order)
    assert reply.stop_reason == "end_turn"


async def test_with_thinking_off_the_final_assistant_turn_holds_no_thinking(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API: "messages.1.content.0: When thinking is disabled, an `assistant`
    # message in the final position cannot contain `thinking`. To use thinking blocks,
    # enable `thinking` in your request." (tailcallhq/forgecode#1853, claude-sonnet-4-5);
    # the local API continued from such a turn. Earlier turns may keep theirs.
    block = await _thinking_block(client)
    text: Any = {"type": "text", "text": "Hello."}
    final: Any = [*HI, {"role": "assistant", "content": [block, text]}]
    refused = await error_of(client, messages=final)
    assert refused["message"] == (
        "messages.1.content.0: When thinking is disabled, an `assistant` message in the final "
        "position cannot contain `thinking`. To use thinking blocks, enable `thinking` in "
        "your request."
    )
    earlier: Any = [*final, *HI]
    reply = await client.messages.create(model=MODEL, max_tokens=4096, messages=earlier)
    assert reply.stop_reason == "end_turn"


async def test_the_final_assistant_turn_does_not_end_on_thinking(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API: "messages.1: The final block in an assistant message cannot be
    # `thinking`." (tailcallhq/forgecode#2107; measured on claude-haiku-4-5 and
    # claude-opus-5 in router-for-me/CLIProxyAPI#5322, where the same thinking-only turn
    # before a user turn passes). The local API continued from it.
    block = await _thinking_block(client)
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}
    ending: Any = [*HI, {"role": "assistant", "content": [block]}]
    refused = await error_of(client, messages=ending, thinking=thinking)
    assert refused["message"] == (
        "messages.1: The final block in an assistant message cannot be `thinking`."
    )
    earlier: Any = [*ending, *HI]
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=earlier, thinking=thinking
    )
    assert reply.stop_reason == "end_turn"


async def test_an_empty_text_block_with_a_breakpoint_is_named_as_the_api_names_it(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API answers an empty text block that carries cache_control with
    # "messages.29.content.0.text: cache_control cannot be set for empty text blocks"
    # (NousResearch/hermes-agent#1216; anthropics/claude-code#50082): the breakpoint is
    # named, not the emptiness. The local API said "text content blocks must be
    # non-empty", which a client that strips the marker does not match.
    marked: Any = {"type": "text", "text": "", "cache_control": {"type": "ephemeral"}}
    lookup: Any = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    result: Any = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    history: Any = [
        *HI,
        {"role": "assistant", "content": [marked, lookup]},
        {"role": "user", "content": [result]},
    ]
    tools: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]
    refused = await error_of(client, messages=history, tools=tools)
    assert refused["message"] == (
        "messages.1.content.0.text: cache_control cannot be set for empty text blocks"
    )
    refused = await error_of(client, system=[marked])
    assert refused["message"] == "system.0.text: cache_control cannot be set for empty text blocks"
    unmarked: Any = [*HI, {"role": "assistant", "content": [{"type": "text", "text": ""}]}, *HI]
    refused = await error_of(client, messages=unmarked)
    assert refused["message"] == "messages.1.content.0: text content blocks must be non-empty"


async def test_a_tool_use_id_stands_once_in_a_request(client: anthropic.AsyncAnthropic) -> None:
    # The live API: "messages.1.content.1: `tool_use` ids must be unique"
    # (anthropics/claude-code#21317), across the whole history ("messages.43.content.2",
    # anthropics/claude-code#28515). The local API took two calls of one id, in one turn
    # or in two.
    tools: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]

    def use(call_id: str) -> Any:
        return {"type": "tool_use", "id": call_id, "name": "lookup", "input": {}}

    def result(call_id: str) -> Any:
        return {"type": "tool_result", "tool_use_id": call_id, "content": "done"}

    text: Any = {"type": "text", "text": "Looking."}
    one_turn: Any = [
        *HI,
        {"role": "assistant", "content": [use("toolu_1"), use("toolu_1")]},
        {"role": "user", "content": [result("toolu_1")]},
    ]
    refused = await error_of(client, messages=one_turn, tools=tools)
    assert refused["message"] == "messages.1.content.1: `tool_use` ids must be unique"
    two_turns: Any = [
        *HI,
        {"role": "assistant", "content": [text, use("toolu_1")]},
        {"role": "user", "content": [result("toolu_1")]},
        {"role": "assistant", "content": [text, use("toolu_1")]},
        {"role": "user", "content": [result("toolu_1")]},
    ]
    refused = await error_of(client, messages=two_turns, tools=tools)
    assert refused["message"] == "messages.3.content.1: `tool_use` ids must be unique"
    two_turns[3]["content"][1] = use("toolu_2")
    two_turns[4]["content"][0] = result("toolu_2")
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=two_turns, tools=tools
    )
    assert reply.stop_reason is not None


async def test_only_the_final_assistant_message_may_be_empty(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The live API: "messages.1: all messages must have non-empty content except for
    # the optional final assistant message" (tidyverse/ellmer#709, an empty assistant turn
    # before a user turn). The local API refused the final one too (and named no
    # exception); on a model that takes a prefill an empty one is a prefill of nothing.
    between: Any = [*HI, {"role": "assistant", "content": []}, *HI]
    refused = await error_of(client, messages=between)
    assert refused["message"] == (
        "messages.1: all messages must have non-empty content except for the optional final "
        "assistant message"
    )
    final: Any = [*HI, {"role": "assistant", "content": []}]
    reply = await client.messages.create(model=MODEL, max_tokens=4096, messages=final)
    assert reply.stop_reason == "end_turn"
    counted = await client.messages.count_tokens(model=MODEL, messages=final)
    assert counted.input_tokens > 0
    # A model without prefill still refuses it as one.
    refused = await error_of(client, model="claude-opus-4-6", messages=final)
    assert "The conversation must end with a user message" in refused["message"]


async def test_a_tool_use_id_keeps_to_the_api_pattern(client: anthropic.AsyncAnthropic) -> None:
    # The live API: "messages.1.content.1.tool_use.id: String should match pattern
    # '^[a-zA-Z0-9_-]+$'" (anomalyco/opencode#1279, an empty id replayed from storage;
    # CommandCodeAI/command-code#323). The local API took any id.
    tools: Any = [{"name": "lookup", "input_schema": {"type": "object"}}]
    text: Any = {"type": "text", "text": "Looking."}
    for call_id in ("", "call:1", "toolu 1", "functions.lookup.0"):
        use: Any = {"type": "tool_use", "id": call_id, "name": "lookup", "input": {}}
        result: Any = {"type": "tool_result", "tool_use_id": call_id, "content": "done"}
        history: Any = [
            *HI,
            {"role": "assistant", "content": [text, use]},
            {"role": "user", "content": [result]},
        ]
        refused = await error_of(client, messages=history, tools=tools)
        assert refused["message"] == (
            "messages.1.content.1.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        )
    fine: Any = {"type": "tool_use", "id": "toolu_01A-b_9", "name": "lookup", "input": {}}
    answered: Any = {"type": "tool_result", "tool_use_id": "toolu_01A-b_9", "content": "done"}
    history = [
        *HI,
        {"role": "assistant", "content": [text, fine]},
        {"role": "user", "content": [answered]},
    ]
    reply = await client.messages.create(
        model=MODEL, max_tokens=4096, messages=history, tools=tools
    )
    assert reply.stop_reason is not None


async def test_a_document_source_takes_its_one_media_type(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference: a base64 document source is a PDF ("application/pdf") and a
    # text source plain text ("text/plain"; Citations, "Plain text documents"). The
    # local API took a base64 PNG and an HTML text source as documents.
    def ask(source: Any) -> Any:
        document = {"type": "document", "source": source}
        return [{"role": "user", "content": [document, {"type": "text", "text": "what?"}]}]

    png: Any = {"type": "base64", "media_type": "image/png", "data": _png_of(64)}
    refused = await error_of(client, messages=ask(png))
    assert refused["message"] == (
        "messages.0.content.0.source.media_type: Input should be 'application/pdf'"
    )
    html: Any = {"type": "text", "media_type": "text/html", "data": "<p>hello</p>"}
    refused = await error_of(client, messages=ask(html))
    assert (
        refused["message"] == "messages.0.content.0.source.media_type: Input should be 'text/plain'"
    )
    plain: Any = {**html, "media_type": "text/plain", "data": "hello"}
    reply = await client.messages.create(model=MODEL, max_tokens=4096, messages=ask(plain))
    assert reply.stop_reason == "end_turn"


async def test_output_config_takes_only_its_documented_keys(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference's output_config holds effort and format (task_budget on the beta
    # Messages API); another key is refused as every unknown field is. The local API took
    # any key, so a misspelt "efort" passed and the model ran at its default effort.
    for config in ({"efort": "low"}, {"effort": "low", "task_budget": {"total": 1000}}):
        refused = await error_of(client, model="claude-opus-4-6", output_config=config)
        key = next(k for k in config if k != "effort")
        assert refused["message"] == f"output_config.{key}: Extra inputs are not permitted"
    reply = await client.messages.create(
        model="claude-opus-4-6", max_tokens=4096, messages=HI, output_config={"effort": "low"}
    )
    assert reply.stop_reason == "end_turn"


async def test_thinking_and_tool_choice_take_only_their_variants_keys(
    client: anthropic.AsyncAnthropic,
) -> None:
    # The API reference's thinking and tool_choice are objects tagged by type, each variant
    # with its keys; the live API refuses another key naming the variant ("thinking.
    # adaptive.effort: Extra inputs are not permitted", immersive-translate#3818). The
    # local API took any key, so a misplaced "effort" passed and did nothing.
    tools: Any = [{"name": "look", "input_schema": {"type": "object"}}]
    cases: list[tuple[str, dict[str, Any]]] = [
        (
            "thinking.enabled.foo",
            {"thinking": {"type": "enabled", "budget_tokens": 1024, "foo": 1}},
        ),
        (
            "thinking.adaptive.effort",
            {"model": "claude-opus-4-6", "thinking": {"type": "adaptive", "effort": "low"}},
        ),
        ("thinking.disabled.display", {"thinking": {"type": "disabled", "display": "omitted"}}),
        ("tool_choice.auto.foo", {"tools": tools, "tool_choice": {"type": "auto", "foo": 1}}),
        (
            "tool_choice.tool.input",
            {"tools": tools, "tool_choice": {"type": "tool", "name": "look", "input": {}}},
        ),
        (
            "tool_choice.none.disable_parallel_tool_use",
            {"tools": tools, "tool_choice": {"type": "none", "disable_parallel_tool_use": True}},
        ),
    ]
    for path, fields in cases:
        refused = await error_of(client, **fields)
        assert refused == {
            "type": "invalid_request_error",
            "message": f"{path}: Extra inputs are not permitted",
        }
        counted: Any = {"model": MODEL, "messages": HI, **fields}
        with pytest.raises(anthropic.BadRequestError, match=f"{path}: Extra inputs"):
            await client.messages.count_tokens(**counted)
    # Each variant's own keys still pass.
    reply = await client.messages.create(
        model=MODEL,
        max_tokens=4096,
        messages=HI,
        tools=tools,
        thinking={"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    assert reply.stop_reason in ("end_turn", "tool_use")
    chosen = await client.messages.create(
        model=MODEL,
        max_tokens=4096,
        messages=HI,
        tools=tools,
        tool_choice={"type": "tool", "name": "look", "disable_parallel_tool_use": True},
    )
    assert chosen.stop_reason == "tool_use"
