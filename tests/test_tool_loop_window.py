"""One turn's own tool loop against the model's window: the real SDK against the local
Messages API, which counts the tokens and refuses a request longer than the window as
the live API does ("prompt is too long")."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest

from actors import TurnCompleted
from frontmind import Config, tool
from frontmind.localapi import (
    LocalMessagesAPI,
    MessagesRequest,
    Reply,
    ReplyText,
    ReplyToolUse,
    Responder,
    ScriptedResponder,
)
from frontmind.localapi import ToolResultBlock as SentResult
from storage import ToolResultBlock, TurnRecord
from tests._harness import completed, config, frontmind, run_turn, unmarked

pytestmark = pytest.mark.anyio

WINDOW = 60_000
PAGE = "The quick brown fox jumps over the lazy dog near the river bank. " * 700  # ~11k tokens
SONNET: dict[str, Any] = {"name": "claude-sonnet-4-5", "max_tokens": 1024}
# Fable 5.1 always thinks, and checks that nothing before a replayed thinking block
# changed (for a new account, as the local API's is here).
FABLE: dict[str, Any] = {"name": "claude-fable-5-1", "thinking": "adaptive", "max_tokens": 4096}


def window_row(model: dict[str, Any]) -> dict[str, Any]:
    """The model's row with a 60k window (the config's and the local API's alike)."""
    return {"name": model["name"], "context_window": WINDOW, "max_output": 8_000}


def small_window(model: dict[str, Any]) -> Config:
    """The model on a 60k window, under a history budget past it: the window is the
    only limit."""
    return config(model=model, models=[window_row(model)], history={"budget_tokens": 1_000_000})


def results_sent(body: dict[str, Any]) -> list[str]:
    """The text of each tool_result of a request, in order."""
    texts = []
    for message in body["messages"]:
        for block in message["content"]:
            if block["type"] == "tool_result":
                content = block["content"]
                texts.append(content if isinstance(content, str) else json.dumps(content))
    return texts


class Loop(NamedTuple):
    done: TurnCompleted
    record: TurnRecord
    bodies: list[Any]  # the requests sent
    stored: list[str]  # the text of each tool result the history stores


def reads(count: int, answer: str) -> ScriptedResponder:
    """A model that calls `read_file` `count` times, then answers."""
    responder = ScriptedResponder()
    calls = (
        Reply((ReplyToolUse("read_file", {"name": f"f{i}"}, f"toolu_{i}"),)) for i in range(count)
    )
    responder.push(*calls, answer)
    return responder


async def read_loop(
    tmp_path: Path, result: str, responder: Responder, model: dict[str, Any] = SONNET
) -> Loop:
    """One turn of `model` on a 60k window whose `read_file` tool returns `result`."""

    @tool(max_result_chars=400_000)
    def read_file(name: str) -> str:
        """Read a file."""
        return result

    async with (
        LocalMessagesAPI(responder=responder, models=[window_row(model)], account="new") as api,
        frontmind(api, tmp_path, cfg=small_window(model), tools=[read_file]) as fm,
    ):
        done = completed(await run_turn(fm, "c1", "read the files"))
        history = await fm.history("c1")
        (record,) = await fm.turns("c1")
        bodies = api.message_bodies()
    stored = [b.content for m in history for b in m.content if isinstance(b, ToolResultBlock)]
    return Loop(done, record, bodies, stored)


async def test_a_tool_loop_past_the_window_completes_with_every_result_stored(
    tmp_path: Path,
) -> None:
    """Six reads of some 11,000 tokens each on a model of a 60k window: the loop's own
    results added up past the window, the fifth request was refused as too long, and
    the turn failed with nothing of it stored (the reads done, the replies written).
    Each request of the loop is now fitted as a turn over the window is: the oldest
    results of the turn go as notes in the request, the newest whole; the store keeps
    every result."""
    done, record, bodies, stored = await read_loop(tmp_path, PAGE, reads(6, "Read them all."))
    assert done.text == "Read them all."
    assert done.model_calls == 7
    last = results_sent(bodies[-1])
    noted = [r for r in last if "left out of this request" in r]
    assert len(last) == 6
    assert 0 < len(noted) < 6
    assert last[: len(noted)] == noted  # the oldest first
    assert last[-1] == PAGE  # the newest whole
    # Room is kept for the reply (max_tokens) in every request.
    assert max(u.total_input for u in record.call_usage) <= WINDOW - 1024
    (said,) = [w for w in done.warnings if "went as a note" in w]
    assert said.startswith(f"{len(noted)} tool result(s)")
    assert said in record.warnings
    assert stored == [PAGE] * 6


