"""Shutdown of the real daemon child (issue 13, item 6): queued turns get an error event
and a record, turns past the grace period end with a final error event, and a second
signal exits at once with the turns cancelled cleanly."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests._daemon import Daemon, daemon, sse_events, turn

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LONG = "tell me a long story " * 20


def configure(data_dir: Path, text: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "frontmind.toml").write_text(text)


async def collect(
    client: httpx2.AsyncClient,
    text: str,
    events: list[tuple[str, Any]],
    started: anyio.Event,
    on: str = "turn.started",
) -> None:
    async with client.stream("POST", "/v1/continuums/alice/turns", json={"message": text}) as r:
        assert r.status_code == 200
        if on == "headers":
            started.set()
        async for name, data in sse_events(r):
            events.append((name, data))
            if name == on:
                started.set()


async def wait_for_stderr(d: Daemon, fragment: bytes) -> None:
    seen = b""
    with anyio.fail_after(20):
        while fragment not in seen:
            seen += await d.stderr.receive()


async def records_after_restart(data_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    async with daemon(data_dir) as again, again.client() as client:
        turns = (await client.get("/v1/continuums/alice/turns")).json()["turns"]
        history = await client.get("/v1/continuums/alice/messages")
        roles = (
            [m["role"] for m in history.json()["messages"]] if history.status_code == 200 else []
        )
        assert await again.stop() == 0
    return turns, roles


async def test_a_queued_turn_at_shutdown_gets_an_error_event_and_a_record(tmp_path: Path) -> None:
    configure(tmp_path, "[offline]\ntime_to_first_token_s = 2.0\ntokens_per_second = 200\n")
    async with daemon(tmp_path) as d, d.client() as client:
        first: list[tuple[str, Any]] = []
        queued: list[tuple[str, Any]] = []
        first_running, second_queued = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, client, "first", first, first_running)
            await first_running.wait()
            tg.start_soon(collect, client, "second", queued, second_queued, "headers")
            await second_queued.wait()  # accepted (200), waiting behind the first
            d.process.send_signal(signal.SIGTERM)
        assert first[-1][0] == "turn.completed", "the running turn finishes within the grace"
        assert [name for name, _ in queued] == ["turn.started", "error"]
        error = queued[-1][1]
        assert error["type"] == "shutting_down"
        assert error["turn_id"] == queued[0][1]["turn_id"]
        with anyio.fail_after(30):
            assert await d.process.wait() == 0
    turns, roles = await records_after_restart(tmp_path)
    assert [(t["status"], t["user_text"]) for t in turns] == [
        ("completed", "first"),
        ("cancelled", "second"),
    ]
    assert turns[1]["turn_id"] == error["turn_id"]
    assert "shutting_down" in turns[1]["error"]
    assert roles == ["user", "assistant"], "the queued turn added nothing to the history"


async def test_a_turn_queued_behind_a_running_one_ends_at_once_with_its_id_and_record(
    tmp_path: Path,
) -> None:
    """Queued behind its continuum's running turn, a turn ends at SIGTERM itself, not
    when the running one ends: its error carries its id, and its record says so."""
    configure(
        tmp_path,
        "[server]\ngrace_seconds = 2\n[offline]\ntime_to_first_token_s = 0.1\n"
        "tokens_per_second = 4\n",
    )
    async with daemon(tmp_path) as d, d.client() as client:
        first: list[tuple[str, Any]] = []
        queued: list[tuple[str, Any]] = []
        first_when_queued_ended: list[tuple[str, Any]] = []
        streaming, accepted = anyio.Event(), anyio.Event()

        async def second() -> None:
            body = {"message": "second"}
            async with client.stream("POST", "/v1/continuums/alice/turns", json=body) as r:
                assert r.status_code == 200
                accepted.set()
                async for name, data in sse_events(r):
                    queued.append((name, data))
            first_when_queued_ended.extend(first)

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, client, LONG, first, streaming, "text.delta")
            await streaming.wait()
            tg.start_soon(second)
            await accepted.wait()
            d.process.send_signal(signal.SIGTERM)
        assert [name for name, _ in queued] == ["turn.started", "error"]
        error = queued[-1][1]
        assert error["type"] == "shutting_down"
        assert error["turn_id"] == queued[0][1]["turn_id"]
        # The running turn was still streaming then: it ends at the grace, later.
        assert first_when_queued_ended[-1][0] == "text.delta"
        assert first[-1][0] == "error"
        with anyio.fail_after(30):
            assert await d.process.wait() == 0
    turns, roles = await records_after_restart(tmp_path)
    assert sorted((t["status"], t["user_text"]) for t in turns) == [
        ("cancelled", "second"),
        ("cancelled", LONG),
    ]
    assert roles == []


async def test_a_turn_past_the_grace_period_ends_with_a_final_error_event(tmp_path: Path) -> None:
    configure(
        tmp_path,
        "[server]\ngrace_seconds = 1\n[offline]\ntime_to_first_token_s = 0.1\n"
        "tokens_per_second = 4\n",
    )
    async with daemon(tmp_path) as d, d.client() as client:
        events: list[tuple[str, Any]] = []
        streaming = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, client, LONG, events, streaming, "text.delta")
            await streaming.wait()
            d.process.send_signal(signal.SIGTERM)
        name, data = events[-1]
        assert name == "error", events[-3:]
        assert data["type"] == "shutting_down"
        assert data["turn_id"] == events[0][1]["turn_id"]
        with anyio.fail_after(30):
            assert await d.process.wait() == 0
    turns, roles = await records_after_restart(tmp_path)
    assert [t["status"] for t in turns] == ["cancelled"]
    assert roles == []


async def test_a_second_signal_exits_at_once_with_turns_cancelled_cleanly(tmp_path: Path) -> None:
    configure(
        tmp_path,
        "[server]\ngrace_seconds = 600\n[offline]\ntime_to_first_token_s = 0.1\n"
        "tokens_per_second = 4\n",
    )
    async with daemon(tmp_path) as d, d.client() as client:
        events: list[tuple[str, Any]] = []
        streaming = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, client, LONG, events, streaming, "text.delta")
            await streaming.wait()
            d.process.send_signal(signal.SIGTERM)
            await wait_for_stderr(d, b"shutting down")
            d.process.send_signal(signal.SIGINT)
        assert events[-1][0] == "error"
        assert events[-1][1]["type"] == "shutting_down"
        with anyio.fail_after(15):  # not the 600 s grace
            assert await d.process.wait() == 0
    turns, roles = await records_after_restart(tmp_path)
    assert [t["status"] for t in turns] == ["cancelled"]
    assert roles == []


async def test_a_hangup_stops_the_daemon_gracefully(tmp_path: Path) -> None:
    """SIGHUP (the terminal of a `frontmind serve` closed) killed the daemon at once:
    its running turn was left recorded as interrupted. It is a graceful stop now."""
    configure(tmp_path, "[offline]\ntime_to_first_token_s = 1.0\ntokens_per_second = 200\n")
    async with daemon(tmp_path) as d, d.client() as client:
        events: list[tuple[str, Any]] = []
        running = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, client, "first", events, running)
            await running.wait()
            d.process.send_signal(signal.SIGHUP)
        assert events[-1][0] == "turn.completed", "the running turn finishes within the grace"
        with anyio.fail_after(30):
            assert await d.process.wait() == 0
    turns, roles = await records_after_restart(tmp_path)
    assert [(t["status"], t["user_text"]) for t in turns] == [("completed", "first")]
    assert roles == ["user", "assistant"]


async def test_a_sync_tool_that_never_returns_does_not_keep_the_daemon_from_exiting(
    tmp_path: Path,
) -> None:
    """A sync tool past its timeout runs on in its thread, and a hung one never ends: that
    thread was one the interpreter joins at exit, so after SIGTERM the daemon shut down
    its turns and store and then hung for as long as the tool did (for ever), where its
    operator was told it exits 0."""
    configure(tmp_path, '[[tool]]\nuse = "stuck_tools:stuck"\ntimeout_s = 1\n')
    (tmp_path / "stuck_tools.py").write_text(
        "import threading\n\n\n"
        "def stuck(what: str) -> str:\n"
        '    """Waits for something that never happens."""\n'
        "    threading.Event().wait()\n"
        '    return "never"\n'
    )
    async with daemon(tmp_path) as d, d.client() as client:
        events = await turn(client, "alice", "use the stuck tool with what x")
        finished = [data for name, data in events if name == "tool.finished"]
        assert finished, events
        assert finished[0]["is_error"], finished
        assert events[-1][0] == "turn.completed"
        d.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            assert await d.process.wait() == 0
