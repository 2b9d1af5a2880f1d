"""The orchestrator end to end: the real SDK against the local Messages API server.

Request layouts are checked from the bodies the server received."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pytest

from actors import (
    AnthropicModel,
    Busy,
    ModelUnavailable,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnStarted,
)
from actors._history_cost import PDF_PAGE_TOKENS, message_tokens
from actors._too_long import MAX_TOKEN_SCALE, TokenScales
from frontmind import Config, Frontmind, TurnStream, tool
from frontmind.localapi import (
    Latency,
    LocalMessagesAPI,
    MidStreamError,
    Reply,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
    StatusFault,
)
from storage import DEFAULT_USER, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock
from tests._factories import turn as stored_turn
from tests._harness import (
    FakeClock,
    cache_marks,
    completed,
    config,
    failed,
    frontmind,
    run_turn,
    tool_finishes,
)
from tests.test_localapi_fetch import by_url

pytestmark = pytest.mark.anyio

RULE = "═" * 60


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


def text_of(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message["content"])


# -- request layout ---------------------------------------------------------------------------


async def test_first_and_later_turn_layout(api: LocalMessagesAPI, tmp_path: Path) -> None:
    # The layout with the configured TTLs; the adaptive policy's own choices are tested
    # in test_economics.py.
    async with frontmind(api, tmp_path, cfg=config(cache={"policy": "fixed"})) as fm:
        first = completed(await run_turn(fm, "c1", "hello"))
        await run_turn(fm, "c1", "and again")
        history = await fm.history("c1")
    body1, body2 = api.message_bodies()
    for body in (body1, body2):
        assert "temperature" not in body
        assert "top_p" not in body
        assert "top_k" not in body
        assert "cache_control" not in body
        assert [t["name"] for t in body["tools"]] == [
            "add_reminder",
            "list_reminders",
            "complete_reminder",
            "remember",
            "search_context",
        ]
        assert body["system"][0]["text"].startswith("You are a thoughtful")
        assert body["system"][-1]["text"].startswith("<tool_hints>")
    # First turn: system breakpoint only; delimiter, notification center, user message.
    assert cache_marks(body1) == [("system", -1, len(body1["system"]) - 1, "1h")]
    assert [m["role"] for m in body1["messages"]] == ["user", "assistant", "user"]
    assert body1["messages"][0]["content"] == [{"type": "text", "text": RULE}]
    center = text_of(body1["messages"][1])
    assert center.startswith("NOTIFICATION CENTER\n")
    assert center.endswith(RULE)
    assert "<datetime_section>\nCurrent date and time: Wednesday, 18 November 2026, 11:06" in center
    assert body1["messages"][2]["content"] == [{"type": "text", "text": "hello"}]
    assert body1["diagnostics"] == {"previous_message_id": None}
    # Later turn: the stored history exactly, breakpoint on the last assistant block.
    assert [m["role"] for m in body2["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert body2["messages"][0]["content"] == [{"type": "text", "text": "hello"}]
    assert body2["messages"][1]["content"][0]["text"] == first.text
    assert cache_marks(body2) == [
        ("system", -1, len(body2["system"]) - 1, "1h"),
        ("messages", 1, 0, "5m"),
    ]
    assert body2["messages"][2]["content"][0]["text"] == RULE
    assert body2["messages"][4]["content"] == [{"type": "text", "text": "and again"}]
    assert body2["diagnostics"]["previous_message_id"].startswith("msg_")
    # The notification center and its delimiter were never stored.
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert all(RULE not in m.text() for m in history)


async def test_empty_notification_center_sends_no_delimiter(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    quiet = config(
        disabled_sections=[
            "datetime_section",
            "conversation_manifest",
            "active_reminders",
            "context_search_results",
            "relevant_memories",
        ],
        cache={"policy": "fixed"},  # the configured TTLs, as in the layout test above
    )
    async with frontmind(api, tmp_path, cfg=quiet) as fm:
        completed(await run_turn(fm, "c1", "hi"))
        completed(await run_turn(fm, "c1", "hi again"))
    body1, body2 = api.message_bodies()
    assert body1["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert [m["role"] for m in body2["messages"]] == ["user", "assistant", "user"]
    assert cache_marks(body2)[-1] == ("messages", 1, 0, "5m")


async def test_tool_loop_layout_and_update_block(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push(
        Reply(
            (
                ReplyText("Setting it."),
                ReplyToolUse("add_reminder", {"text": "stretch", "due_in_minutes": 30}, "toolu_a"),
            )
        ),
        "Done, reminder set.",
    )
    async with frontmind(api, tmp_path) as fm:
        events = await run_turn(fm, "c1", "remind me to stretch in 30 minutes")
        history = await fm.history("c1")
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "TurnStarted"
    assert kinds[-1] == "TurnCompleted"
    started = next(e for e in events if isinstance(e, ToolStarted))
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert json.loads(started.input_json) == {"text": "stretch", "due_in_minutes": 30}
    assert finished.is_error is False
    # Staged: the reminder is written with the turn, so its #id comes from the commit.
    assert finished.content.startswith("added reminder: stretch — due in 30 minutes")
    assert completed(events).model_calls == 2
    call1, call2 = api.message_bodies()
    # The notification center is byte-identical across the loop...
    assert call1["messages"][:3] == call2["messages"][:3]
    # ...and the tool traffic follows the current user message, results first.
    tail = call2["messages"][3:]
    assert [m["role"] for m in tail] == ["assistant", "user"]
    assert tail[0]["content"][1]["type"] == "tool_use"
    results = tail[1]["content"]
    assert results[0]["type"] == "tool_result"
    assert results[0]["tool_use_id"] == "toolu_a"
    assert results[1]["text"].startswith(
        "[notification center update]\nactive_reminders: + (new) stretch"
    )
    # From the second call on, a rolling breakpoint on the tail.
    assert cache_marks(call2)[-1] == ("messages", 4, 1, "5m")
    assert len(cache_marks(call2)) <= 4
    # Stored: user, assistant(tool_use), user(results + update), assistant.
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert isinstance(history[1].content[1], ToolUseBlock)
    assert isinstance(history[2].content[0], ToolResultBlock)
    assert isinstance(history[2].content[1], TextBlock)


async def test_tool_errors_go_back_to_the_model(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push(
        Reply(
            (
                ReplyToolUse("complete_reminder", {"id": 99}, "toolu_1"),
                ReplyToolUse("remember", {"txt": "typo"}, "toolu_2"),
                ReplyToolUse("no_such_tool", {}, "toolu_3"),
            )
        ),
        "Sorry about that.",
    )
    async with frontmind(api, tmp_path) as fm:
        events = await run_turn(fm, "c1", "do things")
    finished = tool_finishes(events)
    assert [e.is_error for e in finished] == [True, True, True]
    assert "no reminder #99" in finished[0].content
    assert "invalid input for remember" in finished[1].content
    assert "no tool named 'no_such_tool'" in finished[2].content
    results = api.message_bodies()[1]["messages"][-1]["content"]
    assert [r.get("is_error") for r in results] == [True, True, True]


async def test_tool_loop_stops_at_the_iteration_limit(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    for i in range(3):
        responder.push(Reply((ReplyToolUse("list_reminders", {}, f"toolu_{i}"),)))
    async with frontmind(api, tmp_path, cfg=config(tools={"max_iterations": 3})) as fm:
        done = completed(await run_turn(fm, "c1", "loop forever"))
        history = await fm.history("c1")
    assert done.model_calls == 3
    assert done.text.endswith("I stopped after 3 rounds of tool calls.")
    assert history[-2].role == "user"
    last_result = history[-2].content[0]
    assert isinstance(last_result, ToolResultBlock)
    assert last_result.is_error
    assert history[-1].role == "assistant"


# -- cache accounting ---------------------------------------------------------------------------


async def test_twenty_turns_read_everything_but_the_newest_exchange(tmp_path: Path) -> None:
    # Plain counts (4 bytes a token, 3 a block): the uncached part is added up by hand.
    clock = FakeClock()
    async with (
        LocalMessagesAPI(token_counts="plain") as api,
        frontmind(api, tmp_path, clock=clock) as fm,
    ):
        calls: list[int] = []
        for i in range(20):
            clock.advance(47)
            done = completed(await run_turn(fm, "c1", f"message number {i}: how is it going?"))
            calls.append(done.model_calls)
        records = await fm.turns("c1")
        bodies = api.message_bodies()
    usages = [r.call_usage[0] for r in records]
    for n in range(2, 20):
        assert usages[n].cache_read_input_tokens == (
            usages[n - 1].cache_read_input_tokens + usages[n - 1].cache_creation_input_tokens
        ), f"turn {n + 1}"
        # Everything before the newest exchange was sent before: all of it is read, and
        # what is not read is exactly the blocks after the last breakpoint: the frame
        # (delimiter and notification center) and the new message.
        body = bodies[sum(calls[:n])]
        _, last_message, last_block, _ = cache_marks(body)[-1]
        tail = [
            block
            for m, message in enumerate(body["messages"])
            for b, block in enumerate(message["content"])
            if (m, b) > (last_message, last_block)
        ]
        assert len(tail) == 3, f"turn {n + 1}: only the frame and the new message"
        plain = sum((len(block["text"].encode()) + 3) // 4 + 3 for block in tail)
        assert usages[n].input_tokens == plain, f"turn {n + 1}"
        assert usages[n].input_tokens < 400, "only the notification center and the new message"
    assert all(r.cache_miss_reason is None for r in records[1:])


async def test_system_change_is_reported(api: LocalMessagesAPI, tmp_path: Path) -> None:
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "one"))
        completed(await run_turn(fm, "c1", "two"))
        await fm.put_document("project", "The launch is on Friday.")
        changed = completed(await run_turn(fm, "c1", "three"))
        after = completed(await run_turn(fm, "c1", "four"))
    assert changed.cache_miss_reason == "system_changed"
    assert changed.usage.cache_read_input_tokens == 0
    assert after.cache_miss_reason is None
    assert "<domaindoc>" in api.message_bodies()[-1]["system"][1]["text"]


async def test_long_tool_loop_gets_an_intermediate_breakpoint(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push("first answer", "second answer")
    for i in range(12):
        responder.push(Reply((ReplyToolUse("list_reminders", {}, f"toolu_{i}"),)))
    responder.push("long loop done", "after the loop")
    cfg = config(tools={"max_iterations": 20})
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        await run_turn(fm, "c1", "one")
        await run_turn(fm, "c1", "two")
        completed(await run_turn(fm, "c1", "loop"))
        after = completed(await run_turn(fm, "c1", "after"))
        records = await fm.turns("c1")
    body = api.message_bodies()[-1]
    marks = cache_marks(body)
    assert len(marks) == 3  # system, intermediate, last assistant
    # The previous turn's breakpoint was on block 3 (the second assistant): 19 blocks on,
    # as a breakpoint's lookback of 20 positions counts the breakpoint itself.
    blocks = [b for m in body["messages"] for b in m["content"]]
    flat_index = {id(b): i for i, b in enumerate(blocks)}
    positions = [flat_index[id(body["messages"][m]["content"][b])] for _, m, b, _ in marks[1:]]
    assert positions[0] == 3 + 19
    # So the turn after the long loop still reads the history before it.
    loop_turn = records[2].call_usage[0]
    assert after.usage.cache_read_input_tokens == (
        loop_turn.cache_read_input_tokens + loop_turn.cache_creation_input_tokens
    )


async def test_history_is_trimmed_in_large_steps(api: LocalMessagesAPI, tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = config(history={"budget_tokens": 500, "keep_fraction": 0.5, "segment_gap_minutes": 10})
    starts: list[int] = []
    async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
        for i in range(24):
            clock.advance(60 if i % 4 else 3600)  # a new segment every 4 turns
            completed(await run_turn(fm, "c1", f"turn {i} " + "words " * 12))
            starts.append((await fm.storage.continuum(DEFAULT_USER, "c1")).history_start)
        records = await fm.turns("c1")
        body = await fm.context_json("c1", "what now")
    steps = [b for a, b in itertools.pairwise(starts) if b != a]
    assert steps, "the history was trimmed"
    assert len(steps) <= len(starts) // 3, "trimming happens rarely, in large steps"
    trims = {i + 1 for i, (a, b) in enumerate(itertools.pairwise(starts)) if b != a}
    for i, record in enumerate(records[2:], start=2):
        if i not in trims and i - 1 not in trims:
            assert record.cache_miss_reason is None, f"turn {i} lost the cache"
    center = body["messages"][-2]["content"][0]["text"]
    assert "no longer in context" in center  # the manifest still lists left-out segments


async def test_turns_longer_than_the_kept_share_still_trim_the_history(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """Each turn is over `keep_fraction` of the budget: no turn boundary leaves that
    little, and the history was never trimmed at all, growing past the budget (and in
    time the model's window) for good. It keeps the newest turn instead."""
    clock = FakeClock()
    cfg = config(history={"budget_tokens": 500, "keep_fraction": 0.5})
    async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
        for i in range(6):
            clock.advance(60)
            completed(await run_turn(fm, "c1", f"turn {i} " + "words " * 200))
        start = (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start
    assert start > 0, "the history was trimmed"
    last = api.message_bodies()[-1]
    history = last["messages"][:-3]  # before the delimiter, the center and the message
    assert len(history) <= 4, [text_of(m)[:20] for m in history]


async def test_the_history_makes_room_for_a_large_system_prompt(tmp_path: Path) -> None:
    """The user's documents are their system prompt (up to documents.budget_tokens).
    The history's window kept a fixed reserve for it: with documents larger than that,
    the history grew until every request was longer than the model's window, and
    every turn of the continuum failed from then on."""
    row = {"name": "claude-sonnet-4-5", "context_window": 60_000, "max_output": 8_000}
    cfg = config(
        model={"name": "claude-sonnet-4-5"},
        models=[row],
        history={"budget_tokens": 1_000_000},
    )
    page = "The quick brown fox jumps over the lazy dog near the river bank. " * 1400
    async with LocalMessagesAPI(models=[row]) as server, frontmind(server, tmp_path, cfg=cfg) as fm:
        for k in range(2):  # about 40,000 tokens of documents in all
            await fm.put_document(f"manual-{k}", page[: 90_000 + k])
        for i in range(8):
            done = completed(
                await run_turn(fm, "c1", f"part {i}: " + "lorem ipsum dolor sit " * 900)
            )
            assert done.usage.total_input < 60_000
        start = (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start
    assert start > 0, "the history gave way to the system prompt"


async def test_a_history_of_dense_text_stays_within_the_window_the_api_counts(
    tmp_path: Path,
) -> None:
    """Budgets ran on Frontmind's estimate (4 bytes a token), which the API's count of
    dense text (numbers, CSV, JSON) exceeds some fourfold: a history of such messages,
    under budget by the estimate, outgrew the model's window, and from then on every
    turn of the continuum was refused as too long. The continuum's scale is measured on
    the API's counts (and learnt from a refusal's count): every turn completes, within
    the window."""
    row = {"name": "claude-sonnet-4-5", "context_window": 60_000, "max_output": 8_000}
    cfg = config(
        model={"name": "claude-sonnet-4-5"}, models=[row], history={"budget_tokens": 1_000_000}
    )
    rows = "\n".join(",".join(str(1000 + 37 * i + j) for j in range(8)) for i in range(300))
    async with LocalMessagesAPI(models=[row]) as server, frontmind(server, tmp_path, cfg=cfg) as fm:
        totals = []
        for i in range(12):
            done = completed(await run_turn(fm, "c1", f"table {i}:\n{rows}"))
            totals.append(done.usage.total_input)
        start = (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start
    assert max(totals) < 60_000, totals
    assert start > 0, "the history gave way"
    # Reopened (the scale forgotten) on a model row of a smaller window: the first
    # turn's request is refused as too long, with the API's count, and the turn trims to
    # fit and sends it again (it failed, after every restart; before the scale was
    # learnt, every turn was refused, the estimate saying the history fitted).
    small = {**row, "context_window": 45_000}
    cfg = config(
        model={"name": "claude-sonnet-4-5"}, models=[small], history={"budget_tokens": 1_000_000}
    )
    async with (
        LocalMessagesAPI(models=[small]) as server,
        frontmind(server, tmp_path, cfg=cfg) as fm,
    ):
        outcomes = []
        for i in range(12, 18):
            events = await run_turn(fm, "c1", f"table {i}:\n{rows}")
            outcomes.append("completed" if isinstance(events[-1], TurnCompleted) else "failed")
    assert outcomes == ["completed"] * 6, outcomes


# A continuum that starts on a model of a 200k window and is switched to one of 60k
# (rows of the config and of the local API alike), under a budget past both windows.
SWITCHED_MODELS: list[dict[str, Any]] = [
    {"name": "claude-sonnet-4-5", "context_window": 200_000, "max_output": 8_000},
    {"name": "claude-haiku-4-5", "context_window": 60_000, "max_output": 8_000},
]


def switching_config() -> Config:
    return config(
        model={"name": "claude-sonnet-4-5"},
        models=SWITCHED_MODELS,
        history={"budget_tokens": 1_000_000},
    )


async def test_a_turn_larger_than_a_smaller_models_window_leaves_the_continuum_working(
    tmp_path: Path,
) -> None:
    """Trimming keeps at least the newest turn. A tool loop of some 85,000 tokens on a
    model of a 200k window, then the continuum switched to a model of a 60k window: that
    turn alone was longer than the window, and every later turn was refused as too long,
    for good. Its oldest tool results now go as notes in the request; the store keeps
    them, and once a newer turn is stored, trimming leaves the large turn out."""
    page = "The quick brown fox jumps over the lazy dog near the river bank. " * 1460

    @tool(max_result_chars=100_000)
    def read_file(name: str) -> str:
        """Read a file."""
        return page

    cfg = switching_config()
    responder = ScriptedResponder()
    reads = (Reply((ReplyToolUse("read_file", {"name": f"f{i}"}, f"toolu_{i}"),)) for i in range(4))
    responder.push(*reads, "Read them.", "Hello.", "Hello again.")
    async with (
        LocalMessagesAPI(responder=responder, models=SWITCHED_MODELS) as api,
        frontmind(api, tmp_path, cfg=cfg, tools=[read_file]) as fm,
    ):
        assert completed(await run_turn(fm, "c1", "read the four files")).text == "Read them."
        await fm.set_model_settings("c1", model="claude-haiku-4-5")
        first = completed(await run_turn(fm, "c1", "hello"))
        sent = api.message_bodies()[-1]["messages"]
        assert completed(await run_turn(fm, "c1", "hello again")).text == "Hello again."
        history = await fm.history("c1")
    assert first.text == "Hello."
    assert first.usage.total_input < 60_000
    results = [b for m in sent for b in m["content"] if b["type"] == "tool_result"]
    noted = [r for r in results if "left out of this request" in json.dumps(r["content"])]
    assert len(results) == 4
    assert 0 < len(noted) < 4
    assert results[: len(noted)] == noted  # the oldest first
    stored = [b for m in history for b in m.content if isinstance(b, ToolResultBlock)]
    assert [b.content for b in stored] == [page] * 4


async def test_a_turn_over_the_budget_but_within_the_window_is_sent_whole(
    tmp_path: Path,
) -> None:
    """The history's budget (80,000 tokens) is where trimming cuts, never inside the
    newest turn: a tool loop of some 120,000 tokens on a model of a 1M window goes to
    the next turn whole (its results are what the next message asks about); only what
    the window cannot hold goes as notes."""
    page = "The quick brown fox jumps over the lazy dog near the river bank. " * 1460

    @tool(max_result_chars=100_000)
    def read_file(name: str) -> str:
        """Read a file."""
        return page

    responder = ScriptedResponder()
    reads = (Reply((ReplyToolUse("read_file", {"name": f"f{i}"}, f"toolu_{i}"),)) for i in range(5))
    responder.push(*reads, "Read them.", "They say the same.")
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, tools=[read_file]) as fm,
    ):
        completed(await run_turn(fm, "c1", "read the five files"))
        completed(await run_turn(fm, "c1", "what do they say?"))
        sent = api.message_bodies()[-1]["messages"]
    results = [b for m in sent for b in m["content"] if b["type"] == "tool_result"]
    assert [
        r["content"][0]["text"] if isinstance(r["content"], list) else r["content"] for r in results
    ] == [page] * 5


async def test_a_document_larger_than_a_smaller_models_window_leaves_the_continuum_working(
    tmp_path: Path,
) -> None:
    """A message may carry a plain-text document of up to 30 MB: one of some 85,000
    tokens read on a model of a 200k window, then the continuum switched to a model of
    a 60k window, made every later request too long (trimming keeps the newest turn).
    The document now goes as a note in the request; the store keeps it."""
    page = "The quick brown fox jumps over the lazy dog near the river bank. " * 5800
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": page},
        "title": "The manual",
    }
    cfg = switching_config()
    async with (
        LocalMessagesAPI(models=SWITCHED_MODELS) as api,
        frontmind(api, tmp_path, cfg=cfg) as fm,
    ):
        message: Any = [document, {"type": "text", "text": "Read the manual."}]
        completed(await run_turn(fm, "c1", message))
        await fm.set_model_settings("c1", model="claude-haiku-4-5")
        done = completed(await run_turn(fm, "c1", "hello"))
        sent = api.message_bodies()[-1]["messages"]
        history = await fm.history("c1")
    assert done.usage.total_input < 60_000
    assert sent[0]["content"][0]["type"] == "text"
    assert sent[0]["content"][0]["text"].startswith("[a document (The manual), left out")
    assert isinstance(history[0].content[0], RawBlock)
    assert json.loads(history[0].content[0].json) == document


async def test_the_summary_of_a_turn_larger_than_the_window_is_made(tmp_path: Path) -> None:
    """A segment's summary rides the conversation's cache: it sends the history as the
    next turn does. A turn larger than a smaller model's window went to the model whole
    there (the turns fit it, the summary did not): the summary's request was too long
    on every try, and the segment's summary and memories were never made."""
    page = "The quick brown fox jumps over the lazy dog near the river bank. " * 4400

    @tool(max_result_chars=400_000)
    def read_file(name: str) -> str:
        """Read a file."""
        return page

    cfg = switching_config()
    clock = FakeClock()
    async with (
        LocalMessagesAPI(models=SWITCHED_MODELS) as api,
        frontmind(api, tmp_path, cfg=cfg, tools=[read_file], clock=clock) as fm,
    ):
        completed(await run_turn(fm, "c1", "use the read_file tool for name manual"))
        await fm.set_model_settings("c1", model="claude-haiku-4-5")
        clock.advance(3600)  # the pause closes the segment: its summary is due
        completed(await run_turn(fm, "c1", "hello"))
        await fm.run_background()
        (job,) = await fm.jobs("c1")
    assert job.state == "done", job.last_error


def test_token_scales_are_bounded_and_forget_the_oldest() -> None:
    """The process keeps a scale per continuum it measured: at most `limit` of them (the
    least recently measured goes first), none above MAX_TOKEN_SCALE, and a scale of 1
    or less is not kept (the estimate as it is)."""
    scales = TokenScales(limit=2)
    scales.set(("u", "a"), 2.0)
    scales.set(("u", "b"), 50.0)
    scales.set(("u", "a"), 3.0)  # measured again: now the most recent
    scales.set(("u", "c"), 0.5)
    assert scales.get(("u", "c")) == 1.0
    scales.set(("u", "d"), 1.5)
    assert [scales.get(("u", k)) for k in "abd"] == [3.0, 1.0, 1.5]
    scales.set(("u", "a"), 40.0)
    assert scales.get(("u", "a")) == MAX_TOKEN_SCALE


async def test_a_pause_before_the_last_turn_does_not_trim_to_that_turn(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """After a long pause the newest segment starts at the last turn. Trimming jumped to
    that segment boundary, which kept one turn where the budget's `keep_fraction` had
    room for several: a boundary that keeps under half of it gives way to a turn's."""
    clock = FakeClock()
    cfg = config(history={"budget_tokens": 500, "keep_fraction": 0.5, "segment_gap_minutes": 10})
    async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
        for i in range(15):
            clock.advance(3600 if i == 13 else 60)  # one session, then a pause before turn 13
            completed(await run_turn(fm, "c1", f"turn {i} " + "words " * 12))
        start = (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start
        segments = await fm.storage.recent_segments(DEFAULT_USER, "c1", limit=10)
    assert 26 in {s.first_seq for s in segments}  # turn 13 began a segment
    assert 0 < start < 26, "trimmed, keeping turns from before the pause"


async def test_the_turn_that_trims_tells_the_manifest_what_left_the_context(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """The manifest marks segments that left the context: on the turn that trims them
    too, not only from the turn after (it was given the history start from before the
    trim, so that turn's model was told it could still see what it no longer could)."""
    clock = FakeClock()
    cfg = config(history={"budget_tokens": 500, "keep_fraction": 0.5, "segment_gap_minutes": 10})
    starts = [0]
    async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
        for i in range(16):
            clock.advance(60 if i % 4 else 3600)  # a new segment every 4 turns
            completed(await run_turn(fm, "c1", f"turn {i} " + "words " * 12))
            starts.append((await fm.storage.continuum(DEFAULT_USER, "c1")).history_start)
            if starts[-1] != starts[-2]:
                break
    assert starts[-1] != 0, "the history was trimmed"
    body = next(
        b
        for b in reversed(api.message_bodies())
        if text_of(b["messages"][-1]).startswith(f"turn {i} ")
    )
    center = text_of(body["messages"][-2])
    assert center.startswith("NOTIFICATION CENTER")
    assert "no longer in context" in center


def _one_page_pdf(filler: int) -> str:
    """A one-page PDF carrying `filler` bytes of binary data (a scanned page's image,
    say), base64: the API counts one page, whatever the length of its base64."""
    data = bytes(range(256)).replace(b"T", b"x").replace(b"(", b"x")
    blob = (data * (filler // len(data) + 1))[:filler]
    page = b"BT /F1 12 Tf 72 712 Td (The code is 4242.) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(page), page),
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(blob), blob),
    ]
    pdf = b"%PDF-1.4\n" + b"".join(
        b"%d 0 obj\n%s\nendobj\n" % (i, o) for i, o in enumerate(objects, 1)
    )
    return base64.b64encode(pdf + b"trailer << /Root 1 0 R >>\n%%EOF\n").decode()


async def test_a_pdf_is_budgeted_by_its_pages_not_its_base64(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """A one-page PDF of 160 KB base64 is one page's tokens to the API (about 1,600
    here): counted as 40,000 tokens of text it pushed the history over a 20,000 budget
    and was trimmed out, with everything before it, two turns after it was sent."""
    document = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": _one_page_pdf(120_000),
        },
    }
    cfg = config(history={"budget_tokens": 20_000})
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        first = completed(await run_turn(fm, "c1", [document, {"type": "text", "text": "read"}]))
        assert first.usage.total_input < 5_000  # what the API counts for it
        for text in ("what is the code?", "say it again", "once more"):
            done = completed(await run_turn(fm, "c1", text))
            assert done.cache_miss_reason is None
        start = (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start
    assert start == 0, "nothing was trimmed"
    last = api.message_bodies()[-1]
    assert last["messages"][0]["content"][0]["type"] == "document"


def _fetched_pdf_message(pdf: str) -> Message:
    """An assistant message with a web fetch of a PDF, as the API returns it (web fetch
    tool docs: the PDF is a base64 document inside the result's own content)."""
    url = "https://example.com/scan.pdf"
    use = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_fetch",
        "input": {"url": url},
    }
    result = {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {
            "type": "web_fetch_result",
            "url": url,
            "retrieved_at": "2026-11-30T09:00:00Z",
            "content": {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
                "citations": {"enabled": True},
            },
        },
    }
    blocks = (
        RawBlock("server_tool_use", json.dumps(use)),
        RawBlock("web_fetch_tool_result", json.dumps(result)),
    )
    return Message("assistant", (*blocks, TextBlock("It says 4242.")))


def test_a_pdf_a_server_tool_fetched_is_budgeted_by_its_pages() -> None:
    """A one-page PDF of 160 KB base64 inside a `web_fetch_tool_result` is one page to
    the API, as the same PDF sent as a document is: it was counted by the length of its
    base64 (40,000 tokens), and pushed the history out of its budget."""
    pdf = _one_page_pdf(120_000)
    fetched = message_tokens(_fetched_pdf_message(pdf))
    source = {"type": "base64", "media_type": "application/pdf", "data": pdf}
    sent = message_tokens(
        Message("user", (RawBlock("document", json.dumps({"type": "document", "source": source})),))
    )
    assert sent >= PDF_PAGE_TOKENS
    assert sent <= fetched < sent + 200  # the page, the URL and the result's few fields


async def test_documents_by_url_or_file_are_budgeted_at_least_as_the_api_counts(
    api: LocalMessagesAPI, client: anthropic.AsyncAnthropic, tmp_path: Path
) -> None:
    """A document by URL or by file id is at least a page to the API (the local API
    counts one page): the history budget counted the few bytes of its JSON."""
    documents: list[dict[str, Any]] = [
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {
            "type": "document",
            "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
        },
    ]
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", [*documents, {"type": "text", "text": "read"}]))
        stored = (await fm.history("c1"))[0]
        model = fm.config.model.name
    sent = api.message_bodies()[-1]["messages"][-1]
    assert [b["type"] for b in sent["content"]] == ["document", "document", "text"]
    counted = await client.messages.count_tokens(model=model, messages=[sent])
    assert counted.input_tokens > 2 * 1_000  # a page each
    assert message_tokens(stored) >= counted.input_tokens


# -- failures ------------------------------------------------------------------------------------


async def test_overload_is_retried_by_the_sdk(api: LocalMessagesAPI, tmp_path: Path) -> None:
    api.schedule(StatusFault(529, retry_after_ms=1), StatusFault(429, retry_after_ms=1))
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "hello"))
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1", "2"]


async def test_an_api_failure_is_told_apart_from_an_overload(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """A 500 (the API's own failure) and a 529 (overloaded) are both worth another try
    later (`model_overloaded`), but the message says which it was."""
    async with frontmind(api, tmp_path) as fm:
        for status, said in ((500, "failed (500)"), (529, "is overloaded or rate limited")):
            api.schedule(*[StatusFault(status, retry_after_ms=1)] * 3)  # and 2 retries
            error = failed(await run_turn(fm, "c1", "hello"))
            assert error.type == "model_overloaded"
            assert said in error.message


async def test_a_refused_commit_leaves_the_next_turn_to_read_the_history_again(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """A commit refused because the continuum moved on under the turn (here, a turn
    written beside the loaded actor) must not refuse every later turn: the actor kept
    its loaded history, whose message count no longer matched the store's."""
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "first"))
        beside = stored_turn("c1", "t-beside", at=fm._clock() + 1, user_text="beside")
        assert await fm.storage.commit_turn(DEFAULT_USER, beside)
        refused = failed(await run_turn(fm, "c1", "second"))
        assert refused.type == "storage_unavailable"
        assert "moved on" in refused.message
        completed(await run_turn(fm, "c1", "third"))  # read again from the store
        history = await fm.history("c1")
    users = [m.text() for m in history if m.role == "user"]
    assert users == ["first", "beside", "third"]


async def test_mid_stream_error_before_text_is_retried_once(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    api.schedule(MidStreamError(after_events=1))
    async with frontmind(api, tmp_path) as fm:
        done = completed(await run_turn(fm, "c1", "hello"))
        assert len(await fm.history("c1")) == 2
        (record,) = await fm.turns("c1")
    assert done.text.startswith("You said")
    assert len(api.requests) == 2
    # Both calls were billed their input: the one that broke after its message_start
    # too, by what that said.
    broken, answered = record.call_usage
    assert broken.total_input == answered.total_input > 0
    assert broken.output_tokens <= answered.output_tokens


async def test_mid_stream_error_after_text_ends_the_turn(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "first"))
        api.schedule(MidStreamError(after_events=5))
        events = await run_turn(fm, "c1", "this one breaks")
        error = failed(events)
        assert any(isinstance(e, TextDelta) for e in events)
        assert error.type == "stream_error"
        assert len(await fm.history("c1")) == 2, "nothing of the failed turn is in the history"
        record = (await fm.turns("c1"))[-1]
        assert record.status == "failed"
        assert record.user_text == "this one breaks"
        assert record.reply_text, "the partial reply is kept in the record"
        # The broken call's input was billed (its message_start said what it cost): the
        # record counts it, so `stats` and the daemon's costs do.
        (broken,) = record.call_usage
        assert broken.total_input > 0
        completed(await run_turn(fm, "c1", "retry works"))


async def test_cancelling_mid_stream_leaves_history_unchanged(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "first"))
        api.set_latency(Latency(tokens_per_second=200))
        async with fm.turn("c1", "a long answer please " * 5) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
        api.set_latency(Latency())
        assert len(await fm.history("c1")) == 2
        # The next turn on this continuum runs after the cancelled one has wound down.
        completed(await run_turn(fm, "c1", "next"))
        history = await fm.history("c1")
        assert [m.text() for m in history if m.role == "user"] == ["first", "next"]
        records = await fm.turns("c1")
        assert [r.status for r in records] == ["completed", "cancelled", "completed"]
        assert records[1].reply_text, "the partial reply is kept in the record"


