"""`frontmind chat` on a real pseudo-terminal.

The chat runs as a child process on a pty (pexpect); its output goes through a VT100
emulator (pyte), which also answers the cursor-position requests a terminal answers, so
the assertions are on the screen a user would see. Every wait is for output to appear,
never a sleep."""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import anyio.abc
import pexpect
import pyte
import pytest

from frontmind import TextDelta, ToolFinished, ToolStarted
from frontmind.cli._chat import HISTORY_FILE, _Out, _show
from frontmind.localapi import (
    LocalMessagesAPI,
    MidStreamError,
    Reply,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
)
from storage import DEFAULT_USER, SQLiteStorage, ToolResultBlock
from tests._daemon import COMMAND, ROOT, child_env, daemon, run_cli
from tests._factories import turn as stored_turn
from tests._http import read_request, tiny_server

pytestmark = pytest.mark.slow

WAIT_S = 60.0  # an upper bound for a loaded machine, never a pause
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
ENTER, ALT_ENTER, CTRL_C, CTRL_D, UP = "\r", "\x1b\r", "\x03", "\x04", "\x1b[A"
# An SGR sequence that sets a colour (30-38, 40-48, 90-97, 100-107): NO_COLOR forbids them.
_SGR = re.compile(rb"\x1b\[([0-9;]*)m")


def _colours(raw: bytes) -> list[bytes]:
    found = []
    for match in _SGR.finditer(raw):
        for param in match.group(1).split(b";"):
            if param and (30 <= int(param) <= 48 or 90 <= int(param) <= 107):
                found.append(match.group(0))
    return found


class _Screen(pyte.HistoryScreen):
    """A screen that keeps what scrolled off, and answers the terminal's queries (the
    cursor position) to the child as a terminal would."""

    def __init__(self, columns: int, lines: int, child: pexpect.spawn) -> None:
        super().__init__(columns, lines, history=5000)
        self._child = child

    def write_process_input(self, data: str) -> None:
        self._child.send(data)


class Terminal:
    def __init__(self, child: pexpect.spawn, columns: int, lines: int) -> None:
        self.child = child
        self.screen = _Screen(columns, lines, child)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""

    def text(self) -> str:
        """Everything on the screen and above it, one line per row."""
        columns = self.screen.columns
        above = ["".join(row[x].data for x in range(columns)) for row in self.screen.history.top]
        return "\n".join(line.rstrip() for line in [*above, *self.screen.display])

    def _feed(self, timeout: float) -> None:
        data = self.child.read_nonblocking(65536, timeout=timeout)
        self.raw += data
        self.stream.feed(data)

    def wait_raw(self, needle: bytes, *, since: int = 0) -> int:
        """Wait until `needle` has been written (even if it was erased since); its offset."""
        while needle not in self.raw[since:]:
            self._step(WAIT_S, f"{needle!r} never written")
        return self.raw.index(needle, since)

    def wait(self, pattern: str, *, count: int = 1) -> None:
        """Wait until the screen shows `pattern` (a regex) at least `count` times."""
        compiled = re.compile(pattern, re.MULTILINE)
        while len(compiled.findall(self.text())) < count:
            self._step(WAIT_S, f"screen never showed {pattern!r} x{count}")

    def _step(self, timeout: float, what: str) -> None:
        try:
            self._feed(timeout)
        except pexpect.TIMEOUT:
            pytest.fail(f"{what}; the screen:\n{self.text()}")
        except pexpect.EOF:
            pytest.fail(f"{what}: the chat exited; the screen:\n{self.text()}")

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def wait_prompt(self, count: int) -> None:
        self.wait(r"^you>( |$)", count=count)

    def wait_exit(self) -> int:
        while True:
            try:
                self._feed(WAIT_S)
            except pexpect.EOF:
                break
            except pexpect.TIMEOUT:
                pytest.fail(f"the chat did not exit; the screen:\n{self.text()}")
        self.child.close()
        status: int = self.child.exitstatus
        return status


