"""Assembling the actors: trinkets, the searcher, and one composer and conversation actor
per continuum, spawned on first use under the caller's actor system."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import (
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
    suppress,
)
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
import msgspec

from runtime import (
    ActorRef,
    ActorStopped,
    ActorSystem,
    KernelError,
    MailboxFull,
    MessageFailed,
    ReplyStream,
    RestartLimitReached,
    RestartPolicy,
)
from storage import (
    MAX_SEARCH_HITS,
    ContinuumModel,
    FrontmindError,
    Storage,
    StorageError,
    TurnOutcome,
    TurnRecord,
    TurnUsage,
    check_continuum_id,
    check_user_name,
    error_type,
    excerpt,
    moment,
)

from ._admission import Admission
from ._background import BackgroundWorker, DroppedRecords, background_name
from ._catalog import ModelCatalog, ModelSource
from ._composer import ComposerActor
from ._content import UserInput, user_content
from ._conversation import (
    ConversationActor,
    ConversationDeps,
    Preview,
    Reconfigure,
    RideCache,
    RunTurn,
    WarmUp,
    WarmUpDone,
    new_turn_id,
)
from ._events import TurnCompleted, TurnError, TurnEvent, TurnStarted
from ._exceptions import Busy, InvalidModelSettings, Overloaded, SettingsError, ShuttingDown
from ._layout import ModelRequest
from ._llm import ModelClient
from ._mcp import McpHub, McpServer, check_mcp_servers
from ._messages import Compose, Composed, Drain, RecordsWaiting, Turn, Wake
from ._models import ModelChoice, check_model_choice, choose_model
from ._observe import current_turn
from ._placement import BUILTIN_SECTIONS, PlacementRegistry
from ._prompt import DEFAULT_BASE_PROMPT
from ._recall import Embedder, check_embedder_spec, load_embedder
from ._server_tools import (
    ServerTool,
    ServerToolSupport,
    check_server_tool_support,
    no_server_tool_data,
)
from ._settings import Settings
from ._surfacings import Surfacings
from ._timers import Timers
from ._too_long import TokenScales
from ._tool_spec import Tool
from ._tools import ToolRunner, tool_definitions, tool_guidance, tool_hints
from ._trinket import Directory, Trinket, TrinketActor, composer_name, trinket_name
from ._trinkets import (
    ContextSearcher,
    DateTimeTrinket,
    DomainDocTrinket,
    ManifestTrinket,
    MemoriesTrinket,
    RemindersTrinket,
    SearchTrinket,
    StaticTrinket,
    searcher_name,
)
from ._ttl import TtlPolicy

__all__ = [
    "Engine",
    "LaneKey",
    "TrinketEntry",
    "TurnStream",
    "TurnWatch",
    "builtin_trinkets",
    "validate_settings",
]

log = logging.getLogger("frontmind.engine")
# How long leaving a turn early waits for it to wind down (its record written as
# cancelled): a storage write, normally milliseconds.
WIND_DOWN_S = 5.0
# The most of the memories section's deadline a turn's query embedding may take (the
# default 150 ms of 250): `memory.embed_deadline_ms` is cut to it.
EMBED_SHARE = 0.6

# A conversation is identified by its user and the user's continuum id: two users may
# both have a continuum "main", and each gets its own lane.
LaneKey = tuple[str, str]  # (user, continuum id)


@dataclass(frozen=True)
class TrinketEntry:
    """A section and how to build the trinket that renders it."""

    section: str
    factory: Callable[[Directory], Trinket]
    deadline_ms: float | None = None  # None: the composer's (or `[composer.deadlines]`)


def validate_settings(
    settings: Settings,
    sections: Sequence[str] | None = None,
    *,
    catalog: ModelCatalog | None = None,
) -> None:
    """Refuse unusable settings, naming the key; `sections`, when given, are the sections
    that exist (for the keys of `[composer.deadlines]`). The model settings are checked
    against `catalog` when one is given (the face gives it once the Models API had its
    say: a name unknown to the shipped data may be a model it knows)."""
    try:
        ZoneInfo(settings.timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # OSError: a name that is a folder of the zone data ("America"), or one too long
        # for a file name; neither is a zone.
        raise SettingsError(f"timezone: unknown zone {excerpt(settings.timezone)!r}") from None
    if settings.cache.system_ttl == "5m" and settings.cache.history_ttl == "1h":
        raise SettingsError(
            "cache.history_ttl: a 1h breakpoint may not follow a 5m one; "
            "use system_ttl = '1h' or history_ttl = '5m'"
        )
    try:
        tool_definitions(settings.tools.enabled)
    except ValueError as exc:
        raise SettingsError(f"tools.enabled: {exc}") from None
    positive = {
        "composer.deadline_ms": settings.composer.deadline_ms,
        "composer.first_system_deadline_ms": settings.composer.first_system_deadline_ms,
        "composer.notification_budget_tokens": settings.composer.notification_budget_tokens,
        "history.budget_tokens": settings.history.budget_tokens,
        "model.max_tokens": settings.model.max_tokens,
        "model.timeout_s": settings.model.timeout_s,
        "tools.max_iterations": settings.tools.max_iterations,
        "tools.timeout_s": settings.tools.timeout_s,
        "turns.max_queued": settings.turns.max_queued,
        "turns.max_active": settings.turns.max_active,
        "turns.max_wait_s": settings.turns.max_wait_s,
    }
    for key, value in positive.items():
        if not value > 0:  # NaN (TOML's `nan`) is not greater than 0 either
            raise SettingsError(f"{key}: must be greater than 0, got {value}")
    composer = settings.composer
    for key in ("guard_window", "guard_min_turns"):
        if getattr(composer, key) < 1:
            raise SettingsError(
                f"composer.{key}: must be at least 1 (turns), got {getattr(composer, key)}"
            )
    if not 0 <= composer.guard_threshold <= 1:
        raise SettingsError(
            "composer.guard_threshold: must be in [0, 1] (a share of turns), "
            f"got {composer.guard_threshold}"
        )
    # How many hits a turn's memories section and a context search show: a search takes
    # at most MAX_SEARCH_HITS (more: the section failed on every turn); 0 shows none.
    for key in ("memories_top_k", "search_results"):
        value = getattr(settings.trinkets, key)
        if not 0 <= value <= MAX_SEARCH_HITS:
            raise SettingsError(f"trinkets.{key}: must be 0 to {MAX_SEARCH_HITS}, got {value}")
    for key in ("manifest_segments", "search_keep_turns"):
        if getattr(settings.trinkets, key) < 0:
            raise SettingsError(
                f"trinkets.{key}: must be 0 or more, got {getattr(settings.trinkets, key)}"
            )
    if not settings.history.segment_gap_minutes > 0:
        # 0 or less: every turn would close a segment, and each be summarised.
        raise SettingsError(
            "history.segment_gap_minutes: must be greater than 0, "
            f"got {settings.history.segment_gap_minutes}"
        )
    if settings.model.max_retries < 0:
        raise SettingsError(
            f"model.max_retries: must be 0 (no retries) or more, got {settings.model.max_retries}"
        )
    known = {spec.name for spec in BUILTIN_SECTIONS}
    unknown = sorted(set(settings.disabled_sections) - known)
    if unknown:
        raise SettingsError(f"disabled_sections: unknown built-in sections {unknown}")
    if not 0 < settings.cache.warm_after_seconds < 300:
        raise SettingsError(
            "cache.warm_after_seconds: must be between 0 and 300 (a 5m entry must still "
            f"be alive to be read), got {settings.cache.warm_after_seconds}"
        )
    if not settings.turns.idle_minutes >= 0:
        raise SettingsError("turns.idle_minutes: must be 0 (never unload) or more")
    if settings.turns.max_loaded < 0:
        raise SettingsError("turns.max_loaded: must be 0 (no bound) or more")
    if not 0 <= settings.memory.embedding_weight <= 1:
        raise SettingsError("memory.embedding_weight: must be in [0, 1]")
    if not 0 < settings.memory.same_memory_cosine <= 1:
        raise SettingsError("memory.same_memory_cosine: must be in (0, 1]")
    if not settings.memory.embed_deadline_ms > 0:
        raise SettingsError("memory.embed_deadline_ms: must be greater than 0")
    if settings.memory.embedder is not None:
        # Its shape only: building it may need the service's key or load a model, which
        # a command that never embeds must not (`load_config` builds it for those that
        # do, and `Frontmind.open` checks its dimension before any turn).
        check_embedder_spec(settings.memory.embedder)
    if not 0 < settings.history.keep_fraction <= 1:
        raise SettingsError("history.keep_fraction: must be in (0, 1]")
    for name, value in settings.composer.deadlines.items():
        if not value > 0:
            raise SettingsError(f"composer.deadlines.{name}: must be greater than 0, got {value}")
    # A disabled built-in section keeps its deadline (unused): switching a section off,
    # in the config or for `frontmind simulate --layout none`, must not break its key.
    named = {*(sections or known), *settings.disabled_sections}
    unknown = sorted(set(settings.composer.deadlines) - named)
    if sections is not None and unknown:
        raise SettingsError(f"composer.deadlines: unknown sections {unknown}")
    if catalog is None:
        return
    try:
        check_model_choice(
            choose_model(settings.model, ContinuumModel()), settings.composer.channel, catalog
        )
    except SettingsError as exc:
        message = str(exc)  # name the key as the config file spells it
        if message.startswith("model:"):
            message = "model.name:" + message.removeprefix("model:")
        elif not message.startswith("composer."):
            message = "model." + message
        raise SettingsError(message) from None


def _embedder(settings: Settings) -> Embedder | None:
    spec = settings.memory.embedder
    return None if spec is None else load_embedder(spec, settings.module_path)


def builtin_trinkets(
    storage: Storage,
    settings: Settings,
    tools: Sequence[Tool[..., Any]] = (),
    surfacings: Surfacings | None = None,
) -> list[TrinketEntry]:
    """The built-in trinkets; `tools` (the user's) join the tool guidance and hints;
    `surfacings`, the tally the Engine's worker counts memory uses from (give both the
    same one)."""
    definitions = tool_definitions(settings.tools.enabled, tools)
    base = settings.base_prompt or DEFAULT_BASE_PROMPT
    t = settings.trinkets
    gap = settings.history.segment_gap_minutes * 60
    embedder = _embedder(settings)
    # The query's embedding ends inside the section's own deadline, with room left for
    # the nearest-memories search: a late embedder leaves the turn to keywords rather
    # than the composer cutting the whole section.
    section_ms = settings.composer.deadlines.get("relevant_memories", settings.composer.deadline_ms)
    embed_ms = min(settings.memory.embed_deadline_ms, EMBED_SHARE * section_ms)
    # Rendered once: every continuum's trinkets share the texts, not a copy each.
    guidance, hints = tool_guidance(definitions), tool_hints(definitions)
    entries = [
        TrinketEntry("base_prompt", lambda _: StaticTrinket(base)),
        TrinketEntry("domaindoc", lambda _: DomainDocTrinket(storage)),
        TrinketEntry("tool_guidance", lambda _: StaticTrinket(guidance)),
        TrinketEntry("tool_hints", lambda _: StaticTrinket(hints)),
        TrinketEntry("datetime_section", lambda _: DateTimeTrinket()),
        TrinketEntry(
            "conversation_manifest",
            lambda _: ManifestTrinket(storage, segments=t.manifest_segments, gap_seconds=gap),
        ),
        TrinketEntry("active_reminders", lambda _: RemindersTrinket(storage)),
        TrinketEntry("context_search_results", lambda _: SearchTrinket(storage)),
        TrinketEntry(
            "relevant_memories",
            lambda d: MemoriesTrinket(
                storage,
                top_k=t.memories_top_k,
                directory=d,
                embedder=embedder,
                weight=settings.memory.embedding_weight,
                embed_deadline=embed_ms / 1000,
                surfacings=surfacings,
            ),
        ),
    ]
    return [e for e in entries if e.section not in settings.disabled_sections]


class Engine:
    """The running actors of one Frontmind instance.

    Each continuum gets its own lane: its trinket actors (one per section, so no
    continuum's composition ever waits behind another's render), its composer (its
    sections and their last good content are its own) and its conversation actor (its
    turns run one at a time; other continuums' run concurrently). The lane is spawned on
    first use and stopped whole when evicted. Lanes are keyed by (user, continuum id), so
    no trinket or composer state (system sections, the user's documents included) is
    ever shared between users.
    """

    def __init__(
        self,
        system: ActorSystem,
        *,
        storage: Storage,
        model: ModelClient,
        settings: Settings,
        registry: PlacementRegistry,
        trinkets: Sequence[TrinketEntry],
        clock: Callable[[], float],
        trinket_policy: RestartPolicy | None = None,
        models: ModelSource,
        tools: Sequence[Tool[..., Any]] = (),
        ttl_policy: TtlPolicy | None = None,
        mcp: Sequence[McpServer] = (),
        server_tools: Sequence[ServerTool] = (),
        server_tool_support: ServerToolSupport = no_server_tool_data,
        mcp_policy: RestartPolicy | None = None,
        surfacings: Surfacings | None = None,
    ) -> None:
        validate_settings(settings, [entry.section for entry in trinkets], catalog=models.catalog)
        self._models = models
        # The built-in and user tools are fixed for the Engine's life: the `tools` array
        # leads every cached prefix, so it must not change between turns. MCP servers'
        # tools change only when a server first runs or on an explicit reload (McpHub).
        tool_definitions(settings.tools.enabled, tools)
        check_mcp_servers(mcp)
        self._server_tools = tuple(server_tools)
        self._server_tool_support = server_tool_support
        check_server_tool_support(
            self._server_tools, settings.model.name, server_tool_support, "[[server_tool]]"
        )
        if settings.composer.legacy_placement:
            registry = registry.legacy()
        for entry in trinkets:
            registry.spec(entry.section)  # an unknown section is an error now, not later
            if entry.deadline_ms is not None and not entry.deadline_ms > 0:
                raise SettingsError(
                    f"trinket {entry.section!r}: deadline_ms must be greater than 0, "
                    f"got {entry.deadline_ms}"
                )
        # A trinket's own deadline is the default; `[composer.deadlines]` overrides it.
        deadlines = {
            e.section: e.deadline_ms for e in trinkets if e.deadline_ms is not None
        } | dict(settings.composer.deadlines)
        composer = msgspec.structs.replace(settings.composer, deadlines=deadlines)
        self._composer_settings = composer
        longest = max(
            [deadlines.get(e.section, composer.deadline_ms) for e in trinkets],
            default=composer.deadline_ms,
        )
        self._early_by = {
            e.section: (longest - deadlines.get(e.section, composer.deadline_ms)) / 1000
            for e in trinkets
        }
        self._system = system
        self._storage = storage
        self._settings = settings
        self._registry = registry
        self._lanes: dict[LaneKey, _Lane] = {}
        self._stopping: dict[LaneKey, anyio.Event] = {}
        self._draining = False
        # Every turn taken in and not yet closed: what closing the instance ends.
        self._streams: weakref.WeakSet[TurnStream] = weakref.WeakSet()
        self._directory: Directory = system.lookup
        directory = self._directory
        self._entries = list(trinkets)
        self._makers = {entry.section: self._make_trinket(entry) for entry in self._entries}
        self._trinket_policy = trinket_policy or RestartPolicy(max_restarts=5, within=60.0)
        self._searcher = system.spawn(
            lambda: ContextSearcher(
                storage,
                limit=settings.trinkets.search_results,
                keep_turns=settings.trinkets.search_keep_turns,
                clock=clock,
            ),
            name=searcher_name(),
            mailbox=16,
        )
        embedder = _embedder(settings)
        # Continuums with a turn running in this process: their background jobs wait.
        self._turning: dict[tuple[str, str], int] = {}
        # Continuums whose running turn closed a segment: the worker wakes when it ends.
        self._wake_after: set[tuple[str, str]] = set()
        self._dropped = DroppedRecords()
        # The continuums' token scales: the conversations' measure, and what a summary
        # refused as too long learns from (the worker's own request).
        token_scales = TokenScales()
        self._background = system.spawn(
            lambda: BackgroundWorker(
                storage,
                model,
                prefix=self._ride,
                busy=self._busy_continuums,
                clock=clock,
                embedder=embedder,
                same_cosine=settings.memory.same_memory_cosine,
                dropped=self._dropped,
                closing=lambda: self._draining,
                surfacings=surfacings,
                token_scales=token_scales,
                tool_prompt=models.catalog.tool_prompt_tokens,
            ),
            name=background_name(),
            mailbox=16,
        )
        # The cache warm-up's timers (`use_timers`; none: no warm-ups) and what the
        # warm-ups sent so far: their number and summed usage, for costs and metrics.
        self._timers: Timers | None = None
        self._watch: TurnWatch | None = None
        self.warm_ups = 0
        self.warm_usage = TurnUsage()
        # Every turn's final record as it was written: how many of each status, and the
        # usage they sum to (completed or not), for the metrics. A turn refused at the
        # door is not among them: `admission.refused` counts it.
        self.turn_outcomes: dict[TurnOutcome, int] = {}
        self.turn_usage = TurnUsage()
        self.warm_reasons: list[str] = []  # the last few decisions, sent or not
        # The MCP servers' actors (spawned now, started by `mcp.running()`).
        self.mcp = McpHub(system, mcp, policy=mcp_policy) if mcp else None
        # The process's turn slots and their fair queue; every turn enters at its door.
        turns = settings.turns
        self.admission = Admission(turns.max_active, turns.max_wait_s, turns.max_queued)
        self._deps = ConversationDeps(
            storage=storage,
            model=model,
            tools=ToolRunner(
                storage,
                directory,
                settings.tools.enabled,
                tools,
                timeout_s=settings.tools.timeout_s,
                mcp=self.mcp,
                server_tools=self._server_tools,
                embedder=embedder,
                same_cosine=settings.memory.same_memory_cosine,
                embed_deadline=settings.memory.embed_deadline_ms / 1000,
            ),
            # The composer's settings as its lanes run them (the trinkets' own deadlines
            # in), so that a turn waits for a composition as long as the composer may.
            settings=msgspec.structs.replace(settings, composer=composer),
            models=models,
            clock=clock,
            trinkets=(),  # each lane gets its own
            draining=lambda: self._draining,
            segment_closed=self._wake_after.add,
            ttl_policy=ttl_policy,
            admission=self.admission,
            ended=self._ended,
            token_scales=token_scales,
        )

    def _make_trinket(self, entry: TrinketEntry) -> Callable[[], TrinketActor]:
        """How a section's trinket actor is built, first and on each restart, from its
        entry's factory (a built-in's builds its trinket afresh; a `[[trinket]]`'s hands
        over the one instance built at startup, which serves every continuum). One per
        section, shared by every continuum's lane, rather than a closure per lane."""
        directory, early_by = self._directory, self._early_by[entry.section]

        def make() -> TrinketActor:
            trinket = entry.factory(directory)
            return TrinketActor(entry.section, trinket, directory, early_by=early_by)

        return make

    def _spawn_trinkets(self, user: str, continuum_id: str) -> list[tuple[str, ActorRef[Any, Any]]]:
        """The continuum's trinket actors, one per section. An idle actor holds no task
        (a few hundred bytes), so even the fixed sections keep their own actor and mailbox,
        as every trinket does."""
        refs: list[tuple[str, ActorRef[Any, Any]]] = []
        for entry in self._entries:
            # One composer asks one turn at a time; the rest is committed-turn and search
            # news. A trinket hung for more turns than this fails fast instead of queueing.
            ref = self._system.spawn(
                self._makers[entry.section],
                name=trinket_name(entry.section, user, continuum_id),
                mailbox=16,
                policy=self._trinket_policy,
            )
            refs.append((entry.section, ref))
        return refs

    @property
    def models(self) -> ModelCatalog:
        """The model catalog in force (the data, the Models API's rows, the config's)."""
        return self._models.catalog

    def use_timers(self, timers: Timers) -> None:
        """Where the cache warm-up's timers run (its owner cancels them on shutdown)."""
        self._timers = timers

    def _schedule_warm_up(self, user: str, continuum_id: str) -> None:
        if self._timers is None or not self._settings.cache.warm:
            return
        at = self._deps.clock() + self._settings.cache.warm_after_seconds

        async def fire() -> None:
            await self._warm_up(user, continuum_id)

        self._timers.schedule((user, continuum_id), at, fire)

    async def _warm_up(self, user: str, continuum_id: str) -> None:
        """Ask the continuum's conversation actor for its warm-up (between its turns:
        the actor runs one message at a time); a lane unloaded meanwhile is left be."""
        lane = self._lanes.get((user, continuum_id))
        if lane is None or self._draining:
            return
        try:
            async with self._using(user, continuum_id) as lane:
                done: WarmUpDone = await lane.conversation.ask(WarmUp())
        except (KernelError, StorageError) as exc:
            log.warning("cache warm-up of %s/%s: %s", user, continuum_id, exc)
            return
        self.warm_reasons = [*self.warm_reasons[-7:], done.reason]
        log.debug("cache warm-up of %s/%s: %s", user, continuum_id, done.reason)
        if done.sent:
            self.warm_ups += 1
            self.warm_usage = self.warm_usage + done.usage

    def _ended(self, status: TurnOutcome, usage: TurnUsage) -> None:
        self.turn_outcomes[status] = self.turn_outcomes.get(status, 0) + 1
        self.turn_usage = self.turn_usage + usage

    def _busy_continuums(self) -> list[tuple[str, str]]:
        return [key for key, n in self._turning.items() if n > 0]

    async def _ride(self, user: str, continuum_id: str, ride: RideCache) -> ModelRequest:
        """The continuum's cached prefix plus a background instruction, built by its
        conversation actor between its turns."""
        async with self._using(user, continuum_id) as lane:
            request: ModelRequest = await lane.conversation.ask(ride)
        return request

    def wake_background(self) -> None:
        """Look for due background jobs and searches now (a full mailbox already has a
        wake queued, a stopped actor needs none); searches left by a replica that died
        are among them."""
        with suppress(KernelError):
            self._background.tell(Wake())
        with suppress(KernelError):
            self._searcher.tell(Wake())

    @asynccontextmanager
    async def records_forgotten(self, user: str) -> AsyncIterator[None]:
        """While the block runs (the user's delete), no record of `user`'s turns that
        waits for the worker (`record_later`) is written: after the delete, it would
        outlive it. They are let go when the block succeeds, written after a refusal."""
        try:
            async with self._dropped.forgetting(user):
                yield
        finally:
            self._tell_records()

    def record_later(self, user: str, record: TurnRecord) -> None:
        """A record a turn's stream cannot await the write of (a refusal answers at
        once, a finalizer cannot await): written by the background worker, told once
        however many wait (a full mailbox: it takes them with its next message; a
        stopped one: closing records the rest)."""
        self._dropped.add(user, record)
        self._tell_records()

    def _tell_records(self) -> None:
        if self._dropped.waiting and not self._dropped.told:
            with suppress(KernelError):
                self._background.tell(RecordsWaiting())
                self._dropped.told = True

    async def run_background(self) -> int:
        """Run every background job due now and return how many ran (done or failed)."""
        try:
            ran = await self._background.ask(Drain())
        # The kernel's refusals as the caller's errors, as for a continuum (`_refusals`).
        except ActorStopped:
            raise ShuttingDown("the background worker is stopping: Frontmind is closing") from None
        except (MailboxFull, RestartLimitReached) as exc:
            # A worker given up on says when its supervisor takes it back; a full
            # mailbox has no such figure (how long the jobs ahead take is unknown).
            wait = exc.retry_after if isinstance(exc, RestartLimitReached) else None
            raise Busy(
                f"the background worker cannot take this now: {exc}", retry_after=wait
            ) from None
        return int(ran or 0)

    async def _lane(self, user: str, continuum_id: str, *, stays: bool = True) -> _Lane:
        """The continuum's lane (composer and conversation actor), spawned on first use;
        one spawned to stay makes room under `turns.max_loaded` (not a preview's, which
        is stopped after it)."""
        check_user_name(user)
        check_continuum_id(continuum_id)
        key = (user, continuum_id)
        stopping = self._stopping.get(key)
        if stopping is not None:
            await stopping.wait()  # evicted just now: wait, then start afresh
        lane = self._lanes.get(key)
        if lane is None:
            trinkets = self._spawn_trinkets(user, continuum_id)
            composer = self._system.spawn(
                lambda: ComposerActor(
                    self._registry, trinkets, self._composer_settings, hold=self._composing
                ),
                name=composer_name(user, continuum_id),
                mailbox=64,
            )
            actors = [ref for _, ref in trinkets]
            deps = replace(self._deps, trinkets=tuple(actors))
            conversation = self._system.spawn(
                lambda: ConversationActor(continuum_id, composer, deps, user=user),
                name=f"conversation:{user}/{continuum_id}",
                mailbox=self._settings.turns.max_queued,
            )
            lane = _Lane(composer, conversation, actors)
            self._lanes[key] = lane
        bound = self._settings.turns.max_loaded
        # Over the bound: a new lane, or one a preview spawned that a turn now takes up.
        if stays and 0 < bound < len(self._lanes):
            lane.users += 1  # this lane is not the one unloaded to make room for it
            try:
                await self._unload_over_bound()
            finally:
                lane.users -= 1
        lane.last_used = time.monotonic()
        return lane

    async def _unload_over_bound(self) -> None:
        """Past `turns.max_loaded` lanes: stop those unused the longest (of those not in
        use) until the bound holds; with every lane in use, none: the bound holds again
        as their turns end and the next lane loads (all the lanes past it go then, not
        one, or a burst would leave the process above its bound for good)."""
        bound = self._settings.turns.max_loaded
        while 0 < bound < len(self._lanes):
            idle = [(lane.last_used, key) for key, lane in self._lanes.items() if not lane.users]
            if not idle or not await self._stop_unused(min(idle)[1]):
                return

    @asynccontextmanager
    async def _using(
        self, user: str, continuum_id: str, *, stays: bool = True
    ) -> AsyncIterator[_Lane]:
        """Hold the lane: a lane in use is never evicted. What the kernel refuses to the
        lane's actors is the caller's `Busy` or `ShuttingDown` (`_refusals`)."""
        with _refusals(continuum_id):
            lane = await self._lane(user, continuum_id, stays=stays)
        lane.users += 1
        try:
            with _refusals(continuum_id):
                yield lane
        finally:
            lane.users -= 1
            lane.last_used = time.monotonic()

    def turn(self, continuum_id: str, message: UserInput, *, user: str) -> TurnStream:
        """A turn, started by its first event, `async with` or `start()`; see `TurnStream`.

        `message` is text or a list of content blocks (text, images, documents). Bad
        input (`InvalidInput`, `MessageTooLarge`) is refused when it starts, before
        anything is composed, sent to the model or stored.
        """
        return TurnStream(self, continuum_id, message, user)

    def watch_turns(self, watch: TurnWatch) -> None:
        """Tell `watch` whenever a turn starts and ends (the `idle` GC policy's collector)."""
        self._watch = watch

    def _composing(self) -> AbstractContextManager[None]:
        """What a composition runs inside: the watch's hold, when one is set."""
        return self._watch.composing() if self._watch is not None else nullcontext()

    async def _hold_turn(self, user: str, continuum_id: str) -> _Lane:
        """The lane for a turn, held (never evicted) and counted among the turns running
        until `_release_turn`."""
        if self._timers is not None:
            self._timers.cancel((user, continuum_id))  # a turn is here: no warm-up now
        lane = await self._lane(user, continuum_id)
        lane.users += 1
        key = (user, continuum_id)
        self._turning[key] = self._turning.get(key, 0) + 1
        if self._watch is not None:
            self._watch.turn_began()
        return lane

    def _release_turn(self, user: str, continuum_id: str, lane: _Lane, *, ended: bool) -> None:
        """A turn is over (`ended`: without an error): its lane and its count go."""
        if ended:
            self._schedule_warm_up(user, continuum_id)
        key = (user, continuum_id)
        left = self._turning[key] - 1
        if left:
            self._turning[key] = left
        else:
            del self._turning[key]
            if key in self._wake_after:
                self._wake_after.discard(key)
                self.wake_background()
        lane.users -= 1
        lane.last_used = time.monotonic()
        if self._watch is not None:
            self._watch.turn_ended()

    async def compose(self, turn: Turn) -> Composed:
        """The sections a turn would get now (what the composer gathers, nothing sent)."""
        user_content(turn.user_text)  # refused as a turn's message would be, before composing
        key = (turn.user, turn.continuum_id)
        async with self._preview_slot(*key):
            transient = key not in self._lanes
            try:
                async with self._using(*key, stays=not transient) as lane:
                    composed: Composed = await lane.composer.ask(Compose(turn))
            finally:
                if transient:
                    await self._drop_unused(key)
        return composed

    async def preview(self, continuum_id: str, message: UserInput, *, user: str) -> ModelRequest:
        content, text = user_content(message)
        preview = Preview(text, () if isinstance(message, str) else content)
        key = (user, continuum_id)
        # Behind the continuum's own turns: its conversation actor answers a preview only
        # after the turn it runs, and a slot taken before that would sit idle meanwhile.
        async with self._preview_slot(*key, behind_turns=True):
            transient = key not in self._lanes
            try:
                async with self._using(*key, stays=not transient) as lane:
                    request: ModelRequest = await lane.conversation.ask(preview)
            finally:
                if transient:
                    await self._drop_unused(key)
        return request

    @asynccontextmanager
    async def _preview_slot(
        self, user: str, continuum_id: str, *, behind_turns: bool = False
    ) -> AsyncIterator[None]:
        """One of the turn slots for a preview: it composes every section as a turn
        does, and previews outside the slots (a flood of them, each on its continuum)
        lagged the loop until the turns' own sections were cut. Queued in the same fair
        order, refused at the door as a turn is (`Overloaded`), and not measured as a
        turn's time. `behind_turns`: in the continuum's own queue, after its turns (a
        preview its conversation actor answers); else under a key of its own (the
        composer answers at once, whatever the continuum's turn does)."""
        ticket = f"preview_{uuid.uuid4().hex}"
        try:
            key = continuum_id if behind_turns else f"{continuum_id}/preview"
            self.admission.enter(user, key, ticket, within=current_turn.get())
        except Busy as exc:
            if behind_turns or isinstance(exc, Overloaded):
                raise
            # Its message would name the previews' own queue key, not the continuum.
            raise Busy(
                f"continuum {continuum_id!r} has previews waiting already; retry when one "
                "has finished",
                retry_after=exc.retry_after,
            ) from None
        try:
            await self.admission.wait(ticket)
            yield
        finally:
            self.admission.release(ticket)

    async def _drop_unused(self, key: LaneKey) -> None:
        """Stop a lane that a preview (or a turn that did not complete) started, unless
        someone has taken it up meanwhile: previews of unknown continuums, and turns
        abandoned in them, must leave no actors behind. What its composer and trinkets
        still do was for that caller alone, who is gone (cancelled, say, mid-compose):
        it is cancelled at once, not waited for up to the grace on the caller's path."""
        await self._stop_unused(key, wanted=False)

    async def _stop_unused(self, key: LaneKey, *, wanted: bool = True) -> bool:
        """Stop the key's lane if it is loaded and nothing uses it now (checked here, as
        a turn may have taken it up while an earlier lane was stopping); whoever asks for
        it meanwhile waits, then starts it afresh. Shielded: a lane half stopped would be
        neither loaded nor gone. Whether it was stopped. `wanted=False`: its composer's
        and trinkets' work in hand is cancelled at once (`_stop_lane`)."""
        lane = self._lanes.get(key)
        if lane is None or lane.users > 0:
            return False
        del self._lanes[key]
        stopped = self._stopping[key] = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                await self._stop_lane(lane, wanted=wanted)
        finally:
            del self._stopping[key]
            stopped.set()
        return True

    async def model_settings(
        self, continuum_id: str, *, user: str
    ) -> tuple[ContinuumModel, ModelChoice]:
        """The user's continuum's own model settings, and what its turns run with."""
        check_user_name(user)
        check_continuum_id(continuum_id)
        own = await self._storage.continuum_model(user, continuum_id)
        return own, choose_model(self._settings.model, own)

    async def set_model_settings(
        self, continuum_id: str, own: ContinuumModel, *, user: str
    ) -> tuple[ContinuumModel, ModelChoice]:
        """Replace the user's continuum's own model settings (None fields: the config's).

        Checked against the model before anything is stored; turns already queued run
        with the settings they were queued under, later ones with these.
        """
        check_user_name(user)
        check_continuum_id(continuum_id)
        choice = choose_model(self._settings.model, own)
        try:
            catalog = await self._models.meet(choice.name)  # online: the Models API first
            check_model_choice(choice, self._settings.composer.channel, catalog)
            check_server_tool_support(
                self._server_tools, choice.name, self._server_tool_support, "model"
            )
        except SettingsError as exc:
            raise InvalidModelSettings(str(exc)) from None
        await self._storage.set_continuum_model(user, continuum_id, own)
        if (user, continuum_id) in self._lanes:
            async with self._using(user, continuum_id) as lane:
                await lane.conversation.ask(Reconfigure(own))
        return own, choice

    async def evict_idle(self, idle_seconds: float) -> list[LaneKey]:
        """Stop the lanes unused for `idle_seconds` (none in use); returns their keys.

        A long-lived daemon meets many continuums; each lane holds two actors and the
        continuum's history window in memory. An evicted continuum loses nothing: its
        next turn starts a fresh lane, which reloads the history from storage.
        """
        cutoff = time.monotonic() - idle_seconds
        idle = [
            key for key, lane in self._lanes.items() if lane.users == 0 and lane.last_used <= cutoff
        ]
        return [key for key in idle if await self._stop_unused(key)]

    async def unload(self, user: str, continuum_id: str) -> None:
        """Stop the user's continuum's lane, if it has one; `Busy` while a turn uses it.

        Done before a continuum is deleted, so no actor keeps a history that storage no
        longer has.
        """
        key = (user, continuum_id)
        lane = self._lanes.get(key)
        if (lane is not None and lane.users) or self.admission.queued(user, continuum_id):
            raise Busy(f"continuum {continuum_id!r} has a turn in progress")
        await self._stop_unused(key)

    async def _stop_lane(self, lane: _Lane, *, wanted: bool = True) -> None:
        """Stop the lane's actors, the conversation first, its trinkets last, those all
        at once (each is on its own: a hung render costs one grace, not one each).
        `wanted=False`: what the composer and trinkets have in hand (a composition, a
        render) is for a caller who is gone, and is cancelled at once instead (a turn's
        handler has been cancelled, and waited for, by its stream already)."""
        system = self._system

        async def stop(ref: ActorRef[Any, Any]) -> None:
            await system.stop(ref, grace=None if wanted or not ref.busy else 0)

        async def gatherers() -> None:
            await stop(lane.composer)
            async with anyio.create_task_group() as tg:
                for trinket in lane.trinkets:
                    tg.start_soon(stop, trinket)

        # The conversation's work in hand may be a turn's storing: never cut short. A
        # caller gone, its composer and trinkets go first, so a preview it still waits
        # on ends at once (its ask fails) instead of holding the conversation a grace.
        if wanted:
            await system.stop(lane.conversation)
            await gatherers()
        else:
            await gatherers()
            await system.stop(lane.conversation)

    @property
    def draining(self) -> bool:
        """Whether shutdown has begun: new turns are refused."""
        return self._draining

    def drain(self) -> None:
        """Shutting down: turns still queued end with an error event and a record
        (`shutting_down`) when their turn comes, instead of running; those waiting for a
        slot end so at once."""
        self._draining = True
        self.admission.drain()

    async def close_turns(self, grace: float) -> None:
        """Closing (the library's way out), as the daemon's shutdown: `drain`; a turn
        taken in and not yet handed to its actor (waiting, or never read) ends at once
        as shutting down, with its record; running turns get up to `grace` seconds,
        then are cancelled (their record says so, their reader gets a `shutting_down`
        error), before the actors stop."""
        self.drain()
        reason = "the service is shutting down; this turn did not start"
        for stream in list(self._streams):
            await stream._end_unstarted(ShuttingDown.type, reason)
        with anyio.move_on_after(grace):
            await self.admission.settled()
        running = list(self._streams)
        for stream in running:
            stream._shut_down()
        with anyio.move_on_after(WIND_DOWN_S, shield=True):
            for stream in running:
                await stream._wound_down()
        # Then every lane stops, all at once: left to the actor system, they would stop
        # one actor after another, each with its own grace, and a render hung in each of
        # many lanes would hold the close for that many graces.
        async with anyio.create_task_group() as tg:
            for key in list(self._lanes):
                tg.start_soon(self._stop_unused, key)

    def offered_tools(self) -> tuple[Any, ...]:
        """The request's `tools` array as it is now (`ToolDefinition`s and `ServerTool`s)."""
        return self._deps.tools.offered()

    def lanes(self) -> list[LaneKey]:
        """The (user, continuum id) of every running lane."""
        return list(self._lanes)


def shut_down_event(turn_id: str | None) -> TurnError:
    """The last event of a turn cancelled because the service shut down (the library's
    close past its grace, the daemon's past its own)."""
    return TurnError(
        ShuttingDown.type,
        "the service shut down before this turn finished; it was cancelled and nothing "
        "of it was stored",
        turn_id,
    )


@contextmanager
def _refusals(continuum_id: str) -> Iterator[None]:
    """The kernel's refusals of a message to a continuum's actors as the caller's errors:
    a full mailbox (previews and warm-ups share it; turns are counted at the door) or
    an actor given up on for now is `Busy` (the latter with `retry_after`, the seconds
    until its supervisor takes a message again), a stopped one (Frontmind closing) is
    `ShuttingDown`. No `KernelError` reaches a caller for these."""
    try:
        yield
    except MailboxFull:
        raise Busy(
            f"continuum {continuum_id!r} has a full mailbox; retry when a turn has finished"
        ) from None
    except RestartLimitReached as exc:
        # Its wait is the supervisor's: a retry before its cool-down ends is refused again.
        raise Busy(
            f"continuum {continuum_id!r} is recovering: {exc}", retry_after=exc.retry_after
        ) from None
    except ActorStopped:
        raise ShuttingDown(
            f"continuum {continuum_id!r} is stopping: Frontmind is closing"
        ) from None
    except MessageFailed as exc:
        # An actor's contained failure of one message: the caller's own error when it
        # is one of Frontmind's (the store unreachable: 503, not a 500).
        if isinstance(exc.__cause__, FrontmindError):
            raise exc.__cause__ from None
        raise


class TurnWatch(Protocol):
    """Told when each turn starts and ends, and asked to hold each composition."""

    def turn_began(self) -> None: ...

    def turn_ended(self) -> None: ...

    def composing(self) -> AbstractContextManager[None]: ...


class TurnStream:
    """The events of one turn, and the one owner of what the turn holds: its ticket in
    the process's turn queue (its place, then its slot: actors/_admission.py), its lane
    (the continuum's actors, never evicted meanwhile) and its count among the turns
    running.

    `async for` reads the events; `async with` (or `aclose()`) leaves early safely: the
    turn is cancelled cleanly and its record says so. `start()` queues the turn without
    reading an event (the first event and `async with` queue it otherwise): bad input
    (`InvalidInput`, `MessageTooLarge`), a full queue (`Busy`) and a wait too long for a
    slot (`Overloaded`) are raised there, before anything is composed, sent or stored.
    The first event is awaited until the turn holds a slot; only then are the
    continuum's actors started and the turn handed to them. Every ending goes through one close
    path: the last event read, leaving the block, `aclose()`, an error or cancellation
    while reading, and a stream dropped unclosed (an `async for` left by `break`), which
    its finalizer closes on the event loop's thread.

    If the conversation actor itself crashes, the stream still ends properly: with an
    error event carrying the turn's id, and a record for the turn (the actor records
    every ending it sees; this covers the one it cannot).
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_completed",
        "_continuum_id",
        "_crashed",
        "_cut",
        "_ending",
        "_engine",
        "_events",
        "_lane",
        "_loop",
        "_message",
        "_run",
        "_spawned",
        "_started_at",
        "_user",
    )

    def __init__(self, engine: Engine, continuum_id: str, message: UserInput, user: str) -> None:
        self._engine = engine
        self._continuum_id = continuum_id
        self._message = message
        self._user = user
        self._events: ReplyStream[TurnEvent] | None = None
        self._lane: _Lane | None = None
        self._run: RunTurn | None = None
        self._started_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._crashed = False
        self._closed = False
        self._completed = False  # its TurnCompleted was read
        self._spawned = False  # its submission spawned the continuum's lane
        # The events of a turn that ended before its actor took it (`_end_unstarted`).
        self._ending: list[TurnEvent] | None = None
        self._cut = False  # cancelled by the instance's closing (`_shut_down`)

    @property
    def turn_id(self) -> str | None:
        """The turn's id, from `start()` on (None before)."""
        return None if self._run is None else self._run.turn_id

    async def start(self) -> None:
        """Queue the turn now (once; later calls return at once): the door, where bad
        input, a continuum with `turns.max_queued` turns waiting (`Busy`) and a wait for
        a slot longer than `turns.max_wait_s` (`Overloaded`) are refused. Nothing is
        started yet: no actor, nothing composed or stored."""
        if self._run is not None or self._closed:
            return
        check_user_name(self._user)
        check_continuum_id(self._continuum_id)
        content, text = user_content(self._message)
        if self._engine._draining:
            raise ShuttingDown("Frontmind is shutting down (or closed): it takes no new turns")
        run = RunTurn(new_turn_id(), text, () if isinstance(self._message, str) else content)
        # Its place in the queue from now on, given up by `_close` however the stream
        # ends (the finalizer's close included).
        try:
            # A turn started from a tool of a running turn (`current_turn`, the
            # caller's context) is nested: it brings its own slot (actors/_admission.py).
            self._engine.admission.enter(
                self._user, self._continuum_id, run.turn_id, within=current_turn.get()
            )
        except Busy as exc:
            # Refused at the door: nothing of it composed, sent or stored, but its record
            # says so, written by the background worker (the refusal answers at once).
            self._record_later(
                self._turn_record("cancelled", None, f"{error_type(exc)}: {exc}", run)
            )
            exc.turn_id = run.turn_id  # the caller's way to that record
            raise
        self._run = run
        self._engine._streams.add(self)
        self._loop = asyncio.get_running_loop()

    async def _submit(self) -> ReplyStream[TurnEvent] | None:
        """Queued (`start`), then once the turn holds its slot: the continuum's lane,
        spawned only now (a turn waiting costs its ticket alone), and the turn in the
        conversation actor's mailbox. None when it ends before that (shutting down)."""
        await self.start()
        engine, continuum_id, run = self._engine, self._continuum_id, self._run
        assert run is not None
        try:
            await engine.admission.wait(run.turn_id)
            if self._closed_now():  # closed by another task while it waited: never started
                return None
            if engine._draining:  # at once, not behind the continuum's running turn
                await self._end_unstarted(
                    ShuttingDown.type, "the service is shutting down; this turn did not start"
                )
                return None
            self._spawned = (self._user, continuum_id) not in engine._lanes
            with _refusals(continuum_id):
                self._lane = lane = await engine._hold_turn(self._user, continuum_id)
                self._events = lane.conversation.stream_nowait(run)
        except BaseException as exc:
            if isinstance(exc, FrontmindError):  # refused: its record says why
                await self._end_unstarted(error_type(exc), str(exc))
            await self._finish(ended=False)
            raise
        self._started_at = engine._deps.clock()
        return self._events

    async def __aenter__(self) -> TurnStream:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._finish(ended=exc_type is None)

    async def aclose(self) -> None:
        await self._finish(ended=True)

    async def _finish(self, *, ended: bool) -> None:
        """Every ending's async part, after the close: the handler wound down (a record
        that is final), a record for a turn left before its actor took it, then the
        lane this turn spawned let go."""
        self._close(ended=ended)
        await self._wound_down()
        if self._run is not None and self._events is None and self._ending is None:
            await self._end_unstarted("cancelled", "the caller left before the turn started")
        await self._let_go()

    async def _end_unstarted(self, kind: str, reason: str) -> None:
        """A turn taken in (`start`) that ends before its conversation actor took it:
        its record (`cancelled`: nothing of it was stored or sent) and its events, so
        every accepted turn leaves a record and a reader an id to match it by."""
        run = self._run
        if run is None or self._ending is not None or self._events is not None:
            return  # not taken in, ended already, or its actor has it
        self._engine.admission.release(run.turn_id)  # its place goes at once
        self._ending = [
            TurnStarted(run.turn_id, self._continuum_id),
            TurnError(kind, reason, run.turn_id),
        ]
        await self._record("cancelled", None, f"{kind}: {reason}")

    async def _record(self, status: TurnOutcome, started_at: float | None, error: str) -> None:
        """The record of a turn whose actor did not end it (`started_at` None: it never
        started). If the actor recorded it, this adds nothing (one record per turn id);
        storage failing leaves the caller its error event all the same."""
        record = self._turn_record(status, started_at, error)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5), suppress(StorageError):
            await self._engine._deps.storage.record_turn(self._user, record)
        self._engine._ended(status, record.usage)

    def _turn_record(
        self, status: TurnOutcome, started_at: float | None, error: str, run: RunTurn | None = None
    ) -> TurnRecord:
        run = run or self._run
        assert run is not None
        engine = self._engine
        ended = moment(engine._deps.clock())
        began = ended if started_at is None else moment(started_at)
        model = engine._settings.model.name
        return TurnRecord(
            run.turn_id, self._continuum_id, status, began, ended, model, run.text, error=error
        )

    async def _wound_down(self) -> None:
        """A turn left before its end: until its handler has wound down, its record
        saying `cancelled` (briefly, and shielded: a caller leaving because it is itself
        cancelled still finds the record final), so the caller's next read of the turn
        never sees the placeholder written before the composition."""
        if self._events is None or self._completed:
            return
        with anyio.move_on_after(WIND_DOWN_S, shield=True):
            await self._events.wait_ended()

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> TurnEvent:
        if self._closed:
            raise StopAsyncIteration
        if self._ending is not None:  # it ended before its actor took it
            if self._ending:
                return self._ending.pop(0)
            await self._finish(ended=True)
            raise StopAsyncIteration
        events = self._events
        if events is None:
            events = await self._submit()
            if events is None:
                return await self.__anext__()
        if self._crashed:
            await self._finish(ended=True)
            raise StopAsyncIteration
        try:
            event = await events.__anext__()
        except StopAsyncIteration:
            await self._finish(ended=True)
            raise
        except Exception as exc:  # the actor boundary: its crash is an event, not ours
            if self._closed_now() and not self._cut:
                # Closed by its owner meanwhile (`aclose()` from another task, or another
                # reader read its end): the events stop here, nothing crashed.
                raise StopAsyncIteration from None
            self._crashed = True
            if self._cut or isinstance(exc, ActorStopped):  # closing, not a crash
                return shut_down_event(self._turn_id())
            log.error("turn %s: the conversation actor failed", self._turn_id(), exc_info=exc)
            return await self._crash_event(exc)
        except BaseException:
            await self._finish(ended=False)
            raise
        if type(event) is TurnCompleted:
            self._completed = True
        return event

    async def _let_go(self) -> None:
        """After the close: a lane that this turn's start spawned goes too, unless the
        turn completed or someone else holds the lane now. A turn abandoned or failed in
        a continuum new to the process committed nothing, and its lane (a dozen actors
        and their last composition, some 20 KiB) would otherwise stay until
        `turns.idle_minutes`: a thousand abandoned turns held some 40 MB
        (bench/abandon.py --fresh). Its next turn reloads it from storage."""
        if self._spawned and not self._completed:
            self._spawned = False
            await self._engine._drop_unused((self._user, self._continuum_id))

    def _close(self, *, ended: bool) -> None:
        """The one close path: the handler is cancelled if it still runs (its record
        says so), then the lane and the turn's count are released."""
        if self._closed:
            return
        self._closed = True
        self._engine._streams.discard(self)
        if self._events is not None:
            self._events.abandon()
        if self._run is not None:
            self._engine.admission.release(self._run.turn_id)
        lane, self._lane = self._lane, None
        if lane is not None:
            ended = ended and self._events is not None
            self._engine._release_turn(self._user, self._continuum_id, lane, ended=ended)

    def _shut_down(self) -> None:
        """The instance is closing past its grace: the handler is cancelled (its record
        says `cancelled`), and the reader's next event is a `shutting_down` error."""
        run, events = self._run, self._events
        if run is None or events is None or self._closed:
            return
        if self._engine.admission.holds(run.turn_id):  # still running, not just unread
            self._cut = True
            events.abandon()

    def _turn_id(self) -> str | None:
        return None if self._run is None else self._run.turn_id

    def __del__(self) -> None:
        if not self._closed and self._loop is not None:
            # Dropped unclosed: closed on the loop's thread (a collection may run anywhere).
            with suppress(RuntimeError):  # the loop is closed: nothing is left to release
                self._loop.call_soon_threadsafe(self._dropped)

    def _closed_now(self) -> bool:
        """Whether it is closed, read again after an await (which may have closed it)."""
        return self._closed

    def _dropped(self) -> None:
        """Dropped unclosed: closed; a turn taken in (`start`) that its actor never took
        gets its record from the background worker (every accepted turn leaves one)."""
        unstarted = self._run is not None and self._events is None and self._ending is None
        self._close(ended=False)
        if unstarted:
            error = "cancelled: the caller dropped the turn before it started"
            self._record_later(self._turn_record("cancelled", None, error))
            self._engine._ended("cancelled", TurnUsage())

    def _record_later(self, record: TurnRecord) -> None:
        self._engine.record_later(self._user, record)

    async def _crash_event(self, exc: Exception) -> TurnError:
        """The conversation actor failed (it is restarted): an error event and a record."""
        detail = f"the conversation actor failed: {type(exc).__name__}: {exc}"
        kind = error_type(exc)
        await self._record("failed", self._started_at, f"{kind}: {detail}")
        return TurnError(kind, detail, self._turn_id())


@dataclass
class _Lane:
    composer: ActorRef[Any, Any]
    conversation: ActorRef[Any, Any]
    trinkets: list[ActorRef[Any, Any]]
    last_used: float = 0.0
    users: int = 0  # callers holding the lane (it is never evicted while held)