async def test_a_turn_left_early_is_recorded_as_cancelled_when_the_block_ends(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """Leaving `async with fm.turn(...)` waits for the turn to wind down: the record
    the caller reads next says `cancelled`, never the placeholder written before the
    composition (which says the process ended before the turn finished)."""
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "first"))  # the continuum is loaded
        api.set_latency(Latency(tokens_per_second=200))
        for leave in ("async with", "aclose"):
            stream = fm.turn("c1", "a long answer please " * 5)
            if leave == "async with":
                async with stream:
                    async for event in stream:
                        if isinstance(event, TextDelta):
                            break
            else:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        break
                await stream.aclose()
            records = await fm.turns("c1")
            assert records[-1].status == "cancelled", (leave, records[-1])


async def test_a_stream_left_by_break_is_closed_whole(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """An `async for` left by `break`, with no `async with`, drops the stream: its one
    close path still cancels the turn (recorded as such) and lets the lane go."""
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "first"))
        api.set_latency(Latency(tokens_per_second=200))
        async for event in fm.turn("c1", "a long answer please " * 5):
            if isinstance(event, TextDelta):
                break
        api.set_latency(Latency())
        completed(await run_turn(fm, "c1", "next"))  # the dropped turn wound down first
        records = await fm.turns("c1")
        assert [r.status for r in records] == ["completed", "cancelled", "completed"]
        assert [m.text() for m in await fm.history("c1") if m.role == "user"] == ["first", "next"]
        # No turn holds the continuum's lane any more: it can be unloaded.
        assert await fm.unload_idle(0) == ["c1"]


