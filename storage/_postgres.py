"""The PostgreSQL adapter (asyncpg): for daemon replicas and more than one machine.

asyncpg rather than psycopg 3: it is asyncio-native (Frontmind pins anyio's asyncio
backend), speaks the binary protocol with prepared statements cached per connection, and
its pool and per-query cancellation are what the per-turn reads need to stay at a few
milliseconds on loopback.

What the store does is the SQL core's (storage/_sql.py); this module is PostgreSQL's
driver and dialect under it:

- Every write is one transaction on a pooled connection, shielded from cancellation
  from BEGIN to COMMIT, as with SQLite: a cancelled caller never leaves half a turn.
- Replicas write side by side: a row read to be written is locked (FOR UPDATE), and
  jobs and searches are claimed with SKIP LOCKED, each replica a different one.
- Turns of one continuum are serialised across replicas by `continuum_lease`: a
  session-level advisory lock on a connection held for the turn (with its user's key
  shared, which deleting the user takes alone: `user_lease`). A replica that dies
  loses its session, and PostgreSQL releases the lock by itself.
- Full-text search uses a stored tsvector and a GIN index; each word's document count
  (`term_stats`, kept by the writes) plans a search in the search's own statement.
  Ranking follows the same contract as SQLite's (relevance, weighted by importance and
  recency for memories).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, Literal

import anyio
import anyio.lowlevel
import msgspec

from ._exceptions import NotFound, SchemaTooNew, StorageUnavailable
from ._fts import COUNT_CAP, MAX_SELECTIVE_TERMS, ROW_BUDGET, matched_terms
from ._pg_schema import PG_MIGRATIONS, PG_SCHEMA_VERSION
from ._records import MessageHit
from ._sql import MEMORY, UNEXPIRED, Connection, SQLStore
from ._time import moment

try:  # an optional dependency: `pip install '.[postgres]'` from the clone
    import asyncpg
except ImportError:  # pragma: no cover - exercised only without the extra
    asyncpg = None

__all__ = ["PostgresStorage"]

log = logging.getLogger(__name__)

_DRIVER_ERRORS: tuple[type[Exception], ...] = (
    (OSError,) if asyncpg is None else (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
)


async def _keep_session(conn: Any) -> None:
    """The main pool's reset as a connection goes back: nothing beyond what asyncpg
    always does (roll back a transaction left open). Its default sends `RESET ALL`,
    `CLOSE ALL`, `UNLISTEN *` and `pg_advisory_unlock_all()`: one more round trip after
    every read and every write, for session state this pool never keeps (no SET, cursor
    or LISTEN outlives a statement here; the continuum leases' advisory locks live in
    their own pool, which keeps the default)."""


@functools.lru_cache(maxsize=512)
def _numbered(sql: str) -> str:
    """A statement in the SQL core's qmark style with PostgreSQL's numbered parameters
    (`?` → `$1`, `$2`, ...), made once per text. No statement has `?` in a literal."""
    parts = sql.split("?")
    return "".join(f"{part}${n}" for n, part in enumerate(parts[:-1], 1)) + parts[-1]


class _Connection:
    """The SQL core's `Connection` on an asyncpg connection in a transaction."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute_fetchall(self, sql: str, parameters: Sequence[Any]) -> list[Any]:
        rows: list[Any] = await self._conn.fetch(_numbered(sql), *parameters)
        return rows

    async def execute(self, sql: str, parameters: Sequence[Any]) -> None:
        await self._conn.execute(_numbered(sql), *parameters)

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> None:
        await self._conn.executemany(_numbered(sql), parameters)


def _plan_cte(kind: Literal["memory", "message"]) -> str:
    """`plan`, a CTE of one row (none if no word occurs at all): the search plan of the
    words in its parameter (text[]), made in SQL exactly as `search_plan` makes it in
    Python (storage/_fts.py), so that the plan and the search are one statement, one
    round trip. `ranked`: all chosen words are rare enough to rank by; `terms`: the chosen
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
        " FROM unnest(?::text[]) WITH ORDINALITY AS w(term, n)"
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


def _name_digest(user: str) -> str:
    """What a forgotten user's mark keeps of their name: not the name itself."""
    return hashlib.sha256(user.encode()).hexdigest()


