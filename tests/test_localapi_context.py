"""Context editing (`clear_tool_uses_20250919`, `clear_thinking_20251015`) and server-side
compaction (`compact_20260112`) in the local Messages API, through the real `anthropic`
SDK's beta client: each rule of the docs, the response's `context_management` and
`usage.iterations`, the beta headers, and their cache effects (a cleared or compacted
prefix is written again from the first block that changed)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from frontmind.localapi import LocalMessagesAPI
from frontmind.localapi._context import PLACEHOLDER
from storage import RawBlock
from tests._harness import completed, config, frontmind, run_turn

pytestmark = pytest.mark.anyio

EDITING = ["context-management-2025-06-27"]
COMPACT = ["compact-2026-01-12"]
MODEL = "claude-sonnet-4-6"
TOOLS: Any = [
    {"name": name, "description": name, "input_schema": {"type": "object"}}
    for name in ("read", "grep")
]
# Long enough to be cached on every model (4,096 tokens at most), in plain counts.
SYSTEM: Any = [
    {"type": "text", "text": "You help with files. " * 1000, "cache_control": {"type": "ephemeral"}}
]


@pytest.fixture
async def sdk() -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with (
        LocalMessagesAPI(token_counts="plain") as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as client,
    ):
        yield client


def tool_history(n: int, size: int = 400) -> list[Any]:
    """A user request, then `n` tool calls (alternately grep and read) with long results."""
    messages: list[Any] = [{"role": "user", "content": "look through the files"}]
    for i in range(n):
        name = "read" if i % 2 else "grep"
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {"path": f"f{i}"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "x " * size}
        messages.append({"role": "assistant", "content": [use]})
        messages.append({"role": "user", "content": [result]})
    return messages


def clear_tool_uses(**options: Any) -> Any:
    return {"edits": [{"type": "clear_tool_uses_20250919", **options}]}


async def count(sdk: anthropic.AsyncAnthropic, messages: list[Any], **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    return await sdk.beta.messages.count_tokens(messages=messages, tools=TOOLS, **kwargs)


async def create(sdk: anthropic.AsyncAnthropic, messages: list[Any], **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 64)
    return await sdk.beta.messages.create(messages=messages, tools=TOOLS, **kwargs)


def total_input(usage: Any) -> int:
    return int(
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    )


# -- clear_tool_uses ----------------------------------------------------------------------------


async def test_the_oldest_tool_results_are_cleared_past_the_trigger(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    history = tool_history(5)
    full = (await count(sdk, history)).input_tokens
    edits = clear_tool_uses(
        trigger={"type": "input_tokens", "value": 500}, keep={"type": "tool_uses", "value": 2}
    )
    reply = await create(sdk, history, context_management=edits, betas=EDITING)
    [applied] = reply.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919"
    assert applied.cleared_tool_uses == 3
    # What the request reads is what it was, less what the edit says it cleared.
    assert total_input(reply.usage) == full - applied.cleared_input_tokens
    counted = await count(sdk, history, context_management=edits, betas=EDITING)
    assert counted.input_tokens == total_input(reply.usage)
    assert counted.context_management.original_input_tokens == full
    # The three oldest results became the placeholder: the same count as sending them so.
    by_hand = [dict(m) for m in history]
    for i in (2, 4, 6):
        by_hand[i] = {
            "role": "user",
            "content": [{**history[i]["content"][0], "content": PLACEHOLDER}],
        }
    assert (await count(sdk, by_hand)).input_tokens == counted.input_tokens
    # Below the trigger (default 100,000 input tokens) nothing is cleared.
    untouched = await create(sdk, history, context_management=clear_tool_uses(), betas=EDITING)
    assert untouched.context_management.applied_edits == []
    assert total_input(untouched.usage) == full


async def test_tool_use_options_exclude_inputs_least_and_a_tool_use_trigger(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    history = tool_history(6)
    trigger = {"type": "tool_uses", "value": 5}
    keep = {"type": "tool_uses", "value": 1}
    base = await create(
        sdk, history, context_management=clear_tool_uses(trigger=trigger, keep=keep), betas=EDITING
    )
    assert base.context_management.applied_edits[0].cleared_tool_uses == 5
    # grep's results are never cleared: only the two older reads are.
    excluded = await create(
        sdk,
        history,
        context_management=clear_tool_uses(trigger=trigger, keep=keep, exclude_tools=["grep"]),
        betas=EDITING,
    )
    assert excluded.context_management.applied_edits[0].cleared_tool_uses == 2
    # Inputs too: more is cleared than the results alone.
    inputs = await create(
        sdk,
        history,
        context_management=clear_tool_uses(trigger=trigger, keep=keep, clear_tool_inputs=True),
        betas=EDITING,
    )
    assert (
        inputs.context_management.applied_edits[0].cleared_input_tokens
        > base.context_management.applied_edits[0].cleared_input_tokens
    )
    # Not worth breaking the cache for: less than clear_at_least would go, so nothing does.
    least = {"type": "input_tokens", "value": 100_000}
    kept = await create(
        sdk,
        history,
        context_management=clear_tool_uses(trigger=trigger, keep=keep, clear_at_least=least),
        betas=EDITING,
    )
    assert kept.context_management.applied_edits == []
    # Fewer tool uses than the trigger: nothing cleared.
    few = await create(
        sdk,
        tool_history(3),
        context_management=clear_tool_uses(trigger=trigger, keep=keep),
        betas=EDITING,
    )
    assert few.context_management.applied_edits == []


async def test_clearing_rewrites_the_cache_from_the_first_cleared_block(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    """The docs: clearing "invalidates cached prompt prefixes"; each clearing costs a cache
    write, and later requests reuse the newly cached prefix."""
    history = tool_history(5)
    history[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    edits = clear_tool_uses(
        trigger={"type": "input_tokens", "value": 7_000}, keep={"type": "tool_uses", "value": 2}
    )
    first = await create(sdk, history, system=SYSTEM, context_management=edits, betas=EDITING)
    assert first.context_management.applied_edits == []  # below the trigger
    # What the system prompt's entry (tools and system) holds.
    probe = await create(sdk, [{"role": "user", "content": "hi"}], system=SYSTEM)
    system = probe.usage.cache_read_input_tokens
    assert 0 < system < total_input(first.usage)
    # The conversation goes on, over the trigger: all but its two last results are cleared.
    longer = tool_history(12)
    longer[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    again = await create(sdk, longer, system=SYSTEM, context_management=edits, betas=EDITING)
    assert again.context_management.applied_edits[0].cleared_tool_uses == 10
    # From the first cleared result on, the prefix is new: only the system entry is read.
    assert again.usage.cache_read_input_tokens == system
    assert again.usage.cache_creation_input_tokens == total_input(again.usage) - system
    second = await create(sdk, longer, system=SYSTEM, context_management=edits, betas=EDITING)
    assert second.usage.cache_read_input_tokens == total_input(second.usage)  # reused whole


# -- clear_thinking ------------------------------------------------------------------------------


async def thinking_history(sdk: anthropic.AsyncAnthropic, model: str, turns: int) -> list[Any]:
    """`turns` exchanges whose replies lead with signed thinking blocks."""
    messages: list[Any] = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i}: " + "why? " * 40})
        reply = await sdk.messages.create(
            model=model,
            max_tokens=2048,
            messages=messages,
            thinking={"type": "adaptive", "display": "summarized"},
        )
        assert reply.content[0].type == "thinking"
        messages.append({"role": "assistant", "content": reply.content})
    messages.append({"role": "user", "content": "and now?"})
    return messages


async def test_clear_thinking_keeps_the_last_turns_and_all_keeps_every_one(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    history = await thinking_history(sdk, MODEL, 3)
    thinking: Any = {"type": "adaptive"}
    full = (await count(sdk, history, thinking=thinking)).input_tokens
    one: Any = {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
        ]
    }
    reply = await create(sdk, history, thinking=thinking, context_management=one, betas=EDITING)
    [applied] = reply.context_management.applied_edits
    assert applied.type == "clear_thinking_20251015"
    assert applied.cleared_thinking_turns == 2
    assert total_input(reply.usage) == full - applied.cleared_input_tokens
    every: Any = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    kept = await create(sdk, history, thinking=thinking, context_management=every, betas=EDITING)
    assert kept.context_management.applied_edits == []
    assert total_input(kept.usage) == full  # Sonnet 4.6 keeps them anyway


async def test_keep_all_overrides_a_model_that_strips_earlier_thinking(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    """Haiku 4.5 drops earlier turns' thinking by default; `keep: "all"` keeps it (the
    docs' setting "to maximize cache hits"), which costs its tokens."""
    model = "claude-haiku-4-5"
    messages: list[Any] = [{"role": "user", "content": "question: " + "why? " * 40}]
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    reply = await sdk.messages.create(
        model=model, max_tokens=2048, messages=messages, thinking=thinking
    )
    history = [
        *messages,
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "and?"},
    ]
    stripped = (await count(sdk, history, model=model, thinking=thinking)).input_tokens
    every: Any = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    kept = await count(
        sdk, history, model=model, thinking=thinking, context_management=every, betas=EDITING
    )
    assert kept.input_tokens > stripped