async def test_same_continuum_serialized_others_concurrent(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    api.set_latency(Latency(time_to_first_token=0.15))
    log: list[tuple[str, str]] = []
    a1_running = anyio.Event()

    async def consume(stream: TurnStream, label: str) -> None:
        async with stream:
            async for event in stream:
                log.append((label, type(event).__name__))
                if label == "a1":
                    a1_running.set()

    cfg = config(turns={"max_queued": 1})
    async with frontmind(api, tmp_path, cfg=cfg) as fm, anyio.create_task_group() as tg:
        tg.start_soon(consume, fm.turn("a", "a1"), "a1")
        await a1_running.wait()
        a2 = await fm.turn("a", "a2").__aenter__()  # queued behind a1
        # a1 runs, a2 holds the only place in line: a3 is refused at once.
        with pytest.raises(Busy, match="already has 1 turn waiting"):
            await fm.turn("a", "a3").__aenter__()
        tg.start_soon(consume, a2, "a2")
        tg.start_soon(consume, fm.turn("b", "b1"), "b1")
    order = [(label, kind) for label, kind in log if kind in ("TurnStarted", "TurnCompleted")]
    assert order.index(("a1", "TurnCompleted")) < order.index(("a2", "TurnStarted"))
    assert order.index(("b1", "TurnStarted")) < order.index(("a1", "TurnCompleted"))
    assert ("a2", "TurnCompleted") in order
    assert ("b1", "TurnCompleted") in order


async def test_missing_key_and_unreachable_api_say_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="ANTHROPIC_API_KEY"):
        AnthropicModel(api_key=None, base_url=None, max_retries=0, timeout=1)
    unreachable = AnthropicModel(
        api_key="k", base_url="http://127.0.0.1:9", max_retries=0, timeout=2
    )
    async with Frontmind.open(tmp_path, config(), model=unreachable) as fm:
        events = await run_turn(fm, "c1", "hello")
        assert isinstance(events[0], TurnStarted)
        error = failed(events)
        assert error.type == "model_unavailable"
        assert "ANTHROPIC_BASE_URL" in error.message
        assert await fm.history("c1") == []
    await unreachable.aclose()


