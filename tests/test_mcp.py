"""MCP servers as tools: real servers in child processes, the real SDK on both sides.

The test server (tests/_mcp_server.py, written with the `mcp` SDK) runs over stdio and
streamable HTTP, crashes, hangs, floods and changes its tool list; `mcp-server-time`
(from PyPI) is a third-party server. The model is the local Messages API with a
scripted responder that calls the tools."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec
import pytest

from actors import McpUnavailable, ToolDefinitionError
from actors._content import MAX_RESULT_IMAGES
from actors._mcp import _link
from actors._mcp._hub import McpHub
from actors._mcp._link import McpLink
from actors._mcp._spec import mcp_servers
from frontmind import ConfigError, Frontmind, ToolFinished, TurnCompleted
from frontmind.cli._render import render_context
from frontmind.config import McpServer, load_config
from frontmind.localapi import (
    LocalMessagesAPI,
    Reply,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
    ToolResultBlock,
)
from runtime import ActorSystem, RestartPolicy
from tests._daemon import daemon, turn
from tests._harness import FakeClock, completed, config, tool_finishes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "tests._mcp_server"]
# Restarts close together, so a test sees a server come back within seconds.
FAST = RestartPolicy(max_restarts=50, within=60.0, backoff_initial=0.05, backoff_max=0.2)


def stdio(name: str = "t", *args: str, **options: Any) -> dict[str, Any]:
    return {"name": name, "command": [*SERVER, *args], "cwd": str(ROOT), **options}


async def opened(
    api: LocalMessagesAPI, data: Path, servers: Sequence[dict[str, Any] | McpServer], **kwargs: Any
) -> Any:
    return Frontmind.open(
        data,
        kwargs.pop("cfg", config()),
        api_key="test-key",
        base_url=api.base_url,
        clock=FakeClock(),
        mcp=servers,
        mcp_policy=FAST,
        **kwargs,
    )


def calls(*uses: tuple[str, dict[str, Any]]) -> list[Reply]:
    """The model calls each tool in turn, then says it is done."""
    return [Reply((ReplyToolUse(name, arguments),)) for name, arguments in uses] + [
        Reply((ReplyText("done"),))
    ]


def tool_json(request: Any) -> bytes:
    return msgspec.json.encode(request.tools)


def results(responder: ScriptedResponder) -> list[Any]:
    """The tool_result blocks the model was sent, in order."""
    found = []
    for request in responder.requests:
        last = request.messages[-1]
        if isinstance(last.content, list):
            found += [b for b in last.content if type(b).__name__ == "ToolResultBlock"]
    return found


def result_text(block: Any) -> str:
    content = block.content
    if isinstance(content, str):
        return content
    return "\n".join(getattr(p, "text", "") for p in content)


async def test_a_stdio_servers_tools_are_offered_after_the_others_and_called(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    async with await opened(api, tmp_path, [stdio()]) as fm:
        names = fm.offered_tools()
        mcp = [n for n in names if n.startswith("mcp__")]
        # After the built-in tools, the server's tools by name: a stable order.
        assert names[: len(names) - len(mcp)] == [n for n in names if not n.startswith("mcp__")]
        assert mcp == sorted(mcp)
        assert {"mcp__t__echo", "mcp__t__hang", "mcp__t__chart"} <= set(mcp)
        status = fm.mcp_servers()[0]
        assert (status.name, status.state, status.transport) == ("t", "running", "stdio")
        # `frontmind inspect` says which tools came from which server.
        shown = render_context(await fm.context("ada", "hi"))
        assert "  [built-in] add_reminder, list_reminders" in shown
        assert (
            "  [mcp server t] block, chart, crash, echo, environment, fail, files, flood, gallery, "
            "grow, hang, headers, mislabeled, refuse, report, screenshot, slow" in shown
        )
        responder.extend(calls(("mcp__t__echo", {"text": "hi"})))
        responder.push("again")
        events = [e async for e in fm.turn("ada", "echo hi")]
        finished = tool_finishes(events)
        assert finished[0].name == "mcp__t__echo"
        assert not finished[0].is_error
        assert finished[0].content.startswith("echo: hi (pid ")
        completed(events)
        completed([e async for e in fm.turn("ada", "and again")])
        # The server's schema and description, as it gave them.
        echo = next(t for t in responder.requests[0].tools or () if t.name == "mcp__t__echo")
        assert echo.description == "Echo the text back, with the server's pid."
        assert echo.input_schema is not None
        assert echo.input_schema["required"] == ["text"]
    # The tools array leads every cached prefix: byte-identical turn after turn.
    arrays = {tool_json(r) for r in responder.requests}
    assert len(arrays) == 1


async def test_images_resources_errors_floods_crashes_and_hangs_never_fail_the_turn(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    server = stdio(timeout_s=2, max_result_chars=5000)
    rounds = config(tools={"max_iterations": 10})
    async with await opened(api, tmp_path, [server], cfg=rounds) as fm:
        responder.extend(
            calls(
                ("mcp__t__chart", {}),
                ("mcp__t__files", {}),
                ("mcp__t__fail", {}),
                ("mcp__t__flood", {"megabytes": 2}),
                ("mcp__t__hang", {}),
                ("mcp__t__nope", {}),
                ("mcp__t__echo", {"text": 5}),
                ("mcp__t__gallery", {"count": 25}),
            )
        )
        with anyio.fail_after(60):
            events = [e async for e in fm.turn("ada", "try everything")]
        done = completed(events)
        assert done.text.endswith("done")
        finished = tool_finishes(events)
        errors = {e.name: e.is_error for e in finished}
        assert errors == {
            "mcp__t__chart": False,
            "mcp__t__files": False,
            "mcp__t__fail": True,
            "mcp__t__flood": False,
            "mcp__t__hang": True,
            "mcp__t__nope": True,  # not a tool the model was offered
            "mcp__t__echo": True,  # the server refused the argument's type
            "mcp__t__gallery": False,
        }
        sent = results(responder)
        # Images past one result's share are left out, with a note.
        gallery = sent[7]
        assert isinstance(gallery.content, list)
        kinds = [type(p).__name__ for p in gallery.content]
        assert kinds.count("ImageBlock") == MAX_RESULT_IMAGES
        assert "[left out: 5 more images or documents" in result_text(gallery)
        chart, files, _, flood, hang = sent[:5]
        # An image is an image block of the tool_result.
        assert isinstance(chart.content, list)
        assert [type(p).__name__ for p in chart.content] == ["TextBlock", "ImageBlock"]
        # Resources: text with their URI; an image an image (it was a line of text), a PDF
        # would be a document, other binaries a note.
        text = result_text(files)
        assert "[resource <file:///notes.txt>]\nbuy milk" in text
        assert "<file:///archive.zip>: application/zip" in text
        assert "[resource link] report <file:///report.pdf>" in text
        assert isinstance(files.content, list)
        assert [type(p).__name__ for p in files.content].count("ImageBlock") == 1
        # Megabytes are cut to the server's limit, with a note.
        flooded = result_text(flood)
        assert len(flooded) < 5400
        assert "[truncated: 2,092,152 more characters" in flooded
        assert "timed out after 2s" in result_text(hang)
        # Stored as sent, and replayed byte for byte on the next turn.
        history = await fm.history("ada")
        stored = [b for m in history for b in m.content if type(b).__name__ == "ToolResultBlock"]
        assert json.loads(stored[0].content_json)[1]["type"] == "image"
        responder.push("next")
        completed([e async for e in fm.turn("ada", "next")])
        replayed = responder.requests[-1].messages[2].content
        assert isinstance(replayed, list)
        assert isinstance(replayed[0], ToolResultBlock)
        assert msgspec.json.encode(replayed[0].content) == msgspec.json.encode(chart.content)

        # A crash in the middle of a call: an error for the model, and the server is
        # restarted (a new process) for the calls after it.
        responder.extend(calls(("mcp__t__echo", {"text": "a"}), ("mcp__t__crash", {})))
        first = [e async for e in fm.turn("ada", "crash it")]
        crashed = tool_finishes(first)
        assert crashed[1].is_error
        assert "stopped during the call" in crashed[1].content
        completed(first)
        with anyio.fail_after(30):
            await fm.wait_mcp(lambda servers: servers[0].state == "running")
        responder.extend(calls(("mcp__t__echo", {"text": "b"})))
        after = [e async for e in fm.turn("ada", "echo again")]
        echoed = next(e for e in after if isinstance(e, ToolFinished))
        pid = re.compile(r"pid (\d+)")
        old, new = pid.search(crashed[0].content), pid.search(echoed.content)
        assert old is not None
        assert new is not None
        assert old.group(1) != new.group(1)


async def test_an_image_or_pdf_that_is_not_what_its_type_says_is_a_note_not_a_failed_turn(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # The API refuses a request whose image is not the media type it is said to be (or
    # not base64, or a PDF that is none), and with it the rest of the turn: such data
    # from a server is a line of text for the model; the good image beside it is kept.
    api, responder = script
    async with await opened(api, tmp_path, [stdio()]) as fm:
        responder.extend(calls(("mcp__t__mislabeled", {})))
        events = [e async for e in fm.turn("ada", "show the attachments")]
        assert completed(events).text == "done"
        sent = results(responder)[0]
        assert isinstance(sent.content, list)
        assert [type(p).__name__ for p in sent.content] == ["TextBlock"] * 4 + ["ImageBlock"]
        text = result_text(sent)
        assert "[an image: image/png, not shown: the data is not image/png]" in text
        assert "[an image: image/png, not shown: not valid base64]" in text
        assert "<file:///a.pdf>: application/pdf, not shown: the data is not application/pdf]" in (
            text
        )
        history = await fm.history("ada")
        assert len(history) == 4  # stored, the tool exchange with it


async def test_an_image_larger_than_the_api_takes_is_a_note_not_a_failed_turn(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # The API refuses an image over 8000 pixels on a side (a full-page screenshot), and
    # with it the request: the turn failed. Such an image is a line of text for the
    # model; one of 8000 pixels, and the thumbnail beside it, are kept.
    api, responder = script
    async with await opened(api, tmp_path, [stdio()]) as fm:
        responder.extend(
            calls(
                ("mcp__t__screenshot", {"height": 9000}), ("mcp__t__screenshot", {"height": 8000})
            )
        )
        events = [e async for e in fm.turn("ada", "take a screenshot of the page")]
        assert completed(events).text == "done"
        tall, tallest = results(responder)
        assert isinstance(tall.content, list)
        assert [type(p).__name__ for p in tall.content] == ["TextBlock", "TextBlock", "ImageBlock"]
        assert (
            "[an image: image/png, not shown: it is 4 x 9000 pixels; the API takes at most 8000"
            in (result_text(tall))
        )
        assert isinstance(tallest.content, list)
        assert [type(p).__name__ for p in tallest.content] == [
            "TextBlock",
            "ImageBlock",
            "ImageBlock",
        ]


async def test_a_pdf_of_more_pages_than_a_request_takes_is_a_note_not_a_failed_turn(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # A request holds at most 100 images and PDF pages on a model of a 200k-token window
    # (the live 400: "Too much media: 150 document pages + 0 images > 100"): a server's
    # PDF of 150 pages, embedded in its result, goes to the model as a note saying so,
    # and the turn and the next go on; the stored history keeps the PDF.
    api, responder = script
    small = config(model={"name": "claude-sonnet-4-5"})
    async with await opened(api, tmp_path, [stdio()], cfg=small) as fm:
        responder.extend(calls(("mcp__t__report", {"pages": 150})))
        events = [e async for e in fm.turn("ada", "read me the report")]
        assert completed(events).text == "done"
        sent = result_text(results(responder)[0])
        assert "left out of this request" in sent, sent
        responder.push("still here")
        assert completed([e async for e in fm.turn("ada", "and now?")]).text == "still here"
        history = await fm.history("ada")
        stored = [b for m in history for b in m.content if type(b).__name__ == "ToolResultBlock"]
        assert json.loads(stored[0].content_json)[1]["type"] == "document"


async def test_a_protocol_errors_huge_message_is_cut_to_max_result_chars(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    async with await opened(api, tmp_path, [stdio(max_result_chars=1_000)]) as fm:
        responder.extend(calls(("mcp__t__refuse", {"size": 50_000})))
        events = [e async for e in fm.turn("ada", "try it")]
        completed(events)
        refused = finished_call(events)
        assert refused.is_error
        assert refused.content.startswith("MCP server 't' refused the call: refused: rrr")
        assert len(refused.content) < 1_200
        assert "[truncated: " in refused.content
        assert result_text(results(responder)[0]) == refused.content


async def test_a_servers_own_error_with_the_closed_connections_code_restarts_nothing(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # -32000 is the SDK's code for a closed connection, and also JSON-RPC's first
    # "server error" code, which servers send for their own failures: a server that
    # answers with it is running, and is not restarted (in-flight calls and all).
    api, responder = script
    async with await opened(api, tmp_path, [stdio()]) as fm:
        responder.extend(
            calls(
                ("mcp__t__echo", {"text": "a"}),
                ("mcp__t__refuse", {"code": -32000}),
                ("mcp__t__echo", {"text": "b"}),
            )
        )
        events = [e async for e in fm.turn("ada", "try it")]
        completed(events)
        first, refused, last = tool_finishes(events)
        assert refused.is_error
        assert refused.content == "MCP server 't' refused the call: refused: rrrrrrrrrr"
        assert not last.is_error
        pid = re.compile(r"pid (\d+)")
        before, after = pid.search(first.content), pid.search(last.content)
        assert before is not None
        assert after is not None
        assert before.group(1) == after.group(1)
        assert fm.mcp_servers()[0].state == "running"


async def test_a_call_that_keeps_its_server_busy_is_not_taken_for_a_dead_server(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Many servers do a call's work in their one event loop and answer nothing else
    # meanwhile: a liveness check sent during a call (within its `timeout_s`) went
    # unanswered, the link was lost, the call failed as "stopped during the call" and
    # the server was restarted. Checks here come every 0.1 s and wait 0.5 s.
    monkeypatch.setattr(_link, "PING_EVERY_S", 0.1)
    monkeypatch.setattr(_link, "PING_TIMEOUT_S", 0.5)
    api, responder = script
    async with await opened(api, tmp_path, [stdio(timeout_s=30)]) as fm:
        responder.extend(
            calls(
                ("mcp__t__echo", {"text": "a"}),
                ("mcp__t__block", {"seconds": 3}),
                ("mcp__t__echo", {"text": "b"}),
            )
        )
        events = [e async for e in fm.turn("ada", "take your time")]
        completed(events)
        first, blocked, last = tool_finishes(events)
        assert (blocked.is_error, blocked.content) == (False, "blocked 3.0")
        pid = re.compile(r"pid (\d+)")
        before, after = pid.search(first.content), pid.search(last.content)
        assert before is not None
        assert after is not None
        assert before.group(1) == after.group(1)
        assert fm.mcp_servers()[0].state == "running"


async def test_a_check_sent_just_before_a_call_that_blocks_the_server_kills_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An idle check sent just before a call that holds the server's loop went unanswered
    # too: the link was lost, and the call failed as "stopped during the call" (the test
    # above failed so, now and then). Here the check waits until the server says it is
    # blocking, so its answer can only come after the call's.
    monkeypatch.setattr(_link, "PING_EVERY_S", 0.1)
    monkeypatch.setattr(_link, "PING_TIMEOUT_S", 1.0)
    (spec,) = mcp_servers([stdio(timeout_s=30)])
    link = McpLink(spec, 0)
    checking, blocking = anyio.Event(), anyio.Event()
    check = link.check

    async def check_when_blocking() -> None:
        if not checking.is_set():
            checking.set()
            await blocking.wait()
        await check()

    class Blocking(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("blocking for"):
                blocking.set()

    monkeypatch.setattr(link, "check", check_when_blocking)
    server_log = logging.getLogger("frontmind.mcp.t")
    watch = Blocking(logging.INFO)
    server_log.addHandler(watch)
    monkeypatch.setattr(server_log, "level", logging.INFO)
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                await tg.start(link.serve)
                await checking.wait()
                blocked = await link.call("block", {"seconds": 3})
                assert (blocked.is_error, blocked.content) == (False, "blocked 3.0")
                assert link.alive, link.reason
                link.close()
    finally:
        server_log.removeHandler(watch)


async def test_a_frozen_server_is_found_out_however_many_calls_keep_coming(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Calls in flight hold the check off (a busy server is not a dead one), but not for
    # ever: with calls coming from many turns one after another, a server that answers
    # nothing (stopped, not exited) was never checked, and never restarted. Now one that
    # has answered nothing for longer than a call may take is checked.
    monkeypatch.setattr(_link, "PING_EVERY_S", 0.1)
    monkeypatch.setattr(_link, "PING_TIMEOUT_S", 0.5)
    (spec,) = mcp_servers([stdio(timeout_s=1)])
    link = McpLink(spec, 0)

    async def keep_calling(timeout_s: float) -> None:
        while True:
            with anyio.move_on_after(timeout_s):  # as the turn's timeout ends a call
                await link.call("echo", {"text": "anyone?"})

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await tg.start(link.serve)
            found = re.search(r"pid (\d+)", (await link.call("echo", {"text": "x"})).content)
            assert found is not None
            pid = int(found.group(1))
            os.kill(pid, signal.SIGSTOP)
            try:
                # Two callers out of step: a call is in flight at every moment.
                tg.start_soon(keep_calling, 1.0)
                tg.start_soon(keep_calling, 1.3)
                with anyio.fail_after(8):
                    await link.lost.wait()
                assert "did not answer a check" in link.reason
            finally:
                os.kill(pid, signal.SIGCONT)
                tg.cancel_scope.cancel()


async def test_a_servers_actor_stops_with_the_hub_not_restarting_into_its_end() -> None:
    # A server that crashed shortly before the instance stopped was restarted by the
    # kernel after the hub had stopped: "MCP server 't' did not start: the instance is
    # not running" and the kernel's "actor 'mcp:t' restarts", both warnings, at the end
    # of every such shutdown. The hub now stops its servers' actors as it stops.
    slow = RestartPolicy(max_restarts=50, within=60.0, backoff_initial=0.5, backoff_max=0.5)
    async with ActorSystem() as system:
        hub = McpHub(system, mcp_servers([stdio()]), policy=slow)
        async with hub.running():
            crashed = await hub.call("mcp__t__crash", b"{}")
            assert crashed.is_error
            with anyio.fail_after(30):
                await hub.wait_until(lambda servers: servers[0].state == "down")
        assert system.lookup("mcp:t") is None


async def test_a_changed_tool_list_waits_for_a_reload_and_its_cost_is_reported(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    async with await opened(api, tmp_path, [stdio()]) as fm:
        responder.extend(calls(("mcp__t__grow", {})))
        completed([e async for e in fm.turn("ada", "grow")])
        with anyio.fail_after(20):
            await fm.wait_mcp(lambda servers: servers[0].pending is not None)
        assert "mcp__t__extra" in (fm.mcp_servers()[0].pending or ())
        responder.push("same tools")
        same = completed([e async for e in fm.turn("ada", "hello")])
        assert not same.warnings
        assert "mcp__t__extra" not in fm.offered_tools()
        assert len({tool_json(r) for r in responder.requests}) == 1

        report = await fm.reload_tools()
        assert report.added == ("mcp__t__extra",)
        assert "one full cache write" in report.message
        responder.push("new tools")
        changed = completed([e async for e in fm.turn("ada", "hello again")])
        assert "mcp__t__extra" in fm.offered_tools()
        warning = " ".join(changed.warnings)
        assert "the tools array changed" in warning
        assert "+mcp__t__extra" in warning
        written = changed.usage.cache_creation_input_tokens
        assert written > 0
        assert f"wrote {written:,} tokens" in warning


async def test_a_server_back_from_a_crash_with_other_tools_has_them_pending(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A restart that brings another tool list is reported as a list_changed notice is:
    # a warning saying what changed, the list pending, applied by a reload.
    api, responder = script
    flag = tmp_path / "more"
    server = stdio("t", "--extra-when", str(flag))
    with caplog.at_level("WARNING", logger="frontmind.mcp"):
        async with await opened(api, tmp_path / "data", [server]) as fm:
            assert "mcp__t__extra" not in fm.offered_tools()
            flag.touch()
            responder.extend(calls(("mcp__t__crash", {})))
            completed([e async for e in fm.turn("ada", "crash it")])
            with anyio.fail_after(30):
                await fm.wait_mcp(lambda servers: servers[0].pending is not None)
            assert "mcp__t__extra" in (fm.mcp_servers()[0].pending or ())
            assert "mcp__t__extra" not in fm.offered_tools()
            report = await fm.reload_tools()
            assert report.added == ("mcp__t__extra",)
            assert "mcp__t__extra" in fm.offered_tools()
    assert any(
        "MCP server 't' lists other tools now (added mcp__t__extra" in r.getMessage()
        for r in caplog.records
    )


async def test_a_reload_that_changes_nothing_is_no_tools_change(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A reload rebuilds the tools array even when every server lists what it did: the
    next turn said "the tools array changed" and that it wrote a full prefix, when it
    sent the same array and read its cache."""
    api, responder = script
    async with await opened(api, tmp_path, [stdio()]) as fm:
        responder.push("first")
        completed([e async for e in fm.turn("ada", "hello")])
        report = await fm.reload_tools()
        assert not report.changed
        responder.push("second")
        after = completed([e async for e in fm.turn("ada", "hello again")])
    assert not after.warnings, after.warnings
    assert after.cache_miss_reason is None
    assert len({tool_json(r) for r in responder.requests}) == 1


