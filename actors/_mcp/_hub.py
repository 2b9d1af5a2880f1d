"""The MCP servers of one instance: their actors, their links, and the tools they offer.

The tools a server offers are a snapshot, taken when it first connects: the `tools`
array leads every cached prefix, so it must not move under a conversation. A server
that lists other tools later (a `notifications/tools/list_changed`, or a restart that
brings a different list) has them kept aside as pending, with a warning saying what
changed and what applying it costs; they apply at the next start of the instance or an
explicit `reload()`. A server that is down keeps its snapshot in the array (its calls
answer with an error until it is back), so a crash costs no cache write either. A server
that could not start at all offers nothing until it first runs; its tools then join,
and that change is reported the same way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import msgspec
from anyio.abc import TaskGroup

from runtime import ActorRef, ActorSystem, KernelError, RestartPolicy

from .._exceptions import McpUnavailable
from .._tokens import BLOCK_FRAMING_TOKENS, estimate_tokens
from .._tool_spec import TOOL_NAME, ToolDefinition, ToolOutcome
from ._actor import Attach, Connect, Lost, McpServerActor
from ._link import ListedTool, McpLink, McpStartFailed
from ._spec import McpServer, mcp_tool_name

__all__ = ["DEFAULT_MCP_POLICY", "McpHub", "McpServerStatus", "ToolsReload"]

log = logging.getLogger("frontmind.mcp")

# A server that will not start is tried 4 times in a row (1, 2 and 4 s apart), then
# rested for a minute before the next try; `RETRY_EVERY_S` makes sure a try comes.
DEFAULT_MCP_POLICY = RestartPolicy(
    max_restarts=3, within=60.0, backoff_initial=1.0, backoff_max=30.0, cooldown=60.0
)
RETRY_EVERY_S = 30.0
# The Messages API's rule for the names of a tool's top-level properties.
_PROPERTY_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")

State = Literal["starting", "running", "down"]


class McpServerStatus(msgspec.Struct, frozen=True):
    """One server as the instance sees it now."""

    name: str
    transport: Literal["stdio", "http"]
    state: State
    tools: tuple[str, ...]  # the names offered to the model (mcp__server__tool)
    pending: tuple[str, ...] | None = None  # a newer listing, not applied yet
    error: str | None = None  # why it is down, or why its last start failed
    required: bool = False


class ToolsReload(msgspec.Struct, frozen=True):
    """What a reload changed in the `tools` array, and what that costs."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()  # same name, a new description or schema
    tools_tokens: int = 0  # the tools array's estimated size after the reload
    message: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.updated)


@dataclass
class _Server:
    spec: McpServer
    ref: ActorRef[Any, Any]
    state: State = "starting"
    error: str | None = None
    link: McpLink | None = None
    generation: int = 0
    applied: tuple[ToolDefinition, ...] | None = None  # None: never listed
    listed: tuple[ToolDefinition, ...] | None = None  # the newest listing
    attempted: anyio.Event = field(default_factory=anyio.Event)  # its first try is over


def _key(definition: ToolDefinition) -> tuple[str, str, bytes]:
    return definition.name, definition.description, bytes(definition.input_schema)


def tools_tokens(definitions: Sequence[ToolDefinition]) -> int:
    return sum(
        estimate_tokens(d.name + d.description + bytes(d.input_schema).decode())
        + BLOCK_FRAMING_TOKENS
        for d in definitions
    )