async def test_no_false_cache_miss_after_a_tool_loop(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push(
        "hello",
        Reply((ReplyToolUse("remember", {"text": "tea is green"}, "toolu_r"),)),
        "Noted.",
        "You're welcome.",
    )
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "hi"))
        loop = completed(await run_turn(fm, "c1", "remember that tea is green"))
        after = completed(await run_turn(fm, "c1", "thanks"))
        records = await fm.turns("c1")
    assert loop.model_calls == 2
    assert loop.cache_miss_reason is None
    # The next turn names the loop's first call, whose breakpoint it really extends.
    assert after.cache_miss_reason is None
    assert after.usage.cache_read_input_tokens == (
        records[1].call_usage[0].cache_read_input_tokens
        + records[1].call_usage[0].cache_creation_input_tokens
    )


async def test_idle_continuums_are_unloaded_and_come_back_intact(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "one"))
        completed(await run_turn(fm, "c1", "two"))
        completed(await run_turn(fm, "c2", "hello"))
        assert sorted(fm.loaded_continuums()) == ["c1", "c2"]
        assert sorted(await fm.unload_idle(0)) == ["c1", "c2"]
        assert fm.loaded_continuums() == []
        names = {s.name for s in fm.statistics()}
        assert not any(n.startswith(("conversation:", "composer:")) for n in names)
        # Reloaded from storage byte for byte: the cache still reads the whole history.
        back = completed(await run_turn(fm, "c1", "three"))
        records = await fm.turns("c1")
        assert back.cache_miss_reason is None
        assert back.usage.cache_read_input_tokens == (
            records[1].call_usage[0].cache_read_input_tokens
            + records[1].call_usage[0].cache_creation_input_tokens
        )
        assert len(await fm.history("c1")) == 6