async def test_clearing_thinking_invalidates_the_cache_where_it_clears(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    history = await thinking_history(sdk, MODEL, 3)
    history[-1] = {
        "role": "user",
        "content": [{"type": "text", "text": "and now?", "cache_control": {"type": "ephemeral"}}],
    }
    thinking: Any = {"type": "adaptive"}
    every: Any = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    one: Any = {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
        ]
    }
    first = await create(
        sdk, history, system=SYSTEM, thinking=thinking, context_management=every, betas=EDITING
    )
    kept = await create(
        sdk, history, system=SYSTEM, thinking=thinking, context_management=every, betas=EDITING
    )
    assert kept.usage.cache_read_input_tokens == total_input(first.usage)  # kept: all read
    cleared = await create(
        sdk, history, system=SYSTEM, thinking=thinking, context_management=one, betas=EDITING
    )
    # The first turn's thinking is gone: only the system prompt's entry still matches.
    assert 0 < cleared.usage.cache_read_input_tokens < total_input(cleared.usage)
    assert cleared.usage.cache_creation_input_tokens > 0


async def test_clear_thinking_rules(sdk: anthropic.AsyncAnthropic) -> None:
    history = await thinking_history(sdk, MODEL, 1)
    both: Any = {
        "edits": [
            {"type": "clear_tool_uses_20250919"},
            {"type": "clear_thinking_20251015"},
        ]
    }
    with pytest.raises(anthropic.BadRequestError, match="must be listed first"):
        await create(
            sdk, history, thinking={"type": "adaptive"}, context_management=both, betas=EDITING
        )
    with pytest.raises(anthropic.BadRequestError, match="requires thinking"):
        await create(
            sdk,
            history,
            thinking={"type": "disabled"},
            context_management={"edits": [{"type": "clear_thinking_20251015"}]},
            betas=EDITING,
        )
    zero: Any = {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 0}}
        ]
    }
    with pytest.raises(
        anthropic.BadRequestError, match=r"keep\.value: Input should be greater than 0"
    ):
        await create(
            sdk, history, thinking={"type": "adaptive"}, context_management=zero, betas=EDITING
        )


