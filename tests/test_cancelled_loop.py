"""A turn cancelled after tool rounds of it completed: the rounds are kept in the
history (their tools ran, and the message sent again would run them again), closed by a
note of the runtime's, the record says cancelled, and the continuum's next turn sends
the rounds' results. Cancelled before a round completed, it keeps nothing. The real SDK
against the local Messages API, real SQLite."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from actors import _conversation
from frontmind import Frontmind, Tool, ToolFinished, TurnEvent, localapi, tool
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyText, ReplyToolUse, ScriptedResponder
from storage import SQLiteStorage, ToolResultBlock, TurnWrite
from tests._harness import completed, frontmind, run_turn
from tests.test_failed_loop import (
    KEPT,
    has_result,
    kept_round_note,
    leaves_out_the_turn,
    sent_results,
)

pytestmark = pytest.mark.anyio


class SlowAfterMail:
    """A model that asks for `send_mail` to a first message, and says "Continued." to a
    later one. The call carrying the mail's result signals `asked` as it arrives (the
    test makes that call slow, and leaves the turn while it waits)."""

    def __init__(self) -> None:
        self.asked = anyio.Event()

    def respond(self, request: localapi.MessagesRequest) -> Reply:
        if has_result(request.messages[-1].content):
            self.asked.set()
            return Reply((ReplyText("Sent."),))
        if not any(has_result(m.content) for m in request.messages):
            return Reply(
                (ReplyText("Sending it."), ReplyToolUse("send_mail", {"to": "ada"}, "toolu_mail"))
            )
        return Reply((ReplyText("Continued."),))


def _mailing() -> tuple[SlowAfterMail, LocalMessagesAPI, list[str], anyio.Event, Tool[..., str]]:
    """The model, the local API, the mails sent, an event set by each mail, and the
    `send_mail` tool: the model's call carrying the first mail's result is slow (the
    test leaves the turn while it waits)."""
    responder = SlowAfterMail()
    sent: list[str] = []
    mailed = anyio.Event()
    api = LocalMessagesAPI(responder=responder)

    @tool
    def send_mail(to: str) -> str:
        """Send the report by mail."""
        sent.append(to)
        if len(sent) == 1:
            api.set_latency(localapi.Latency(time_to_first_token=30.0))
        mailed.set()
        return f"mail sent to {to}"

    return responder, api, sent, mailed, send_mail


async def _leave_when(
    fm: Frontmind, text: str, *ran: anyio.Event, finished: str | None = None
) -> list[TurnEvent]:
    """Run a turn, reading its events, and leave it (`async with` left early) once every
    event of `ran` is set (and the call `finished` names has finished); its events."""
    seen: list[TurnEvent] = []
    read_finish = anyio.Event()
    if finished is None:
        read_finish.set()
    async with fm.turn("c1", text) as events, anyio.create_task_group() as tg:

        async def read() -> None:
            async for event in events:
                seen.append(event)
                if isinstance(event, ToolFinished) and event.id == finished:
                    read_finish.set()

        tg.start_soon(read)
        with anyio.fail_after(30):
            for event in (*ran, read_finish):
                await event.wait()
        tg.cancel_scope.cancel()
    return seen


async def test_a_turn_cancelled_after_a_tool_round_keeps_the_round(tmp_path: Path) -> None:
    """The model called `send_mail`, the mail went, and the turn was left while the next
    model call was under way: the turn stored nothing, and the user, sending the message
    again, sent the mail twice. The round is now kept, closed by a note saying the turn
    was cancelled; the record says cancelled, and that the round was kept; the next turn
    sends the round's result to the model, and the tool does not run again."""
    responder, api, sent, mailed, send_mail = _mailing()
    async with api, frontmind(api, tmp_path, tools=[send_mail]) as fm:
        await _leave_when(fm, "send the report to ada", mailed, responder.asked)
        api.set_latency(localapi.Latency())
        history = await fm.history("c1")
        (record,) = await fm.turns("c1")
        assert record.status == "cancelled"
        assert record.error == "cancelled"
        assert [w for w in record.warnings if w.startswith(KEPT)]
        # The message, the call and its result, and the runtime's closing note.
        note = kept_round_note(history)
        later = completed(await run_turn(fm, "c1", "go on"))
        body = api.message_bodies()[-1]
    assert note.text.startswith(
        "I stopped before I could answer: the turn was cancelled after 1 round(s) of tool calls"
    )
    # The next turn carries the round to the model, and completes; the mail went once.
    assert later.text == "Continued."
    assert sent_results(body) == [("toolu_mail", "mail sent to ada")]
    assert sent == ["ada"]