async def test_past_the_bound_the_continuum_unused_longest_is_unloaded_and_comes_back_intact(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path, cfg=config(turns={"max_loaded": 2})) as fm:
        completed(await run_turn(fm, "c1", "one"))
        completed(await run_turn(fm, "c2", "two"))
        before = await fm.context("c1", "next")
        assert sorted(fm.loaded_continuums()) == ["c1", "c2"]
        completed(await run_turn(fm, "c2", "again"))  # c1 is now the one unused longest
        completed(await run_turn(fm, "c3", "three"))
        assert sorted(fm.loaded_continuums()) == ["c2", "c3"]
        names = {s.name for s in fm.statistics()}
        assert not any(n.endswith("/c1") or "/c1:" in n for n in names)
        # Reloaded from storage byte for byte: the same request, the cache read whole.
        # A preview's lane is stopped after it: it unloads no other to make room.
        assert await fm.context("c1", "next") == before
        assert sorted(fm.loaded_continuums()) == ["c2", "c3"]
        back = completed(await run_turn(fm, "c1", "four"))
        assert back.cache_miss_reason is None
        assert sorted(fm.loaded_continuums()) == ["c1", "c3"]
        assert len(await fm.history("c1")) == 4


async def test_past_the_bound_after_a_burst_the_next_load_brings_it_back_to_the_bound(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path, cfg=config(turns={"max_loaded": 2})) as fm:
        # Four turns hold four lanes at once: none can be unloaded while in use.
        streams = [fm.turn(f"c{i}", "hello") for i in range(4)]
        for stream in streams:
            assert isinstance(await stream.__anext__(), TurnStarted)
        assert len(fm.loaded_continuums()) == 4
        for stream in streams:
            assert [type(e).__name__ async for e in stream][-1] == "TurnCompleted"
        # The next lane loaded brings the process back under its bound, not one lane
        # fewer than it was.
        completed(await run_turn(fm, "c4", "four"))
        assert sorted(fm.loaded_continuums()) == ["c3", "c4"]


