"""The PostgreSQL adapter (asyncpg): for daemon replicas and more than one machine.

asyncpg rather than psycopg 3: it is asyncio-native (Frontmind pins anyio's asyncio
backend), speaks the binary protocol with prepared statements cached per connection, and
its pool and per-query cancellation are what the per-turn reads need to stay at a few
milliseconds on loopback.

- Every write is one transaction, shielded from cancellation from BEGIN to COMMIT, as
  in the SQLite adapter: a cancelled caller never leaves half a turn.
- Turns of one continuum are serialised across replicas by `continuum_lease`: a
  session-level advisory lock on a connection held for the turn. A replica that dies
  loses its session, and PostgreSQL releases the lock by itself.
- Full-text search uses a stored tsvector and a GIN index; ranking follows the same
  contract as SQLite's (relevance, weighted by importance and recency for memories).
"""

from __future__ import annotations

import functools
import hmac
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar

import anyio
import anyio.lowlevel
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
    InvalidInput,
    NotFound,
    SchemaTooNew,
    StorageUnavailable,
    UnknownContinuum,
    UserExists,
)
from ._fts import (
    COUNT_CAP,
    MAX_SELECTIVE_TERMS,
    ROW_BUDGET,
    matched_terms,
    memory_score,
    query_terms,
)
from ._jobs import SEGMENT_SUMMARY, job_from_row, job_key, segment_job_payload
from ._pg_schema import PG_MIGRATIONS, PG_SCHEMA_VERSION
from ._records import (
    ContextSearch,
    Continuum,
    ContinuumModel,
    Document,
    Job,
    JobUsage,
    Memory,
    MemoryHit,
    Message,
    MessageHit,
    Passage,
    Reminder,
    Segment,
    SegmentDigest,
    TurnRecord,
    TurnUsage,
    TurnWrite,
    User,
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
from ._validation import (
    DEFAULT_USER,
    MAX_DOCUMENT_CHARS,
    check_continuum_id,
    check_label,
    check_row_id,
    check_text,
    check_token_hash,
    check_user_name,
    to_epoch,
)

try:  # an optional dependency: `pip install frontmind[postgres]`
    import asyncpg
except ImportError:  # pragma: no cover - exercised only without the extra
    asyncpg = None

__all__ = ["PostgresStorage"]

P = ParamSpec("P")
T = TypeVar("T")

_CONTINUUM = (
    "SELECT id, created_at, history_start, message_count, last_turn_at, last_message_id"
    " FROM continuums"
)
_REMINDER = "SELECT id, text, due_at, created_at, completed_at, origin FROM reminders"
_MEMORY = "SELECT m.id, m.text, m.created_at, m.expires_at, m.importance, m.source_segment, m.uses"
_SEGMENT = (
    "SELECT id, continuum_id, started_at, ended_at, turn_count, title, first_seq, summary"
    " FROM segments"
)
_JOB = (
    "SELECT id, owner, kind, continuum_id, payload, state, attempts, next_at, claimed_at,"
    " last_error, created_at, finished_at, record FROM jobs"
)
_SEARCH = (
    "SELECT id, owner, continuum_id, query, state, requested_at, attempts, claimed_at,"
    " finished_at, turns_left, passages, error FROM searches"
)

_model_decoder = msgspec.json.Decoder(ContinuumModel)


def _translated(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Driver and server errors leave the adapter as `StorageUnavailable`, cause chained."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            raise StorageUnavailable(f"{fn.__name__} failed: {exc}") from exc

    return wrapper


async def _insert_memory(
    db: Any, user: str, text: str, created: float, expires: float | None, importance: float
) -> int:
    memory_id = await db.fetchval(
        "INSERT INTO memories (owner, text, created_at, expires_at, importance)"
        " VALUES ($1, $2, $3, $4, $5) RETURNING id",
        user,
        text,
        created,
        expires,
        importance,
    )
    await _count_terms(db, "memory", [text])
    return int(memory_id)


async def _count_terms(db: Any, kind: str, texts: list[str]) -> None:
    """Keep each word's document count, in the writing transaction. Rows are upserted in
    word order, so concurrent writers lock shared words in the same order (no deadlock)."""
    await db.execute(
        "INSERT INTO term_stats (kind, term, docs)"
        " SELECT $1, w, count(*) FROM ("
        "  SELECT DISTINCT d.n, unnest(tsvector_to_array(to_tsvector('simple', d.t))) AS w"
        "  FROM unnest($2::text[]) WITH ORDINALITY AS d(t, n)"
        " ) words GROUP BY w ORDER BY w"
        " ON CONFLICT (kind, term) DO UPDATE SET docs = term_stats.docs + excluded.docs",
        kind,
        texts,
    )


async def _uncount_terms(db: Any, kind: str, texts: list[str]) -> None:
    """The reverse of `_count_terms`, for deleted rows (in the deleting transaction)."""
    if not texts:
        return
    await db.execute(
        "UPDATE term_stats t SET docs = t.docs - c.n FROM ("
        "  SELECT w, count(*) AS n FROM ("
        "   SELECT DISTINCT d.n, unnest(tsvector_to_array(to_tsvector('simple', d.t))) AS w"
        "   FROM unnest($2::text[]) WITH ORDINALITY AS d(t, n)"
        "  ) words GROUP BY w"
        " ) c WHERE t.kind = $1 AND t.term = c.w",
        kind,
        texts,
    )


def _plan_cte(kind: Literal["memory", "message"]) -> str:
    """`plan`, a CTE of one row (none if no word occurs at all): the search plan of the
    words in $1 (text[]), made in SQL exactly as `search_plan` makes it in Python
    (storage/_fts.py), so that the plan and the search are one statement, one round
    trip. `ranked`: all chosen words are rare enough to rank by; `terms`: the chosen
    words, rarest first (the query's order among equals); `q`: their OR as a tsquery
    (the words are \\w+ words from `query_terms`: no tsquery operator gets through).

    The rarest word is always chosen; after it, words are taken while each is rarer than
    COUNT_CAP and their rows together stay within ROW_BUDGET (counts are capped at
    COUNT_CAP and sorted, so that is a prefix). If even the rarest is common, every
    present word (at most MAX_SELECTIVE_TERMS) is matched, unranked."""
    return (
        "words AS ("
        f" SELECT w.term, w.n, least(s.docs, {COUNT_CAP}) AS docs,"
        f"  row_number() OVER (ORDER BY least(s.docs, {COUNT_CAP}), w.n) AS i"
        " FROM unnest($1::text[]) WITH ORDINALITY AS w(term, n)"
        f" JOIN term_stats s ON s.kind = '{kind}' AND s.term = w.term WHERE s.docs > 0"
        "), selective AS ("
        "  SELECT term, docs, i, sum(docs) OVER (ORDER BY i) AS rows_so_far FROM words"
        f"  WHERE i <= {MAX_SELECTIVE_TERMS}"
        "), plan AS ("
        f" SELECT h.docs < {COUNT_CAP} AS ranked, array_agg(c.term ORDER BY c.i) AS terms,"
        "  to_tsquery('simple', string_agg(c.term, ' | ' ORDER BY c.i)) AS q"
        " FROM selective h JOIN selective c ON h.i = 1"
        f"  AND (h.docs >= {COUNT_CAP} OR c.i = 1"
        f"   OR (c.docs < {COUNT_CAP} AND c.rows_so_far <= {ROW_BUDGET}))"
        " GROUP BY h.docs)"
    )


def _lease_key(user: str, continuum_id: str) -> int:
    """A stable signed 64-bit advisory-lock key for a user's continuum (FNV-1a of the
    pair: Python's own hash() differs between processes)."""
    value = 0xCBF29CE484222325
    # Neither a user name nor a continuum id can hold "/": the text is unambiguous.
    for byte in f"frontmind:{user}/{continuum_id}".encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


async def _migrate(conn: Any, url: str) -> int:
    """Apply pending migrations in order, under an advisory lock so that replicas
    starting together do not race; returns the schema version afterwards."""
    await conn.execute("SELECT pg_advisory_lock(7355608)")
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        current = await conn.fetchval("SELECT max(version) FROM schema_version") or 0
        if current > PG_SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the database has schema version {current}, but this Frontmind understands "
                f"only up to {PG_SCHEMA_VERSION}: upgrade Frontmind or use another database"
            )
        for version, script in PG_MIGRATIONS:
            if version <= current:
                continue
            async with conn.transaction():
                await conn.execute(script)
                await conn.execute("DELETE FROM schema_version")
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", version)
            current = version
        return int(current)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(7355608)")


class PostgresStorage:
    """Storage in a PostgreSQL database. Open with `await PostgresStorage.open(url)`."""

    shared = True  # other processes may write: the conversation re-checks before a turn

    def __init__(self, url: str, pool: Any, leases: Any, segment_gap: float) -> None:
        self.url = url
        self._pool = pool
        self._leases = leases
        self._segment_gap = segment_gap
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        segment_gap: float = 1800.0,
        max_connections: int = 10,
        max_leases: int = 32,
    ) -> PostgresStorage:
        """Connect (creating and migrating the schema as needed).

        Queries share a pool of `max_connections`. A running turn holds one more
        connection for its lease (a session lock), from a pool of its own of
        `max_leases`: a turn waiting for its lease must never hold a connection that
        the running turns need for their reads and commits. One replica uses at most
        `max_connections + max_leases` server connections.
        """
        if asyncpg is None:
            raise StorageUnavailable(
                "PostgreSQL storage needs the asyncpg package: pip install 'frontmind[postgres]'"
            )
        shown = _redact(url)
        try:
            pool = await asyncpg.create_pool(
                url, min_size=1, max_size=max_connections, command_timeout=60
            )
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as exc:
            raise StorageUnavailable(f"cannot connect to the database at {shown}: {exc}") from exc
        leases = None
        try:
            async with pool.acquire() as conn:
                await _migrate(conn, shown)
            leases = await asyncpg.create_pool(url, min_size=0, max_size=max_leases)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await pool.close()
            if isinstance(exc, (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
                raise StorageUnavailable(f"cannot migrate the database at {shown}: {exc}") from exc
            raise
        return cls(url, pool, leases, segment_gap)

    async def __aenter__(self) -> PostgresStorage:
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
            await self._leases.close()
            await self._pool.close()

    async def schema_version(self) -> int:
        return int(await self._pool.fetchval("SELECT max(version) FROM schema_version"))

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Any]:
        """One write transaction, shielded from cancellation from BEGIN to COMMIT."""
        if self._closed:
            raise StorageUnavailable("the storage is closed")
        await anyio.lowlevel.checkpoint_if_cancelled()  # a caller cancelled already writes nothing
        with anyio.CancelScope(shield=True):
            async with self._pool.acquire() as conn, conn.transaction():
                yield conn

    @asynccontextmanager
    async def continuum_lease(self, user: str, continuum_id: str) -> AsyncIterator[None]:
        """Hold the continuum's turn lease (across every replica) for the block.

        Waiters are served in arrival order (PostgreSQL queues lock requests). The lock
        is tied to the connection's session: a replica that dies releases it at once.
        """
        check_user_name(user)
        check_continuum_id(continuum_id)
        key = _lease_key(user, continuum_id)
        async with self._leases.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", key)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await conn.execute("SELECT pg_advisory_unlock($1)", key)

    # -- continuums and turns -----------------------------------------------------------

    @_translated
    async def continuum_model(self, user: str, continuum_id: str) -> ContinuumModel:
        check_user_name(user)
        check_continuum_id(continuum_id)
        raw = await self._pool.fetchval(
            "SELECT settings FROM continuum_settings WHERE owner = $1 AND continuum_id = $2",
            user,
            continuum_id,
        )
        return ContinuumModel() if raw is None else _model_decoder.decode(raw)

    @_translated
    async def set_continuum_model(
        self, user: str, continuum_id: str, settings: ContinuumModel
    ) -> None:
        check_user_name(user)
        check_continuum_id(continuum_id)
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO continuum_settings (owner, continuum_id, settings)"
                " VALUES ($1, $2, $3)"
                " ON CONFLICT (owner, continuum_id) DO UPDATE SET settings = excluded.settings",
                user,
                continuum_id,
                msgspec.json.encode(settings),
            )

    @_translated
    async def continuum(self, user: str, continuum_id: str) -> Continuum:
        check_user_name(user)
        check_continuum_id(continuum_id)
        row = await self._pool.fetchrow(
            f"{_CONTINUUM} WHERE owner = $1 AND id = $2", user, continuum_id
        )
        if row is None:
            raise UnknownContinuum(f"no continuum {continuum_id!r}")
        return Continuum(*row)

    @_translated
    async def continuums(
        self, user: str, *, limit: int = -1, after: tuple[float, str] | None = None
    ) -> list[Continuum]:
        # The user's continuums, most recently active first; `after` is the (activity, id)
        # of the last one seen.
        check_user_name(user)
        activity = "COALESCE(last_turn_at, created_at)"
        where, args = "", []  # type: tuple[str, list[Any]]
        if after is not None:
            where = f" AND ({activity} < $3 OR ({activity} = $3 AND id > $4))"
            args = [after[0], after[1]]
        rows = await self._pool.fetch(
            f"{_CONTINUUM} WHERE owner = $2{where} ORDER BY {activity} DESC, id LIMIT $1",
            None if limit < 0 else limit,
            user,
            *args,
        )
        return [Continuum(*row) for row in rows]

    @_translated
    async def usage_by_continuum(
        self, user: str, ids: list[str]
    ) -> dict[str, tuple[int, TurnUsage]]:
        check_user_name(user)
        if not ids:
            return {}
        fields = msgspec.structs.fields(TurnUsage)
        sums = ", ".join(
            f"SUM((convert_from(record, 'UTF8')::jsonb #>> '{{usage,{f.name}}}')::bigint)"
            for f in fields
        )
        rows = await self._pool.fetch(
            f"SELECT continuum_id, COUNT(*), {sums} FROM turns"
            " WHERE owner = $1 AND continuum_id = ANY($2::text[]) GROUP BY continuum_id",
            user,
            ids,
        )
        return {r[0]: (int(r[1]), TurnUsage(*(int(v or 0) for v in r[2:]))) for r in rows}

    @_translated
    async def delete_continuum(self, user: str, continuum_id: str) -> None:
        check_user_name(user)
        check_continuum_id(continuum_id)
        async with self._transaction() as db:
            texts = await db.fetch(
                "DELETE FROM messages WHERE owner = $1 AND continuum_id = $2 RETURNING text",
                user,
                continuum_id,
            )
            # The per-word counts drive search plans: they must not count deleted rows.
            await _uncount_terms(db, "message", [r[0] for r in texts])
            for table in ("segments", "turns", "continuum_settings", "searches"):
                await db.execute(
                    f"DELETE FROM {table} WHERE owner = $1 AND continuum_id = $2",
                    user,
                    continuum_id,
                )
            # Last (the others refer to it); none deleted: the transaction rolls back.
            gone = await db.fetchval(
                "DELETE FROM continuums WHERE owner = $1 AND id = $2 RETURNING id",
                user,
                continuum_id,
            )
            if gone is None:
                raise UnknownContinuum(f"no continuum {continuum_id!r}")

    async def _messages(
        self, user: str, continuum_id: str, start: int, limit: int = -1
    ) -> list[Message]:
        rows = await self._pool.fetch(
            "SELECT role, content, seq, turn_id, created_at FROM messages"
            " WHERE owner = $1 AND continuum_id = $2 AND seq >= $3 ORDER BY seq LIMIT $4",
            user,
            continuum_id,
            start,
            None if limit < 0 else limit,
        )
        decode = content_decoder.decode
        return [Message(r[0], decode(r[1]), r[2], r[3], r[4]) for r in rows]

    @_translated
    async def history(
        self, user: str, continuum_id: str, *, missing_ok: bool = False
    ) -> list[Message]:
        check_user_name(user)
        check_continuum_id(continuum_id)
        start = await self._pool.fetchval(
            "SELECT history_start FROM continuums WHERE owner = $1 AND id = $2",
            user,
            continuum_id,
        )
        if start is None:
            if missing_ok:
                return []
            raise UnknownContinuum(f"no continuum {continuum_id!r}")
        return await self._messages(user, continuum_id, int(start))

    @_translated
    async def all_messages(
        self, user: str, continuum_id: str, *, limit: int = -1, after: int = -1
    ) -> list[Message]:
        await self.continuum(user, continuum_id)
        return await self._messages(user, continuum_id, after + 1, limit)

    @_translated
    async def commit_turn(self, user: str, write: TurnWrite) -> bool:
        check_user_name(user)
        record = write.record
        rows = check_write(write)
        cid = record.continuum_id
        async with self._transaction() as db:
            done = await db.fetchval(
                "SELECT 1 FROM turns WHERE id = $1 AND status = 'completed'", record.turn_id
            )
            if done is not None:
                return False  # a retried commit of a turn already stored: nothing to write
            await db.execute(
                "INSERT INTO continuums (owner, id, created_at) VALUES ($1, $2, $3)"
                " ON CONFLICT (owner, id) DO NOTHING",
                user,
                cid,
                record.started_at,
            )
            # The row lock orders concurrent commits of one continuum (from any replica).
            base = await db.fetchval(
                "SELECT message_count FROM continuums WHERE owner = $1 AND id = $2 FOR UPDATE",
                user,
                cid,
            )
            inserted = await db.fetchval(
                # It replaces the turn's provisional record (written when it started).
                "INSERT INTO turns (id, owner, continuum_id, status, started_at, record)"
                " VALUES ($1, $2, $3, $4, $5, $6)"
                " ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record"
                " WHERE turns.status != 'completed' AND turns.owner = excluded.owner RETURNING 1",
                record.turn_id,
                user,
                cid,
                record.status,
                record.started_at,
                msgspec.json.encode(record),
            )
            if inserted is None:
                return False  # a retried commit of a turn already stored
            await db.executemany(
                "INSERT INTO messages"
                " (owner, continuum_id, seq, turn_id, role, content, text, created_at)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [
                    (user, cid, base + i, record.turn_id, role, content, text, at)
                    for i, (role, content, text, at) in enumerate(rows)
                ],
            )
            await _count_terms(db, "message", [text for _, _, text, _ in rows])
            await self._extend_segment(db, user, cid, record, base, write.history_start)
            await self._apply_effects(db, user, write.effects)
            # Each committed turn counts the continuum's finished searches down (one
            # statement: the two parts touch different rows).
            await db.execute(
                "WITH gone AS (DELETE FROM searches"
                "  WHERE owner = $1 AND continuum_id = $2 AND turns_left <= 1)"
                " UPDATE searches SET turns_left = turns_left - 1"
                " WHERE owner = $1 AND continuum_id = $2 AND turns_left > 1",
                user,
                cid,
            )
            await db.execute(
                "UPDATE continuums SET message_count = $1, last_turn_at = $2,"
                " last_message_id = $3, history_start = COALESCE($4, history_start)"
                " WHERE owner = $5 AND id = $6",
                base + len(rows),
                record.finished_at,
                record.message_id,
                write.history_start,
                user,
                cid,
            )
        return True

    async def _apply_effects(self, db: Any, user: str, effects: tuple[Effect, ...]) -> None:
        """The writes a turn's tools staged, inside the turn's transaction, as the turn's
        user: what they add is that user's, and they complete only that user's reminders."""
        for effect in effects:
            match effect:
                case AddReminder(text=text, due_at=due, created_at=created, origin=origin):
                    await db.execute(
                        "INSERT INTO reminders (owner, text, due_at, created_at, origin)"
                        " VALUES ($1, $2, $3, $4, $5)",
                        user,
                        text,
                        due,
                        created,
                        origin,
                    )
                case CompleteReminder(reminder_id=reminder_id, at=at):
                    await db.execute(
                        "UPDATE reminders SET completed_at = $1"
                        " WHERE owner = $2 AND id = $3 AND completed_at IS NULL",
                        at,
                        user,
                        reminder_id,
                    )
                case AddMemory(text=text, importance=importance, replaces=int() as memory_id):
                    # The same memory said again: updated in place, as a summary's is.
                    await db.execute(
                        "UPDATE memories SET text = $1,"
                        " importance = greatest(importance, $2) WHERE owner = $3 AND id = $4",
                        text,
                        importance,
                        user,
                        memory_id,
                    )
                    await _count_terms(db, "memory", [text])
                case AddMemory(
                    text=text, importance=importance, created_at=created, expires_at=expires
                ):
                    await _insert_memory(db, user, text, created, expires, importance)

    async def _extend_segment(
        self,
        db: Any,
        user: str,
        cid: str,
        record: TurnRecord,
        first_seq: int,
        history_start: int | None,
    ) -> None:
        last = await db.fetchrow(
            "SELECT id, ended_at, first_seq FROM segments WHERE owner = $1 AND continuum_id = $2"
            " ORDER BY ended_at DESC LIMIT 1",
            user,
            cid,
        )
        if last is not None and continues(
            record, last[1], last[2], history_start, self._segment_gap
        ):
            await db.execute(
                "UPDATE segments SET ended_at = $1, turn_count = turn_count + 1 WHERE id = $2",
                record.finished_at,
                last[0],
            )
            return
        if last is not None:
            # The turn closes the previous segment: its summary job is due, written in
            # this transaction so that it survives whatever happens next.
            await db.execute(
                "INSERT INTO jobs (owner, kind, continuum_id, payload, state, next_at,"
                " created_at, lease_key) VALUES ($1, $2, $3, $4, 'pending', $5, $5, $6)",
                user,
                SEGMENT_SUMMARY,
                cid,
                segment_job_payload(int(last[0])).encode(),
                record.finished_at,
                _lease_key(user, cid),
            )
        await db.execute(
            "INSERT INTO segments"
            " (owner, continuum_id, started_at, ended_at, turn_count, title, first_seq)"
            " VALUES ($1, $2, $3, $4, 1, $5, $6)",
            user,
            cid,
            record.started_at,
            record.finished_at,
            segment_title(record.user_text),
            first_seq,
        )

    @_translated
    async def record_turn(self, user: str, record: TurnRecord) -> None:
        check_user_name(user)
        check_record(record)
        if record.status == "completed":
            raise InvalidInput("completed turns are stored with commit_turn, with their messages")
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO continuums (owner, id, created_at) VALUES ($1, $2, $3)"
                " ON CONFLICT (owner, id) DO NOTHING",
                user,
                record.continuum_id,
                record.started_at,
            )
            await db.execute(
                "INSERT INTO turns (id, owner, continuum_id, status, started_at, record)"
                " VALUES ($1, $2, $3, $4, $5, $6)"
                " ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record"
                " WHERE turns.status != 'completed' AND turns.owner = excluded.owner",
                record.turn_id,
                user,
                record.continuum_id,
                record.status,
                record.started_at,
                msgspec.json.encode(record),
            )

    @_translated
    async def turns(
        self,
        user: str,
        continuum_id: str | None = None,
        *,
        limit: int = 100,
        before: tuple[float, str] | None = None,
    ) -> list[TurnRecord]:
        check_user_name(user)
        where: list[str] = ["owner = $2"]
        args: list[Any] = [limit, user]
        if continuum_id is not None:
            await self.continuum(user, continuum_id)
            args.append(continuum_id)
            where.append(f"continuum_id = ${len(args)}")
        if before is not None:
            args += [before[0], before[1]]
            at, turn = f"${len(args) - 1}", f"${len(args)}"
            where.append(
                f"(started_at < {at} OR (started_at = {at}"
                f" AND ord < (SELECT ord FROM turns WHERE id = {turn})))"
            )
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._pool.fetch(
            f"SELECT record FROM turns{clause} ORDER BY started_at DESC, ord DESC LIMIT $1",
            *args,
        )
        return [record_decoder.decode(row[0]) for row in reversed(rows)]

    @_translated
    async def recent_segments(
        self, user: str, continuum_id: str, *, limit: int = 10
    ) -> list[Segment]:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = await self._pool.fetch(
            f"{_SEGMENT} WHERE owner = $1 AND continuum_id = $2 ORDER BY ended_at DESC LIMIT $3",
            user,
            continuum_id,
            limit,
        )
        return [Segment(*row) for row in reversed(rows)]

    @_translated
    async def segment(self, user: str, segment_id: int) -> Segment:
        check_user_name(user)
        check_row_id(segment_id, "segment id")
        row = await self._pool.fetchrow(
            f"{_SEGMENT} WHERE owner = $1 AND id = $2", user, segment_id
        )
        if row is None:
            raise NotFound(f"no segment #{segment_id}")
        return Segment(*row)

    @_translated
    async def segment_messages(self, user: str, segment_id: int) -> list[Message]:
        segment = await self.segment(user, segment_id)
        end = await self._pool.fetchval(
            "SELECT min(first_seq) FROM segments"
            " WHERE owner = $1 AND continuum_id = $2 AND first_seq > $3",
            user,
            segment.continuum_id,
            segment.first_seq,
        )
        messages = await self._messages(user, segment.continuum_id, segment.first_seq)
        return [m for m in messages if end is None or m.seq < end]

    @_translated
    async def search_segments(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[Segment]:
        check_user_name(user)
        if limit < 1:
            return []
        terms = query_terms(query)
        if not terms:
            return []
        scope, args = " AND s.owner = $3", [" | ".join(terms), limit, user]
        if continuum_id is not None:
            check_continuum_id(continuum_id)
            scope += " AND s.continuum_id = $4"
            args.append(continuum_id)
        rows = await self._pool.fetch(
            "SELECT s.id, s.continuum_id, s.started_at, s.ended_at, s.turn_count, s.title,"
            " s.first_seq, s.summary FROM segments s, to_tsquery('simple', $1) q"
            f" WHERE s.summary != '' AND s.tsv @@ q{scope}"
            " ORDER BY ts_rank(s.tsv, q) DESC, s.id DESC LIMIT $2",
            *args,
        )
        return [Segment(*row) for row in rows]

    # -- background jobs ----------------------------------------------------------------------

    @_translated
    async def enqueue_job(
        self, user: str, kind: str, continuum_id: str, payload: str, *, now: float | None = None
    ) -> Job:
        check_user_name(user)
        check_continuum_id(continuum_id)
        at = time.time() if now is None else now
        async with self._transaction() as db:
            job_id = await db.fetchval(
                "INSERT INTO jobs (owner, kind, continuum_id, payload, state, next_at,"
                " created_at, lease_key) VALUES ($1, $2, $3, $4, 'pending', $5, $5, $6)"
                " RETURNING id",
                user,
                kind,
                continuum_id,
                payload.encode(),
                at,
                _lease_key(user, continuum_id),
            )
        return Job(int(job_id), user, kind, continuum_id, payload, "pending", 0, at, None, None, at)

    @_translated
    async def claim_job(
        self, *, now: float, lease_seconds: float, exclude: Sequence[tuple[str, str]] = ()
    ) -> Job | None:
        """One due job, claimed atomically: SKIP LOCKED lets every replica's worker claim
        a different one at the same moment, none waiting on another's row lock.

        A job whose continuum has a turn running or waiting on any replica is left for
        later: that turn holds (or waits for) the continuum's lease, an advisory lock
        every session sees in pg_locks (a bigint key shows as classid, its high half,
        and objid, its low half, with objsubid 1)."""
        async with self._transaction() as db:
            row = await db.fetchrow(
                "UPDATE jobs SET state = 'running', claimed_at = $1, attempts = attempts + 1"
                " WHERE id = (SELECT j.id FROM jobs j"
                "  WHERE ((j.state = 'pending' AND j.next_at <= $1)"
                "   OR (j.state = 'running' AND j.claimed_at <= $2))"
                "   AND NOT (j.owner || ':' || j.continuum_id = ANY($3::text[]))"
                "   AND NOT EXISTS (SELECT 1 FROM pg_locks l"
                "    WHERE l.locktype = 'advisory' AND l.objsubid = 1"
                "     AND l.database = (SELECT oid FROM pg_database"
                "      WHERE datname = current_database())"
                "     AND l.classid::bigint = (j.lease_key >> 32) & 4294967295"
                "     AND l.objid::bigint = j.lease_key & 4294967295)"
                "  ORDER BY j.next_at, j.id LIMIT 1 FOR UPDATE OF j SKIP LOCKED)"
                " RETURNING id, owner, kind, continuum_id, payload, state, attempts, next_at,"
                " claimed_at, last_error, created_at, finished_at, record",
                now,
                now - lease_seconds,
                [job_key(user, cid) for user, cid in exclude],
            )
        return None if row is None else job_from_row(tuple(row))

    async def _still_claimed(self, db: Any, job: Job) -> bool:
        found = await db.fetchval(
            "SELECT 1 FROM jobs WHERE id = $1 AND state = 'running' AND claimed_at = $2 FOR UPDATE",
            job.id,
            job.claimed_at,
        )
        return found is not None

    @_translated
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
                    "UPDATE segments SET title = $1, summary = $2 WHERE owner = $3 AND id = $4",
                    digest.title,
                    digest.summary,
                    job.user,
                    digest.segment_id,
                )
                for proposal in proposals:
                    if proposal.update_id is not None:
                        await db.execute(
                            "UPDATE memories SET text = $1,"
                            " importance = greatest(importance, $2) WHERE owner = $3 AND id = $4",
                            proposal.text,
                            proposal.importance,
                            job.user,
                            proposal.update_id,
                        )
                        await _count_terms(db, "memory", [proposal.text])
                    else:
                        memory_id = await _insert_memory(
                            db, job.user, proposal.text, now, None, proposal.importance
                        )
                        await db.execute(
                            "UPDATE memories SET source_segment = $1 WHERE id = $2",
                            digest.segment_id,
                            memory_id,
                        )
            await db.execute(
                "UPDATE jobs SET state = 'done', finished_at = $1, record = $2,"
                " last_error = NULL WHERE id = $3",
                now,
                None if usage is None else msgspec.json.encode(usage),
                job.id,
            )
        return True

    @_translated
    async def fail_job(self, job: Job, *, now: float, error: str, retry_at: float | None) -> bool:
        """Record the failure; retried at `retry_at`, or given up when it is None."""
        async with self._transaction() as db:
            if not await self._still_claimed(db, job):
                return False
            await db.execute(
                "UPDATE jobs SET state = $1, next_at = $2, last_error = $3, finished_at = $4"
                " WHERE id = $5",
                "pending" if retry_at is not None else "failed",
                retry_at if retry_at is not None else job.next_at,
                error[:2000],
                None if retry_at is not None else now,
                job.id,
            )
        return True

    @_translated
    async def jobs(
        self, user: str, continuum_id: str | None = None, *, limit: int = 1000
    ) -> list[Job]:
        check_user_name(user)
        if continuum_id is None:
            rows = await self._pool.fetch(
                f"{_JOB} WHERE owner = $1 ORDER BY id LIMIT $2", user, limit
            )
        else:
            check_continuum_id(continuum_id)
            rows = await self._pool.fetch(
                f"{_JOB} WHERE owner = $1 AND continuum_id = $2 ORDER BY id LIMIT $3",
                user,
                continuum_id,
                limit,
            )
        return [job_from_row(tuple(row)) for row in rows]

    # -- context searches ---------------------------------------------------------------

    @_translated
    async def request_search(
        self, user: str, continuum_id: str, query: str, *, now: float | None = None
    ) -> ContextSearch:
        check_user_name(user)
        check_continuum_id(continuum_id)
        check_query(query)
        at = time.time() if now is None else now
        async with self._transaction() as db:
            search_id = await db.fetchval(
                "WITH same AS (DELETE FROM searches"
                "  WHERE owner = $1 AND continuum_id = $2 AND query = $3)"
                " INSERT INTO searches (owner, continuum_id, query, state, requested_at)"
                " VALUES ($1, $2, $3, 'pending', $4) RETURNING id",
                user,
                continuum_id,
                query,
                at,
            )
            await db.execute(
                "DELETE FROM searches WHERE owner = $1 AND continuum_id = $2 AND id < ("
                " SELECT min(id) FROM (SELECT id FROM searches"
                "  WHERE owner = $1 AND continuum_id = $2 ORDER BY id DESC LIMIT $3) newest)",
                user,
                continuum_id,
                MAX_SEARCHES,
            )
        return ContextSearch(int(search_id), user, continuum_id, query, "pending", at)

    @_translated
    async def claim_search(self, *, now: float, lease_seconds: float) -> ContextSearch | None:
        """One search, claimed atomically (SKIP LOCKED: replicas claim different ones)."""
        async with self._transaction() as db:
            row = await db.fetchrow(
                "UPDATE searches SET state = 'running', claimed_at = $1, attempts = attempts + 1"
                " WHERE id = (SELECT id FROM searches WHERE state != 'done'"
                "  AND (state = 'pending' OR claimed_at <= $2)"
                "  ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING id, owner, continuum_id, query, state, requested_at, attempts,"
                " claimed_at, finished_at, turns_left, passages, error",
                now,
                now - lease_seconds,
            )
        return None if row is None else search_from_row(tuple(row))

    @_translated
    async def finish_search(
        self,
        search: ContextSearch,
        *,
        now: float,
        passages: Sequence[Passage],
        error: str | None,
        keep_turns: int,
    ) -> bool:
        async with self._transaction() as db:
            done = await db.fetchval(
                "UPDATE searches SET state = 'done', finished_at = $1, turns_left = $2,"
                " passages = $3, error = $4"
                " WHERE id = $5 AND state = 'running' AND claimed_at = $6 RETURNING 1",
                now,
                max(keep_turns, 1),
                encode_passages(passages),
                None if error is None else error[:2000],
                search.id,
                search.claimed_at,
            )
        return done is not None

    @_translated
    async def searches(self, user: str, continuum_id: str) -> list[ContextSearch]:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = await self._pool.fetch(
            f"{_SEARCH} WHERE owner = $1 AND continuum_id = $2 ORDER BY id", user, continuum_id
        )
        return [search_from_row(tuple(row)) for row in rows]

    @_translated
    async def memories_without_vectors(self, *, limit: int = 64) -> list[Memory]:
        rows = await self._pool.fetch(
            f"{_MEMORY} FROM memories m WHERE m.embedding IS NULL ORDER BY m.id LIMIT $1", limit
        )
        return [Memory(*row) for row in rows]

    @_translated
    async def set_memory_vectors(self, vectors: Sequence[tuple[int, Sequence[float]]]) -> None:
        rows = [(encode_vector(v), memory_id) for memory_id, v in vectors]
        async with self._transaction() as db:
            await db.executemany("UPDATE memories SET embedding = $1 WHERE id = $2", rows)

    @_translated
    async def memory_vectors(
        self, user: str, *, now: float | None = None
    ) -> list[tuple[Memory, tuple[float, ...]]]:
        check_user_name(user)
        at = time.time() if now is None else now
        rows = await self._pool.fetch(
            f"{_MEMORY}, m.embedding FROM memories m WHERE m.owner = $1"
            " AND m.embedding IS NOT NULL AND (m.expires_at IS NULL OR m.expires_at > $2)",
            user,
            at,
        )
        return [(Memory(*row[:7]), decode_vector(row[7])) for row in rows]

    @_translated
    async def mark_memories_used(
        self, user: str, memory_ids: Sequence[int], *, times: int = 1
    ) -> None:
        """Count `times` more surfacings of each memory (the `use` term of the ranking)."""
        check_user_name(user)
        check_row_id(times, "times")
        if not memory_ids:
            return
        ids = sorted({check_row_id(i, "memory id") for i in memory_ids})
        async with self._transaction() as db:
            await db.execute(
                "UPDATE memories SET uses = uses + $3 WHERE owner = $1 AND id = ANY($2::bigint[])",
                user,
                ids,
                times,
            )

    # -- reminders ------------------------------------------------------------------------

    @_translated
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
        created = time.time() if now is None else now
        due = add_reminder_effect(text, due_at, now=created, origin=origin).due_at
        async with self._transaction() as db:
            reminder_id = await db.fetchval(
                "INSERT INTO reminders (owner, text, due_at, created_at, origin)"
                " VALUES ($1, $2, $3, $4, $5) RETURNING id",
                user,
                text,
                due,
                created,
                origin,
            )
        return Reminder(int(reminder_id), text, due, created, None, origin)

    @_translated
    async def complete_reminder(
        self, user: str, reminder_id: int, *, now: float | None = None
    ) -> Reminder:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        at = time.time() if now is None else now
        async with self._transaction() as db:
            await db.execute(
                "UPDATE reminders SET completed_at = $1"
                " WHERE owner = $2 AND id = $3 AND completed_at IS NULL",
                at,
                user,
                reminder_id,
            )
            row = await db.fetchrow(f"{_REMINDER} WHERE owner = $1 AND id = $2", user, reminder_id)
        if row is None:
            raise NotFound(f"no reminder #{reminder_id}")
        return Reminder(*row)

    @_translated
    async def reminder(self, user: str, reminder_id: int) -> Reminder:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        row = await self._pool.fetchrow(
            f"{_REMINDER} WHERE owner = $1 AND id = $2", user, reminder_id
        )
        if row is None:
            raise NotFound(f"no reminder #{reminder_id}")
        return Reminder(*row)

    @_translated
    async def active_reminders(self, user: str, *, limit: int = 50) -> list[Reminder]:
        check_user_name(user)
        rows = await self._pool.fetch(
            f"{_REMINDER} WHERE owner = $1 AND completed_at IS NULL"
            " ORDER BY due_at IS NULL, due_at, id LIMIT $2",
            user,
            limit,
        )
        return [Reminder(*row) for row in rows]

    @_translated
    async def reminders_due_between(
        self, user: str, start: datetime, end: datetime
    ) -> list[Reminder]:
        check_user_name(user)
        lo, hi = to_epoch(start, "start"), to_epoch(end, "end")
        if hi < lo:
            raise InvalidInput("the end of the range comes before its start")
        rows = await self._pool.fetch(
            f"{_REMINDER} WHERE owner = $1 AND completed_at IS NULL"
            " AND due_at >= $2 AND due_at < $3 ORDER BY due_at",
            user,
            lo,
            hi,
        )
        return [Reminder(*row) for row in rows]

    @_translated
    async def reminders(
        self, user: str, *, include_completed: bool = False, limit: int = 200, after: int = 0
    ) -> list[Reminder]:
        check_user_name(user)
        open_only = "" if include_completed else " AND completed_at IS NULL"
        rows = await self._pool.fetch(
            f"{_REMINDER} WHERE owner = $1 AND id > $3{open_only} ORDER BY id LIMIT $2",
            user,
            limit,
            after,
        )
        return [Reminder(*row) for row in rows]

    @_translated
    async def delete_reminder(self, user: str, reminder_id: int) -> None:
        check_user_name(user)
        async with self._transaction() as db:
            gone = await db.fetchval(
                "DELETE FROM reminders WHERE owner = $1 AND id = $2 RETURNING id",
                user,
                reminder_id,
            )
        if gone is None:
            raise NotFound(f"no reminder #{reminder_id}")

    # -- memories ---------------------------------------------------------------------------

    @_translated
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
        created = time.time() if now is None else now
        expires = add_memory_effect(text, importance, now=created, expires_at=expires_at).expires_at
        async with self._transaction() as db:
            memory_id = await _insert_memory(db, user, text, created, expires, importance)
        return Memory(memory_id, text, created, expires, importance)

    @_translated
    async def memories(
        self, user: str, *, limit: int = 100, before: int | None = None
    ) -> list[Memory]:
        check_user_name(user)
        rows = await self._pool.fetch(
            f"{_MEMORY} FROM memories m WHERE m.owner = $1 AND ($3::bigint IS NULL OR m.id < $3)"
            " ORDER BY m.id DESC LIMIT $2",
            user,
            limit,
            before,
        )
        return [Memory(*row) for row in rows]

    @_translated
    async def delete_memory(self, user: str, memory_id: int) -> None:
        check_user_name(user)
        async with self._transaction() as db:
            text = await db.fetchval(
                "DELETE FROM memories WHERE owner = $1 AND id = $2 RETURNING text",
                user,
                memory_id,
            )
            if text is None:
                raise NotFound(f"no memory #{memory_id}")
            await _uncount_terms(db, "memory", [text])

    @_translated
    async def search_memories(
        self, user: str, query: str, *, limit: int = 5, now: float | None = None
    ) -> list[MemoryHit]:
        """One round trip: the statement plans from term_stats and searches (a memory
        search is on every turn's path)."""
        check_user_name(user)
        if limit < 1:
            return []
        terms = query_terms(query)
        if not terms:
            return []
        at = time.time() if now is None else now
        found = await self._pool.fetch(
            f"WITH {_plan_cte('memory')}"
            f" {_MEMORY}, CASE WHEN (SELECT ranked FROM plan)"
            "  THEN ts_rank(m.tsv, (SELECT q FROM plan)) ELSE 0 END AS rank,"
            " (SELECT ranked FROM plan), (SELECT terms FROM plan)"
            " FROM memories m WHERE m.tsv @@ (SELECT q FROM plan) AND m.owner = $2"
            " AND (m.expires_at IS NULL OR m.expires_at > $3)"
            " ORDER BY rank DESC, m.id DESC"
            f" LIMIT (SELECT CASE WHEN ranked THEN $4 ELSE {COUNT_CAP} END FROM plan)",
            terms,
            user,
            at,
            limit * 4,
        )
        # memory_score takes a lower-is-better relevance (FTS5's bm25); ts_rank and the
        # count of matched words are higher-is-better, so they go in negated. Every word
        # common (not ranked): the most recent matches, by how many words they hold.
        hits = [
            MemoryHit(
                Memory(*row[:7]),
                memory_score(
                    -row[7] if row[8] else -matched_terms(row[1], list(row[9])),
                    row[4],
                    at - row[2],
                    row[6],
                ),
            )
            for row in found
        ]
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits[:limit]

    @_translated
    async def search_messages(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[MessageHit]:
        """One round trip, as `search_memories`. Ranked: the best matches by ts_rank.
        Every word common: the most recent matches (ranking them would score every row
        of those words), by how many words they hold."""
        check_user_name(user)
        if limit < 1:
            return []
        terms = query_terms(query)
        if not terms:
            return []
        scope, args = " AND m.owner = $3", [terms, limit, user]
        if continuum_id is not None:
            check_continuum_id(continuum_id)
            scope += " AND m.continuum_id = $4"
            args.append(continuum_id)
        rows = await self._pool.fetch(
            f"WITH {_plan_cte('message')}"
            # Like FTS5's snippet(…, 40): a text of up to 40 words whole, else a fragment.
            " SELECT h.continuum_id, h.seq, h.role,"
            " CASE WHEN array_length(regexp_split_to_array(btrim(h.text), '\\s+'), 1) <= 40"
            " THEN h.text ELSE ts_headline('simple', h.text, (SELECT q FROM plan),"
            ' \'StartSel="", StopSel="", MaxWords=40, MinWords=20, MaxFragments=1,'
            ' FragmentDelimiter=" … "\') END,'
            " h.created_at, h.rank, h.text, (SELECT ranked FROM plan), (SELECT terms FROM plan)"
            " FROM ("
            "  SELECT m.continuum_id, m.seq, m.role, m.text, m.created_at, m.id,"
            "   CASE WHEN (SELECT ranked FROM plan)"
            "    THEN ts_rank(m.tsv, (SELECT q FROM plan)) ELSE 0.0::real END AS rank"
            f"  FROM messages m WHERE m.tsv @@ (SELECT q FROM plan){scope}"
            "  ORDER BY rank DESC, m.id DESC"
            f"  LIMIT (SELECT CASE WHEN ranked THEN $2 ELSE {COUNT_CAP} END FROM plan)"
            " ) h ORDER BY h.rank DESC, h.id DESC",
            *args,
        )
        if not rows or rows[0][7]:
            return [MessageHit(r[0], r[1], r[2], r[3], r[4], float(r[5])) for r in rows]
        hits = [
            MessageHit(r[0], r[1], r[2], r[3], r[4], float(matched_terms(r[6], list(r[8]))))
            for r in rows
        ]
        hits.sort(key=lambda hit: hit.score, reverse=True)  # stable: newest first on ties
        return hits[:limit]

    # -- documents ---------------------------------------------------------------------------

    @_translated
    async def put_document(
        self, user: str, label: str, content: str, *, now: float | None = None
    ) -> Document:
        check_user_name(user)
        check_label(label)
        check_text(content, f"document {label!r}", MAX_DOCUMENT_CHARS)
        at = time.time() if now is None else now
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO documents (owner, label, content, updated_at) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (owner, label) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                user,
                label,
                content,
                at,
            )
        return Document(label, content, at)

    @_translated
    async def documents(self, user: str, *, limit: int = -1, after: str = "") -> list[Document]:
        check_user_name(user)
        rows = await self._pool.fetch(
            "SELECT label, content, updated_at FROM documents WHERE owner = $2 AND label > $3"
            " ORDER BY label LIMIT $1",
            None if limit < 0 else limit,
            user,
            after,
        )
        return [Document(*row) for row in rows]

    @_translated
    async def delete_document(self, user: str, label: str) -> None:
        check_user_name(user)
        async with self._transaction() as db:
            gone = await db.fetchval(
                "DELETE FROM documents WHERE owner = $1 AND label = $2 RETURNING 1", user, label
            )
        if gone is None:
            raise NotFound(f"no document {label!r}")

    # -- users --------------------------------------------------------------------------------

    @_translated
    async def add_user(self, name: str, token_hash: str, *, now: float | None = None) -> User:
        check_user_name(name)
        if name == DEFAULT_USER:
            raise InvalidInput(
                f"{DEFAULT_USER!r} is the built-in user (the admin token and tokenless"
                " loopback requests act as it); choose another name"
            )
        check_token_hash(token_hash)
        at = time.time() if now is None else now
        async with self._transaction() as db:
            added = await db.fetchval(
                "INSERT INTO users (name, token_hash, created_at) VALUES ($1, $2, $3)"
                " ON CONFLICT (name) DO NOTHING RETURNING 1",
                name,
                token_hash,
                at,
            )
        if added is None:
            raise UserExists(f"a user named {name!r} already exists")
        return User(name, at)

    @_translated
    async def users(self) -> list[User]:
        rows = await self._pool.fetch("SELECT name, created_at FROM users ORDER BY name")
        return [User(*row) for row in rows]

    @_translated
    async def user_for_token_hash(self, token_hash: str) -> str | None:
        check_token_hash(token_hash)
        rows = await self._pool.fetch(
            "SELECT name, token_hash FROM users WHERE token_hash = $1", token_hash
        )
        # The lookup is by digest (it reveals nothing of the token); the final compare is
        # constant-time all the same.
        for name, stored in rows:
            if hmac.compare_digest(str(stored), token_hash):
                return str(name)
        return None


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in credentials else url
