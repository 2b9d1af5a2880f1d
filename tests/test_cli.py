"""Every `frontmind` command, run as a user would run it."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import sys
from pathlib import Path

import anthropic
import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import storage
from frontmind import Frontmind
from frontmind._exceptions import EdgeError
from frontmind.cli._demo import DEMO_SCRIPT, run_demo
from frontmind.cli._main import DEFAULT_USER
from tests._daemon import COMMAND, ROOT, child_env, daemon, run_cli
from tests._factories import turn as stored_turn

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize("command", ["serve", "demo", "chat", "inspect", "stats", "local-api"])
async def test_every_command_has_help(command: str) -> None:
    code, out, err = await run_cli(command, "--help")
    assert code == 0, err
    assert f"usage: frontmind {command}" in out


# Runs one command in a fresh interpreter, then writes its exit code and every module
# loaded by then to the file named first: what the command cost to start.
_LOADED_BY = """
import json, sys
out, argv = sys.argv[1], sys.argv[2:]
from frontmind.cli import main
code = 0
try:
    main(argv)
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""
_SDK_AND_SERVER = {"anthropic", "starlette", "uvicorn"}
_PROJECT = {"actors", "storage", "runtime"}


async def _loaded_by(tmp_path: Path, *argv: str, stdin: bytes = b"") -> tuple[int, set[str]]:
    out = tmp_path / "loaded.json"
    result = await anyio.run_process(
        [sys.executable, "-c", _LOADED_BY, str(out), *argv],
        input=stdin,
        cwd=ROOT,
        env=child_env(),
        check=False,
    )
    assert out.exists(), result.stderr.decode()
    found = json.loads(out.read_text())
    return found["code"], set(found["modules"])


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


async def test_quick_commands_load_neither_the_sdk_nor_the_server(tmp_path: Path) -> None:
    """`import anthropic` alone costs seconds of CPU: `--version` and `--help` load
    nothing of the project's layers; `users add`, `users list` and `stats` load the
    store (and the actors' types) but never the SDK or the HTTP server."""
    data = str(tmp_path / "data")
    quick: list[tuple[str, ...]] = [
        ("--version",),
        ("--help",),
        ("users", "--help"),
        ("stats", "--help"),
    ]
    for argv in quick:
        code, modules = await _loaded_by(tmp_path, *argv)
        assert code == 0, argv
        assert not _tops(modules) & (_SDK_AND_SERVER | _PROJECT | {"anyio", "msgspec"}), argv
        assert not {m for m in modules if m.startswith("frontmind.server")}, argv
    # A daemon's config offering a server tool (checked against the SDK when it serves):
    # the commands that open the store alone do not check it, so do not import the SDK.
    tooled = tmp_path / "tooled"
    tooled.mkdir()
    (tooled / "frontmind.toml").write_text(
        '[[server_tool]]\ntype = "web_search_20250305"\nname = "web_search"\n'
    )
    runs: list[tuple[tuple[str, ...], int]] = [
        (("users", "add", "ada", "--data-dir", data), 0),
        (("users", "list", "--data-dir", data), 0),
        (("stats", "--data-dir", data), 0),
        (("stats", "--url", "http://127.0.0.1:9"), 2),  # no daemon: the remote path's imports
        (("users", "add", "ada", "--data-dir", str(tooled)), 0),
        (("users", "list", "--data-dir", str(tooled)), 0),
        (("stats", "--data-dir", str(tooled)), 0),
    ]
    for argv, status in runs:
        code, modules = await _loaded_by(tmp_path, *argv)
        assert code == status, argv
        assert "storage" in modules, argv  # the command did run
        assert not _tops(modules) & _SDK_AND_SERVER, (argv, _tops(modules) & _SDK_AND_SERVER)
        assert not {m for m in modules if m.startswith("frontmind.server")}, argv
    # A command that calls the model does load the SDK: the check above can fail.
    code, modules = await _loaded_by(
        tmp_path, "chat", "--offline", "--data-dir", data, stdin=b"/quit\n"
    )
    assert code == 0
    assert "anthropic" in modules


def test_the_default_user_the_help_shows_is_storage_s() -> None:
    assert DEFAULT_USER == storage.DEFAULT_USER


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
    # The reply after the own tool's result is on the model's line, not under it.
    assert '  model: Tool done: {"count":7}' in out