async def test_a_continuum_taken_up_while_idle_ones_unload_is_left_loaded(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "one"))
        completed(await run_turn(fm, "c2", "two"))
        engine = fm._runtime
        unloaded: list[object] = []
        finished = anyio.Event()

        async def unload() -> None:
            unloaded.extend(await engine.evict_idle(0))
            finished.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(unload)
            await anyio.lowlevel.checkpoint()
            # Both were listed as idle, and c1's actors are stopping; c2 is taken up
            # meanwhile, as a turn takes up its lane: it must stay loaded.
            assert ("default", "c1") in engine._stopping
            async with engine._using("default", "c2"):
                await finished.wait()
                assert fm.loaded_continuums() == ["c2"]
        assert unloaded == [("default", "c1")]


async def test_a_continuum_in_use_is_not_unloaded(api: LocalMessagesAPI, tmp_path: Path) -> None:
    api.set_latency(Latency(time_to_first_token=0.1))
    async with frontmind(api, tmp_path) as fm, fm.turn("busy", "a slow one") as stream:
        started = await stream.__anext__()
        assert isinstance(started, TurnStarted)
        assert await fm.unload_idle(0) == []
        assert [type(e).__name__ async for e in stream][-1] == "TurnCompleted"


async def test_a_reloaded_continuum_reads_who_wrote_its_thinking_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loading a continuum finds the model of every turn holding thinking from the turn
    # records, newest page first; each page must start where the one before it ended.
    import actors._conversation

    monkeypatch.setattr(actors._conversation, "_PRODUCER_PAGE", 2)
    cfg = config(
        model={
            "name": "claude-sonnet-4-6",
            "thinking": "enabled",
            "budget_tokens": 1024,
            "max_tokens": 4096,
        }
    )
    async with LocalMessagesAPI() as api:
        async with frontmind(api, tmp_path, cfg=cfg) as fm:
            for n in range(7):
                completed(await run_turn(fm, "c1", f"hello {n}"))
        async with frontmind(api, tmp_path, cfg=cfg) as fm:
            pages: list[list[str]] = []
            read = fm.storage.turns

            async def counted(*args: Any, **kwargs: Any) -> Any:
                found = await read(*args, **kwargs)
                if kwargs.get("limit") == 2:
                    pages.append([r.turn_id for r in found])
                return found

            monkeypatch.setattr(fm.storage, "turns", counted)
            completed(await run_turn(fm, "c1", "again"))  # the continuum loads
    seen = [turn_id for page in pages for turn_id in page]
    # Eight records (the seven turns and this one's, written as it started), two a
    # page: four pages, each further back, no record read twice.
    assert [len(page) for page in pages] == [2, 2, 2, 2]
    assert len(set(seen)) == len(seen) == 8


