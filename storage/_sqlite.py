"""The SQLite adapter (aiosqlite): one file, WAL, one writer, a few readers.

- One writer connection behind a lock: every write is one `BEGIN IMMEDIATE` transaction,
  shielded from cancellation from BEGIN to COMMIT, so a cancelled caller never leaves half
  a turn behind and a committed turn is always whole.
- A few more connections serve reads, each read on the one with the fewest in flight;
  under WAL they never wait for the writer.
- `synchronous=NORMAL` with WAL: a process killed at any moment (even `kill -9` during a
  commit) loses no committed transaction and leaves a database that opens.
"""

from __future__ import annotations

import functools
import hmac
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar

import aiosqlite
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
    InvalidInput,
    NotFound,
    SchemaTooNew,
    StorageUnavailable,
    UnknownContinuum,
    UserExists,
)
from ._fts import (
    CANDIDATE_FACTOR,
    fts_query,
    memory_score,
    query_terms,
)
from ._fts_plan_sql import plan_ctes, plan_parameters, term_hits
from ._jobs import SEGMENT_SUMMARY, job_from_row, job_key, segment_job_payload
from ._migrations import MIGRATIONS, SCHEMA_VERSION
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

__all__ = ["SQLiteStorage"]

P = ParamSpec("P")
T = TypeVar("T")

_model_decoder = msgspec.json.Decoder(ContinuumModel)
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
READERS = 3  # read connections (WAL: none of them waits for the writer)