async def test_demo_shows_the_notification_center_saving(tmp_path: Path) -> None:
    buffer = io.StringIO()
    nc, legacy = await run_demo(tmp_path, out=buffer, script=DEMO_SCRIPT[:8])
    assert nc.errors == legacy.errors == 0
    assert nc.turns == 8
    assert nc.cached_share > legacy.cached_share
    assert nc.input_cost < legacy.input_cost
    assert (tmp_path / "notification" / "frontmind.db").exists()
    # Again in the same folder, the script went on from the first run's conversation
    # (a 16-turn one, under a table of 8) and its numbers were not the demo's.
    again = io.StringIO()
    with pytest.raises(EdgeError, match="holds an earlier demo run"):
        await run_demo(tmp_path, out=again, script=DEMO_SCRIPT[:8])
    assert again.getvalue() == ""


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
    assert "[tool add_reminder" in err  # a pipe's stdout is the replies; the rest goes aside
    assert "[tool" not in out
    assert "cache read" in err
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


async def test_stats_prices_turns_as_the_config_does(tmp_path: Path) -> None:
    """`stats` prices the turns with the config's [[models]] rows laid over the model
    data, as the daemon does, not with the shipped prices alone."""
    data = str(tmp_path)
    code, _, err = await run_cli(
        "chat", "--offline", "--data-dir", data, "--continuum", "me", stdin=b"hello\n/quit\n"
    )
    assert code == 0, err

    async def cost_line() -> str:
        code, out, err = await run_cli("stats", "--data-dir", data)
        assert code == 0, err
        (line,) = [line for line in out.splitlines() if line.startswith("cost ")]
        return line

    shipped = await cost_line()
    (tmp_path / "frontmind.toml").write_text(
        '[[models]]\nname = "claude-sonnet-4-6"\ninput_price = 1000.0\noutput_price = 5000.0\n'
    )
    priced = await cost_line()
    dollars = [float(x) for x in re.findall(r"\$([0-9.]+)", shipped + priced)]
    assert len(dollars) == 4
    assert dollars[2] > 100 * dollars[0]  # 1000 / 3 dollars a million input tokens
    assert dollars[3] > 100 * dollars[1]


async def test_stats_counts_every_turn_past_a_hundred_thousand(tmp_path: Path) -> None:
    """`stats` read the latest 100,000 turn records: a user past that (a busy month of
    one bot) was shown the figures of the latest 100,000, as if they were all."""
    async with await storage.SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        await store.commit_turn(DEFAULT_USER, stored_turn("busy", "t0", at=1e6))
    with sqlite3.connect(tmp_path / "frontmind.db") as db:  # 100,000 more, in one statement
        db.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)"
            " INSERT INTO turns (id, owner, continuum_id, status, started_at, record)"
            " SELECT 't' || i, owner, continuum_id, status, started_at + i, record"
            " FROM turns, n WHERE id = 't0'"
        )
    code, out, err = await run_cli("stats", "--data-dir", str(tmp_path))
    assert code == 0, err
    assert out.startswith("turns           100001  (completed 100001)\n"), out


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
        # Through a pipe, a message whose turn fails (here: over 100,000 characters) is
        # an error on stderr and the rest go on; the exit status says one failed (it was
        # 0, so a script could not tell).
        long = b"x" * 100_001
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--continuum", "remote", stdin=b"one\n" + long + b"\ntwo\n"
        )
        assert code == 1, err
        assert "one" in out
        assert "two" in out
        assert "message is 100001 characters; the limit is 100000" in err
        assert err.endswith("frontmind: 1 message failed\n"), err
        assert await d.stop() == 0


async def test_chat_with_a_token_the_daemon_refuses_stops_at_once(tmp_path: Path) -> None:
    """A wrong --token is one line and exit 2 before any message is read, as an
    unreachable daemon is: not an error per line of a pipe, and exit 0."""
    async with daemon(tmp_path / "d", "--token", "admin") as d:
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--token", "wrong", stdin=b"one\ntwo\n"
        )
        assert code == 2, err
        assert err == "frontmind: error: unauthorized (HTTP 401): missing or wrong bearer token\n"
        assert out == ""
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--token", "admin", "--continuum", "me", stdin=b"one\n"
        )
        assert code == 0, err
        assert "one" in out
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
    # A daemon answers for its token's user: --user beside --url would be ignored.
    for command in ("stats", "inspect"):
        code, _, err = await run_cli(command, "--url", "http://127.0.0.1:9", "--user", "alice")
        assert code == 2
        assert "--user is for the data dir" in err
        code, _, err = await run_cli(command, "--data-dir", str(tmp_path), "--token", "t")
        assert code == 2
        assert "--token goes with --url" in err
    # And a chat with a daemon takes neither --offline nor --config (both were ignored).
    url = ("--url", "http://127.0.0.1:9")
    for extra, said in (
        (("--offline",), "--offline is for"),
        (("--config", "x.toml"), "--config is for"),
    ):
        code, _, err = await run_cli("chat", *url, *extra, stdin=b"hi\n")
        assert code == 2
        assert said in err