async def test_a_trim_for_a_grown_system_prompt_is_told_to_the_manifest(tmp_path: Path) -> None:
    """A system prompt that grew since the last turn (a document added, or the first
    turn in a process) trims the history further once composed. The manifest was
    composed with the history start from before that trim: the segments it left out
    were listed as still in context, to a model that no longer saw them."""
    row = {"name": "claude-sonnet-4-5", "context_window": 60_000, "max_output": 8_000}
    clock = FakeClock()
    cfg = config(
        model={"name": "claude-sonnet-4-5"},
        models=[row],
        history={"budget_tokens": 1_000_000, "segment_gap_minutes": 10},
    )
    async with (
        LocalMessagesAPI(models=[row]) as server,
        frontmind(server, tmp_path, cfg=cfg, clock=clock) as fm,
    ):
        for i in range(8):
            clock.advance(3600 if i % 2 == 0 else 60)  # a new segment every 2 turns
            completed(await run_turn(fm, "c1", f"turn {i} " + "words " * 1600))
        assert (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start == 0
        page = "The quick brown fox jumps over the lazy dog near the river bank. " * 1400
        for k in range(2):  # about 40,000 tokens of system prompt
            await fm.put_document(f"manual-{k}", page[: 90_000 + k])
        clock.advance(60)
        completed(await run_turn(fm, "c1", "turn 8: what now?"))
        start = (await fm.storage.continuum(DEFAULT_USER, "c1")).history_start
    assert start > 0, "the history gave way to the grown system prompt"
    body = server.message_bodies()[-1]
    assert text_of(body["messages"][-1]).startswith("turn 8")
    center = text_of(body["messages"][-2])
    assert center.startswith("NOTIFICATION CENTER")
    assert "no longer in context" in center


@pytest.mark.parametrize("photo_gone", [False, True], ids=["table", "then-a-photo-gone"])
async def test_a_continuums_scale_falls_once_its_dense_text_left_the_window(
    tmp_path: Path, photo_gone: bool
) -> None:
    """The token scale is measured on requests of `SCALE_MIN_ESTIMATE` estimated tokens
    or more. After a table's turn raised it and then left the window, a small history's
    requests stayed under that size: the table's scale held for good, and prose was
    trimmed as if it were as dense, keeping a fraction of what the budget holds. A small
    request's count may lower the scale (its overhead only raises it).

    `photo_gone`: after an image by a URL that then stopped answering. Once the
    continuum sent the image as a note, its requests were never measured again (the
    estimate counted the image, not its note), and its history was sized by a scale of
    the past for as long as the process ran (here: a fifth more prose kept)."""
    photo = "https://photos.example/table.png"
    rows = "\n".join(",".join(str(1000 + 37 * i + j) for j in range(8)) for i in range(60))
    prose = "the river rose in spring and " * 10
    clock = FakeClock()
    cfg = config(history={"budget_tokens": 4000})
    async with (
        LocalMessagesAPI() as server,
        frontmind(server, tmp_path, cfg=cfg, clock=clock) as fm,
    ):
        for continuum in ("plain", "table"):
            if continuum == "table" and photo_gone:
                shown: Any = [by_url(photo), {"type": "text", "text": "a photo"}]
                completed(await run_turn(fm, continuum, shown))
            if continuum == "table":
                completed(await run_turn(fm, continuum, f"table:\n{rows}"))
                server.take_down(photo)
            for i in range(60):
                clock.advance(60)
                completed(await run_turn(fm, continuum, f"turn {i}: {prose}"))
        bodies = server.message_bodies()
    # (With the photo: one turn more, and the one after the take-down sent twice.)
    plain, table = bodies[:60], bodies[63 if photo_gone else 61 :]
    # Once the table has left the window (the first trim), the same prose is kept as
    # long as in the continuum that never held it.
    longest = max(len(b["messages"]) for b in plain[30:])
    kept = max(len(b["messages"]) for b in table[30:])
    assert kept >= longest - 2, longest
    if photo_gone:
        assert kept <= longest + 2, longest
