"""Every `frontmind` command, run as a user would run it."""

from __future__ import annotations

import io
import signal
from pathlib import Path

import anthropic
import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from frontmind.cli._demo import DEMO_SCRIPT, run_demo
from tests._daemon import COMMAND, ROOT, child_env, daemon, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize("command", ["serve", "demo", "chat", "inspect", "stats", "local-api"])
async def test_every_command_has_help(command: str) -> None:
    code, out, err = await run_cli(command, "--help")
    assert code == 0, err
    assert f"usage: frontmind {command}" in out


async def test_demo_runs_both_layouts_and_compares_them() -> None:
    code, out, err = await run_cli("demo")
    assert code == 0, err
    assert "NOTIFICATION CENTER LAYOUT" in out
    assert "LEGACY LAYOUT" in out
    assert out.count("  1 Mon 08:55") == 2
    assert out.count(" 21 Tue 09:37") == 2
    assert "share of input read from cache" in out
    assert "relative input cost" in out
    assert "error:" not in out


async def test_demo_shows_the_notification_center_saving(tmp_path: Path) -> None:
    buffer = io.StringIO()
    nc, legacy = await run_demo(tmp_path, out=buffer, script=DEMO_SCRIPT[:8])
    assert nc.errors == legacy.errors == 0
    assert nc.turns == 8
    assert nc.cached_share > legacy.cached_share
    assert nc.input_cost < legacy.input_cost
    assert (tmp_path / "notification" / "frontmind.db").exists()


async def test_chat_in_process_then_inspect_and_stats(tmp_path: Path) -> None:
    data = str(tmp_path)
    code, out, err = await run_cli(
        "chat",
        "--offline",
        "--data-dir",
        data,
        "--continuum",
        "me",
        stdin=b"hello\nremind me to stretch in 5 minutes\n/quit\n",
    )
    assert code == 0, err
    assert "You said: \u201chello\u201d" in out
    assert "[tool add_reminder" in out
    assert "cache read" in out
    code, out, err = await run_cli(
        "inspect", "--data-dir", data, "--continuum", "me", "--message", "what's next?"
    )
    assert code == 0, err
    assert "NOTIFICATION CENTER: datetime_section" in out
    assert "active_reminders" in out
    assert "◆ breakpoint" in out
    assert "delimiter" in out
    assert "ESTIMATE  cached prefix" in out
    code, out, err = await run_cli("stats", "--data-dir", data, "--continuum", "me")
    assert code == 0, err
    assert "turns           2  (completed 2)" in out
    assert "cache hit share" in out
    assert "compose ms" in out


async def test_chat_against_a_running_daemon(tmp_path: Path) -> None:
    async with daemon(tmp_path / "d") as d:
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--continuum", "remote", stdin=b"hi from the terminal\n"
        )
        assert code == 0, err
        assert "hi from the terminal" in out
        async with d.client() as client:
            history = (await client.get("/v1/continuums/remote/messages")).json()["messages"]
        assert len(history) == 2
        assert await d.stop() == 0


async def test_inspect_and_stats_ask_a_running_daemon(tmp_path: Path) -> None:
    data = tmp_path / "d"
    async with daemon(data, "--token", "admin") as d, d.client() as http:
        auth = {"authorization": "Bearer admin"}
        for message in ("hello", "remind me to stretch in 5 minutes"):
            async with http.stream(
                "POST", "/v1/continuums/me/turns", json={"message": message}, headers=auth
            ) as response:
                await response.aread()
        # The data directory is the daemon's: read from it, inspect says where to ask.
        code, _, err = await run_cli("inspect", "--data-dir", str(data), "--continuum", "me")
        assert code == 2
        assert err.strip().endswith(
            "is in use by another Frontmind process "
            f"(pid {d.process.pid}); to ask the daemon that runs on it, pass --url (and --token)"
        )
        remote = ("--url", d.url, "--token", "admin", "--continuum", "me")
        code, out, err = await run_cli("inspect", *remote, "--message", "what's next?")
        assert code == 0, err
        assert "NOTIFICATION CENTER: datetime_section" in out
        assert "stretch" in out  # the reminder the daemon's turn added
        assert "◆ breakpoint" in out
        code, out, err = await run_cli("stats", *remote)
        assert code == 0, err
        assert "turns           2  (completed 2)" in out
        assert "cache hit share" in out
        code, out, err = await run_cli("stats", "--url", d.url, "--token", "admin")
        assert code == 0, err
        assert "turns           2  (completed 2)" in out  # every continuum: the one
        code, _, err = await run_cli("stats", "--url", d.url)
        assert code == 2
        assert "unauthorized" in err or "bearer token" in err
        assert await d.stop() == 0


async def test_user_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    code, _, err = await run_cli("stats", "--data-dir", str(tmp_path / "nothing"))
    assert code == 2
    assert err.startswith("frontmind: error: no Frontmind database")
    (tmp_path / "frontmind.toml").write_text("[composer]\ndeadline_ms = 'soon'\n")
    code, _, err = await run_cli("inspect", "--data-dir", str(tmp_path))
    assert code == 2
    assert "$.composer.deadline_ms" in err
    assert "Traceback" not in err
    code, _, err = await run_cli("chat", "--url", "http://127.0.0.1:9", stdin=b"hi\n")
    assert code == 2
    assert "no Frontmind daemon answers" in err
    code, _, err = await run_cli("chat", "--data-dir", str(tmp_path / "k"), stdin=b"hi\n")
    assert code == 2
    assert "ANTHROPIC_API_KEY" in err
    code, _, err = await run_cli("frobnicate")
    assert code == 2
    assert "invalid choice" in err


async def test_local_api_serves_the_sdk_and_stops_on_sigterm() -> None:
    process = await anyio.open_process([*COMMAND, "local-api"], cwd=ROOT, env=child_env())
    assert process.stdout is not None
    async with process:
        with anyio.fail_after(30):
            url = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 200)
        async with anthropic.AsyncAnthropic(api_key="k", base_url=url.decode()) as client:
            message = await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=50,
                messages=[{"role": "user", "content": "ping"}],
            )
        assert message.content[0].type == "text"
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await process.wait() == 0