class McpHub:
    def __init__(
        self,
        system: ActorSystem,
        servers: Sequence[McpServer],
        *,
        policy: RestartPolicy | None = None,
        retry_every_s: float = RETRY_EVERY_S,
    ) -> None:
        self._system = system
        self._retry_every_s = retry_every_s
        self._host: TaskGroup | None = None
        self._serving = False
        self._servers: dict[str, _Server] = {}
        for spec in servers:
            ref = system.spawn(
                self._factory(spec),
                name=f"mcp:{spec.name}",
                mailbox=16,
                policy=policy or DEFAULT_MCP_POLICY,
                encoded=False,  # Attach answers with the link itself
            )
            self._servers[spec.name] = _Server(spec, ref)
        self._offered: tuple[ToolDefinition, ...] = ()
        self._routes: dict[str, tuple[str, str]] = {}  # tool name -> (server, its tool)
        self._changed = anyio.Event()  # set (and replaced) at every change of `status()`

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, holds: Callable[[list[McpServerStatus]], bool]) -> None:
        """Return once `holds(status())` is true, checked at every change."""
        while not holds(self.status()):
            await self._changed.wait()

    def _factory(self, spec: McpServer) -> Any:
        return lambda: McpServerActor(spec, self._open_link)

    # -- what the model is offered ------------------------------------------------------

    def offered(self) -> tuple[ToolDefinition, ...]:
        """The servers' applied tools: in config order, each server's by name."""
        return self._offered

    def owner(self, tool_name: str) -> str | None:
        route = self._routes.get(tool_name)
        return None if route is None else route[0]

    def timeout_s(self, tool_name: str) -> float | None:
        route = self._routes.get(tool_name)
        return None if route is None else self._servers[route[0]].spec.timeout_s

    def _definitions(
        self, spec: McpServer, listed: Sequence[ListedTool]
    ) -> tuple[ToolDefinition, ...]:
        """The server's tools as definitions: filtered by `allowed_tools`, each name a
        valid tool name, sorted (a server's own order may differ from start to start)."""
        allowed = None if spec.allowed_tools is None else set(spec.allowed_tools)
        found: dict[str, ToolDefinition] = {}
        for tool in listed:
            if allowed is not None and tool.name not in allowed:
                continue
            name = mcp_tool_name(spec.name, tool.name)
            if not TOOL_NAME.fullmatch(name):
                log.warning(
                    "MCP server %r: tool %r left out: %r is not a valid tool name "
                    "(1-64 of A-Z a-z 0-9 _ -)",
                    spec.name,
                    tool.name,
                    name,
                )
                continue
            refused = _schema_refused(tool.input_schema)
            if refused is not None:
                log.warning(
                    "MCP server %r: tool %r left out: the Messages API refuses its input "
                    "schema (%s), and with it every request that offers the tool",
                    spec.name,
                    tool.name,
                    refused,
                )
                continue
            description = tool.description or f"The tool {tool.name} of the MCP server {spec.name}."
            found[name] = ToolDefinition(
                name, description, msgspec.Raw(tool.input_schema.encode()), ""
            )
        if allowed is not None:
            missing = sorted(allowed - {t.name for t in listed})
            if missing:
                log.warning("MCP server %r does not offer allowed_tools %s", spec.name, missing)
        return tuple(found[name] for name in sorted(found))

    def _rebuild(self) -> None:
        offered: list[ToolDefinition] = []
        routes: dict[str, tuple[str, str]] = {}
        prefix_of = {name: mcp_tool_name(name, "") for name in self._servers}
        for name, server in self._servers.items():
            for definition in server.applied or ():
                if definition.name in routes:
                    log.warning(
                        "MCP server %r: tool %r left out: another server's tool has the name",
                        name,
                        definition.name,
                    )
                    continue
                routes[definition.name] = (name, definition.name.removeprefix(prefix_of[name]))
                offered.append(definition)
        self._offered = tuple(offered)
        self._routes = routes

    def _apply(self, server: _Server, listed: tuple[ToolDefinition, ...], why: str) -> ToolsReload:
        before = {d.name: _key(d) for d in self._offered}
        server.applied = listed
        self._rebuild()
        after = {d.name: _key(d) for d in self._offered}
        report = _report(before, after, tools_tokens(self._offered))
        if report.changed and self._serving:
            log.warning("MCP tools changed (%s): %s", why, report.message)
        return report

    # -- links ---------------------------------------------------------------------------

    async def _open_link(self, spec: McpServer) -> McpLink:
        """Start a connection (called by the server's actor as it is built)."""
        server = self._servers[spec.name]
        server.generation += 1
        link = McpLink(spec, server.generation)
        try:
            if self._host is None:
                raise McpStartFailed("the instance is not running")  # noqa: TRY301
            await self._host.start(link.serve)
        except McpStartFailed as exc:
            server.state, server.error = "down", str(exc)
            log.warning("MCP server %r did not start: %s", spec.name, exc)
            raise
        finally:
            server.attempted.set()
            self._notify()
        server.link, server.state, server.error = link, "running", None
        listed = self._definitions(spec, link.tools)
        server.listed = listed
        if server.applied is None:
            self._apply(server, listed, f"the MCP server {spec.name!r} is running")
        elif tuple(map(_key, listed)) != tuple(map(_key, server.applied)):
            self._pending(server)
        log.info("MCP server %r running: %d tools", spec.name, len(listed))
        self._notify()
        self._host.start_soon(self._follow, server, link)
        return link

    def _pending(self, server: _Server) -> None:
        assert server.listed is not None
        assert server.applied is not None
        before = {d.name: _key(d) for d in server.applied}
        after = {d.name: _key(d) for d in server.listed}
        report = _report(before, after, 0)
        log.warning(
            "MCP server %r lists other tools now (%s); they are kept out of the cached "
            "prefix until the next start or a tools reload, which makes every "
            "continuum's next turn re-write its whole cached prefix once",
            server.spec.name,
            report.message,
        )

    async def _follow(self, server: _Server, link: McpLink) -> None:
        """Watch a link: its tools list changing, and its end (which the actor hears)."""
        async with anyio.create_task_group() as tg:
            name = server.spec.name

            async def relist() -> None:
                while True:
                    await link.listing_changed.wait()
                    link.listing_changed = anyio.Event()
                    with anyio.move_on_after(server.spec.timeout_s):
                        try:
                            listed = self._definitions(server.spec, await link.relist())
                        except Exception as exc:  # noqa: BLE001 - its own failure only
                            log.warning("MCP server %r: relisting failed: %s", name, exc)
                            continue
                        server.listed = listed
                        if server.applied is not None and tuple(map(_key, listed)) != tuple(
                            map(_key, server.applied)
                        ):
                            self._pending(server)
                        self._notify()

            tg.start_soon(relist)
            await link.lost.wait()
            tg.cancel_scope.cancel()
        if link.generation == server.generation:
            server.state, server.error = "down", link.reason or "stopped"
            self._notify()
        with suppress(KernelError):  # given up on: the retry tick brings it back
            server.ref.tell(Lost(link.generation, link.reason))

    # -- running -----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[McpHub]:
        """Start every server (waiting for each one's first try), keep retrying those
        that are down, and stop them all on the way out. A `required` server that does
        not start makes this raise `McpUnavailable`."""
        async with anyio.create_task_group() as host:
            self._host = host
            try:
                await self._start()
                host.start_soon(self._retry)
                self._serving = True
                yield self
            finally:
                self._serving = False
                for server in self._servers.values():
                    if server.link is not None:
                        server.link.close()
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(10):
                        for server in self._servers.values():
                            if server.link is not None:
                                await server.link.done.wait()
                    # The actors too: one in its restart backoff would otherwise start
                    # its server again into the stopping instance (and fail, with a
                    # warning), the kernel having no word of the hub's end.
                    for server in self._servers.values():
                        await self._system.stop(server.ref, grace=0)
                host.cancel_scope.cancel()
                self._host = None

    async def _start(self) -> None:
        for server in self._servers.values():
            with suppress(KernelError):
                server.ref.tell(Connect())
        async with anyio.create_task_group() as tg:
            for server in self._servers.values():
                tg.start_soon(self._await_first_try, server)
        for name, server in self._servers.items():
            if server.state != "running" and server.spec.required:
                raise McpUnavailable(
                    f"[[mcp]] {name}: required, and it did not start: {server.error}"
                )
            if server.state != "running":
                log.warning(
                    "MCP server %r is not running (%s); it is retried in the background, "
                    "and its tools join once it runs",
                    name,
                    server.error,
                )

    async def _await_first_try(self, server: _Server) -> None:
        with anyio.move_on_after(server.spec.startup_timeout_s + 5):
            await server.attempted.wait()
        if not server.attempted.is_set():
            server.error = f"no answer within startup_timeout_s = {server.spec.startup_timeout_s:g}"

    async def _retry(self) -> None:
        while True:
            await anyio.sleep(self._retry_every_s)
            for server in self._servers.values():
                if server.state != "running":
                    with suppress(KernelError):  # resting after repeated failures
                        server.ref.tell(Connect())

    # -- calls ---------------------------------------------------------------------------

    async def call(self, tool_name: str, raw_input: bytes) -> ToolOutcome:
        route = self._routes.get(tool_name)
        if route is None:
            return ToolOutcome(f"there is no tool named {tool_name!r}", is_error=True)
        name, tool = route
        server = self._servers[name]
        if server.state != "running":
            return ToolOutcome(
                f"the MCP server {name!r} is not running ({server.error or 'starting'}); "
                "it is being restarted: try again later",
                is_error=True,
            )
        try:
            arguments = msgspec.json.decode(raw_input)
        except msgspec.DecodeError as exc:
            return ToolOutcome(f"invalid input for {tool_name}: {exc}", is_error=True)
        if not isinstance(arguments, dict):
            return ToolOutcome(f"invalid input for {tool_name}: not an object", is_error=True)
        try:
            link: McpLink = await server.ref.ask(Attach())
        except KernelError as exc:
            return ToolOutcome(f"the MCP server {name!r} is not available: {exc}", is_error=True)
        return await link.call(tool, arguments)

    # -- status and reload ---------------------------------------------------------------

    def status(self) -> list[McpServerStatus]:
        statuses = []
        for name, server in self._servers.items():
            applied = tuple(d.name for d in server.applied or ())
            pending = None
            listed, applied_now = server.listed, server.applied
            if (
                listed is not None
                and applied_now is not None
                and tuple(map(_key, listed)) != tuple(map(_key, applied_now))
            ):
                pending = tuple(d.name for d in listed)
            statuses.append(
                McpServerStatus(
                    name=name,
                    transport="stdio" if server.spec.command is not None else "http",
                    state=server.state,
                    tools=applied,
                    pending=pending,
                    error=server.error,
                    required=server.spec.required,
                )
            )
        return statuses

    async def reload(self) -> ToolsReload:
        """Apply every running server's current tool list (listed afresh now)."""
        before = {d.name: _key(d) for d in self._offered}
        for server in self._servers.values():
            link = server.link
            if server.state != "running" or link is None or not link.alive:
                continue
            try:
                with anyio.fail_after(server.spec.timeout_s):
                    server.listed = self._definitions(server.spec, await link.relist())
            except Exception as exc:  # noqa: BLE001 - that server keeps its tools
                log.warning("MCP server %r: relisting failed: %s", server.spec.name, exc)
                continue
            server.applied = server.listed
        self._rebuild()
        self._notify()
        after = {d.name: _key(d) for d in self._offered}
        report = _report(before, after, tools_tokens(self._offered))
        if report.changed:
            log.warning("MCP tools reloaded: %s", report.message)
        return report


