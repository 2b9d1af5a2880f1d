"""`frontmind chat`: an interactive terminal chat, against a daemon or in-process.

On a terminal the prompt is a real line editor (prompt_toolkit): editing keys, history
kept across sessions, multi-line input (Enter sends; Alt-Enter or Esc then Enter adds a
line; a bracketed paste stays one message), Ctrl-C cancels the reply in progress, and
Ctrl-C or Ctrl-D at an empty prompt leaves. Without a terminal (a pipe) each line of
input is one message and nothing is coloured or animated.

Where turns come from is behind `ChatBackend`: the library in-process, or a daemon.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import ExitStack, aclosing, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream

from actors import (
    FrontmindError,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStarted,
)
from storage import Reminder, excerpt

from .._client import Client
from .._frontmind import Frontmind
from ._remote import turn_records
from ._render import render_context, render_stats

if TYPE_CHECKING:  # prompt_toolkit loads only for an interactive terminal
    from prompt_toolkit import PromptSession

__all__ = [
    "HISTORY_FILE",
    "ChatBackend",
    "LocalBackend",
    "RemoteBackend",
    "chat",
    "chat_in_process",
    "chat_remote",
]

HISTORY_FILE = "chat_history"
PROMPT = "you> "
REPLY = "frontmind> "
NEXT_MESSAGE = "(next message)"  # what /context previews the next turn with

HELP = """\
Commands
  /help        this help
  /context     the context window the next turn would send (sections, breakpoints)
  /stats       cache hit share and latencies of this conversation
  /reminders   the open reminders
  /thinking    show the model's thinking as it streams, or fold it again (folded: a
               one-line marker per stretch of thinking)
  /quit        leave (or /exit)
  //…          send a message that begins with "/" (one "/" is taken off)
Keys
  Enter                   send the message
  Alt-Enter, Esc Enter    start a new line (a pasted text stays one message)
  Up, Down                earlier messages (kept across sessions); Ctrl-R searches them
  Ctrl-C                  cancel the reply in progress; clear the line; leave at an empty prompt
  Ctrl-D                  leave (at an empty prompt)"""


class ChatBackend(Protocol):
    """Where the chat's turns and views come from (the library in-process, or a daemon)."""

    def turn(self, text: str) -> AsyncGenerator[TurnEvent, None]:
        """The events of one turn; closing the iterator early cancels the turn."""
        ...

    async def context(self) -> str: ...

    async def stats(self) -> str: ...

    async def reminders(self) -> str: ...


def _render_reminders(reminders: list[Reminder]) -> str:
    if not reminders:
        return "no open reminders"
    lines = []
    for r in reminders:
        # In the terminal's own time zone (TZ), with its offset: read by the person there.
        due = "" if r.due_at is None else r.due_at.astimezone().isoformat(timespec="minutes")
        lines.append(f"#{r.id} {r.text}" + (f" (due {due})" if due else ""))
    return "\n".join(lines)


class LocalBackend:
    """Turns and views from a `Frontmind` opened in this process."""

    def __init__(self, fm: Frontmind, continuum: str) -> None:
        self._fm = fm
        self._continuum = continuum

    async def turn(self, text: str) -> AsyncGenerator[TurnEvent, None]:
        async with self._fm.turn(self._continuum, text) as events:
            async for event in events:
                yield event

    async def context(self) -> str:
        return render_context(await self._fm.context(self._continuum, NEXT_MESSAGE))

    async def stats(self) -> str:
        records = await self._fm.turns(self._continuum, limit=-1)  # every one, as stats
        return render_stats(records, catalog=self._fm.models)

    async def reminders(self) -> str:
        return _render_reminders(await self._fm.reminders(limit=-1))  # every open one


class RemoteBackend:
    """Turns and views from a running daemon, through `frontmind.Client`."""

    def __init__(self, client: Client, continuum: str) -> None:
        self._client = client
        self._continuum = continuum

    async def turn(self, text: str) -> AsyncGenerator[TurnEvent, None]:
        async with self._client.turn(self._continuum, text) as events:
            async for event in events:
                yield event

    async def context(self) -> str:
        return render_context(await self._client.context(self._continuum, NEXT_MESSAGE))

    async def stats(self) -> str:
        return render_stats(await turn_records(self._client, self._continuum))

    async def reminders(self) -> str:
        # Every open one: the pages run oldest first, so the first alone lacks the newest.
        page = await self._client.reminders(limit=1000)
        found = list(page)
        while page.next_cursor is not None:
            page = await self._client.reminders(limit=1000, cursor=page.next_cursor)
            found.extend(page)
        return _render_reminders(found)


