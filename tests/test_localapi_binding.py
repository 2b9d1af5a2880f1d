"""Preserved thinking's prefix check in the local Messages API, through the real
`anthropic` SDK: a thinking block stays valid only while `system`, `tools` and every
message before it are unchanged, on the models that run the check, for the accounts it is
enforced on; `drop_block`, `input_transformations`, and the edits that keep blocks valid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import anthropic
import pytest

from frontmind.localapi import LocalMessagesAPI

pytestmark = pytest.mark.anyio

FABLE = "claude-fable-5-1"
BETA = ["thinking-binding-controls-2026-08-01"]
DROP: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
ERROR: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
BOUND = "The block is bound to a different conversation"
HI: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI(token_counts="plain") as server:
        yield server


async def client(server: LocalMessagesAPI) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)


async def conversation(
    sdk: anthropic.AsyncAnthropic, model: str, turns: int, system: str = "Be brief."
) -> list[Any]:
    """`turns` exchanges, each opening with a per-turn note (a harness's reminder), each
    reply leading with its signed thinking; appended as returned."""
    messages: list[Any] = []
    for i in range(turns):
        note = {"type": "text", "text": f"note {i}"}
        messages.append({"role": "user", "content": [note, {"type": "text", "text": f"ask {i}"}]})
        reply = await sdk.messages.create(
            model=model, max_tokens=256, system=system, messages=messages
        )
        assert reply.content[0].type == "thinking"
        messages.append({"role": "assistant", "content": reply.content})
    messages.append({"role": "user", "content": "next"})
    return messages


def without_notes(messages: list[Any], upto: int) -> list[Any]:
    """The per-turn note removed from the first `upto` user turns (what a harness that
    does not store its reminders sends)."""
    out, seen = [], 0
    for message in messages:
        if message["role"] == "user" and isinstance(message["content"], list) and seen < upto:
            message = {**message, "content": message["content"][1:]}
            seen += 1
        out.append(message)
    return out


async def test_an_edit_before_a_block_is_a_400_on_a_new_account(api: LocalMessagesAPI) -> None:
    async with await client(api) as sdk:
        history = await conversation(sdk, FABLE, 2)
        # Append-only: accepted.
        ok = await sdk.messages.create(
            model=FABLE, max_tokens=64, system="Be brief.", messages=history
        )
        assert ok.stop_reason == "end_turn"
        # The first turn's note removed: both replies' blocks are bound to another prefix.
        edited = without_notes(history, 1)
        with pytest.raises(anthropic.BadRequestError, match=BOUND) as info:
            await sdk.messages.create(
                model=FABLE, max_tokens=64, system="Be brief.", messages=edited
            )
        body: Any = info.value.body
        message = body["error"]["message"]
        assert message.startswith("messages.1.content.0: Invalid `signature` in `thinking` block")
        assert "requires the `thinking-binding-controls-2026-08-01` value" in message
        # The same check on token counting.
        with pytest.raises(anthropic.BadRequestError, match=BOUND):
            await sdk.messages.count_tokens(model=FABLE, system="Be brief.", messages=edited)
        # drop_block: the failing block and every later one are dropped, and reported.
        dropped: Any = await sdk.beta.messages.create(
            model=FABLE,
            max_tokens=64,
            system="Be brief.",
            messages=edited,
            thinking=DROP,
            betas=BETA,
        )
        assert [(t.type, t.path, t.reason) for t in dropped.input_transformations] == [
            ("thinking_dropped", "messages.1.content.0", "prefix_binding_mismatch"),
            ("thinking_dropped", "messages.3.content.0", "prefix_binding_mismatch"),
        ]
        kept = await sdk.messages.count_tokens(model=FABLE, system="Be brief.", messages=history)
        assert dropped.usage.input_tokens < kept.input_tokens  # dropped blocks are not billed
        # A request that changes only what is outside the prefix stays valid.
        moved: Any = [dict(m) for m in history]
        moved[-1] = {
            "role": "user",
            "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}],
        }
        fine = await sdk.beta.messages.create(
            model=FABLE,
            max_tokens=100,
            system="Be brief.",
            messages=moved,
            output_config={"effort": "low"},
            thinking=DROP,
            betas=BETA,
        )
        assert fine.input_transformations == []


async def test_system_and_tools_are_part_of_the_prefix(api: LocalMessagesAPI) -> None:
    async with await client(api) as sdk:
        history = await conversation(sdk, FABLE, 1)
        with pytest.raises(anthropic.BadRequestError, match=BOUND):
            await sdk.messages.create(
                model=FABLE, max_tokens=64, system="Be kind.", messages=history
            )
        tools: Any = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
        with pytest.raises(anthropic.BadRequestError, match=BOUND):
            await sdk.messages.create(
                model=FABLE, max_tokens=64, system="Be brief.", tools=tools, messages=history
            )


async def test_blocks_may_go_from_the_start_or_the_end_but_not_the_middle(
    api: LocalMessagesAPI,
) -> None:
    async with await client(api) as sdk:
        history = await conversation(sdk, FABLE, 3)

        def without(*turns: int) -> list[Any]:
            out = []
            for i, message in enumerate(history):
                if message["role"] == "assistant" and i // 2 in turns:
                    message = {**message, "content": message["content"][1:]}
                out.append(message)
            return out

        for valid in (without(0), without(0, 1), without(2), without(0, 1, 2)):
            reply = await sdk.messages.create(
                model=FABLE, max_tokens=64, system="Be brief.", messages=valid
            )
            assert reply.stop_reason == "end_turn"
        with pytest.raises(anthropic.BadRequestError, match=BOUND) as info:
            await sdk.messages.create(
                model=FABLE, max_tokens=64, system="Be brief.", messages=without(1)
            )
        body: Any = info.value.body
        assert body["error"]["message"].startswith("messages.5.content.0:")


@pytest.mark.parametrize(
    ("model", "account", "outcome"),
    [
        ("claude-fable-5-1", "old", "allowed"),  # recorded, not enforced
        ("claude-fable-5-2", "old", "refused"),  # every account
        ("claude-opus-5-5", "new", "refused"),
        ("claude-mythos-5-1", "new", "unchecked"),  # records the binding, runs no check
        ("claude-opus-5", "new", "unchecked"),  # before preserved thinking
    ],
)
async def test_who_runs_the_check_and_for_which_accounts(
    model: str, account: Literal["new", "old"], outcome: str
) -> None:
    async with (
        LocalMessagesAPI(token_counts="plain", account=account) as server,
        await client(server) as sdk,
    ):
        edited = without_notes(await conversation(sdk, model, 1), 1)
        if outcome == "refused":
            with pytest.raises(anthropic.BadRequestError, match=BOUND):
                await sdk.messages.create(
                    model=model, max_tokens=64, system="Be brief.", messages=edited
                )
            return
        await sdk.messages.create(model=model, max_tokens=64, system="Be brief.", messages=edited)
        seen: Any = await sdk.beta.messages.create(
            model=model, max_tokens=64, system="Be brief.", messages=edited, betas=BETA
        )
        expected = (
            [("thinking_mismatch_allowed", "messages.1.content.0")] if outcome == "allowed" else []
        )
        assert [(t.type, t.path) for t in seen.input_transformations] == expected
        if outcome == "allowed":
            # Setting the behaviour opts an old account's request into the check.
            with pytest.raises(anthropic.BadRequestError, match=BOUND):
                await sdk.beta.messages.create(
                        model=model, max_tokens=64, system="Be brief.", messages=edited,
                        thinking=ERROR, betas=BETA,
                    )  # fmt: skip


async def test_block_binding_needs_its_beta_header(api: LocalMessagesAPI) -> None:
    async with await client(api) as sdk:
        with pytest.raises(anthropic.BadRequestError, match="block_binding: Extra inputs"):
            await sdk.messages.create(
                model=FABLE,
                max_tokens=64,
                messages=HI,
                thinking=DROP,
            )
        odd: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "x"}}
        with pytest.raises(anthropic.BadRequestError, match="'error' or 'drop_block'"):
            await sdk.beta.messages.create(
                model=FABLE,
                max_tokens=64,
                messages=HI,
                thinking=odd,
                betas=BETA,
            )


# -- the model check: a model reads its own blocks and those of a fixed set of others ----


async def test_a_block_the_model_cannot_read_is_dropped_without_an_error(
    api: LocalMessagesAPI,
) -> None:
    """Docs (preserved thinking): Fable 5.1 reads Opus 5's blocks; Opus 5 does not read
    Fable 5.1's, and the API drops them from the request without an error, on every
    account (Opus 5 runs no prefix check: the model check is not part of it)."""
    async with await client(api) as sdk:
        history = await conversation(sdk, FABLE, 2)
        on_fable = await sdk.messages.count_tokens(
            model=FABLE, system="Be brief.", messages=history
        )
        switched = await sdk.messages.create(
            model="claude-opus-5", max_tokens=64, system="Be brief.", messages=history
        )
        assert switched.stop_reason == "end_turn"
        # Not billed: the request counts as it would without the two thinking blocks.
        bare: Any = [
            {**m, "content": [b for b in m["content"] if b.type != "thinking"]}
            if m["role"] == "assistant"
            else m
            for m in history
        ]
        plain = await sdk.messages.count_tokens(
            model="claude-opus-5", system="Be brief.", messages=bare
        )
        assert switched.usage.input_tokens == plain.input_tokens < on_fable.input_tokens
        counted = await sdk.messages.count_tokens(
            model="claude-opus-5", system="Be brief.", messages=history
        )
        assert counted.input_tokens == plain.input_tokens
        # With the binding beta header, input_transformations says why.
        told: Any = await sdk.beta.messages.create(
            model="claude-opus-5",
            max_tokens=64,
            system="Be brief.",
            messages=history,
            betas=BETA,
        )
        assert [(t.type, t.path, t.reason) for t in told.input_transformations] == [
            ("thinking_dropped", "messages.1.content.0", "model_binding_mismatch"),
            ("thinking_dropped", "messages.3.content.0", "model_binding_mismatch"),
        ]

        # The other way round: Fable 5.1 reads Opus 5's blocks (all of them kept).
        opus = await conversation(sdk, "claude-opus-5", 1)
        read: Any = await sdk.beta.messages.create(
            model=FABLE, max_tokens=64, system="Be brief.", messages=opus, betas=BETA
        )
        assert read.input_transformations == []


async def test_a_block_failing_both_checks_reports_its_model_and_fails_no_request(
    api: LocalMessagesAPI,
) -> None:
    """A Fable 5.2 block sent to Fable 5.1 (which cannot read it) after an edit before it:
    the docs' precedence reports `model_binding_mismatch`, and the block, dropped for its
    model, does not turn the prefix check's error on."""
    async with await client(api) as sdk:
        history = await conversation(sdk, "claude-fable-5-2", 1)
        edited = without_notes(history, 1)
        answer: Any = await sdk.beta.messages.create(
            model=FABLE, max_tokens=64, system="Be brief.", messages=edited, betas=BETA
        )
        assert [(t.path, t.reason) for t in answer.input_transformations] == [
            ("messages.1.content.0", "model_binding_mismatch")
        ]
        # On Fable 5.2 itself, the same edit is the prefix check's 400.
        with pytest.raises(anthropic.BadRequestError, match=BOUND):
            await sdk.messages.create(
                model="claude-fable-5-2", max_tokens=64, system="Be brief.", messages=edited
            )
