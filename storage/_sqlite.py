"""The SQLite adapter (aiosqlite): one file, WAL, one writer, a few readers.

What the store does is the SQL core's (storage/_sql.py); this module is SQLite's driver
and dialect under it:

- One writer connection behind a lock: every write is one `BEGIN IMMEDIATE` transaction,
  shielded from cancellation from BEGIN to COMMIT, so a cancelled caller never leaves half
  a turn behind and a committed turn is always whole.
- A few more connections serve reads, each read on the one with the fewest in flight;
  under WAL they never wait for the writer.
- `synchronous=NORMAL` with WAL: a process killed at any moment (even `kill -9` during a
  commit) loses no committed transaction and leaves a database that opens.
- Full-text search: FTS5 indexes kept by triggers (storage/_migrations.py), each search
  planned and run in one statement (storage/_fts_plan_sql.py).
- One process owns the file: a continuum's lease is the core's in-process count alone.
- Vector recall: sqlite-vec's `vec0` table `memory_vec` (rowid = the memory's id,
  partitioned by owner), loaded into every connection, reader and writer, when the
  `vectors` extra is installed. sqlite-vec 0.1.9 has no approximate index: each search
  scans the user's partition. The partition holds each vector normalized and quantized
  to int8 (a quarter of float32's bytes): a coarse pass finds 2k + 40 candidates there,
  and the exact cosine of each, from the memory's float32 vector, ranks them. Bits
  instead of int8 scan faster, but their ranking needs hundreds of candidates for the
  same recall, and sqlite-vec's top-k selection costs k × the vectors scanned. Once a
  user's vectors are loaded into the vector cache (storage/_vector_cache.py: their
  bits and int8 form in memory, kept true by the writer's temporary triggers), the
  coarse pass is the cache's, in a worker thread, about 15 times faster at 50,000;
  the exact pass stays in SQL.
  Loading an extension needs a sqlite3 module built to allow it: Python's own where it
  is (most Linux builds), otherwise sqlean.py, the same module with extension loading
  built in (the extra installs it).
"""

from __future__ import annotations

import errno
import fcntl
import glob
import importlib
import json
import os
import secrets
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import aiosqlite
import anyio

from ._exceptions import InvalidInput, SchemaTooNew, StorageUnavailable
from ._fts import CANDIDATE_FACTOR, COUNT_CAP, fts_query
from ._fts_plan_sql import plan_ctes, plan_parameters, term_hits
from ._migrations import MIGRATIONS, SCHEMA_VERSION
from ._records import MessageHit, SpaceReclaimed
from ._shared import encode_vector
from ._sql import MEMORY, USER_TABLES, Connection, SQLStore
from ._time import from_row
from ._validation import excerpt

if TYPE_CHECKING:
    from ._vector_cache import VectorCache

# A first pass of the nearest memories: for how many candidates, the exact pass's rows
# over them and whether they were all the user's vectors (None: the pass cannot tell);
# None where it cannot answer.
_Pass = Callable[[int], Awaitable[tuple[list[Any], bool | None] | None]]

__all__ = ["SQLiteStorage"]

_VEC_MAX_K = 4096  # sqlite-vec's largest k
_STATUS = 2  # a status row's last column (the memory and nearest statements)
_MAX_FILE_NAME_BYTES = 255  # a file name's longest on Linux, macOS and Windows
# A backup that fails with one of these is refused for its path (400), not reported as
# the store being unavailable: no permission, a read-only or special file system, no
# such directory.
_PATH_ERRNOS = frozenset(
    (
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ENOENT,
        errno.ENAMETOOLONG,
        errno.EXDEV,
        errno.EINVAL,
    )
)
_AUTO_VACUUM_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
# The vector index holds each vector normalized and quantized to int8 (1 byte a
# dimension, 'unit': [-1, 1] in 255 steps), compared by L2 distance: for normalized
# vectors the same order as the cosine's, up to the quantization. It is the coarse pass
# (a quarter of float32's bytes, and integer arithmetic); the exact cosine re-ranks.
_COARSE = "int8"
_QUANTIZED = "vec_quantize_int8(vec_normalize({}), 'unit')"
COARSE_EXTRA = 40  # candidates beyond 2k the coarse pass hands the exact one
# The in-memory first pass (storage/_vector_cache.py): how many vectors its sign bits
# keep for the int8 ranking, at least (recall@10 against the exact cosine, the bench's
# 50,000 vectors: 400 → 0.95, 800 → 0.986, 1,600 → 0.998), and its default budget.
CACHE_COARSE_MIN = 1000
CACHE_COARSE_PER_K = 50
VECTOR_CACHE_BYTES = 256 * 1024 * 1024
READERS = 3  # read connections (WAL: none of them waits for the writer)