# -- output ---------------------------------------------------------------------------------


def colour_wanted(stream: TextIO, environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if environ.get("NO_COLOR") or environ.get("TERM") == "dumb":
        return False
    return _is_terminal(stream)


_STYLES = {
    "you": "\x1b[1;32m",
    "reply": "\x1b[1;36m",
    "tool": "\x1b[33m",
    "error": "\x1b[31m",
    "warning": "\x1b[33m",
    "dim": "\x1b[2m",
}

# What a reply (or a memory, a reminder, an error message) may not do to a terminal: its
# control characters would be the terminal's commands (clear the screen, set the title,
# move the cursor, or worse on some emulators). On a terminal they are shown as symbols
# (U+2400's control pictures; C1 controls as \x9b); through a pipe the text is kept as is.
_VISIBLE_CONTROLS = {
    **{code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\n\t"},
    0x7F: "\u2421",
    **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)},
}


def visible(text: str) -> str:
    """`text` with its control characters shown, not obeyed (newlines and tabs kept)."""
    return text.replace("\r\n", "\n").translate(_VISIBLE_CONTROLS)


class _Visible:
    """`visible` over a stream of deltas: a CRLF split between two of them (the API
    cuts text anywhere) is still a line break, not a ␍ and then a newline. A delta's
    last CR waits for the next one's first character."""

    def __init__(self) -> None:
        self._cr = False  # the last delta ended with a CR, not yet shown

    def __call__(self, text: str) -> str:
        if self._cr:
            text = "\r" + text
        self._cr = text.endswith("\r")
        return visible(text[:-1] if self._cr else text)

    def flush(self) -> str:
        """A held CR that no newline followed, as itself (before other output)."""
        held, self._cr = self._cr, False
        return visible("\r") if held else ""


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # a closed stream
        return False


class _Out:
    """Where the chat writes. `aside`: where the turn's figures go instead of beside the
    reply (a pipe's stderr: its stdout is the replies alone)."""

    def __init__(self, stream: TextIO, colour: bool, aside: TextIO | None = None) -> None:
        self._stream = stream
        self._aside = aside
        self.colour = colour
        self.unfold_thinking = False  # /thinking: show its text, not just a marker
        self.thinking = False  # a stretch of thinking is being shown now
        self.failed = 0  # messages whose turn ended in an error
        self.open_tool = ""  # the call whose "[tool … …]" line waits for its outcome
        self._line_open = False  # the stream's last line has no newline yet
        self._aside_open = False  # and the aside's
        self._tty = _is_terminal(stream)
        self._aside_tty = _is_terminal(aside)
        self._visible, self._aside_visible = _Visible(), _Visible()

    def __call__(self, text: str, style: str | None = None, *, raw: bool = False) -> None:
        """Write `text`; `raw`: the chat's own terminal commands (the spinner's)."""
        if text:
            self._line_open = not text.endswith("\n")
        if self._tty:
            text = self._visible.flush() + text if raw else self._visible(text)
        if self.colour and style is not None:
            text = f"{_STYLES[style]}{text}\x1b[0m"
        self._stream.write(text)
        self._stream.flush()

    def end_reply(self) -> None:
        """Through a pipe, end a reply that an error cut short: the next reply would
        otherwise run on from it, on the same line. (On a terminal the error's own line,
        beside the reply, ends it.)"""
        if self._aside is not None and self._line_open:
            self("\n")

    def detail(self, text: str, style: str) -> None:
        """What happens beside the reply (a tool's run, an error): with the reply on a
        terminal, aside through a pipe."""
        if self._aside is None:
            self(text, style)
        else:
            # Aside, a line of its own starts without the blank line and indent that set
            # it apart from the reply; but where the last line aside is still open (the
            # calls of one reply start side by side), it must still start a new line.
            new_line = text.startswith("\n") and self._aside_open
            self._write_aside(("\n" if new_line else "") + text.lstrip("\n").removeprefix("  "))

    def beside(self, text: str, style: str) -> None:
        """Text shown beside the reply as it is (the model's thinking): on a terminal
        with it, through a pipe aside, so that stdout stays the replies alone."""
        if self._aside is None:
            self(text, style)
        else:
            self._write_aside(text)

    def _write_aside(self, text: str) -> None:
        assert self._aside is not None
        if text:
            self._aside_open = not text.endswith("\n")
        self._aside.write(self._aside_visible(text) if self._aside_tty else text)
        self._aside.flush()

    def note(self, text: str) -> None:
        """A line about the reply (its usage and timing), not part of it."""
        if self._aside is not None:
            self("\n")  # the reply's own line ends where the reply goes
        self.detail(f"\n  {text}\n", "dim")