# -- headers, models and shapes ------------------------------------------------------------------


async def test_edits_need_their_beta_header_a_model_that_takes_them_and_a_known_shape(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    # No beta header at all: the field is not one of the Messages API's.
    with pytest.raises(anthropic.BadRequestError, match="Extra inputs are not permitted"):
        await create(sdk, tool_history(1), context_management=clear_tool_uses())
    with pytest.raises(anthropic.BadRequestError, match="context-management-2025-06-27"):
        await create(sdk, tool_history(1), context_management=clear_tool_uses(), betas=COMPACT)
    compact: Any = {"edits": [{"type": "compact_20260112"}]}
    with pytest.raises(anthropic.BadRequestError, match="compact-2026-01-12"):
        await create(sdk, tool_history(1), context_management=compact, betas=EDITING)
    with pytest.raises(anthropic.BadRequestError, match="not supported for claude-haiku-4-5"):
        await create(
            sdk,
            tool_history(1),
            model="claude-haiku-4-5",
            context_management=compact,
            betas=COMPACT,
        )
    odd: Any = {"edits": [{"type": "clear_everything_20990101"}]}
    with pytest.raises(anthropic.BadRequestError, match=r"context_management\.edits\.0"):
        await create(sdk, tool_history(1), context_management=odd, betas=EDITING)
    extra: Any = clear_tool_uses(keep={"type": "tool_uses", "value": 1, "also": 2})
    with pytest.raises(anthropic.BadRequestError, match="Extra inputs are not permitted"):
        await create(sdk, tool_history(1), context_management=extra, betas=EDITING)
    low: Any = {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}}]
    }
    with pytest.raises(anthropic.BadRequestError, match="greater than or equal to 50000"):
        await create(sdk, tool_history(1), context_management=low, betas=COMPACT)