_READER_MMAP_BYTES = 256 * 1024 * 1024
# Free space worth giving back to the file system: less stays for SQLite to reuse (a
# delete's pages are taken again by the next inserts; giving back each few would only
# make the file shrink and grow).
RECLAIM_MIN_FREE_BYTES = 1024 * 1024
_RECLAIM_STEP_PAGES = 1024  # pages per write transaction: a turn's commit waits one step


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _driver(vec: ModuleType | None) -> ModuleType:
    """The sqlite3 module connections are made with (see the module's doc)."""
    if vec is None or hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    return _optional("sqlean") or sqlite3


_VEC = _optional("sqlite_vec")
DRIVER = _driver(_VEC)
# Whether vector recall is available: sqlite-vec installed and loadable.
VECTORS = _VEC is not None and hasattr(DRIVER.Connection, "enable_load_extension")


def _clear_killed_backups(path: Path) -> None:
    """Remove what backups to `path` that were killed mid-copy left beside it (kill -9, a
    cron's `timeout`, a daemon that died): each a partial copy of every user's data, with
    its journal, that nothing else would ever remove. A partial whose writer still runs
    is locked by it (two backups to one path at once each write their own), and kept."""
    for partial in path.parent.glob(f"{glob.escape(path.name)}.*.partial"):
        try:
            fd = os.open(partial, os.O_RDONLY)
        except OSError:  # gone meanwhile (its backup finished), or not ours to read
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a backup in progress
            os.close(fd)
            continue
        try:
            for leftover in (partial, partial.with_name(f"{partial.name}-journal")):
                leftover.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _vector_cache(path: Path, budget: int) -> VectorCache | None:
    """The in-memory first pass, where vectors are in use and numpy (2.0+) is here."""
    if not VECTORS or budget <= 0:
        return None
    try:
        from ._vector_cache import VectorCache
    except ImportError:  # numpy missing or too old: sqlite-vec's pass alone
        return None

    # Resolved now: a relative path read later would follow the process's chdir.
    uri = f"{path.resolve().as_uri()}?mode=ro"

    def connect() -> Any:
        # Through DRIVER, the SQLite library of the store's own connections (see
        # `backup`): read-only, for the cache's loading thread.
        return DRIVER.connect(uri, uri=True)

    return VectorCache(connect, budget)


# The writer's temporary triggers: every statement that changes a memory's vector or
# owner, or deletes a memory with a vector, names the memory to the vector cache (its
# ids become dirty when the transaction commits). Temporary: on the writer connection
# alone, never in the file.
_VECTOR_TRIGGERS = (
    "CREATE TEMP TRIGGER vector_cache_insert AFTER INSERT ON main.memories"
    " WHEN NEW.embedding IS NOT NULL BEGIN SELECT vector_cache_touch(NEW.id, NEW.owner); END",
    "CREATE TEMP TRIGGER vector_cache_update AFTER UPDATE OF embedding, owner, id"
    " ON main.memories WHEN OLD.embedding IS NOT NULL OR NEW.embedding IS NOT NULL"
    " BEGIN SELECT vector_cache_touch(OLD.id, OLD.owner);"
    " SELECT vector_cache_touch(NEW.id, NEW.owner); END",
    "CREATE TEMP TRIGGER vector_cache_delete AFTER DELETE ON main.memories"
    " WHEN OLD.embedding IS NOT NULL BEGIN SELECT vector_cache_touch(OLD.id, OLD.owner); END",
)


def _open_connection(path: Path) -> Any:
    """One connection, made on its aiosqlite thread, with sqlite-vec loaded when present.

    The searches are large statements (5 to 25 ms to compile): the statement cache is
    kept large enough that the other statements (some of them built per call) never
    push them out.
    """
    conn = DRIVER.connect(str(path), isolation_level=None, cached_statements=512)
    if VECTORS and _VEC is not None:
        try:
            conn.enable_load_extension(True)
            _VEC.load(conn)
            conn.enable_load_extension(False)  # nothing else is loaded through SQL
        except BaseException:
            conn.close()
            raise
    return conn


_SQLITE_HEADER = b"SQLite format 3\x00"


def _is_database_or_empty(path: Path) -> bool:
    with open(path, "rb") as file:
        head = file.read(len(_SQLITE_HEADER))
    return not head or head == _SQLITE_HEADER


def _create_private(path: Path) -> None:
    """Create a new database file readable by its owner alone (SQLite would make it
    0644 under the usual umask, and its -wal and -shm files take the database's mode);
    a file that exists keeps the mode its owner gave it."""
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


