"""The conversation actor: runs one continuum's turns, one at a time, in arrival order.

Each continuum has its own conversation actor (and composer); different continuums run
concurrently. A turn: compose → build the request → stream the reply → run tools (and
loop) → commit the turn in one shielded transaction. A failed or cancelled turn adds
nothing to the history; its record keeps the user's message and any partial reply. One
exception: a model call that fails, or a cancellation that comes, after tool rounds of
the turn completed (their side effects done) commits the user's message and those
rounds, closed by a note saying the turn stopped, in the same one transaction; the
record still says failed or cancelled (`_keep_rounds`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AsyncExitStack, aclosing, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import msgspec

from runtime import Actor, ActorRef, ActorStopped, KernelError, MessageFailed
from storage import (
    ContentBlock,
    ContinuumModel,
    Effect,
    Message,
    RawBlock,
    SectionStatus,
    StorageError,
    StorageUnavailable,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TtlChoice,
    TurnOutcome,
    TurnRecord,
    TurnStatus,
    TurnUsage,
    TurnWrite,
    UnknownContinuum,
    error_type,
    moment,
    storable,
)
from storage import Storage as StoragePort

from ._admission import Admission
from ._cache_book import CacheBook
from ._catalog import ModelRow, ModelSource
from ._composer import longest_gather
from ._content import (
    neutral_text,
    neutral_tool_blocks_json,
    neutral_tool_text,
    neutralize_blocks,
)
from ._cost import cost
from ._digest import summary_instruction
from ._events import (
    TextDelta,
    ThinkingDelta,
    Timings,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStarted,
)
from ._exceptions import (
    ComposeTimeout,
    FrontmindError,
    ModelOverloaded,
    ModelRefused,
    ModelRejected,
    ModelStreamError,
    ShuttingDown,
)
from ._history import CompactHistory
from ._history_cost import message_tokens
from ._layout import (
    ModelRequest,
    ThinkingConfig,
    build_request,
    out_tool,
    previous_boundary,
)
from ._llm import ModelClient, StreamDone, StreamStarted, StreamThinking
from ._media_fit import fit_media
from ._media_refused import media_refusal, suspects, with_unusable
from ._messages import Compose, Composed, Turn, TurnCommitted
from ._models import ModelChoice, check_model_choice, choose_model, known_row
from ._notification import delimiter
from ._observe import current_turn, failed, span, turn_span, usage_attributes
from ._result_fit import LoopFit, fit_loop, fit_results
from ._settings import CacheSettings, Settings
from ._tokens import BLOCK_FRAMING_TOKENS, estimate_tokens
from ._too_long import TokenScales, learn_too_long, prefix_estimate, tool_prompt_tokens
from ._tools import OfferedTool, ToolOutcome, ToolRunner
from ._ttl import (
    MAX_PAUSES,
    CacheView,
    TtlPolicy,
    policy_for,
    warm_plan,
)

__all__ = [
    "ConversationActor",
    "ConversationDeps",
    "Preview",
    "Reconfigure",
    "RideCache",
    "RunTurn",
    "WarmUp",
    "WarmUpDone",
]

turn_log = logging.getLogger("frontmind.turn")  # one line per turn, with its id

UPDATE_HEADER = "[notification center update]"


# Room kept in the model's context window for the system prompt, the notification
# center and the tools, beside the history and the reply; a system prompt larger than
# this (as composed) is kept room for as it is.
CONTEXT_RESERVE_TOKENS = 20_000
# The stop reasons after which the reply is whole but cut short.
TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})
_THINKING = frozenset({"thinking", "redacted_thinking"})
_PRODUCER_PAGE = 1000  # turn records read per page when finding who wrote the thinking


def _has_thinking(message: Message) -> bool:
    return any(isinstance(b, RawBlock) and b.kind in _THINKING for b in message.content)


def _has_thinking_in(messages: Sequence[Message]) -> bool:
    return any(m.role == "assistant" and _has_thinking(m) for m in messages)


def _without_pending_server_uses(messages: list[Message]) -> tuple[list[Message], int]:
    """`messages` without the server tool uses that have no result among them (a result
    follows its use in the same reply, or in the continuation of a paused one), and how
    many. A `pause_turn` reply may end in a use the server has not run yet: sent back,
    the model goes on; but a turn that ends there (paused at the loop limit, cut at
    max_tokens) stored it, and the API refuses such a use in any later request
    ("`web_search` tool use with id ... was found without a corresponding
    `web_search_tool_result` block"): every later turn failed."""
    uses = {
        str(msgspec.json.decode(b.json).get("id"))
        for m in messages
        for b in m.content
        if isinstance(b, RawBlock) and b.kind == "server_tool_use"
    }
    if not uses:
        return messages, 0
    # A result's id read from its JSON text: results (pages of search results) can be
    # large, and a history is replayed on every turn.
    uses -= {
        found[1]
        for m in messages
        for b in m.content
        if isinstance(b, RawBlock)
        and b.kind.endswith("_tool_result")
        and (found := _RESULT_OF.search(b.json)) is not None
    }
    if not uses:
        return messages, 0
    kept: list[Message] = []
    for message in messages:
        blocks = tuple(
            b
            for b in message.content
            if not (
                isinstance(b, RawBlock)
                and b.kind == "server_tool_use"
                and str(msgspec.json.decode(b.json).get("id")) in uses
            )
        )
        if len(blocks) != len(message.content):
            if all(isinstance(b, RawBlock) and b.kind in _THINKING for b in blocks):
                blocks = (*blocks, TextBlock("(no reply)"))  # a turn still needs a reply
            message = msgspec.structs.replace(message, content=blocks)
        kept.append(message)
    return kept, len(uses)


def _pending_left_out(pending: int) -> str:
    """The turn's warning for the server tool uses `_without_pending_server_uses` left out."""
    return (
        f"{pending} server tool call(s) the turn ended before the server ran were "
        "left out of the history (the API refuses a call without its result)"
    )


def _completed_rounds(tail: list[Message]) -> list[Message]:
    """A turn's messages up to its last completed tool round (the user message of its
    results): a round whose tools were still running has no results to store, and a
    reply after the last round is one the model had not finished (or a pause)."""
    for index in range(len(tail) - 1, 0, -1):
        if _holds_results(tail[index]):
            return tail[: index + 1]
    return tail[:1]


def _tool_rounds(tail: Sequence[Message]) -> int:
    """The tool rounds a turn's messages hold: its user messages of tool results (the
    first is the user's own)."""
    return sum(1 for m in tail[1:] if _holds_results(m))


def _holds_results(message: Message) -> bool:
    """Whether `message` is a user message of tool results (one round's end)."""
    return message.role == "user" and any(isinstance(b, ToolResultBlock) for b in message.content)


# A server tool result's `tool_use_id` (the API's ids hold no quote or backslash).
_RESULT_OF = re.compile(r'"tool_use_id"\s*:\s*"([^"\\]*)"')


log = logging.getLogger("frontmind.conversation")


# The token scale (`TokenScales`, actors/_too_long.py) is measured on requests of at
# least this many estimated tokens (a smaller one may only lower it).
SCALE_MIN_ESTIMATE = 4_000
# How long a cancelled turn may take to commit the tool rounds it completed
# (`_keep_rounds`): a storage write, normally milliseconds. Well within the engine's
# wait for a turn left early to wind down (`WIND_DOWN_S`, 5 s), so that a commit that
# does not finish still leaves time for the `cancelled` record written instead, and
# closing the service stays prompt.
KEEP_ON_CANCEL_S = 2.0


class RunTurn(msgspec.Struct, frozen=True, tag=True):
    turn_id: str
    text: str  # the message's text (for records, search and trinkets)
    content: tuple[ContentBlock, ...] = ()  # the message as stored; () means `text`


class Preview(msgspec.Struct, frozen=True, tag=True):
    """The request a turn with this text would send now; nothing is stored."""

    text: str
    content: tuple[ContentBlock, ...] = ()


class Reconfigure(msgspec.Struct, frozen=True, tag=True):
    """The continuum's own model settings changed (already stored and checked)."""

    model: ContinuumModel


class RideCache(msgspec.Struct, frozen=True, tag=True):
    """A background request for the segment [first_seq, end_seq): the continuum's prefix
    as its turns send it (tools, system, history, the same breakpoints), then the
    summary instruction as the final user message. Nothing is sent or stored here."""

    first_seq: int
    end_seq: int | None
    transcript: str  # the segment's text, quoted if it has left the history window


class WarmUp(msgspec.Struct, frozen=True, tag=True):
    """The continuum has been idle `cache.warm_after_seconds`: move its cached prefix
    into a 1h entry now, if its history entry is 5m and its pauses say that pays. Nothing
    is stored in the history."""


class WarmUpDone(msgspec.Struct, frozen=True):
    """What a warm-up did: sent or not, why, and the request's usage (zero if not sent)."""

    sent: bool
    reason: str
    usage: TurnUsage = TurnUsage()
    model: str = ""


# The warm-up's user message, after the last breakpoint: uncached, a few tokens. A user
# message, not a prefill: some models refuse requests that end on an assistant message.
WARM_MESSAGE = "(keep-alive: no answer needed)"


ConversationMessage = RunTurn | Preview | Reconfigure | RideCache | WarmUp


@dataclass(frozen=True)
class ConversationDeps:
    storage: StoragePort
    model: ModelClient
    tools: ToolRunner  # runs the calls, and says what the `tools` array is now
    settings: Settings
    models: ModelSource  # what each model accepts, costs and can read
    clock: Callable[[], float]
    trinkets: Sequence[ActorRef[Any, Any]]
    # Called with (user, continuum id) when a turn closed a segment (its job is stored).
    segment_closed: Callable[[tuple[str, str]], None] | None = None
    # True once the process is shutting down: a turn that reaches the front of the
    # queue then ends at once with an error event and a record, instead of running.
    draining: Callable[[], bool] = lambda: False
    ttl_policy: TtlPolicy | None = None  # None: the one `settings.cache.policy` names
    # The process's turn slots: a turn gives its own back as soon as it is over.
    admission: Admission | None = None
    # Told each turn's status and usage as its final record is written: the metrics count
    # what the records say (a failed or cancelled turn's calls were paid for too).
    ended: Callable[[TurnOutcome, TurnUsage], None] = lambda status, usage: None
    # The API's tokens per estimated token, by continuum (shared by every lane's copy).
    token_scales: TokenScales = field(default_factory=TokenScales)


def _user_blocks(content: tuple[ContentBlock, ...], text: str) -> tuple[ContentBlock, ...]:
    """The user's message as stored: its text blocks and text documents with any forged
    frame neutralised; images, and documents with nothing to neutralize, exactly as sent."""
    if not content:
        return (TextBlock(neutral_text(text)),)
    return neutralize_blocks(content)


def _tools_change(before: Sequence[OfferedTool] | None, after: Sequence[OfferedTool]) -> str:
    """What changed in the tools array since the last turn ("" for nothing, or no last
    turn in this process)."""
    if before is None or before is after:
        return ""
    if tuple(map(out_tool, before)) == tuple(map(out_tool, after)):
        # Rebuilt with the same definitions (a reload that found nothing new, an MCP
        # server restarted): the array sent is byte for byte the same, nothing changed.
        return ""
    old, new = {t.name: t for t in before}, {t.name: t for t in after}
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    parts = [f"+{', +'.join(added)}" if added else "", f"-{', -'.join(removed)}" if removed else ""]
    described = "; ".join(p for p in parts if p)
    return described or "definitions updated"


def _last_created_at(state: _Loaded) -> float | None:
    """When the history's newest message was stored (None for an empty history)."""
    return state.history.last_created_at()


class _Loaded(msgspec.Struct):
    """The continuum as this actor holds it between turns: its history window and where
    it stands in storage, the model settings, the cache bookkeeping, and the last turn's
    composition (the warm-up sends its system prompt: composing anew would run the
    trinkets between turns and change what the next turn surfaces)."""

    history: CompactHistory
    history_start: int
    message_count: int
    last_message_id: str | None
    model: ModelChoice
    cache: CacheBook = msgspec.field(default_factory=CacheBook)
    last_composed: Composed | None = None
    # Which model wrote the thinking blocks of the history (producer -> turn ids; ""
    # for turns whose record is gone): a model reads only some models' thinking blocks.
    thinking_by_model: dict[str, set[str]] = msgspec.field(default_factory=dict)
    # The tools array the last turn in this process sent (to tell a turn that the array
    # changed under it, and what that cost).
    tools: tuple[OfferedTool, ...] | None = None
    # The history's images and documents the API could no longer use (`_media_refused.py`,
    # by URL or data): sent as notes. Held per process, not stored: the stored history
    # keeps the blocks as they came, a page that was down may answer again (a new process
    # tries it once more, at the cost of one refused request), and it needs nothing of
    # the stores' schema.
    unusable: set[str] = msgspec.field(default_factory=set)

    @property
    def tokens(self) -> int:
        return self.history.tokens

    def committed(self, record: TurnRecord, stored: list[Message], new_start: int | None) -> None:
        """A turn's messages are stored (its history start moved to `new_start`, if set)."""
        if new_start is not None:
            self.history.drop_before(new_start)
            self.history_start = new_start
        self.history.extend(stored)
        self.message_count += len(stored)
        self.last_message_id = record.message_id
        self.cache.absorb(record)
        if any(m.role == "assistant" and _has_thinking(m) for m in stored):
            self.thinking_by_model.setdefault(record.model, set()).add(record.turn_id)


class ConversationActor(Actor[ConversationMessage, Any]):
    protocol = ConversationMessage

    def __init__(
        self,
        continuum_id: str,
        composer: ActorRef[Any, Any],
        deps: ConversationDeps,
        *,
        user: str,
    ) -> None:
        self._user = user  # the continuum is the user's own: every read and write is theirs
        self._id = continuum_id
        self._composer = composer
        self._deps = deps
        self._state: _Loaded | None = None
        cache = deps.settings.cache
        self._ttl_policy = deps.ttl_policy or policy_for(
            cache.system_ttl, cache.history_ttl, cache.policy
        )

    async def handle(self, message: ConversationMessage) -> Any:
        if isinstance(message, Preview | RideCache | WarmUp):
            try:
                return await self._ask(message)
            except FrontmindError as exc:
                # The asker's error (the store unreachable, a bad setting), not a crash:
                # the actor keeps its state and no restart is counted (`_refusals`
                # gives the asker this error itself).
                raise MessageFailed(str(exc)) from exc
            except ActorStopped:
                # Its composer was stopped under it: the lane is dropped for an asker who
                # has gone (`Engine._drop_unused` stops the composer first). The message
                # fails; the actor did not crash, and is not restarted to try it again.
                stopping = ShuttingDown(f"continuum {self._id!r} is stopping")
                raise MessageFailed(str(stopping)) from stopping
        if isinstance(message, Reconfigure):
            if self._state is not None:
                self._state.model = choose_model(self._deps.settings.model, message.model)
            return None
        if self._deps.storage.shared:
            turn = self._traced(message, self._leased(message))
        else:
            turn = self._traced(message, self._run(message))
        admission = self._deps.admission
        return turn if admission is None else self._admitted(message, turn, admission)

    async def _ask(self, message: Preview | RideCache | WarmUp) -> Any:
        if isinstance(message, Preview):
            if self._deps.storage.shared:
                await self._refresh()
            return await self._preview(message)
        if isinstance(message, RideCache):
            if self._deps.storage.shared:
                await self._refresh()
            return await self._ride(message)
        if self._deps.storage.shared:
            # Under the continuum's lease: never beside a turn on another replica.
            async with self._deps.storage.continuum_lease(self._user, self._id):
                await self._refresh()
                return await self._warm()
        return await self._warm()

    async def _admitted(
        self, message: RunTurn, turn: AsyncGenerator[TurnEvent, None], admission: Admission
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn (which holds its slot: its stream waited for it), giving the slot
        back as soon as the turn is over, before its last event is read, and whatever
        ends it (the stream's close releases it too)."""
        turn_id = message.turn_id
        try:
            async with aclosing(turn) as events:
                async for event in events:
                    if isinstance(event, TurnCompleted | TurnError):
                        admission.release(turn_id, ended=True)
                    yield event
        finally:
            admission.release(turn_id)

    async def _traced(
        self, message: RunTurn, turn: AsyncGenerator[TurnEvent, None]
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn, in its span, with its id on every line logged for it."""
        current_turn.set(message.turn_id)
        turn_log.debug("turn started in %s", self._id)
        with turn_span(message.turn_id, self._id) as failed:
            async with aclosing(turn) as events:
                async for event in events:
                    if isinstance(event, TurnError):
                        failed(event.message)
                        turn_log.warning("turn failed: %s: %s", event.type, event.message)
                    elif isinstance(event, TurnCompleted):
                        turn_log.info(
                            "turn completed: %d model calls, %.0f ms",
                            event.model_calls,
                            event.timings_ms.total,
                        )
                    yield event

    async def _leased(self, message: RunTurn) -> AsyncGenerator[TurnEvent, None]:
        """A turn on a store shared with other replicas: under the continuum's lease (so
        turns run one at a time, in arrival order, across every replica), and from a
        history checked against the store (another replica may have run the last turn)."""
        async with AsyncExitStack() as stack:
            try:
                lease = self._deps.storage.continuum_lease(self._user, self._id)
                await stack.enter_async_context(lease)
                await self._refresh()
            except StorageError as exc:
                # The database is out of reach (restarting, cut off): this turn's error,
                # as when its commit fails; not a crash of the continuum's actor. Its
                # events and record as for any turn that failed (every turn leaves one).
                turn, run = self._new_run(message)
                yield TurnStarted(turn.turn_id, self._id)
                kind = error_type(exc)
                await self._record_unfinished(run, "failed", f"{kind}: {exc}")
                yield TurnError(kind, str(exc), message.turn_id)
                return
            async with aclosing(self._run(message)) as events:
                async for event in events:
                    yield event

    async def _refresh(self) -> None:
        """Forget the loaded history if the store has moved on without this process."""
        if self._state is None:
            return
        try:
            stored = await self._deps.storage.continuum(self._user, self._id)
        except UnknownContinuum:
            stale = self._state.message_count != 0
        else:
            # The last message's id too: a continuum deleted and begun again elsewhere
            # may have reached the same count, with another history.
            stale = (stored.message_count, stored.history_start, stored.last_message_id) != (
                self._state.message_count,
                self._state.history_start,
                self._state.last_message_id,
            )
        if stale:
            self._state = None
        else:
            # Another replica may have changed the continuum's model settings.
            own = await self._deps.storage.continuum_model(self._user, self._id)
            self._state.model = choose_model(self._deps.settings.model, own)

    # -- history -----------------------------------------------------------------------

    async def _load(self) -> _Loaded:
        if self._state is None:
            storage = self._deps.storage
            model = choose_model(
                self._deps.settings.model, await storage.continuum_model(self._user, self._id)
            )
            try:
                continuum = await storage.continuum(self._user, self._id)
            except UnknownContinuum:
                self._state = _Loaded(CompactHistory((), message_tokens), 0, 0, None, model)
            else:
                # A server tool's use stored without its result (by a release that kept
                # a turn ending before the server ran it) is left out here, once: the
                # API refuses it, and every turn of the continuum failed. (What this
                # release commits never holds one: see `_without_pending_server_uses`.)
                stored, _ = _without_pending_server_uses(
                    await storage.history(self._user, self._id)
                )
                history = CompactHistory(stored, message_tokens)
                state = _Loaded(
                    history,
                    continuum.history_start,
                    continuum.message_count,
                    continuum.last_message_id,
                    model,
                )
                await self._load_producers(state)
                for record in await storage.turns(self._user, self._id, limit=MAX_PAUSES + 1):
                    # A failed turn whose tool rounds the history keeps (`_keep_rounds`:
                    # its record holds its first call's id) paid its calls and wrote
                    # the cache as a completed one, and this process absorbed it at its
                    # commit: read again, it counts alike, or the turn before it was
                    # taken for the last (its model, its TTLs, when it ended).
                    if record.status == "completed" or record.message_id is not None:
                        state.cache.absorb(record)
                self._state = state
        return self._state

    async def _load_producers(self, state: _Loaded) -> None:
        """Which model wrote each thinking block of the loaded history: from the turn
        records of the turns holding one (read only when there are such turns)."""
        wanted = {
            m.turn_id
            for m in state.history.messages()
            if m.role == "assistant" and _has_thinking(m)
        }
        before: tuple[datetime, str] | None = None
        while wanted:
            page = await self._deps.storage.turns(
                self._user, self._id, limit=_PRODUCER_PAGE, before=before
            )
            for record in page:
                if record.turn_id in wanted:
                    wanted.discard(record.turn_id)
                    state.thinking_by_model.setdefault(record.model, set()).add(record.turn_id)
            if len(page) < _PRODUCER_PAGE:
                break
            before = (page[0].started_at, page[0].turn_id)  # a page runs oldest first
        if wanted:
            state.thinking_by_model.setdefault("", set()).update(wanted)

    def _readable(
        self, state: _Loaded, history: list[Message], reader: str
    ) -> tuple[list[Message], dict[str, int]]:
        """The history as `reader` can read it: thinking blocks of models it cannot read
        are left out (the API would drop them: "Switching models mid-conversation",
        https://platform.claude.com/docs/en/build-with-claude/preserved-thinking), and
        how many were left out per model that wrote them.

        On a model that runs the prefix check (its row's `prefix_check`), every stored
        turn's thinking is left out: a block is valid only while everything sent before
        it is unchanged, and every turn drops the notification center its blocks were
        written after (trimming and summaries change the prefix too), so the API would
        answer 400 ("The block is bound to a different conversation"). Leaving them all
        out is valid ("Keeping the prefix unchanged", same page); the current turn's
        tool loop keeps its own."""
        catalog = self._deps.models.catalog
        row = catalog.lookup(reader)
        bound = row is not None and row.prefix_check != "none"
        unreadable: dict[str, str] = {}  # turn id -> the model that wrote its thinking
        for producer, turns in state.thinking_by_model.items():
            if producer and not catalog.can_read_thinking(reader, producer):
                unreadable.update(dict.fromkeys(turns, producer))
        if not unreadable and not bound:
            return history, {}
        dropped: dict[str, int] = {}
        kept_messages: list[Message] = []
        for message in history:
            writer = unreadable.get(message.turn_id)
            if (writer is None and not bound) or message.role != "assistant":
                kept_messages.append(message)
                continue
            kept = tuple(
                b for b in message.content if not (isinstance(b, RawBlock) and b.kind in _THINKING)
            )
            if writer is not None and len(kept) != len(message.content):
                dropped[writer] = dropped.get(writer, 0) + len(message.content) - len(kept)
            if kept:  # a message of nothing but thinking leaves the replay whole
                kept_messages.append(msgspec.structs.replace(message, content=kept))
        return kept_messages, dropped

    def _switched_from(self, state: _Loaded, row: ModelRow) -> str | None:
        """The model the last turn ran with, if this turn runs on another."""
        previous = state.cache.last_model
        if previous is not None and self._deps.models.catalog.canonical(previous) != row.name:
            return previous
        return None

    @staticmethod
    def _switch_cost(previous: str, row: ModelRow, usage: TurnUsage) -> str:
        """What the change of model cost the turn's first call, from its usage.

        Caches are per model ("What invalidates the cache": a model change invalidates
        everything), so the prefix the old model had cached is written again, at each
        part's TTL, where the old model would have read it. Unless the new model's own
        entries for this prefix are still alive (a switch back within their TTL): then
        they are read, and saying the whole prefix was written again would be wrong.
        """
        written = usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens:
            return (
                f"the model changed from {previous} to {row.name}: the cache is per model; "
                f"{usage.cache_read_input_tokens:,} tokens of this prefix were still cached "
                f"for {row.name} and were read, and this turn wrote {written:,}"
            )
        write = cost(
            TurnUsage(
                cache_creation_input_tokens=written,
                cache_creation_5m=usage.cache_creation_5m,
                cache_creation_1h=usage.cache_creation_1h,
            ),
            row,
        )
        read = cost(TurnUsage(cache_read_input_tokens=written), row)
        dollars = ""
        if write.input_usd is not None and read.input_usd is not None:
            dollars = f", about ${write.input_usd - read.input_usd:,.4f} more"
        return (
            f"the model changed from {previous} to {row.name}: the cache is per model, so "
            f"this turn wrote the whole prefix again ({written:,} tokens: "
            f"~{write.input_tokens:,.0f} base-price tokens where reading it would cost "
            f"~{read.input_tokens:,.0f}{dollars})"
        )

    def _switch_warnings(
        self, state: _Loaded, row: ModelRow, dropped: dict[str, int]
    ) -> tuple[str, ...]:
        """The thinking blocks a change of model leaves out, said in the turn's warnings
        (what the change cost is said once its first call is answered: `_switch_cost`)."""
        warnings: list[str] = []
        catalog = self._deps.models.catalog
        previous = state.cache.last_model
        for producer, count in sorted(dropped.items()):
            if previous is not None and catalog.canonical(previous) == row.name:
                break  # said on the turn of the switch
            warnings.append(
                f"{count} thinking block(s) written by {producer} are left out of the replay: "
                f"{row.name} cannot read them (the API would drop them; "
                "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking)"
            )
        return tuple(warnings)

    def _choose_ttl(
        self, state: _Loaded, composed: Composed, history: Sequence[Message], now: float
    ) -> TtlChoice:
        """This turn's breakpoint TTLs, from the policy (actors/_ttl.py)."""
        return self._ttl_policy.choose(self._cache_view(state, composed, history, now))

    def _cache_view(
        self,
        state: _Loaded,
        composed: Composed,
        history: Sequence[Message],
        now: float,
        *,
        pending: bool = False,
    ) -> CacheView:
        """What the policy knows now; `pending`: the next turn has not come yet (its
        pause is unknown, not counted among the pauses)."""
        book = state.cache
        pauses, since_last, previous = book.timing(now, pending=pending)
        system = self._prefix_tokens(composed)
        # Token counts from the compact history's columns: nothing is re-estimated, and
        # nothing is built per message (this runs on every turn, over the whole window).
        # A turn's messages are consecutive: the increment is the last run of one turn id.
        floor = history[0].seq if history else 0
        history_tokens = increment = 0
        last_turn: int | None = None
        for seq, turn_id, tokens in state.history.entries():
            if seq < floor:
                continue
            history_tokens += tokens
            if turn_id != last_turn:
                last_turn, increment = turn_id, 0
            increment += tokens
        row = known_row(self._deps.models.catalog, state.model.name)
        return CacheView(
            now=now,
            pauses=pauses,
            since_last=since_last,
            previous=previous,
            system_tokens=system,
            history_tokens=history_tokens,
            increment_tokens=increment,
            reusable=book.reusable(),
            system_entry=book.system_entry[0] if book.system_entry else None,
            system_entry_known=True,
            write_5m=row.cache_write_5m,
            write_1h=row.cache_write_1h,
            read=row.cache_read,
            min_cacheable=row.min_cacheable,
        )

    def _prefix_tokens(self, composed: Composed) -> int:
        """The tools and the system prompt as composed, in estimated tokens."""
        tools = map(out_tool, self._deps.tools.offered())
        return prefix_estimate(tools, (s.text for s in composed.system))

    def _tool_prompt(self) -> int:
        """The tool-use system prompt the API adds to this continuum's requests, in the
        API's tokens (none when no tools are offered): a fixed count the scale does not
        apply to (`tool_prompt_tokens`). The tool_choice is the one `build_request`
        sends: none (auto) with parallel tools, else auto."""
        choice = None if self._deps.settings.tools.parallel else "auto"
        table = self._deps.models.catalog.tool_prompt_tokens
        return tool_prompt_tokens(table, bool(self._deps.tools.offered()), choice)

    def _sent_estimate(self, composed: Composed, messages: int) -> int:
        """A request of this turn in estimated tokens: the tools and system prompt, the
        notification center and `messages` (the history and the turn's own messages, as
        sent)."""
        notification = estimate_tokens(composed.notification) + BLOCK_FRAMING_TOKENS
        return self._prefix_tokens(composed) + notification + messages

    def _measure(self, composed: Composed, messages: int, counted: int) -> None:
        """Take the API's count of a turn's request as the continuum's token scale (each
        call of a tool loop: a tool may return denser text than the conversation held).
        A small request says little (the API's framing weighs more in it than the
        text): only one of `SCALE_MIN_ESTIMATE` tokens or more
        counts, or a smaller one that says less than the scale held (that overhead only
        raises its ratio): else, once dense text that raised the scale left the window,
        a small history never measured it again and prose was trimmed as dense.

        The tool-use system prompt is no text of the estimate: its known count comes off
        the API's before the ratio is taken (it weighed as dense text, in a small
        request most of all, and the history was trimmed short of its budget)."""
        estimate = self._sent_estimate(composed, messages)
        if estimate <= 0:
            return
        key = (self._user, self._id)
        measured = max(0, counted - self._tool_prompt()) / estimate
        if estimate >= SCALE_MIN_ESTIMATE or measured < self._deps.token_scales.get(key):
            self._deps.token_scales.set(key, measured)

    def _refused_media(
        self,
        state: _Loaded,
        history: list[Message],
        tail: list[Message],
        refusal: ModelRejected,
        noted: AbstractSet[str],
        answered: LoopFit | None,
    ) -> tuple[list[str], bool]:
        """The blocks to send as notes, the request refused for one of its images or
        documents (`_media_refused.py`), and whether they are the turn's own tool
        results (else the history's); none for another refusal, or when every block of
        the refusal's kind that can give way is `noted` already (a request can hold
        blocks of both kinds: a refusal names one).

        The blocks the turn's tools returned since the last answered request come first
        (that request, with all before them, was used: a tool's dead link is no reason
        to leave the history's images out), then the history's, then the turn's older
        results. What must go as it was sent (`_bound`: thinking is bound to it) cannot
        give way, nor can the message being answered (the user must fix it): refused for
        one of those, the turn fails with an error naming them."""
        found = media_refusal(str(refusal))
        if found is None:
            return [], False
        known = state.unusable | noted
        bound = self._bound(state, tail, answered)
        since = len(tail) if answered is None else len(answered.tail)
        own = suspects(tail, found.kind)
        # The turn's results that can go as notes: past the user's message and the bound.
        open_ = [s for s in own if s.place[0] >= max(1, bound) and s.key not in known]
        newest = [s.key for s in open_ if s.place[0] >= since]
        if newest:
            return newest, True
        if not bound:
            fresh = [s.key for s in suspects(history, found.kind) if s.key not in known]
            if fresh:
                return fresh, False
        if open_:
            return [s.key for s in open_], True
        # What is left in the request: the user's message, and what is bound.
        left = [s for s in own if s.place[0] < max(1, bound)] or own
        if not left:
            return [], False
        named = " or ".join(s.label for s in left)
        said = (
            f'the Messages API could not use an image or document of this turn: "{found.words}" '
            f"(its error names no block; it can be {named})"
        )
        if any(0 < s.place[0] < bound for s in left):
            said += (
                f"; on {state.model.name}, the turn's thinking is bound to all its tool loop "
                "sent before it (the API checks that prefix), so a block sent then cannot "
                "be left out now"
            )
        if not _tool_rounds(tail):
            said += (
                ". Nothing was stored: send the message again without it, or with a copy the "
                "API can use"
            )
        # (After tool rounds, they are kept with such blocks as notes: `_keep_rounds`.)
        raise ModelRejected(said) from refusal

    @staticmethod
    def _unusable_warnings(fresh: AbstractSet[str], results: AbstractSet[str]) -> tuple[str, ...]:
        """What the turn says of the blocks that went as notes since the API could not
        use one of them (`fresh`: those not remembered before; `results`: those the
        turn's tools returned)."""
        said: tuple[str, ...] = ()
        history = len(fresh - results)
        if history:
            said += (
                "the Messages API could not use an image or document of the history "
                "(a URL that no longer answers, or an image it cannot process), and "
                f"its error names none: the {history} of the history it can be go "
                "to the model as a note from now on (the history keeps them)",
            )
        own = len(fresh & results)
        if own:
            said += (
                "the Messages API could not use an image or document a tool returned in "
                "this turn (a URL that does not answer, or an image it cannot process), and "
                f"its error names none: the {own} it can be went to the model as a note, "
                "and will from now on (the history keeps the results whole)",
            )
        return said

    def _learn_too_long(self, composed: Composed, messages: int, refusal: ModelRejected) -> bool:
        """A request the API refused as longer than the window: the scale its count
        says, a little over, so the request trims to fit (else every turn of the
        continuum was refused so from then on). Whether it was such a refusal."""
        estimate = self._sent_estimate(composed, messages)
        key = (self._user, self._id)
        return learn_too_long(self._deps.token_scales, key, estimate, refusal, self._tool_prompt())

    def _budget(self, state: _Loaded, composed: Composed | None) -> int:
        """The history's token budget: the configured one, within what the model's window
        leaves beside the reply, the notification center and the system prompt with the
        tools (`composed`; None: not composed yet in this process)."""
        budget = self._deps.settings.history.budget_tokens
        return max(1, min(budget, self._room(state, composed)))

    def _room(self, state: _Loaded, composed: Composed | None) -> int:
        """What the model's window leaves the history, in the API's tokens."""
        # The documents are the user's system prompt (up to documents.budget_tokens): a
        # window that ignored them let the history grow until every request was too long.
        # The tool-use system prompt is counted apart, unscaled: left out, a history that
        # filled the room made a request some 450 tokens over the window.
        scale = self._deps.token_scales.get((self._user, self._id))
        prefix = 0 if composed is None else round(self._prefix_tokens(composed) * scale)
        prefix += self._tool_prompt()
        return (
            known_row(self._deps.models.catalog, state.model.name).context_window
            - state.model.max_tokens
            - self._deps.settings.composer.notification_budget_tokens
            - max(CONTEXT_RESERVE_TOKENS, prefix)
        )

    async def _trim_point(self, state: _Loaded, composed: Composed | None) -> int | None:
        """A new history start when the history is over budget, else None.

        Trimming jumps to a segment boundary (else a turn boundary) that leaves at most
        `keep_fraction` of the budget, so the prefix changes only on the turns where
        trimming happens, and the cache survives all the others. A segment boundary
        counts only while it keeps at least half of that: after a long pause the newest
        segment starts at the last turn, and jumping there kept that turn alone.
        """
        budget_tokens = self._budget(state, composed)
        # The budget is the API's tokens, not the estimate's.
        scale = self._deps.token_scales.get((self._user, self._id))
        if state.tokens * scale <= budget_tokens:
            return None
        target = budget_tokens * self._deps.settings.history.keep_fraction / scale
        segments = await self._deps.storage.recent_segments(self._user, self._id, limit=10_000)
        segment_starts = {s.first_seq for s in segments}
        remaining = state.tokens
        turn_start: int | None = None
        previous_turn: int | None = None
        first: int | None = None
        last_turn_start: int | None = None
        for seq, turn_id, tokens in state.history.entries():
            first = seq if first is None else first
            starts_turn = turn_id != previous_turn
            previous_turn = turn_id
            if starts_turn:
                last_turn_start = seq
            if starts_turn and remaining <= target:
                if seq in segment_starts and remaining >= target / 2:
                    return seq
                if turn_start is None:
                    turn_start = seq
            remaining -= tokens
        if turn_start is None and last_turn_start != first:
            # The newest turn alone is over `keep_fraction` of the budget (a long message,
            # a large tool result): no boundary reaches the target, and keeping it all
            # let the history grow past the budget, and the model's window, for good.
            # Keep the newest turn only.
            return last_turn_start
        return turn_start

    # -- composition and requests -----------------------------------------------------------

    async def _compose(self, turn: Turn) -> Composed:
        # The composer keeps its own deadlines (a section's own may be far longer than
        # `deadline_ms`): this catches only a composer that never answers.
        limit = longest_gather(self._deps.settings.composer) + 5
        try:
            with span("frontmind.compose", turn.turn_id), anyio.fail_after(limit):
                composed: Composed = await self._composer.ask(Compose(turn))
        except TimeoutError:
            raise ComposeTimeout("the composer did not answer in time") from None
        return composed

    async def _window(
        self, state: _Loaded, composed: Composed | None
    ) -> tuple[list[Message], int | None]:
        """The history a request with `composed` sends (as its model can read it), and the
        new history start if it trims."""
        start = await self._trim_point(state, composed)
        return self._fitted(state, composed, start), start

    def _fitted(
        self, state: _Loaded, composed: Composed | None, start: int | None
    ) -> list[Message]:
        """The history a request sends within the model's window. Trimming keeps at
        least the newest turn, which alone may be over it (a tool loop read near the
        window's edge, a switch to a model of a smaller window): then its oldest tool
        results and documents go as notes (`_result_fit.py`), or every later request
        was too long. Over the configured budget only, the turn goes whole: trimming
        cuts between turns, never inside the one the next message follows up on. The
        blocks the API could not use go as their notes (`_shown`), as a turn sends them."""
        readable, _ = self._readable(state, state.history.messages(start), state.model.name)
        history, saved = self._shown(readable, state.unusable)
        scale = self._deps.token_scales.get((self._user, self._id))
        used = state.history.tokens_from(start) - saved
        over = used - max(1, self._room(state, composed)) / scale
        return history if over <= 0 else fit_results(history, math.ceil(over))

    def _fit_call(
        self,
        state: _Loaded,
        composed: Composed,
        start: int | None,
        shown: tuple[list[Message], int],
        tail: list[Message],
        answered: LoopFit | None,
    ) -> tuple[LoopFit, int]:
        """A call of the turn within the model's window, and its messages' estimated
        tokens. The turn's own tool loop adds a result a round: past the window, the
        next request was refused as too long and the turn lost every round before it.
        It is fitted as a turn over the window is (`fit_loop`); the turn stores all.

        On a model that runs the prefix check, once the loop holds thinking, all that the
        last answered request (`answered`) sent goes again as it went: its thinking is
        bound to it (a note put in later made the API refuse it), and each of the loop's
        assistant turns must open with its own (it cannot be left out instead). Only
        what came since gives way: the newest results are cut.

        `shown`: the history as `_shown` gives it (the blocks the API could not use as
        their notes, counted as such: the estimate is what the API's count is measured
        against)."""
        scale = self._deps.token_scales.get((self._user, self._id))
        fixed = self._bound(state, tail, answered)
        noted = 0
        history, history_saved = shown
        if answered is not None and fixed:
            history, tail = answered.history, [*answered.tail, *tail[fixed:]]
            history_saved, noted = answered.history_saved, answered.noted
        used = state.history.tokens_from(start) - history_saved
        used += sum(message_tokens(m) for m in tail)
        over = used - max(1, self._room(state, composed)) / scale
        if over <= 0:
            # A copy: the turn's own list grows, this one stays what was sent.
            return LoopFit(history, [*tail], history_saved=history_saved, noted=noted), used
        fit = fit_loop(history, tail, math.ceil(over), fixed=fixed)
        if fixed:
            fit = fit._replace(history_saved=history_saved, noted=noted + fit.noted)
        else:
            fit = fit._replace(history_saved=history_saved + fit.history_saved)
        return fit, used - fit.saved

    def _bound(self, state: _Loaded, tail: list[Message], answered: LoopFit | None) -> int:
        """How many of the turn's messages (and the history before them) must go again as
        the last answered request sent them (`_fit_call`): 0 unless the model runs the
        prefix check and the loop holds thinking."""
        if answered is None or not _has_thinking_in(tail):
            return 0
        row = known_row(self._deps.models.catalog, state.model.name)
        return 0 if row.prefix_check == "none" else len(answered.tail)

    @staticmethod
    def _shown(history: list[Message], unusable: AbstractSet[str]) -> tuple[list[Message], int]:
        """`history` with the blocks the API could not use as their notes, and the
        estimated tokens that saves. Once a turn (or on what changes it): every block of
        the history is read for it, when there are blocks to replace."""
        if not unusable:
            return history, 0
        shown = with_unusable(history, unusable)
        saved = sum(
            message_tokens(was) - message_tokens(now)
            for was, now in zip(history, shown, strict=True)
            if was is not now
        )
        return shown, saved

    def _request(
        self,
        composed: Composed,
        history: Sequence[Message],
        tail: Sequence[Message],
        *,
        rolling: bool,
        previous_id: str | None,
        model: ModelChoice,
        ttl: TtlChoice,
        tools: Sequence[OfferedTool] | None = None,
    ) -> ModelRequest:
        """`history` as fitted (`_fit_call`, `_fitted`): the blocks the API could not use
        are their notes already."""
        settings = self._deps.settings
        cache: CacheSettings = msgspec.structs.replace(
            settings.cache, system_ttl=ttl.system, history_ttl=ttl.history
        )
        notification = composed.notification
        if settings.composer.channel == "user_message" and notification and tail:
            # The context rides at the start of the current user message; the stored
            # history keeps the message without it (only `tail` is committed).
            first = tail[0]
            tail = [Message("user", (TextBlock(notification), *first.content)), *tail[1:]]
            notification = ""
        # What of the history's images and documents the request can carry (the API's
        # count, size and many-image limits hold for the request, not for a message).
        offered = self._deps.tools.offered() if tools is None else tools

        def other_bytes() -> int:
            system = sum(len(s.text.encode()) for s in composed.system)
            return system + len(notification.encode()) + len(msgspec.json.encode(offered))

        row = known_row(self._deps.models.catalog, model.name)
        fitted = fit_media(
            [*history, *tail],
            current=len(history),
            max_media=row.max_media,
            other_bytes=other_bytes,
        )
        history, tail = fitted[: len(history)], fitted[len(history) :]
        thinking = None
        if model.thinking == "enabled":
            thinking = ThinkingConfig("enabled", model.budget_tokens, model.thinking_display)
        elif model.thinking == "adaptive":
            thinking = ThinkingConfig("adaptive", display=model.thinking_display)
        elif row.thinking_default == "on":
            # Off on a model that thinks unless told: say so (omitting it would think).
            thinking = ThinkingConfig("disabled")
        return build_request(
            model=model.name,
            max_tokens=model.max_tokens,
            tools=offered,
            system=composed.system,
            history=history,
            boundary=previous_boundary(history),
            notification=notification,
            tail=tail,
            cache=cache,
            rolling=rolling,
            previous_message_id=previous_id,
            channel=settings.composer.channel,
            thinking=thinking,
            effort=model.effort,
            delimiter=delimiter(settings.composer.frame),
            parallel_tools=settings.tools.parallel,
        )

    def _new_run(self, message: RunTurn) -> tuple[Turn, _TurnRun]:
        """The turn a `RunTurn` asks for, and what it gathers for its record."""
        turn = self._turn(message.turn_id, message.text)
        return turn, _TurnRun(turn, self._id, self._deps.settings.model.name, self._deps.clock())

    def _turn(self, turn_id: str, text: str) -> Turn:
        settings = self._deps.settings
        return Turn(turn_id, self._id, text, self._deps.clock(), settings.timezone, self._user)

    async def _preview(self, preview: Preview) -> ModelRequest:
        state = await self._load()
        turn = msgspec.structs.replace(self._turn("preview", preview.text), preview=True)
        composed = await self._compose(turn)
        start = await self._trim_point(state, composed)
        readable, _ = self._readable(state, state.history.messages(start), state.model.name)
        user = Message("user", _user_blocks(preview.content, preview.text))
        # Fitted as the turn's first request is: its message counted.
        shown = self._shown(readable, state.unusable)
        fit, _ = self._fit_call(state, composed, start, shown, [user], None)
        history = fit.history
        return self._request(
            composed,
            history,
            fit.tail,
            rolling=False,
            previous_id=state.last_message_id,
            model=state.model,
            ttl=self._choose_ttl(state, composed, history, self._deps.clock()),
        )

    async def _ride(self, ride: RideCache) -> ModelRequest:
        """The history exactly as the last turn left it (its messages included, no new
        trim): the breakpoints fall where the next turn puts them, so this call reads
        what the conversation cached and writes only what the next turn would write."""
        state = await self._load()
        # The system sections come from the composer as a turn gets them (they are stable
        # by design); an empty message surfaces no memories and starts no search.
        composed = await self._compose(self._turn("background", ""))  # the user's own
        # As the next turn will send it (its thinking as that model reads it, a turn over
        # the budget fitted: as the turns send it, or it was too long on every try).
        history = self._fitted(state, composed, None)
        instruction = summary_instruction(history, ride.first_seq, ride.end_seq, ride.transcript)
        # This request's history breakpoint falls where the next turn's will, and a mark
        # at or before the highest cache hit writes nothing (prompt caching, "Mixing
        # different TTLs"): the entry written here is the one the next turn keeps. So
        # its TTL is the policy's choice for the next turn, made now, not a repeat of the
        # last turn's marks (a 5m write here would make the next turn's 1h mark moot).
        view = self._cache_view(state, composed, history, self._deps.clock(), pending=True)
        ttl = self._ttl_policy.choose(msgspec.structs.replace(view, ahead=True))
        state.cache.rode(ttl.history)
        user = Message("user", (TextBlock(instruction),))
        return self._request(
            msgspec.structs.replace(composed, notification=""),
            history,
            [user],
            rolling=False,
            previous_id=None,
            model=state.model,
            ttl=ttl,
        )

    # -- the cache warm-up -------------------------------------------------------------------

    async def _warm(self) -> WarmUpDone:
        """One small request that reads the cached prefix and writes the last exchange
        under a 1h breakpoint (actors/_ttl.py, `warm_plan`), when it pays; never stored."""
        cache = self._deps.settings.cache
        if not cache.warm:
            return WarmUpDone(False, "off: cache.warm = false")
        state = await self._load()
        now = self._deps.clock()
        if state.message_count == 0:
            return WarmUpDone(False, "no turn to warm after")
        refusal = state.cache.warm_refusal(now, cache.warm_after_seconds)
        if refusal is not None:
            return WarmUpDone(False, refusal)
        if state.model.thinking != "off":
            # max_tokens must exceed a thinking budget, and a request with other thinking
            # settings than the turns' re-writes the cached messages (prompt caching,
            # "What invalidates the cache").
            return WarmUpDone(False, f"thinking {state.model.thinking}: not warmed")
        composed = state.last_composed
        if composed is None:
            return WarmUpDone(False, "no turn composed in this process yet")
        history, new_start = await self._window(state, composed)
        if new_start is not None:
            return WarmUpDone(False, "the next turn trims the history: its prefix changes")
        view = self._cache_view(state, composed, history, now, pending=True)
        without, with_, seen = warm_plan(view, cache.warm_after_seconds)
        if with_ >= without:
            return WarmUpDone(
                False,
                f"not worth it: {seen}; expected {with_ - without:,.0f} base-price tokens "
                "more with a warm-up",
            )
        reason = f"warm-up: {seen}; expected {without - with_:,.0f} base-price tokens saved"
        ttl = TtlChoice("1h", "1h", reason)
        request = self._request(
            msgspec.structs.replace(composed, notification=""),
            history,
            [Message("user", (TextBlock(WARM_MESSAGE),))],
            rolling=False,
            previous_id=None,
            model=state.model,
            ttl=ttl,
        )
        # One output token: the reply is not wanted, only the cache write.
        request = msgspec.structs.replace(request, max_tokens=1)
        done: StreamDone | None = None
        try:
            async with aclosing(self._deps.model.stream(request)) as events:
                async for event in events:
                    if isinstance(event, StreamDone):
                        done = event
        except FrontmindError as exc:
            log.warning("cache warm-up of %r failed: %s", self._id, exc)
            return WarmUpDone(False, f"failed: {exc}")
        if done is None:
            return WarmUpDone(False, "failed: the stream ended without a reply")
        state.cache.warmed(now)
        log.info("cache warm-up of %r: %s", self._id, reason)
        return WarmUpDone(True, reason, done.usage, request.model)

    # -- the turn ------------------------------------------------------------------------------

    async def _run(self, message: RunTurn) -> AsyncGenerator[TurnEvent, None]:
        deps = self._deps
        turn, run = self._new_run(message)
        try:
            yield TurnStarted(turn.turn_id, self._id)
        except (anyio.get_cancelled_exc_class(), GeneratorExit):
            # Left at its first event (its reader gone before the actor reached it):
            # recorded like any other cancelled turn, or it would leave no record.
            await self._record_unfinished(run, "cancelled", "cancelled")
            raise
        if deps.draining():
            reason = "the service is shutting down; this turn did not start"
            await self._record_unfinished(run, "cancelled", f"{ShuttingDown.type}: {reason}")
            yield TurnError(ShuttingDown.type, reason, turn.turn_id)
            return
        # True while a model call (and the reading of its reply) is under way: a failure
        # there after tool rounds of the turn ran keeps those rounds (`_keep_rounds`).
        calling = False
        # The turn's messages so far (bound before anything is awaited: a cancellation
        # anywhere reads it for the rounds to keep).
        tail: list[Message] = []
        try:
            # A `running` record, replaced when the turn ends: a process killed in the
            # middle of the turn still leaves its record (and the user's message), made
            # "interrupted" when the store is opened again or the continuum's next turn
            # starts.
            await self._record_unfinished(run, "running", None)
            state = await self._load()
            model = state.model  # fixed for the whole turn
            run.model = model.name
            # Refused before any model call if the model would refuse it (the settings
            # were checked when set; the catalog may have learnt more since).
            catalog = await deps.models.meet(model.name)
            check_model_choice(model, deps.settings.composer.channel, catalog)
            row = known_row(catalog, model.name)
            # The history's start as this turn sends it (loaded and checked against the
            # store by `_refresh`, then moved if this turn trims): the manifest needs no
            # read of its own for it, and marks what this very turn trims out.
            start = await self._trim_point(state, state.last_composed)
            in_context = state.history_start if start is None else start
            turn = msgspec.structs.replace(turn, history_start=in_context)
            composed = await self._compose(turn)
            # The system prompt as composed now (a document added since, or the first
            # turn in this process) may leave the history less room than the estimate
            # above: it gives way further rather than the request being too long.
            fitted = await self._trim_point(state, composed)
            run.compose_ms = composed.compose_ms
            run.warnings = composed.warnings
            if fitted is not None and (start is None or fitted > start):
                start = fitted
                # Composed again (rare: the prompt grew) so the manifest marks what this
                # trim left out, not tell the model it still sees it. As a preview: the
                # first pass already counted what it showed (memories' uses) and wrote
                # what it writes, and its warnings (the cache guard's) stand.
                turn = msgspec.structs.replace(turn, history_start=start)
                again = msgspec.structs.replace(turn, preview=True)
                composed = await self._compose(again)
                run.compose_ms += composed.compose_ms
            run.sections = composed.sections
            readable, dropped = self._readable(state, state.history.messages(start), model.name)
            new_start = start
            # The tools array, fixed for the whole turn (its tool loop included).
            tools = deps.tools.offered()
            tools_changed = _tools_change(state.tools, tools)
            view = self._cache_view(state, composed, readable, turn.now)
            run.ttl = self._ttl_policy.choose(view)
            run.warnings += self._switch_warnings(state, row, dropped)
            switched_from = self._switched_from(state, row)
            state.last_composed = composed
            tail = [Message("user", _user_blocks(message.content, message.text))]
            previous_id = state.last_message_id
            refused_at = 0  # the call refused as too long and sent again, fitted anew
            noted: set[str] = set()  # blocks sent as notes since the API refused them
            noted_results: set[str] = set()  # of them, those the turn's tools returned
            answered: LoopFit | None = None  # the last request the model answered
            shown = self._shown(readable, state.unusable)
            while True:
                run.calls += 1
                # The turn's tool rounds with the blocks the API could not use as their
                # notes (in the request only: the turn stores its results whole).
                own = tail
                if len(tail) > 1 and (state.unusable or noted):
                    unusable = state.unusable | noted
                    own = [tail[0], *with_unusable(tail[1:], unusable, running=True)]
                fit, sent = self._fit_call(state, composed, start, shown, own, answered)
                if fit.full:
                    run.calls -= 1  # not sent
                    yield self._window_full(run, tail)
                    break
                run.fitted(fit)
                request = self._request(
                    composed,
                    fit.history,
                    fit.tail,
                    rolling=run.calls > 1,
                    previous_id=previous_id,
                    model=model,
                    ttl=run.ttl,
                    tools=tools,
                )
                done: StreamDone | None = None
                calling = True
                try:
                    async with aclosing(self._call(request, run)) as events:
                        async for event in events:
                            if isinstance(event, StreamDone):
                                done = event
                            else:
                                yield event
                except ModelRejected as refusal:
                    retry, results = self._refused_media(
                        state, readable, tail, refusal, noted, answered
                    )
                    if retry:
                        # Refused for an image or a document of the history, or one a
                        # tool returned: sent once more with them as notes.
                        noted.update(retry)
                        if results:
                            noted_results.update(retry)
                        shown = self._shown(readable, state.unusable | noted)
                        run.calls -= 1
                        continue
                    too_long = self._learn_too_long(composed, sent, refusal)
                    if not too_long or refused_at == run.calls:
                        raise
                    # Refused as longer than the window, the estimate short of the API's
                    # count (a process that restarted has forgotten the continuum's token
                    # scale; a tool returned denser text than the turn held): fitted
                    # again on the API's count (the first call trimmed too), it is sent
                    # once more rather than fail the turn and lose its rounds.
                    refused_at = run.calls
                    narrower = await self._trim_point(state, composed) if run.calls == 1 else None
                    if narrower is not None and (start is None or narrower > start):
                        start = new_start = narrower
                        # Composed again, as for a grown prompt: the manifest marks the trim.
                        turn = msgspec.structs.replace(turn, history_start=start)
                        again = msgspec.structs.replace(turn, preview=True)
                        composed = state.last_composed = await self._compose(again)
                        run.compose_ms += composed.compose_ms
                        readable, _ = self._readable(
                            state, state.history.messages(start), model.name
                        )
                        shown = self._shown(readable, state.unusable | noted)
                    refit = self._fit_call(state, composed, start, shown, own, answered)
                    if refit[1] >= sent:
                        raise  # nothing more to leave out
                    run.calls -= 1
                    continue
                assert done is not None
                answered = fit
                run.call_usage.append(done.usage)
                # (`sent` counts the blocks the API could not use as their notes.)
                self._measure(composed, sent, done.usage.total_input)
                if noted - state.unusable:
                    run.warnings += self._unusable_warnings(noted - state.unusable, noted_results)
                    state.unusable |= noted
                if run.calls == 1:
                    run.cache_miss_reason = done.cache_miss_reason
                    if tools_changed:
                        written = done.usage.cache_creation_input_tokens
                        run.warnings += (
                            f"the tools array changed since this continuum's last turn "
                            f"({tools_changed}): this turn wrote {written:,} tokens to the "
                            "cache (one full cache write of its prefix)",
                        )
                    if switched_from is not None:
                        run.warnings += (self._switch_cost(switched_from, row, done.usage),)
                    # The next turn extends this call's prefix (the history breakpoint),
                    # not a later call's, whose tail held this turn's notification center.
                    run.anchor_id = done.message_id
                previous_id = done.message_id
                run.stop_reason = done.stop_reason
                content = self._settle(done, run, model)
                calling = False
                tail.append(Message("assistant", content))
                if done.stop_reason == "pause_turn":
                    # A server tool's loop paused: send the reply back as it is, and the
                    # model continues the same turn (Stop reasons and fallback,
                    # https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons).
                    if run.calls >= deps.settings.tools.max_iterations:
                        run.warnings += ("the turn stayed paused (pause_turn) at the loop limit",)
                        break
                    continue
                uses = [b for b in content if isinstance(b, ToolUseBlock)]
                if done.stop_reason != "tool_use" or not uses:
                    break
                if run.calls >= deps.settings.tools.max_iterations:
                    yield self._stop_loop(uses, run, tail)
                    break
                async with aclosing(self._tool_round(uses, turn, tail, run)) as steps:
                    async for step in steps:
                        yield step
            tail, pending = _without_pending_server_uses(tail)
            if pending:
                run.warnings += (_pending_left_out(pending),)
            record = run.record("completed", deps.clock())
            previous_at = _last_created_at(state)
            await self._commit(state, record, tail, new_start, run.effects)
            deps.ended("completed", record.usage)
            state.tools = tools
        except (FrontmindError, KernelError) as exc:
            if isinstance(exc, StorageError):
                # The store failed or refused the commit (the continuum moved on under
                # this turn): the loaded history may no longer be the store's, so the
                # next turn reads it again (kept, a refused commit refused every turn).
                self._state = None
            kind = error_type(exc)
            said = str(exc)
            kept = None
            # A refusal keeps nothing: the API's docs require the turn that triggered it
            # to be removed or rephrased before the conversation goes on ("Handle
            # streaming refusals": continuing without resetting is refused again), and a
            # tool's result may be what triggered it.
            if calling and not isinstance(exc, StorageError | KernelError | ModelRefused):
                kept = await self._keep_rounds(state, run, tail, new_start, exc)
            if kept is None:
                await self._record_unfinished(run, "failed", f"{kind}: {exc}")
            else:
                state.tools = tools
                said = f"{said}; {kept}: send a message to continue"
            wait = exc.retry_after if isinstance(exc, ModelOverloaded) else None
            yield TurnError(kind, said, turn.turn_id, wait)
            return
        # The actor boundary: a bug anywhere in the turn ends this turn (recorded, and
        # the caller told which turn), not the continuum's actor.
        except Exception as exc:
            log.exception("turn %s of %r failed", turn.turn_id, self._id)
            detail = f"{type(exc).__name__}: {exc}"
            kind = error_type(exc)
            await self._record_unfinished(run, "failed", f"{kind}: {detail}")
            yield TurnError(kind, f"the turn failed: {detail}", turn.turn_id)
            return
        except (anyio.get_cancelled_exc_class(), GeneratorExit):
            # A cancelled turn (its client hung up, its reader left, the service shutting
            # down) keeps the tool rounds it completed, as a failed one does: their tools
            # ran, and the message sent again must not run them twice. The commit is
            # shielded and bounded (`KEEP_ON_CANCEL_S`), so the turn still ends promptly;
            # nothing is yielded (a generator closed by `aclose` may await, not yield).
            # Failing that, or with no round completed, it keeps nothing. The
            # cancellation is raised on either way.
            kept = None
            if _tool_rounds(tail):
                kept = await self._keep_rounds(
                    state, run, _completed_rounds(tail), new_start, None, within=KEEP_ON_CANCEL_S
                )
            if kept is None:
                await self._record_unfinished(run, "cancelled", "cancelled")
            else:
                state.tools = tools
            raise
        self._after_commit(record, previous_at, new_start)
        yield TurnCompleted(
            turn_id=turn.turn_id,
            text="".join(run.text),
            usage=run.usage,
            timings_ms=Timings(run.compose_ms, run.first_token_ms, record.total_ms),
            sections=run.sections,
            cache_miss_reason=run.cache_miss_reason,
            model_calls=run.calls,
            warnings=record.warnings,
            stop_reason=run.stop_reason,
        )

    def _after_commit(
        self, record: TurnRecord, previous_at: float | None, new_start: int | None
    ) -> None:
        """Tell who waits on a committed turn: the summary worker if it closed a segment,
        and the trinkets."""
        deps = self._deps
        gap = deps.settings.history.segment_gap_minutes * 60
        paused = previous_at is not None and record.started_at.timestamp() - previous_at > gap
        if deps.segment_closed is not None and (paused or new_start is not None):
            # This turn closed a segment (by a pause, or by trimming into it): its summary
            # job is stored; the worker runs it once the turn is over.
            deps.segment_closed((self._user, self._id))
        for trinket in deps.trinkets:
            # A trinket that is gone or full misses one warm-up; the turn stands.
            with suppress(KernelError):
                trinket.tell(TurnCommitted(self._user, self._id, record.turn_id))

    async def _keep_rounds(
        self,
        state: _Loaded,
        run: _TurnRun,
        tail: list[Message],
        new_start: int | None,
        failure: FrontmindError | None,
        *,
        within: float = math.inf,
    ) -> str | None:
        """A model call of the turn failed (`failure`), or the turn was cancelled
        (`failure` None; `tail` then ends on its last completed round), after tool
        rounds of the turn ran: their tools' side effects are done (a mail sent, a file
        written), and a turn that stored nothing left the user to send the message
        again and run them twice. So the user's message and the completed rounds are
        committed as a completed turn's are (in one transaction, with their tools'
        staged writes, within `within` seconds), closed by a reply the runtime writes
        saying the turn stopped and why (its error's type: nothing the error's text
        might hold; or that it was cancelled), as `_stop_loop` closes the loop at its
        limit; the record stays failed, or cancelled. What the failed (or cut off) call
        streamed is not stored (the record keeps it as the partial reply), and server
        tool uses with no result are left out, as at completion. What the turn's error
        says of the kept rounds; None when no round ran, or the commit failed or did not
        finish in time (the turn then ends keeping nothing)."""
        rounds = _tool_rounds(tail)
        if not rounds:
            return None
        if failure is None:
            status: TurnOutcome = "cancelled"
            error = "cancelled"
            why = f"the turn was cancelled after {rounds} round(s) of tool calls"
        else:
            status = "failed"
            kind = error_type(failure)
            error = f"{kind}: {failure}"
            why = f"after {rounds} round(s) of tool calls, the next model call failed ({kind})"
        closing = (
            f"I stopped before I could answer: {why}. The tool calls above ran; their "
            "results are kept."
        )
        kept, pending = _without_pending_server_uses(
            [*tail, Message("assistant", (TextBlock(closing),))]
        )
        found = media_refusal(str(failure)) if isinstance(failure, ModelRejected) else None
        if found is not None:
            # The API could not use an image or document of the turn (a tool's screenshot
            # by a URL that does not answer): stored as its note, not to be sent again
            # with every later request.
            kept = with_unusable(kept, {s.key for s in suspects(kept, found.kind)})
        said = (
            f"{rounds} tool round(s) of this turn were kept in the history (their tools "
            "ran), closed by a note that the turn stopped before the model could answer"
        )
        warnings = run.warnings
        run.warnings += (said,)
        if pending:
            run.warnings += (_pending_left_out(pending),)
        run.bill_broken_call()  # the failed (or cut off) call was billed its input
        record = run.record(status, self._deps.clock(), error=error, kept=True)
        previous_at = _last_created_at(state)
        try:
            # The staged writes of the kept rounds' tools (a cancelled turn's round still
            # running, left out, may have staged some: they go with it).
            effects = run.effects[: run.round_effects]
            await self._commit(state, record, kept, new_start, effects, within=within)
        except Exception:
            # The store refused the commit (the continuum moved on under the turn, the
            # database out of reach), failed in it or did not finish it in time: the
            # turn ends keeping nothing, as any turn whose commit failed, and the next
            # turn reads the history again (what the store holds is not known here).
            log.warning("the tool rounds of turn %s were not kept", record.turn_id, exc_info=True)
            self._state = None
            run.warnings = warnings
            return None
        self._deps.ended(status, record.usage)
        self._after_commit(record, previous_at, new_start)
        return said

    def _settle(
        self, done: StreamDone, run: _TurnRun, model: ModelChoice
    ) -> tuple[ContentBlock, ...]:
        """The reply's content as it will be stored, by its stop reason.

        - refusal: the turn is left out of the history, as the docs require ("reset the
          conversation context by removing or updating the turn that was refused",
          https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/
          handle-streaming-refusals); the caller gets an error saying so.
        - max_tokens, model_context_window_exceeded: the reply is kept as far as it
          went, without its tool calls (a cut-off or unanswered tool_use would make the
          stored history invalid); the caller is told through the turn's warnings.
        """
        if done.stop_reason == "refusal":
            raise ModelRefused(
                "the model declined this message (stop_reason refusal); its reply is not "
                "stored: rephrase the message, or try another model"
            )
        content = done.content
        if done.stop_reason in TRUNCATED:
            content = tuple(b for b in content if not isinstance(b, ToolUseBlock))
            limit = (
                f"max_tokens ({model.max_tokens})"
                if done.stop_reason == "max_tokens"
                else "the model's context window"
            )
            run.warnings += (
                f"the reply was cut off at {limit}; its unfinished parts were left out",
            )
        elif done.dropped:
            run.warnings += (f"{done.dropped} unfinished block(s) of the reply were left out",)
        if all(isinstance(b, RawBlock) and b.kind in _THINKING for b in content):
            # Nothing but thinking (or nothing at all): the stored turn still needs a reply.
            content = (*content, TextBlock("(no reply)"))
        return content

    async def _tool_round(
        self, uses: list[ToolUseBlock], turn: Turn, tail: list[Message], run: _TurnRun
    ) -> AsyncGenerator[ToolStarted | ToolFinished, None]:
        """Run the calls of one reply side by side: a model asks for several calls in one
        reply when they do not depend on each other (the API's parallel tool use), and
        three 2-second lookups take 2 seconds, not 6 (with `[tools] parallel = false`,
        one after another, in order). Frontmind's own tools take turns (they read and
        add to the turn's effects, in the calls' order). The results, in
        the calls' order, and what changed become one user message, results first, so
        nothing sits between a tool_use and its result. Events come as they happen: each
        call's start, then each finish as it finishes. The round is complete (its
        results in `tail`) once its last call finished, before that finish is yielded: a
        turn cancelled from then on keeps it (`_keep_rounds`), whether or not its reader
        saw the finish."""
        outcomes: list[ToolOutcome | None] = [None] * len(uses)
        effects = run.effects
        if len(uses) == 1 or not self._deps.settings.tools.parallel:
            # The common case (no task to start), and `[tools] parallel = false`: one
            # call at a time, should the model ask for several in one reply anyway.
            steps = self._one_by_one(uses, turn, effects, outcomes)
        else:
            steps = self._side_by_side(uses, turn, effects, outcomes)
        async with aclosing(steps) as events:
            async for step in events:
                if None not in outcomes and tail[-1].role == "assistant":
                    tail.append(self._round_results(uses, outcomes))
                    run.round_effects = len(effects)
                yield step
        assert tail[-1].role == "user"  # the round ended: every call gave its outcome

    async def _one_by_one(
        self,
        uses: list[ToolUseBlock],
        turn: Turn,
        effects: list[Effect],
        outcomes: list[ToolOutcome | None],
    ) -> AsyncGenerator[ToolStarted | ToolFinished, None]:
        """Run the calls one after another, in order; each call's outcome goes in
        `outcomes` at its index before its finish is yielded (as `_side_by_side`)."""
        for index, use in enumerate(uses):
            yield ToolStarted(use.id, use.name, use.input_json)
            outcome = await self._run_tool(use, turn, effects)
            outcomes[index] = outcome
            yield ToolFinished(use.id, use.name, outcome.is_error, outcome.content)

    @staticmethod
    def _round_results(uses: list[ToolUseBlock], outcomes: list[ToolOutcome | None]) -> Message:
        """The round's user message: its results in the calls' order, then what changed."""
        results: list[TextBlock | ToolResultBlock] = []
        updates: list[str] = []
        for use, done in zip(uses, outcomes, strict=True):
            assert done is not None  # the round ended: every call gave its outcome
            results.append(ToolResultBlock(use.id, done.content, done.is_error, done.blocks_json))
            if done.update:
                updates.append(done.update)
        if updates:
            results.append(TextBlock(UPDATE_HEADER + "\n" + "\n".join(updates)))
        return Message("user", tuple(results))

    async def _side_by_side(
        self,
        uses: list[ToolUseBlock],
        turn: Turn,
        effects: list[Effect],
        outcomes: list[ToolOutcome | None],
    ) -> AsyncGenerator[ToolStarted | ToolFinished, None]:
        """Run the calls at once, each in a task of its own, and yield their events as
        they happen; each call's outcome goes in `outcomes` at its index. Frontmind's own
        tools take turns, in the order asked.

        The tasks are this generator's: started here, cancelled and awaited in its
        `finally`, however it ends (the caller leaving closes it). They are not in an
        anyio task group because a group cannot stay open across a `yield`: its cancel
        scope would sit on the caller's stack while the caller enters and leaves scopes
        of its own (anyio raises "exit a cancel scope that isn't the current task's")."""
        builtins = anyio.Lock()  # FIFO: the built-in calls run in the order they were asked
        Item = ToolStarted | ToolFinished | Exception
        # Room for every event of the round: a call never waits on the reader to send.
        send, receive = anyio.create_memory_object_stream[Item](2 * len(uses))

        async def call(index: int, use: ToolUseBlock) -> None:
            try:
                if self._deps.tools.is_builtin(use.name):
                    async with builtins:
                        outcome = await self._run_tool(use, turn, effects)
                else:
                    outcome = await self._run_tool(use, turn, effects)
                outcomes[index] = outcome
                send.send_nowait(ToolFinished(use.id, use.name, outcome.is_error, outcome.content))
            # A bug (every tool's failure is its result): the round raises it, as the
            # call would have in the caller's task.
            except Exception as exc:  # noqa: BLE001 - handed on, not swallowed
                send.send_nowait(exc)

        # Every call's start before any finish: a call that finishes without waiting (an
        # async tool with nothing to await) would otherwise finish before the next starts.
        for use in uses:
            send.send_nowait(ToolStarted(use.id, use.name, use.input_json))
        tasks = [asyncio.create_task(call(i, use)) for i, use in enumerate(uses)]
        try:
            with receive:
                for _ in range(2 * len(uses)):
                    item = await receive.receive()
                    if isinstance(item, Exception):
                        raise item
                    yield item
        finally:
            for task in tasks:
                task.cancel()  # those still running: the round is over or abandoned
            with anyio.CancelScope(shield=True):
                await asyncio.gather(*tasks, return_exceptions=True)
            send.close()

    def _stop_loop(self, uses: list[ToolUseBlock], run: _TurnRun, tail: list[Message]) -> TextDelta:
        """At the iteration limit: answer the calls unrun and close the turn ourselves,
        so the stored history stays valid (every tool_use answered, ending on assistant)."""
        limit = self._deps.settings.tools.max_iterations
        note = f"not run: the tool loop limit ({limit} model calls) was reached"
        tail.append(
            Message("user", tuple(ToolResultBlock(u.id, note, is_error=True) for u in uses))
        )
        return self._close_loop(run, tail, f"I stopped after {limit} rounds of tool calls.")

    def _window_full(self, run: _TurnRun, tail: list[Message]) -> TextDelta:
        """The newest results would go to the model as their notes alone (`LoopFit.full`:
        on a model that checks its thinking's prefix, what the loop sent before must go
        again unchanged and fills the window): the model could only ask for smaller parts,
        each sent the same way, until the loop's limit. Close the turn ourselves instead;
        the history stores the results whole."""
        run.warnings += (
            "the tool loop ended before its last result(s) went to the model: the model's "
            "context window is full (what the loop sent before must be sent again "
            "unchanged), so they could go only as a note (the history stores them whole)",
        )
        closing = (
            "I stopped: the conversation's context window is full, so the last tool "
            "result could not reach me."
        )
        return self._close_loop(run, tail, closing)

    @staticmethod
    def _close_loop(run: _TurnRun, tail: list[Message], closing: str) -> TextDelta:
        """End the turn's stored messages on `closing`, a reply written by the runtime,
        which the caller is streamed as the turn's last text."""
        tail.append(Message("assistant", (TextBlock(closing),)))
        shown = run.paragraph_break() + closing
        run.text.append(shown)
        return TextDelta(shown)

    async def _call(
        self, request: ModelRequest, run: _TurnRun
    ) -> AsyncGenerator[TextDelta | ThinkingDelta | StreamDone, None]:
        """One model call; a stream that breaks before any text is retried once."""
        model = {"gen_ai.request.model": request.model}
        with span("frontmind.model_call", run.turn.turn_id, **model) as call:
            async with aclosing(self._call_once(request, run)) as events:
                async for event in events:
                    if isinstance(event, StreamDone):
                        call.set_attributes(usage_attributes(event.usage))
                        call.set_attribute("gen_ai.response.id", event.message_id)
                    yield event

    async def _call_once(
        self, request: ModelRequest, run: _TurnRun
    ) -> AsyncGenerator[TextDelta | ThinkingDelta | StreamDone, None]:
        retried = False
        while True:
            emitted = False
            try:
                async with aclosing(self._deps.model.stream(request)) as stream:
                    async for event in stream:
                        if isinstance(event, StreamStarted):
                            run.started_usage = event.usage  # billed, should it break
                            continue
                        if isinstance(event, StreamDone):
                            run.started_usage = None  # its whole usage comes with it
                            yield event
                            return
                        if run.first_token_ms is None:
                            run.first_token_ms = run.elapsed_ms()
                        if not emitted and (gap := run.paragraph_break()):
                            # A later call's reply starts a new paragraph, as the model's
                            # separate text blocks read ("On it." then "Done.").
                            run.text.append(gap)
                            yield TextDelta(gap)
                        emitted = True
                        if isinstance(event, StreamThinking):
                            yield ThinkingDelta(event.text, event.redacted)
                            continue
                        run.text.append(event.text)
                        yield TextDelta(event.text)
            except ModelStreamError:
                run.bill_broken_call()  # its input was billed, whether retried or not
                if emitted or retried:
                    raise
                retried = True

    async def _run_tool(self, use: ToolUseBlock, turn: Turn, effects: list[Effect]) -> ToolOutcome:
        timeout = self._deps.tools.timeout_s(use.name)  # the tool's own, else tools.timeout_s
        # The call's id tells apart the spans of one tool's calls that ran side by side.
        named = {"frontmind.tool": use.name, "gen_ai.tool.call.id": use.id}
        with span("frontmind.tool", turn.turn_id, **named) as opened:
            outcome = await self._call_tool(use, turn, effects, timeout)
            if outcome.is_error:  # an error result, a timeout: the turn goes on, the call failed
                failed(opened, outcome.content)
        # A tool's text is code's output, kept: what no database stores (a NUL, a lone
        # surrogate) becomes U+FFFD rather than failing the turn at its commit. It comes
        # from outside (a file, a web page, an MCP server): one that spells the
        # notification center's header, as a forged frame must, is neutralized before
        # the model or the history sees it; any other is kept byte for byte.
        content = neutral_tool_text(storable(outcome.content))
        blocks_json = neutral_tool_blocks_json(outcome.blocks_json)
        if content is outcome.content and blocks_json is outcome.blocks_json:
            return outcome
        return msgspec.structs.replace(outcome, content=content, blocks_json=blocks_json)

    async def _call_tool(
        self, use: ToolUseBlock, turn: Turn, effects: list[Effect], limit_s: float
    ) -> ToolOutcome:
        """The call's outcome within `limit_s` seconds; a timeout is its error result."""
        with anyio.move_on_after(limit_s):
            try:
                return await self._deps.tools.run(
                    use.name, msgspec.Raw(use.input_json.encode()), turn, effects
                )
            except asyncio.CancelledError:
                # A tool's own CancelledError (it awaited a task someone else cancelled)
                # is its failure, not this turn's cancellation: only a cancel this task
                # was asked for (the timeout above, the caller, shutdown) goes on up.
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                log.warning("tool %s raised CancelledError without being cancelled", use.name)
                return ToolOutcome(
                    f"{use.name} failed: CancelledError (the tool's own work was cancelled)",
                    is_error=True,
                )
            except SystemExit as exc:
                # A tool calling sys.exit() (a library's CLI entry point run as a tool, say)
                # would end the whole process, every user's turns with it, with no grace:
                # it is that tool's failure. Ctrl+C (KeyboardInterrupt) still passes.
                log.warning("tool %s raised SystemExit(%r)", use.name, exc.code)
                return ToolOutcome(
                    f"{use.name} failed: SystemExit({exc.code!r}) (a tool may not end the process)",
                    is_error=True,
                )
        return ToolOutcome(f"{use.name} timed out after {limit_s:g}s", is_error=True)

    async def _commit(
        self,
        state: _Loaded,
        record: TurnRecord,
        tail: list[Message],
        new_start: int | None,
        effects: Sequence[Effect] = (),
        *,
        within: float = math.inf,
    ) -> None:
        """Commit the turn, shielded (a cancellation waits for it), within `within`
        seconds: `StorageUnavailable` if it did not finish in time (a cancelled turn's
        commit must not hold up its end)."""
        at = record.finished_at
        write = TurnWrite(
            record,
            tuple(msgspec.structs.replace(m, created_at=at) for m in tail),
            history_start=new_start,
            effects=tuple(effects),
            base=state.message_count,
        )
        finished = False
        with anyio.move_on_after(within, shield=True):
            await self._deps.storage.commit_turn(self._user, write)
            finished = True
        if not finished:
            raise StorageUnavailable(f"the turn's commit did not finish within {within:g} s")
        base = state.message_count
        stored = [
            msgspec.structs.replace(m, seq=base + i, turn_id=record.turn_id, created_at=at)
            for i, m in enumerate(tail)
        ]
        state.committed(record, stored, new_start)

    async def _record_unfinished(
        self, run: _TurnRun, status: TurnStatus, error: str | None
    ) -> None:
        run.bill_broken_call()  # a call cut off (an error, a cancel) was billed its input
        record = run.record(status, self._deps.clock(), error=error)
        # If storage itself is failing, the caller still gets the error event.
        with anyio.CancelScope(shield=True), anyio.move_on_after(5), suppress(StorageError):
            await self._deps.storage.record_turn(self._user, record)
        if status != "running":  # a running record is replaced when the turn ends
            self._deps.ended(status, record.usage)


@dataclass
class _TurnRun:
    """What a turn has gathered so far (for its record, whatever its ending)."""

    turn: Turn
    continuum_id: str
    model: str
    started_at: float  # wall clock, for the record
    stop_reason: str | None = None
    started: float = field(default_factory=time.perf_counter)  # for durations
    compose_ms: float = 0.0
    first_token_ms: float | None = None
    calls: int = 0
    cache_miss_reason: str | None = None
    anchor_id: str | None = None  # the first call's message id
    ttl: TtlChoice | None = None  # the breakpoints' TTLs, chosen once per turn
    sections: tuple[SectionStatus, ...] = ()
    warnings: tuple[str, ...] = ()
    text: list[str] = field(default_factory=list)
    call_usage: list[TurnUsage] = field(default_factory=list)
    # The usage of a call under way, from its message_start: what a stream that breaks
    # or is cancelled before its end has cost already (input, cache writes).
    started_usage: TurnUsage | None = None
    effects: list[Effect] = field(default_factory=list)  # tool writes, applied at commit
    # How many of `effects` the turn's completed tool rounds staged (a cancelled turn
    # keeps those rounds, and their writes alone).
    round_effects: int = 0
    # What the requests of the turn left out to fit the window (`LoopFit`): the most
    # results and documents one request sent as notes, and the newest results cut (by
    # tool_use id: the characters left out).
    noted: int = 0
    cut: dict[str, int] = field(default_factory=dict)

    @property
    def usage(self) -> TurnUsage:
        return sum(self.call_usage, TurnUsage())

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def bill_broken_call(self) -> None:
        """Count a call that ended before its StreamDone by its message_start's usage."""
        if self.started_usage is not None:
            self.call_usage.append(self.started_usage)
            self.started_usage = None

    def fitted(self, fit: LoopFit) -> None:
        """A request of the turn as fitted to the window (said in the turn's warnings)."""
        self.noted = max(self.noted, fit.noted)
        self.cut.update(fit.cut)

    def left_out(self) -> tuple[str, ...]:
        """What the turn's requests left out to fit the window, as warnings."""
        said: list[str] = []
        if self.noted:
            said.append(
                f"{self.noted} tool result(s) or document(s) went as a note in this turn's "
                "requests: the model's context window could not hold them with the rest "
                "(the history stores them whole)"
            )
        if self.cut:
            said.append(
                f"{len(self.cut)} tool result(s) longer than what the model's context window "
                f"left were cut in the request ({sum(self.cut.values()):,} characters left "
                "out, with a note saying so; the history stores them whole)"
            )
        return tuple(said)

    def paragraph_break(self) -> str:
        """What separates text still to come from the turn's text so far: a blank
        line, or as much of one as the text does not already end with."""
        so_far = "".join(self.text)
        if not so_far:
            return ""
        return "\n" * max(0, 2 - (len(so_far) - len(so_far.rstrip("\n"))))

    def record(
        self,
        status: TurnStatus,
        finished_at: float,
        *,
        error: str | None = None,
        kept: bool = False,
    ) -> TurnRecord:
        """The turn's record; `kept`: a failed turn whose tool rounds the history keeps
        (the next turn extends its first call's prefix, as a completed turn's)."""
        return TurnRecord(
            turn_id=self.turn.turn_id,
            continuum_id=self.continuum_id,
            status=status,
            started_at=moment(self.started_at),
            finished_at=moment(finished_at),
            model=self.model,
            user_text=self.turn.user_text,
            reply_text="".join(self.text),
            usage=self.usage,
            cache_miss_reason=self.cache_miss_reason,
            compose_ms=self.compose_ms,
            first_token_ms=self.first_token_ms,
            total_ms=self.elapsed_ms(),
            model_calls=self.calls,
            call_usage=tuple(self.call_usage),
            sections=self.sections,
            warnings=(*self.warnings, *self.left_out()),
            error=error,
            message_id=self.anchor_id if status == "completed" or kept else None,
            stop_reason=self.stop_reason,
            cache_ttl=self.ttl,
        )


def new_turn_id() -> str:
    return f"turn_{uuid.uuid4().hex}"