async def test_a_server_that_cannot_start_is_retried_and_joins_once_it_runs(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    flag = tmp_path / "ready"
    servers = [stdio("late", "--start-when", str(flag), startup_timeout_s=20)]
    async with await opened(api, tmp_path / "data", servers) as fm:
        status = fm.mcp_servers()[0]
        assert status.state == "down"
        assert status.error is not None
        assert not [n for n in fm.offered_tools() if n.startswith("mcp__")]
        responder.push("without it")
        completed([e async for e in fm.turn("ada", "hello")])
        flag.touch()
        with anyio.fail_after(60):
            await fm.wait_mcp(lambda servers: servers[0].state == "running")
        assert "mcp__late__echo" in fm.offered_tools()
        responder.push("with it")
        joined = completed([e async for e in fm.turn("ada", "hello")])
        assert any("+mcp__late__echo" in w for w in joined.warnings)


async def test_a_tool_whose_schema_the_api_refuses_is_left_out_and_turns_go_on(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # MCP 2026-07-28 allows any JSON Schema 2020-12 at a tool's root; the Messages API
    # refuses `oneOf`/`allOf`/`anyOf` there, a property name outside its pattern, or a
    # schema that is not valid JSON Schema at all (a server's typo), and with it every
    # request offering the tool: every turn failed.
    api, responder = script
    server = {
        "name": "s",
        "command": [sys.executable, "-m", "tests._mcp_schemas_server"],
        "cwd": str(ROOT),
    }
    with caplog.at_level("WARNING", logger="frontmind.mcp"):
        async with await opened(api, tmp_path, [server]) as fm:
            assert [n for n in fm.offered_tools() if n.startswith("mcp__")] == ["mcp__s__plain"]
            responder.extend(calls(("mcp__s__plain", {"text": "hi"})))
            events = [e async for e in fm.turn("ada", "use plain")]
            completed(events)
            assert finished_call(events).content == "plain: hi"
    refusals = (
        ("either", "anyOf at its top level"),
        ("branches", "allOf at its"),
        ("dated", "property name 'StartTime<' is not 1-64 of A-Z a-z 0-9 _ . -"),
        ("misspelled", "not a valid JSON Schema 2020-12: at properties.text.type: 'strnig'"),
        ("listed", "not a valid JSON Schema 2020-12: at required: 'text' is not of type"),
    )
    for tool, why in refusals:
        assert any(
            f"tool {tool!r} left out" in r.getMessage() and why in r.getMessage()
            for r in caplog.records
        ), tool


async def test_a_server_that_will_not_start_is_logged_without_tracebacks(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # A server that is down is an expected state (the instance serves meanwhile): each
    # retry says so in a line or two, not with a page of traceback from the kernel.
    api, _ = script
    records: list[logging.LogRecord] = []
    restarted = anyio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)
            if record.name == "frontmind.runtime" and "mcp:down" in record.getMessage():
                restarted.set()

    watch = Watch(logging.DEBUG)
    logging.getLogger("frontmind").addHandler(watch)
    try:
        async with await opened(api, tmp_path, [stdio("down", "--start", "crash")]) as fm:
            with anyio.fail_after(30):
                await restarted.wait()
            assert fm.mcp_servers()[0].state == "down"
    finally:
        logging.getLogger("frontmind").removeHandler(watch)
    kernel = [r for r in records if r.name == "frontmind.runtime"]
    assert kernel, "the kernel did not report the restart"
    assert [r for r in kernel if r.exc_info] == []
    assert "actor 'mcp:down' restarts: MCP server 'down' did not start" in kernel[0].getMessage()


async def test_why_a_server_did_not_start_says_what_it_wrote_last(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # A server that exits at startup says why on its stderr (a traceback, a missing
    # key), which goes to the log at info: at the daemon's default level (warning) the
    # operator saw only "MCPError: Connection closed", in the log and in its status.
    api, _ = script
    with pytest.raises(McpUnavailable) as refused:
        async with await opened(
            api, tmp_path, [stdio("needed", "--start", "crash", required=True)]
        ):
            pytest.fail("it started")
    assert "test server: no API key given, not starting" in str(refused.value)
    async with await opened(api, tmp_path / "data", [stdio("down", "--start", "crash")]) as fm:
        error = fm.mcp_servers()[0].error or ""
        assert error.endswith(
            "(its last line on stderr: test server: no API key given, not starting)"
        )


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--start", "crash"), "did not start: .*: no API key given"),
        (
            ("--start", "hang"),
            r"no answer within .* \(its last line on stderr: test server starting",
        ),
    ],
)
async def test_a_required_server_that_does_not_start_refuses_the_start(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    args: tuple[str, str],
    why: str,
) -> None:
    api, _ = script
    server = stdio("needed", *args, required=True, startup_timeout_s=3)
    with pytest.raises(McpUnavailable, match=r"\[\[mcp\]\] needed: required") as refused:
        async with await opened(api, tmp_path, [server]):
            pytest.fail("it started")
    assert re.search(why, str(refused.value)), refused.value


@asynccontextmanager
async def http_server(port: int = 0) -> AsyncIterator[tuple[anyio.abc.Process, str]]:
    """The test server over streamable HTTP (port 0: a free one), and its URL."""
    async with await anyio.open_process(
        [*SERVER, "--http", str(port)], cwd=ROOT, stderr=subprocess.PIPE
    ) as process:
        assert process.stderr is not None
        url, said = "", b""
        with anyio.fail_after(30):
            while not url:
                said += await process.stderr.receive()
                found = re.search(rb"listening on (\S+)\n", said)
                url = found.group(1).decode() if found else ""
        try:
            yield process, url
        finally:
            if process.returncode is None:
                process.terminate()


def http(url: str, **options: Any) -> dict[str, Any]:
    return {"name": "web", "url": url, "startup_timeout_s": 20, **options}


def finished_call(events: Sequence[Any]) -> ToolFinished:
    return next(e for e in events if isinstance(e, ToolFinished))


async def test_a_streamable_http_server_gets_its_headers(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    async with http_server() as (_, url):
        server = http(url, headers={"x-test": "1", "x-tenant": "acme"})
        with anyio.fail_after(60):
            async with await opened(api, tmp_path, [server]) as fm:
                assert fm.mcp_servers()[0].transport == "http"
                responder.extend(calls(("mcp__web__slow", {"seconds": 0.1})))
                slow = finished_call([e async for e in fm.turn("ada", "slowly")])
                assert (slow.is_error, slow.content) == (False, "slept 0.1")
                # The configured headers reach the server with every call.
                responder.extend(calls(("mcp__web__headers", {})))
                seen = finished_call([e async for e in fm.turn("ada", "your headers?")])
                assert not seen.is_error
                assert seen.content.splitlines() == ["x-tenant: acme", "x-test: 1"]


async def test_an_http_server_killed_mid_call_then_restarted(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """The server's process dies during a call: that call is an error for the model (the
    turn completes); once a server answers at the URL again, calls work again."""
    api, responder = script
    pid = re.compile(r"pid (\d+)")
    async with http_server() as (first, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with anyio.fail_after(90):
            async with await opened(api, tmp_path, [http(url, timeout_s=10)]) as fm:
                responder.extend(calls(("mcp__web__echo", {"text": "a"}), ("mcp__web__crash", {})))
                events = [e async for e in fm.turn("ada", "crash it")]
                completed(events)
                before, crashed = tool_finishes(events)
                assert not before.is_error
                assert crashed.is_error
                assert "MCP server 'web' stopped during the call" in crashed.content
                await first.wait()
                # Down: the next call is an error too, not a failed turn.
                responder.extend(calls(("mcp__web__echo", {"text": "down"})))
                down = [e async for e in fm.turn("ada", "anyone there?")]
                completed(down)
                assert finished_call(down).is_error
                assert "'web' is not running" in finished_call(down).content
                # The server comes back at the same URL: the link is made again.
                async with http_server(port) as (_, again):
                    assert again == url
                    await fm.wait_mcp(lambda servers: servers[0].state == "running")
                    responder.extend(calls(("mcp__web__echo", {"text": "b"})))
                    echoed = finished_call([e async for e in fm.turn("ada", "echo again")])
                    assert not echoed.is_error
                    old, new = pid.search(before.content), pid.search(echoed.content)
                    assert old is not None
                    assert new is not None
                    assert old.group(1) != new.group(1)


async def test_an_http_server_that_hangs_times_out_and_still_serves(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    async with http_server() as (_, url):
        with anyio.fail_after(60):
            async with await opened(api, tmp_path, [http(url, timeout_s=1)]) as fm:
                responder.extend(calls(("mcp__web__hang", {}), ("mcp__web__slow", {"seconds": 0})))
                events = [e async for e in fm.turn("ada", "wait for it")]
                completed(events)
                hung, after = tool_finishes(events)
                assert hung.is_error
                assert "timed out after 1s" in hung.content
                assert (after.is_error, after.content) == (False, "slept 0.0")


async def test_an_http_call_longer_than_the_read_timeout_runs_to_its_own_timeout(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A url server's calls are read on their response's stream, under the HTTP read
    timeout (300 s): one with `timeout_s = 600` was cut at 300 s as "stopped during
    the call", and the link was dropped with every call on it. The read timeout is 1 s
    here, the calls' 20 s."""
    monkeypatch.setattr(_link, "HTTP_READ_TIMEOUT_S", 1.0)
    api, responder = script
    async with http_server() as (_, url):
        with anyio.fail_after(60):
            async with await opened(api, tmp_path, [http(url, timeout_s=20)]) as fm:
                responder.extend(
                    calls(("mcp__web__slow", {"seconds": 2}), ("mcp__web__echo", {"text": "b"}))
                )
                events = [e async for e in fm.turn("ada", "take your time")]
                completed(events)
                slow, after = tool_finishes(events)
                assert (slow.is_error, slow.content) == (False, "slept 2.0")
                assert not after.is_error, after.content  # the link was kept
                assert fm.mcp_servers()[0].state == "running"


@asynccontextmanager
async def refusing_http(status: str) -> AsyncIterator[str]:
    """An HTTP endpoint that answers every request with `status` (a reverse proxy in
    front of an MCP server, refusing a wrong token), and its URL."""

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive()
            body = b'{"detail": "no"}'
            await stream.send(
                f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        yield f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}/mcp"
        tg.cancel_scope.cancel()


async def test_an_http_servers_refusal_says_its_status(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    # The SDK turns any HTTP error status into "Server returned an error response": a
    # wrong token (401) and a broken server (500) read the same to the operator.
    api, _ = script
    async with refusing_http("401 Unauthorized") as denied, refusing_http("502 Bad Gateway") as bad:
        servers = [http(denied, name="denied"), http(bad, name="bad")]
        with anyio.fail_after(60):
            async with await opened(api, tmp_path, servers) as fm:
                errors = {s.name: s.error or "" for s in fm.mcp_servers()}
    assert errors["denied"].endswith("(it answered HTTP 401 Unauthorized)"), errors
    assert errors["bad"].endswith("(it answered HTTP 502 Bad Gateway)"), errors


async def test_a_third_party_server_from_pypi(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    time_server = {
        "name": "time",
        "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        "allowed_tools": ["get_current_time"],
        "startup_timeout_s": 30,
    }
    async with await opened(api, tmp_path, [time_server]) as fm:
        assert [n for n in fm.offered_tools() if n.startswith("mcp__")] == [
            "mcp__time__get_current_time"
        ]
        responder.extend(calls(("mcp__time__get_current_time", {"timezone": "Europe/Oslo"})))
        events = [e async for e in fm.turn("ada", "what time is it in Oslo?")]
        finished = next(e for e in events if isinstance(e, ToolFinished))
        assert not finished.is_error
        assert "Europe/Oslo" in finished.content
        assert isinstance(events[-1], TurnCompleted)


async def test_a_console_script_of_this_virtualenv_runs_without_it_on_path(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """The README's `command = ["mcp-server-time", ...]` under `.venv/bin/frontmind
    serve` with the virtualenv not activated: the script is beside this Python, not on
    PATH. It runs; a program found nowhere is named in the server's error."""
    api, _ = script
    nowhere = {"PATH": str(tmp_path / "empty")}
    servers: list[dict[str, Any]] = [
        {
            "name": "time",
            "command": ["mcp-server-time", "--local-timezone", "UTC"],
            "env": nowhere,
            "startup_timeout_s": 30,
        },
        {"name": "gone", "command": ["no-such-mcp-program"], "env": nowhere},
    ]
    assert (Path(sys.executable).parent / "mcp-server-time").exists()
    async with await opened(api, tmp_path / "data", servers) as fm:
        time_server, gone = fm.mcp_servers()
        assert time_server.state == "running", time_server.error
        assert gone.state == "down"
        assert "no program 'no-such-mcp-program' on PATH" in (gone.error or "")


async def test_an_idle_links_check_is_answered_on_every_protocol() -> None:
    """The idle check (every PING_EVERY_S) must be one the server answers: protocol
    2026-07-28 has no `ping` ("Method not found"), so pinging there lost every modern
    link at its first idle check and restarted the server."""
    time_server = {
        "name": "time",
        "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        "startup_timeout_s": 30,
    }
    seen = {}
    # A call each server answers, made after the checks: the link still serves.
    probes = {
        "t": ("echo", {"text": "x"}),
        "web": ("echo", {"text": "x"}),
        "time": ("get_current_time", {"timezone": "UTC"}),
    }
    async with http_server() as (_, url):
        for spec in mcp_servers([stdio(), http(url), time_server]):
            link = McpLink(spec, 0)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    await tg.start(link.serve)
                    for _ in range(3):
                        await link.check()
                    assert link.alive, link.reason
                    answer = await link.call(*probes[spec.name])
                    assert not answer.is_error, answer
                    seen[spec.name] = link._client.protocol_version
                    link.close()
            assert link.reason == ""
    assert seen["t"] == seen["web"] == "2026-07-28", seen


async def where_it_runs(
    script: tuple[LocalMessagesAPI, ScriptedResponder], data: Path, servers: Sequence[McpServer]
) -> dict[str, Any]:
    """The working directory and environment of server "t" of `servers`, which runs
    once Frontmind has opened (as its `environment` tool says them)."""
    api, responder = script
    async with await opened(api, data, servers) as fm:
        assert fm.mcp_servers()[0].state == "running", fm.mcp_servers()[0].error
        responder.extend(calls(("mcp__t__environment", {})))
        seen = finished_call([e async for e in fm.turn("ada", "where are you?")])
    assert not seen.is_error, seen.content
    where: dict[str, Any] = json.loads(seen.content)
    return where


def read_elsewhere(
    data: Path, monkeypatch: pytest.MonkeyPatch, entry: str, env: str = ""
) -> tuple[McpServer, ...]:
    """The servers of a config file in `data` whose one `[[mcp]]` entry, "t", is `entry`
    (with PYTHONPATH and `env` in its `env`), read from another directory: a daemon
    started elsewhere (`/` under a service manager), as the process stays."""
    (data / "frontmind.toml").write_text(
        f'[[mcp]]\nname = "t"\n{entry}env = {{PYTHONPATH = {json.dumps(str(ROOT))}{env}}}\n'
    )
    elsewhere = data.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return load_config(None, data).mcp


async def test_a_stdio_server_without_cwd_runs_in_its_config_files_directory(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no `cwd`, a server ran in the daemon's working directory (`/` under a service
    manager): one found by a relative path beside the config file started from one
    directory and not from another."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "server.py").write_text("from tests._mcp_server import main\n\nmain()\n")
    command = f"{json.dumps(sys.executable)}, {json.dumps('./server.py')}"
    servers = read_elsewhere(data, monkeypatch, f"command = [{command}]\n")
    where = await where_it_runs(script, data, servers)
    assert where["cwd"] == servers[0].cwd == str(data.resolve())


async def test_a_relative_cwd_given_in_code_is_where_the_process_was_when_it_was_made(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A relative `cwd` of an `McpServer` made in code was taken from the working
    directory each time the server started: a `chdir` in between moved it elsewhere
    (here: to a directory where it does not exist, refused at the start)."""
    (tmp_path / "servers" / "shop").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    env = {"PYTHONPATH": str(ROOT)}
    server = McpServer(name="t", command=tuple(SERVER), cwd="servers/shop", env=env)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the process moved on before Frontmind opened
    where = await where_it_runs(script, tmp_path / "data", [server])
    assert where["cwd"] == server.cwd == str(tmp_path / "servers" / "shop")


async def test_a_relative_cwd_is_the_config_files_and_the_server_gets_no_secrets(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A relative `cwd` was the daemon's own working directory's (`/` under a service
    manager): the server started elsewhere than beside its config file, or not at all.
    Its environment is the `mcp` SDK's safe minimum and its own `env`, never the
    daemon's (which holds the API key)."""
    data = tmp_path / "data"
    (data / "servers" / "shop").mkdir(parents=True)
    command = ", ".join(json.dumps(part) for part in SERVER)
    monkeypatch.setenv("FRONTMIND_TEST_SECRET", "sk-secret")
    entry = f'command = [{command}]\ncwd = "servers/shop"\n'
    servers = read_elsewhere(data, monkeypatch, entry, ', SHOP = "acme"')
    assert servers[0].cwd == str(data.resolve() / "servers" / "shop")
    where = await where_it_runs(script, data, servers)
    assert where["cwd"] == str(data.resolve() / "servers" / "shop")
    assert where["env"]["SHOP"] == "acme"
    assert "PATH" in where["env"]
    assert "FRONTMIND_TEST_SECRET" not in where["env"]
    # The SDK's minimum (POSIX), `env`, and what Python itself may set (PEP 538).
    safe = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE"}
    assert set(where["env"]) <= {*safe, "PYTHONPATH", "SHOP"}, where["env"]


# -- bad entries: one line at startup, naming the entry ------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('name = "t"\ncommand = ["x"]\nport = 1', r"\[\[mcp\]\] #1 \(t\): .*unknown field `port`$"),
        (
            'name = "t"\nurl = "http://x"\nheaders = {a = 1}',
            r"#1 \(t\): Expected `str`.*\(at headers",
        ),
        ('name = "a__b"\ncommand = ["x"]', r"#1 \(a__b\): name 'a__b' may not hold '__'"),
        ('name = "t"', r"\[\[mcp\]\] #1 \(t\): give command .* or url"),
        ('name = "a b"\ncommand = ["x"]', r"\[\[mcp\]\] #1: name 'a b' must be 1-64"),
        ('name = "t"\nurl = "ftp://x"', r"\[\[mcp\]\] #1 \(t\): url must be http"),
        ('name = "t"\ncommand = ["x"]\ntimeout_s = 0', r"timeout_s must be greater than 0"),
        ('name = "t"\ncommand = ["x"]\ncwd = "nowhere"', r"#1 \(t\): cwd '.*/nowhere' does not"),
    ],
)
def test_a_bad_mcp_entry_is_refused_naming_it(tmp_path: Path, entry: str, message: str) -> None:
    (tmp_path / "frontmind.toml").write_text(f"[[mcp]]\n{entry}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(None, tmp_path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ('{authorization = "Bearer sk-secret-1\\n"}', "the value of 'authorization' is not"),
        ('{authorization = " Bearer sk-secret-1"}', "the value of 'authorization' is not"),
        ('{authorization = "Bearer sk-secret-1é"}', "the value of 'authorization' is not"),
        ('{"x tenant" = "sk-secret-1"}', "'x tenant' is not a valid HTTP header name"),
    ],
)
def test_a_header_http_would_refuse_is_refused_at_startup_without_quoting_it(
    tmp_path: Path, headers: str, message: str
) -> None:
    # A token pasted with its line break was refused only when the server was reached,
    # by the HTTP library, whose error quoted the whole value: the operator's secret went
    # to the log at every retry, and to GET /v1/mcp.
    entry = f'[[mcp]]\nname = "t"\nurl = "http://127.0.0.1:9/mcp"\nheaders = {headers}\n'
    (tmp_path / "frontmind.toml").write_text(entry)
    with pytest.raises(ConfigError, match=r"\[\[mcp\]\] #1 \(t\): headers: ") as caught:
        load_config(None, tmp_path)
    assert message in str(caught.value)
    assert "sk-secret" not in str(caught.value)


def test_two_mcp_entries_with_one_name_are_refused(tmp_path: Path) -> None:
    entry = '[[mcp]]\nname = "t"\ncommand = ["x"]\n'
    (tmp_path / "frontmind.toml").write_text(entry + entry)
    with pytest.raises(ConfigError, match=r"\[\[mcp\]\] #2 \(t\): another \[\[mcp\]\] entry"):
        load_config(None, tmp_path)


def test_two_mcp_names_whose_tool_names_run_together_are_refused(tmp_path: Path) -> None:
    # Server a_'s tool x and server a's tool _x were both mcp__a___x: the later one in
    # the config was left out, with a warning at every start.
    entries = '[[mcp]]\nname = "a_"\ncommand = ["x"]\n[[mcp]]\nname = "a"\ncommand = ["x"]\n'
    (tmp_path / "frontmind.toml").write_text(entries)
    with pytest.raises(ConfigError, match=r"\[\[mcp\]\] #1 \(a_\): name 'a_' is another") as caught:
        load_config(None, tmp_path)
    assert "mcp__a___x would name both a_'s tool x and a's tool _x" in str(caught.value)
    (tmp_path / "frontmind.toml").write_text(entries.replace('"a"', '"b_"'))
    assert [s.name for s in load_config(None, tmp_path).mcp] == ["a_", "b_"]


async def test_library_mcp_entries_get_the_same_checks(tmp_path: Path) -> None:
    with pytest.raises(ToolDefinitionError, match=r"\[\[mcp\]\] #1 \(t\): give command"):
        async with Frontmind.open(tmp_path, config(), offline=True, mcp=[{"name": "t"}]):
            pass
    with pytest.raises(ToolDefinitionError, match=r"\[\[mcp\]\] #1 \(t\): .*unknown field `nope`"):
        async with Frontmind.open(tmp_path, config(), offline=True, mcp=[{"name": "t", "nope": 1}]):
            pass


async def test_the_daemon_serves_mcp_tools_its_status_reload_and_thinking(tmp_path: Path) -> None:
    """`frontmind serve` starts the servers, logs their stderr, answers the admin's
    status and reload, streams thinking as `thinking.delta`, and stops the servers."""
    command = ", ".join(json.dumps(part) for part in SERVER)
    (tmp_path / "frontmind.toml").write_text(
        '[model]\nthinking = "enabled"\nbudget_tokens = 1024\nmax_tokens = 4096\n'
        f'[[mcp]]\nname = "t"\ncommand = [{command}]\ncwd = {json.dumps(str(ROOT))}\n'
        "startup_timeout_s = 30\n"
    )
    async with (
        daemon(tmp_path, "--log-level", "info") as served,
        served.client() as client,
    ):
        status = (await client.get("/v1/mcp")).json()
        assert status["servers"][0]["name"] == "t"
        assert status["servers"][0]["state"] == "running"
        assert "mcp__t__echo" in status["tools"]
        reload = (await client.post("/v1/mcp/reload", json={})).json()
        assert (reload["added"], reload["message"]) == ([], "no change")
        events = await turn(client, "ada", "hello there")
        names = [name for name, _ in events]
        assert "thinking.delta" in names
        assert names.index("thinking.delta") < names.index("text.delta")
        thought = "".join(data["text"] for name, data in events if name == "thinking.delta")
        assert thought.startswith("The user wrote 2 word(s)")
        assert await served.stop() == 0
        logged = (await served.read_stderr()).decode()
    # The server's own stderr went to the daemon's log (info), under its name.
    assert "frontmind.mcp.t" in logged
    assert "test server starting" in logged