async def _connect(path: Path, *, reader: bool) -> aiosqlite.Connection:
    conn = aiosqlite.Connection(lambda: _open_connection(path), iter_chunk_size=64)
    await conn
    try:
        if not reader:
            # Free pages can go back to the file system (`reclaim_space`, which the
            # background worker calls): only a new store takes this, before its first
            # table; an older one keeps its mode (see `reclaim_space`).
            # 8 KiB pages for a new store (an older one keeps its own): a turn record
            # (about 2.4 KB) filled a 4 KiB page alone, 40% of the turns table unused;
            # three share 8 KiB (bench/soak: the file grew 4.95 MB per 1,000 turns for
            # 2.79 MB stored, 3.59 MB with these pages, at the same turn rate).
            await conn.execute("PRAGMA page_size=8192")
            await conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
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
    # Every pending migration in one transaction: a store is at its old version or at
    # the new one, never between. Rebuilding a table under a new key needs foreign keys
    # off (a no-op inside a transaction, so it is switched here); the references are
    # checked before the commit.
    scripts = []
    for version, script in pending:
        scripts.append(script)
        scripts.append(
            f"UPDATE schema_version SET version = {version};"
            if has_row
            else f"INSERT INTO schema_version (version) VALUES ({version});"
        )
        has_row = True
    await conn.execute("PRAGMA foreign_keys=OFF")
    try:
        try:
            await conn.executescript("BEGIN IMMEDIATE;\n" + "\n".join(scripts))
            broken = list(await conn.execute_fetchall("PRAGMA foreign_key_check"))
            if broken:
                raise DRIVER.IntegrityError(
                    f"migrating to {pending[-1][0]} leaves broken references: {broken[:3]}"
                )
            await conn.execute("COMMIT")
        except DRIVER.Error:
            if conn.in_transaction:
                await conn.execute("ROLLBACK")
            raise
    finally:
        await conn.execute("PRAGMA foreign_keys=ON")
    return pending[-1][0]


_ALIVE = "m.owner = :user AND (m.expires_at IS NULL OR m.expires_at > :at)"
# A memory search, planned and searched in one statement (`_memory_rows`). Its text
# is the same for every query, so each reader compiles it once (warmed on opening).
_MEMORY_SEARCH = (
    f"WITH {plan_ctes('memories_fts')},"
    " top AS MATERIALIZED (SELECT rowid AS id, bm25(memories_fts) AS score"
    " FROM memories_fts WHERE memories_fts MATCH (SELECT chosen FROM plan)"
    " ORDER BY score, rowid DESC LIMIT +:candidates),"
    " recent AS MATERIALIZED (SELECT m.id"
    " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
    f" WHERE memories_fts MATCH (SELECT every FROM plan) AND {_ALIVE}"
    f" ORDER BY memories_fts.rowid DESC LIMIT {COUNT_CAP}),"
    " bounds AS MATERIALIZED (SELECT min(id) AS lo, max(id) AS hi FROM recent),"
    f" hits AS MATERIALIZED ({term_hits('memories_fts')}),"
    " held AS MATERIALIZED (SELECT id, count(*) AS n FROM hits"
    " WHERE id IN (SELECT id FROM recent) GROUP BY id)"
    f" {MEMORY}, top.score, 1 FROM top LEFT JOIN memories m ON m.id = top.id AND {_ALIVE}"
    f" UNION ALL {MEMORY}, -held.n, 0 FROM held JOIN memories m ON m.id = held.id"
    # The status row: the plan's ranked query, for the whole join when it is needed.
    " UNION ALL SELECT NULL, (SELECT chosen FROM plan), NULL, NULL, NULL, NULL, NULL, NULL, 2"
)
_MEMORY_SEARCH_WARMUP = {**plan_parameters([]), "user": "", "at": 0.0, "candidates": 1}


def _nearest(near: str, before: str = "") -> str:
    """The nearest memories: the :top best by exact cosine of those the `near` query
    names, and `among`, each with its exact cosine and whether it is of the best,
    expired ones left out. (Only the best become rows: each row is a Memory built in
    Python, and the candidates are dozens.) `before`: CTEs `near` reads."""
    return (
        f"WITH {before}near AS MATERIALIZED ({near}),"
        " best AS MATERIALIZED (SELECT m.id FROM memories m WHERE m.id IN (SELECT id FROM near)"
        f" AND {_ALIVE} AND m.embedding IS NOT NULL"
        " ORDER BY vec_distance_cosine(m.embedding, :vector) LIMIT :top)"
        f" {MEMORY}, 1 - vec_distance_cosine(m.embedding, :vector),"
        " m.id IN (SELECT id FROM best) FROM memories m"
        " WHERE m.id IN (SELECT id FROM best UNION ALL SELECT value FROM json_each(:among))"
        f" AND {_ALIVE} AND m.embedding IS NOT NULL"
    )