class _Indicator:
    """A spinner until the first token, erased when it comes (terminal only; none on a
    `TERM=dumb` terminal, which moves no cursor: its `\r` and erase would be shown)."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, out: _Out, environ: Mapping[str, str] = os.environ) -> None:
        self._out = out
        self._scope = anyio.CancelScope()
        self.active = True
        self._shown = False
        self._animated = environ.get("TERM") != "dumb"

    def _frame(self, frame: str) -> None:
        if not self._animated:
            return
        self._out(f"\r{frame} thinking… (Ctrl-C cancels)", "dim", raw=True)
        self._shown = True

    def show(self) -> None:
        """The first frame, at once: before the turn is even sent."""
        self._frame(self.FRAMES[0])

    async def run(self) -> None:
        with self._scope:
            for frame in itertools.cycle(self.FRAMES[1:] + self.FRAMES[:1]):
                await anyio.sleep(0.1)
                if not self.active:
                    return
                self._frame(frame)

    def stop(self) -> None:
        if self.active:
            self.active = False
            self._scope.cancel()
            if self._shown:
                self._out("\r\x1b[K", raw=True)


def _show(event: TurnEvent, out: _Out) -> None:
    if isinstance(event, ThinkingDelta):
        if not out.thinking:
            out.thinking = True
            marker = "[redacted thinking]" if event.redacted else "[thinking]"
            folded = "" if out.unfold_thinking else " … (/thinking unfolds)"
            out.beside(f"\n  {marker}{folded}" + ("\n  " if out.unfold_thinking else ""), "dim")
        if out.unfold_thinking and event.text:
            out.beside(event.text.replace("\n", "\n  "), "dim")
        return
    if out.thinking:
        out.thinking = False
        out.beside("\n", "dim")
    if isinstance(event, TextDelta):
        out(event.text)
    elif isinstance(event, ToolStarted):
        out.detail(f"\n  [tool {event.name} …]", "tool")
        out.open_tool = event.id
    elif isinstance(event, ToolFinished):
        outcome = "failed" if event.is_error else "done"
        if out.open_tool == event.id:
            line = f" {outcome}\n"  # on the line of its start, just shown
        else:  # the calls of one reply run side by side: its own line, with its name
            line = f"{chr(10) if out.open_tool else ''}  [tool {event.name}] {outcome}\n"
        out.open_tool = ""
        out.detail(line, "error" if event.is_error else "tool")
    elif isinstance(event, TurnCompleted):
        # What the turn's reply does not say itself: a reply cut off at max_tokens would
        # otherwise read as finished.
        for warning in event.warnings:
            out.detail(f"\n  warning: {warning}", "warning")
        u = event.usage
        out.note(
            f"(cache read {u.cache_read_input_tokens}, write {u.cache_creation_input_tokens}, "
            f"uncached {u.input_tokens}; {event.timings_ms.total:.0f} ms)"
        )
    elif isinstance(event, TurnError):
        out.failed += 1
        out.end_reply()
        out.detail(f"\n  error ({event.type}): {event.message}\n", "error")


# -- the conversation -----------------------------------------------------------------------


async def _reply(backend: ChatBackend, text: str, out: _Out, interactive: bool) -> None:
    """Stream one reply. On a terminal, Ctrl-C (SIGINT: the prompt is not reading keys
    now) cancels the turn, which the runtime unwinds cleanly, and returns to the prompt."""
    interrupted = False
    # A turn cancelled or broken off mid-thinking or mid-call leaves no stretch of
    # thinking or call open for this one (its marker would be taken as shown).
    out.thinking = False
    out.open_tool = ""
    indicator = _Indicator(out) if interactive else None
    with ExitStack() as stack:
        # Installed before the turn starts, so no Ctrl-C falls to Python's default handler.
        signals = (
            stack.enter_context(anyio.open_signal_receiver(signal.SIGINT)) if interactive else None
        )
        async with anyio.create_task_group() as tg:

            async def cancel_on_interrupt() -> None:
                nonlocal interrupted
                assert signals is not None
                async for _ in signals:
                    interrupted = True
                    tg.cancel_scope.cancel()
                    return

            if interactive:
                tg.start_soon(cancel_on_interrupt)
            if indicator is not None:
                indicator.show()
                tg.start_soon(indicator.run)
            try:
                async with aclosing(backend.turn(text)) as events:
                    async for event in events:
                        if isinstance(event, TurnStarted):
                            continue  # accepted, but nothing to show yet: keep the spinner
                        if indicator is not None and indicator.active:
                            indicator.stop()
                            out(REPLY, "reply")
                        _show(event, out)
            except FrontmindError as exc:
                if indicator is not None:
                    indicator.stop()
                out.failed += 1
                out.end_reply()
                out.detail(f"\n  error: {exc}\n", "error")
            tg.cancel_scope.cancel()
    if indicator is not None:
        indicator.stop()
    if interrupted:
        out("\n  (reply cancelled)\n", "dim")


async def _view(view: Callable[[], Awaitable[str]], out: _Out, interactive: bool) -> None:
    """Show a view (/context, /stats, /reminders). On a terminal Ctrl-C cancels it and
    returns to the prompt, as it does a reply: the prompt is not reading keys now, and
    Python's own handler would end the chat (a daemon that does not answer holds a view
    for the client's whole timeout)."""
    with ExitStack() as stack:
        signals = (
            stack.enter_context(anyio.open_signal_receiver(signal.SIGINT)) if interactive else None
        )
        async with anyio.create_task_group() as tg:

            async def cancel_on_interrupt() -> None:
                assert signals is not None
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    out("\n  (cancelled)\n", "dim")
                    return

            if signals is not None:
                tg.start_soon(cancel_on_interrupt)
            try:
                out(await view() + "\n")
            except FrontmindError as exc:
                out.detail(f"  error: {exc}\n", "error")
            except msgspec.ValidationError as exc:
                out.detail(f"  error: the daemon's answer could not be read: {exc}\n", "error")
            tg.cancel_scope.cancel()