async def test_a_turn_cancelled_while_its_tool_runs_keeps_nothing(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """Left while the round's tool was still running: the round has no result to store,
    so nothing of the turn is kept, as before; the next turn is sent without it."""
    api, responder = script
    running = anyio.Event()

    @tool
    async def send_mail(to: str) -> str:
        """Send the report by mail."""
        running.set()
        await anyio.Event().wait()  # still sending when the turn is left
        return f"mail sent to {to}"

    responder.push(
        Reply((ReplyText("Sending."), ReplyToolUse("send_mail", {"to": "ada"}, "toolu_mail"))),
        "Continued.",
    )
    async with frontmind(api, tmp_path, tools=[send_mail]) as fm:
        await _leave_when(fm, "send the report to ada", running)
        assert await fm.history("c1") == []
        (record,) = await fm.turns("c1")
        later = completed(await run_turn(fm, "c1", "go on"))
        body = api.message_bodies()[-1]
    assert record.status == "cancelled"
    assert record.error == "cancelled"
    assert not [w for w in record.warnings if KEPT in w]
    assert leaves_out_the_turn(body)
    assert later.text == "Continued."


async def test_a_round_still_running_is_left_out_with_its_writes(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """Cancelled in a second round, whose reminder was added (a staged write) while the
    mail beside it was still being sent: the first round is kept; the second, with no
    results to store, is left out, and so is the reminder its call staged."""
    api, responder = script
    sent: list[str] = []
    mailing = anyio.Event()

    @tool
    async def send_mail(to: str) -> str:
        """Send the report by mail."""
        sent.append(to)
        if len(sent) == 2:  # the second round's: still sending when the turn is left
            mailing.set()
            await anyio.Event().wait()
        return f"mail sent to {to}"

    remind = ReplyToolUse("add_reminder", {"text": "pay"}, "toolu_remind")
    responder.push(
        Reply((ReplyText("Sending."), ReplyToolUse("send_mail", {"to": "ada"}, "toolu_1"))),
        Reply((remind, ReplyToolUse("send_mail", {"to": "bob"}, "toolu_2"))),
    )
    async with frontmind(api, tmp_path, tools=[send_mail]) as fm:
        seen = await _leave_when(fm, "send the reports", mailing, finished="toolu_remind")
        history = await fm.history("c1")
        (record,) = await fm.turns("c1")
        reminders = await fm.reminders()
    # The reminder's call finished before the turn was left.
    assert "toolu_remind" in [e.id for e in seen if isinstance(e, ToolFinished)]
    assert record.status == "cancelled"
    assert [w for w in record.warnings if w.startswith(KEPT)]
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    (result,) = history[2].content
    assert isinstance(result, ToolResultBlock)
    assert result.tool_use_id == "toolu_1"
    assert "toolu_2" not in str(history)
    assert "toolu_remind" not in str(history)
    assert reminders == []


async def test_a_keeping_commit_that_does_not_finish_in_time_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds of a cancelled turn are committed within `KEEP_ON_CANCEL_S`, so that a
    client's hang-up or a shutdown is never held by a store that does not answer: past
    it the turn keeps nothing (its record says cancelled, no round kept), the
    cancellation goes through, and the continuum's next turn runs on a history that
    holds none of it."""
    monkeypatch.setattr(_conversation, "KEEP_ON_CANCEL_S", 0.2)
    held = anyio.Event()
    commit_turn = SQLiteStorage.commit_turn

    async def unanswered_when_kept(self: SQLiteStorage, user: str, write: TurnWrite) -> bool:
        if write.record.status == "cancelled":  # the kept rounds' commit: it never ends
            held.set()
            await anyio.Event().wait()
        return await commit_turn(self, user, write)

    monkeypatch.setattr(SQLiteStorage, "commit_turn", unanswered_when_kept)
    responder, api, sent, mailed, send_mail = _mailing()
    async with api, frontmind(api, tmp_path, tools=[send_mail]) as fm:
        with anyio.fail_after(20):  # the 30 s call is not waited for
            await _leave_when(fm, "send the report to ada", mailed, responder.asked)
        assert held.is_set()
        api.set_latency(localapi.Latency())
        assert await fm.history("c1") == []
        (record,) = await fm.turns("c1")
        assert (record.status, record.error) == ("cancelled", "cancelled")
        assert not [w for w in record.warnings if KEPT in w]
        later = completed(await run_turn(fm, "c1", "send it again"))
        first = next(b for b in api.message_bodies() if "send it again" in str(b["messages"]))
    assert leaves_out_the_turn(first)
    assert later.text == "Sending it.\n\nSent."
    assert sent == ["ada", "ada"]  # nothing kept: the retry ran the tool again