async def test_streaming_reports_the_edits_in_the_final_message_delta(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    edits = clear_tool_uses(
        trigger={"type": "input_tokens", "value": 500}, keep={"type": "tool_uses", "value": 2}
    )
    deltas: list[Any] = []
    async with sdk.beta.messages.stream(
        model=MODEL,
        max_tokens=64,
        tools=TOOLS,
        messages=tool_history(5),
        context_management=edits,
        betas=EDITING,
    ) as stream:
        async for event in stream:
            if event.type == "message_delta":
                deltas.append(event.context_management)
        message: Any = await stream.get_final_message()
    assert deltas[-1].applied_edits[0].cleared_tool_uses == 3
    assert message.context_management.applied_edits[0].cleared_tool_uses == 3


async def test_a_server_default_applies_to_requests_that_send_none() -> None:
    """Benchmarks run Frontmind's own requests with server-side edits this way."""
    edits = clear_tool_uses(
        trigger={"type": "input_tokens", "value": 500}, keep={"type": "tool_uses", "value": 2}
    )
    async with (
        LocalMessagesAPI(token_counts="plain", context_management=edits) as api,
        anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0) as client,
    ):
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, tools=TOOLS, messages=tool_history(5)
        )
    body = raw.http_response.json()
    assert body["context_management"]["applied_edits"][0]["cleared_tool_uses"] == 3


# -- compaction ----------------------------------------------------------------------------------

TRIGGER: Any = {
    "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}]
}
LONG: Any = [
    {"role": "user", "content": "notes " * 45_000},
    {"role": "assistant", "content": "Read."},
    {"role": "user", "content": "now summarise the plan"},
]


async def test_reaching_the_trigger_compacts_and_a_later_request_reads_from_the_block(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    model = "claude-opus-4-8"
    full = (await count(sdk, LONG, model=model, system=SYSTEM)).input_tokens
    assert full >= 50_000
    reply = await create(
        sdk, LONG, model=model, system=SYSTEM, context_management=TRIGGER, betas=COMPACT
    )
    assert [b.type for b in reply.content] == ["compaction", "text"]
    block = reply.content[0]
    assert block.content.startswith("<summary>")
    assert block.signature
    summary, message = reply.usage.iterations
    assert summary.type == "compaction"
    assert message.type == "message"
    # The summary step read the whole request; the reply read only system, tools, block.
    assert summary.input_tokens + summary.cache_read_input_tokens == full
    assert 0 < summary.output_tokens <= 4000
    assert total_input(reply.usage) < full // 5
    assert reply.usage.input_tokens == message.input_tokens  # top level: the message step
    # The next request carries the block: everything before it is dropped, so it is small
    # and far below the trigger, and no new compaction entry appears.
    following = [
        *LONG,
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "and?"},
    ]
    counted = await count(sdk, following, model=model, system=SYSTEM, betas=COMPACT)
    assert counted.input_tokens < full // 5
    later = await create(
        sdk, following, model=model, system=SYSTEM, context_management=TRIGGER, betas=COMPACT
    )
    assert later.content[0].type != "compaction"
    assert [i.type for i in later.usage.iterations] == ["message"]
    # The system prompt's entry survives the compaction: it is read, the summary written.
    assert later.usage.cache_read_input_tokens >= reply.usage.cache_creation_input_tokens > 0