def _user_key(user: str) -> int:
    """The user's advisory-lock key: the lease key's hash of a text no continuum's can
    be (a continuum id cannot be empty)."""
    return _lease_key(user, "")


def _turns_key(user: str) -> int:
    """The key every lease of the user's continuums holds shared, and deleting the user
    takes alone (`_user_lease_lock`): the lease key's hash of another text no
    continuum's can be. Not `_user_key`: a turn's commit takes that one shared, and
    would queue behind a delete waiting for it, a delete that waits for the turn."""
    return _lease_key(user, "*")


async def _migrate(conn: Any, url: str, upto: int | None = None) -> int:
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
        # Every pending migration in one transaction: the database is at its old
        # version or at the new one, never between.
        async with conn.transaction():
            for version, script in PG_MIGRATIONS:
                if version <= current or (upto is not None and version > upto):
                    continue
                await conn.execute(script)
                await conn.execute("DELETE FROM schema_version")
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", version)
                current = version
        return int(current)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(7355608)")


_MEMORY_SEARCH = (
    f"WITH {_plan_cte('memory')}"
    f" {MEMORY}, CASE WHEN (SELECT ranked FROM plan)"
    "  THEN ts_rank(m.tsv, (SELECT q FROM plan)) ELSE 0 END AS rank,"
    " (SELECT ranked FROM plan), (SELECT terms FROM plan)"
    " FROM memories m WHERE m.tsv @@ (SELECT q FROM plan) AND m.owner = ?"
    " AND (m.expires_at IS NULL OR m.expires_at > ?)"
    " ORDER BY rank DESC, m.id DESC"
    f" LIMIT (SELECT CASE WHEN ranked THEN ? ELSE {COUNT_CAP} END FROM plan)"
)