# `near` by the int8 index's coarse pass; by the exact cosine of every live vector of
# the user (where expired memories crowd the coarse pass).
_NEAREST_COARSE = _nearest(
    "SELECT rowid AS id FROM memory_vec"
    f" WHERE embedding MATCH {_QUANTIZED.format(':vector')} AND k = :k AND owner = :user"
)
# `near` as the vector cache's first pass named them (storage/_vector_cache.py)
_NEAREST_LISTED = _nearest("SELECT value AS id FROM json_each(:near)")
# The same with the first pass in the statement: the readers' SQL function
# `vector_cache_pass` runs it on the reader's own thread, so both passes take one trip
# through a thread, not two (a search's median 1.8 → 1.2 ms at 50,000 vectors). Its
# status row (last column 2) holds how many ids the pass named; NULL where the cache
# could not answer there (the user's vectors not loaded, or written since their last
# search: `_cache_pass` then takes the whole way).
_NEAREST_CACHED = (
    _nearest(
        "SELECT value AS id FROM json_each((SELECT ids FROM cached))",
        "cached AS MATERIALIZED"
        " (SELECT vector_cache_pass(:user, :vector, :coarse, :wanted) AS ids), ",
    )
    + " UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " (SELECT json_array_length(ids) FROM cached), 2"
)
_NEAREST_EXACT = _nearest(
    f"SELECT m.id FROM memories m WHERE {_ALIVE} AND m.embedding IS NOT NULL"
    " ORDER BY vec_distance_cosine(m.embedding, :vector) LIMIT :k"
)

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
    " ORDER BY score DESC, rowid DESC LIMIT +:candidates),"
    " ranked AS MATERIALIZED (SELECT top.id, top.score FROM top"
    f" JOIN messages m ON m.id = top.id WHERE {_IN_SCOPE}"
    " ORDER BY top.score DESC, top.id DESC LIMIT +:limit),"
    " recent AS MATERIALIZED (SELECT m.id"
    " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
    f" WHERE messages_fts MATCH (SELECT every FROM plan) AND {_IN_SCOPE}"
    f" ORDER BY messages_fts.rowid DESC LIMIT {COUNT_CAP}),"
    " bounds AS MATERIALIZED (SELECT min(id) AS lo, max(id) AS hi FROM recent),"
    f" hits AS MATERIALIZED ({term_hits('messages_fts')}),"
    " held AS MATERIALIZED (SELECT id, CAST(count(*) AS REAL) AS score FROM hits"
    " WHERE id IN (SELECT id FROM recent) GROUP BY id ORDER BY score DESC, id DESC"
    " LIMIT +:limit),"
    " kept AS MATERIALIZED (SELECT id, score FROM ranked UNION ALL SELECT id, score FROM held),"
    " matching AS MATERIALIZED (SELECT CASE WHEN ranked THEN chosen ELSE every END AS q"
    " FROM plan)"
    + _MESSAGE_HITS.replace("MATCH :match", "MATCH (SELECT q FROM matching)")
    + " UNION ALL SELECT 0, NULL, NULL, NULL, (SELECT q FROM matching), NULL,"
    " (SELECT ranked FROM plan), (SELECT count(*) FROM top)"
)