def _schema_refused(input_schema: str) -> str | None:
    """Why the Messages API would refuse this input schema (None: it would not). A
    client tool's `input_schema` must be an object schema (`"type": "object"`) with no
    `oneOf`, `allOf` or `anyOf` at its top, and top-level property names of 1-64 of
    A-Z a-z 0-9 _ . - (a server may name them after an HTTP API's parameters, as
    `StartTime<`); MCP servers are not held to that."""
    try:
        schema = msgspec.json.decode(input_schema)
    except msgspec.DecodeError:
        return "not JSON"
    if not isinstance(schema, dict):
        return "not a JSON object"
    if schema.get("type") != "object":
        return 'its type is not "object"'
    combined = [key for key in ("oneOf", "allOf", "anyOf") if key in schema]
    if combined:
        return f"{', '.join(combined)} at its top level"
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for key in properties:
            if not _PROPERTY_KEY.fullmatch(key):
                return f"property name {key!r} is not 1-64 of A-Z a-z 0-9 _ . -"
    return _not_json_schema(schema)


def _not_json_schema(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a valid JSON Schema 2020-12 (None: it is). The API takes a
    client tool's `input_schema` as a "JSON schema (json-schema.org/draft/2020-12)" (the
    SDKs' `Tool.input_schema`) and refuses any other with "tools.N.custom.input_schema:
    JSON schema is invalid. It must match JSON Schema draft 2020-12"
    (acomagu/vscode-as-mcp-server#6): a misspelled `"type": "strnig"` deep in one tool's
    schema failed every request. The metaschema is the one the `mcp` SDK brings."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path.removeprefix("$").removeprefix(".") or "its top level"
        what = str(exc.message)
        what = what if len(what) <= 200 else what[:200] + "…"
        return f"not a valid JSON Schema 2020-12: at {where}: {what}"
    return None


def _report(
    before: dict[str, tuple[str, str, bytes]], after: dict[str, tuple[str, str, bytes]], tokens: int
) -> ToolsReload:
    added = tuple(sorted(set(after) - set(before)))
    removed = tuple(sorted(set(before) - set(after)))
    updated = tuple(sorted(n for n in set(before) & set(after) if before[n] != after[n]))
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in (("added", added), ("removed", removed), ("updated", updated))
        if names
    ]
    if not parts:
        return ToolsReload(tools_tokens=tokens, message="no change")
    message = (
        "; ".join(parts) + ". The tools array leads every cached prefix: each continuum's "
        "next turn writes its whole prefix to the cache once (one full cache write) "
        "instead of reading it"
    )
    return ToolsReload(added, removed, updated, tokens, message)
