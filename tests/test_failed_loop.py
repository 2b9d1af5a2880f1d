"""A turn whose model call fails after tool rounds of it ran: the rounds are kept in the
history (their tools ran, and a retry of the message would run them again), closed by a
note of the runtime's, and the continuum's next turn is valid for the API. The real SDK
against the local Messages API, real SQLite."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frontmind import tool
from frontmind.localapi import (
    LocalMessagesAPI,
    MessagesRequest,
    MidStreamError,
    Reply,
    ReplyRawBlock,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
    Stall,
    StatusFault,
)
from frontmind.localapi import ToolResultBlock as SentResult
from storage import DEFAULT_USER, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock
from tests._factories import turn as stored_turn
from tests._harness import completed, config, failed, frontmind, run_turn

pytestmark = pytest.mark.anyio

SONNET: dict[str, Any] = {"name": "claude-sonnet-4-5", "max_tokens": 1024}
# Fable 5.1 always thinks, and checks that nothing before a replayed thinking block
# changed (for a new account, as the local API's is here).
FABLE: dict[str, Any] = {"name": "claude-fable-5-1", "thinking": "adaptive", "max_tokens": 4096}
# Extended thinking on a model that replays earlier turns' thinking as it was sent.
THINKING: dict[str, Any] = {
    "name": "claude-sonnet-4-6",
    "thinking": "enabled",
    "budget_tokens": 1024,
    "max_tokens": 4096,
}
# What the failing call streams before its stream breaks (never stored as history).
PARTIAL = "Sent it; here is a long account of what I did and why it went well. " * 4
KEPT = "1 tool round(s) of this turn were kept in the history"


def has_result(content: Any) -> bool:
    return not isinstance(content, str) and any(isinstance(b, SentResult) for b in content)


def kept_round_note(history: list[Message]) -> TextBlock:
    """Check a history holding one turn that kept its one round (the message, the
    `send_mail` call and its result, the runtime's closing note); its note."""
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[0].text() == "send the report to ada"
    (use,) = [b for b in history[1].content if isinstance(b, ToolUseBlock)]
    assert (use.name, use.id) == ("send_mail", "toolu_mail")
    (result,) = history[2].content
    assert isinstance(result, ToolResultBlock)
    assert (result.tool_use_id, result.content) == ("toolu_mail", "mail sent to ada")
    (note,) = history[3].content
    assert isinstance(note, TextBlock)
    return note


def leaves_out_the_turn(body: Any) -> bool:
    """Whether a request's body left the mail's turn out: its message, its call."""
    sent = str(body["messages"])
    return "send the report to ada" not in sent and "toolu_mail" not in sent


def sent_results(body: Any) -> list[tuple[str, Any]]:
    """The tool results a request's body sent: (tool_use_id, content) of each."""
    return [
        (b["tool_use_id"], b["content"])
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


class Mailer:
    """A model that asks for `send_mail` to a first message, answers `after_result` once
    the mail's result is the last thing sent (the call that fails), and "Continued." to
    any later message."""

    def __init__(self, after_result: Reply) -> None:
        self.after_result = after_result

    def respond(self, request: MessagesRequest) -> Reply:
        if has_result(request.messages[-1].content):
            return self.after_result
        if not any(has_result(m.content) for m in request.messages):
            return Reply(
                (ReplyText("Sending it."), ReplyToolUse("send_mail", {"to": "ada"}, "toolu_mail"))
            )
        return Reply((ReplyText("Continued."),))


# How the call after the tool round fails: the faults it meets (scheduled by the tool,
# once it ran), the model's reply to it, and the error's type.
Failure = tuple[Callable[[LocalMessagesAPI], None], Reply, str]
FAILURES: dict[str, Failure] = {
    # 529 on the call and on the SDK's two retries.
    "overloaded": (
        lambda api: api.schedule(*[StatusFault(529, retry_after_ms=1)] * 3),
        Reply((ReplyText("Sent."),)),
        "model_overloaded",
    ),
    # The stream breaks after some of the reply's text was streamed.
    "broken-stream": (
        lambda api: api.schedule(MidStreamError(after_events=10)),
        Reply((ReplyText(PARTIAL),)),
        "stream_error",
    ),
}


@pytest.mark.parametrize(
    ("model", "failure"),
    [
        (SONNET, "overloaded"),
        (SONNET, "broken-stream"),
        (FABLE, "overloaded"),
        (THINKING, "overloaded"),
    ],
    ids=["overloaded", "broken-stream", "prefix-checked-thinking", "thinking"],
)
async def test_a_call_failing_after_a_tool_round_keeps_the_round(
    tmp_path: Path, model: dict[str, Any], failure: str
) -> None:
    """The model called `send_mail`, the mail went, and the next model call of the turn
    failed: the turn stored nothing, and the user, sending the message again, sent the
    mail twice. The round is now kept, closed by a note saying the turn stopped and
    why; the record still says failed, and says the round was kept; the next turn sends
    the round's result to the model, and the API takes it."""
    fail, reply, kind = FAILURES[failure]
    sent: list[str] = []
    api = LocalMessagesAPI(responder=Mailer(reply), account="new")

    @tool
    def send_mail(to: str) -> str:
        """Send the report by mail."""
        sent.append(to)
        fail(api)  # the model call after this round fails
        return f"mail sent to {to}"

    async with api, frontmind(api, tmp_path, cfg=config(model=model), tools=[send_mail]) as fm:
        events = await run_turn(fm, "c1", "send the report to ada")
        error = failed(events)
        history = await fm.history("c1")
        (record,) = await fm.turns("c1")
        later = completed(await run_turn(fm, "c1", "go on"))
        body = api.message_bodies()[-1]
    assert sent == ["ada"], "the mail went once"
    assert error.type == kind
    assert KEPT in error.message
    assert record.status == "failed"
    assert (record.error or "").startswith(f"{kind}: ")
    assert [w for w in record.warnings if w.startswith(KEPT)]
    # The message, the call and its result, and the runtime's closing note.
    note = kept_round_note(history)
    assert note.text.startswith("I stopped before I could answer")
    assert f"({kind})" in note.text
    if model is not SONNET:
        # The call's thinking is stored as the model sent it.
        assert isinstance(history[1].content[0], RawBlock)
        assert history[1].content[0].kind in ("thinking", "redacted_thinking")
    if failure == "broken-stream":
        # What the broken call streamed is the record's partial reply, not history.
        assert PARTIAL[:40] in record.reply_text
        assert all(PARTIAL[:40] not in m.text() for m in history)
    # The next turn carries the round to the model, and completes.
    assert later.text == "Continued."
    assert sent_results(body) == [("toolu_mail", "mail sent to ada")]
    assert sent == ["ada"]


async def test_a_failure_of_the_first_call_keeps_nothing(tmp_path: Path) -> None:
    """No tool ran: the failed turn adds nothing to the history, as before."""
    api = LocalMessagesAPI(responder=Mailer(Reply((ReplyText("Sent."),))))
    async with api, frontmind(api, tmp_path) as fm:
        api.schedule(*[StatusFault(529, retry_after_ms=1)] * 3)
        error = failed(await run_turn(fm, "c1", "send the report to ada"))
        assert await fm.history("c1") == []
        (record,) = await fm.turns("c1")
    assert error.type == "model_overloaded"
    assert KEPT not in error.message
    assert record.status == "failed"
    assert not [w for w in record.warnings if KEPT in w]


async def test_a_refusal_after_a_tool_round_keeps_nothing(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """The call after the tool round ended in a refusal: the API's docs require the
    turn that triggered it to be removed before the conversation goes on (what the
    tool returned may be what triggered it), so nothing of the turn is kept, even
    though its tool ran; the next turn is sent and completes without it."""
    api, responder = script
    sent: list[str] = []

    @tool
    def send_mail(to: str) -> str:
        """Send the report by mail."""
        sent.append(to)
        return f"mail sent to {to}"

    responder.push(
        Reply((ReplyText("Sending."), ReplyToolUse("send_mail", {"to": "ada"}, "toolu_mail"))),
        Reply((ReplyText("I can't."),), stop_reason="refusal"),
        "Continued.",
    )
    async with frontmind(api, tmp_path, tools=[send_mail]) as fm:
        error = failed(await run_turn(fm, "c1", "send the report to ada"))
        assert await fm.history("c1") == []
        (record,) = await fm.turns("c1")
        later = completed(await run_turn(fm, "c1", "go on"))
        body = api.message_bodies()[-1]
    assert sent == ["ada"]
    assert error.type == "refusal"
    assert KEPT not in error.message
    assert record.status == "failed"
    assert not [w for w in record.warnings if KEPT in w]
    assert later.text == "Continued."
    assert leaves_out_the_turn(body)


async def test_a_refused_commit_of_the_kept_rounds_leaves_the_turn_failed(
    tmp_path: Path,
) -> None:
    """The store refuses the commit of the kept round (another turn was written beside
    the loaded continuum while the tool ran): the turn fails as one keeping nothing does,
    says nothing was kept, and the continuum's next turn reads the store again and
    completes."""
    api = LocalMessagesAPI(responder=Mailer(Reply((ReplyText("Sent."),))))
    beside = stored_turn("c1", "t-beside", user_text="beside")
    sent: list[str] = []

    @tool
    async def send_mail(to: str) -> str:
        """Send the report by mail."""
        sent.append(to)
        if len(sent) == 1:  # the first turn's
            assert await fm.storage.commit_turn(DEFAULT_USER, beside)
            api.schedule(*[StatusFault(529, retry_after_ms=1)] * 3)
        return f"mail sent to {to}"

    async with api, frontmind(api, tmp_path, tools=[send_mail]) as fm:
        error = failed(await run_turn(fm, "c1", "send the report to ada"))
        (record, _) = sorted(await fm.turns("c1"), key=lambda r: r.turn_id != error.turn_id)
        completed(await run_turn(fm, "c1", "go on"))
        history = await fm.history("c1")
    assert error.type == "model_overloaded"
    assert KEPT not in error.message
    assert record.status == "failed"
    assert not [w for w in record.warnings if KEPT in w]
    # Nothing of the failed turn; the next turn's message follows the turn beside.
    users = [m.text() for m in history if m.role == "user"]
    assert users[:2] == ["beside", "go on"]
    assert "send the report to ada" not in users


async def test_a_search_the_server_had_not_run_is_left_out_of_the_kept_rounds(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """After the tool round, a reply paused on a web search the server had not run yet,
    and the call that went on from it failed: the kept rounds leave that search's
    use out (the API refuses a use without its result in any later request), as a
    completed turn does, and the next turn completes."""
    api, responder = script
    sent: list[str] = []

    @tool
    def send_mail(to: str) -> str:
        """Send the report by mail."""
        sent.append(to)
        # The next call (the paused search) goes through; the one after it meets 529s.
        api.schedule(Stall(0.0), *[StatusFault(529, retry_after_ms=1)] * 3)
        return f"mail sent to {to}"

    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "ada's address"},
    }
    responder.push(
        Reply((ReplyText("Sending."), ReplyToolUse("send_mail", {"to": "ada"}, "toolu_mail"))),
        Reply((ReplyText("Searching."), ReplyRawBlock(search)), stop_reason="pause_turn"),
        "Continued.",
    )
    async with frontmind(api, tmp_path, tools=[send_mail]) as fm:
        error = failed(await run_turn(fm, "c1", "send the report to ada"))
        history = await fm.history("c1")
        (record,) = await fm.turns("c1")
        assert completed(await run_turn(fm, "c1", "go on")).text == "Continued."
    assert error.type == "model_overloaded"
    # Said as a completed turn's warnings say it.
    assert (
        "1 server tool call(s) the turn ended before the server ran were left out of the "
        "history (the API refuses a call without its result)"
    ) in record.warnings
    assert KEPT in error.message
    assert sent == ["ada"]
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant", "assistant"]
    assert history[3].content == (TextBlock("Searching."),)  # without the search's use
    assert history[4].text().startswith("I stopped before I could answer")


async def test_a_restart_reads_the_kept_rounds_turn_as_the_last_turn(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A failed turn whose rounds the history keeps paid its calls and wrote the cache,
    as a completed turn does, and the running process counts it so. Loaded again after a
    restart, only completed turns were counted: the turn before it was taken for the
    last, and the next turn, on the same model as the kept one, warned that the model
    changed (and its cache choices read the wrong last turn)."""
    api, responder = script

    @tool
    def send_mail(to: str) -> str:
        """Send the report by mail."""
        api.schedule(*[StatusFault(529, retry_after_ms=1)] * 3)  # the next call fails
        return f"mail sent to {to}"

    responder.push(
        "Hi.",
        Reply((ReplyToolUse("send_mail", {"to": "ada"}, "toolu_mail"),)),
        "Continued.",
    )
    async with frontmind(api, tmp_path, tools=[send_mail]) as fm:
        assert completed(await run_turn(fm, "c1", "hello")).text == "Hi."
        await fm.set_model_settings("c1", model="claude-haiku-4-5")
        error = failed(await run_turn(fm, "c1", "send the report to ada"))
        _, kept = await fm.turns("c1")
    assert KEPT in error.message
    # The switch was said on the turn that made it.
    assert any("the model changed from claude-sonnet-4-6" in w for w in kept.warnings)
    async with frontmind(api, tmp_path, tools=[send_mail]) as fm:
        done = completed(await run_turn(fm, "c1", "go on"))
    assert done.text == "Continued."
    assert not [w for w in done.warnings if "the model changed" in w]