class SQLiteStorage(SQLStore):
    """The embedded default storage. Open with `await SQLiteStorage.open(path)`."""

    shared = False  # one process owns the file: nobody else writes behind our back
    _ERRORS = (DRIVER.Error,)
    _TURN_ORDER = "rowid"
    _NO_LIMIT = -1
    # An expression, not a bare parameter: with the SQLite sqlean builds (ENABLE_STAT4)
    # a statement with a bare parameter as its LIMIT is compiled again at every
    # execution (storage/_fts_plan_sql.py); the turn's reads of reminders, documents and
    # segments were, each turn.
    _LIMIT = "+?"
    _SEGMENT_INDEXES = ("segments_fts",)
    # The segment summaries' index is a table of its own (no trigger keeps it): a
    # deleted user's entries go before their segments.
    _USER_TABLES = (
        ("segments_fts", "rowid IN (SELECT id FROM segments WHERE owner = ?)"),
        *USER_TABLES,
    )

    def __init__(
        self,
        path: Path,
        writer: aiosqlite.Connection,
        readers: list[aiosqlite.Connection],
        segment_gap: float,
        vector_cache: VectorCache | None = None,
    ) -> None:
        super().__init__(segment_gap)
        self.path = path
        self._writer = writer
        self._readers = readers
        self._in_flight = [0] * len(readers)  # reads in flight per read connection
        self._write_lock = anyio.Lock()
        self._vector_cache = vector_cache

    async def backup(self, path: Path) -> int:
        self._check_open()  # a closed store's file may be another process's by now
        self._check_backup_path(path)
        # A name of its own per backup: two at once to one path each write theirs, and
        # the last rename wins with a whole file (a shared name tore one under the other).
        partial = path.with_name(f"{path.name}.{secrets.token_hex(4)}.partial")

        def copy() -> int:
            # SQLite's online backup, on a connection of its own (the store's keep
            # serving): one step, so the copy is one consistent snapshot while turns
            # write (WAL: a reader never blocks the writer). Written aside, made durable,
            # then renamed: a file at `path` is always a whole backup.
            # Both ends through DRIVER, the SQLite library the store's own connections
            # use: where that is sqlean's, a connection of Python's sqlite3 is another
            # copy of SQLite in this process, blind to the store's locks; closing it
            # checkpointed and deleted the live WAL under the store's connections (a
            # daemon backed up through the API died of SIGBUS, or lost its writes).
            # A path this process cannot write fails here; the copy holds every user's
            # data (and token digests), so it is its owner's alone, as the store is.
            _clear_killed_backups(path)
            # Held while it is written: a later backup clears only a partial no live
            # writer holds (the lock goes with a process that was killed). Locked before
            # it is named a partial: created under its own name, another backup could
            # find it between its creation and its lock, take it for a killed one's and
            # remove it (two backups to one path at once: "disk I/O error").
            claim = partial.with_name(f"{partial.name}.new")
            held = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            try:
                fcntl.flock(held, fcntl.LOCK_EX)
                os.rename(claim, partial)
                source = DRIVER.connect(str(self.path))
                try:
                    target = DRIVER.connect(str(partial))
                    try:
                        source.backup(target)
                    finally:
                        target.close()
                finally:
                    source.close()
                with open(partial, "rb+") as written:
                    os.fsync(written.fileno())
                os.replace(partial, path)
            finally:
                partial.unlink(missing_ok=True)  # a failed copy leaves nothing beside
                claim.unlink(missing_ok=True)
                os.close(held)
            return path.stat().st_size

        try:
            return await anyio.to_thread.run_sync(copy)
        except OSError as exc:
            if exc.errno in _PATH_ERRNOS:  # the path's fault, not the store's
                raise InvalidInput(
                    f"cannot write a backup at {excerpt(str(path), 80)!r}: {exc.strerror}"
                ) from exc
            raise StorageUnavailable(f"the backup to {path} failed: {exc}") from exc
        except DRIVER.Error as exc:
            raise StorageUnavailable(f"the backup to {path} failed: {exc}") from exc

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        segment_gap: float = 1800.0,
        schema_upto: int | None = None,
        vector_cache_bytes: int = VECTOR_CACHE_BYTES,
    ) -> SQLiteStorage:
        """Open (creating and migrating as needed) the database at `path`.

        `vector_cache_bytes` bounds the memory that vector recall's first pass keeps
        (storage/_vector_cache.py; 0: none, every search scans sqlite-vec's index).
        `schema_upto` stops migrations early; it exists for upgrade tests.
        """
        db_path = Path(path)
        try:
            db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _create_private(db_path)
            writer = await _connect(db_path, reader=False)
        except (OSError, DRIVER.Error) as exc:
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
            cache = None if schema_upto is not None else _vector_cache(db_path, vector_cache_bytes)
            if cache is not None:
                await writer.create_function("vector_cache_touch", 2, cache.touched_in_transaction)
                for reader in readers:
                    await reader.create_function("vector_cache_pass", 4, cache.listed)
                for trigger in _VECTOR_TRIGGERS:
                    await writer.execute(trigger)
            return cls(db_path, writer, readers, segment_gap, cache)
        except BaseException as exc:
            # Every connection owns a (non-daemon) thread: leaving one open on a failed
            # open would keep the whole process alive.
            with anyio.CancelScope(shield=True):
                for conn in (*readers, writer):
                    await conn.close()
            if isinstance(exc, DRIVER.Error):
                raise StorageUnavailable(f"cannot open the database at {db_path}: {exc}") from exc
            raise

    async def _close(self) -> None:
        if self._vector_cache is not None:
            await anyio.to_thread.run_sync(self._vector_cache.close)
        async with self._write_lock:  # a write under way finishes first
            for reader in self._readers:
                await reader.close()
            await self._writer.close()

    async def store_id(self) -> str:
        # The file itself (device and inode): the same through a symlink or a relative path.
        try:
            found = await anyio.Path(self.path).stat()
        except OSError as exc:
            raise StorageUnavailable(f"the database file cannot be read: {exc}") from exc
        return f"sqlite:{found.st_dev}:{found.st_ino}"

    async def _fetch(self, sql: str, args: Any) -> list[Any]:
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
            return list(await self._readers[index].execute_fetchall(sql, args))
        finally:
            self._in_flight[index] -= 1

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._write_lock:
            with anyio.CancelScope(shield=True):
                await self._writer.execute("BEGIN IMMEDIATE")
                cache = self._vector_cache
                try:
                    yield self._writer
                except BaseException:
                    await self._writer.execute("ROLLBACK")
                    if cache is not None:
                        cache.rolled_back()
                    raise
                await self._writer.execute("COMMIT")
                if cache is not None:
                    cache.committed()

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[aiosqlite.Connection]:
        # One read transaction on a connection of its own (WAL: a snapshot the writer
        # never waits for); on a shared reader it would hold the other reads in the past.
        conn = await _connect(self.path, reader=True)
        try:
            await conn.execute("BEGIN")
            yield conn
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()

    def _in_list(self, values: Sequence[Any], sql_type: str) -> tuple[str, Any]:
        return "IN (SELECT value FROM json_each(?))", json.dumps(list(values))

    def _json_int(self, column: str, *path: str) -> str:
        return f"json_extract(CAST({column} AS TEXT), '$.{'.'.join(path)}')"

    _json_text = _json_int  # json_extract gives each value its own SQL type

    async def _index_segment(self, db: Connection, segment_id: int, text: str) -> None:
        # A summary is indexed once written (rowid = the segment's id), replacing any
        # earlier summary of the segment.
        await db.execute("DELETE FROM segments_fts WHERE rowid = ?", (segment_id,))
        await db.execute("INSERT INTO segments_fts (rowid, text) VALUES (?, ?)", (segment_id, text))

    def _segment_match(self, terms: list[str]) -> tuple[str, str, Any]:
        index = "segments_fts JOIN segments s ON s.id = segments_fts.rowid"
        # Equal ranks: the newest first, as PostgreSQL's (`s.id DESC`).
        order = "bm25(segments_fts), s.id DESC"
        return f"{index} WHERE segments_fts MATCH ?", order, fts_query(terms)

    async def _memory_rows(self, user: str, terms: list[str], at: float, want: int) -> list[Any]:
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
            f"{MEMORY}, bm25(memories_fts)"
            " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH :match AND {_ALIVE}"
            " ORDER BY bm25(memories_fts), m.id DESC LIMIT :want",
            {"match": match, "user": user, "at": at, "want": want},
        )
        return [tuple(row) for row in every]

    async def _prepare_vectors(self, db: Connection, dimensions: int, *, reset: bool) -> None:
        if not VECTORS:
            raise InvalidInput(
                "vector recall on SQLite needs the sqlite-vec extension:"
                " pip install '.[vectors]' from the Frontmind clone"
            )
        found = list(
            await db.execute_fetchall("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'", ())
        )
        # The index of an earlier release (float32 vectors) is made anew, from the
        # memories' own vectors; another embedder's (`reset`) is dropped with them.
        earlier = bool(found) and f"{_COARSE}[" not in str(found[0][0])
        if reset or earlier:
            await db.execute("DROP TABLE IF EXISTS memory_vec", ())
        elif await self._has_vector_index(db):
            return
        await db.execute(
            "CREATE VIRTUAL TABLE memory_vec USING vec0(owner TEXT PARTITION KEY,"
            f" embedding {_COARSE}[{dimensions}])",
            (),
        )
        # The memories' own vectors indexed now: those of an earlier index, and those
        # stored without one (imported where sqlite-vec was missing).
        await db.execute(
            "INSERT INTO memory_vec (rowid, owner, embedding)"
            f" SELECT id, owner, {_QUANTIZED.format('embedding')} FROM memories"
            " WHERE embedding IS NOT NULL AND length(embedding) = ?",
            (4 * dimensions,),
        )

    def _check_backup_path(self, path: Path) -> None:
        """Refuse, before anything is written, a backup path that names no file this
        store could write whole: the backup replaces what is there by a rename, which
        onto the store's own files would swap the database under its connections (its
        later writes lost), and onto a device, a directory or /proc would replace it."""
        shown = repr(excerpt(str(path), 80))
        if "\0" in str(path):
            raise InvalidInput(f"the backup path {shown} holds a NUL character")
        if not path.name or path.name in (".", ".."):
            raise InvalidInput(f"the backup path {shown} names no file")
        if len(os.fsencode(path.name)) > _MAX_FILE_NAME_BYTES:
            raise InvalidInput(f"the backup path {shown} has a file name that is too long")
        try:
            target = path.resolve()
            live = self.path.resolve()
            own = {live.name + suffix for suffix in ("", "-wal", "-shm", "-journal")}
            if target.parent == live.parent and target.name in own:
                raise InvalidInput(
                    f"the backup path {shown} is the store's own database (or its log):"
                    " back up to another file"
                )
            if not target.parent.is_dir():
                raise InvalidInput(f"the backup path {shown} is in no existing directory")
            if target.exists() and not target.is_file():
                raise InvalidInput(f"the backup path {shown} is not a regular file")
            if target.is_file() and not _is_database_or_empty(target):
                # It holds someone's data, and the backup (every user's text, byte for
                # byte) in its place could be read as that file: refused.
                raise InvalidInput(
                    f"the backup path {shown} is a file that is not a SQLite database:"
                    " a backup replaces only an earlier backup"
                )
        except OSError as exc:
            # Looking it up failed (a directory's name over the system's limit, one this
            # process may not search): the path's fault, refused as the copy's would be.
            if exc.errno not in _PATH_ERRNOS:
                raise
            raise InvalidInput(f"the backup path {shown} cannot be used: {exc.strerror}") from None

    async def _purge_deleted(self, db: Connection) -> None:
        """FTS5 deletes by marker: a deleted row's words stay in the index's segments
        until they merge. A forgotten user's go now: each index merged whole (a cost
        in proportion to the index, for a rare command)."""
        for table in ("messages_fts", "memories_fts", "segments_fts"):
            await db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')", ())

    async def reclaim_space(
        self, *, min_free_bytes: int = RECLAIM_MIN_FREE_BYTES
    ) -> SpaceReclaimed:
        """SQLite keeps the pages of deleted rows in the file, free for its next writes;
        at `min_free_bytes` of them or more, they go back to the file system
        (`PRAGMA incremental_vacuum`, a step at a time between other writes, then a
        checkpoint: under WAL the file shrinks when the log is written back into it).
        A store made before incremental auto-vacuum cannot (its free bytes are counted
        in `stuck_bytes`): switching it rewrites the whole file, which the README's
        "Reclaiming space" shows, rather than a migration doing it unasked."""
        ((free, mode, page),) = await self._read(
            "SELECT (SELECT freelist_count FROM pragma_freelist_count),"
            " (SELECT auto_vacuum FROM pragma_auto_vacuum),"
            " (SELECT page_size FROM pragma_page_size)"
        )
        if free * page < min_free_bytes:
            return SpaceReclaimed(0, 0)
        if mode != _AUTO_VACUUM_INCREMENTAL:
            return SpaceReclaimed(0, free * page)
        freed = 0
        while free > 0:
            async with self._transaction() as db:
                await db.execute_fetchall(f"PRAGMA incremental_vacuum({_RECLAIM_STEP_PAGES})", ())
                ((left,),) = await db.execute_fetchall("PRAGMA freelist_count", ())
            if left >= free:  # nothing more to give back
                break
            freed, free = freed + free - left, left
        try:
            async with self._write_lock:
                await self._writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except DRIVER.Error as exc:
            raise StorageUnavailable(f"the checkpoint after a vacuum failed: {exc}") from exc
        return SpaceReclaimed(freed * page, 0)

    async def _has_vector_index(self, db: Connection) -> bool:
        return bool(
            await db.execute_fetchall(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_vec'", ()
            )
        )

    async def _ready_imported_vectors(self, db: Connection, dimensions: int) -> bool:
        if not VECTORS:
            return False
        await self._prepare_vectors(db, dimensions, reset=False)
        return True

    async def _index_vectors(
        self, db: Connection, vectors: Sequence[tuple[int, Sequence[float]]]
    ) -> None:
        await self._unindex_vectors(db, [memory_id for memory_id, _ in vectors])
        await db.executemany(
            "INSERT INTO memory_vec (rowid, owner, embedding)"
            f" SELECT id, owner, {_QUANTIZED.format('?')} FROM memories WHERE id = ?",
            [(encode_vector(vector), memory_id) for memory_id, vector in vectors],
        )

    async def _unindex_vectors(self, db: Connection, memory_ids: Sequence[int]) -> None:
        # With no embedder in use here, the index is still kept where it exists and can
        # be loaded. Where it cannot (no sqlite-vec), a row left behind is never found
        # (the search keeps memories whose vector is set, and a new vector replaces it).
        if self._dimensions is None and not (VECTORS and await self._has_vector_index(db)):
            return
        await db.executemany("DELETE FROM memory_vec WHERE rowid = ?", [(i,) for i in memory_ids])

    async def _forget_vectors(self, db: Connection, user: str) -> int | None:
        # By owner (the index's partition), not by the memories: entries whose memory
        # went while no embedder was loaded go too.
        if self._vector_cache is not None:
            self._vector_cache.forget(user)
        if not await self._has_vector_index(db):
            return None
        if not VECTORS:
            raise StorageUnavailable(
                "this store keeps a vector index (sqlite-vec's memory_vec) that cannot be"
                " opened here, so the user's vectors cannot be deleted with the rest:"
                " pip install '.[vectors]' from the Frontmind clone, then delete the user again"
            )
        ((count,),) = await db.execute_fetchall(
            "SELECT count(*) FROM memory_vec WHERE owner = ?", (user,)
        )
        await db.execute("DELETE FROM memory_vec WHERE owner = ?", (user,))
        return int(count)

    async def _nearest_rows(
        self, user: str, vector: Sequence[float], k: int, at: float, among: Sequence[int]
    ) -> list[Any]:
        # Two passes: a first one finds a few dozen more candidates than k, through the
        # vector cache where the user's vectors are loaded, else by scanning the user's
        # partition of sqlite-vec's int8 index; the exact cosine of each candidate is
        # then computed in SQL from the memory's own float32 vector, expired ones left
        # out, and the k best kept, with the similarities of `among` read the same way
        # (`_widened`: where expired memories crowd the candidates, it looks further).
        args = {
            "vector": encode_vector(vector),
            "user": user,
            "at": at,
            "among": json.dumps(list(among)),
            "top": k,
        }
        if k == 0:  # the similarities of `among` alone
            return await self._read(_NEAREST_LISTED, {**args, "near": "[]"})
        cache = self._vector_cache
        if cache is not None and len(vector) == self._dimensions:
            rows = await self._widened(
                self._cache_pass(cache, user, vector, k, args), user, k, args
            )
            if rows is not None:
                return rows
        rows = await self._widened(self._index_pass(args), user, k, args)
        assert rows is not None  # sqlite-vec's pass always answers
        return rows

    async def _widened(
        self, first_pass: _Pass, user: str, k: int, args: dict[str, Any]
    ) -> list[Any] | None:
        """The exact pass over `first_pass`'s candidates, 2k + 40 of them, then eight
        times as many while expired memories crowd out the live (fewer than k of them
        among the candidates while the user has more vectors), and past sqlite-vec's
        largest k every live vector of the user scored exactly. None where the first
        pass cannot answer (the vector cache dropped the user)."""
        wanted, vectors = min(2 * k + COARSE_EXTRA, _VEC_MAX_K), None
        while True:
            answer = await first_pass(wanted)
            if answer is None:
                return None
            rows, every = answer
            if sum(row[8] for row in rows) >= k:  # row[8]: of the best, not of `among`
                return rows
            if every is None:  # the pass cannot tell: the user's vectors, counted once
                if vectors is None:
                    ((vectors,),) = await self._read(
                        "SELECT count(*) FROM memories WHERE owner = ? AND embedding IS NOT NULL",
                        (user,),
                    )
                every = vectors <= wanted
            if every:  # every vector of the user was a candidate
                return rows
            if wanted == _VEC_MAX_K:
                return await self._read(_NEAREST_EXACT, {**args, "k": k})
            wanted = min(8 * wanted, _VEC_MAX_K)

    def _index_pass(self, args: dict[str, Any]) -> _Pass:
        """The first pass through sqlite-vec's int8 index: a scan of the user's partition."""

        async def candidates(wanted: int) -> tuple[list[Any], bool | None]:
            return await self._read(_NEAREST_COARSE, {**args, "k": wanted}), None

        return candidates

    def _cache_pass(
        self, cache: VectorCache, user: str, vector: Sequence[float], k: int, args: dict[str, Any]
    ) -> _Pass:
        """The first pass through the vector cache, in a worker thread (None where the
        user's vectors are not loaded: their load is started). The ids written since
        the user's last search are read again first."""
        scale = max(CACHE_COARSE_MIN, CACHE_COARSE_PER_K * k) / (2 * k + COARSE_EXTRA)

        async def candidates(wanted: int) -> tuple[list[Any], bool | None] | None:
            coarse = int(scale * wanted)  # the sign pass's share grows with `wanted`
            found = await self._read(_NEAREST_CACHED, {**args, "coarse": coarse, "wanted": wanted})
            ((named,),) = [row[7:8] for row in found if row[8] == _STATUS]
            if named is not None:
                return [row for row in found if row[8] != _STATUS], named < wanted
            near = await anyio.to_thread.run_sync(cache.first_pass, user, vector, coarse, wanted)
            if isinstance(near, dict):
                dirty = near
                rows = await self._read(
                    "SELECT id, owner, embedding FROM memories"
                    " WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(list(dirty)),),
                )

                def refreshed() -> list[int] | None:
                    cache.refresh(user, dirty, rows)
                    return cache.nearest(user, vector, coarse, wanted)

                near = await anyio.to_thread.run_sync(refreshed)
            if near is None:
                return None
            found = await self._read(_NEAREST_LISTED, {**args, "near": json.dumps(near)})
            return found, len(near) < wanted

        return candidates

    async def _message_hits(
        self, user: str, terms: list[str], continuum_id: str | None, limit: int
    ) -> list[MessageHit]:
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
            return [from_row(MessageHit, row[1:7]) for row in hits]
        # The ranking's best candidates were mostly out of scope: every match is joined.
        every = await self._read(
            "WITH kept AS MATERIALIZED (SELECT m.id, -bm25(messages_fts) AS score"
            " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            f" WHERE messages_fts MATCH :match AND {_IN_SCOPE}"
            f" ORDER BY score DESC, m.id DESC LIMIT +:limit){_MESSAGE_HITS}",
            {**args, "match": match},
        )
        ordered = sorted(every, key=lambda r: (r[6], r[7]), reverse=True)
        return [from_row(MessageHit, row[1:7]) for row in ordered]