async def _command(backend: ChatBackend, text: str, out: _Out, interactive: bool) -> bool:
    """Run a /command; False means leave the chat."""
    name = text.split()[0].lower()
    if name in ("/quit", "/exit"):
        return False
    views: dict[str, Callable[[], Awaitable[str]]] = {
        "/context": backend.context,
        "/stats": backend.stats,
        "/reminders": backend.reminders,
    }
    if name == "/help":
        out(HELP + "\n")
    elif name == "/thinking":
        out.unfold_thinking = not out.unfold_thinking
        shown = "shown as it streams" if out.unfold_thinking else "folded"
        out(f"  the model's thinking is {shown}\n", "dim")
    elif name in views:
        await _view(views[name], out, interactive)
    else:
        out.detail(
            f"  unknown command {excerpt(name, 40)}; /help lists them (a message that "
            "begins with / is sent as //…)\n",
            "error",
        )
    return True


_LEADING_BLANK_LINES = re.compile(r"\A\s*\n")


def _trimmed(text: str) -> str:
    """The message as typed, less its leading blank lines and trailing whitespace: the
    first line's indentation stays (a pasted block of code or a stack trace keeps its
    shape)."""
    return _LEADING_BLANK_LINES.sub("", text).rstrip()


async def _handle(backend: ChatBackend, text: str, out: _Out, interactive: bool) -> bool:
    if text.lstrip().startswith("//"):  # a message, not a command: one "/" less
        start = text.index("/")
        text = text[:start] + text[start + 1 :]
    elif text.lstrip().startswith("/"):
        return await _command(backend, text.strip(), out, interactive)
    await _reply(backend, text, out, interactive)
    return True


async def _plain(backend: ChatBackend, stdin: TextIO, out: _Out) -> None:
    """No terminal: one message per line, no editing, no colour, and no prompts (no one
    is there to read them; the output is the replies alone)."""
    async with _lines(stdin) as lines:
        async for line in lines:
            if isinstance(line, Exception):
                raise line  # as it was raised reading (an undecodable line, say)
            text = _trimmed(line)
            if text and not await _handle(backend, text, out, interactive=False):
                return