@contextmanager
def terminal(*args: str, columns: int = 110, lines: int = 60, **env: str) -> Iterator[Terminal]:
    environment = child_env(**{"TERM": "xterm-256color", **env})
    environment.pop("NO_COLOR", None)
    if "NO_COLOR" in env:
        environment["NO_COLOR"] = env["NO_COLOR"]
    child = pexpect.spawn(
        COMMAND[0],
        [*COMMAND[1:], "chat", *args],
        cwd=str(ROOT),
        env=environment,
        dimensions=(lines, columns),
    )
    try:
        yield Terminal(child, columns, lines)
    finally:
        if child.isalive():
            child.terminate(force=True)


def chat_config(path: Path, first_token_s: float, tokens_per_second: float) -> Path:
    path.write_text(
        f"[offline]\ntime_to_first_token_s = {first_token_s}\n"
        f"tokens_per_second = {tokens_per_second}\n"
    )
    return path


async def user_messages(data_dir: Path, continuum: str = "default") -> list[str]:
    async with await SQLiteStorage.open(data_dir / "frontmind.db") as storage:
        history = await storage.all_messages(DEFAULT_USER, continuum)
        records = await storage.turns(DEFAULT_USER, continuum, limit=100)
    typed = [
        m
        for m in history
        if m.role == "user" and not any(isinstance(b, ToolResultBlock) for b in m.content)
    ]
    texts = ["".join(getattr(b, "text", "") for b in m.content) for m in typed]
    return texts + [f"record:{r.status}" for r in reversed(records) if r.status != "completed"]