@pytest.mark.parametrize("model", [SONNET, FABLE], ids=["sonnet", "prefix-checked"])
async def test_a_single_result_longer_than_the_window_is_cut_in_the_request(
    tmp_path: Path, model: dict[str, Any]
) -> None:
    """One read of some 60,000 tokens, alone past a 60k window: its request was refused
    as too long and the turn failed, the read lost. The newest result stays the one the
    model works on, so it is cut rather than the turn failed (a tool's result is cut
    the same way at its max_result_chars): its start is sent with a note of how much
    was left out, the model can ask for a smaller part, and the history keeps it whole."""
    big = PAGE * 5
    done, record, bodies, stored = await read_loop(tmp_path, big, reads(1, "Cut short."), model)
    assert done.text == "Cut short."
    (sent,) = results_sent(bodies[-1])
    kept, note = sent.rsplit("\n[truncated: ", 1)
    assert big.startswith(kept)
    assert len(kept) > 10_000
    left_out = len(big) - len(kept)
    assert note.startswith(f"{left_out:,} more characters of this result were left out")
    assert max(u.total_input for u in record.call_usage) <= WINDOW - model["max_tokens"]
    (said,) = [w for w in done.warnings if "were cut in the request" in w]
    assert f"({left_out:,} characters left out" in said
    assert stored == [big]


class _Reads:
    """A model that calls `read_file` until `count` results are in its request, then
    answers: the same reply to a request sent again (a refused one takes no reply away,
    as a scripted queue's would)."""

    def __init__(self, count: int, answer: str) -> None:
        self.count = count
        self.answer = answer

    def respond(self, request: MessagesRequest) -> Reply:
        done = sum(
            isinstance(b, SentResult)
            for m in request.messages
            if not isinstance(m.content, str)
            for b in m.content
        )
        if done < self.count:
            return Reply((ReplyToolUse("read_file", {"name": f"f{done}"}, f"toolu_{done}"),))
        return Reply((ReplyText(self.answer),))


async def test_results_denser_than_the_estimate_are_fitted_on_the_apis_count(
    tmp_path: Path,
) -> None:
    """Frontmind's estimate (4 bytes a token) counts prose close to the API and numbers
    at some fourth of what it counts: a conversation of prose, then a tool returning a
    table of numbers, fitted the loop's request by a scale that undercounted the
    result; the request was refused as too long and the turn failed, its rounds lost.
    The refusal's count now sets the scale, and the request is fitted again and sent."""
    rows = "\n".join(",".join(str(1000 + 37 * i + j) for j in range(8)) for i in range(1500))
    done, record, bodies, stored = await read_loop(tmp_path, rows, _Reads(2, "Read them."))
    assert done.text == "Read them."
    assert done.model_calls == 3
    assert len(bodies) > 3, "a request was refused as too long, and sent again fitted"
    assert max(u.total_input for u in record.call_usage) <= WINDOW
    assert stored == [rows] * 2


async def test_a_prefix_checked_models_loop_keeps_what_its_thinking_was_written_after(
    tmp_path: Path,
) -> None:
    """Fable 5.1 checks that nothing before a replayed thinking block changed, and a tool
    loop's assistant turns must each open with their thinking: a round that sent an
    earlier result of the loop as a note changed what the loop's thinking blocks were
    written after, and the API refused the request ("bound to a different
    conversation"), the turn lost. On such a model the loop's requests keep everything
    up to its last thinking as it was sent; only the newest results give way (cut, with
    a note), and the turn completes."""
    # Three reads: the third is cut, and the loop still has room to answer (a fourth
    # would find the window full: the test below).
    done, _, bodies, stored = await read_loop(tmp_path, PAGE, reads(3, "Read them all."), FABLE)
    assert done.text == "Read them all."
    for before, after in itertools.pairwise(bodies):
        # Each request extends the one before it: nothing it sent was changed after.
        sent = unmarked(before["messages"])
        assert unmarked(after["messages"])[: len(sent)] == sent
    last = results_sent(bodies[-1])
    assert last[0] == PAGE
    assert any("[truncated: " in r for r in last)
    assert stored == [PAGE] * 3