class PostgresStorage(SQLStore):
    """Storage in a PostgreSQL database. Open with `await PostgresStorage.open(url)`."""

    shared = True  # other processes may write: the conversation re-checks before a turn
    _ERRORS = _DRIVER_ERRORS
    _TURN_ORDER = "ord"
    _NO_LIMIT = None
    _FOR_UPDATE = " FOR UPDATE"
    _SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
    # Self-conflicting (writers of the record wait for each other), while reads go on.
    _LOCK_VECTOR_MODEL = "LOCK TABLE vector_model IN SHARE ROW EXCLUSIVE MODE"
    # A write's check that the vectors are still its embedder's: a replica changing the
    # embedder (its DELETE of the record) waits for the write, then drops its vectors,
    # instead of dropping the others and leaving the old embedder's written after it.
    _SHARE_VECTOR_MODEL = " FOR SHARE"
    _BYTEWISE = ' COLLATE "C"'  # a database made with en_US.UTF-8 sorts 'about' < 'Bio'
    # A turn of the continuum `j.lease_key` names (a job's, or a running record's) holds
    # (or waits for) the continuum's lease on some replica: an advisory lock every
    # session sees in pg_locks (a bigint key shows as classid, its high half, and
    # objid, its low half, with objsubid 1).
    _LEASED_ELSEWHERE = (
        " AND NOT EXISTS (SELECT 1 FROM pg_locks l"
        " WHERE l.locktype = 'advisory' AND l.objsubid = 1"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND l.classid::bigint = (j.lease_key >> 32) & 4294967295"
        " AND l.objid::bigint = j.lease_key & 4294967295)"
    )

    def __init__(
        self, url: str, pool: Any, leases: Any, segment_gap: float, statement_timeout_s: float
    ) -> None:
        super().__init__(segment_gap)
        self.url = url
        self._pool = pool
        self._leases = leases
        self._pgvector = False  # vector recall through pgvector's HNSW index (else exact)
        self._nearest = _hnsw_nearest(_FULL_DISTANCE)  # the statement for that index
        self._statement_timeout_s = statement_timeout_s

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        segment_gap: float = 1800.0,
        max_connections: int = 10,
        max_leases: int = 32,
        statement_timeout_s: float = 60.0,
        schema_upto: int | None = None,
    ) -> PostgresStorage:
        """Connect (creating and migrating the schema as needed; `schema_upto` stops the
        migrations early: it exists for upgrade fixtures).

        Queries share a pool of `max_connections`. A running turn holds one more
        connection for its lease (a session lock), from a pool of its own of
        `max_leases`: a turn waiting for its lease must never hold a connection that
        the running turns need for their reads and commits. One replica uses at most
        `max_connections + max_leases` server connections.

        A query or write that has no answer within `statement_timeout_s` (one waiting
        for a lock another session holds, a server that stalled) is cancelled and
        fails, saying so; a lease is waited for without a limit.
        """
        if asyncpg is None:
            raise StorageUnavailable(
                "PostgreSQL storage needs the asyncpg package: pip install '.[postgres]'"
                " from the Frontmind clone"
            )
        shown = _redact(url)
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=max_connections,
                command_timeout=statement_timeout_s,
                # The HNSW search's candidate list: at 50,000 memories pgvector's default
                # (40) found 0.88 of the ten nearest, 100 0.95, 150 0.965, 200 0.976,
                # each costing more (bench/postgres.py). A session default, sent when
                # each connection starts: no round trip per search (and nothing resets
                # it: `_keep_session`). A placeholder where pgvector is absent.
                server_settings={"hnsw.ef_search": str(HNSW_EF_SEARCH)},
                reset=_keep_session,
            )
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as exc:
            raise StorageUnavailable(
                f"cannot connect to the database at {shown}: {_unreadable(exc)}"
            ) from (None if isinstance(exc, ValueError) else exc)
        leases = None
        try:
            async with pool.acquire() as conn:
                await _migrate(conn, shown, schema_upto)
            leases = await asyncpg.create_pool(url, min_size=0, max_size=max_leases)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await pool.close()
            if isinstance(exc, (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
                raise StorageUnavailable(f"cannot migrate the database at {shown}: {exc}") from exc
            raise
        return cls(url, pool, leases, segment_gap, statement_timeout_s)

    def _why(self, exc: Exception) -> str:
        if isinstance(exc, TimeoutError):  # asyncpg's has no words
            return (
                f"the database did not answer within {self._statement_timeout_s:g} s"
                " (a lock another session holds, or a server that does not respond)"
            )
        return super()._why(exc)

    async def _close(self) -> None:
        await self._leases.close()
        await self._pool.close()

    async def store_id(self) -> str:
        # The server (its start, to the microsecond, whatever host name reached it), the
        # database and the schema the tables are in (a search_path gives each store of
        # one database its own); every role may read them.
        (row,) = await self._read(
            "SELECT pg_postmaster_start_time()::text, current_database(), current_schema()"
        )
        return f"postgresql:{row[0]}:{row[1]}:{row[2]}"

    async def _fetch(self, sql: str, args: Any) -> list[Any]:
        rows: list[Any] = await self._pool.fetch(_numbered(sql), *args)
        return rows

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[Connection]:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a caller cancelled already writes nothing
        with anyio.CancelScope(shield=True):
            async with self._pool.acquire() as conn, conn.transaction():
                yield _Connection(conn)

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Connection]:
        # One REPEATABLE READ transaction on one connection: every read sees the same
        # snapshot, while replicas go on committing turns beside it.
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield _Connection(conn)

    @asynccontextmanager
    async def _lease_lock(self, user: str, continuum_id: str) -> AsyncIterator[None]:
        """The continuum's advisory lock, from a pool of its own: a turn waiting for its
        lease never holds a connection the running turns need. Waiters are served in
        arrival order (PostgreSQL queues lock requests). Then, in the same statement,
        the user's turns key shared (`_user_lease_lock`)."""
        key, turns = _lease_key(user, continuum_id), _turns_key(user)
        async with self._leases.acquire() as conn:
            await conn.execute(
                "SELECT pg_advisory_lock($1), pg_advisory_lock_shared($2)", key, turns
            )
            try:
                yield
            finally:
                # A session that is gone (the server restarted, the connection was cut)
                # took its locks with it: nothing to release, and the turn's own outcome
                # stands. A live one that failed to unlock (or was given up holding the
                # first lock alone) is reset as it goes back to the pool (this pool's
                # reset releases every advisory lock).
                with anyio.CancelScope(shield=True), suppress(*_DRIVER_ERRORS):
                    await conn.execute(
                        "SELECT pg_advisory_unlock($1), pg_advisory_unlock_shared($2)", key, turns
                    )

    @asynccontextmanager
    async def _user_lease_lock(self, user: str) -> AsyncIterator[None]:
        """The user's turns key alone: granted once no lease of the user's continuums is
        held (every turn of theirs, on every replica, has ended); leases asked for
        meanwhile wait behind it (PostgreSQL queues a request behind a conflicting one
        that waits), and get it after."""
        key = _turns_key(user)
        async with self._leases.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", key)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True), suppress(*_DRIVER_ERRORS):
                    await conn.execute("SELECT pg_advisory_unlock($1)", key)

    async def _after_import(self, db: Connection) -> None:
        # Imported rows kept their ids; a sequence must hand out the ones after them.
        # Forward only: ids it handed out already may be in rows this transaction cannot
        # see (a replica's, not yet committed; a user restored into a live store brings
        # ids below them), and set back to the largest id seen it handed them out again.
        for table in ("messages", "segments", "reminders", "memories", "jobs", "searches"):
            await db.execute(
                f"SELECT setval('{table}_id_seq', imported.next, false)"
                f" FROM (SELECT coalesce(max(id), 0) + 1 AS next FROM {table}) imported,"
                " (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END AS next"
                f" FROM {table}_id_seq) handed WHERE imported.next > handed.next",
                (),
            )

    def _job_columns(self, user: str, continuum_id: str) -> dict[str, object]:
        return {"lease_key": _lease_key(user, continuum_id)}

    def _in_list(self, values: Sequence[Any], sql_type: str) -> tuple[str, Any]:
        return f"= ANY(?::{sql_type}[])", list(values)

    def _json_int(self, column: str, *path: str) -> str:
        return f"({self._json_text(column, *path)})::bigint"

    def _json_text(self, column: str, *path: str) -> str:
        return f"(convert_from({column}, 'UTF8')::jsonb #>> '{{{','.join(path)}}}')"

    async def _forgetting(self, db: Connection, user: str, at: float) -> None:
        """The user's lock, taken alone (turns of theirs on other replicas commit under
        it shared), and a mark of when they were forgotten: a turn that began before it
        and commits after is refused (`_check_remembered`) rather than bring them back."""
        await db.execute("SELECT pg_advisory_xact_lock(?)", (_user_key(user),))
        await db.execute(
            "INSERT INTO forgotten_users (name_sha256, at) VALUES (?, ?)"
            " ON CONFLICT (name_sha256) DO UPDATE SET at = excluded.at",
            (_name_digest(user), at),
        )

    async def _check_remembered(self, db: Connection, user: str, started_at: float) -> None:
        # Two statements, not one: a statement reads the snapshot taken as it starts,
        # before a lock it waits for is granted; the next one sees a forget that
        # committed meanwhile.
        await db.execute("SELECT pg_advisory_xact_lock_shared(?)", (_user_key(user),))
        if await db.execute_fetchall(
            "SELECT 1 FROM forgotten_users WHERE name_sha256 = ? AND at > ?",
            (_name_digest(user), started_at),
        ):
            raise NotFound(
                f"user {user!r} was forgotten while this turn ran: nothing of it is kept"
            )

    async def _count_terms(self, db: Connection, kind: str, texts: list[str]) -> None:
        """Keep each word's document count, in the writing transaction. Rows are upserted
        in word order, so concurrent writers lock shared words in the same order (no
        deadlock)."""
        await db.execute(
            "INSERT INTO term_stats (kind, term, docs)"
            " SELECT ?, w, count(*) FROM ("
            "  SELECT DISTINCT d.n, unnest(tsvector_to_array(to_tsvector('simple', d.t))) AS w"
            "  FROM unnest(?::text[]) WITH ORDINALITY AS d(t, n)"
            " ) words GROUP BY w ORDER BY w"
            " ON CONFLICT (kind, term) DO UPDATE SET docs = term_stats.docs + excluded.docs",
            (kind, texts),
        )

    async def _uncount_terms(self, db: Connection, kind: str, where: str, args: Any) -> None:
        """The reverse of `_count_terms`, for rows about to be deleted or rewritten: the
        counts that plan searches must not count them. A row's stored tsvector holds each
        of its words once."""
        table = {"message": "messages", "memory": "memories"}[kind]
        emptied = await db.execute_fetchall(
            "WITH u AS (UPDATE term_stats t SET docs = t.docs - c.n FROM ("
            "  SELECT w, count(*) AS n FROM ("
            f"   SELECT unnest(tsvector_to_array(tsv)) AS w FROM {table} WHERE {where}"
            "  ) words GROUP BY w"
            f" ) c WHERE t.kind = '{kind}' AND t.term = c.w RETURNING t.term, t.docs)"
            " SELECT term FROM u WHERE docs <= 0",
            args,
        )
        gone = [row[0] for row in emptied]
        if gone:  # words no row holds any more leave (a forgotten user's among them)
            await db.execute(
                "DELETE FROM term_stats WHERE kind = ? AND term = ANY(?::text[]) AND docs <= 0",
                (kind, gone),
            )

    async def _count_down_searches(self, db: Connection, user: str, cid: str) -> None:
        # One round trip: the two parts touch different rows.
        await db.execute(
            "WITH gone AS (DELETE FROM searches"
            " WHERE owner = ? AND continuum_id = ? AND turns_left <= 1)"
            " UPDATE searches SET turns_left = turns_left - 1"
            " WHERE owner = ? AND continuum_id = ? AND turns_left > 1",
            (user, cid, user, cid),
        )

    def _segment_match(self, terms: list[str]) -> tuple[str, str, Any]:
        source = "segments s, to_tsquery('simple', ?) q WHERE s.summary != '' AND s.tsv @@ q"
        return source, "ts_rank(s.tsv, q) DESC, s.id DESC", " | ".join(terms)

    async def _memory_rows(self, user: str, terms: list[str], at: float, want: int) -> list[Any]:
        """One round trip: the statement plans from term_stats and searches."""
        found = await self._read(_MEMORY_SEARCH, (terms, user, at, want))
        # The core takes a lower-is-better relevance (FTS5's bm25); ts_rank and the count
        # of matched words are higher-is-better, so they go in negated. Every word common
        # (not ranked): the most recent matches, by how many words they hold.
        return [
            (*row[:7], -row[7] if row[8] else -matched_terms(row[1], list(row[9]))) for row in found
        ]

    # Vector recall, in the database. Each memory's vector is kept normalized as `real[]`
    # (`vector`), so that its cosine to a normalized query is a dot product in SQL: the
    # exact search, wherever the pgvector extension is missing. With pgvector, the same
    # vector is also kept as `vector(d)` (`vec`) under an HNSW index (cosine), which
    # answers the nearest instead. Where pgvector has `halfvec` (0.7 and later) the index
    # holds the vectors at half precision: half the pages for the search to visit (at
    # 50,000 vectors of 384 dimensions, 2.0 ms against 3.4 ms for the same recall@10,
    # 0.965; bench/README.md), while the similarities returned are still computed from
    # `vec` at full precision.

    async def _prepare_vectors(self, db: Connection, dimensions: int, *, reset: bool) -> None:
        if reset:
            await db.execute("UPDATE memories SET vector = NULL WHERE vector IS NOT NULL", ())
        self._pgvector = await self._pgvector_ready(db)
        if not self._pgvector:
            return
        ((half,),) = await db.execute_fetchall("SELECT to_regtype('halfvec') IS NOT NULL", ())
        if reset or dimensions > _HNSW_MAX_DIMENSIONS[half]:
            for index in _HNSW_INDEXES:
                await db.execute(f"DROP INDEX IF EXISTS {index}", ())
            await db.execute("ALTER TABLE memories DROP COLUMN IF EXISTS vec", ())
        if dimensions > _HNSW_MAX_DIMENSIONS[half]:
            # Wider than pgvector's HNSW index takes: the exact search in SQL.
            log.warning(
                "pgvector's HNSW index takes at most %d dimensions, the embedder has %d:"
                " vector recall reads each of the user's vectors (the exact search)",
                _HNSW_MAX_DIMENSIONS[half],
                dimensions,
            )
            self._pgvector = False
            return
        await db.execute(
            f"ALTER TABLE memories ADD COLUMN IF NOT EXISTS vec vector({dimensions})", ()
        )
        # Vectors stored before the extension was: indexed now.
        await db.execute(
            "UPDATE memories SET vec = vector::vector WHERE vector IS NOT NULL AND vec IS NULL", ()
        )
        if half:
            # The full-precision index of a store made under an older pgvector goes.
            await db.execute("DROP INDEX IF EXISTS memories_hnsw", ())
            indexed, distance = (
                f"(vec::halfvec({dimensions})) halfvec_cosine_ops",
                (f"m.vec::halfvec({dimensions}) <=> ?::text::halfvec({dimensions})"),
            )
        else:
            indexed, distance = "vec vector_cosine_ops", _FULL_DISTANCE
        await db.execute(
            f"CREATE INDEX IF NOT EXISTS {_HNSW_INDEXES[half]} ON memories USING hnsw ({indexed})",
            (),
        )
        self._nearest = _hnsw_nearest(distance)

    async def _pgvector_ready(self, db: Connection) -> bool:
        """Whether pgvector is installed in the database, installing it when the server
        has it (a role that may not create it leaves the exact search)."""
        ((installed, available),) = await db.execute_fetchall(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'),"
            " EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
            (),
        )
        if installed or not available:
            return bool(installed)
        await db.execute("SAVEPOINT pgvector", ())
        try:
            await db.execute("CREATE EXTENSION IF NOT EXISTS vector", ())
        except self._ERRORS:
            await db.execute("ROLLBACK TO SAVEPOINT pgvector", ())
            return False
        return True

    async def _index_vectors(
        self, db: Connection, vectors: Sequence[tuple[int, Sequence[float]]]
    ) -> None:
        also = ", vec = ?::real[]::vector" if self._pgvector else ""
        rows = [(_normalized(v), memory_id) for memory_id, v in vectors]
        await db.executemany(
            f"UPDATE memories SET vector = ?::real[]{also} WHERE id = ?",
            [(v, v, i) for v, i in rows] if self._pgvector else rows,
        )

    async def _unindex_vectors(self, db: Connection, memory_ids: Sequence[int]) -> None:
        also = ", vec = NULL" if self._pgvector else ""
        await db.execute(
            f"UPDATE memories SET vector = NULL{also} WHERE id = ANY(?::bigint[])",
            (list(memory_ids),),
        )

    async def _nearest_rows(
        self, user: str, vector: Sequence[float], k: int, at: float, among: Sequence[int]
    ) -> list[Any]:
        query = list(vector)  # unit length already (`_check_vector`)
        if self._pgvector:
            # The query goes three times, as pgvector's text form: one string made once.
            # As `real[]` each copy was encoded element by element (384 of them, with
            # type checks), a fifth of the call's own CPU. A JSON array of floats is that
            # form, each float its shortest repr: msgspec writes it in 15 µs, where
            # joining 384 reprs took 240 (bench/README.md).
            text = msgspec.json.encode(query).decode()
            approx, exact = (user, at, text, k), (user, at, text, k, k)
            return await self._read(self._nearest, (*approx, *exact, text, list(among), user, at))
        # exact: every live vector of the user, scored in the database
        nearest = f"m.vector IS NOT NULL AND {_ALIVE} ORDER BY {_DOT} DESC"
        return await self._read(
            f"WITH near AS MATERIALIZED (SELECT m.id FROM memories m WHERE m.owner = ?"
            f" AND {nearest} LIMIT ?)"
            f" {MEMORY}, {_DOT} FROM memories m"
            " WHERE m.id = ANY(ARRAY(SELECT id FROM near) || ?::bigint[])"
            f" AND m.owner = ? AND m.vector IS NOT NULL AND {_ALIVE}",
            (user, at, query, k, query, list(among), user, at),
        )

    async def _message_hits(
        self, user: str, terms: list[str], continuum_id: str | None, limit: int
    ) -> list[MessageHit]:
        """One round trip, as `_memory_rows`. Ranked: the best matches by ts_rank. Every
        word common: the most recent matches (ranking them would score every row of
        those words), by how many words they hold."""
        scope, args = " AND m.owner = ?", [terms, user]
        if continuum_id is not None:
            scope += " AND m.continuum_id = ?"
            args.append(continuum_id)
        rows = await self._read(
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
            f"  LIMIT (SELECT CASE WHEN ranked THEN ? ELSE {COUNT_CAP} END FROM plan)"
            " ) h ORDER BY h.rank DESC, h.id DESC",
            (*args, limit),
        )
        if not rows or rows[0][7]:
            return [MessageHit(r[0], r[1], r[2], r[3], moment(r[4]), float(r[5])) for r in rows]
        hits = [
            MessageHit(r[0], r[1], r[2], r[3], moment(r[4]), float(matched_terms(r[6], list(r[8]))))
            for r in rows
        ]
        hits.sort(key=lambda hit: hit.score, reverse=True)  # stable: newest first on ties
        return hits[:limit]


# A password given as a parameter (libpq's and asyncpg's `?password=`, `sslpassword=`).
_SECRET_PARAMETER = re.compile(r"([?&](?:ssl)?password=)[^&]*", re.IGNORECASE)


def _redact(url: str) -> str:
    """The URL without its passwords (in its user part or as parameters), for messages
    and logs."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        if ":" in credentials:
            rest = f"{user}:***@{host}"
    return _SECRET_PARAMETER.sub(r"\1***", f"{scheme}{sep}{rest}")


def _unreadable(exc: Exception) -> str:
    """Why asyncpg could not use the URL. Its own words for a URL it cannot parse quote
    the pieces it cut the URL into, and a password with `/`, `#` or `?` unencoded is cut
    inside the password: those words are not repeated (nor chained)."""
    if isinstance(exc, ValueError):
        return (
            "the URL does not parse (percent-encode any @ : / ? # % in the user name or"
            " password, e.g. %40 for @)"
        )
    return str(exc)


# The cosine of a memory's normalized vector to the normalized query (bound once more).
_DOT = "(SELECT sum(a * b) FROM unnest(m.vector, ?::real[]) AS t(a, b))"
_ALIVE = UNEXPIRED


# pgvector's HNSW index (cosine) answers for the whole table: the user's nearest are
# those among its `hnsw.ef_search` candidates that are theirs and alive. A user holding
# a small share of the table's memories may find fewer than k there (pgvector before
# 0.8 has no iterative scan to look further, and this works on every version): then their live
# memories are searched exactly, in the same statement (pgvector's distance over their
# rows alone). That branch sits under a one-time filter above its LIMIT, so a plan for
# it (a parallel scan, for a large user) never starts unless it is needed; its ORDER BY
# is an expression the index cannot answer, so it never takes the HNSW path.
HNSW_EF_SEARCH = 150
# The index of each kind: over `vector` (full precision), over `halfvec` (half).
_HNSW_INDEXES = ("memories_hnsw", "memories_hnsw_half")
# The widest vectors pgvector's HNSW index takes: `vector` (without halfvec), `halfvec`.
_HNSW_MAX_DIMENSIONS = (2000, 4000)
_FULL_DISTANCE = "m.vec <=> ?::text::vector"


def _hnsw_nearest(distance: str) -> str:
    """The nearest-memories statement whose first ORDER BY is `distance`: the
    expression the HNSW index is built on, or the planner would not use it."""
    return (
        "WITH approx AS MATERIALIZED (SELECT m.id FROM memories m"
        f" WHERE m.owner = ? AND m.vec IS NOT NULL AND {_ALIVE}"
        f" ORDER BY {distance} LIMIT ?),"
        " exact AS MATERIALIZED (SELECT id FROM (SELECT m.id FROM memories m"
        f" WHERE m.owner = ? AND m.vec IS NOT NULL AND {_ALIVE}"
        " ORDER BY (m.vec <=> ?::text::vector) + 0 LIMIT ?) e"
        " WHERE (SELECT count(*) FROM approx) < ?)"
        f" {MEMORY}, 1 - (m.vec <=> ?::text::vector) FROM memories m"
        " WHERE m.id = ANY(ARRAY(SELECT id FROM approx UNION SELECT id FROM exact) || ?::bigint[])"
        f" AND m.owner = ? AND m.vector IS NOT NULL AND {_ALIVE}"
    )


def _normalized(vector: Sequence[float]) -> list[float]:
    """Unit length, as Python floats: for vectors imported as stored (a store before
    vectors were normalized at their check, `SQLStore._check_vector`)."""
    values = [float(x) for x in vector]
    norm = math.sqrt(sum(x * x for x in values))
    return [x / norm for x in values]