@pytest.mark.anyio
async def test_editing_paste_commands_and_history(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ("--offline", "--data-dir", str(data))
    with terminal(*args) as t:
        t.wait_prompt(1)
        t.send("hello there" + ENTER)
        t.wait("You said: “hello there”")
        t.wait("cache read")
        t.wait_prompt(2)
        # A bracketed paste of three lines stays one message, its indentation kept (the
        # first line's too); Enter then sends it.
        t.send(PASTE_START + "  line one\r    line two\rline three" + PASTE_END)
        t.wait(r"^ *… line three", count=1)
        t.send(ENTER)
        t.wait("line three”")
        t.wait_prompt(3)
        # Alt-Enter adds a line instead of sending.
        t.send("first" + ALT_ENTER + "second" + ENTER)
        t.wait("second”")
        t.wait_prompt(4)
        t.send("remind me to stretch in 5 minutes" + ENTER)
        t.wait(r"\[tool add_reminder … *\] done|\[tool add_reminder …\] done")
        t.wait_prompt(5)
        t.send("/reminders" + ENTER)
        t.wait(r"#1 stretch")
        t.send("/stats" + ENTER)
        t.wait(r"cache hit share")
        t.send("/context" + ENTER)
        t.wait(r"ESTIMATE  cached prefix")
        t.send("/help" + ENTER)
        t.wait(r"Alt-Enter, Esc Enter")
        t.send("/nope" + ENTER)
        t.wait(r"unknown command /nope")
        t.wait_prompt(10)
        # Colour on a terminal: the reply label is styled.
        assert b"\x1b[1;36mfrontmind> " in t.raw
        # Ctrl-D at an empty prompt leaves at once.
        t.send(CTRL_D)
        assert t.wait_exit() == 0
    assert await user_messages(data) == [
        "hello there",
        "  line one\n    line two\nline three",
        "first\nsecond",
        "remind me to stretch in 5 minutes",
    ]
    history = (data / HISTORY_FILE).read_text()
    assert "+  line one\n+    line two\n+line three\n" in history
    # A new session: Up brings back the last message from the history file.
    with terminal(*args) as t:
        t.wait_prompt(1)
        t.send(UP)
        t.wait(r"^you> /nope$")
        t.send(UP)
        t.wait(r"^you> /help$")
        t.send(CTRL_C)  # clears the line; a second Ctrl-C at the empty prompt leaves
        t.wait(r"^you>$")
        t.send(CTRL_C)
        assert t.wait_exit() == 0


@pytest.mark.anyio
async def test_indicator_and_cancelling_a_reply_without_colour(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = chat_config(tmp_path / "slow.toml", first_token_s=0.5, tokens_per_second=8)
    long_message = "please tell me a long story about " + "turtles and " * 8 + "the sea"
    with terminal("--offline", "--data-dir", str(data), "--config", str(config), NO_COLOR="1") as t:
        t.wait_prompt(1)
        sent = len(t.raw)
        t.send(long_message + ENTER)
        # The indicator shows until the first token, then gives way to the reply.
        spinner = t.wait_raw(b"thinking", since=sent)
        reply = t.wait_raw(b"frontmind> You said", since=sent)
        assert spinner < reply
        # It keeps turning while the model has not answered yet (0.5 s to the first token).
        assert "⠙ thinking".encode() in t.raw[spinner:reply]
        t.send(CTRL_C)  # mid-reply: cancels it and returns to the prompt
        t.wait(r"\(reply cancelled\)")
        t.wait_prompt(2)
        assert "the sea”" not in t.text()  # the reply never finished
        assert _colours(t.raw) == []
        t.send(CTRL_C)  # at the empty prompt: leave
        assert t.wait_exit() == 0
    # The cancelled turn left nothing half-written: a record says so, no messages.
    assert await user_messages(data) == ["record:cancelled"]


@pytest.mark.anyio
async def test_after_a_reply_cancelled_mid_thinking_the_next_shows_its_thinking(
    tmp_path: Path,
) -> None:
    # Ctrl-C during a stretch of thinking left it open: the next reply's thinking was
    # taken as the same stretch, and its marker never shown.
    config = tmp_path / "thinking.toml"
    config.write_text(
        '[model]\nthinking = "enabled"\nbudget_tokens = 1024\nmax_tokens = 4096\n'
        "[offline]\ntokens_per_second = 8\n"
    )
    args = ("--offline", "--data-dir", str(tmp_path / "data"), "--config", str(config))
    with terminal(*args, NO_COLOR="1") as t:
        t.wait_prompt(1)
        t.send("hello there" + ENTER)
        t.wait(r"\[thinking\] … \(/thinking unfolds\)")
        t.send(CTRL_C)
        t.wait(r"\(reply cancelled\)")
        t.wait_prompt(2)
        t.send("hello again" + ENTER)
        t.wait("again”")
        t.wait_prompt(3)
        assert t.text().count("[thinking] … (/thinking unfolds)") == 2, t.text()
        t.send(CTRL_D)
        assert await anyio.to_thread.run_sync(t.wait_exit) == 0


@pytest.mark.anyio
async def test_chat_against_a_daemon_on_a_terminal(tmp_path: Path) -> None:
    async with daemon(tmp_path / "d") as d:
        args = ("--url", d.url, "--continuum", "tty", "--data-dir", str(tmp_path / "home"))
        with terminal(*args) as t:
            t.wait_prompt(1)
            t.send("remind me to water the plants in 10 minutes" + ENTER)
            t.wait(r"\[tool add_reminder")
            t.wait("cache read")
            t.wait_prompt(2)
            t.send("/reminders" + ENTER)
            t.wait(r"#1 water the plants \(due ")
            t.send("/stats" + ENTER)
            t.wait(r"turns           1  \(completed 1\)")
            t.send("/context" + ENTER)
            t.wait(r"ESTIMATE  cached prefix")
            t.wait_prompt(5)
            t.send(CTRL_D)
            assert await anyio.to_thread.run_sync(t.wait_exit) == 0
        assert (tmp_path / "home" / HISTORY_FILE).is_file()
        assert await d.stop() == 0


@pytest.mark.anyio
async def test_ctrl_c_while_a_view_waits_on_the_daemon_returns_to_the_prompt(
    tmp_path: Path,
) -> None:
    # Ctrl-C while /stats waited on a daemon that did not answer ended the whole chat
    # (exit 130): only a reply's wait took Ctrl-C back to the prompt.
    asked = anyio.Event()

    async with daemon(tmp_path / "d") as d, d.client() as api:

        async def answer(client: anyio.abc.SocketStream) -> None:
            head, _ = await read_request(client)
            method, path, _ = head.split(b"\r\n", 1)[0].decode().split(" ")
            if "/turns" in path:  # the /stats view's request: never answered
                asked.set()
                await anyio.sleep_forever()
            relayed = await api.request(method, path)
            await client.send(
                f"HTTP/1.1 {relayed.status_code} X\r\ncontent-type: application/json\r\n"
                f"content-length: {len(relayed.content)}\r\nconnection: close\r\n\r\n".encode()
                + relayed.content
            )

        async with tiny_server(answer) as url:
            args = ("--url", url, "--data-dir", str(tmp_path / "home"))
            with terminal(*args, NO_COLOR="1") as t:
                await anyio.to_thread.run_sync(t.wait_prompt, 1)
                t.send("/stats" + ENTER)
                await asked.wait()
                t.send(CTRL_C)
                await anyio.to_thread.run_sync(t.wait, r"^  \(cancelled\)")
                await anyio.to_thread.run_sync(t.wait_prompt, 2)
                t.send("/help" + ENTER)  # the chat goes on
                await anyio.to_thread.run_sync(t.wait, "Alt-Enter, Esc Enter")
                await anyio.to_thread.run_sync(t.wait_prompt, 3)
                t.send(CTRL_D)
                assert await anyio.to_thread.run_sync(t.wait_exit) == 0
        assert await d.stop() == 0


@pytest.mark.anyio
async def test_stats_against_a_daemon_count_every_turn_of_a_long_continuum(
    tmp_path: Path,
) -> None:
    # /stats asked the daemon for one page of 1,000 records: past that, a continuum's
    # figures were its latest 1,000 turns', while `frontmind stats` and the in-process
    # chat counted them all.
    data = tmp_path / "d"
    data.mkdir()
    async with await SQLiteStorage.open(data / "frontmind.db") as store:
        for i in range(1_001):
            await store.commit_turn(DEFAULT_USER, stored_turn("long", f"t{i}", at=1e6 + i))
    async with daemon(data) as d:
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--continuum", "long", stdin=b"/stats\n"
        )
        assert code == 0, err
        assert "turns           1001  (completed 1001)" in out
        assert await d.stop() == 0


@pytest.mark.anyio
async def test_reminders_in_the_chat_are_every_open_one(tmp_path: Path) -> None:
    # /reminders showed one page: the oldest 100 open reminders through a daemon (200
    # in-process), the newest never, and nothing said there were more.
    async with daemon(tmp_path / "d") as d, d.client() as api:
        for i in range(201):
            made = await api.post("/v1/reminders", json={"text": f"reminder {i:03}"})
            assert made.status_code == 201, made.text
        code, out, err = await run_cli(
            "chat", "--url", d.url, "--continuum", "r", stdin=b"/reminders\n"
        )
        assert code == 0, err
        assert out.count("\n#") + out.startswith("#") == 201
        assert "reminder 200" in out
        assert await d.stop() == 0
    code, out, err = await run_cli(
        "chat", "--offline", "--data-dir", str(tmp_path / "d"), stdin=b"/reminders\n"
    )
    assert code == 0, err
    assert "reminder 200" in out
    # A due time reads in the terminal's own time zone, with its offset (it was UTC).
    stdin = b"remind me to water the plants in 10 minutes\n/reminders\n"
    data = ("--data-dir", str(tmp_path / "tz"))
    code, out, err = await run_cli("chat", "--offline", *data, stdin=stdin, TZ="Asia/Tokyo")
    assert code == 0, err
    assert re.search(r"#1 water the plants \(due \d{4}-\d\d-\d\dT\d\d:\d\d\+09:00\)", out), out


@pytest.mark.anyio
async def test_without_a_terminal_each_line_is_a_message_and_nothing_is_coloured(
    tmp_path: Path,
) -> None:
    code, out, err = await run_cli(
        "chat",
        "--offline",
        "--data-dir",
        str(tmp_path),
        stdin=b"hello\n/reminders\n/help\n/nope\n  second line\n//etc/hosts is gone\n",
    )
    assert code == 0, err
    # An error goes to stderr, as a turn's does: stdout is the replies (and what a
    # command shows). A mistyped command's went to stdout, among the replies.
    assert "unknown command" not in out
    assert "unknown command /nope; /help lists them (a message that begins with / " in err
    assert "\x1b" not in out  # no colour, no spinner, no cursor movement
    assert "you>" not in out  # no prompts, no labels: the output is the replies
    assert "frontmind>" not in out
    assert out.startswith("You said: “hello”.")
    assert "cache read" not in out  # each turn's figures go to stderr
    assert err.count("(cache read ") == 3
    assert "no open reminders" in out
    assert "Alt-Enter, Esc Enter" in out
    # A message that begins with "/" (a path, say) is sent as "//…", one "/" less: it
    # could not be sent at all (every such line was an unknown command).
    assert await user_messages(tmp_path) == ["hello", "  second line", "/etc/hosts is gone"]


@pytest.mark.anyio
async def test_through_a_pipe_a_reply_cut_by_an_error_does_not_run_into_the_next(
    tmp_path: Path,
) -> None:
    # A turn that failed after some of its reply had streamed left stdout's line open:
    # the next message's reply was glued to the cut one, on the same line.
    async with LocalMessagesAPI() as api:
        api.schedule(MidStreamError(after_events=5))
        code, out, err = await run_cli(
            "chat",
            "--data-dir",
            str(tmp_path),
            stdin=b"this one breaks\nthis one works\n",
            ANTHROPIC_BASE_URL=api.base_url,
            ANTHROPIC_API_KEY="test-key",
        )
    assert code == 1, err
    assert "error (stream_error)" in err
    cut, _, rest = out.partition("\n")
    assert cut.startswith("You said: “this one breaks")
    assert "this one works" not in cut
    assert rest.startswith("You said: “this one works”"), out


@pytest.mark.anyio
async def test_through_a_pipe_calls_side_by_side_each_have_a_line_on_stderr(
    tmp_path: Path,
) -> None:
    # Through a pipe a tool's run goes to stderr, one line per call; the calls of one
    # reply start together, and the second's start ran on from the first's open line:
    # "[tool add_reminder …][tool add_reminder …] done".
    responder = ScriptedResponder()
    responder.push(
        Reply(
            (
                ReplyToolUse("add_reminder", {"text": "stretch", "due_in_minutes": 5}),
                ReplyToolUse("add_reminder", {"text": "drink", "due_in_minutes": 9}),
            )
        ),
        Reply((ReplyText("Both set."),)),
    )
    async with LocalMessagesAPI(responder=responder) as api:
        code, out, err = await run_cli(
            "chat",
            "--data-dir",
            str(tmp_path),
            stdin=b"remind me twice\n",
            ANTHROPIC_BASE_URL=api.base_url,
            ANTHROPIC_API_KEY="test-key",
        )
    assert code == 0, err
    assert out == "Both set.\n"
    tools = [line for line in err.splitlines() if line.startswith("[tool")]
    assert tools == [
        "[tool add_reminder …]",
        "[tool add_reminder …]",
        "[tool add_reminder] done",
        "[tool add_reminder] done",
    ], err


@pytest.mark.anyio
async def test_control_characters_in_a_reply_are_shown_not_obeyed(tmp_path: Path) -> None:
    # A reply (the model's text, which a web page or a document can steer) went to the
    # terminal as it came: its escape sequences set the window's title, cleared the
    # screen and moved the cursor over what was shown. On a terminal they are shown as
    # symbols; through a pipe the reply is kept byte for byte.
    hostile = "before\x1b]0;owned\x07\x1b[2J\x1b[Hafter\rover\x9b31m end"
    responder = ScriptedResponder()
    responder.push(Reply((ReplyText(hostile),)), Reply((ReplyText(hostile),)))
    async with LocalMessagesAPI(responder=responder) as api:
        url, key = api.base_url, "test-key"
        code, out, err = await run_cli(
            "chat",
            "--data-dir",
            str(tmp_path / "piped"),
            stdin=b"hi\n",
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY=key,
        )
        assert code == 0, err
        assert out == hostile + "\n"

        def converse() -> bytes:  # in a thread: the model server runs on this loop
            tty = str(tmp_path / "tty")
            with terminal("--data-dir", tty, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key) as t:
                t.wait_prompt(1)
                t.send("hi" + ENTER)
                t.wait(re.escape("before␛]0;owned␇␛[2J␛[Hafter␍over\\x9b31m end"))
                t.wait_prompt(2)
                t.send(CTRL_D)
                assert t.wait_exit() == 0
                return t.raw

        raw = await anyio.to_thread.run_sync(converse)
    for obeyed in (b"\x1b]0;", b"\x1b[2J", b"\x1b[H", "\x9b".encode()):
        assert obeyed not in raw


@pytest.mark.anyio
async def test_a_line_break_split_between_two_deltas_is_a_line_break(tmp_path: Path) -> None:
    # The API cuts a reply's text anywhere: a CRLF whose CR ended one delta and whose
    # LF began the next was shown as "␍" and then a new line (the local API streams
    # text in pieces of 24 characters: the CR is the 24th).
    reply = "x" * 23 + "\r\nsecond line"
    responder = ScriptedResponder()
    responder.push(Reply((ReplyText(reply),)))
    async with LocalMessagesAPI(responder=responder) as api:
        url, key = api.base_url, "test-key"

        def converse() -> str:  # in a thread: the model server runs on this loop
            tty = str(tmp_path / "tty")
            with terminal("--data-dir", tty, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key) as t:
                t.wait_prompt(1)
                t.send("hi" + ENTER)
                t.wait_prompt(2)
                t.send(CTRL_D)
                assert t.wait_exit() == 0
                return t.raw.decode()

        shown = await anyio.to_thread.run_sync(converse)
    assert "x" * 23 + "\r\nsecond line" in shown  # the terminal's own line break
    assert "␍" not in shown


def test_a_dumb_terminal_gets_no_spinner(tmp_path: Path) -> None:
    # TERM=dumb moves no cursor: the spinner's carriage returns and its erase sequence
    # were shown as they are, "⠋ thinking… (Ctrl-C cancels)^[[K" before every reply.
    with terminal("--offline", "--data-dir", str(tmp_path), TERM="dumb") as t:
        t.wait_prompt(1)
        start = len(t.raw)
        t.send("hello" + ENTER)
        t.wait(r"^frontmind> You said: “hello”")
        t.wait_prompt(2)
        t.send(CTRL_D)
        assert t.wait_exit() == 0
    reply = t.raw[start:]
    assert "thinking…".encode() not in reply
    assert b"\x1b[K" not in reply


@pytest.mark.anyio
async def test_a_reply_cut_off_at_max_tokens_says_so(tmp_path: Path) -> None:
    # The turn's warnings (a reply cut off at max_tokens, among them) were never shown:
    # the cut reply read as the whole answer.
    config = tmp_path / "short.toml"
    config.write_text("[model]\nmax_tokens = 16\n")
    args = ("--offline", "--data-dir", str(tmp_path / "data"), "--config", str(config))
    message = "tell me a long story about turtles and " * 4 + "the sea"
    code, out, err = await run_cli("chat", *args, stdin=message.encode() + b"\n")
    assert code == 0, err
    assert out.startswith("You said: “tell me a long story")
    assert "the sea" not in out
    assert "warning: the reply was cut off at max_tokens" in err
    with terminal(*args) as t:
        t.wait_prompt(1)
        t.send(message + ENTER)
        t.wait(r"^  warning: the reply was cut off at max_tokens")
        t.wait(r"^  \(cache read")
        t.wait_prompt(2)
        t.send(CTRL_D)
        assert await anyio.to_thread.run_sync(t.wait_exit) == 0


def test_ctrl_c_leaves_a_chat_that_reads_the_terminal_and_writes_a_file(
    tmp_path: Path,
) -> None:
    # `frontmind chat > replies.txt` reads the terminal a line at a time: Ctrl-C while it
    # waited for the next line did not leave until Enter was pressed (the thread that
    # read stdin could not be cancelled, and the exit waited for it).
    replies = tmp_path / "replies.txt"
    command = " ".join(shlex.quote(part) for part in [*COMMAND, "chat", "--offline"])
    command += f" --data-dir {shlex.quote(str(tmp_path / 'data'))} > {shlex.quote(str(replies))}"
    child = pexpect.spawn("bash", ["-c", f"exec {command}"], cwd=str(ROOT), env=child_env())
    try:
        child.send("hello" + ENTER)
        child.expect_exact("(cache read", timeout=WAIT_S)  # stderr: the turn's figures
        child.sendintr()
        child.expect(pexpect.EOF, timeout=20)  # at once, not at the next Enter
        child.close()
        assert child.exitstatus == 130
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert replies.read_text().startswith("You said: “hello”")


@pytest.mark.anyio
async def test_thinking_is_folded_until_asked_for(tmp_path: Path) -> None:
    config = tmp_path / "thinking.toml"
    config.write_text('[model]\nthinking = "enabled"\nbudget_tokens = 1024\nmax_tokens = 4096\n')
    code, out, err = await run_cli(
        "chat",
        "--offline",
        "--data-dir",
        str(tmp_path / "data"),
        "--config",
        str(config),
        stdin=b"hello there\n/thinking\nhello again\n",
    )
    assert code == 0, err
    # Through a pipe, stdout is the replies alone (and what a /command prints): the
    # thinking, folded or not, goes to stderr with the turns' figures. (It went to
    # stdout, into the replies a script reads.)
    assert "thinking]" not in out
    assert "The user wrote" not in out
    assert out.count("You said") == 2
    assert "the model's thinking is shown as it streams" in out
    folded, _, unfolded = err.partition("(cache read")
    # Folded: a marker, without the thinking's text.
    assert "[thinking] … (/thinking unfolds)" in folded
    assert "The user wrote" not in folded
    # Unfolded: the marker, then the thinking's text.
    assert unfolded.index("[thinking]") < unfolded.index("The user wrote 2 word(s)")


def test_tool_calls_that_run_side_by_side_each_show_their_outcome() -> None:
    """The calls of one reply run side by side: a finish that is not the call just shown
    gets a line of its own, naming its tool, instead of a bare "done" on another
    call's line."""
    screen = io.StringIO()
    out = _Out(screen, colour=False)
    for event in (
        ToolStarted("t1", "lookup", "{}"),
        ToolFinished("t1", "lookup", False, "ok"),
        ToolStarted("t2", "slow", "{}"),
        ToolStarted("t3", "quick", "{}"),
        ToolFinished("t3", "quick", False, "ok"),
        ToolFinished("t2", "slow", True, "timed out"),
        TextDelta("Done."),
    ):
        _show(event, out)
    assert screen.getvalue() == (
        "\n  [tool lookup …] done\n"
        "\n  [tool slow …]"
        "\n  [tool quick …] done\n"
        "  [tool slow] failed\n"
        "Done."
    )