async def test_a_port_out_of_range_is_refused_naming_where_it_came_from(
    tmp_path: Path,
) -> None:
    """A port from the config file was blamed on --port, and only once the store had
    been opened and the actors started; now it is named before anything runs."""
    (tmp_path / "frontmind.toml").write_text("[server]\nport = 99999\n")
    code, out, err = await run_cli("serve", "--offline", "--data-dir", str(tmp_path))
    assert code == 2, err
    assert err == "frontmind: error: server.port: must be 0 (any free port) to 65535, got 99999\n"
    assert out == ""
    assert not (tmp_path / "frontmind.db").exists()
    code, _, err = await run_cli("serve", "--offline", "--port", "-1", "--data-dir", str(tmp_path))
    assert code == 2, err
    assert err == "frontmind: error: --port: must be 0 (any free port) to 65535, got -1\n"
    # A host that names nothing was blamed on --host, without its name, once the store
    # had been opened and the actors started.
    (tmp_path / "frontmind.toml").write_text('[server]\nhost = "no-such-host.invalid"\n')
    code, out, err = await run_cli("serve", "--offline", "--data-dir", str(tmp_path))
    assert code == 2, err
    assert err.startswith("frontmind: error: server.host: 'no-such-host.invalid' cannot be")
    assert not (tmp_path / "frontmind.db").exists()


async def test_migrate_refuses_a_target_it_cannot_or_must_not_copy_to(tmp_path: Path) -> None:
    """`--to mysql://…` (or SQLAlchemy's `postgresql+asyncpg://…`) was taken for a data
    directory: a folder named after the scheme was made in the working directory, the
    store copied into SQLite there, and the run ended "verified"."""
    source = tmp_path / "source"
    async with Frontmind.open(source, offline=True) as fm:
        await fm.remember("kept")
    work = tmp_path / "work"  # the folder it ran in: where the scheme's folder went
    work.mkdir()

    async def migrate_to(url: str) -> tuple[int, bytes, str]:
        """`migrate --to url` run in `work`: its exit code, stdout and stderr."""
        result = await anyio.run_process(
            [*COMMAND, "migrate", "--to", url, "--data-dir", str(source)],
            cwd=work,
            env=child_env(),
            check=False,
        )
        return result.returncode, result.stdout, result.stderr.decode()

    for url in ("mysql://db/frontmind", "postgresql+asyncpg://u@db/frontmind"):
        code, printed, err = await migrate_to(url)
        assert code == 2, err
        scheme = url.split("://")[0]
        assert err.startswith(f"frontmind: error: --to: {scheme!r} is not a supported"), err
        assert printed == b""
    assert list(work.iterdir()) == []
    # A database's address without its scheme (`user:password@host/db`, a libpq
    # `host=… password=…`) was a data directory named after the password, "verified";
    # and the URL, password and all, was echoed by the commands that open it.
    for url in ("fm:hunter2@db.internal/frontmind", "host=db.internal password=hunter2"):
        code, _, err = await migrate_to(url)
        assert code == 2, err
        assert err.startswith("frontmind: error: --to: a database URL without its scheme"), err
        assert "hunter2" not in err
    code, out, err = await run_cli(
        "users", "list", "--data-dir", str(source), FRONTMIND_DATABASE_URL=url
    )
    assert code == 2, err
    assert "not a supported database" in err
    assert "hunter2" not in err + out
    assert list(work.iterdir()) == []
    # Its own store, as a data dir ("in use by another process": itself) or as its file
    # (copied onto itself, "verified").
    for own in (source, source / "frontmind.db"):
        code, out, err = await run_cli("migrate", "--to", str(own), "--data-dir", str(source))
        assert code == 2, err
        assert err == (
            f"frontmind: error: --to {own}: that is the store being migrated; name another\n"
        )
        assert out == ""