async def test_a_prefix_checked_loop_ends_once_the_window_is_full(tmp_path: Path) -> None:
    """On Fable 5.1 the loop's requests send all they sent before unchanged: once that
    fills the window, each new result went to the model as its truncation note alone,
    and the model, told to ask for a smaller part, spent every round of the loop
    (eight calls) on results it never saw. The loop now ends when a new result would go
    as its note alone, with a reply saying the window is full and a warning; the history
    stores every result whole, and no request sent a result of which nothing reached
    the model."""
    done, record, bodies, stored = await read_loop(
        tmp_path, PAGE, reads(10, "Read them all."), FABLE
    )
    assert done.text.startswith("I stopped: the conversation's context window is full")
    assert 1 < done.model_calls < 8  # the loop's limit (`tools.max_iterations`)
    assert len(bodies) == done.model_calls
    # The last round's result was stored, never sent.
    assert stored == [PAGE] * done.model_calls
    for body in bodies:
        assert not [r for r in results_sent(body) if r.startswith("\n[truncated: ")]
    (said,) = [w for w in done.warnings if "context window is full" in w]
    assert said in record.warnings


async def test_the_preview_of_a_long_message_fits_the_history_as_its_turn_does(
    tmp_path: Path,
) -> None:
    """A turn's request is fitted with its message counted; the preview (`fm.context`,
    "the next request, not sent") fitted the history without it: past a tool loop that
    fills the window, a long message's preview showed the history's results whole that
    its turn sent as notes."""
    responder = reads(6, "Read them all.")
    responder.push("Noted.")

    @tool(max_result_chars=400_000)
    def read_file(name: str) -> str:
        """Read a file."""
        return PAGE

    message = "Please summarize this: " + PAGE
    async with (
        LocalMessagesAPI(responder=responder, models=[window_row(SONNET)]) as api,
        frontmind(api, tmp_path, cfg=small_window(SONNET), tools=[read_file]) as fm,
    ):
        completed(await run_turn(fm, "c1", "read the files"))
        preview = json.loads(msgspec.json.encode(await fm.context("c1", message)))
        completed(await run_turn(fm, "c1", message))
        sent = api.message_bodies()[-1]
    assert [r for r in results_sent(sent) if "left out of this request" in r]
    assert results_sent(preview) == results_sent(sent)


async def test_a_request_at_the_windows_edge_counts_the_tool_use_system_prompt(
    tmp_path: Path,
) -> None:
    """A request that gives `tools` carries the tool-use system prompt the API adds
    (`models.toml`, `[tool_prompt_tokens]`: 449 tokens with tool_choice auto), which
    the estimate left out: a request fitted to the window's edge was that much over it,
    refused as too long, and sent again. Here some 32,500 tokens of documents (over the
    fixed reserve, so the system prompt's own size is kept room for: the window is
    filled to its edge), then a result larger than the window, cut to fill the room
    left. The first request, mostly prose (counted under its estimate), leaves the
    token scale at 1; the result's text is denser, and the loop's second request comes
    within a few hundred tokens of the window: it was over by the prompt, and now fits."""
    dense = "alpha beta gamma delta 123 "  # counted some 1.27 tokens an estimated token

    @tool(max_result_chars=400_000)
    def read_file(name: str) -> str:
        """Read a file."""
        return dense * 12_000

    documents = (PAGE * 3)[: 32_500 * 4]  # prose: counted under its estimate
    async with (
        LocalMessagesAPI(responder=_Reads(1, "Read it."), models=[window_row(SONNET)]) as api,
        frontmind(api, tmp_path, cfg=small_window(SONNET), tools=[read_file]) as fm,
    ):
        half = len(documents) // 2
        await fm.put_document("manual-0", documents[:half])
        await fm.put_document("manual-1", documents[half:])
        done = completed(await run_turn(fm, "c1", "read the file"))
        (record,) = await fm.turns("c1")
        bodies = api.message_bodies()
    assert done.text == "Read it."
    assert len(bodies) == 2, "the request at the window's edge was refused and sent again"
    (sent,) = results_sent(bodies[1])
    assert "\n[truncated: " in sent, "the result was cut to the window's edge"
    assert max(u.total_input for u in record.call_usage) <= WINDOW