@asynccontextmanager
async def _lines(stdin: TextIO) -> AsyncIterator[MemoryObjectReceiveStream[str | Exception]]:
    """stdin's lines (or what reading raised), read by a daemon thread of their own. A
    worker thread blocked in `readline` cannot be cancelled and holds up the exit:
    Ctrl-C waited for a line no one was going to type (`frontmind chat > replies.txt`
    reads the terminal)."""
    send, receive = anyio.create_memory_object_stream[str | Exception](1)
    token = anyio.lowlevel.current_token()

    def read() -> None:
        try:
            try:
                while line := stdin.readline():
                    anyio.from_thread.run(send.send, line, token=token)
            except (OSError, ValueError) as exc:
                anyio.from_thread.run(send.send, exc, token=token)
            anyio.from_thread.run_sync(send.close, token=token)  # the stream is the loop's
        except (anyio.BrokenResourceError, anyio.RunFinishedError):
            return  # the chat has ended: the rest of the input is not wanted

    threading.Thread(target=read, name="chat stdin", daemon=True).start()
    with receive:
        yield receive


def _session(history_file: Path | None, colour: bool) -> PromptSession[str]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.filters import is_searching
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.output import ColorDepth
    from prompt_toolkit.styles import Style

    bindings = KeyBindings()

    @bindings.add("enter", filter=~is_searching)
    def _send(event: KeyPressEvent) -> None:
        event.current_buffer.validate_and_handle()

    @bindings.add("escape", "enter", filter=~is_searching)  # also Alt-Enter
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-c", filter=~is_searching)
    def _interrupt(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    history: History = InMemoryHistory()
    if history_file is not None:
        try:
            # What was typed, kept beside the store: its owner's alone, as the store is.
            history_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            history_file.touch(mode=0o600, exist_ok=True)
            history = FileHistory(str(history_file))
        except OSError:
            pass  # an unwritable data dir: history for this session only

    def continuation(width: int, line_number: int, wrap_count: int) -> str:
        return "… ".rjust(width)

    return PromptSession(
        history=history,
        key_bindings=bindings,
        multiline=True,
        prompt_continuation=continuation,
        style=Style.from_dict({"you": "bold ansigreen", "continuation": "ansigray"}),
        color_depth=None if colour else ColorDepth.DEPTH_1_BIT,
        enable_open_in_editor=False,
    )


async def _interactive(backend: ChatBackend, out: _Out, history_file: Path | None) -> None:
    session = _session(history_file, out.colour)
    message: Any = [("class:you", PROMPT)] if out.colour else PROMPT
    out("Frontmind chat. Enter sends, Alt-Enter adds a line, /help lists the rest.\n", "dim")
    while True:
        try:
            text = await session.prompt_async(message)
        except (KeyboardInterrupt, EOFError):
            return
        text = _trimmed(text)
        if text and not await _handle(backend, text, out, interactive=True):
            return


async def chat(
    backend: ChatBackend,
    *,
    history_file: Path | None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> int:
    """Converse with `backend` until the user leaves. Through a pipe, the number of
    messages whose turn failed (a script's exit status says so); on a terminal, 0 (the
    person saw each error as it came)."""
    interactive = stdin.isatty() and stdout.isatty()
    out = (
        _Out(stdout, colour_wanted(stdout))
        if interactive
        else _Out(stdout, colour=False, aside=sys.stderr)  # stdout: the replies alone
    )
    if interactive:
        await _interactive(backend, out, history_file)
        return 0
    await _plain(backend, stdin, out)
    return out.failed


async def chat_in_process(
    data_dir: Path,
    continuum: str,
    *,
    offline: bool,
    config_file: Path | None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> int:
    async with Frontmind.open(data_dir, config_file=config_file, offline=offline) as fm:
        return await chat(
            LocalBackend(fm, continuum),
            history_file=data_dir / HISTORY_FILE,
            stdin=stdin,
            stdout=stdout,
        )


async def chat_remote(
    url: str,
    continuum: str,
    *,
    token: str | None,
    history_file: Path | None = None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> int:
    async with Client(url, token=token) as client:
        # Before the prompt shows: `ClientError` if no daemon answers or it refuses the
        # token (else each message, in a pipe each line, would fail alone, and exit 0).
        await client.model_settings(continuum)
        return await chat(
            RemoteBackend(client, continuum), history_file=history_file, stdin=stdin, stdout=stdout
        )
