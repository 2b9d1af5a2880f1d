"""One live connection to an MCP server, on the official `mcp` SDK.

A link is served by one task of the hub's task group (the SDK's client is a stack of
context managers with task groups of its own, entered and left in one task); calls are
made on it from the callers' tasks, at most `MAX_CONCURRENT_CALLS` at once. The link
ends when it is closed (the instance stops, or its actor is restarted) or lost: the
server's process exited (its stderr reached its end), a call found the connection
closed, or a liveness check (`check`) went unanswered. Whoever owns the link (the
server's actor) is told through `lost`; the kernel's supervision decides when to
connect again.

The server's stderr goes to the log (logger `frontmind.mcp.<name>`), a line at a time.
`mcp` is imported here, on first connection: it is heavy (and brings its own HTTP
server), and an instance without MCP servers never loads it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import sys
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import Any

import anyio
import httpx2
import msgspec
from anyio.abc import TaskStatus

from .._tool_spec import ToolOutcome, capped, described
from ._results import mcp_outcome
from ._spec import McpServer

__all__ = ["ListedTool", "McpLink", "McpStartFailed"]

MAX_CONCURRENT_CALLS = 16  # per server; more wait for a turn (within their timeout)
PING_EVERY_S = 15.0  # an idle link is checked this often (`McpLink.check`)
PING_TIMEOUT_S = 10.0
# The SDK's own read timeout for a url server (it may hold a response stream open).
HTTP_READ_TIMEOUT_S = 300.0
_STDERR_LINE_LIMIT = 2000  # characters of one stderr line kept in the log
_LAST_WORDS_LIMIT = 500  # characters of its last stderr line in why a server stopped

log = logging.getLogger("frontmind.mcp")


class McpStartFailed(Exception):
    """The server could not be started or did not answer its handshake."""


class ListedTool(msgspec.Struct, frozen=True):
    """One tool as the server lists it: its schema kept as the exact JSON it encodes to."""

    name: str
    description: str
    input_schema: str


class McpLink:
    def __init__(self, spec: McpServer, generation: int) -> None:
        self.spec = spec
        self.generation = generation
        self.tools: tuple[ListedTool, ...] = ()
        self.lost = anyio.Event()
        self.reason = ""
        self.done = anyio.Event()  # the serving task has ended (the server is stopped)
        self.listing_changed: anyio.Event = anyio.Event()  # set by a list_changed notice
        self._closing = anyio.Event()
        self._check = anyio.Event()  # a call failed oddly: check now
        self._calls = 0  # calls in flight: while there are any, the link is not idle
        self._answered = 0.0  # when the server last answered (a call or a check)
        self._last_line = ""  # of the server's stderr
        self._refusal = ""  # the last HTTP error status a url server answered with
        self._client: Any = None
        self._limiter = anyio.CapacityLimiter(MAX_CONCURRENT_CALLS)
        self._log = logging.getLogger(f"frontmind.mcp.{spec.name}")

    @property
    def alive(self) -> bool:
        return self._client is not None and not self.lost.is_set() and not self._closing.is_set()

    def close(self) -> None:
        self._closing.set()

    def lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self._log.warning("MCP server %r: %s", self.spec.name, reason)
            self.lost.set()

    # -- calls ---------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Call a tool; every failure is an error result for the model, never a raise
        (cancellation, the caller's timeout, passes through)."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        where = f"MCP server {self.spec.name!r}"
        if not self.alive:
            return ToolOutcome(
                f"{where} is not running ({self.reason or 'stopped'})", is_error=True
            )
        try:
            async with self._limiter:
                self._calls += 1
                try:
                    result = await self._client.call_tool(tool, arguments)
                finally:
                    self._calls -= 1
            self._answered = anyio.current_time()
        except MCPError as exc:
            # The SDK's code for a closed connection is also JSON-RPC's first "server
            # error" code, which a server may answer a call with itself: the link is
            # lost only if the server has stopped answering.
            if exc.code == CONNECTION_CLOSED and not await self._answers():
                self.lose("the connection closed during a call (the server exited?)")
                stopped = f"{where} stopped during the call ({exc.message}); it is being restarted"
                return ToolOutcome(capped(stopped, self.spec.max_result_chars), is_error=True)
            self._answered = anyio.current_time()
            refused = f"{where} refused the call: {exc.message}"
            return ToolOutcome(capped(refused, self.spec.max_result_chars), is_error=True)
        # The actor boundary: whatever the SDK or a broken server raises is this call's
        # error, never the turn's. Cancellation is a BaseException and passes through.
        except Exception as exc:  # noqa: BLE001
            self._check.set()
            self._log.warning("call %s of %r failed", tool, self.spec.name, exc_info=True)
            failed = f"{where} failed the call: {described(exc)}"
            return ToolOutcome(capped(failed, self.spec.max_result_chars), is_error=True)
        return mcp_outcome(result, self.spec.max_result_chars)

    async def _answers(self) -> bool:
        """Whether the server answers a check now (within `PING_TIMEOUT_S`)."""
        if not self.alive:
            return False
        try:
            with anyio.fail_after(PING_TIMEOUT_S):
                await self.check()
        except Exception:  # noqa: BLE001 - any failure of a check: it does not answer
            return False
        return True

    # -- serving -------------------------------------------------------------------------

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, list the tools, report started, then hold the connection until the
        link is closed or lost. Fails (before `started`) with `McpStartFailed`."""
        spec = self.spec
        started = False
        relayed = anyio.Event()  # the stderr relay has seen the stream's end
        # One scope for the whole connection: its deadline bounds the start and is lifted
        # once the server has answered (a deadline around the start alone would end
        # before the SDK's task groups it entered, which anyio forbids).
        with anyio.CancelScope(deadline=anyio.current_time() + spec.startup_timeout_s) as scope:
            try:
                async with anyio.create_task_group() as relay:
                    try:
                        async with AsyncExitStack() as stack:
                            self._client = await self._connect(stack, relay, relayed)
                            self.tools = await self._list()
                            self._answered = anyio.current_time()
                            scope.deadline = math.inf
                            started = True
                            task_status.started()
                            async with anyio.create_task_group() as tg:
                                tg.start_soon(self._watch)
                                tg.start_soon(self._listen)
                                await self._until_ended()
                                tg.cancel_scope.cancel()
                            self._closing.set()  # from here on, the server's exit is expected
                    except Exception:
                        if not started and spec.command is not None:
                            # Why it did not start is on its stderr (a traceback, a
                            # missing key), logged at info only: read it to its end, for
                            # the error to quote its last line.
                            self._closing.set()
                            with anyio.move_on_after(2):
                                await relayed.wait()
                        raise
                    # The client has stopped the server: its stderr ends (a child it left
                    # holding the pipe is not waited for).
                    with anyio.move_on_after(2):
                        await relayed.wait()
                    relay.cancel_scope.cancel()
            except Exception as exc:
                if not started:
                    raise McpStartFailed(_describe(exc) + self._last_words()) from exc
                self.lose(f"the connection failed: {_describe(exc)}")
            finally:
                self._client = None
                self.lost.set()
                self.done.set()
        if scope.cancelled_caught and not started:
            raise McpStartFailed(
                f"no answer within startup_timeout_s = {spec.startup_timeout_s:g}"
                + self._last_words()
            )

    async def _until_ended(self) -> None:
        async with anyio.create_task_group() as tg:

            async def closing() -> None:
                await self._closing.wait()
                tg.cancel_scope.cancel()

            async def lost() -> None:
                await self.lost.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(closing)
            tg.start_soon(lost)

    async def _connect(self, stack: AsyncExitStack, tg: Any, relayed: anyio.Event) -> Any:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        spec = self.spec
        transport: Any
        if spec.command is not None:
            read_end, write_end = os.pipe()
            errlog = os.fdopen(write_end, "w")
            stack.callback(errlog.close)
            tg.start_soon(self._relay_stderr, read_end, relayed)
            params = StdioServerParameters(
                command=_program(spec.command[0], dict(spec.env)),
                args=list(spec.command[1:]),
                env=dict(spec.env) or None,
                cwd=spec.cwd,
            )
            transport = stdio_client(params, errlog=errlog)
        else:
            assert spec.url is not None
            # The SDK's own defaults: 30 s to connect and write, 300 s to read (a server
            # may hold a response stream open), and no less than a call may take: a call's
            # answer is read on its response's stream, so a read timeout under `timeout_s`
            # cut a long call at 300 s as a closed connection, and dropped the link with
            # every other call on it. Calls are bounded by `timeout_s` themselves.
            read_s = max(HTTP_READ_TIMEOUT_S, spec.timeout_s + PING_TIMEOUT_S)
            http = httpx2.AsyncClient(
                headers=dict(spec.headers),
                timeout=httpx2.Timeout(30.0, read=read_s),
                event_hooks={"response": [self._note_refusal]},
            )
            await stack.enter_async_context(http)
            transport = streamable_http_client(spec.url, http_client=http)
        client = Client(transport, message_handler=self._on_message, cache=None)
        await stack.enter_async_context(client)
        if spec.command is not None:
            errlog.close()  # the child holds its own copy: its exit ends the stream
        return client

    async def _note_refusal(self, response: httpx2.Response) -> None:
        # The SDK answers any HTTP error status with "Server returned an error
        # response": a wrong token (401) and a broken server (500) would read the same.
        # Messages are POSTs; a GET for the server's own stream may well be refused (405).
        if response.status_code >= 400 and response.request.method == "POST":
            self._refusal = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()

    async def _list(self) -> tuple[ListedTool, ...]:
        listed: list[ListedTool] = []
        cursor: str | None = None
        for _ in range(100):  # pages; a server that never stops paging is cut off
            page = await self._client.list_tools(cursor=cursor)
            for tool in page.tools:
                schema = msgspec.json.encode(tool.input_schema).decode()
                description = tool.description or getattr(tool, "title", None) or ""
                listed.append(ListedTool(tool.name, description, schema))
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(listed)

    async def relist(self) -> tuple[ListedTool, ...]:
        """The server's tools now (after a list_changed notice)."""
        return await self._list()

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.listing_changed.set()

    async def _listen(self) -> None:
        """On a 2026-07-28 connection, list changes come only to a listener."""
        from mcp.client.subscriptions import ListenNotSupportedError

        with suppress(ListenNotSupportedError):
            try:
                async with self._client.listen(tools_list_changed=True) as events:
                    async for _ in events:
                        self.listing_changed.set()
            except Exception as exc:  # noqa: BLE001 - no listener: no list changes heard
                self._log.debug("no tools list_changed listener: %s", exc)

    async def check(self) -> None:
        """Ask the server for an answer (raises if it gives none).

        Not `ping`: protocol 2026-07-28 removed it (a server speaking it answers "Method
        not found", and the SDK deprecates `send_ping` outside its legacy mode), so a
        ping lost every modern link at its first idle check. The probe is the first page
        of `tools/list`, which every server with tools answers, on every protocol."""
        await self._client.list_tools()

    async def _watch(self) -> None:
        """Check when idle (or when a call failed oddly): no answer loses the link."""
        while True:
            with anyio.move_on_after(PING_EVERY_S):
                await self._check.wait()
            asked = self._check.is_set()
            self._check = anyio.Event()
            if self._busy(asked):
                continue
            try:
                with anyio.fail_after(PING_TIMEOUT_S):
                    await self.check()
            except Exception as exc:  # noqa: BLE001 - any failure of a check loses the link
                if self._busy(asked):
                    # A call began while the check waited for its answer (an idle check
                    # sent just before it): the server may be held by that call (see
                    # `_busy`), and losing the link failed the call as "stopped during
                    # the call".
                    continue
                self.lose(f"it did not answer a check: {_describe(exc)}")
                return
            self._answered = anyio.current_time()

    def _busy(self, asked: bool) -> bool:
        """Whether the server may be busy with a call rather than dead.

        A server busy with a call may answer nothing else until it is done (its work in
        its one event loop): a check then would take a busy server for a dead one and
        kill the call. Every call ends within `timeout_s`, so one that has answered
        nothing for longer (since its last check before the call, too) is checked, calls
        or not; so is one whose call failed oddly (`asked`)."""
        quiet = anyio.current_time() - self._answered
        busy = self.spec.timeout_s + PING_EVERY_S + PING_TIMEOUT_S
        return bool(self._calls) and not asked and quiet < busy

    async def _relay_stderr(self, fd: int, relayed: anyio.Event) -> None:
        """The server's stderr into the log; its end means the process has exited."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        pipe = os.fdopen(fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # a line over the limit: take what is there
                    line = await reader.read(1 << 20)
                if not line:
                    break
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    self._log.info("%s", text[:_STDERR_LINE_LIMIT])
                    self._last_line = text[:_LAST_WORDS_LIMIT]
        finally:
            transport.close()
            relayed.set()
        if not self._closing.is_set():
            self.lose("the server's process exited" + self._last_words())

    def _last_words(self) -> str:
        """What the server said last that often says why it stopped: its last line on
        stderr so far, or the HTTP error status it answered with."""
        if self._last_line:
            return f" (its last line on stderr: {self._last_line})"
        return f" (it answered {self._refusal})" if self._refusal else ""


def _program(command: str, env: dict[str, str]) -> str:
    """The program a stdio server runs: as given where it has a path or is on PATH (the
    server's own `env` PATH first); else the one of that name beside this Python, a
    console script of the same virtualenv (the README's `mcp-server-time` under
    `.venv/bin/frontmind serve`, the virtualenv not activated). Neither: an error that
    names it (the bare FileNotFoundError named no program)."""
    if os.sep in command or shutil.which(command, path=env.get("PATH", os.environ.get("PATH"))):
        return command
    beside = Path(sys.executable).parent / command
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise FileNotFoundError(f"no program {command!r} on PATH, nor beside {sys.executable}")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _describe(inner)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
