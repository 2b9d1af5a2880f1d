"""`Frontmind`: the library API. The daemon and the CLI are built on it.

async with Frontmind.open("./data", offline=True) as fm:
    async for event in fm.turn("alice", "Remind me to call Bob in 2 hours"):
        ...
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec

from actors import (
    BUILTIN_SECTIONS,
    Admission,
    AnthropicModel,
    Busy,
    Composed,
    Engine,
    InvalidModelSettings,
    McpServer,
    McpServerStatus,
    ModelCatalog,
    ModelChoice,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ModelSource,
    ModelUnavailable,
    PlacementRegistry,
    ServerToolSupport,
    Surfacings,
    TaskTimers,
    Timers,
    Tool,
    ToolsReload,
    TtlPolicy,
    Turn,
    TurnStream,
    UserInput,
    as_tool,
    builtin_trinkets,
    catalog_support,
    check_user_tools,
    estimate_tokens,
    mcp_servers,
    prepare_embedder,
    server_tools,
    validate_settings,
)
from runtime import ActorStats, ActorSystem, RestartPolicy
from storage import (
    DEFAULT_USER,
    Continuum,
    ContinuumModel,
    Document,
    InvalidInput,
    Job,
    Memory,
    MemoryHit,
    Message,
    PostgresStorage,
    Reminder,
    SQLiteStorage,
    Storage,
    StorageUnavailable,
    TurnOutcome,
    TurnRecord,
    TurnUsage,
    User,
    UserForgotten,
    check_document,
    check_user_name,
)

from ._exceptions import BudgetExceeded, ConfigError
from ._gate import GatedTurn, UserGate
from ._gc import IdleCollector
from ._groups import raise_unwrapped
from ._lock import check_not_lock, data_dir_lock
from ._models import REFRESH_SECONDS, load_catalog, local_api_rows, models_api_meet
from ._users import new_token, token_digest
from ._wire import quoting_excerpts
from .config import Config, check_face_config, custom_tools, custom_trinkets, load_config

if TYPE_CHECKING:  # the local API (Starlette, uvicorn) loads only when offline=True
    from .localapi import Clock, LocalMessagesAPI

__all__ = ["DATABASE_FILE", "Frontmind", "NoModel", "TurnStream"]

DATABASE_FILE = "frontmind.db"
OFFLINE_KEY = "offline-local-key"
BACKGROUND_TICK_S = 30.0  # how often the background worker looks for due jobs anyway
# How long deleting a continuum (or a user) waits for a turn running in it (or one of
# theirs) in another process.
DELETE_LEASE_WAIT_S = 2.0
# How long a readiness check waits for the store: a server that does not answer at all
# (one that refuses answers at once).
STORAGE_CHECK_S = 2.0


class NoModel:
    """A model client for work that never calls the model: previews, composing, stats."""

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        raise ModelUnavailable("this Frontmind was opened without a model")

    async def aclose(self) -> None:
        return None


class Frontmind:
    """One Frontmind instance: storage, actors and a model client, in one data directory.

    Every conversation, reminder, memory and document belongs to a user. The instance
    `open` gives is user `default` (all a single-person setup ever needs);
    `fm.user("alice")` is the same API scoped to alice: her turns, context, history,
    reminders, memories and documents (her own system prompt), and nobody else's.
    Instance-wide operations (users, statistics, unloading) are the same from any scope.
    """

    def __init__(
        self,
        runtime: Engine,
        storage: Storage,
        system: ActorSystem,
        config: Config,
        data_dir: Path,
        local_api: LocalMessagesAPI | None,
        model: ModelClient,
        clock: Callable[[], float],
        user: str = DEFAULT_USER,
        documents_locks: dict[str, anyio.Lock] | None = None,
        collector: IdleCollector | None = None,
        gate: UserGate | None = None,
    ) -> None:
        self.user_name = check_user_name(user)
        self._runtime = runtime
        self.storage = storage
        self._system = system
        self.config = config
        self.data_dir = data_dir
        self.local_api = local_api
        self.model = model
        self._clock = clock
        # One lock per user, shared by every scope of this instance: a budget check and
        # its write happen as one, however many requests write documents at once.
        self._documents_locks = {} if documents_locks is None else documents_locks
        # The `idle` GC policy's collector (`[runtime] gc`), or None: CPython's own.
        self._collector = collector
        # Turns in flight per user, shared by every scope: deleting a user waits for none.
        self._gate = UserGate() if gate is None else gate

    @property
    def models(self) -> ModelCatalog:
        """What each model accepts and costs, as this instance knows it: the shipped
        `models.toml`, the Models API's answers (online), the config's `[[models]]`."""
        return self._runtime.models

    @property
    def admission(self) -> Admission:
        """The process's turn slots and their queue (shared by every user's instance):
        `active`, `waiting`, `refused`, `admitted`, `turn_seconds`, `max_active`."""
        return self._runtime.admission

    def warm_ups(self) -> tuple[int, TurnUsage]:
        """The cache warm-ups this instance sent (every user's) and their summed usage:
        costs beside the turns' own (`cache.warm`)."""
        return self._runtime.warm_ups, self._runtime.warm_usage

    def turn_totals(self) -> tuple[dict[TurnOutcome, int], TurnUsage]:
        """The turns this instance ended (every user's), as their records say: how many
        of each status, and their summed usage, completed or not (a failed or cancelled
        turn's calls were billed too). A turn refused at the door (`Busy`, `Overloaded`)
        is not among them, though its record says `cancelled`: `admission.refused`
        counts those."""
        return dict(self._runtime.turn_outcomes), self._runtime.turn_usage

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        data_dir: str | Path,
        config: Config | None = None,
        *,
        config_file: Path | None = None,
        offline: bool = False,
        model: ModelClient | None = None,
        clock: Callable[[], float] = time.time,
        api_key: str | None = None,
        base_url: str | None = None,
        local_api_clock: Clock | None = None,
        tools: Sequence[Tool[..., Any] | Callable[..., Any]] = (),
        ttl_policy: TtlPolicy | None = None,
        timers: Timers | None = None,
        mcp: Sequence[McpServer | Mapping[str, Any]] = (),
        server_tool_support: ServerToolSupport | None = None,
        mcp_policy: RestartPolicy | None = None,
    ) -> AsyncIterator[Frontmind]:
        """Open (creating if needed) the data directory and start every actor.

        `offline=True` runs the built-in local Messages API in-process and points the
        SDK at it. Otherwise the key and URL come from the arguments, else from
        ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL. `tools`: functions the model may call
        (see `frontmind.tool`), after the config's `[[tool]]` entries; they are fixed
        for this instance's life, so the cached prefix stays the same on every turn.
        `ttl_policy` replaces the cache TTL policy `cache.policy` names (`frontmind
        simulate` passes its oracle); `timers` run the cache warm-up's timers (`frontmind
        simulate` passes its simulated clock), else tasks of this instance.
        `mcp`: MCP servers (`McpServer`s, or mappings with the keys of `[[mcp]]`), after
        the config's; they start now and stop with the instance, and a `required` one
        that does not start makes `open` fail. `server_tool_support(model, type)` answers
        whether a model takes a server tool (None) or why not (default: the model data,
        models.toml's `server_tools` with the Models API's capabilities over it);
        `mcp_policy` replaces the servers' restart policy.
        """
        try:
            async with cls._open(
                data_dir,
                config,
                config_file=config_file,
                offline=offline,
                model=model,
                clock=clock,
                api_key=api_key,
                base_url=base_url,
                local_api_clock=local_api_clock,
                tools=tools,
                ttl_policy=ttl_policy,
                timers=timers,
                mcp=mcp,
                server_tool_support=server_tool_support,
                mcp_policy=mcp_policy,
            ) as fm:
                yield fm
        except BaseExceptionGroup as group:
            # Task groups wrap an error once per level they cross: hand the user the error.
            raise_unwrapped(group)

    @classmethod
    @asynccontextmanager
    async def _open(
        cls,
        data_dir: str | Path,
        config: Config | None,
        *,
        config_file: Path | None,
        offline: bool,
        model: ModelClient | None,
        clock: Callable[[], float],
        api_key: str | None,
        base_url: str | None,
        local_api_clock: Clock | None,
        tools: Sequence[Tool[..., Any] | Callable[..., Any]],
        ttl_policy: TtlPolicy | None = None,
        timers: Timers | None = None,
        mcp: Sequence[McpServer | Mapping[str, Any]] = (),
        server_tool_support: ServerToolSupport | None = None,
        mcp_policy: RestartPolicy | None = None,
    ) -> AsyncIterator[Frontmind]:
        if "://" in str(data_dir):
            # A database's URL where the data directory goes became a folder named after
            # it (its password too) with a SQLite store inside, and nothing said so. Only
            # the scheme is quoted: the rest may hold a password.
            raise ConfigError(
                f"data_dir: {str(data_dir).split('://')[0]!r}://… is a URL, not a data "
                "directory; a database goes in the config's storage.url (or "
                "FRONTMIND_DATABASE_URL)"
            )
        if not str(data_dir).strip():  # a Path("") reads "." already
            # An empty name (an unset variable of the app's) is the working directory
            # to pathlib: the store went there, wherever the app was started, unsaid.
            raise ConfigError(
                'data_dir is empty: name the data directory ("." for the working one)'
            )
        directory = Path(data_dir)
        config = config or load_config(config_file, directory)
        validate_settings(config)
        check_face_config(config)
        catalog = load_catalog(config.models)
        registry, custom = custom_trinkets(config, PlacementRegistry(BUILTIN_SECTIONS))
        user_tools = [*custom_tools(config), *(as_tool(t) for t in tools)]
        # Before anything starts: a bad entry or a name clash is a startup error.
        servers = mcp_servers([*config.mcp, *mcp])
        offered_server_tools = server_tools(config.server_tool)
        check_user_tools(user_tools, offered_server_tools)
        async with AsyncExitStack() as stack:
            stack.enter_context(data_dir_lock(directory))
            local_api: LocalMessagesAPI | None = None
            # With a client of its own on a real key, Frontmind reads the Models API; a
            # client handed in (tests, `frontmind simulate`) and offline runs use the data.
            own_client: AnthropicModel | None = None
            if model is None:
                if offline:
                    from .localapi import Latency, LocalMessagesAPI

                    latency = Latency(
                        time_to_first_token=config.offline.time_to_first_token_s,
                        tokens_per_second=config.offline.tokens_per_second,
                    )
                    # It serves the models Frontmind runs with: the config's [[models]]
                    # rows too (a model they add, a correction), not the shipped file alone.
                    local_api = await stack.enter_async_context(
                        LocalMessagesAPI(
                            latency=latency,
                            clock=local_api_clock,
                            models=local_api_rows(catalog, config.models),
                        )
                    )
                    api_key, base_url = OFFLINE_KEY, local_api.base_url
                model = AnthropicModel(
                    api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"),
                    base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
                    max_retries=config.model.max_retries,
                    timeout=config.model.timeout_s,
                )
                stack.push_async_callback(model.aclose)
                own_client = None if offline else model
            storage = await open_storage(config, directory)
            stack.push_async_callback(storage.close)
            # The turns a previous process left running (killed mid-turn) read as
            # interrupted from now on; with SQLite this process holds the directory's
            # lock, on PostgreSQL another replica's running turns hold their leases.
            interrupted = await storage.interrupt_stale_turns()
            if interrupted:
                logging.getLogger("frontmind").warning(
                    "%d turns were left running by a process that ended: recorded as interrupted",
                    interrupted,
                )
            meet = None
            if own_client is not None:
                meet = models_api_meet(catalog, config.models, storage, own_client, clock)
            models = ModelSource(catalog, meet, clock=clock, refresh_seconds=REFRESH_SECONDS)
            # The config's model is checked before anything starts (online: after the
            # Models API had its say; offline: against the data alone).
            validate_settings(config, catalog=await models.meet(config.model.name))
            if config.memory.embedder is not None:
                # Its dimension checked and recorded with the vectors before any turn.
                await prepare_embedder(config.memory.embedder, storage, config.module_path)
            system = await stack.enter_async_context(
                ActorSystem(stop_grace=config.server.grace_seconds)
            )
            surfacings = Surfacings()  # memory uses, from the sections to the worker
            runtime = Engine(
                system,
                storage=storage,
                model=model,
                settings=config,
                registry=registry,
                trinkets=[*builtin_trinkets(storage, config, user_tools, surfacings), *custom],
                surfacings=surfacings,
                clock=clock,
                models=models,
                tools=user_tools,
                ttl_policy=ttl_policy,
                mcp=servers,
                server_tools=offered_server_tools,
                mcp_policy=mcp_policy,
                # Default: the model data in force (the Models API's answer over the
                # shipped rows, online), so a [[server_tool]] the model lacks is refused
                # at settings time, before any model call.
                server_tool_support=server_tool_support or catalog_support(lambda: models.catalog),
            )
            if runtime.mcp is not None:
                # The servers start now (each one's first try is waited for) and stop
                # before the actors do.
                await stack.enter_async_context(runtime.mcp.running())
            idle = config.turns.idle_minutes * 60
            collector = None
            if config.runtime.gc == "idle":  # unset: CPython's own (the daemon sets it)
                collector = IdleCollector()
                stack.enter_context(collector.installed())  # restored once its task ends
            janitor = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(janitor.cancel_scope.cancel)  # on the way out, after the turns
            if idle > 0:
                janitor.start_soon(_unload_idle, runtime, idle)
            # Jobs a previous process left (or that wait for a retry) resume from here.
            janitor.start_soon(_wake_background, runtime, BACKGROUND_TICK_S)
            # The cache warm-up's timers: the given ones (`frontmind simulate`'s clock
            # fires them as it advances), else tasks of the janitor, cancelled with it.
            runtime.use_timers(timers or TaskTimers(janitor, clock))
            if collector is not None:
                runtime.watch_turns(collector)  # a turn in flight: no idle collection now
                janitor.start_soon(collector.run)
            # The first thing on the way out: turns still queued end at once with a
            # `shutting_down` event and a record (as the daemon's drain ends them), and
            # running ones go on for up to `server.grace_seconds`.
            stack.push_async_callback(runtime.close_turns, config.server.grace_seconds)
            yield cls(
                runtime,
                storage,
                system,
                config,
                directory,
                local_api,
                model,
                clock,
                collector=collector,
            )

    # -- users ---------------------------------------------------------------------------

    def user(self, name: str) -> Frontmind:
        """The same API, scoped to user `name`: only that user's data is seen or changed.

        Any well-formed name may be used in the library (like a continuum, a user's data
        starts with its first write); `add_user` gives a user a token for the daemon.
        """
        return Frontmind(
            self._runtime,
            self.storage,
            self._system,
            self.config,
            self.data_dir,
            self.local_api,
            self.model,
            self._clock,
            user=name,
            documents_locks=self._documents_locks,
            collector=self._collector,
            gate=self._gate,
        )

    async def add_user(self, name: str) -> str:
        """Add a user and return its bearer token. The token is shown this once: only its
        SHA-256 digest is stored. If the name is taken, `UserExists` (a `StorageError`:
        the daemon's 409); if it is malformed or `default`, `InvalidInput`."""
        token = new_token()
        await self.storage.add_user(name, token_digest(token))
        return token

    async def users(self) -> list[User]:
        """The users added with `add_user` (`default` is built in and not listed)."""
        return await self.storage.users()

    async def rotate_token(self, name: str) -> str:
        """Give user `name` a new bearer token and return it (shown this once). The old
        token stops working at once: the daemon looks tokens up on every request.
        `NotFound` if there is no such user."""
        token = new_token()
        await self.storage.set_user_token(name, token_digest(token))
        return token

    def _writing(self) -> AbstractContextManager[None]:
        """Counts a write of this user's rows in the gate (`delete_user`)."""
        return self._gate.writing(self.user_name)

    async def delete_user(self, name: str) -> UserForgotten:
        """Forget user `name`: their token and every row of theirs, in one transaction;
        the answer counts the rows of each table. Their loaded continuums are unloaded
        first; `Busy` while a turn of theirs runs (nothing is deleted then; a turn in
        another process sharing the store is waited for a moment first), and no turn of
        theirs starts here until the delete is over (`Busy` too: frontmind/_gate.py)."""
        async with self._gate.closed(name), self._runtime.records_forgotten(name):
            for user, continuum_id in self._runtime.lanes():
                if user == name:
                    await self._runtime.unload(user, continuum_id)
            return await delete_user_leased(self.storage, name)

    async def backup(self, path: str | Path) -> int:
        """A consistent snapshot of the store in the file `path`, taken while turns run
        (SQLite's online backup; the file appears whole or not at all); its size in
        bytes. A PostgreSQL store is backed up with pg_dump instead (`InvalidInput`)."""
        check_not_lock(Path(path), self.data_dir)
        return await self.storage.backup(Path(path))

    async def check_storage(self, timeout_s: float = STORAGE_CHECK_S) -> None:
        """Return once the store answers a read; raise its error (`StorageError`) if it
        cannot, or `StorageUnavailable` if it does not answer within `timeout_s`: a
        readiness probe's question (the daemon's `/readyz`)."""
        if isinstance(timeout_s, bool) or not (
            isinstance(timeout_s, int | float) and 0 < timeout_s < math.inf
        ):
            raise InvalidInput(f"timeout_s must be a number of seconds above 0, not {timeout_s!r}")
        with anyio.move_on_after(timeout_s):
            await self.storage.schema_version()
            return
        raise StorageUnavailable(f"the storage did not answer within {timeout_s:g} s")

    async def user_for_token(self, token: str) -> str | None:
        """The name of the user whose token this is, or None."""
        return await self.storage.user_for_token_hash(token_digest(token))

    # -- turns ---------------------------------------------------------------------------

    def turn(self, continuum_id: str, message: UserInput) -> TurnStream:
        """Run a turn and stream its events; `Busy` if too many are queued.

        The turn waits for one of the process's slots (`[turns] max_active`) before its
        first event, in a fair queue (round robin by user, then by continuum); when
        that wait would pass `[turns] max_wait_s` it raises `Busy` (an `Overloaded`,
        with `retry_after` seconds) as it starts, before anything is composed or stored.

        `message` is text, or a list of content blocks in the Messages API's shape:
        `{"type": "text", ...}`, `{"type": "image", "source": ...}`,
        `{"type": "document", "source": ...}` (dicts, or `msgspec.Raw` JSON kept as
        its exact bytes). Out-of-limit input is refused before anything happens.
        """
        # The engine's turn, counted in the user's gate while it runs (`delete_user`).
        return GatedTurn(self._runtime, continuum_id, message, self.user_name, self._gate)

    async def context(self, continuum_id: str, message: UserInput) -> ModelRequest:
        """The request a turn with `message` would send now. Nothing is sent or stored.

        It composes as a turn does, in one of the turn slots (`Overloaded` when the wait
        for one would pass `[turns] max_wait_s`)."""
        return await self._runtime.preview(continuum_id, message, user=self.user_name)

    async def model_settings(self, continuum_id: str) -> tuple[ContinuumModel, ModelChoice]:
        """The continuum's own model settings, and the settings its turns run with."""
        return await self._runtime.model_settings(continuum_id, user=self.user_name)

    async def set_model_settings(
        self,
        continuum_id: str,
        *,
        model: str | None = None,
        thinking: Literal["off", "enabled", "adaptive"] | None = None,
        budget_tokens: int | None = None,
        max_tokens: int | None = None,
        effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None,
        thinking_display: Literal["summarized", "omitted"] | None = None,
    ) -> tuple[ContinuumModel, ModelChoice]:
        """Choose the continuum's model settings; each None falls back to `[model]`.

        Refused (`InvalidInput`: the daemon's 400) when the model would refuse them: thinking
        budget not below max_tokens, a thinking mode the model lacks, and so on.
        """
        given = {
            "model": model,
            "thinking": thinking,
            "budget_tokens": budget_tokens,
            "max_tokens": max_tokens,
            "effort": effort,
            "thinking_display": thinking_display,
        }
        try:  # the same type checks the daemon's JSON body gets
            own = msgspec.convert(given, ContinuumModel)
        except msgspec.ValidationError as exc:
            # msgspec quotes a refused enum value whole: an excerpt of it, as the daemon
            # gives, with room for this module's own longer messages (a model name's).
            why = quoting_excerpts(str(exc), 300)
            raise InvalidModelSettings(f"model settings: {why}") from None
        with self._writing():
            return await self._runtime.set_model_settings(continuum_id, own, user=self.user_name)

    async def compose(self, continuum_id: str, text: str) -> Composed:
        """The sections a turn with `text` would get now, with their statuses (composed
        in one of the turn slots, as `context`)."""
        turn = Turn(
            "preview",
            continuum_id,
            text,
            self._clock(),
            self.config.timezone,
            self.user_name,
            preview=True,
        )
        return await self._runtime.compose(turn)

    async def context_json(self, continuum_id: str, text: str) -> Any:
        return msgspec.json.decode(msgspec.json.encode(await self.context(continuum_id, text)))

    async def history(
        self, continuum_id: str, *, limit: int = -1, after: int = -1
    ) -> list[Message]:
        """The continuum's messages in order (from the one after seq `after`)."""
        return await self.storage.all_messages(
            self.user_name, continuum_id, limit=limit, after=after
        )

    async def turns(
        self,
        continuum_id: str | None = None,
        limit: int = 100,
        *,
        before: tuple[datetime, str] | None = None,
    ) -> list[TurnRecord]:
        return await self.storage.turns(self.user_name, continuum_id, limit=limit, before=before)

    async def continuums(
        self, *, limit: int = -1, after: tuple[datetime, str] | None = None
    ) -> list[Continuum]:
        """The user's continuums, the most recently active first."""
        return await self.storage.continuums(self.user_name, limit=limit, after=after)

    async def delete_continuum(self, continuum_id: str) -> None:
        """Delete a continuum and everything it holds; `Busy` while a turn runs in it,
        here or (on a shared store) in another process."""
        with self._writing():
            await self._runtime.unload(self.user_name, continuum_id)
            # A turn in it in another process sharing the store holds the continuum's
            # lease: the delete takes it too (a turn's record written between the
            # delete's statements refused it with a raw foreign-key error), waiting a
            # moment for a turn ending now.
            async with AsyncExitStack() as stack:
                with anyio.move_on_after(DELETE_LEASE_WAIT_S) as waiting:
                    lease = self.storage.continuum_lease(self.user_name, continuum_id)
                    await stack.enter_async_context(lease)
                if not waiting.cancelled_caught:
                    await self.storage.delete_continuum(self.user_name, continuum_id)
                    return
            raise Busy(
                f"a turn is running in continuum {continuum_id!r} in another process;"
                " it was not deleted: try again when the turn has ended",
                retry_after=DELETE_LEASE_WAIT_S,
            )

    # -- reminders, memories, documents ------------------------------------------------------

    async def add_reminder(
        self,
        text: str,
        due_at: datetime | None = None,
        origin: Literal["user", "agent"] = "user",
    ) -> Reminder:
        with self._writing():
            return await self.storage.add_reminder(
                self.user_name, text, due_at=due_at, origin=origin
            )

    async def complete_reminder(self, reminder_id: int) -> Reminder:
        with self._writing():
            return await self.storage.complete_reminder(self.user_name, reminder_id)

    async def reminders(
        self, include_completed: bool = False, *, limit: int = 200, after: int = 0
    ) -> list[Reminder]:
        return await self.storage.reminders(
            self.user_name, include_completed=include_completed, limit=limit, after=after
        )

    async def delete_reminder(self, reminder_id: int) -> None:
        with self._writing():
            await self.storage.delete_reminder(self.user_name, reminder_id)

    async def remember(
        self, text: str, importance: float = 0.5, expires_at: datetime | None = None
    ) -> Memory:
        # An expiry already past (by this instance's clock, which recall ranks by) would
        # store a memory that no turn ever shows. (A naive one is the store's to refuse.)
        if expires_at is not None and expires_at.tzinfo and expires_at.timestamp() <= self._clock():
            raise InvalidInput(
                f"expires_at {expires_at.isoformat()} has passed: the memory would never be shown"
            )
        with self._writing():
            return await self.storage.add_memory(
                self.user_name, text, importance=importance, expires_at=expires_at
            )

    async def memories(self, limit: int = 100, *, before: int | None = None) -> list[Memory]:
        return await self.storage.memories(self.user_name, limit=limit, before=before)

    async def delete_memory(self, memory_id: int) -> None:
        with self._writing():
            await self.storage.delete_memory(self.user_name, memory_id)

    async def search_memories(self, query: str, limit: int = 10) -> list[MemoryHit]:
        return await self.storage.search_memories(self.user_name, query, limit=limit)

    async def put_document(self, label: str, content: str) -> Document:
        """Add or replace a document; `BudgetExceeded` if all documents together would be
        over `documents.budget_tokens` (they are all in every turn's system prompt)."""
        locks = self._documents_locks
        lock = locks.get(self.user_name) or locks.setdefault(self.user_name, anyio.Lock())
        with self._writing():
            try:
                async with lock:  # taken or queued for at once: no await since the get
                    return await self._put_document(label, content)
            finally:
                # A lock kept for every user who ever wrote a document held a kilobyte
                # each for the process's life (a web app's every user). Dropped once
                # nobody holds or waits for it: the next writer makes a new one.
                idle = not lock.locked() and not lock.statistics().tasks_waiting
                if idle and locks.get(self.user_name) is lock:
                    del locks[self.user_name]

    async def _put_document(self, label: str, content: str) -> Document:
        check_document(label, content)  # before its tokens are counted
        budget = self.config.documents.budget_tokens
        others = sum(
            estimate_tokens(d.content)
            for d in await self.storage.documents(self.user_name)
            if d.label != label
        )
        total = others + estimate_tokens(content)
        if total > budget:
            raise BudgetExceeded(
                f"documents would total about {total} tokens, over the budget of {budget} "
                f"(documents.budget_tokens); {others} are already used by other documents"
            )
        return await self.storage.put_document(self.user_name, label, content)

    async def documents(self, *, limit: int = -1, after: str = "") -> list[Document]:
        return await self.storage.documents(self.user_name, limit=limit, after=after)

    async def delete_document(self, label: str) -> None:
        with self._writing():
            await self.storage.delete_document(self.user_name, label)

    # -- background work -------------------------------------------------------------------

    async def run_background(self) -> int:
        """Run every background job due now (segment summaries, memory extraction) and
        return how many ran. They also run by themselves after the turns that make them
        due; this is for tests, scripts and shutdown."""
        return await self._runtime.run_background()

    async def jobs(
        self, continuum_id: str | None = None, *, limit: int = 1000, after: int = 0
    ) -> list[Job]:
        """Background jobs with their state, last error and the usage of their call,
        oldest first: `limit` of them (< 0: all) from the one after id `after`."""
        return await self.storage.jobs(self.user_name, continuum_id, limit=limit, after=after)

    def drain(self) -> None:
        """Begin shutting down: running turns go on; queued and later turns end at once
        with a `shutting_down` error event, each leaving a turn record."""
        self._runtime.drain()

    @property
    def draining(self) -> bool:
        """Whether `drain` has been called: new turns are refused."""
        return self._runtime.draining

    def mcp_servers(self) -> list[McpServerStatus]:
        """The MCP servers: running or down (and why), the tools each offers now, and a
        newer tool list each has announced that is not applied yet."""
        hub = self._runtime.mcp
        return [] if hub is None else hub.status()

    async def wait_mcp(self, holds: Callable[[list[McpServerStatus]], bool]) -> None:
        """Wait until `holds(fm.mcp_servers())` is true (checked at every change): e.g.
        until a server is running again. Bound it with a timeout of your own."""
        hub = self._runtime.mcp
        if hub is None:
            if not holds([]):
                raise ValueError("no MCP servers: the condition can never hold")
            return
        await hub.wait_until(holds)

    async def reload_tools(self) -> ToolsReload:
        """Apply the MCP servers' current tool lists to the `tools` array. It leads every
        cached prefix: when anything changed, each continuum's next turn writes its whole
        prefix to the cache once (the report says what changed)."""
        hub = self._runtime.mcp
        return ToolsReload(message="no MCP servers") if hub is None else await hub.reload()

    def offered_tools(self) -> list[str]:
        """The names in the request's `tools` array, in its order."""
        return [t.name for t in self._runtime.offered_tools()]

    def statistics(self) -> list[ActorStats]:
        return self._system.statistics()

    async def unload_idle(self, idle_seconds: float) -> list[str]:
        """Unload every user's continuums unused for `idle_seconds` now (also done
        periodically, after `turns.idle_minutes`); their next turn reloads them from
        storage. Returns the ids of this user's continuums that were unloaded."""
        unloaded = await self._runtime.evict_idle(idle_seconds)
        return [cid for user, cid in unloaded if user == self.user_name]

    def loaded_continuums(self) -> list[str]:
        """This user's continuums that have running actors."""
        return [cid for user, cid in self._runtime.lanes() if user == self.user_name]