async def test_commands_that_read_a_store_refuse_a_data_dir_without_one(
    tmp_path: Path,
) -> None:
    """A mistyped --data-dir is named, not opened as a new, empty store: a backup, an
    export or a migration of it would copy nothing and exit 0, as if it had worked."""
    missing = tmp_path / "typo"
    target = tmp_path / "copy"
    for argv in (
        ("backup", str(tmp_path / "b.db")),
        ("export",),
        ("migrate", "--to", str(target)),
        ("users", "rotate", "alice"),
        ("users", "delete", "alice"),
        ("stats",),
        ("users", "list"),
        ("inspect",),
    ):
        code, out, err = await run_cli(*argv, "--data-dir", str(missing))
        assert code == 2, (argv, err)
        assert err == f"frontmind: error: no Frontmind database in {missing}\n", argv
        assert out == ""
    assert not missing.exists()
    assert not (tmp_path / "b.db").exists()
    assert not target.exists()
    # Importing is how a store is made: it still makes one where there is none.
    export = tmp_path / "empty.jsonl"
    export.write_text(json.dumps({"format": 2, "kind": "header", "schema": 11, "user": None}))
    code, _, err = await run_cli("import", str(export), "--data-dir", str(missing))
    assert code == 0, err
    assert (missing / "frontmind.db").exists()


async def test_export_of_no_such_user_and_migrate_onto_another_file_are_refused(
    tmp_path: Path,
) -> None:
    """A mistyped user exported a header and nothing, exit 0; `migrate --to` a file
    that is not a database made it one, its content lost. Both are refused, named."""
    data = str(tmp_path / "data")
    code, _, err = await run_cli("users", "add", "alice", "--data-dir", data)
    assert code == 0, err
    code, out, err = await run_cli("export", "--user", "alcie", "--data-dir", data)
    assert (code, out, err) == (2, "", "frontmind: error: no user named 'alcie'\n")
    for user in ("alice", "default"):
        code, out, err = await run_cli("export", "--user", user, "--data-dir", data)
        assert code == 0, err
        assert f'"user":"{user}"' in out.splitlines()[0]
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, out, err = await run_cli("migrate", "--to", str(notes), "--data-dir", data)
    assert code == 2
    assert err == f"frontmind: error: --to {notes}: the file exists and is no SQLite database\n"
    assert notes.read_text() == "my notes\n"


async def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`frontmind export | head`, `frontmind stats | head`: once the reader has gone,
    the command stops as a shell tool does on SIGPIPE (exit 141), with no traceback."""
    data = str(tmp_path / "data")
    code, _, err = await run_cli("users", "add", "alice", "--data-dir", data)
    assert code == 0, err
    for argv in (("export",), ("users", "list"), ("stats",)):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first byte: every write fails
        try:
            result = await anyio.run_process(
                [*COMMAND, *argv, "--data-dir", data],
                stdout=write,
                cwd=ROOT,
                env=child_env(),
                check=False,
            )
        finally:
            os.close(write)
        assert result.returncode == 128 + signal.SIGPIPE, (argv, result.stderr.decode())
        assert result.stderr == b"", argv


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


async def test_the_client_commands_take_the_token_from_the_environment(tmp_path: Path) -> None:
    """`chat`, `inspect` and `stats --url` took the token only as `--token`: a command
    line every local account reads in `ps` for as long as a chat runs. FRONTMIND_TOKEN
    is taken instead, as `serve` takes it; `--token` still wins."""
    async with daemon(tmp_path / "d", "--token", "admin") as d:
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--continuum", "env", stdin=b"one\n", FRONTMIND_TOKEN="admin"
        )
        assert code == 0, err
        assert "one" in out
        remote = ("--url", d.url, "--continuum", "env")
        code, out, err = await run_cli("inspect", *remote, FRONTMIND_TOKEN="admin")
        assert code == 0, err
        code, out, err = await run_cli("stats", *remote, FRONTMIND_TOKEN="admin")
        assert code == 0, err
        code, _, err = await run_cli("stats", *remote, "--token", "wrong", FRONTMIND_TOKEN="admin")
        assert code == 2
        assert "401" in err
        assert await d.stop() == 0


async def test_a_data_dir_starting_with_a_tilde_is_in_the_home_directory(tmp_path: Path) -> None:
    """No shell expands `~` in a service's environment (systemd's `Environment=`) or
    after `--data-dir=`: the store went to a directory named `~` in the working one."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for args, env in (
        (["users", "add", "ada"], {"FRONTMIND_DATA_DIR": "~/by-env"}),
        (["users", "add", "ada", "--data-dir=~/by-flag"], {}),
    ):
        result = await anyio.run_process(
            [*COMMAND, *args], cwd=work, env=child_env(HOME=str(home), **env), check=False
        )
        assert result.returncode == 0, result.stderr.decode()
    assert (home / "by-env" / "frontmind.db").is_file()
    assert (home / "by-flag" / "frontmind.db").is_file()
    assert list(work.iterdir()) == []  # no `~` folder where it ran
