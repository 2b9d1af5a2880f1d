"""The tools: the built-in tools' definitions and guidance, the user's tools, execution.

Tool definitions are part of the cached prefix (tools come first), so they are built
once, in a fixed order: the built-in ones generated at import from their input Structs
(see _tool_spec), the user's when they are declared. Tool inputs are decoded into typed
Structs; a bad input goes back to the model as an error result, never an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec

from runtime import KernelError
from storage import AddMemory as StagedMemory
from storage import AddReminder as StagedReminder
from storage import (
    Effect,
    InvalidInput,
    Memory,
    MemoryProposal,
    NotFound,
    Reminder,
    Storage,
    StorageError,
    add_memory_effect,
    add_reminder_effect,
    complete_reminder_effect,
    moment,
    moment_or_none,
)

from ._digest import SAME_MEANING, ProposedMemory, decide_memory
from ._exceptions import ToolDefinitionError
from ._markup import escape_field
from ._mcp import MCP_PREFIX, McpHub
from ._messages import Turn, Wake
from ._recall import Embedder, text_vector, vectors_current
from ._server_tools import ServerTool
from ._tool_spec import Tool, ToolDefinition, ToolOutcome, builtin_definition
from ._trinket import Directory, trinket_name
from ._trinkets._reminders import describe_reminder
from ._trinkets._search import SECTION as SEARCH_SECTION
from ._trinkets._search import searcher_name

__all__ = [
    "TOOL_NAMES",
    "OfferedTool",
    "ToolDefinition",
    "ToolOutcome",
    "ToolRunner",
    "check_user_tools",
    "tool_definitions",
]

# One entry of the request's `tools` array: a client tool's definition (built-in, the
# user's, an MCP server's) or a server tool's JSON, in that order.
OfferedTool = ToolDefinition | ServerTool


def _described(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


# Each built-in tool's input: what the model's JSON is decoded into, and (docstring and
# field descriptions) what its definition is generated from.


class AddReminder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Create a reminder for the user, optionally due at a time."""

    text: Annotated[str, _described("What to remind the user of.")]
    due_in_minutes: Annotated[int | None, _described("Due this many minutes from now.")] = None
    due_at: Annotated[str | None, _described("Due time, ISO 8601 with a UTC offset.")] = None


