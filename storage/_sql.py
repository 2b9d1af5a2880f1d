"""The one implementation of the storage port (storage/_port.py), in SQL, for both databases.

`SQLStore` holds every method of the port: the input checks (storage/_validation.py, made
here once), the SQL, the orderings callers rely on (a continuum's turns and history
oldest first, documents by label) and the decoding of rows into records. The adapters,
`SQLiteStorage` (storage/_sqlite.py) and `PostgresStorage` (storage/_postgres.py), are
subclasses that give it a driver and the few dialect hooks below, nothing else: what
storage does is changed here, once. (The shape is SQLAlchemy's, one dialect-neutral SQL
layer over thin drivers, and httpx's `BaseClient`: everything that is not I/O shared.)

The driver interface, which each adapter implements:

- `open` (a classmethod: connect, pool, migrate the schema) and `_close()`.
- `_fetch(sql, args)`: one read, one round trip, its rows (SQLite: on the reader
  connection with the fewest reads in flight; PostgreSQL: on the pool).
- `_begin()`: one write transaction, shielded from cancellation from BEGIN to COMMIT,
  as a `Connection` (`execute_fetchall`, `execute`, `executemany`: aiosqlite's names).
- `_ERRORS`: the driver's exceptions. `_read` and `_transaction` turn them into
  `StorageUnavailable` (cause chained), in this one place.
- Placeholders: all SQL is written in qmark style (`?`, positional). aiosqlite takes it
  as it is; the PostgreSQL connection numbers the marks (`$1`, `$2`, ...), once per text.

The dialect hooks, only where the databases really differ:

- row locks: `_FOR_UPDATE` (a row read to be written in the same transaction, which
  orders concurrent writers) and `_SKIP_LOCKED` (replicas claim different jobs and
  searches); `_LOCK_VECTOR_MODEL`, the table lock that orders writers of the embedder's
  record (a row lock cannot: the first writers find no row to lock); SQLite has one
  writer and needs none of them.
- `_TURN_ORDER`, the column ordering turns started at the same instant (insertion);
  `_NO_LIMIT`, the LIMIT that means none; `_LIMIT`, how a LIMIT's parameter is
  written (SQLite's `+?`: see storage/_sqlite.py); `_in_list`, membership of a list bound as one
  parameter; `_json_int`, an integer inside a stored JSON record.
- leases: `_lease_lock` holds a continuum's lease against other processes (PostgreSQL's
  advisory lock; nobody else opens SQLite's file), `_user_lease_lock` a user's (held
  alone, it waits for and holds off every lease of theirs); `_LEASED_ELSEWHERE`, the condition
  that leaves a job (or a running turn's record, at open) alone while another process
  holds or awaits its continuum's lease (`j.lease_key`); `_job_columns`, what a job row
  carries for it (PostgreSQL: the lease's key).
- full-text search: `_memory_rows` and `_message_hits` (FTS5 and tsvector, each planned
  and searched in one statement: they are on every turn's path), `_segment_match`,
  `_index_segment` (a summary into SQLite's segment index), and `_count_terms` /
  `_uncount_terms` (PostgreSQL's per-word document counts, which plan its searches).
- `_count_down_searches`, on every commit: PostgreSQL's is one statement (a writable
  CTE), not two, to keep the commit's round trips as few.
- vector recall: `_prepare_vectors` (the index for an embedder's dimension),
  `_index_vectors` / `_unindex_vectors` (kept with the memories, in their transaction)
  and `_nearest_rows` (the k nearest, answered in the database: sqlite-vec's `vec0` on
  SQLite; pgvector's HNSW index on PostgreSQL, or where the server lacks it an exact
  dot product over normalized `real[]` vectors).

Built on next: export, import and migration between stores, and deleting a user, are
written here once, over `_read` and `_transaction`.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
)
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, Protocol, Self

import anyio
import msgspec

from ._effects import (
    AddMemory,
    AddReminder,
    CompleteReminder,
    Effect,
    add_memory_effect,
    add_reminder_effect,
)
from ._exceptions import (
    ImportCollision,
    InvalidInput,
    NotFound,
    StorageUnavailable,
    UnknownContinuum,
    UserExists,
)
from ._fts import memory_score, query_terms
from ._jobs import MAX_ATTEMPTS, SEGMENT_SUMMARY, job_from_row, job_key, segment_job_payload
from ._records import (
    INTERRUPTED_TURN,
    ContextSearch,
    Continuum,
    ContinuumModel,
    Document,
    Job,
    JobUsage,
    Memory,
    MemoryHit,
    MemoryProposal,
    Message,
    MessageHit,
    Passage,
    Reminder,
    Segment,
    SegmentDigest,
    SpaceReclaimed,
    TurnRecord,
    TurnUsage,
    TurnWrite,
    User,
    UserForgotten,
)
from ._searches import MAX_SEARCHES, check_query, encode_passages, search_from_row
from ._shared import (
    check_digest,
    check_record,
    check_write,
    content_decoder,
    continues,
    decode_vector,
    encode_vector,
    record_decoder,
    segment_title,
)
from ._time import (
    EPOCH,
    epoch,
    epoch_or_none,
    exact,
    from_row,
    moment,
    moment_or_none,
    stored_fields,
)
from ._transfer import COLUMNS, KEYS, PORTABLE_TABLES, TableRows
from ._validation import (
    DEFAULT_USER,
    MAX_DIMENSIONS,
    MAX_ROW_ID,
    check_continuum_id,
    check_document,
    check_int64,
    check_label,
    check_row_id,
    check_storable,
    check_token_hash,
    check_user_name,
    check_vector,
    to_epoch,
)

__all__ = ["MEMORY", "UNEXPIRED", "USER_TABLES", "Connection", "SQLStore"]

# Every table holding rows of a user, each with the condition (its one `?` is the user's
# name) that selects them, in the order deleting a user empties them: a table that
# refers to another comes before it (messages before the turns they belong to, anything
# of a continuum before the continuum). Deleting a user (`delete_user`) is driven by this
# list alone: a new table of user data is one more row here (or in an adapter's
# `_USER_TABLES`, for a table only one database has), and the user is forgotten from it.
# The `users` row itself goes last, in the same transaction.
USER_TABLES: tuple[tuple[str, str], ...] = (
    ("searches", "owner = ?"),
    ("jobs", "owner = ?"),
    ("messages", "owner = ?"),
    ("segments", "owner = ?"),
    ("turns", "owner = ?"),
    ("continuum_settings", "owner = ?"),
    ("continuums", "owner = ?"),
    ("reminders", "owner = ?"),
    ("memories", "owner = ?"),  # with their vectors (a column) and use counts
    ("documents", "owner = ?"),
)

# A continuum's rows besides its own, in the order deleting it empties them (jobs too: on
# SQLite a later segment may take a deleted one's id, and its job would summarise it).
_CONTINUUM_TABLES = ("messages", "segments", "turns", "continuum_settings", "searches", "jobs")

MAX_NEAREST = 1000  # the most memories one vector search returns
MAX_SEARCH_HITS = 10_000  # the most hits one word search returns (the daemon's page cap)

# A memory's columns (of `memories m`), in `Memory`'s order: the searches select them too.
MEMORY = "SELECT m.id, m.text, m.created_at, m.expires_at, m.importance, m.source_segment, m.uses"
_CONTINUUM = (
    "SELECT id, created_at, history_start, message_count, last_turn_at, last_message_id"
    " FROM continuums"
)
_REMINDER = "SELECT id, text, due_at, created_at, completed_at, origin FROM reminders"
_SEGMENT_COLUMNS = (
    "s.id, s.continuum_id, s.started_at, s.ended_at, s.turn_count, s.title, s.first_seq, s.summary"
)
_ANOTHER_EMBEDDER = (
    "the store's vectors are now another embedder's (a process sharing it started with"
    " another `[memory] embedder`): restart this one with it"
)
# How often a shared store reads again which embedder the vectors are of
# (`embedder_current`: before recall, `remember`, the extraction and the worker embed).
EMBEDDER_RECHECK_S = 5.0
# Why a job or search was given up after its claims ran out their lease again and again.
_INTERRUPTED = (
    f"interrupted {MAX_ATTEMPTS} times: its worker stopped or lost the lease before it ended"
)
_JOB_COLUMNS = (
    "id, owner, kind, continuum_id, payload, state, attempts, next_at, claimed_at,"
    " last_error, created_at, finished_at, record"
)
_SEARCH_COLUMNS = (
    "id, owner, continuum_id, query, state, requested_at, attempts, claimed_at,"
    " finished_at, turns_left, passages, error"
)
_PUT_TURN = (
    "INSERT INTO turns (id, owner, continuum_id, status, started_at, record)"
    " VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record"
    " WHERE turns.status != 'completed' AND turns.owner = excluded.owner RETURNING 1"
)
_model_decoder = msgspec.json.Decoder(ContinuumModel)


def _stored_model(raw: str | bytes) -> ContinuumModel:
    """A continuum's stored settings. A row written before each value's range was
    checked (`max_tokens` 0, a model name with a NUL) reads with such values unset (the
    config's), as the refused value never took effect anyway, rather than failing every
    read and turn of the continuum."""
    try:
        return _model_decoder.decode(raw)
    except msgspec.ValidationError:
        given = msgspec.json.decode(raw)
    kept = {}
    for key, value in given.items() if isinstance(given, dict) else ():
        try:
            msgspec.convert({key: value}, ContinuumModel)
        except msgspec.ValidationError:
            continue
        kept[key] = value
    return msgspec.convert(kept, ContinuumModel)


Args = Sequence[Any]  # a statement's arguments, for its `?` marks in order


class Connection(Protocol):
    """The driver inside a write transaction: qmark SQL, positional arguments."""

    def execute_fetchall(self, sql: str, args: Args, /) -> Awaitable[Iterable[Any]]: ...

    def execute(self, sql: str, args: Args, /) -> Awaitable[object]: ...

    def executemany(self, sql: str, args: Iterable[Args], /) -> Awaitable[object]: ...


async def _rows(db: Connection, sql: str, args: Args) -> list[Any]:
    """The rows of one statement inside a transaction."""
    return list(await db.execute_fetchall(sql, args))


# An expired memory is never recalled: it waits for no vector either (embedding it would
# pay the embedder for nothing, again after every change of embedder).
UNEXPIRED = "(m.expires_at IS NULL OR m.expires_at > ?)"


_EMBEDDER_ROWS = "SELECT model, dimensions FROM vector_model"


async def _embedder_rows(db: Connection) -> list[Any]:
    """The embedder recorded with the vectors: no row, or one (model, dimensions)."""
    return await _rows(db, _EMBEDDER_ROWS, ())


def _at(now: float | None) -> float:
    """The instant a write is stamped with (the clock's, or the caller's), at the microsecond."""
    return exact(time.time() if now is None else now)


def _check_search_limit(limit: object) -> None:
    """A search's `limit`: below 1 finds nothing; above MAX_SEARCH_HITS is refused (the
    statements rank a multiple of it as candidates)."""
    if check_int64(limit, "limit") > MAX_SEARCH_HITS:
        raise InvalidInput(f"limit must be at most {MAX_SEARCH_HITS} for a search, not {limit}")


def _owned(user: str, continuum_id: str | None, alias: str = "") -> tuple[str, list[Any]]:
    """The condition selecting the user's rows (of one continuum, when it is named), with
    its arguments; both checked."""
    check_user_name(user)
    if continuum_id is None:
        return f"{alias}owner = ?", [user]
    check_continuum_id(continuum_id)
    return f"{alias}owner = ? AND {alias}continuum_id = ?", [user, continuum_id]


def _owned_one(user: str, continuum_id: str, alias: str = "") -> tuple[str, list[Any]]:
    """`_owned` of one continuum: a missing id (None) is refused as any malformed id
    is, never taken for "all the user's continuums" (a read of one failed on its SQL as
    `StorageUnavailable`, or answered another continuum's settings or segments)."""
    check_continuum_id(continuum_id)
    return _owned(user, continuum_id, alias)


async def _digest(db: Connection, statements: Sequence[str], args: Args) -> str:
    """A SHA-256 of the rows of the statements, in turn (bytes as base64). The rows of a
    statement without ORDER BY are sorted here, by their encoding: text sorts by each
    database's own collation, and both stores' digests must be the same."""
    digest = hashlib.sha256()
    for sql in statements:
        rows = [msgspec.json.encode(list(row)) for row in await _rows(db, sql, args)]
        for row in rows if " ORDER BY " in sql else sorted(rows):
            digest.update(row)
    return digest.hexdigest()


class _ImportedVectors:
    """What one import knows of the vectors it brings: the store's embedder (name and
    dimension, once recorded), the embedder the import's own `vector_model` rows name
    (`imported`), and whether the index is ready for them in this transaction."""

    def __init__(self, recorded: tuple[Any, ...] | None) -> None:
        self.recorded = recorded
        self.imported: tuple[Any, ...] | None = None
        self.ready = False

    def admit(self, part: TableRows, embedding: int, migrating: bool) -> list[tuple[Any, ...]]:
        """The memory rows with the vectors that cannot be kept left out: those of
        another embedder or of none named (a store from before `vector_model`, a
        format-1 file), as `use_embedder` drops them, and those of another dimension
        than the store's; the embedder makes them again in the background. With no
        embedder recorded here they stay as they came, as they were in their store
        (the first embedder's start drops them). A migration refuses instead: its
        target is another store."""
        if self.recorded is None:
            return part.rows
        width = 4 * int(self.recorded[1])
        of = part.vector_model or self.imported
        keep = of is not None and tuple(of) == tuple(self.recorded)
        if not keep and migrating and any(row[embedding] is not None for row in part.rows):
            named = f"of {of[0]!r} ({of[1]} dimensions)" if of else "of no named embedder"
            raise ImportCollision(
                f"the target's vectors are of the embedder {self.recorded[0]!r}"
                f" ({self.recorded[1]} dimensions), the source's memories' {named}:"
                " migrate into an empty store"
            )

        def fits(value: Any) -> bool:
            return keep and isinstance(value, bytes) and len(value) == width

        return [
            row if row[embedding] is None or fits(row[embedding])
            else (*row[:embedding], None, *row[embedding + 1 :])
            for row in part.rows
        ]  # fmt: skip


class SQLStore(ABC):
    """The storage port over a driver; an adapter subclasses it (see the module's doc)."""

    # True when other processes may write to the same store (the port's `shared`).
    shared: bool
    _ERRORS: ClassVar[tuple[type[Exception], ...]]
    _TURN_ORDER: ClassVar[str]
    _NO_LIMIT: ClassVar[int | None]
    _LIMIT: ClassVar[str] = "?"
    _FOR_UPDATE: ClassVar[str] = ""
    _SKIP_LOCKED: ClassVar[str] = ""
    _LOCK_VECTOR_MODEL: ClassVar[str] = ""
    # How a write with vectors reads the embedder they are of (`_ours`): on a shared
    # store it holds that record until it commits.
    _SHARE_VECTOR_MODEL: ClassVar[str] = ""
    _LEASED_ELSEWHERE: ClassVar[str] = ""
    # Text ordered and compared byte by byte, whatever the database's collation: the
    # documents' label order is the system prompt's, the same bytes on either database.
    _BYTEWISE: ClassVar[str] = ""
    # The tables a user's rows are deleted from (see `USER_TABLES`); an adapter adds its own.
    _USER_TABLES: ClassVar[tuple[tuple[str, str], ...]] = USER_TABLES
    # Indexes of segment summaries kept in a table of their own, by the segment's id (no
    # trigger keeps them): a deleted continuum's entries must go with its segments, or a
    # later segment that takes a deleted one's id is found by the deleted words.
    _SEGMENT_INDEXES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, segment_gap: float) -> None:
        self._segment_gap = segment_gap
        self._closed = False
        # Continuums whose lease is held or awaited here (a turn running or waiting):
        # claim_job leaves their jobs alone.
        self._leased: dict[tuple[str, str], int] = {}
        # When each lease held here was asked for (`_began`).
        self._lease_asked: dict[tuple[str, str], float] = {}
        # The dimension of the embedder in use (`use_embedder`); None: no vectors.
        self._dimensions: int | None = None
        # Its name and dimension as recorded with the vectors (`use_embedder`).
        self._vector_model: tuple[str, int] | None = None
        # What a shared store last read of the recorded embedder (whether it is still
        # the one `use_embedder` named here), and until when (monotonic) that answer
        # stands (`embedder_current`).
        self._ours_known = True
        self._ours_until = float("-inf")

    # -- the driver -----------------------------------------------------------------

    @abstractmethod
    async def _fetch(self, sql: str, args: Any) -> list[Any]:
        """The rows of one read, in one round trip."""

    @abstractmethod
    def _begin(self) -> AbstractAsyncContextManager[Connection]:
        """One write transaction, shielded from cancellation from BEGIN to COMMIT."""

    @abstractmethod
    async def _close(self) -> None: ...

    def _check_open(self) -> None:
        if self._closed:  # the driver's own word for it varies (aiosqlite: a ValueError)
            raise StorageUnavailable("the storage is closed")

    async def _read(self, sql: str, args: Any = ()) -> list[Any]:
        self._check_open()
        try:
            return await self._fetch(sql, args)
        except self._ERRORS as exc:
            raise StorageUnavailable(f"a read failed: {self._why(exc)}") from exc

    def _transaction(self) -> AbstractAsyncContextManager[Connection]:
        """One write transaction (`_begin`), the driver's errors as `StorageUnavailable`."""
        return self._guarded(self._begin(), "a write")

    @asynccontextmanager
    async def _guarded(
        self, opening: AbstractAsyncContextManager[Connection], what: str
    ) -> AsyncIterator[Connection]:
        self._check_open()
        try:
            async with opening as db:
                yield db
        except self._ERRORS as exc:
            raise StorageUnavailable(f"{what} failed: {self._why(exc)}") from exc

    def _why(self, exc: Exception) -> str:
        """A driver's error in words (one may have none of its own: a timeout's)."""
        return str(exc) or type(exc).__name__

    def _limit(self, limit: int) -> int | None:
        """A page size as the dialect binds it (below 0: every row), checked to fit SQL
        first (a bigger one would fail in the driver, with no word of which it was)."""
        return self._NO_LIMIT if check_int64(limit, "limit") < 0 else limit

    def _usage_sums(self) -> str:
        """The sums of the turns' usage records, field by field in `TurnUsage`'s order."""
        fields = msgspec.structs.fields(TurnUsage)
        return ", ".join(f"SUM({self._json_int('record', 'usage', f.name)})" for f in fields)

    # -- the dialect ------------------------------------------------------------------

    @abstractmethod
    def _in_list(self, values: Sequence[Any], sql_type: str) -> tuple[str, Any]:
        """`IN` a list of `sql_type` values bound as one parameter: the SQL that follows
        the tested expression, and the parameter."""

    @abstractmethod
    def _json_int(self, column: str, *path: str) -> str:
        """SQL for the integer at `path` in the JSON (bytes) of `column`."""

    @abstractmethod
    def _json_text(self, column: str, *path: str) -> str:
        """SQL for the string at `path` in the JSON (bytes) of `column`."""

    def _lease_lock(self, user: str, continuum_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the continuum's lease against other processes sharing the store."""
        return nullcontext()

    def _user_lease_lock(self, user: str) -> AbstractAsyncContextManager[None]:
        """Hold the user's lease against other processes: granted once none holds a lease
        of theirs, and none is granted one while it is held."""
        return nullcontext()

    def _job_columns(self, user: str, continuum_id: str) -> dict[str, object]:
        """Columns a new job of the continuum carries beside the common ones."""
        return {}

    async def _count_terms(  # noqa: B027 (an optional hook)
        self, db: Connection, kind: str, texts: list[str]
    ) -> None:
        """Count the words of texts added to the `kind` index ("message", "memory")."""

    async def _uncount_terms(  # noqa: B027 (an optional hook)
        self, db: Connection, kind: str, where: str, args: Any
    ) -> None:
        """Forget the words of the `kind` rows matching `where`, about to be deleted."""

    async def _forgetting(self, db: Connection, user: str, at: float) -> None:  # noqa: B027
        """An optional hook: the user is being forgotten (at `at`), first thing in that
        transaction, so that a turn another process runs for them is not kept."""

    async def _check_remembered(  # noqa: B027 (an optional hook)
        self, db: Connection, user: str, started_at: float
    ) -> None:
        """An optional hook: a turn that began at `started_at` is being committed; it
        raises `NotFound` if its user was forgotten since."""

    async def _purge_deleted(self, db: Connection) -> None:  # noqa: B027 (an optional hook)
        """After a user's rows are deleted: what an index keeps of deleted rows, gone."""

    async def _after_import(self, db: Connection) -> None:  # noqa: B027 (an optional hook)
        """Rows came in with their ids: make new ids follow them (PostgreSQL's sequences)."""

    async def _index_segment(  # noqa: B027 (an optional hook)
        self, db: Connection, segment_id: int, text: str
    ) -> None:
        """Index a segment's summarised text for `search_segments`."""

    @abstractmethod
    def _segment_match(self, terms: list[str]) -> tuple[str, str, Any]:
        """How segments (`s`) match the terms: the FROM and WHERE text (its one `?` is
        the query), the ORDER BY text (best first), and the query parameter."""

    @abstractmethod
    async def _memory_rows(self, user: str, terms: list[str], at: float, want: int) -> list[Any]:
        """The user's best `want` memories alive at `at` for the terms: `MEMORY`'s
        columns, then a relevance where lower is better."""

    @abstractmethod
    async def _message_hits(
        self, user: str, terms: list[str], continuum_id: str | None, limit: int
    ) -> list[MessageHit]:
        """The user's best `limit` messages for the terms, best first."""

    @abstractmethod
    async def _prepare_vectors(self, db: Connection, dimensions: int, *, reset: bool) -> None:
        """Make the vector index ready for `dimensions`; with `reset`, empty (another
        embedder: no stored vector is used any more)."""

    @abstractmethod
    async def _index_vectors(
        self, db: Connection, vectors: Sequence[tuple[int, Sequence[float]]]
    ) -> None:
        """Index each memory's vector (replacing any earlier one)."""

    @abstractmethod
    async def _unindex_vectors(self, db: Connection, memory_ids: Sequence[int]) -> None:
        """Take the memories out of the vector index (their text changed, or they go)."""

    @abstractmethod
    async def _nearest_rows(
        self, user: str, vector: Sequence[float], k: int, at: float, among: Sequence[int]
    ) -> list[Any]:
        """`MEMORY`'s columns and the cosine similarity to `vector`, for the user's `k`
        nearest memories alive at `at` that have a vector, and for those of `among`."""

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._close()

    async def schema_version(self) -> int:
        rows = await self._read("SELECT max(version) FROM schema_version")
        return int(rows[0][0])

    @asynccontextmanager
    async def continuum_lease(self, user: str, continuum_id: str) -> AsyncIterator[None]:
        """Hold the right to run the continuum's next turn, in every process sharing the
        store; waiters are served in arrival order. Background jobs wait for it."""
        check_user_name(user)
        check_continuum_id(continuum_id)
        key = (user, continuum_id)
        self._leased[key] = self._leased.get(key, 0) + 1
        asked = time.time()
        try:
            async with AsyncExitStack() as stack:
                try:
                    await stack.enter_async_context(self._lease_lock(user, continuum_id))
                except self._ERRORS as exc:
                    raise StorageUnavailable(
                        f"the continuum's lease failed: {self._why(exc)}"
                    ) from exc
                self._lease_asked[key] = asked
                try:
                    yield
                finally:
                    if self._lease_asked.get(key) == asked:
                        del self._lease_asked[key]
        finally:
            left = self._leased.pop(key) - 1
            if left:
                self._leased[key] = left

    def _began(self, user: str, record: TurnRecord) -> float:
        """When a turn began, as `_check_remembered` sees it: when it asked for its
        continuum's lease, if it holds it here (it may have waited behind its user's
        delete, `user_lease`, and must not bring them back), else its record's start."""
        started = epoch(record.started_at)
        asked = self._lease_asked.get((user, record.continuum_id))
        return started if asked is None else min(started, asked)

    @asynccontextmanager
    async def user_lease(self, user: str) -> AsyncIterator[None]:
        """Hold the right to delete the user: granted once no turn of theirs runs in
        another process sharing the store, and none starts there while it is held."""
        check_user_name(user)
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._user_lease_lock(user))
            except self._ERRORS as exc:
                raise StorageUnavailable(f"the user's lease failed: {self._why(exc)}") from exc
            yield

    # -- continuums and turns ---------------------------------------------------------

    async def continuum(self, user: str, continuum_id: str) -> Continuum:
        _, args = _owned_one(user, continuum_id)
        rows = await self._read(f"{_CONTINUUM} WHERE owner = ? AND id = ?", args)
        if not rows:
            raise UnknownContinuum(continuum_id)
        return from_row(Continuum, rows[0])

    async def _resume_at(self, sql: str, args: Args, cursor: object) -> tuple[float, str]:
        """Where a page resumes, from its cursor `(time, id)` (checked): the cursor's
        instant, or the stored one of the row it names (`sql`, given `args` and the id)
        when the two are the same microsecond. A time stored before times were kept at
        the microsecond reads back a fraction of one off, and the page must still start
        exactly after its row, neither repeating nor skipping it."""
        if not (isinstance(cursor, tuple) and len(cursor) == 2 and isinstance(cursor[1], str)):
            raise InvalidInput(f"a page's cursor is (a record's time, its id), not {cursor!r}")
        at = to_epoch(cursor[0], "a page's cursor time")
        rows = await self._read(sql, (*args, cursor[1]))
        stored = rows[0][0] if rows else None
        if stored is not None and abs(stored - at) < 1e-6:
            at = float(stored)
        return at, cursor[1]

    async def continuums(
        self, user: str, *, limit: int = -1, after: tuple[datetime, str] | None = None
    ) -> list[Continuum]:
        check_user_name(user)
        activity = "COALESCE(last_turn_at, created_at)"
        where, args = "", ()  # type: tuple[str, tuple[Any, ...]]
        if after is not None:
            named = f"SELECT {activity} FROM continuums WHERE owner = ? AND id = ?"
            at, last = await self._resume_at(named, (user,), after)
            where = f" AND ({activity} < ? OR ({activity} = ? AND id{self._BYTEWISE} > ?))"
            args = (at, at, last)
        rows = await self._read(
            f"{_CONTINUUM} WHERE owner = ?{where}"
            f" ORDER BY {activity} DESC, id{self._BYTEWISE} LIMIT {self._LIMIT}",
            (user, *args, self._limit(limit)),
        )
        return [from_row(Continuum, row) for row in rows]

    async def usage_by_continuum(
        self, user: str, ids: list[str]
    ) -> dict[str, tuple[int, TurnUsage]]:
        check_user_name(user)
        if not ids:
            return {}
        among, listed = self._in_list(ids, "text")
        rows = await self._read(
            f"SELECT continuum_id, COUNT(*), {self._usage_sums()} FROM turns"
            f" WHERE owner = ? AND continuum_id {among} GROUP BY continuum_id",
            (user, listed),
        )
        return {row[0]: (int(row[1]), TurnUsage(*(int(v or 0) for v in row[2:]))) for row in rows}

    async def usage_by_model(self, user: str, ids: list[str]) -> dict[str, dict[str, TurnUsage]]:
        check_user_name(user)
        if not ids:
            return {}
        among, listed = self._in_list(ids, "text")
        model = self._json_text("record", "model")
        rows = await self._read(
            f"SELECT continuum_id, {model}, {self._usage_sums()} FROM turns"
            f" WHERE owner = ? AND continuum_id {among} GROUP BY continuum_id, {model}",
            (user, listed),
        )
        found: dict[str, dict[str, TurnUsage]] = {}
        for row in rows:
            usage = TurnUsage(*(int(v or 0) for v in row[2:]))
            found.setdefault(row[0], {})[str(row[1] or "")] = usage
        return found

    async def delete_continuum(self, user: str, continuum_id: str) -> None:
        where, args = _owned_one(user, continuum_id)
        async with self._transaction() as db:
            # Messages first (leaving the search index), the continuum last (the others
            # refer to it); none deleted: the transaction rolls back with the error.
            await self._uncount_terms(db, "message", where, args)
            # Settings chosen before a first turn are a continuum with no row of its own
            # yet: deleting it takes them (the delete said "no continuum" and kept them).
            chosen = await _rows(db, f"SELECT 1 FROM continuum_settings WHERE {where}", args)
            for index in self._SEGMENT_INDEXES:
                await db.execute(
                    f"DELETE FROM {index} WHERE rowid IN (SELECT id FROM segments WHERE {where})",
                    args,
                )
            for table in _CONTINUUM_TABLES:
                await db.execute(f"DELETE FROM {table} WHERE {where}", args)
            found = await _rows(
                db, "DELETE FROM continuums WHERE owner = ? AND id = ? RETURNING 1", args
            )
            if not found and not chosen:
                raise UnknownContinuum(continuum_id)

    async def _messages(
        self, user: str, continuum_id: str, start: int, limit: int = -1
    ) -> list[Message]:
        rows = await self._read(
            "SELECT role, content, seq, turn_id, created_at FROM messages"
            f" WHERE owner = ? AND continuum_id = ? AND seq >= ? ORDER BY seq LIMIT {self._LIMIT}",
            (user, continuum_id, start, self._limit(limit)),
        )
        decode = content_decoder.decode
        messages: list[Message] = []
        stamp: float | None = None
        when = EPOCH
        for role, content, seq, turn, at in rows:
            if at != stamp:  # a turn's messages share their time: one datetime a turn
                stamp, when = at, moment(at)
            messages.append(Message(role, decode(content), seq, turn, when))
        return messages

    async def history(
        self, user: str, continuum_id: str, *, missing_ok: bool = False
    ) -> list[Message]:
        _, args = _owned_one(user, continuum_id)
        rows = await self._read(
            "SELECT history_start FROM continuums WHERE owner = ? AND id = ?", args
        )
        if not rows:
            if missing_ok:
                return []
            raise UnknownContinuum(continuum_id)
        return await self._messages(user, continuum_id, int(rows[0][0]))

    async def all_messages(
        self, user: str, continuum_id: str, *, limit: int = -1, after: int = -1
    ) -> list[Message]:
        """All the continuum's messages in order, from the one after seq `after`."""
        check_int64(after, "after")
        await self.continuum(user, continuum_id)
        if after >= MAX_ROW_ID:  # no seq comes after the largest (nor fits SQL past it)
            return []
        return await self._messages(user, continuum_id, after + 1, limit)

    async def continuum_model(self, user: str, continuum_id: str) -> ContinuumModel:
        where, args = _owned_one(user, continuum_id)
        rows = await self._read(f"SELECT settings FROM continuum_settings WHERE {where}", args)
        return _stored_model(rows[0][0]) if rows else ContinuumModel()

    async def set_continuum_model(
        self, user: str, continuum_id: str, settings: ContinuumModel
    ) -> None:
        check_user_name(user)
        check_continuum_id(continuum_id)
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO continuum_settings (owner, continuum_id, settings) VALUES (?, ?, ?)"
                " ON CONFLICT (owner, continuum_id) DO UPDATE SET settings = excluded.settings",
                (user, continuum_id, msgspec.json.encode(settings)),
            )

    async def commit_turn(self, user: str, write: TurnWrite) -> bool:
        check_user_name(user)
        record = write.record
        rows = check_write(write)
        cid = record.continuum_id
        async with self._transaction() as db:
            await self._check_remembered(db, user, self._began(user, record))
            if await _rows(
                db,
                "SELECT 1 FROM turns WHERE id = ? AND (status = 'completed' OR owner != ?)",
                (record.turn_id, user),
            ):
                return False  # a retried commit of a turn already stored, or another user's
            await self._add_continuum(db, user, record)
            # The row lock (PostgreSQL) orders concurrent commits of one continuum.
            ((base,),) = await _rows(
                db,
                "SELECT message_count FROM continuums WHERE owner = ? AND id = ?"
                + self._FOR_UPDATE,
                (user, cid),
            )
            if write.base is not None and base != write.base:
                # Its lease was lost mid-turn (its session cut), or the continuum was
                # deleted: committed, the turn would follow a history it never saw.
                raise StorageUnavailable(
                    f"continuum {cid!r} moved on while this turn ran (another turn or a"
                    " delete came between): the turn is not kept; send it again"
                )
            if not await self._put_turn(db, user, record):
                return False  # stored meanwhile (by another replica)
            await db.executemany(
                "INSERT INTO messages"
                " (owner, continuum_id, seq, turn_id, role, content, text, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (user, cid, base + i, record.turn_id, role, content, text, at)
                    for i, (role, content, text, at) in enumerate(rows)
                ],
            )
            await self._count_terms(db, "message", [text for _, _, text, _ in rows])
            await self._extend_segment(db, user, record, base, write.history_start)
            await self._apply_effects(db, user, write.effects)
            await self._count_down_searches(db, user, cid)
            count, start = base + len(rows), write.history_start
            await db.execute(
                "UPDATE continuums SET message_count = ?, last_turn_at = ?, last_message_id = ?,"
                " history_start = COALESCE(?, history_start) WHERE owner = ? AND id = ?",
                (count, epoch(record.finished_at), record.message_id, start, user, cid),
            )
        return True

    async def _count_down_searches(self, db: Connection, user: str, cid: str) -> None:
        """Each committed turn counts its continuum's finished searches down (a dialect
        with writable CTEs does it in one statement)."""
        where = "owner = ? AND continuum_id = ?"
        await db.execute(f"DELETE FROM searches WHERE {where} AND turns_left <= 1", (user, cid))
        await db.execute(
            f"UPDATE searches SET turns_left = turns_left - 1 WHERE {where} AND turns_left > 1",
            (user, cid),
        )

    async def _add_continuum(self, db: Connection, user: str, record: TurnRecord) -> None:
        """The turn's continuum, created by its first turn (or its first turn's record)."""
        await db.execute(
            "INSERT INTO continuums (owner, id, created_at) VALUES (?, ?, ?)"
            " ON CONFLICT (owner, id) DO NOTHING",
            (user, record.continuum_id, epoch(record.started_at)),
        )

    async def _put_turn(self, db: Connection, user: str, record: TurnRecord) -> bool:
        """Store the turn's record, replacing its provisional one (written when it
        started); False if a completed record, or another user's, holds its id."""
        r = record
        args = (
            r.turn_id,
            user,
            r.continuum_id,
            r.status,
            epoch(r.started_at),
            msgspec.json.encode(stored_fields(r)),
        )
        return bool(await _rows(db, _PUT_TURN, args))

    async def _apply_effects(self, db: Connection, user: str, effects: tuple[Effect, ...]) -> None:
        """The writes a turn's tools staged, inside the turn's transaction, as the turn's
        user: what they add is that user's, and they complete only that user's reminders."""
        for effect in effects:
            match effect:
                case AddReminder():
                    await self._insert_reminder(db, user, effect)
                case CompleteReminder(reminder_id=reminder_id, at=at):
                    await self._complete_reminder(db, user, reminder_id, at)
                case AddMemory(replaces=int() as memory_id):
                    if not await self._update_memory(
                        db, user, memory_id, effect.text, effect.importance, effect.vector
                    ):  # deleted since the tool found it: the text is kept all the same
                        await self._insert_memory(db, user, effect)
                case AddMemory():
                    await self._insert_memory(db, user, effect)

    async def _extend_segment(
        self,
        db: Connection,
        user: str,
        record: TurnRecord,
        first_seq: int,
        history_start: int | None,
    ) -> None:
        cid = record.continuum_id
        last = await _rows(
            db,
            "SELECT id, ended_at, first_seq FROM segments WHERE owner = ? AND continuum_id = ?"
            " ORDER BY ended_at DESC LIMIT 1",
            (user, cid),
        )
        if last and continues(record, last[0][1], last[0][2], history_start, self._segment_gap):
            await db.execute(
                "UPDATE segments SET ended_at = ?, turn_count = turn_count + 1 WHERE id = ?",
                (epoch(record.finished_at), last[0][0]),
            )
            return
        if last:
            # The turn closes the previous segment: its summary job is due, written in
            # this transaction so that it survives whatever happens next.
            payload = segment_job_payload(int(last[0][0]))
            at = epoch(record.finished_at)
            await self._insert_job(db, user, SEGMENT_SUMMARY, cid, payload, at)
        title = segment_title(record.user_text)
        await db.execute(
            "INSERT INTO segments"
            " (owner, continuum_id, started_at, ended_at, turn_count, title, first_seq)"
            " VALUES (?, ?, ?, ?, 1, ?, ?)",
            (user, cid, epoch(record.started_at), epoch(record.finished_at), title, first_seq),
        )

    async def record_turn(self, user: str, record: TurnRecord) -> None:
        check_user_name(user)
        check_record(record)
        if record.status == "completed":
            raise InvalidInput("completed turns are stored with commit_turn, with their messages")
        async with self._transaction() as db:
            await self._check_remembered(db, user, self._began(user, record))
            await self._add_continuum(db, user, record)
            if record.status == "running":
                # This turn holds the continuum (its lease, or the one process's actor):
                # another running record of it is a turn whose process ended.
                where = "owner = ? AND continuum_id = ? AND id != ?"
                await self._interrupt(db, where, (user, record.continuum_id, record.turn_id))
            await self._put_turn(db, user, record)

    async def interrupt_stale_turns(self) -> int:
        """Every running record whose continuum's lease no process holds or awaits (on
        SQLite, every one: its owner calls this as it starts) is made interrupted."""
        async with self._transaction() as db:
            return await self._interrupt(db, "TRUE", (), unleased=True)

    async def _interrupt(
        self, db: Connection, where: str, args: Args, *, unleased: bool = False
    ) -> int:
        """Make the running records `where` selects failed, "interrupted" (with
        `unleased`, only those whose continuum's lease nobody holds or awaits, checked in
        the statement that writes each), and say how many were."""
        rows = await _rows(
            db,
            f"SELECT id, owner, continuum_id, record FROM turns WHERE status = 'running'"
            f" AND {where}",
            args,
        )
        lease = self._LEASED_ELSEWHERE if unleased else ""
        interrupted = 0
        for turn_id, owner, cid, raw in rows:
            record = msgspec.structs.replace(
                record_decoder.decode(raw), status="failed", error=INTERRUPTED_TURN
            )
            # The lease key the continuum's jobs carry (PostgreSQL's advisory lock; None
            # where leases live in one process and `lease` is empty).
            key = self._job_columns(owner, cid).get("lease_key")
            interrupted += len(
                await _rows(
                    db,
                    "UPDATE turns SET status = 'failed', record = ?"
                    " FROM (SELECT CAST(? AS BIGINT) AS lease_key) j"
                    f" WHERE turns.id = ? AND turns.status = 'running'{lease} RETURNING 1",
                    (msgspec.json.encode(stored_fields(record)), key, turn_id),
                )
            )
        return interrupted

    async def turns(
        self,
        user: str,
        continuum_id: str | None = None,
        *,
        limit: int = 100,
        before: tuple[datetime, str] | None = None,
    ) -> list[TurnRecord]:
        """The user's latest `limit` turns, oldest first; with `before` (the started_at and
        id of a turn), the latest ones before that turn."""
        where, args = _owned(user, continuum_id)
        if continuum_id is not None:
            await self.continuum(user, continuum_id)
        order = self._TURN_ORDER  # among turns started at the same instant: insertion
        if before is not None:
            where += (
                f" AND (started_at < ? OR (started_at = ?"
                f" AND {order} < (SELECT {order} FROM turns WHERE id = ?)))"
            )
            at, last = await self._resume_at(
                "SELECT started_at FROM turns WHERE id = ?", (), before
            )
            args += [at, at, last]
        rows = await self._read(
            f"SELECT record FROM turns WHERE {where}"
            f" ORDER BY started_at DESC, {order} DESC LIMIT {self._LIMIT}",
            (*args, self._limit(limit)),
        )
        return [record_decoder.decode(row[0]) for row in reversed(rows)]

    async def recent_segments(
        self, user: str, continuum_id: str, *, limit: int = 10
    ) -> list[Segment]:
        where, args = _owned_one(user, continuum_id, "s.")
        rows = await self._read(
            f"SELECT {_SEGMENT_COLUMNS} FROM segments s WHERE {where}"
            f" ORDER BY s.ended_at DESC LIMIT {self._LIMIT}",
            (*args, self._limit(limit)),
        )
        return [from_row(Segment, row) for row in reversed(rows)]

    async def segment(self, user: str, segment_id: int) -> Segment:
        check_user_name(user)
        check_row_id(segment_id, "segment id")
        rows = await self._read(
            f"SELECT {_SEGMENT_COLUMNS} FROM segments s WHERE s.owner = ? AND s.id = ?",
            (user, segment_id),
        )
        if not rows:
            raise NotFound(f"no segment #{segment_id}")
        return from_row(Segment, rows[0])

    async def segment_messages(self, user: str, segment_id: int) -> list[Message]:
        segment = await self.segment(user, segment_id)
        ((end,),) = await self._read(
            "SELECT min(first_seq) FROM segments"
            " WHERE owner = ? AND continuum_id = ? AND first_seq > ?",
            (user, segment.continuum_id, segment.first_seq),
        )
        messages = await self._messages(user, segment.continuum_id, segment.first_seq)
        return [m for m in messages if end is None or m.seq < end]

    async def search_segments(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[Segment]:
        _check_search_limit(limit)
        scope, args = _owned(user, continuum_id, "s.")
        terms = query_terms(query)
        if limit < 1 or not terms:
            return []
        source, order, match = self._segment_match(terms)
        rows = await self._read(
            f"SELECT {_SEGMENT_COLUMNS} FROM {source} AND {scope} ORDER BY {order}"
            f" LIMIT {self._LIMIT}",
            (match, *args, limit),
        )
        return [from_row(Segment, row) for row in rows]

    # -- background jobs ----------------------------------------------------------------

    async def _insert_job(
        self, db: Connection, user: str, kind: str, continuum_id: str, payload: str, at: float
    ) -> int:
        extra = self._job_columns(user, continuum_id)
        ((job_id,),) = await _rows(
            db,
            "INSERT INTO jobs (owner, kind, continuum_id, payload, state, next_at, created_at"
            f"{''.join(f', {name}' for name in extra)})"
            f" VALUES (?, ?, ?, ?, 'pending', ?, ?{', ?' * len(extra)}) RETURNING id",
            (user, kind, continuum_id, payload.encode(), at, at, *extra.values()),
        )
        return int(job_id)

    async def enqueue_job(
        self, user: str, kind: str, continuum_id: str, payload: str, *, now: float | None = None
    ) -> Job:
        check_user_name(user)
        check_continuum_id(continuum_id)
        at = _at(now)
        async with self._transaction() as db:
            job_id = await self._insert_job(db, user, kind, continuum_id, payload, at)
        when = moment(at)
        return Job(job_id, user, kind, continuum_id, payload, "pending", 0, when, None, None, when)

    async def claim_job(
        self, *, now: float, lease_seconds: float, exclude: Sequence[tuple[str, str]] = ()
    ) -> Job | None:
        """One due job, claimed atomically (every replica's worker a different one). A job
        of an excluded continuum, or of one whose lease is held or awaited, here or (on
        PostgreSQL) in another process, is left for later: turns come first."""
        keys = sorted({job_key(user, cid) for user, cid in (*exclude, *self._leased)})
        among, listed = self._in_list(keys, "text")
        async with self._transaction() as db:
            # A claim that ran out its lease MAX_ATTEMPTS times (its worker died each
            # time: a job that kills its process would kill every restart) is given up.
            await db.execute(
                "UPDATE jobs SET state = 'failed', finished_at = ?, last_error = ?"
                " WHERE state = 'running' AND claimed_at <= ? AND attempts >= ?",
                (now, _INTERRUPTED, now - lease_seconds, MAX_ATTEMPTS),
            )
            rows = await _rows(
                db,
                "UPDATE jobs SET state = 'running', claimed_at = ?, attempts = attempts + 1"
                " WHERE id = (SELECT j.id FROM jobs j"
                " WHERE ((j.state = 'pending' AND j.next_at <= ?)"
                " OR (j.state = 'running' AND j.claimed_at <= ?))"
                f" AND NOT (j.owner || ':' || j.continuum_id {among}){self._LEASED_ELSEWHERE}"
                f" ORDER BY j.next_at, j.id LIMIT 1{self._SKIP_LOCKED})"
                f" RETURNING {_JOB_COLUMNS}",
                (exact(now), now, now - lease_seconds, listed),
            )
        return job_from_row(tuple(rows[0])) if rows else None

    async def _still_claimed(self, db: Connection, job: Job) -> bool:
        claimed = "SELECT 1 FROM jobs WHERE id = ? AND state = 'running' AND claimed_at = ?"
        return bool(
            await _rows(db, claimed + self._FOR_UPDATE, (job.id, epoch_or_none(job.claimed_at)))
        )

    async def finish_job(
        self,
        job: Job,
        *,
        now: float,
        digest: SegmentDigest | None = None,
        usage: JobUsage | None = None,
    ) -> bool:
        """Store the job's outcome and mark it done, in one transaction; False (and
        nothing written) if the claim was lost meanwhile (the lease ran out)."""
        proposals = check_digest(digest)
        async with self._transaction() as db:
            if not await self._still_claimed(db, job):
                return False
            if digest is not None:
                await db.execute(
                    "UPDATE segments SET title = ?, summary = ? WHERE owner = ? AND id = ?",
                    (digest.title, digest.summary, job.user, digest.segment_id),
                )
                text = f"{digest.title}\n{digest.summary}"
                await self._index_segment(db, digest.segment_id, text)
                for proposal in proposals:
                    await self._keep_proposal(db, job.user, proposal, now, digest.segment_id)
            await db.execute(
                "UPDATE jobs SET state = 'done', finished_at = ?, record = ?, last_error = NULL"
                " WHERE id = ?",
                (now, None if usage is None else msgspec.json.encode(usage), job.id),
            )
        return True

    async def _keep_proposal(
        self, db: Connection, user: str, proposal: MemoryProposal, now: float, segment_id: int
    ) -> None:
        """A memory the segment's summary proposed: new, or an update of one it names
        (new all the same when that one was deleted since it was named)."""
        if proposal.update_id is not None and await self._update_memory(
            db, user, proposal.update_id, proposal.text, proposal.importance, proposal.vector
        ):
            return
        new = AddMemory(proposal.text, proposal.importance, now, vector=proposal.vector)
        await self._insert_memory(db, user, new, segment_id)

    async def _update_memory(
        self,
        db: Connection,
        user: str,
        memory_id: int,
        text: str,
        importance: float,
        vector: Sequence[float] | None = None,
    ) -> bool:
        """The same memory said again (a summary's proposal, or `remember`): its text
        replaced and the higher importance kept, in place; only the user's own. The
        vector of the new text, when the caller has it, is written and indexed with it.
        False, and nothing written, when no memory has that id any more (deleted since
        the caller found it): the caller stores the text as a new one rather than lose
        it. Another user's memory under that id is left alone (True)."""
        memory = (user, memory_id)
        kept = await self._fitting(db, vector)
        # The same text (only its importance raised) keeps its vector when no new one
        # came: it is still the vector of that text.
        same = kept is None and bool(
            await _rows(
                db,
                "SELECT 1 FROM memories WHERE owner = ? AND id = ? AND text = ?",
                (*memory, text),
            )
        )
        await self._uncount_terms(db, "memory", "owner = ? AND id = ?", memory)
        if not await _rows(
            db,
            "UPDATE memories SET text = ?, embedding = CASE WHEN ? THEN embedding ELSE ? END,"
            " importance = CASE WHEN importance > ? THEN importance ELSE ? END"
            " WHERE owner = ? AND id = ? RETURNING 1",
            (
                text,
                same,
                None if kept is None else encode_vector(kept),
                importance,
                importance,
                *memory,
            ),
        ):
            return bool(await _rows(db, "SELECT 1 FROM memories WHERE id = ?", (memory_id,)))
        await self._count_terms(db, "memory", [text])
        if not same:
            # The vector of the old text goes with it (without a new one, the memory is
            # embedded in the background); only once the memory is known to be this user's.
            await self._unindex_vectors(db, [memory_id])
            if kept is not None:
                await self._index_vectors(db, [(memory_id, kept)])
        return True

    async def _fitting(
        self, db: Connection, vector: Sequence[float] | None
    ) -> Sequence[float] | None:
        """A vector the caller computed for a memory's new text, if it fits the embedder
        in use; None (the memory waits for the background worker) when no embedder is in
        use here, it has another dimension (changed since the vector was made), or the
        store's vectors are now another embedder's (`_ours`)."""
        if vector is None or self._dimensions is None or len(vector) != self._dimensions:
            return None
        checked = self._check_vector(vector)
        return checked if await self._ours(db) else None

    async def _ours(self, db: Connection) -> bool:
        """Whether the embedder recorded with the vectors is still this store's: another
        process sharing the database (a replica) may have started with another one
        since, dropping every vector; this one's would be taken for that embedder's
        and never embedded again. The record stays held until this write commits: a
        replica starting meanwhile waits, and drops these vectors too."""
        return self._is_ours(await _rows(db, _EMBEDDER_ROWS + self._SHARE_VECTOR_MODEL, ()))

    def _is_ours(self, recorded: list[Any]) -> bool:
        """Whether the embedder rows read are this store's (`use_embedder`)."""
        return [tuple(row) for row in recorded] == [self._vector_model]

    async def fail_job(self, job: Job, *, now: float, error: str, retry_at: float | None) -> bool:
        """Record the failure; retried at `retry_at`, or given up when it is None."""
        async with self._transaction() as db:
            if not await self._still_claimed(db, job):
                return False
            state, due, ended = (
                ("failed", epoch(job.next_at), now)
                if retry_at is None
                else ("pending", retry_at, None)
            )
            await db.execute(
                "UPDATE jobs SET state = ?, next_at = ?, last_error = ?, finished_at = ?"
                " WHERE id = ?",
                (state, due, error[:2000], ended, job.id),
            )
        return True

    async def jobs(
        self, user: str, continuum_id: str | None = None, *, limit: int = 1000, after: int = 0
    ) -> list[Job]:
        check_int64(after, "after")
        where, args = _owned(user, continuum_id)
        rows = await self._read(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {where} AND id > ?"
            f" ORDER BY id LIMIT {self._LIMIT}",
            (*args, after, self._limit(limit)),
        )
        return [job_from_row(tuple(row)) for row in rows]

    # -- context searches ---------------------------------------------------------------

    async def request_search(
        self, user: str, continuum_id: str, query: str, *, now: float | None = None
    ) -> ContextSearch:
        where, args = _owned_one(user, continuum_id)
        check_query(query)
        at = _at(now)
        async with self._transaction() as db:
            await db.execute(f"DELETE FROM searches WHERE {where} AND query = ?", (*args, query))
            ((search_id,),) = await _rows(
                db,
                "INSERT INTO searches (owner, continuum_id, query, state, requested_at)"
                " VALUES (?, ?, ?, 'pending', ?) RETURNING id",
                (*args, query, at),
            )
            await db.execute(
                f"DELETE FROM searches WHERE {where} AND id < (SELECT min(id) FROM"
                f" (SELECT id FROM searches WHERE {where} ORDER BY id DESC"
                f" LIMIT {self._LIMIT}) newest)",
                (*args, *args, MAX_SEARCHES),
            )
        return ContextSearch(int(search_id), user, continuum_id, query, "pending", moment(at))

    async def claim_search(self, *, now: float, lease_seconds: float) -> ContextSearch | None:
        async with self._transaction() as db:
            # As for jobs (`claim_job`): interrupted MAX_ATTEMPTS times, it ends, found
            # nothing, with the reason (its section shows nothing from it).
            await db.execute(
                "UPDATE searches SET state = 'done', finished_at = ?, turns_left = 1,"
                " passages = ?, error = ?"
                # `state != 'done'`: what the open searches' partial index is over.
                " WHERE state != 'done' AND state = 'running' AND claimed_at <= ?"
                " AND attempts >= ?",
                (now, encode_passages(()), _INTERRUPTED, now - lease_seconds, MAX_ATTEMPTS),
            )
            rows = await _rows(
                db,
                "UPDATE searches SET state = 'running', claimed_at = ?, attempts = attempts + 1"
                " WHERE id = (SELECT id FROM searches WHERE state != 'done'"
                " AND (state = 'pending' OR claimed_at <= ?)"
                f" ORDER BY id LIMIT 1{self._SKIP_LOCKED}) RETURNING {_SEARCH_COLUMNS}",
                (exact(now), now - lease_seconds),
            )
        return search_from_row(tuple(rows[0])) if rows else None

    async def finish_search(
        self,
        search: ContextSearch,
        *,
        now: float,
        passages: Sequence[Passage],
        error: str | None,
        keep_turns: int,
    ) -> bool:
        found = (encode_passages(passages), None if error is None else error[:2000])
        async with self._transaction() as db:
            done = await _rows(
                db,
                "UPDATE searches SET state = 'done', finished_at = ?, turns_left = ?,"
                " passages = ?, error = ?"
                " WHERE id = ? AND state = 'running' AND claimed_at = ? RETURNING 1",
                (now, max(keep_turns, 1), *found, search.id, epoch_or_none(search.claimed_at)),
            )
        return bool(done)

    async def searches(self, user: str, continuum_id: str) -> list[ContextSearch]:
        where, args = _owned_one(user, continuum_id)
        rows = await self._read(
            f"SELECT {_SEARCH_COLUMNS} FROM searches WHERE {where} ORDER BY id", args
        )
        return [search_from_row(tuple(row)) for row in rows]

    # -- reminders ------------------------------------------------------------------------

    async def _insert_reminder(self, db: Connection, user: str, new: AddReminder) -> int:
        ((reminder_id,),) = await _rows(
            db,
            "INSERT INTO reminders (owner, text, due_at, created_at, origin)"
            " VALUES (?, ?, ?, ?, ?) RETURNING id",
            (user, new.text, new.due_at, new.created_at, new.origin),
        )
        return int(reminder_id)

    async def _complete_reminder(
        self, db: Connection, user: str, reminder_id: int, at: float
    ) -> None:
        await db.execute(
            "UPDATE reminders SET completed_at = ?"
            " WHERE owner = ? AND id = ? AND completed_at IS NULL",
            (at, user, reminder_id),
        )

    async def add_reminder(
        self,
        user: str,
        text: str,
        *,
        due_at: datetime | None,
        origin: Literal["user", "agent"],
        now: float | None = None,
    ) -> Reminder:
        check_user_name(user)
        new = add_reminder_effect(text, due_at, now=_at(now), origin=origin)
        async with self._transaction() as db:
            reminder_id = await self._insert_reminder(db, user, new)
        due, created = moment_or_none(new.due_at), moment(new.created_at)
        return Reminder(reminder_id, text, due, created, None, origin)

    async def complete_reminder(
        self, user: str, reminder_id: int, *, now: float | None = None
    ) -> Reminder:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        async with self._transaction() as db:
            await self._complete_reminder(db, user, reminder_id, _at(now))
            rows = await _rows(db, f"{_REMINDER} WHERE owner = ? AND id = ?", (user, reminder_id))
        if not rows:
            raise NotFound(f"no reminder #{reminder_id}")
        return from_row(Reminder, rows[0])

    async def reminder(self, user: str, reminder_id: int) -> Reminder:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        rows = await self._read(f"{_REMINDER} WHERE owner = ? AND id = ?", (user, reminder_id))
        if not rows:
            raise NotFound(f"no reminder #{reminder_id}")
        return from_row(Reminder, rows[0])

    async def active_reminders(self, user: str, *, limit: int = 50) -> list[Reminder]:
        check_user_name(user)
        rows = await self._read(
            f"{_REMINDER} WHERE owner = ? AND completed_at IS NULL"
            f" ORDER BY due_at IS NULL, due_at, id LIMIT {self._LIMIT}",
            (user, self._limit(limit)),
        )
        return [from_row(Reminder, row) for row in rows]

    async def reminders_due_between(
        self, user: str, start: datetime, end: datetime
    ) -> list[Reminder]:
        check_user_name(user)
        lo, hi = to_epoch(start, "start"), to_epoch(end, "end")
        if hi < lo:
            raise InvalidInput("the end of the range comes before its start")
        rows = await self._read(
            f"{_REMINDER} WHERE owner = ? AND completed_at IS NULL"
            " AND due_at >= ? AND due_at < ? ORDER BY due_at, id",
            (user, lo, hi),
        )
        return [from_row(Reminder, row) for row in rows]

    async def reminders(
        self, user: str, *, include_completed: bool = False, limit: int = 200, after: int = 0
    ) -> list[Reminder]:
        check_int64(after, "after")
        check_user_name(user)
        open_only = "" if include_completed else " AND completed_at IS NULL"
        rows = await self._read(
            f"{_REMINDER} WHERE owner = ? AND id > ?{open_only} ORDER BY id LIMIT {self._LIMIT}",
            (user, after, self._limit(limit)),
        )
        return [from_row(Reminder, row) for row in rows]

    async def delete_reminder(self, user: str, reminder_id: int) -> None:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        async with self._transaction() as db:
            if not await _rows(
                db,
                "DELETE FROM reminders WHERE owner = ? AND id = ? RETURNING 1",
                (user, reminder_id),
            ):
                raise NotFound(f"no reminder #{reminder_id}")

    # -- memories ---------------------------------------------------------------------------

    async def _insert_memory(
        self, db: Connection, user: str, new: AddMemory, source_segment: int | None = None
    ) -> int:
        """A new memory; its vector, when the caller has one, written and indexed with it
        (else it waits for the background worker)."""
        vector = await self._fitting(db, new.vector)
        ((memory_id,),) = await _rows(
            db,
            "INSERT INTO memories"
            " (owner, text, created_at, expires_at, importance, source_segment, embedding)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                user,
                new.text,
                new.created_at,
                new.expires_at,
                new.importance,
                source_segment,
                None if vector is None else encode_vector(vector),
            ),
        )
        await self._count_terms(db, "memory", [new.text])
        if vector is not None:
            await self._index_vectors(db, [(int(memory_id), vector)])
        return int(memory_id)

    async def add_memory(
        self,
        user: str,
        text: str,
        *,
        importance: float = 0.5,
        expires_at: datetime | None = None,
        now: float | None = None,
    ) -> Memory:
        check_user_name(user)
        new = add_memory_effect(text, importance, now=_at(now), expires_at=expires_at)
        async with self._transaction() as db:
            memory_id = await self._insert_memory(db, user, new)
        created, expires = moment(new.created_at), moment_or_none(new.expires_at)
        return Memory(memory_id, text, created, expires, importance)

    async def memories(
        self, user: str, *, limit: int = 100, before: int | None = None
    ) -> list[Memory]:
        """The user's memories, newest first; with `before`, those older than that id."""
        check_user_name(user)
        if before is not None:
            check_int64(before, "before")
        where, args = ("", ()) if before is None else (" AND m.id < ?", (before,))
        rows = await self._read(
            f"{MEMORY} FROM memories m WHERE m.owner = ?{where} ORDER BY m.id DESC"
            f" LIMIT {self._LIMIT}",
            (user, *args, self._limit(limit)),
        )
        return [from_row(Memory, row) for row in rows]

    async def delete_memory(self, user: str, memory_id: int) -> None:
        check_user_name(user)
        check_row_id(memory_id, "memory id")
        async with self._transaction() as db:
            await self._uncount_terms(db, "memory", "owner = ? AND id = ?", (user, memory_id))
            await self._unindex_vectors(db, [memory_id])
            if not await _rows(
                db, "DELETE FROM memories WHERE owner = ? AND id = ? RETURNING 1", (user, memory_id)
            ):
                raise NotFound(f"no memory #{memory_id}")

    async def use_embedder(self, model: str, dimensions: int) -> bool:
        """Keep the vectors of this embedder (its name and dimension, recorded with them).

        Another name or dimension than the recorded ones: every stored vector is dropped
        in this transaction, unused from now on, and the memories wait for the background
        worker to embed them again. Returns whether they were dropped.
        """
        if not model.strip() or len(model) > 500:
            raise InvalidInput("an embedder's name must be 1 to 500 characters")
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            raise InvalidInput(
                f"an embedder's dimension must be 1 to {MAX_DIMENSIONS}, not {dimensions}"
            )
        async with self._transaction() as db:
            recorded = await self._recorded_embedder(db)
            reset = [tuple(row) for row in recorded] != [(model, dimensions)]
            if reset:
                await db.execute("DELETE FROM vector_model", ())
                await db.execute(
                    "INSERT INTO vector_model (model, dimensions) VALUES (?, ?)",
                    (model, dimensions),
                )
                await db.execute(
                    "UPDATE memories SET embedding = NULL WHERE embedding IS NOT NULL", ()
                )
            await self._prepare_vectors(db, dimensions, reset=reset)
        self._dimensions = dimensions
        self._vector_model = (model, dimensions)
        self._ours_until = float("-inf")  # what was read of another embedder is moot
        return reset

    async def _recorded_embedder(self, db: Connection) -> list[Any]:
        """The embedder recorded with the vectors (no row, or one), read to be written in
        this transaction: the table is locked first, so that two processes starting on
        one store with their embedder (replicas) record it once, the second reading what
        the first wrote. A row lock would not order them: at the first start there is
        no row to lock, both found none and recorded it twice, and every later start,
        finding two rows, took them for another embedder's and dropped every vector."""
        if self._LOCK_VECTOR_MODEL:
            await db.execute(self._LOCK_VECTOR_MODEL, ())
        return await _embedder_rows(db)

    def _check_vector(self, vector: Sequence[float]) -> tuple[float, ...]:
        """The vector as floats, checked against the embedder in use."""
        if self._dimensions is None:
            raise InvalidInput("no embedder is in use: call use_embedder first")
        values = check_vector(vector)  # numbers (an embedder's None or text: refused)
        if len(values) != self._dimensions:
            raise InvalidInput(
                f"a vector of {len(values)} dimensions; the embedder in use has {self._dimensions}"
            )
        # Stored and searched at unit length: a cosine in float32 of components near
        # 1e20 overflowed (a similarity of 0 where it was 0.998) and of 1e-40 underflowed
        # (infinite). `hypot` underflows nowhere, and overflows only past the largest
        # float, where the vector is scaled by its largest component first (on every
        # search: one pass more only for such vectors).
        length = math.hypot(*values)
        if math.isinf(length):
            top = max(abs(x) for x in values)
            values = tuple(x / top for x in values)
            length = math.hypot(*values)
        return tuple(x / length for x in values)

    async def memories_without_vectors(
        self, *, limit: int = 64, after: int = 0, now: float | None = None
    ) -> list[Memory]:
        rows = await self._read(
            f"{MEMORY} FROM memories m WHERE m.embedding IS NULL AND m.id > ?"
            f" AND {UNEXPIRED} ORDER BY m.id LIMIT {self._LIMIT}",
            (check_int64(after, "after"), _at(now), self._limit(limit)),
        )
        return [from_row(Memory, row) for row in rows]

    async def recorded_embedder(self) -> tuple[str, int] | None:
        rows = await self._read(_EMBEDDER_ROWS)
        return (str(rows[0][0]), int(rows[0][1])) if len(rows) == 1 else None

    async def count_memories_without_vectors(self, *, now: float | None = None) -> int | None:
        ((count, recorded),) = await self._read(
            "SELECT (SELECT count(*) FROM memories m WHERE m.embedding IS NULL"
            f" AND {UNEXPIRED}), (SELECT count(*) FROM vector_model)",
            (_at(now),),
        )
        return int(count) if recorded else None

    async def set_memory_vectors(self, vectors: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        """Store each memory's vector (float32) and index it, unless its text changed
        since it was read (its new text waits for its own vector)."""
        vectors = [(memory, self._check_vector(vector)) for memory, vector in vectors]
        async with self._transaction() as db:
            if not await self._ours(db):
                raise StorageUnavailable(_ANOTHER_EMBEDDER)
            kept: list[tuple[int, Sequence[float]]] = []
            for memory, vector in vectors:
                if await _rows(
                    db,
                    "UPDATE memories SET embedding = ? WHERE id = ? AND text = ? RETURNING 1",
                    (encode_vector(vector), memory.id, memory.text),
                ):
                    kept.append((memory.id, vector))
            await self._index_vectors(db, kept)

    async def nearest_memories(
        self,
        user: str,
        vector: Sequence[float],
        *,
        k: int,
        now: float | None = None,
        among: Sequence[int] = (),
    ) -> list[tuple[Memory, float]]:
        """The user's `k` memories nearest to `vector` (cosine similarity, best first),
        expired ones left out, answered in the database; with `among`, the similarity
        of those memories too (when they have a vector). `k` 0: `among`'s alone."""
        check_user_name(user)
        vector = self._check_vector(vector)
        if not 0 <= k <= MAX_NEAREST:
            raise InvalidInput(f"k must be 0 to {MAX_NEAREST}, not {k}")
        for memory_id in among:
            check_row_id(memory_id, "memory")
        if self.shared:
            await self._searched_vectors_ours()
        rows = await self._nearest_rows(user, vector, k, _at(now), among)
        found = sorted(
            ((from_row(Memory, row[:7]), float(row[7])) for row in rows), key=lambda h: -h[1]
        )
        wanted = set(among)
        return [hit for rank, hit in enumerate(found) if rank < k or hit[0].id in wanted]

    async def embedder_current(self) -> bool:
        """A shared store's vectors may have become another embedder's since this
        process started (a replica started with another `[memory] embedder`): this
        one's vectors would be compared with the new embedder's. Read again at most
        every EMBEDDER_RECHECK_S; a store no other process writes needs no read."""
        if not self.shared or self._vector_model is None:
            return True
        now = time.monotonic()
        if now >= self._ours_until:
            self._ours_known = self._is_ours(await self._read(_EMBEDDER_ROWS))
            self._ours_until = now + EMBEDDER_RECHECK_S
        return self._ours_known

    async def _searched_vectors_ours(self) -> None:
        """Another embedder's vectors are refused (recall then uses keywords alone,
        with a warning that says why)."""
        if not await self.embedder_current():
            raise StorageUnavailable(_ANOTHER_EMBEDDER)

    async def mark_memories_used(
        self, user: str, memory_ids: Sequence[int], *, times: int = 1
    ) -> None:
        """Count `times` more surfacings of each memory (the `use` term of the ranking)."""
        check_user_name(user)
        check_row_id(times, "times")
        if not memory_ids:
            return
        ids = sorted({check_row_id(i, "memory id") for i in memory_ids})
        among, listed = self._in_list(ids, "bigint")
        async with self._transaction() as db:
            await db.execute(
                f"UPDATE memories SET uses = uses + ? WHERE owner = ? AND id {among}",
                (times, user, listed),
            )

    async def search_memories(
        self, user: str, query: str, *, limit: int = 5, now: float | None = None
    ) -> list[MemoryHit]:
        """One statement (one round trip) plans and searches: it is on every turn's path."""
        _check_search_limit(limit)
        check_user_name(user)
        terms = query_terms(query)
        if limit < 1 or not terms:
            return []
        at = _at(now)
        rows = await self._memory_rows(user, terms, at, limit * 4)
        # Scored from the row, and only the best made into records (recall asks for 20
        # of 80 rows: the other 60 records cost some 0.1 ms a call, 6% of it). Equal
        # scores: the newest first, on either database (as for messages).
        scored = sorted(
            ((memory_score(row[7], row[4], at - row[2], row[6]), row) for row in rows),
            key=lambda pair: (pair[0], pair[1][0]),
            reverse=True,
        )
        return [MemoryHit(from_row(Memory, row[:7]), score) for score, row in scored[:limit]]

    async def search_messages(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[MessageHit]:
        _check_search_limit(limit)
        check_user_name(user)
        if continuum_id is not None:
            check_continuum_id(continuum_id)
        terms = query_terms(query)
        if limit < 1 or not terms:
            return []
        return await self._message_hits(user, terms, continuum_id, limit)

    # -- documents ---------------------------------------------------------------------------

    async def put_document(
        self, user: str, label: str, content: str, *, now: float | None = None
    ) -> Document:
        check_user_name(user)
        check_document(label, content)
        at = _at(now)
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO documents (owner, label, content, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (owner, label) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                (user, label, content, at),
            )
        return Document(label, content, moment(at))

    async def documents(self, user: str, *, limit: int = -1, after: str = "") -> list[Document]:
        """The user's documents, in label order (they form that user's system prompt)."""
        check_user_name(user)
        check_storable(after, "after")
        rows = await self._read(
            "SELECT label, content, updated_at FROM documents"
            f" WHERE owner = ? AND label{self._BYTEWISE} > ?"
            f" ORDER BY label{self._BYTEWISE} LIMIT {self._LIMIT}",
            (user, after, self._limit(limit)),
        )
        return [from_row(Document, row) for row in rows]

    async def delete_document(self, user: str, label: str) -> None:
        check_user_name(user)
        check_label(label)  # malformed: a 400 naming it, as when it was put
        async with self._transaction() as db:
            if not await _rows(
                db, "DELETE FROM documents WHERE owner = ? AND label = ? RETURNING 1", (user, label)
            ):
                raise NotFound(f"no document {label!r}")

    # -- users --------------------------------------------------------------------------------

    async def add_user(self, name: str, token_hash: str, *, now: float | None = None) -> User:
        check_user_name(name)
        if name == DEFAULT_USER:
            raise InvalidInput(
                f"{DEFAULT_USER!r} is the built-in user (the admin token and tokenless"
                " loopback requests act as it); choose another name"
            )
        check_token_hash(token_hash)
        at = _at(now)
        async with self._transaction() as db:
            added = await _rows(
                db,
                "INSERT INTO users (name, token_hash, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING RETURNING 1",
                (name, token_hash, at),
            )
        if not added:
            raise UserExists(f"a user named {name!r} already exists")
        return User(name, moment(at))

    async def delete_user(self, name: str) -> UserForgotten:
        check_user_name(name)
        if name == DEFAULT_USER:
            raise InvalidInput(
                f"{DEFAULT_USER!r} is the built-in user (the admin token acts as it);"
                " it cannot be deleted"
            )
        counted: dict[str, int] = {}
        async with self._transaction() as db:
            await self._forgetting(db, name, _at(None))
            # The words of the rows about to go leave the search statistics first (a
            # PostgreSQL hook; SQLite's indexes follow by trigger or by their own row in
            # `_USER_TABLES`).
            await self._uncount_terms(db, "message", "owner = ?", (name,))
            await self._uncount_terms(db, "memory", "owner = ?", (name,))
            # Their vectors leave the vector index too, whether or not an embedder is in
            # use here (SQLite's is a table of its own, counted; PostgreSQL's are columns
            # of the memories).
            forgotten = await self._forget_vectors(db, name)
            if forgotten is not None:
                counted["memory_vec"] = forgotten
            for table, where in self._USER_TABLES:
                rows = await _rows(db, f"SELECT count(*) FROM {table} WHERE {where}", (name,))
                counted[table] = int(rows[0][0])
                await db.execute(f"DELETE FROM {table} WHERE {where}", (name,))
            user_rows = await _rows(db, "DELETE FROM users WHERE name = ? RETURNING 1", (name,))
            counted["users"] = len(user_rows)
            if not any(counted.values()):
                raise NotFound(f"no user named {name!r}")
            await self._purge_deleted(db)
        return UserForgotten(name, counted)

    async def _forget_vectors(self, db: Connection, user: str) -> int | None:
        """Delete the user's entries of a vector index kept apart from the memories; how
        many, or None when the store keeps none (PostgreSQL: columns of the memories)."""
        return None

    async def reclaim_space(self) -> SpaceReclaimed:
        """Give the database's free pages back to the file system (SQLite's incremental
        vacuum); PostgreSQL's space is its server's autovacuum's, nothing to do here."""
        return SpaceReclaimed(0, 0)

    async def set_user_token(self, name: str, token_hash: str) -> None:
        check_user_name(name)
        if name == DEFAULT_USER:  # refused as its delete is, not "no user named"
            raise InvalidInput(
                f"{DEFAULT_USER!r} is the built-in user (the admin token acts as it);"
                " it has no token of its own to rotate"
            )
        check_token_hash(token_hash)
        async with self._transaction() as db:
            changed = await _rows(
                db, "UPDATE users SET token_hash = ? WHERE name = ? RETURNING 1", (token_hash, name)
            )
        if not changed:
            raise NotFound(f"no user named {name!r}")

    async def backup(self, path: Path) -> int:
        """Write a consistent snapshot of the store, taken while it is in use, to the file
        `path` (which appears whole or not at all); its size in bytes. A PostgreSQL
        store is backed up with its own tools instead."""
        raise InvalidInput(
            "a PostgreSQL store is backed up with pg_dump (the README's"
            ' "Moving, backing up, forgetting" shows how)'
        )

    # -- moving a store (export, import, migrate; the format is storage/_transfer.py) -----

    @abstractmethod
    def _snapshot(self) -> AbstractAsyncContextManager[Connection]:
        """Reads of one consistent snapshot of the store, on a connection of their own:
        what is written meanwhile (a replica serving) is not seen."""

    def _reading(self) -> AbstractAsyncContextManager[Connection]:
        """`_snapshot`, the driver's errors turned into `StorageUnavailable`."""
        return self._guarded(self._snapshot(), "a read")

    async def export_rows(
        self, user: str | None = None, *, batch: int = 500
    ) -> AsyncIterator[TableRows]:
        """Every portable row (of one user, or of all), table by table in the order of
        `PORTABLE_TABLES` (parents first), each table's rows as they were written, all
        read in one snapshot: a turn committing meanwhile is in it whole or not at all
        (its continuum's row never older than its messages)."""
        if user is not None:
            check_user_name(user)
        if check_int64(batch, "batch") < 1:
            raise InvalidInput(f"an export's batch is at least 1 row, not {batch}")
        async with self._reading() as db:
            embedder: tuple[str, int] | None = None
            for table, columns, order in PORTABLE_TABLES:
                async for rows in self._pages(db, table, columns, order, user, batch):
                    if table == "vector_model":
                        embedder = (str(rows[0][0]), int(rows[0][1]))
                    # Memories name their embedder: a migration imports each part alone.
                    yield TableRows(table, rows, embedder if table == "memories" else None)

    async def _pages(
        self,
        db: Connection,
        table: str,
        columns: tuple[str, ...],
        order: str,
        user: str | None,
        batch: int,
    ) -> AsyncIterator[list[tuple[Any, ...]]]:
        """The table's rows (of one user, or all) in `order`, `batch` at a time, each page
        the rows after the last one's key (an OFFSET would read every skipped row again)."""
        keys = order.format(turn_order=self._TURN_ORDER).split(", ")
        owned: list[str] = []
        args: list[Any] = []
        # `vector_model` is the store's, of no user: one user's export carries it
        # too, as their memories' vectors mean something only with it.
        if user is not None and table != "vector_model":
            owned, args = [f"{'name' if table == 'users' else 'owner'} = ?"], [user]
        listed = f"SELECT {', '.join((*columns, *keys))} FROM {table}"
        after: list[Any] = []
        while True:
            where = owned + [f"({', '.join(keys)}) > ({', '.join('?' * len(keys))})"] * bool(after)
            rows = await _rows(
                db,
                f"{listed}{' WHERE ' if where else ''}{' AND '.join(where)}"
                f" ORDER BY {', '.join(keys)} LIMIT {self._LIMIT}",
                [*args, *after, batch],
            )
            if rows:
                yield [tuple(row)[: len(columns)] for row in rows]
                after = list(rows[-1])[len(columns) :]
            if len(rows) < batch:
                return

    async def import_rows(
        self, parts: Iterable[TableRows], *, skip_existing: bool = False
    ) -> dict[str, int]:
        """Insert the rows, ids and all, in one transaction; how many went in, by table.
        A row the store already has (the same user, continuum or id) is an
        `ImportCollision` and nothing is imported, unless `skip_existing` (a migration
        resumed: a row the last run copied is not copied twice, and one that changed in
        the source since, a continuum that took a turn, is brought up to date)."""
        inserted: dict[str, int] = {}
        async with self._transaction() as db:
            recorded = await self._recorded_embedder(db)
            vectors = _ImportedVectors(tuple(recorded[0]) if recorded else None)
            for part in parts:
                if part.table == "vector_model":
                    count = await self._import_vector_model(db, part.rows, skip_existing, vectors)
                else:
                    count = await self._insert_rows(db, part, skip_existing, vectors)
                inserted[part.table] = inserted.get(part.table, 0) + count
            await self._after_import(db)
        return inserted

    async def _import_vector_model(
        self,
        db: Connection,
        rows: list[tuple[Any, ...]],
        skip_existing: bool,
        vectors: _ImportedVectors,
    ) -> int:
        """The embedder the imported vectors are of, against the store's own: none here,
        it is recorded (and the vectors kept); the same, nothing to do; another, a
        migration refuses (its target is another store), an import keeps the store's
        embedder and leaves the imported memories without vectors, for it to embed
        again in the background (as its next start would after dropping them)."""
        count = 0
        for model, dimensions in rows:
            if not isinstance(model, str) or not model.strip() or len(model) > 500:
                raise InvalidInput("a vector_model row needs a name of 1 to 500 characters")
            if not isinstance(dimensions, int) or not 1 <= dimensions <= MAX_DIMENSIONS:
                raise InvalidInput(f"a vector_model row needs 1 to {MAX_DIMENSIONS} dimensions")
            vectors.imported = (model, dimensions)
            if vectors.recorded is None:
                await db.execute(
                    "INSERT INTO vector_model (model, dimensions) VALUES (?, ?)",
                    (model, dimensions),
                )
                vectors.recorded = (model, dimensions)
                count += 1
            elif vectors.recorded != (model, dimensions) and skip_existing:
                raise ImportCollision(
                    f"the target's vectors are of the embedder {vectors.recorded[0]!r}"
                    f" ({vectors.recorded[1]} dimensions), the source's of {model!r}"
                    f" ({dimensions}): nothing was copied; migrate into an empty store"
                )
        return count

    async def _insert_rows(
        self, db: Connection, part: TableRows, skip_existing: bool, vectors: _ImportedVectors
    ) -> int:
        columns = COLUMNS[part.table]
        rows = part.rows
        if part.table == "memories":
            rows = vectors.admit(part, columns.index("embedding"), skip_existing)
            if skip_existing:
                rows = await self._changed_memories(db, columns, rows, vectors)
        if part.table in ("turns", "segments", "messages"):
            await self._check_parents(db, part)
        extra, rows = self._derived_columns(part.table, columns, rows)
        names = (*columns, *extra)
        conflict = "DO NOTHING"
        if skip_existing:
            conflict = self._on_conflict(part.table, columns, names)
        count = 0
        for start in range(0, len(rows), 100):
            chunk = rows[start : start + 100]
            values = ", ".join(["(" + ", ".join("?" * len(names)) + ")"] * len(chunk))
            got = await _rows(
                db,
                f"INSERT INTO {part.table} ({', '.join(names)}) VALUES {values}"
                f" ON CONFLICT {conflict} RETURNING {', '.join(columns)}",
                [value for row in chunk for value in row],
            )
            if len(got) < len(chunk) and not skip_existing:
                raise ImportCollision(
                    f"{len(chunk) - len(got)} of the {part.table} rows are in this store"
                    " already (the same user, continuum or id): nothing was imported;"
                    " import into an empty store, or delete those users first"
                )
            await self._index_imported(db, part.table, columns, got)
            if part.table == "memories":
                await self._index_imported_vectors(db, columns, got, vectors)
            count += len(got)
        return count

    async def _check_parents(self, db: Connection, part: TableRows) -> None:
        """Refuse rows whose continuum (or, for messages, turn) neither the import nor the
        store holds, naming it: the database's own refusal said only "a write failed:
        FOREIGN KEY constraint failed", as if the store were out of order."""
        columns = COLUMNS[part.table]
        owner, cid = columns.index("owner"), columns.index("continuum_id")
        for user, continuum_id in sorted({(row[owner], row[cid]) for row in part.rows}):
            if not await _rows(
                db, "SELECT 1 FROM continuums WHERE owner = ? AND id = ?", (user, continuum_id)
            ):
                raise InvalidInput(
                    f"{part.table} rows of the continuum {continuum_id!r} of {user!r}, which"
                    " neither the import nor this store holds: nothing was imported"
                )
        if part.table == "messages":
            turn = columns.index("turn_id")
            wanted = sorted({row[turn] for row in part.rows})
            among, ids = self._in_list(wanted, "text")
            held = {
                row[0] for row in await _rows(db, f"SELECT id FROM turns WHERE id {among}", (ids,))
            }
            missing = [t for t in wanted if t not in held]
            if missing:
                raise InvalidInput(
                    f"messages of the turn {missing[0]!r}, which neither the import nor this"
                    " store holds: nothing was imported"
                )

    def _derived_columns(
        self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """What an adapter's rows carry beside the portable columns (derived from them:
        PostgreSQL's job lease keys), and the rows with them."""
        if table != "jobs" or not rows:
            return [], rows
        owner, cid = columns.index("owner"), columns.index("continuum_id")
        extra = sorted(self._job_columns(rows[0][owner], rows[0][cid]))
        derived = [
            (*row, *(self._job_columns(row[owner], row[cid])[c] for c in extra)) for row in rows
        ]
        return extra, derived

    @staticmethod
    def _on_conflict(table: str, columns: tuple[str, ...], names: tuple[str, ...]) -> str:
        """A resumed migration's conflict clause: a row the target has is brought up to
        date where the source's differs (mutable tables: a continuum's counts, a job's
        state, a rotated token), and returned (it is copied now); one the same is left
        alone. Only the same row is written over: of the same owner and continuum (a
        row of another user under that id stays, and the verification finds it)."""
        keys = KEYS.get(table)
        if keys is None:  # messages never change once written
            return "DO NOTHING"
        fixed = [c for c in ("owner", "continuum_id") if c in columns and c not in keys]
        same = [f"{table}.{c} = excluded.{c}" for c in fixed]
        changing = [c for c in columns if c not in keys and c not in fixed]
        differs = " OR ".join(
            f"{table}.{c} <> excluded.{c} OR ({table}.{c} IS NULL) <> (excluded.{c} IS NULL)"
            for c in changing
        )
        # Memories come already sorted (`_changed_memories`): each one sent is written.
        where = same if table == "memories" else [*same, f"({differs})"]
        sets = ", ".join(f"{c} = excluded.{c}" for c in names if c not in keys and c not in fixed)
        return f"({', '.join(keys)}) DO UPDATE SET {sets} WHERE {' AND '.join(where)}"

    async def _changed_memories(
        self,
        db: Connection,
        columns: tuple[str, ...],
        rows: list[tuple[Any, ...]],
        vectors: _ImportedVectors,
    ) -> list[tuple[Any, ...]]:
        """Of the memories a resumed migration brings, those the store lacks and those
        it holds otherwise (the same id and owner), in order. The word counts and vector
        index entries of the latter's old values go now: they are made again as the
        rows are written (their text or vector may have changed)."""
        mid, owner = columns.index("id"), columns.index("owner")
        among, ids = self._in_list([row[mid] for row in rows], "bigint")
        held = {
            row[mid]: tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
            for row in await _rows(
                db, f"SELECT {', '.join(columns)} FROM memories WHERE id {among}", (ids,)
            )
        }
        changed = [
            row[mid]
            for row in rows
            if row[mid] in held and held[row[mid]] != row and held[row[mid]][owner] == row[owner]
        ]
        if changed:
            among, ids = self._in_list(changed, "bigint")
            await self._uncount_terms(db, "memory", f"id {among}", (ids,))
            if vectors.recorded is not None and not vectors.ready:
                vectors.ready = await self._ready_imported_vectors(db, vectors.recorded[1])
            await self._unindex_vectors(db, changed)
        written = set(changed)
        return [row for row in rows if row[mid] not in held or row[mid] in written]

    async def _index_imported_vectors(
        self, db: Connection, columns: tuple[str, ...], rows: list[Any], vectors: _ImportedVectors
    ) -> None:
        """The vector index (SQLite's `memory_vec`, PostgreSQL's normalized `vector` and
        pgvector's `vec`) for the memories just imported with a vector, in the import's
        transaction: the next start of the embedder finds them indexed and keeps them."""
        embedding, mid = columns.index("embedding"), columns.index("id")
        found = [(row[mid], decode_vector(row[embedding])) for row in rows if row[embedding]]
        if not found or vectors.recorded is None:
            return
        if not vectors.ready:
            # Without the means to index here (SQLite without sqlite-vec), the embedder's
            # start builds the index from the stored vectors instead.
            vectors.ready = await self._ready_imported_vectors(db, vectors.recorded[1])
            if not vectors.ready:
                return
        await self._index_vectors(db, found)

    async def _ready_imported_vectors(self, db: Connection, dimensions: int) -> bool:
        """Make the vector index ready for imported vectors; False where it cannot be."""
        await self._prepare_vectors(db, dimensions, reset=False)
        return True

    async def _index_imported(
        self, db: Connection, table: str, columns: tuple[str, ...], rows: list[Any]
    ) -> None:
        """The search indexes an adapter keeps beside the rows, for rows just imported."""
        kind = {"messages": "message", "memories": "memory"}.get(table)
        if kind is not None and rows:
            text = columns.index("text")
            await self._count_terms(db, kind, [row[text] for row in rows])
        if table == "segments":
            sid, title, summary = (columns.index(c) for c in ("id", "title", "summary"))
            for row in rows:
                if row[summary]:
                    await self._index_segment(db, row[sid], f"{row[title]}\n{row[summary]}")

    async def table_counts(self) -> dict[str, int]:
        """The rows of each portable table (a migration's first check), of one snapshot."""
        async with self._reading() as db:
            return {
                table: int((await _rows(db, f"SELECT count(*) FROM {table}", ()))[0][0])
                for table, _, _ in PORTABLE_TABLES
            }

    async def continuum_digests(self) -> dict[tuple[str, str], str]:
        """A SHA-256 of each continuum's content, by (user, continuum): its own row (its
        counts and last turn), its settings, turn records, segments and messages (every
        column but the messages' ids), in order. And by (user, "") one of each user's
        rows outside any continuum: their token digest, documents, reminders and
        memories (vectors and use counts too). All of one snapshot."""
        continuum = (
            "SELECT created_at, history_start, message_count, last_turn_at, last_message_id"
            " FROM continuums WHERE owner = ? AND id = ?",
            "SELECT settings FROM continuum_settings WHERE owner = ? AND continuum_id = ?",
            "SELECT id, status, started_at, record FROM turns"
            f" WHERE owner = ? AND continuum_id = ? ORDER BY {self._TURN_ORDER}",
            "SELECT id, started_at, ended_at, turn_count, title, first_seq, summary"
            " FROM segments WHERE owner = ? AND continuum_id = ? ORDER BY id",
            "SELECT seq, turn_id, role, content, text, created_at FROM messages"
            " WHERE owner = ? AND continuum_id = ? ORDER BY seq",
        )
        own = (
            "SELECT token_hash, created_at FROM users WHERE name = ?",
            "SELECT label, content, updated_at FROM documents WHERE owner = ?",
            "SELECT id, text, due_at, created_at, completed_at, origin FROM reminders"
            " WHERE owner = ? ORDER BY id",
            "SELECT id, text, created_at, expires_at, importance, source_segment, uses,"
            " embedding FROM memories WHERE owner = ? ORDER BY id",
        )
        digests: dict[tuple[str, str], str] = {}
        async with self._reading() as db:
            for owner, cid in await _rows(db, "SELECT owner, id FROM continuums", ()):
                digests[(str(owner), str(cid))] = await _digest(db, continuum, (owner, cid))
            owners = await _rows(
                db,
                "SELECT name FROM users UNION SELECT owner FROM documents"
                " UNION SELECT owner FROM reminders UNION SELECT owner FROM memories",
                (),
            )
            for (owner,) in owners:
                digests[(str(owner), "")] = await _digest(db, own, (owner,))
        return dict(sorted(digests.items()))

    async def users(self) -> list[User]:
        rows = await self._read(f"SELECT name, created_at FROM users ORDER BY name{self._BYTEWISE}")
        return [from_row(User, row) for row in rows]

    async def model_facts(self, name: str) -> tuple[bytes, float] | None:
        rows = await self._read("SELECT facts, fetched_at FROM model_facts WHERE name = ?", (name,))
        return (bytes(rows[0][0]), float(rows[0][1])) if rows else None

    async def put_model_facts(self, name: str, facts: bytes, fetched_at: float) -> None:
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO model_facts (name, facts, fetched_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET facts = excluded.facts,"
                " fetched_at = excluded.fetched_at",
                (name, facts, fetched_at),
            )

    async def user_for_token_hash(self, token_hash: str) -> str | None:
        check_token_hash(token_hash)
        rows = await self._read(
            "SELECT name, token_hash FROM users WHERE token_hash = ?", (token_hash,)
        )
        # The lookup is by digest (it reveals nothing of the token); the final compare is
        # constant-time all the same.
        for name, stored in rows:
            if hmac.compare_digest(str(stored), token_hash):
                return str(name)
        return None