_MAX_VECTOR_CACHE_MB = 1024 * 1024  # a terabyte: past any machine, short of an overflow


async def delete_user_leased(storage: Storage, name: str) -> UserForgotten:
    """Delete user `name` under their lease: a turn of theirs running in another process
    sharing the store is waited for a moment; past that, `Busy` and nothing is deleted.
    (Without it the delete went on under the turn, which ran to its end only to be
    refused as it committed.)"""
    if name == DEFAULT_USER:  # refused by the delete itself, not after a wait for its turns
        return await storage.delete_user(name)
    async with AsyncExitStack() as stack:
        with anyio.move_on_after(DELETE_LEASE_WAIT_S) as waiting:  # the wait alone
            await stack.enter_async_context(storage.user_lease(name))
        if not waiting.cancelled_caught:
            return await storage.delete_user(name)
    raise Busy(
        f"a turn of user {name!r} is running in another process; nothing of theirs was"
        " deleted: try again when the turn has ended",
        retry_after=DELETE_LEASE_WAIT_S,
    )


async def open_storage(config: Config, data_dir: Path, *, upgrade: bool = True) -> Storage:
    """The configured store: PostgreSQL when `storage.url` is set, else the SQLite file
    in the data directory (the embedded default). `upgrade=False`: no migration runs,
    the store stays at the schema it has (a backup copies it as it is)."""
    gap = config.history.segment_gap_minutes * 60
    upto = None if upgrade else 0  # migrations up to version 0: none
    url = config.storage.url
    if url is None:
        cache_mb = config.storage.vector_cache_mb
        if not 0 <= cache_mb <= _MAX_VECTOR_CACHE_MB:
            raise ConfigError(
                f"storage.vector_cache_mb: must be 0 to {_MAX_VECTOR_CACHE_MB}, not {cache_mb}"
            )
        return await SQLiteStorage.open(
            data_dir / DATABASE_FILE,
            segment_gap=gap,
            vector_cache_bytes=int(cache_mb * 1024 * 1024),
            schema_upto=upto,
        )
    if not url.startswith(("postgresql://", "postgres://")):
        # Only a scheme is named: text without one (`user:secret@host/db`, a libpq
        # `host=… password=…`) may well hold a password.
        what = repr(url.split("://")[0]) if "://" in url else "a URL without a scheme"
        raise ConfigError(
            f"storage.url: {what} is not a supported database; "
            "use postgresql://user:password@host:port/database"
        )
    return await PostgresStorage.open(url, segment_gap=gap, schema_upto=upto)


async def _wake_background(runtime: Engine, interval: float) -> None:
    while True:
        runtime.wake_background()
        await anyio.sleep(interval)


async def _unload_idle(runtime: Engine, idle_seconds: float) -> None:
    log = logging.getLogger("frontmind")
    while True:
        await anyio.sleep(min(idle_seconds / 4, 60.0))
        unloaded = await runtime.evict_idle(idle_seconds)
        if unloaded:
            log.info("unloaded %d idle continuums", len(unloaded))