class ListReminders(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """List the user's open reminders with their ids."""


class CompleteReminder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Mark a reminder as done by its id."""

    id: Annotated[int, _described("The reminder's id (#N).")]


class Remember(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Store a memory about the user or the work for later conversations."""

    text: Annotated[str, _described("A self-contained statement.")]
    importance: Annotated[float, _described("0 (trivia) to 1 (essential).")] = 0.5


class SearchContext(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Search past messages and memories; results appear in the notification center."""

    query: Annotated[str, _described("Keywords to search for.")]


_BUILTIN: dict[str, tuple[type[msgspec.Struct], str]] = {
    "add_reminder": (
        AddReminder,
        "add_reminder: when the user asks to be reminded of something, or agrees to a "
        "follow-up, create a reminder with a short imperative text. Give due_in_minutes for "
        "relative times and due_at (ISO 8601 with offset) for absolute ones; leave both out "
        "when no time was named. New reminders show up in active_reminders.",
    ),
    "list_reminders": (
        ListReminders,
        "list_reminders: the notification center already shows active reminders; call "
        "this only when you need the ids or the full list.",
    ),
    "complete_reminder": (
        CompleteReminder,
        "complete_reminder: when the user says a reminder is done, complete it by its "
        "#id from active_reminders. Never complete a reminder on your own initiative.",
    ),
    "remember": (
        Remember,
        "remember: store durable facts (preferences, decisions, names, commitments) as one "
        "self-contained sentence each. Relevant memories come back in relevant_memories.",
    ),
    "search_context": (
        SearchContext,
        "search_context: when the user refers to something not in view, start a search "
        "with a few keywords. It runs in the background; its passages appear in "
        "context_search_results on this or the next turn.",
    ),
}

# Generated once, at import: the same bytes on every turn.
_DEFINITIONS: dict[str, tuple[type[msgspec.Struct], ToolDefinition]] = {
    name: (struct, builtin_definition(name, struct, guidance))
    for name, (struct, guidance) in _BUILTIN.items()
}

TOOL_NAMES = tuple(_DEFINITIONS)


def check_user_tools(
    tools: Sequence[Tool[..., Any]], server_tools: Sequence[ServerTool] = ()
) -> None:
    """User tools need names of their own: none twice, none a built-in's or a server
    tool's, none in the MCP servers' `mcp__` namespace."""
    seen: set[str] = set()
    servers = {t.name: t.type for t in server_tools}
    for user_tool in tools:
        if user_tool.name in _DEFINITIONS:
            raise ToolDefinitionError(
                f"tool {user_tool.name!r}: the name is a built-in tool's; choose another"
            )
        if user_tool.name.startswith(MCP_PREFIX):
            raise ToolDefinitionError(
                f"tool {user_tool.name!r}: names starting with {MCP_PREFIX!r} are the MCP "
                "servers' tools; choose another"
            )
        if user_tool.name in servers:
            raise ToolDefinitionError(
                f"tool {user_tool.name!r}: the [[server_tool]] {servers[user_tool.name]} has "
                "that name; choose another"
            )
        if user_tool.name in seen:
            raise ToolDefinitionError(f"tool {user_tool.name!r} is declared twice")
        seen.add(user_tool.name)
    for server_tool in server_tools:
        if server_tool.name in _DEFINITIONS:
            raise ToolDefinitionError(
                f"[[server_tool]] {server_tool.type}: its name {server_tool.name!r} is a "
                "built-in tool's"
            )


def tool_definitions(
    enabled: Sequence[str], user_tools: Sequence[Tool[..., Any]] = ()
) -> tuple[ToolDefinition, ...]:
    """The enabled built-in tools in their fixed order, then the user's in theirs."""
    unknown = [name for name in enabled if name not in _DEFINITIONS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; the built-in tools are {list(TOOL_NAMES)}")
    check_user_tools(user_tools)
    builtin = tuple(_DEFINITIONS[name][1] for name in TOOL_NAMES if name in enabled)
    return builtin + tuple(t.definition for t in user_tools)


# The furthest ahead a relative due time may point: a century covers any real reminder,
# and stays far inside what every timezone can render (see storage.LATEST).
MAX_DUE_MINUTES = 100 * 366 * 24 * 60

log = logging.getLogger("frontmind.tools")


class ToolRunner:
    """Runs one tool call. Writes are staged on `effects` (applied by the turn's commit);
    whatever a tool raises comes back as an error result the model can read."""

    def __init__(
        self,
        storage: Storage,
        directory: Directory,
        enabled: Sequence[str],
        user_tools: Sequence[Tool[..., Any]] = (),
        *,
        timeout_s: float = 10.0,
        mcp: McpHub | None = None,
        server_tools: Sequence[ServerTool] = (),
        embedder: Embedder | None = None,
        same_cosine: float = SAME_MEANING,
        embed_deadline: float = 0.15,
    ) -> None:
        check_user_tools(user_tools, server_tools)
        # `remember` by meaning (`[memory] embedder`, `same_memory_cosine`,
        # `embed_deadline_ms`): the memory it repeats is found by its vector.
        self._embedder = embedder
        self._same_cosine = same_cosine
        self._embed_deadline = embed_deadline
        self._storage = storage
        self._directory = directory
        self._enabled = frozenset(enabled)
        self._user = {t.name: t for t in user_tools}
        self._timeout_s = timeout_s
        self._fixed = tool_definitions(tuple(enabled), user_tools)
        self._mcp = mcp
        self._server_tools = tuple(server_tools)
        self._offered: tuple[OfferedTool, ...] = (*self._fixed, *self._server_tools)
        self._mcp_offered: tuple[ToolDefinition, ...] = ()

    @property
    def mcp(self) -> McpHub | None:
        return self._mcp

    def offered(self) -> tuple[OfferedTool, ...]:
        """The request's `tools` array now: the built-in tools, the user's, the MCP
        servers' applied tools, then the server tools. Changes only when an MCP server's
        tools join or are reloaded (`McpHub`), so it is byte-identical turn after turn."""
        if self._mcp is not None:
            mcp = self._mcp.offered()
            if mcp is not self._mcp_offered:
                self._mcp_offered = mcp
                self._offered = (*self._fixed, *mcp, *self._server_tools)
        return self._offered

    def is_builtin(self, name: str) -> bool:
        """Whether `name` is one of Frontmind's own tools (they read and add to the
        turn's effects), not the user's or an MCP server's."""
        return name not in self._user and not name.startswith(MCP_PREFIX)

    def timeout_s(self, name: str) -> float:
        """How long a call of `name` may run: its own timeout (a user tool's, an MCP
        server's `timeout_s`), else `tools.timeout_s`."""
        user_tool = self._user.get(name)
        if user_tool is not None and user_tool.timeout_s is not None:
            return user_tool.timeout_s
        if self._mcp is not None:
            server_timeout = self._mcp.timeout_s(name)
            if server_timeout is not None:
                return server_timeout
        return self._timeout_s

    async def run(
        self, name: str, raw_input: msgspec.Raw, turn: Turn, effects: list[Effect]
    ) -> ToolOutcome:
        user_tool = self._user.get(name)
        if user_tool is not None:
            # The user's own code: its effects are its own, outside the turn's commit.
            return await user_tool.invoke(raw_input, turn)
        if self._mcp is not None and name.startswith(MCP_PREFIX):
            # Another process's code: every way it can fail is an error result.
            return await self._mcp.call(name, bytes(raw_input))
        entry = _DEFINITIONS.get(name)
        if entry is None or name not in self._enabled:
            return ToolOutcome(f"there is no tool named {name!r}", is_error=True)
        try:
            arguments = msgspec.json.decode(raw_input, type=entry[0])
        except msgspec.DecodeError as exc:
            return ToolOutcome(f"invalid input for {name}: {exc}", is_error=True)
        try:
            return await self._dispatch(arguments, turn, effects)
        except (StorageError, ValueError, OverflowError) as exc:
            return ToolOutcome(f"{name} failed: {exc}", is_error=True)
        # The actor boundary: a tool is code acting on model-chosen input, and nothing it
        # raises may take the turn (or the conversation actor) down. Cancellation is a
        # BaseException and passes through.
        except Exception as exc:
            log.exception("tool %s raised", name)
            return ToolOutcome(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)

    async def _dispatch(
        self, arguments: msgspec.Struct, turn: Turn, effects: list[Effect]
    ) -> ToolOutcome:
        storage = self._storage
        match arguments:
            case AddReminder(text=text, due_in_minutes=minutes, due_at=due_at):
                due = None
                if minutes is not None:
                    if not 0 <= minutes <= MAX_DUE_MINUTES:
                        return ToolOutcome(
                            f"due_in_minutes must be from 0 to {MAX_DUE_MINUTES} "
                            f"(100 years), not {minutes}",
                            is_error=True,
                        )
                    due = datetime.fromtimestamp(turn.now, UTC) + timedelta(minutes=minutes)
                elif due_at is not None:
                    try:
                        due = datetime.fromisoformat(due_at)
                    except ValueError:
                        return ToolOutcome(
                            f"due_at {due_at!r} is not an ISO 8601 time with an offset",
                            is_error=True,
                        )
                effect = add_reminder_effect(text, due, now=turn.now)
                effects.append(effect)
                due, now = moment_or_none(effect.due_at), moment(turn.now)
                pending = Reminder(0, effect.text, due, now, None, "agent")
                described = describe_reminder(pending, turn.now, turn.timezone).removeprefix("#0 ")
                return ToolOutcome(
                    f"added reminder: {described} (saved with this turn; "
                    "its #id shows in active_reminders from the next turn)",
                    update=f"active_reminders: + (new) {described}",
                )
            case ListReminders():
                # Every open one ("the full list"): a long result is cut with a note.
                reminders = await storage.active_reminders(turn.user, limit=-1)
                lines = [describe_reminder(r, turn.now, turn.timezone) for r in reminders]
                lines.extend(
                    f"(new, saved with this turn) {escape_field(e.text, 200)}"
                    for e in effects
                    if isinstance(e, StagedReminder)
                )
                return ToolOutcome("\n".join(lines) if lines else "no open reminders")
            case CompleteReminder(id=reminder_id):
                completion = complete_reminder_effect(reminder_id, now=turn.now)
                try:
                    reminder = await storage.reminder(turn.user, completion.reminder_id)
                except NotFound as exc:
                    return ToolOutcome(str(exc), is_error=True)
                if reminder.completed_at is not None:
                    return ToolOutcome(f"reminder #{reminder.id} is already completed")
                effects.append(completion)
                return ToolOutcome(
                    f"completed reminder #{reminder.id}",
                    update=f"active_reminders: - #{reminder.id} completed",
                )
            case Remember(text=text, importance=importance):
                return await self._remember(ProposedMemory(text, importance), turn, effects)
            case SearchContext(query=query):
                if not query.strip():
                    return ToolOutcome("the search query is empty", is_error=True)
                section = trinket_name(SEARCH_SECTION, turn.user, turn.continuum_id)
                if self._directory(section) is None:
                    return ToolOutcome("context search is not running", is_error=True)
                # Stored, so that any replica's searcher runs it and any replica's next
                # turn shows it; the search itself runs off the turn path.
                try:
                    await storage.request_search(turn.user, turn.continuum_id, query, now=turn.now)
                except InvalidInput as exc:
                    return ToolOutcome(str(exc), is_error=True)
                except StorageError as exc:
                    return ToolOutcome(f"search could not start: {exc}", is_error=True)
                searcher = self._directory(searcher_name())
                if searcher is not None:
                    # A full mailbox has a wake queued already; a missed wake is made up
                    # by the ticker.
                    with suppress(KernelError):
                        searcher.tell(Wake())
                return ToolOutcome(
                    f'search for "{query}" started; results will appear in context_search_results',
                    update=f'context_search_results: search "{query}" started',
                )
        raise AssertionError(f"unhandled tool input {arguments!r}")  # pragma: no cover

    async def _remember(
        self, proposed: ProposedMemory, turn: Turn, effects: list[Effect]
    ) -> ToolOutcome:
        """A memory that repeats a stored one (the rule the segment summaries follow,
        `deduplicate`) updates it in place; one this turn already staged is not staged
        again. With an embedder, the one it repeats is the nearest by meaning (a cosine
        reaching `same_cosine`), and the text's vector is stored with it; an embedder that
        is late or fails leaves it to the word-overlap rule (and the background worker)."""
        add_memory_effect(proposed.text, proposed.importance, now=turn.now)  # checked first
        staged = [
            MemoryProposal(e.text, e.importance, e.replaces, e.vector)
            for e in effects
            if isinstance(e, StagedMemory)
        ]
        vector, near = await self._nearest(proposed.text, turn)
        decided = await decide_memory(
            self._storage,
            turn.user,
            proposed,
            staged,
            near,
            now=turn.now,
            same_cosine=self._same_cosine,
            vector=vector,
        )
        if decided is None:
            return ToolOutcome("already remembered: nothing new to store")
        effects.append(
            add_memory_effect(
                decided.text,
                decided.importance,
                now=turn.now,
                replaces=decided.update_id,
                vector=vector,
            )
        )
        if decided.update_id is not None:
            return ToolOutcome(
                f"updated memory #{decided.update_id}, which said the same (saved with this turn)"
            )
        return ToolOutcome("remembered (saved with this turn)")

    async def _nearest(
        self, text: str, turn: Turn
    ) -> tuple[Sequence[float] | None, list[tuple[Memory, float]] | None]:
        """The text's vector and the user's memories nearest to it; (None, None) without
        an embedder, or when it is late, fails, or gives a vector the store refuses."""
        if self._embedder is None or not await vectors_current(self._storage, "remember"):
            return None, None
        vector = await text_vector(self._embedder, text, self._embed_deadline, purpose="remember")
        if vector is None:
            return None, None
        try:
            near = await self._storage.nearest_memories(turn.user, vector, k=5, now=turn.now)
        # Another dimension than the store's embedder, or the store's vectors are now
        # another embedder's (a replica started with it): as recall, words decide, and
        # the memory is still stored (a store that is down fails the word search next).
        except StorageError as exc:
            log.warning("remember: the vector was refused; words decide: %s", exc)
            return None, None
        return vector, near


def tool_guidance(definitions: Sequence[ToolDefinition]) -> str:
    return "\n\n".join(d.guidance for d in definitions)


def tool_hints(definitions: Sequence[ToolDefinition]) -> str:
    names = ", ".join(d.name for d in definitions)
    return f"Tools available this session: {names}." if definitions else ""
