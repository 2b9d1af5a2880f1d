"""Extended thinking in the local Messages API, through the real `anthropic` SDK: thinking
blocks with signatures (streamed as thinking_delta / signature_delta), redacted thinking,
altered blocks refused, earlier turns' thinking stripped or kept per model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import pytest

from frontmind.localapi import (
    REDACTED_TRIGGER,
    LocalMessagesAPI,
    Reply,
    ReplyText,
    ReplyThinking,
    ScriptedResponder,
)

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"
THINK: Any = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., anthropic.AsyncAnthropic]]:
    made: list[anthropic.AsyncAnthropic] = []

    def make(base_url: str) -> anthropic.AsyncAnthropic:
        made.append(anthropic.AsyncAnthropic(api_key="k", base_url=base_url, max_retries=0))
        return made[-1]

    yield make
    for client in made:
        await client.close()


@pytest.fixture
async def client(
    clients: Callable[..., anthropic.AsyncAnthropic],
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with LocalMessagesAPI(token_counts="plain") as api:
        yield clients(api.base_url)


async def create(client: anthropic.AsyncAnthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 2048)
    return await client.messages.create(**kwargs)


def dumped(message: Any) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in message.content]


async def test_thinking_blocks_lead_the_reply_and_stream_with_signatures(
    client: anthropic.AsyncAnthropic,
) -> None:
    messages: Any = [{"role": "user", "content": "why is the sky blue?"}]
    plain = await create(client, thinking=THINK, messages=messages)
    assert [b.type for b in plain.content] == ["thinking", "text"]
    assert plain.content[0].thinking
    assert plain.content[0].signature
    kinds: list[str] = []
    async with client.messages.stream(
        model=MODEL, max_tokens=2048, thinking=THINK, messages=messages
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                kinds.append(event.delta.type)
        streamed = await stream.get_final_message()
    assert "thinking_delta" in kinds
    assert "signature_delta" in kinds
    assert dumped(streamed) == dumped(plain)  # deterministic: the same text, the same signature
    no_thinking = await create(client, messages=messages)
    assert [b.type for b in no_thinking.content] == ["text"]
    adaptive = await create(client, thinking={"type": "adaptive"}, messages=messages)
    assert adaptive.content[0].type == "thinking"


async def test_models_that_think_by_default_do(client: anthropic.AsyncAnthropic) -> None:
    m = await create(client, model="claude-opus-5", messages=[{"role": "user", "content": "hi"}])
    assert m.content[0].type == "thinking"
    off = await create(
        client,
        model="claude-opus-5",
        thinking={"type": "disabled"},
        messages=[{"role": "user", "content": "hi"}],
    )
    assert [b.type for b in off.content] == ["text"]


async def test_returned_thinking_must_be_unaltered(client: anthropic.AsyncAnthropic) -> None:
    first = await create(client, thinking=THINK, messages=[{"role": "user", "content": "hi"}])
    reply = dumped(first)

    def turn(blocks: list[dict[str, Any]]) -> Any:
        return [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": "and?"},
        ]

    ok = await create(client, thinking=THINK, messages=turn(reply))
    assert ok.content[0].type == "thinking"
    altered_text = [{**reply[0], "thinking": reply[0]["thinking"] + " (edited)"}, reply[1]]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        await create(
            client,
            model="claude-opus-4-8",
            thinking={"type": "adaptive"},
            messages=turn(altered_text),
        )
    # A signature of this server's, altered (its marker kept): refused. One without the
    # marker was made elsewhere: opaque (test_foreign_signatures_are_opaque...).
    own = reply[0]["signature"]
    altered_signature = [{**reply[0], "signature": own[:-8] + "AAAAAAA="}, reply[1]]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        await create(client, thinking=THINK, messages=turn(altered_signature))


async def test_redacted_thinking_round_trips_and_is_checked(
    client: anthropic.AsyncAnthropic,
) -> None:
    ask = [{"role": "user", "content": f"please think {REDACTED_TRIGGER}"}]
    first = await create(client, thinking=THINK, messages=ask)
    reply = dumped(first)
    assert reply[0]["type"] == "redacted_thinking"
    assert reply[0]["data"]
    history: Any = [
        *ask,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "ok"},
    ]
    assert (await create(client, thinking=THINK, messages=history)).stop_reason == "end_turn"
    altered = reply[0]["data"][:-8] + "AAAAAAA="
    history[1]["content"] = [{"type": "redacted_thinking", "data": altered}, reply[1]]
    with pytest.raises(anthropic.BadRequestError, match="redacted_thinking"):
        await create(client, thinking=THINK, messages=history)


async def test_omitted_thinking_keeps_its_signature(client: anthropic.AsyncAnthropic) -> None:
    hidden: Any = {"type": "adaptive", "display": "omitted"}
    first = await create(client, thinking=hidden, messages=[{"role": "user", "content": "hi"}])
    block = dumped(first)[0]
    assert block["type"] == "thinking"
    assert block["thinking"] == ""
    assert block["signature"]
    history: Any = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": dumped(first)},
        {"role": "user", "content": "more"},
    ]
    assert (await create(client, thinking=hidden, messages=history)).content


# The SDK warns that `thinking.type=enabled` is deprecated on the newer models; the test
# sends it there on purpose (it is still accepted), to check the rule per model.
@pytest.mark.filterwarnings("ignore:Using Claude with .*'thinking.type=enabled' is deprecated")
async def test_earlier_turns_thinking_is_stripped_or_kept_per_model(
    client: anthropic.AsyncAnthropic,
) -> None:
    """Claude 4 models before Opus 4.5 strip thinking of earlier turns from the context: it
    is not counted, and (being ignored) not checked. Later models keep and check it."""
    for model, kept in [("claude-opus-4-1", False), ("claude-opus-4-6", True)]:
        first = await create(
            client, model=model, thinking=THINK, messages=[{"role": "user", "content": "hi"}]
        )
        reply = dumped(first)
        with_thinking: Any = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "next"},
        ]
        without: Any = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": reply[1:]},
            {"role": "user", "content": "next"},
        ]
        counted = await client.messages.count_tokens(
            model=model, thinking=THINK, messages=with_thinking
        )
        bare = await client.messages.count_tokens(model=model, thinking=THINK, messages=without)
        assert (counted.input_tokens > bare.input_tokens) is kept, model
        sent = await create(client, model=model, thinking=THINK, messages=with_thinking)
        u = sent.usage
        total = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        assert total == counted.input_tokens, model
        with_thinking[1]["content"] = [{**reply[0], "thinking": "edited"}, *reply[1:]]
        if kept:
            with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
                await create(client, model=model, thinking=THINK, messages=with_thinking)
        else:
            assert (await create(client, model=model, thinking=THINK, messages=with_thinking)).id


async def test_thinking_in_a_tool_loop_with_the_default_responder(
    client: anthropic.AsyncAnthropic,
) -> None:
    tools: Any = [
        {
            "name": "add_reminder",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    ]
    ask: Any = [{"role": "user", "content": "remind me to call mum in 5 minutes"}]
    first = await create(client, model="claude-opus-4-1", thinking=THINK, tools=tools, messages=ask)
    assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
    assert first.stop_reason == "tool_use"
    use = first.content[2]
    assert use.input == {"text": "call mum", "due_in_minutes": 5}
    loop: Any = [
        *ask,
        {"role": "assistant", "content": dumped(first)},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "ok"}],
        },
    ]
    second = await create(
        client, model="claude-opus-4-1", thinking=THINK, tools=tools, messages=loop
    )
    assert [b.type for b in second.content] == ["thinking", "text"]
    # In the tool loop the assistant turn's thinking is part of the current turn: checked.
    loop[1]["content"] = [{**dumped(first)[0], "thinking": "edited"}, *dumped(first)[1:]]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        await create(client, model="claude-opus-4-1", thinking=THINK, tools=tools, messages=loop)


async def test_scripted_thinking_replies(clients: Callable[..., anthropic.AsyncAnthropic]) -> None:
    script = ScriptedResponder()
    script.push(
        Reply((ReplyThinking("first I weigh the options"), ReplyText("Option B."))),
        Reply((ReplyThinking("hidden", redacted=True), ReplyText("Done."))),
        Reply((ReplyThinking("not shown: thinking is off"), ReplyText("Plain."))),
    )
    async with LocalMessagesAPI(responder=script, token_counts="plain") as api:
        client = clients(api.base_url)
        ask: Any = [{"role": "user", "content": "choose"}]
        first = await create(client, thinking=THINK, messages=ask)
        assert first.content[0].thinking == "first I weigh the options"
        second = await create(client, thinking=THINK, messages=ask)
        assert second.content[0].type == "redacted_thinking"
        third = await create(client, messages=ask)
        assert [b.type for b in third.content] == ["text"]


async def test_thinking_budget_is_validated(client: anthropic.AsyncAnthropic) -> None:
    ask: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.BadRequestError, match="greater than or equal to 1024"):
        await create(client, thinking={"type": "enabled", "budget_tokens": 100}, messages=ask)
    with pytest.raises(anthropic.BadRequestError, match="must be greater than"):
        await create(
            client,
            max_tokens=1500,
            thinking={"type": "enabled", "budget_tokens": 2000},
            messages=ask,
        )
