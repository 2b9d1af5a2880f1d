"""The programs in examples/ run as a user runs them (offline, as child processes)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from frontmind import Client, Frontmind
from tests._daemon import ROOT, child_env, daemon, reap, sse_events
from tests._postgres import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXAMPLES = ROOT / "examples"


async def run_example(name: str, *args: str, **env: str) -> tuple[int, str, str]:
    result = await anyio.run_process(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=child_env(**env),
        check=False,
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def test_the_readme_links_every_example() -> None:
    readme = (ROOT / "README.md").read_text()
    for example in sorted(EXAMPLES.glob("*.py")):
        assert f"(examples/{example.name})" in readme, example.name


async def test_web_app_streams_turns_to_the_browser(tmp_path: Path) -> None:
    command = [sys.executable, str(EXAMPLES / "web_app.py")]
    env = child_env(PORT="0", FRONTMIND_DATA_DIR=str(tmp_path))
    process = await anyio.open_process(command, cwd=ROOT, env=env)
    assert process.stderr is not None
    try:
        stderr = BufferedByteReceiveStream(process.stderr)
        with anyio.fail_after(60):
            line = b""
            while b"Uvicorn running on " not in line:
                line = await stderr.receive_until(b"\n", 10_000)
        url = line.decode().split("Uvicorn running on ")[1].split()[0]
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            page = await http.get("/")
            assert page.status_code == 200
            assert 'fetch("/chat"' in page.text
            turns: list[list[tuple[str, Any]]] = []
            for message in ("Remind me to stretch in 5 minutes", "What is on my list?"):
                async with http.stream("POST", "/chat", json={"message": message}) as response:
                    assert response.headers["content-type"].startswith("text/event-stream")
                    turns.append([event async for event in sse_events(response)])
            refused = await http.post("/chat", json={"message": "  "})
            assert refused.status_code == 400
            assert "empty" in refused.json()["error"]
            # Whatever the body, a clear 400 (never a 500, nor a turn of "None").
            for bad in (
                b"not json",
                b"[1, 2]",
                b'{"message": null}',
                b'{"user": "a b", "message": "hi"}',
                b'{"user": null, "message": "hi"}',  # no turn of a user "None"
                b'{"user": 5, "message": "hi"}',
            ):
                answer = await http.post("/chat", content=bad)
                assert answer.status_code == 400, (bad, answer.text)
                assert answer.json()["error"]
        first, second = turns
        assert ("tool", {"name": "add_reminder"}) in first
        assert "".join(data["text"] for name, data in first if name == "text")
        assert first[-1][0] == second[-1][0] == "done"
        # One Frontmind served both requests: the second turn read the first from cache.
        assert second[-1][1]["cache_read"] > 0
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            # uvicorn shuts down gracefully, then re-raises the signal it caught.
            assert await process.wait() in (0, -signal.SIGTERM)
            rest = b""
            while b"Application shutdown complete." not in rest:
                rest += await stderr.receive()
    finally:
        await reap(process)
    # Closed cleanly by the lifespan: the data directory opens again, turns and all.
    async with Frontmind.open(tmp_path, offline=True) as fm:
        assert len(await fm.turns("web")) == 2
        assert [r.text for r in await fm.reminders()] == ["stretch"]


async def test_assistant_delivers_due_reminders_through_the_client(tmp_path: Path) -> None:
    async with daemon(tmp_path) as d:
        async with Client(d.url) as c:
            later = await c.add_reminder("call the plumber", None)
        code, out, err = await run_example(
            "assistant.py", d.url, "Remind me to stretch in 0 minutes", "--once"
        )
        assert code == 0, err
        assert "[add_reminder]" in out
        assert "⏰ stretch" in out
        assert "plumber" not in out  # not due: it has no time
        async with Client(d.url) as c:
            assert [r.id for r in await c.reminders()] == [later.id]
            done = [r for r in await c.reminders(include_completed=True) if r.completed_at]
            assert [r.text for r in done] == ["stretch"]
        # Run again: nothing is delivered twice.
        code, out, err = await run_example("assistant.py", d.url, "--once")
        assert code == 0, err
        assert "⏰" not in out
        assert await d.stop() == 0


async def test_assistant_says_so_when_no_daemon_answers() -> None:
    code, _, err = await run_example("assistant.py", "http://127.0.0.1:9", "--once")
    assert code == 1
    assert err.startswith("assistant: no Frontmind daemon answers at http://127.0.0.1:9")


async def test_a_user_tool_and_an_mcp_servers_tool_run_offline() -> None:
    code, out, err = await run_example("tools_and_mcp.py")
    assert code == 0, err
    assert '[stock] {"sku":"42"}\n  -> {"count":7}' in out
    assert '[mcp__inventory__price] {"sku":"42"}\n  -> sku 42: 19.50 EUR' in out


async def test_multi_user_service_on_postgresql(pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    code, out, err = await run_example("multi_user_postgres.py", FRONTMIND_DATABASE_URL=url)
    assert code == 0, err
    assert "alice's reminders: ['water the tomatoes']" in out
    assert "bob's reminders: ['check the hives']" in out
    code, _, err = await run_example("multi_user_postgres.py")
    assert code == 1
    assert "set FRONTMIND_DATABASE_URL" in err