async def test_pausing_after_compaction_and_continuing(sdk: anthropic.AsyncAnthropic) -> None:
    model = "claude-opus-4-8"
    pause: Any = {"edits": [{**TRIGGER["edits"][0], "pause_after_compaction": True}]}
    paused = await create(sdk, LONG, model=model, context_management=pause, betas=COMPACT)
    assert paused.stop_reason == "compaction"
    assert [b.type for b in paused.content] == ["compaction"]
    assert [i.type for i in paused.usage.iterations] == ["compaction"]
    assert total_input(paused.usage) == 0
    # The documented continuation: the block appended as the assistant turn, sent again.
    resumed = await create(
        sdk,
        [*LONG, {"role": "assistant", "content": paused.content}],
        model=model,
        context_management=TRIGGER,
        betas=COMPACT,
    )
    assert resumed.stop_reason == "end_turn"
    assert resumed.content[0].type != "compaction"


async def test_compaction_streams_one_delta_and_blocks_come_back_as_written(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    model = "claude-opus-4-8"
    kinds = []
    async with sdk.beta.messages.stream(
        model=model, max_tokens=64, messages=LONG, context_management=TRIGGER, betas=COMPACT
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.index == 0:
                kinds.append(event.delta.type)
        message: Any = await stream.get_final_message()
    assert kinds == ["compaction_delta"]
    block = message.content[0]
    assert block.type == "compaction"
    assert block.content.startswith("<summary>")
    assert [i.type for i in message.usage.iterations] == ["compaction", "message"]
    edited = block.model_dump()
    edited["content"] = "a different summary"
    following = [
        *LONG,
        {"role": "assistant", "content": [edited]},
        {"role": "user", "content": "?"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `compaction`"):
        await create(sdk, following, model=model, betas=COMPACT)
    replay = [*LONG, {"role": "assistant", "content": [block]}, {"role": "user", "content": "?"}]
    with pytest.raises(anthropic.BadRequestError, match="compact-2026-01-12"):
        await create(sdk, replay, model=model, betas=EDITING)  # no compaction header
    assert (await create(sdk, replay, model=model, betas=COMPACT)).stop_reason == "end_turn"


async def test_frontmind_keeps_a_compaction_block_and_sends_it_back(tmp_path: Path) -> None:
    """Through Frontmind's own turn path, with the server applying the compaction edit:
    the block streams in (one `compaction_delta`), is stored whole, and goes back on the
    next turn, which the API then reads from the block on."""
    trigger = {"type": "input_tokens", "value": 50_000}
    edits: Any = {"edits": [{"type": "compact_20260112", "trigger": trigger}]}
    long = "notes " * 16_000  # some 24,000 tokens each, in plain counts
    async with (
        LocalMessagesAPI(token_counts="plain", context_management=edits) as api,
        frontmind(api, tmp_path, cfg=config(model={"name": "claude-opus-4-8"})) as fm,
    ):
        for i in range(3):
            completed(await run_turn(fm, "c1", f"part {i}: {long}"))
        after = completed(await run_turn(fm, "c1", "what now?"))
        stored = await fm.history("c1")
        bodies = api.message_bodies()
    blocks = [b for m in stored for b in m.content if isinstance(b, RawBlock)]
    [compaction] = [b for b in blocks if b.kind == "compaction"]
    assert json.loads(compaction.json)["content"].startswith("<summary>")
    sent = [b for m in bodies[-1]["messages"] for b in m["content"] if b["type"] == "compaction"]
    assert sent == [json.loads(compaction.json)]
    total = (
        after.usage.input_tokens
        + after.usage.cache_read_input_tokens
        + after.usage.cache_creation_input_tokens
    )
    assert total < 10_000  # read from the block on, not the three long messages