def _translated(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """sqlite3 errors leave the adapter as `StorageUnavailable`, with the cause chained."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except sqlite3.Error as exc:
            raise StorageUnavailable(f"{fn.__name__} failed: {exc}") from exc

    return wrapper


_READER_MMAP_BYTES = 256 * 1024 * 1024


async def _connect(path: Path, *, reader: bool) -> aiosqlite.Connection:
    # The searches are large statements (5 to 25 ms to compile): the statement cache is
    # kept large enough that statements with a varying number of placeholders (lists of
    # ids) never push them out.
    conn = await aiosqlite.connect(path, isolation_level=None, cached_statements=512)
    try:
        if not reader:
            await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        if reader:
            await conn.execute("PRAGMA query_only=ON")
            # Searches join index hits to their rows at random: through the OS page cache
            # by memory map that is a pointer away, through read() a system call per page
            # (bench/compose.py: message search 12 → 3 ms at 100k messages).
            await conn.execute(f"PRAGMA mmap_size={_READER_MMAP_BYTES}")
    except BaseException:
        await conn.close()
        raise
    return conn


async def migrate(conn: aiosqlite.Connection, path: Path, *, upto: int | None = None) -> int:
    """Apply pending migrations in order; returns the schema version afterwards."""
    await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    rows = list(await conn.execute_fetchall("SELECT version FROM schema_version"))
    current = int(rows[0][0]) if rows else 0
    has_row = bool(rows)
    if current > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path} has schema version {current}, but this Frontmind understands only up to "
            f"{SCHEMA_VERSION}: upgrade Frontmind or use another data directory"
        )
    pending = [
        (version, script)
        for version, script in MIGRATIONS
        if version > current and (upto is None or version <= upto)
    ]
    if not pending:
        return current
    # Rebuilding a table under a new key needs foreign keys off (a no-op inside a
    # transaction, so it is switched here); each migration is checked before it commits.
    await conn.execute("PRAGMA foreign_keys=OFF")
    try:
        for version, script in pending:
            bump = (
                f"UPDATE schema_version SET version = {version};"
                if has_row
                else f"INSERT INTO schema_version (version) VALUES ({version});"
            )
            try:
                await conn.executescript(f"BEGIN IMMEDIATE;\n{script}\n{bump}")
                broken = list(await conn.execute_fetchall("PRAGMA foreign_key_check"))
                if broken:
                    raise sqlite3.IntegrityError(
                        f"migration {version} leaves broken references: {broken[:3]}"
                    )
                await conn.execute("COMMIT")
            except sqlite3.Error:
                if conn.in_transaction:
                    await conn.execute("ROLLBACK")
                raise
            current, has_row = version, True
    finally:
        await conn.execute("PRAGMA foreign_keys=ON")
    return current


_MEMORY = "SELECT m.id, m.text, m.created_at, m.expires_at, m.importance, m.source_segment, m.uses"
_ALIVE = "m.owner = :user AND (m.expires_at IS NULL OR m.expires_at > :at)"
# A memory search, planned and searched in one statement (`_planned_memories`). Its text
# is the same for every query, so each reader compiles it once (warmed on opening).
_MEMORY_SEARCH = (
    f"WITH {plan_ctes('memories_fts')},"
    " top AS MATERIALIZED (SELECT rowid AS id, bm25(memories_fts) AS score"
    " FROM memories_fts WHERE memories_fts MATCH (SELECT chosen FROM plan)"
    " ORDER BY score LIMIT :candidates),"
    " recent AS MATERIALIZED (SELECT m.id"
    " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
    f" WHERE memories_fts MATCH (SELECT every FROM plan) AND {_ALIVE}"
    " ORDER BY memories_fts.rowid DESC LIMIT :cap),"
    " bounds AS MATERIALIZED (SELECT min(id) AS lo, max(id) AS hi FROM recent),"
    f" hits AS MATERIALIZED ({term_hits('memories_fts')}),"
    " held AS MATERIALIZED (SELECT id, count(*) AS n FROM hits"
    " WHERE id IN (SELECT id FROM recent) GROUP BY id)"
    f" {_MEMORY}, top.score, 1 FROM top LEFT JOIN memories m ON m.id = top.id AND {_ALIVE}"
    f" UNION ALL {_MEMORY}, -held.n, 0 FROM held JOIN memories m ON m.id = held.id"
    # The status row: the plan's ranked query, for the whole join when it is needed.
    " UNION ALL SELECT NULL, (SELECT chosen FROM plan), NULL, NULL, NULL, NULL, NULL, NULL, 2"
)
_MEMORY_SEARCH_WARMUP = {**plan_parameters([]), "user": "", "at": 0.0, "candidates": 1}


# Where a message search looks: the user's messages, in one continuum or in all.
_IN_SCOPE = "m.owner = :user AND (:continuum IS NULL OR m.continuum_id = :continuum)"
# The hits a search keeps (`kept`: id, score; this text goes on from that CTE) as rows
# (1, continuum, seq, role, snippet, created_at, score, id). A snippet reads and
# tokenizes its message's text: it is made for the kept rows only, not for every match
# the ranking looked at. The index is read over the kept ids' range (`span`), the outer
# loop (CROSS JOIN): looking each kept row up by rowid instead would seek every term's
# list from its start, which for a common word is most of the index.
_MESSAGE_HITS = (
    ", span AS MATERIALIZED (SELECT min(id) AS lo, max(id) AS hi FROM kept)"
    " SELECT 1, m.continuum_id, m.seq, m.role,"
    " snippet(messages_fts, 0, '', '', '…', 40), m.created_at, kept.score, kept.id"
    " FROM span CROSS JOIN messages_fts CROSS JOIN kept ON kept.id = +messages_fts.rowid"
    " CROSS JOIN messages m ON m.id = kept.id"
    " WHERE messages_fts MATCH :match AND messages_fts.rowid BETWEEN span.lo AND span.hi"
)
# A message search, planned and searched in one statement, as for memories. Ranked: the
# best BM25 candidates in the index alone, joined to their rows for the scope (too few in
# scope: `search_messages` joins every match). Every word common: of the COUNT_CAP most
# recent matches in scope, those holding the most words. Then one status row (0, …).
_MESSAGE_SEARCH = (
    f"WITH {plan_ctes('messages_fts')},"
    " top AS MATERIALIZED (SELECT rowid AS id, -bm25(messages_fts) AS score"
    " FROM messages_fts WHERE messages_fts MATCH (SELECT chosen FROM plan)"
    " ORDER BY score DESC, rowid DESC LIMIT :candidates),"
    " ranked AS MATERIALIZED (SELECT top.id, top.score FROM top"
    f" JOIN messages m ON m.id = top.id WHERE {_IN_SCOPE}"
    " ORDER BY top.score DESC, top.id DESC LIMIT :limit),"
    " recent AS MATERIALIZED (SELECT m.id"
    " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
    f" WHERE messages_fts MATCH (SELECT every FROM plan) AND {_IN_SCOPE}"
    " ORDER BY messages_fts.rowid DESC LIMIT :cap),"
    " bounds AS MATERIALIZED (SELECT min(id) AS lo, max(id) AS hi FROM recent),"
    f" hits AS MATERIALIZED ({term_hits('messages_fts')}),"
    " held AS MATERIALIZED (SELECT id, CAST(count(*) AS REAL) AS score FROM hits"
    " WHERE id IN (SELECT id FROM recent) GROUP BY id ORDER BY score DESC, id DESC"
    " LIMIT :limit),"
    " kept AS MATERIALIZED (SELECT id, score FROM ranked UNION ALL SELECT id, score FROM held),"
    " matching AS MATERIALIZED (SELECT CASE WHEN ranked THEN chosen ELSE every END AS q"
    " FROM plan)"
    + _MESSAGE_HITS.replace("MATCH :match", "MATCH (SELECT q FROM matching)")
    + " UNION ALL SELECT 0, NULL, NULL, NULL, (SELECT q FROM matching), NULL,"
    " (SELECT ranked FROM plan), (SELECT count(*) FROM top)"
)


class SQLiteStorage:
    """The embedded default storage. Open with `await SQLiteStorage.open(path)`."""

    shared = False  # one process owns the file: nobody else writes behind our back

    def __init__(
        self,
        path: Path,
        writer: aiosqlite.Connection,
        readers: list[aiosqlite.Connection],
        segment_gap: float,
    ) -> None:
        self.path = path
        self._writer = writer
        self._readers = readers
        self._in_flight = [0] * len(readers)  # reads in flight per read connection
        self._segment_gap = segment_gap
        self._write_lock = anyio.Lock()
        self._closed = False
        # Continuums whose lease is held (a turn running): claim_job leaves them alone.
        self._leased: dict[tuple[str, str], int] = {}

    @classmethod
    async def open(
        cls, path: str | Path, *, segment_gap: float = 1800.0, schema_upto: int | None = None
    ) -> SQLiteStorage:
        """Open (creating and migrating as needed) the database at `path`.

        `schema_upto` stops migrations early; it exists for upgrade tests.
        """
        db_path = Path(path)
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
            writer = await _connect(db_path, reader=False)
        except (OSError, sqlite3.Error) as exc:
            raise StorageUnavailable(f"cannot open the database at {db_path}: {exc}") from exc
        readers: list[aiosqlite.Connection] = []
        try:
            await migrate(writer, db_path, upto=schema_upto)
            for _ in range(READERS):
                readers.append(await _connect(db_path, reader=True))
            if schema_upto is None:
                # Each reader compiles the memory search now (a few ms), not in a turn's
                # composition. The message search, background work, compiles on first use.
                for reader in readers:
                    await reader.execute_fetchall(_MEMORY_SEARCH, _MEMORY_SEARCH_WARMUP)
            return cls(db_path, writer, readers, segment_gap)
        except BaseException as exc:
            # Every connection owns a (non-daemon) thread: leaving one open on a failed
            # open would keep the whole process alive.
            with anyio.CancelScope(shield=True):
                for conn in (*readers, writer):
                    await conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StorageUnavailable(f"cannot open the database at {db_path}: {exc}") from exc
            raise

    async def __aenter__(self) -> SQLiteStorage:
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
            async with self._write_lock:
                for reader in self._readers:
                    await reader.close()
                await self._writer.close()

    async def schema_version(self) -> int:
        rows = list(await self._read("SELECT version FROM schema_version"))
        return int(rows[0][0])

    async def _read(self, sql: str, parameters: Any = ()) -> list[sqlite3.Row]:
        """Rows of one read, on the read connection with the fewest reads in flight.

        Each connection has its own thread, and SQLite lets go of the GIL while it
        works, so concurrent reads run side by side; a read sent to a connection still
        busy with a slow one would wait behind it (a composition's memory search
        behind another section's read), so the least busy one takes it. (A cancelled
        read is no longer counted though its statement may still be finishing on its
        thread: the count only steers the choice.)
        """
        index = min(range(len(self._readers)), key=self._in_flight.__getitem__)
        self._in_flight[index] += 1
        try:
            return list(await self._readers[index].execute_fetchall(sql, parameters))
        finally:
            self._in_flight[index] -= 1

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction, shielded from cancellation from BEGIN to COMMIT."""
        if self._closed:
            raise StorageUnavailable("the storage is closed")
        async with self._write_lock:
            with anyio.CancelScope(shield=True):
                await self._writer.execute("BEGIN IMMEDIATE")
                try:
                    yield self._writer
                except BaseException:
                    await self._writer.execute("ROLLBACK")
                    raise
                await self._writer.execute("COMMIT")

    @asynccontextmanager
    async def continuum_lease(self, user: str, continuum_id: str) -> AsyncIterator[None]:
        """Turns of a continuum already run one at a time in its one owning process; the
        lease only marks the continuum busy, so that background jobs wait for it."""
        key = (user, continuum_id)
        self._leased[key] = self._leased.get(key, 0) + 1
        try:
            yield
        finally:
            left = self._leased.pop(key) - 1
            if left:
                self._leased[key] = left

    # -- continuums and turns -----------------------------------------------------------

    @_translated
    async def continuum(self, user: str, continuum_id: str) -> Continuum:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = list(
            await self._read(
                "SELECT id, created_at, history_start, message_count, last_turn_at, last_message_id"
                " FROM continuums WHERE owner = ? AND id = ?",
                (user, continuum_id),
            )
        )
        if not rows:
            raise UnknownContinuum(f"no continuum {continuum_id!r}")
        return Continuum(*rows[0])

    @_translated
    async def continuums(
        self, user: str, *, limit: int = -1, after: tuple[float, str] | None = None
    ) -> list[Continuum]:
        # The user's continuums, most recently active first; `after` is the (activity, id)
        # of the last one seen.
        check_user_name(user)
        where, args = "", ()  # type: tuple[str, tuple[Any, ...]]
        if after is not None:
            where = (
                " AND (COALESCE(last_turn_at, created_at) < ?"
                " OR (COALESCE(last_turn_at, created_at) = ? AND id > ?))"
            )
            args = (after[0], after[0], after[1])
        rows = await self._read(
            "SELECT id, created_at, history_start, message_count, last_turn_at, last_message_id"
            f" FROM continuums WHERE owner = ?{where}"
            " ORDER BY COALESCE(last_turn_at, created_at) DESC, id LIMIT ?",
            (user, *args, limit),
        )
        return [Continuum(*row) for row in rows]

    @_translated
    async def usage_by_continuum(
        self, user: str, ids: list[str]
    ) -> dict[str, tuple[int, TurnUsage]]:
        """For each of the user's continuums in `ids` that has turns: how many, and their
        summed usage."""
        check_user_name(user)
        if not ids:
            return {}
        fields = msgspec.structs.fields(TurnUsage)
        sums = ", ".join(f"SUM(json_extract(r, '$.usage.{f.name}'))" for f in fields)
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            f"SELECT continuum_id, COUNT(*), {sums} FROM"
            f" (SELECT continuum_id, CAST(record AS TEXT) AS r FROM turns"
            f"  WHERE owner = ? AND continuum_id IN ({marks})) GROUP BY continuum_id",
            (user, *ids),
        )
        return {row[0]: (int(row[1]), TurnUsage(*(int(v or 0) for v in row[2:]))) for row in rows}

    @_translated
    async def delete_continuum(self, user: str, continuum_id: str) -> None:
        """Delete the user's continuum with its turns, messages (and their search index) and
        segments, in one transaction; `UnknownContinuum` if the user has none by that id."""
        check_user_name(user)
        check_continuum_id(continuum_id)
        async with self._transaction() as db:
            # Messages first (their delete trigger drops them from the search index), the
            # continuum last (the others refer to it); none deleted: the transaction rolls
            # back with the error.
            for table in ("messages", "segments", "turns", "continuum_settings", "searches"):
                await db.execute(
                    f"DELETE FROM {table} WHERE owner = ? AND continuum_id = ?",
                    (user, continuum_id),
                )
            cursor = await db.execute(
                "DELETE FROM continuums WHERE owner = ? AND id = ?", (user, continuum_id)
            )
            if cursor.rowcount == 0:
                raise UnknownContinuum(f"no continuum {continuum_id!r}")

    async def _messages(
        self, user: str, continuum_id: str, start: int, limit: int = -1
    ) -> list[Message]:
        rows = await self._read(
            "SELECT role, content, seq, turn_id, created_at FROM messages"
            " WHERE owner = ? AND continuum_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
            (user, continuum_id, start, limit),
        )
        decode = content_decoder.decode
        return [
            Message(role, decode(content), seq, turn, at) for role, content, seq, turn, at in rows
        ]

    @_translated
    async def history(
        self, user: str, continuum_id: str, *, missing_ok: bool = False
    ) -> list[Message]:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = list(
            await self._read(
                "SELECT history_start FROM continuums WHERE owner = ? AND id = ?",
                (user, continuum_id),
            )
        )
        if not rows:
            if missing_ok:
                return []
            raise UnknownContinuum(f"no continuum {continuum_id!r}")
        return await self._messages(user, continuum_id, int(rows[0][0]))

    @_translated
    async def all_messages(
        self, user: str, continuum_id: str, *, limit: int = -1, after: int = -1
    ) -> list[Message]:
        """All the continuum's messages in order, from the one after seq `after`."""
        await self.continuum(user, continuum_id)
        return await self._messages(user, continuum_id, after + 1, limit)

    @_translated
    async def continuum_model(self, user: str, continuum_id: str) -> ContinuumModel:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = list(
            await self._read(
                "SELECT settings FROM continuum_settings WHERE owner = ? AND continuum_id = ?",
                (user, continuum_id),
            )
        )
        return _model_decoder.decode(rows[0][0]) if rows else ContinuumModel()

    @_translated
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

    @_translated
    async def commit_turn(self, user: str, write: TurnWrite) -> bool:
        check_user_name(user)
        record = write.record
        rows = check_write(write)
        cid = record.continuum_id
        async with self._transaction() as db:
            seen = list(
                await db.execute_fetchall(
                    "SELECT 1 FROM turns WHERE id = ? AND status = 'completed'", (record.turn_id,)
                )
            )
            if seen:
                return False  # a retried commit of a turn already stored
            await db.execute(
                "INSERT OR IGNORE INTO continuums (owner, id, created_at) VALUES (?, ?, ?)",
                (user, cid, record.started_at),
            )
            ((base,),) = await db.execute_fetchall(
                "SELECT message_count FROM continuums WHERE owner = ? AND id = ?", (user, cid)
            )
            await db.execute(
                # It replaces the turn's provisional record (written when it started).
                "INSERT INTO turns (id, owner, continuum_id, status, started_at, record)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record"
                " WHERE turns.status != 'completed' AND turns.owner = excluded.owner",
                (
                    record.turn_id,
                    user,
                    cid,
                    record.status,
                    record.started_at,
                    msgspec.json.encode(record),
                ),
            )
            await db.executemany(
                "INSERT INTO messages"
                " (owner, continuum_id, seq, turn_id, role, content, text, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (user, cid, base + i, record.turn_id, role, content, text, at)
                    for i, (role, content, text, at) in enumerate(rows)
                ],
            )
            await self._extend_segment(db, user, cid, record, base, write.history_start)
            await self._apply_effects(db, user, write.effects)
            # Each committed turn counts the continuum's finished searches down.
            await db.execute(
                "DELETE FROM searches WHERE owner = ? AND continuum_id = ? AND turns_left <= 1",
                (user, cid),
            )
            await db.execute(
                "UPDATE searches SET turns_left = turns_left - 1"
                " WHERE owner = ? AND continuum_id = ? AND turns_left IS NOT NULL",
                (user, cid),
            )
            await db.execute(
                "UPDATE continuums SET message_count = ?, last_turn_at = ?, last_message_id = ?,"
                " history_start = COALESCE(?, history_start) WHERE owner = ? AND id = ?",
                (
                    base + len(rows),
                    record.finished_at,
                    record.message_id,
                    write.history_start,
                    user,
                    cid,
                ),
            )
        return True

    async def _apply_effects(
        self, db: aiosqlite.Connection, user: str, effects: tuple[Effect, ...]
    ) -> None:
        """The writes a turn's tools staged, inside the turn's transaction, as the turn's
        user: what they add is that user's, and they complete only that user's reminders."""
        for effect in effects:
            match effect:
                case AddReminder(text=text, due_at=due, created_at=created, origin=origin):
                    await db.execute(
                        "INSERT INTO reminders (owner, text, due_at, created_at, origin)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (user, text, due, created, origin),
                    )
                case CompleteReminder(reminder_id=reminder_id, at=at):
                    await db.execute(
                        "UPDATE reminders SET completed_at = ?"
                        " WHERE owner = ? AND id = ? AND completed_at IS NULL",
                        (at, user, reminder_id),
                    )
                case AddMemory(text=text, importance=importance, replaces=int() as memory_id):
                    # The same memory said again: updated in place, as a summary's is.
                    await db.execute(
                        "UPDATE memories SET text = ?, importance = max(importance, ?)"
                        " WHERE owner = ? AND id = ?",
                        (text, importance, user, memory_id),
                    )
                case AddMemory(
                    text=text, importance=importance, created_at=created, expires_at=expires
                ):
                    await db.execute(
                        "INSERT INTO memories (owner, text, created_at, expires_at, importance)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (user, text, created, expires, importance),
                    )

    async def _extend_segment(
        self,
        db: aiosqlite.Connection,
        user: str,
        cid: str,
        record: TurnRecord,
        first_seq: int,
        history_start: int | None,
    ) -> None:
        last = list(
            await db.execute_fetchall(
                "SELECT id, ended_at, first_seq FROM segments WHERE owner = ? AND continuum_id = ?"
                " ORDER BY ended_at DESC LIMIT 1",
                (user, cid),
            )
        )
        if last and continues(record, last[0][1], last[0][2], history_start, self._segment_gap):
            await db.execute(
                "UPDATE segments SET ended_at = ?, turn_count = turn_count + 1 WHERE id = ?",
                (record.finished_at, last[0][0]),
            )
            return
        if last:
            # The turn closes the previous segment: its summary job is due, written in
            # this transaction so that it survives whatever happens next.
            await db.execute(
                "INSERT INTO jobs"
                " (owner, kind, continuum_id, payload, state, next_at, created_at)"
                " VALUES (?, ?, ?, ?, 'pending', ?, ?)",
                (
                    user,
                    SEGMENT_SUMMARY,
                    cid,
                    segment_job_payload(int(last[0][0])).encode(),
                    record.finished_at,
                    record.finished_at,
                ),
            )
        title = segment_title(record.user_text)
        await db.execute(
            "INSERT INTO segments"
            " (owner, continuum_id, started_at, ended_at, turn_count, title, first_seq)"
            " VALUES (?, ?, ?, ?, 1, ?, ?)",
            (user, cid, record.started_at, record.finished_at, title, first_seq),
        )

    @_translated
    async def record_turn(self, user: str, record: TurnRecord) -> None:
        check_user_name(user)
        check_record(record)
        if record.status == "completed":
            raise InvalidInput("completed turns are stored with commit_turn, with their messages")
        async with self._transaction() as db:
            await db.execute(
                "INSERT OR IGNORE INTO continuums (owner, id, created_at) VALUES (?, ?, ?)",
                (user, record.continuum_id, record.started_at),
            )
            await db.execute(
                "INSERT INTO turns (id, owner, continuum_id, status, started_at, record)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record"
                " WHERE turns.status != 'completed' AND turns.owner = excluded.owner",
                (
                    record.turn_id,
                    user,
                    record.continuum_id,
                    record.status,
                    record.started_at,
                    msgspec.json.encode(record),
                ),
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
        """The user's latest `limit` turns, oldest first; with `before` (the started_at and
        id of a turn), the latest ones before that turn."""
        check_user_name(user)
        where: list[str] = ["owner = ?"]
        args: list[Any] = [user]
        if continuum_id is not None:
            await self.continuum(user, continuum_id)
            where.append("continuum_id = ?")
            args.append(continuum_id)
        if before is not None:
            where.append(
                "(started_at < ? OR (started_at = ?"
                " AND rowid < (SELECT rowid FROM turns WHERE id = ?)))"
            )
            args += [before[0], before[0], before[1]]
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._read(
            f"SELECT record FROM turns{clause} ORDER BY started_at DESC, rowid DESC LIMIT ?",
            (*args, limit),
        )
        return [record_decoder.decode(row[0]) for row in reversed(list(rows))]

    @_translated
    async def recent_segments(
        self, user: str, continuum_id: str, *, limit: int = 10
    ) -> list[Segment]:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = await self._read(
            f"{_SEGMENT} WHERE owner = ? AND continuum_id = ? ORDER BY ended_at DESC LIMIT ?",
            (user, continuum_id, limit),
        )
        return [Segment(*row) for row in reversed(list(rows))]

    @_translated
    async def segment(self, user: str, segment_id: int) -> Segment:
        check_user_name(user)
        check_row_id(segment_id, "segment id")
        rows = list(await self._read(f"{_SEGMENT} WHERE owner = ? AND id = ?", (user, segment_id)))
        if not rows:
            raise NotFound(f"no segment #{segment_id}")
        return Segment(*rows[0])

    @_translated
    async def segment_messages(self, user: str, segment_id: int) -> list[Message]:
        segment = await self.segment(user, segment_id)
        rows = list(
            await self._read(
                "SELECT min(first_seq) FROM segments"
                " WHERE owner = ? AND continuum_id = ? AND first_seq > ?",
                (user, segment.continuum_id, segment.first_seq),
            )
        )
        end = rows[0][0]
        messages = await self._messages(user, segment.continuum_id, segment.first_seq)
        return [m for m in messages if end is None or m.seq < end]

    @_translated
    async def search_segments(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[Segment]:
        check_user_name(user)
        if limit < 1:
            return []
        match = fts_query(query_terms(query))
        if match is None:
            return []
        scope, args = " AND s.owner = ?", [match, user]
        if continuum_id is not None:
            check_continuum_id(continuum_id)
            scope += " AND s.continuum_id = ?"
            args.append(continuum_id)
        rows = await self._read(
            "SELECT s.id, s.continuum_id, s.started_at, s.ended_at, s.turn_count, s.title,"
            " s.first_seq, s.summary FROM segments_fts JOIN segments s ON s.id = segments_fts.rowid"
            f" WHERE segments_fts MATCH ?{scope} ORDER BY bm25(segments_fts) LIMIT ?",
            (*args, limit),
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
            cursor = await db.execute(
                "INSERT INTO jobs (owner, kind, continuum_id, payload, state, next_at, created_at)"
                " VALUES (?, ?, ?, ?, 'pending', ?, ?)",
                (user, kind, continuum_id, payload.encode(), at, at),
            )
            job_id = cursor.lastrowid
        assert job_id is not None
        return Job(job_id, user, kind, continuum_id, payload, "pending", 0, at, None, None, at)

    @_translated
    async def claim_job(
        self, *, now: float, lease_seconds: float, exclude: Sequence[tuple[str, str]] = ()
    ) -> Job | None:
        keys = sorted({job_key(user, cid) for user, cid in (*exclude, *self._leased)})
        marks = ",".join("?" * len(keys))
        skip = f" AND owner || ':' || continuum_id NOT IN ({marks})" if keys else ""
        async with self._transaction() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT id FROM jobs WHERE ((state = 'pending' AND next_at <= ?)"
                    f" OR (state = 'running' AND claimed_at <= ?)){skip}"
                    " ORDER BY next_at, id LIMIT 1",
                    (now, now - lease_seconds, *keys),
                )
            )
            if not rows:
                return None
            await db.execute(
                "UPDATE jobs SET state = 'running', claimed_at = ?, attempts = attempts + 1"
                " WHERE id = ?",
                (now, rows[0][0]),
            )
            (row,) = await db.execute_fetchall(f"{_JOB} WHERE id = ?", (rows[0][0],))
        return job_from_row(tuple(row))

    async def _still_claimed(self, db: aiosqlite.Connection, job: Job) -> bool:
        rows = list(
            await db.execute_fetchall(
                "SELECT 1 FROM jobs WHERE id = ? AND state = 'running' AND claimed_at = ?",
                (job.id, job.claimed_at),
            )
        )
        return bool(rows)

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
                    "UPDATE segments SET title = ?, summary = ? WHERE owner = ? AND id = ?",
                    (digest.title, digest.summary, job.user, digest.segment_id),
                )
                await db.execute("DELETE FROM segments_fts WHERE rowid = ?", (digest.segment_id,))
                await db.execute(
                    "INSERT INTO segments_fts (rowid, text) VALUES (?, ?)",
                    (digest.segment_id, f"{digest.title}\n{digest.summary}"),
                )
                for proposal in proposals:
                    if proposal.update_id is not None:
                        await db.execute(
                            "UPDATE memories SET text = ?, importance = max(importance, ?)"
                            " WHERE owner = ? AND id = ?",
                            (proposal.text, proposal.importance, job.user, proposal.update_id),
                        )
                    else:
                        await db.execute(
                            "INSERT INTO memories (owner, text, created_at, importance,"
                            " source_segment) VALUES (?, ?, ?, ?, ?)",
                            (job.user, proposal.text, now, proposal.importance, digest.segment_id),
                        )
            await db.execute(
                "UPDATE jobs SET state = 'done', finished_at = ?, record = ?, last_error = NULL"
                " WHERE id = ?",
                (now, None if usage is None else msgspec.json.encode(usage), job.id),
            )
        return True

    @_translated
    async def fail_job(self, job: Job, *, now: float, error: str, retry_at: float | None) -> bool:
        """Record the failure; retried at `retry_at`, or given up when it is None."""
        async with self._transaction() as db:
            if not await self._still_claimed(db, job):
                return False
            await db.execute(
                "UPDATE jobs SET state = ?, next_at = ?, last_error = ?, finished_at = ?"
                " WHERE id = ?",
                (
                    "pending" if retry_at is not None else "failed",
                    retry_at if retry_at is not None else job.next_at,
                    error[:2000],
                    None if retry_at is not None else now,
                    job.id,
                ),
            )
        return True

    @_translated
    async def jobs(
        self, user: str, continuum_id: str | None = None, *, limit: int = 1000
    ) -> list[Job]:
        check_user_name(user)
        if continuum_id is None:
            rows = await self._read(f"{_JOB} WHERE owner = ? ORDER BY id LIMIT ?", (user, limit))
        else:
            check_continuum_id(continuum_id)
            rows = await self._read(
                f"{_JOB} WHERE owner = ? AND continuum_id = ? ORDER BY id LIMIT ?",
                (user, continuum_id, limit),
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
            await db.execute(
                "DELETE FROM searches WHERE owner = ? AND continuum_id = ? AND query = ?",
                (user, continuum_id, query),
            )
            cursor = await db.execute(
                "INSERT INTO searches (owner, continuum_id, query, state, requested_at)"
                " VALUES (?, ?, ?, 'pending', ?)",
                (user, continuum_id, query, at),
            )
            search_id = cursor.lastrowid
            await db.execute(
                "DELETE FROM searches WHERE owner = ? AND continuum_id = ? AND id NOT IN"
                " (SELECT id FROM searches WHERE owner = ? AND continuum_id = ?"
                "  ORDER BY id DESC LIMIT ?)",
                (user, continuum_id, user, continuum_id, MAX_SEARCHES),
            )
        assert search_id is not None
        return ContextSearch(search_id, user, continuum_id, query, "pending", at)

    @_translated
    async def claim_search(self, *, now: float, lease_seconds: float) -> ContextSearch | None:
        async with self._transaction() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT id FROM searches WHERE state != 'done'"
                    " AND (state = 'pending' OR claimed_at <= ?) ORDER BY id LIMIT 1",
                    (now - lease_seconds,),
                )
            )
            if not rows:
                return None
            await db.execute(
                "UPDATE searches SET state = 'running', claimed_at = ?, attempts = attempts + 1"
                " WHERE id = ?",
                (now, rows[0][0]),
            )
            (row,) = await db.execute_fetchall(f"{_SEARCH} WHERE id = ?", (rows[0][0],))
        return search_from_row(tuple(row))

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
            cursor = await db.execute(
                "UPDATE searches SET state = 'done', finished_at = ?, turns_left = ?,"
                " passages = ?, error = ? WHERE id = ? AND state = 'running' AND claimed_at = ?",
                (
                    now,
                    max(keep_turns, 1),
                    encode_passages(passages),
                    None if error is None else error[:2000],
                    search.id,
                    search.claimed_at,
                ),
            )
        return cursor.rowcount > 0

    @_translated
    async def searches(self, user: str, continuum_id: str) -> list[ContextSearch]:
        check_user_name(user)
        check_continuum_id(continuum_id)
        rows = await self._read(
            f"{_SEARCH} WHERE owner = ? AND continuum_id = ? ORDER BY id", (user, continuum_id)
        )
        return [search_from_row(tuple(row)) for row in rows]

    @_translated
    async def memories_without_vectors(self, *, limit: int = 64) -> list[Memory]:
        rows = await self._read(
            f"{_MEMORY} FROM memories m WHERE m.embedding IS NULL ORDER BY m.id LIMIT ?",
            (limit,),
        )
        return [Memory(*row) for row in rows]

    @_translated
    async def set_memory_vectors(self, vectors: Sequence[tuple[int, Sequence[float]]]) -> None:
        rows = [(encode_vector(v), memory_id) for memory_id, v in vectors]
        async with self._transaction() as db:
            await db.executemany("UPDATE memories SET embedding = ? WHERE id = ?", rows)

    @_translated
    async def memory_vectors(
        self, user: str, *, now: float | None = None
    ) -> list[tuple[Memory, tuple[float, ...]]]:
        check_user_name(user)
        at = time.time() if now is None else now
        rows = await self._read(
            f"{_MEMORY}, m.embedding FROM memories m WHERE m.owner = ?"
            " AND m.embedding IS NOT NULL AND (m.expires_at IS NULL OR m.expires_at > ?)",
            (user, at),
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
        ids = json.dumps(sorted({check_row_id(i, "memory id") for i in memory_ids}))
        async with self._transaction() as db:
            await db.execute(
                "UPDATE memories SET uses = uses + ? WHERE owner = ?"
                " AND id IN (SELECT value FROM json_each(?))",
                (times, user, ids),
            )

    # -- reminders ------------------------------------------------------------------------

    _REMINDER = "SELECT id, text, due_at, created_at, completed_at, origin FROM reminders"

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
            cursor = await db.execute(
                "INSERT INTO reminders (owner, text, due_at, created_at, origin)"
                " VALUES (?, ?, ?, ?, ?)",
                (user, text, due, created, origin),
            )
            reminder_id = cursor.lastrowid
        assert reminder_id is not None
        return Reminder(reminder_id, text, due, created, None, origin)

    @_translated
    async def complete_reminder(
        self, user: str, reminder_id: int, *, now: float | None = None
    ) -> Reminder:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        at = time.time() if now is None else now
        async with self._transaction() as db:
            await db.execute(
                "UPDATE reminders SET completed_at = ?"
                " WHERE owner = ? AND id = ? AND completed_at IS NULL",
                (at, user, reminder_id),
            )
            rows = list(
                await db.execute_fetchall(
                    f"{self._REMINDER} WHERE owner = ? AND id = ?", (user, reminder_id)
                )
            )
        if not rows:
            raise NotFound(f"no reminder #{reminder_id}")
        return Reminder(*rows[0])

    @_translated
    async def reminder(self, user: str, reminder_id: int) -> Reminder:
        check_user_name(user)
        check_row_id(reminder_id, "reminder id")
        rows = list(
            await self._read(f"{self._REMINDER} WHERE owner = ? AND id = ?", (user, reminder_id))
        )
        if not rows:
            raise NotFound(f"no reminder #{reminder_id}")
        return Reminder(*rows[0])

    @_translated
    async def active_reminders(self, user: str, *, limit: int = 50) -> list[Reminder]:
        check_user_name(user)
        rows = await self._read(
            f"{self._REMINDER} WHERE owner = ? AND completed_at IS NULL"
            " ORDER BY due_at IS NULL, due_at, id LIMIT ?",
            (user, limit),
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
        rows = await self._read(
            f"{self._REMINDER} WHERE owner = ? AND completed_at IS NULL"
            " AND due_at >= ? AND due_at < ? ORDER BY due_at",
            (user, lo, hi),
        )
        return [Reminder(*row) for row in rows]

    @_translated
    async def reminders(
        self, user: str, *, include_completed: bool = False, limit: int = 200, after: int = 0
    ) -> list[Reminder]:
        check_user_name(user)
        open_only = "" if include_completed else " AND completed_at IS NULL"
        rows = await self._read(
            f"{self._REMINDER} WHERE owner = ? AND id > ?{open_only} ORDER BY id LIMIT ?",
            (user, after, limit),
        )
        return [Reminder(*row) for row in rows]

    @_translated
    async def delete_reminder(self, user: str, reminder_id: int) -> None:
        check_user_name(user)
        async with self._transaction() as db:
            cursor = await db.execute(
                "DELETE FROM reminders WHERE owner = ? AND id = ?", (user, reminder_id)
            )
            if cursor.rowcount == 0:
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
            cursor = await db.execute(
                "INSERT INTO memories (owner, text, created_at, expires_at, importance)"
                " VALUES (?, ?, ?, ?, ?)",
                (user, text, created, expires, importance),
            )
            memory_id = cursor.lastrowid
        assert memory_id is not None
        return Memory(memory_id, text, created, expires, importance)

    @_translated
    async def memories(
        self, user: str, *, limit: int = 100, before: int | None = None
    ) -> list[Memory]:
        """The user's memories, newest first; with `before`, those older than that id."""
        check_user_name(user)
        where, args = ("", ()) if before is None else (" AND m.id < ?", (before,))
        rows = await self._read(
            f"{_MEMORY} FROM memories m WHERE m.owner = ?{where} ORDER BY m.id DESC LIMIT ?",
            (user, *args, limit),
        )
        return [Memory(*row) for row in rows]

    @_translated
    async def delete_memory(self, user: str, memory_id: int) -> None:
        """Delete one of the user's memories; the delete trigger removes it from the search
        index too. `NotFound` if the user has none by that id."""
        check_user_name(user)
        async with self._transaction() as db:
            cursor = await db.execute(
                "DELETE FROM memories WHERE owner = ? AND id = ?", (user, memory_id)
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no memory #{memory_id}")

    @_translated
    async def search_memories(
        self, user: str, query: str, *, limit: int = 5, now: float | None = None
    ) -> list[MemoryHit]:
        check_user_name(user)
        if limit < 1:
            return []
        terms = query_terms(query)
        if not terms:
            return []
        at = time.time() if now is None else now
        rows = await self._planned_memories(user, terms, at, limit * 4)
        hits = [
            MemoryHit(Memory(*row[:7]), memory_score(row[7], row[4], at - row[2], row[6]))
            for row in rows
        ]
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits[:limit]

    async def _planned_memories(
        self, user: str, terms: list[str], at: float, want: int
    ) -> list[tuple[Any, ...]]:
        """Rows for `search_memories` (memory columns, then a score where lower is
        better), planned and searched in one statement (storage/_fts_plan_sql.py).

        Ranked (the rarest term is rare): the `want` live memories of `user` that BM25
        ranks best. Ranked in the index alone first, as joining every match to its
        memory row (for the owner and expiry) cost twice the ranking itself; only the
        best candidates are joined, each checked (a filtered one comes back as NULLs).
        When too few of them are the user's, or alive, the whole join runs instead: the
        result is the same either way.

        Every word common: the most recent matches, scored by how many of the words
        they hold (each word's matches read from the index within their range of ids).
        Rows end with their kind: 1 ranked, 0 every word common, 2 the status row.
        """
        candidates = want * CANDIDATE_FACTOR
        found = await self._read(
            _MEMORY_SEARCH,
            {**plan_parameters(terms), "user": user, "at": at, "candidates": candidates},
        )
        ((match, *_),) = [row[1:] for row in found if row[-1] == 2]
        ranked = sorted((row[:-1] for row in found if row[-1] == 1), key=lambda row: row[-1])
        if not ranked:  # every word common, or none in the index
            return [tuple(row[:-1]) for row in found if row[-1] == 0]
        rows = [tuple(row) for row in ranked if row[0] is not None]
        if len(rows) >= want or len(ranked) < candidates:
            return rows[:want]
        every = await self._read(
            f"{_MEMORY}, bm25(memories_fts)"
            " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH :match AND {_ALIVE}"
            " ORDER BY bm25(memories_fts) LIMIT :want",
            {"match": match, "user": user, "at": at, "want": want},
        )
        return [tuple(row) for row in every]

    @_translated
    async def search_messages(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[MessageHit]:
        check_user_name(user)
        if limit < 1:
            return []
        if continuum_id is not None:
            check_continuum_id(continuum_id)
        terms = query_terms(query)
        if not terms:
            return []
        candidates = limit * CANDIDATE_FACTOR
        args = {"user": user, "continuum": continuum_id, "limit": limit}
        found = await self._read(
            _MESSAGE_SEARCH, {**plan_parameters(terms), **args, "candidates": candidates}
        )
        # The status row: the plan's FTS5 query, whether it ranks, its candidates.
        ((_, _, _, _, match, _, ranked, seen),) = [row for row in found if row[0] == 0]
        hits = sorted((row for row in found if row[0] == 1), key=lambda r: (r[6], r[7]))
        hits.reverse()  # best first; newest first among equals
        if not ranked or len(hits) >= limit or seen < candidates:
            return [MessageHit(*row[1:7]) for row in hits]
        # The ranking's best candidates were mostly out of scope: every match is joined.
        every = await self._read(
            "WITH kept AS MATERIALIZED (SELECT m.id, -bm25(messages_fts) AS score"
            " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            f" WHERE messages_fts MATCH :match AND {_IN_SCOPE}"
            f" ORDER BY score DESC, m.id DESC LIMIT :limit){_MESSAGE_HITS}",
            {**args, "match": match},
        )
        ordered = sorted(every, key=lambda r: (r[6], r[7]), reverse=True)
        return [MessageHit(*row[1:7]) for row in ordered]

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
                "INSERT INTO documents (owner, label, content, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (owner, label) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                (user, label, content, at),
            )
        return Document(label, content, at)

    @_translated
    async def documents(self, user: str, *, limit: int = -1, after: str = "") -> list[Document]:
        """The user's documents, in label order (they form that user's system prompt)."""
        check_user_name(user)
        rows = await self._read(
            "SELECT label, content, updated_at FROM documents WHERE owner = ? AND label > ?"
            " ORDER BY label LIMIT ?",
            (user, after, limit),
        )
        return [Document(*row) for row in rows]

    @_translated
    async def delete_document(self, user: str, label: str) -> None:
        check_user_name(user)
        async with self._transaction() as db:
            cursor = await db.execute(
                "DELETE FROM documents WHERE owner = ? AND label = ?", (user, label)
            )
            if cursor.rowcount == 0:
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
            taken = list(await db.execute_fetchall("SELECT 1 FROM users WHERE name = ?", (name,)))
            if taken:
                raise UserExists(f"a user named {name!r} already exists")
            await db.execute(
                "INSERT INTO users (name, token_hash, created_at) VALUES (?, ?, ?)",
                (name, token_hash, at),
            )
        return User(name, at)

    @_translated
    async def users(self) -> list[User]:
        rows = await self._read("SELECT name, created_at FROM users ORDER BY name")
        return [User(*row) for row in rows]

    @_translated
    async def user_for_token_hash(self, token_hash: str) -> str | None:
        check_token_hash(token_hash)
        rows = list(
            await self._read(
                "SELECT name, token_hash FROM users WHERE token_hash = ?", (token_hash,)
            )
        )
        # The lookup is by digest (it reveals nothing of the token); the final compare is
        # constant-time all the same.
        for name, stored in rows:
            if hmac.compare_digest(str(stored), token_hash):
                return str(name)
        return None
