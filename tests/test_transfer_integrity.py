"""Moving a store without losing its integrity, on SQLite and PostgreSQL (real servers).

- A migration resumed after its source took another turn brings every changed row up
  to date (the continuum's counts, a rotated token, a document, a reminder, a memory's
  uses and vector), and its digest covers those rows, so a difference is caught.
- An export is one snapshot: a turn a replica commits meanwhile, or a row it deletes,
  neither tears a continuum nor moves another row out of the file.
- An import refuses a value of another type than its column's, naming the line.
- Vectors of no named embedder are not taken for the importing store's embedder's.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import msgspec
import pytest

from frontmind.cli._data import read_export
from storage import (
    ContinuumModel,
    ImportCollision,
    InvalidInput,
    PostgresStorage,
    SQLiteStorage,
    TableRows,
    decode_line,
    encode_header,
    encode_row,
    migrate,
)
from storage._transfer import COLUMNS
from tests._daemon import run_cli
from tests._factories import turn
from tests._postgres import PostgresServer

pytestmark = pytest.mark.anyio

Store = SQLiteStorage | PostgresStorage
Opener = Callable[[str], Awaitable[Store]]
KINDS = ["sqlite", "postgres"]
EMBEDDER = "tests:Embedder"
VECTOR = (0.0, 0.0, 0.0, 1.0)


@pytest.fixture
async def new_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[str], Awaitable[Store]]]:
    """Opens a new, empty store of a kind ("sqlite", "postgres"); all closed at the end."""
    opened: list[Store] = []

    async def new(kind: str) -> Store:
        store: Store
        if kind == "sqlite":
            store = await SQLiteStorage.open(tmp_path / f"{len(opened)}" / "frontmind.db")
        else:
            server: PostgresServer = request.getfixturevalue("pg_server")
            store = await PostgresStorage.open(server.new_database())
        opened.append(store)
        return store

    yield new
    for store in opened:
        await store.close()


async def replica_of(store: Store) -> Store:
    """The same database, opened a second time (PostgreSQL: another replica's pool)."""
    if isinstance(store, SQLiteStorage):
        return await SQLiteStorage.open(store.path)
    return await PostgresStorage.open(store.url)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def everything(store: Store) -> list[TableRows]:
    return [part async for part in store.export_rows()]


# -- a migration resumed: changed rows brought up to date --------------------------------


@pytest.mark.parametrize("target_kind", KINDS)
@pytest.mark.parametrize("source_kind", KINDS)
async def test_a_resumed_migration_brings_every_changed_row_up_to_date(
    source_kind: str, target_kind: str, new_store: Opener
) -> None:
    source, target = await new_store(source_kind), await new_store(target_kind)
    await source.add_user("alice", digest("old token"))
    assert await source.commit_turn("alice", turn("main", "t1", at=1_000_000.0))
    await source.put_document("alice", "about", "Ada, a mathematician", now=1_000_000.0)
    reminder = await source.add_reminder("alice", "call Ada", due_at=None, origin="user")
    await source.use_embedder(EMBEDDER, 4)
    memory = await source.add_memory("alice", "Ada's cat is called Turing")

    # The first run, killed after the memories' batch: its batches are committed.
    for part in await everything(source):
        await target.import_rows([part], skip_existing=True)
        if part.table == "memories":
            break

    # The source is used again before the migration is run again.
    assert await source.commit_turn("alice", turn("main", "t2", at=1_000_100.0))
    await source.set_user_token("alice", digest("new token"))
    await source.put_document("alice", "about", "Ada, a poet", now=1_000_100.0)
    await source.complete_reminder("alice", reminder.id, now=1_000_100.0)
    await source.mark_memories_used("alice", [memory.id], times=3)
    await source.set_memory_vectors([(memory, VECTOR)])

    done = await migrate(source, target)
    assert done.copied["continuums"] == 1
    assert done.copied["users"] == 1
    assert done.copied["memories"] == 1
    assert await target.continuum_digests() == await source.continuum_digests()
    there, here = await target.continuum("alice", "main"), await source.continuum("alice", "main")
    assert there.message_count == here.message_count == 4
    assert there.last_turn_at == here.last_turn_at
    assert len(await target.history("alice", "main")) == 4
    assert await target.user_for_token_hash(digest("new token")) == "alice"
    assert await target.user_for_token_hash(digest("old token")) is None
    assert [d.content for d in await target.documents("alice")] == ["Ada, a poet"]
    assert (await target.reminder("alice", reminder.id)).completed_at is not None
    # The memory's new use count and vector, each in its index: found by word and by vector.
    await target.use_embedder(EMBEDDER, 4)
    [(found, similarity)] = await target.nearest_memories("alice", list(VECTOR), k=3)
    assert (found.id, found.uses, round(similarity, 3)) == (memory.id, 3, 1.0)
    assert [hit.memory.id for hit in await target.search_memories("alice", "Turing")] == [memory.id]
    # Run once more: nothing changed, nothing copied.
    again = await migrate(source, target)
    assert sum(again.copied.values()) == 0
    # The continuum takes its next turn in its new store.
    assert await target.commit_turn("alice", turn("main", "t3", at=1_000_200.0))


async def test_a_resumed_migration_keeps_a_memorys_words_counted_once(
    new_store: Opener,
) -> None:
    """PostgreSQL counts each word's memories to plan its searches: a memory written
    again on a resume must not count twice (nor leave its old vector indexed)."""
    source, target = await new_store("sqlite"), await new_store("postgres")
    await source.use_embedder(EMBEDDER, 4)
    memory = await source.add_memory("alice", "zebra stripes")
    await source.set_memory_vectors([(memory, VECTOR)])
    await migrate(source, target)
    await source.mark_memories_used("alice", [memory.id])
    async with source._transaction() as db:  # a vector dropped since (its text to embed again)
        await db.execute("UPDATE memories SET embedding = NULL", ())
    await migrate(source, target)
    assert isinstance(target, PostgresStorage)
    counted = await target._read("SELECT docs FROM term_stats WHERE kind = 'memory' AND term = ?",
                                 ("zebra",))  # fmt: skip
    assert [row[0] for row in counted] == [1]
    await target.use_embedder(EMBEDDER, 4)
    assert await target.nearest_memories("alice", list(VECTOR), k=3) == []
    assert await target.count_memories_without_vectors() == 1


# -- the digest covers the continuum's row and the user's own rows ---------------------

TAMPERINGS = [
    "UPDATE continuums SET message_count = 2",
    "UPDATE continuums SET last_turn_at = 5.0",
    "UPDATE documents SET content = 'changed'",
    "UPDATE memories SET uses = 7",
    "UPDATE reminders SET due_at = 5.0",
    "UPDATE users SET token_hash = 'f' || substr(token_hash, 2)",
]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_digest_covers_the_continuum_row_documents_memories_and_reminders(
    kind: str, new_store: Opener
) -> None:
    source = await new_store("sqlite")
    await source.add_user("alice", digest("token"))
    assert await source.commit_turn("alice", turn("main", "t1", at=1_000_000.0))
    assert await source.commit_turn("alice", turn("main", "t2", at=1_000_100.0))
    await source.put_document("alice", "about", "Ada", now=1_000_000.0)
    await source.add_reminder("alice", "call Ada", due_at=None, origin="user")
    await source.add_memory("alice", "Ada's cat is called Turing")
    digests = await source.continuum_digests()
    assert set(digests) == {("alice", "main"), ("alice", "")}
    for tampering in TAMPERINGS:
        copy = await new_store(kind)
        await migrate(source, copy)
        assert await copy.continuum_digests() == digests
        async with copy._transaction() as db:
            await db.execute(tampering, ())
        assert await copy.continuum_digests() != digests, tampering


# -- an export is one snapshot ------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_an_export_is_one_snapshot_while_a_replica_writes(
    kind: str, new_store: Opener
) -> None:
    store = await new_store(kind)
    replica = await replica_of(store)
    try:
        assert await store.commit_turn("alice", turn("main", "t1", at=1_000_000.0))
        for text in ("one", "two", "three"):
            await store.add_reminder("alice", text, due_at=None, origin="user")
        parts: list[TableRows] = []
        # One row a page: the replica writes between the pages (at the rows named).
        async for part in store.export_rows(batch=1):
            parts.append(part)
            if part.table == "reminders" and part.rows[0][2] == "one":
                await replica.delete_reminder("alice", part.rows[0][0])
            if part.table == "continuums":
                assert await replica.commit_turn("alice", turn("main", "t2", at=1_000_100.0))
    finally:
        await replica.close()
    rows: dict[str, list[tuple[object, ...]]] = {}
    for part in parts:
        rows.setdefault(part.table, []).extend(part.rows)
    # What the store held when the export began: every reminder, one turn, its messages.
    assert [row[2] for row in rows["reminders"]] == ["one", "two", "three"]
    assert len(rows["turns"]) == 1
    [continuum] = rows["continuums"]
    assert continuum[4] == len(rows["messages"]) == 2  # message_count

    for into in KINDS:
        other = await new_store(into)
        await other.import_rows(parts)
        assert len(await other.history("alice", "main")) == 2
        assert await other.commit_turn("alice", turn("main", "t3", at=1_000_200.0))


async def test_a_user_restored_into_a_live_store_leaves_its_ids_to_come_alone(
    new_store: Opener,
) -> None:
    """A forgotten user's export imported again into a PostgreSQL store a replica is
    writing to: their ids are below the ones the replica holds, one of them in a row not
    yet committed. The sequence is not set back to the largest id the import can see,
    which handed that row's id out again (the next write failed on a duplicate key)."""
    store = await new_store("postgres")
    assert isinstance(store, PostgresStorage)
    for n in range(3):
        await store.add_memory("bob", f"bob's memory {n}")
    parts = await everything(store)
    await store.delete_user("bob")
    await store.add_memory("carol", "carol's memory")
    raw = await asyncpg.connect(store.url)
    try:
        async with raw.transaction():  # a replica's write, in flight during the import
            await raw.execute(
                "INSERT INTO memories (owner, text, created_at, importance)"
                " VALUES ('dave', 'in flight', 1.0, 0.5)"
            )
            assert (await store.import_rows(parts))["memories"] == 3
    finally:
        await raw.close()
    added = await store.add_memory("carol", "carol's next memory")
    assert added.id == 6  # after bob's 1-3, carol's 4 and dave's 5
    assert [m.text for m in await store.memories("bob")] == [f"bob's memory {n}" for n in (2, 1, 0)]


@pytest.mark.parametrize("kind", KINDS)
async def test_pages_follow_the_key_every_row_once(kind: str, new_store: Opener) -> None:
    store = await new_store(kind)
    for user in ("bob", "alice", "carol"):
        for continuum in ("b", "a"):
            for n in range(2):  # turns started at the same instant keep their order
                write = turn(continuum, f"{user}-{continuum}-{n}", at=1_000_000.0)
                assert await store.commit_turn(user, write)
        for label in ("zeta", "alpha"):
            await store.put_document(user, label, f"{user}'s {label}", now=1_000_000.0)

    def rows(parts: list[TableRows]) -> list[tuple[str, tuple[object, ...]]]:
        return [(part.table, row) for part in parts for row in part.rows]

    whole = await everything(store)
    paged = [part async for part in store.export_rows(batch=1)]
    assert all(len(part.rows) == 1 for part in paged)
    assert rows(paged) == rows(whole)
    # Each user's 2 documents, 2 continuums and each continuum's 2 turns, segment, 4 messages.
    assert len(rows(whole)) == 3 * (2 + 2 + 2 * (2 + 1 + 4))
    one = [part async for part in store.export_rows("alice", batch=1)]
    assert rows(one) == [(table, row) for table, row in rows(whole) if "alice" in row]


# -- an import checks every value's type ----------------------------------------------------

HEADER = encode_header(11, None)
DOCUMENT = b'{"format": 2, "table": "documents", "row": {"owner": "default", "label": "about",'
BAD = (
    b'{"format": 2, "table": "reminders", "row": {"id": 1, "owner": "default",'
    b' "text": "x", "due_at": "soon", "created_at": 1.0, "completed_at": null,'
    b' "origin": "user"}}\n'
)


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        (DOCUMENT + b' "content": "hi", "updated_at": "yesterday"}}', "documents.updated_at"),
        (DOCUMENT + b' "content": 5, "updated_at": 1.0}}', "documents.content"),
        # Text no PostgreSQL store takes (SQLite kept it, and no migration then finished),
        # and names no call can read or delete the row by.
        (DOCUMENT + b' "content": "a\\u0000b", "updated_at": 1.0}}', "documents.content"),
        (
            b'{"format": 2, "table": "documents", "row": {"owner": "bad/name",'
            b' "label": "notes", "content": "x", "updated_at": 1.0}}',
            "documents.owner",
        ),
        (
            b'{"format": 2, "table": "documents", "row": {"owner": "default",'
            b' "label": "my notes", "content": "x", "updated_at": 1.0}}',
            "documents.label",
        ),
        (
            b'{"format": 2, "table": "users", "row": {"name": "", "token_hash": "ab",'
            b' "created_at": 1.0}}',
            "users.name",
        ),
        (
            b'{"format": 2, "table": "reminders", "row": {"id": 1, "owner": "default",'
            b' "text": "x", "due_at": "soon", "created_at": 1.0, "completed_at": null,'
            b' "origin": "user"}}',
            "reminders.due_at",
        ),
        (
            b'{"format": 2, "table": "reminders", "row": {"id": 1.5, "owner": "default",'
            b' "text": "x", "due_at": null, "created_at": 1.0, "completed_at": null,'
            b' "origin": "user"}}',
            "reminders.id",
        ),
        # Ids no call can name, or that leave the store no id for its next row.
        *(
            (
                b'{"format": 2, "table": "memories", "row": {"id": %d, "owner": "default",'
                b' "text": "x", "created_at": 1.0, "expires_at": null, "importance": 0.5,'
                b' "source_segment": null, "uses": 0, "embedding": null}}' % memory_id,
                "memories.id: an id must be 1 to 9007199254740991",
            )
            for memory_id in (0, -3, 2**63 - 1, 2**53)
        ),
        (
            b'{"format": 2, "table": "continuum_settings", "row": {"owner": "default",'
            b' "continuum_id": "main", "settings": "e30="}}',
            "continuum_settings.settings",
        ),
        (
            b'{"format": 2, "table": "continuum_settings", "row": {"owner": "default",'
            b' "continuum_id": "main", "settings": {"base64": "e30"}}}',
            "continuum_settings.settings",
        ),
        (
            b'{"format": 2, "table": "memories", "row": {"id": 1, "owner": "default",'
            b' "text": "x", "created_at": 1.0, "expires_at": null, "importance": 0.5,'
            b' "source_segment": null, "uses": true, "embedding": null}}',
            "memories.uses",
        ),
    ],
)
def test_a_value_of_another_type_is_refused_by_its_line(line: bytes, refused: str) -> None:
    with pytest.raises(InvalidInput, match=f"^line 7: {refused}: "):
        decode_line(line, 7)


@pytest.mark.parametrize("kind", KINDS)
async def test_an_import_checks_every_line_before_writing(
    kind: str, new_store: Opener, tmp_path: Path
) -> None:
    good = DOCUMENT + b' "content": "hi", "updated_at": 1}}\n'  # an integer is a number
    path = tmp_path / "export.jsonl"
    path.write_bytes(HEADER + good + BAD)
    refused = re.escape("line 3: reminders.due_at: Expected `float | null`, got `str`")
    with pytest.raises(InvalidInput, match=refused):
        read_export(str(path))
    path.write_bytes(HEADER + good)
    store = await new_store(kind)
    await store.import_rows(read_export(str(path)))
    [document] = await store.documents("default")
    assert (document.content, document.updated_at.timestamp()) == ("hi", 1.0)


async def test_the_import_command_names_the_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(HEADER + DOCUMENT + b' "content": "hi", "updated_at": 1.0}}\n\n' + BAD)
    data = tmp_path / "data"
    code, _, err = await run_cli("import", str(path), "--data-dir", str(data))
    assert code == 2
    assert "line 4: reminders.due_at: Expected `float | null`, got `str`" in err
    async with await SQLiteStorage.open(data / "frontmind.db") as store:
        assert await store.documents("default") == []


async def test_the_import_command_refuses_what_is_no_export(tmp_path: Path) -> None:
    """A missing file or a directory is one line, not a traceback; an empty file (what a
    failed `frontmind export > FILE` leaves) or one without its header is refused, not
    imported as nothing with exit 0. No store is made for any of them."""
    data = tmp_path / "data"
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    headless = tmp_path / "headless.jsonl"
    headless.write_bytes(DOCUMENT + b' "content": "hi", "updated_at": 1.0}}\n')
    for path, said in (
        (tmp_path / "missing.jsonl", "No such file or directory"),
        (tmp_path, "Is a directory"),
        (empty, "holds no export: not even its header line"),
        (headless, "line 1: an export starts with its header line"),
    ):
        code, out, err = await run_cli("import", str(path), "--data-dir", str(data))
        assert code == 2, err
        assert err.startswith("frontmind: error: "), err
        assert said in err, err
        assert "Traceback" not in err
        assert out == ""
    code, _, err = await run_cli("import", "-", "--data-dir", str(data), stdin=b"")
    assert code == 2
    assert "- holds no export" in err
    assert not data.exists()


@pytest.mark.parametrize("kind", KINDS)
async def test_an_import_names_the_continuum_or_turn_its_rows_lack(
    kind: str, new_store: Opener, tmp_path: Path
) -> None:
    """Rows of a continuum or turn that neither the file nor the store holds are refused
    naming it: the database's refusal said "a write failed: FOREIGN KEY constraint
    failed" (StorageUnavailable, as if the store were out of order)."""
    source = await new_store("sqlite")
    await source.commit_turn("default", turn("main", "t1", at=1000.0, user_text="hello"))
    parts = [part async for part in source.export_rows()]
    store = await new_store(kind)
    orphans = [p for p in parts if p.table in ("messages", "segments", "turns")]
    with pytest.raises(InvalidInput, match="continuum 'main' of 'default', which neither"):
        await store.import_rows(orphans)
    no_turns = [p for p in parts if p.table != "turns"]
    with pytest.raises(InvalidInput, match="messages of the turn 't1', which neither"):
        await store.import_rows(no_turns)
    assert await store.table_counts() == dict.fromkeys(COLUMNS, 0)
    await store.import_rows(parts)
    assert [m.role for m in await store.history("default", "main")] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("table", "column", "said"),
    [
        ("messages", "content", "not a message's content blocks this store reads"),
        ("turns", "record", "not a turn record this store reads"),
        ("continuum_settings", "settings", "not settings this store reads"),
    ],
)
async def test_an_import_refuses_bytes_no_read_decodes(
    table: str, column: str, said: str, tmp_path: Path
) -> None:
    """Bytes every read of the row decodes (an export edited by hand) are checked as the
    lines are: imported, a message's were a continuum whose every turn crashed its actor
    on them ("DecodeError: JSON is malformed"), for good."""
    async with await SQLiteStorage.open(tmp_path / "source.db") as source:
        await source.commit_turn("default", turn("main", "t1", at=1000.0, user_text="hello"))
        await source.set_continuum_model("default", "main", ContinuumModel(max_tokens=100))
        lines = [encode_header(await source.schema_version(), None)]
        async for part in source.export_rows():
            lines += [encode_row(part.table, row) for row in part.rows]
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_bytes(b"".join(lines))
    broken = next(i for i, line in enumerate(lines) if f'"table":"{table}"'.encode() in line)
    record = msgspec.json.decode(lines[broken])
    record["row"][column] = {"base64": "bm9wZQ=="}  # "nope"
    lines[broken] = msgspec.json.encode(record) + b"\n"
    bad.write_bytes(b"".join(lines))
    data = tmp_path / "data"
    code, _, err = await run_cli("import", str(bad), "--data-dir", str(data))
    assert code == 2, err
    assert f"line {broken + 1}: {table}.{column}: {said}" in err, err
    assert not data.exists()
    code, _, err = await run_cli("import", str(good), "--data-dir", str(data))
    assert code == 0, err
    async with await SQLiteStorage.open(data / "frontmind.db") as store:
        assert [m.role for m in await store.history("default", "main")] == ["user", "assistant"]
        assert (await store.continuum_model("default", "main")).max_tokens == 100


# -- vectors of no named embedder ------------------------------------------------------------


async def unlabelled(store: Store) -> int:
    """A memory with a vector stored by a release before `vector_model`: no embedder named."""
    memory = await store.add_memory("alice", "Ada's cat is called Turing")
    async with store._transaction() as db:
        await db.execute("UPDATE memories SET embedding = ?", (struct.pack("4f", *VECTOR),))
    assert await store.count_memories_without_vectors() is None  # no embedder recorded
    return memory.id


@pytest.mark.parametrize("kind", KINDS)
async def test_vectors_of_no_named_embedder_are_made_again(
    kind: str, new_store: Opener, tmp_path: Path
) -> None:
    source = await new_store("sqlite")
    memory_id = await unlabelled(source)
    parts = await everything(source)
    assert "vector_model" not in [part.table for part in parts]
    path = tmp_path / "old.jsonl"
    path.write_bytes(HEADER + b"".join(encode_row(p.table, r) for p in parts for r in p.rows))

    # As the parts of an export, and as its file (a format-1 file has no vector_model either).
    for imported in (parts, read_export(str(path))):
        store = await new_store(kind)
        await store.use_embedder(EMBEDDER, 4)
        assert (await store.import_rows(imported))["memories"] == 1
        # Not taken for this embedder's: left for it to embed again, and not found by it.
        assert await store.count_memories_without_vectors() == 1
        assert await store.nearest_memories("alice", list(VECTOR), k=3) == []
        assert [m.id for m in await store.memories_without_vectors()] == [memory_id]

    # A migration into a store with an embedder refuses them (it is another store).
    store = await new_store(kind)
    await store.use_embedder(EMBEDDER, 4)
    with pytest.raises(ImportCollision, match="of no named embedder"):
        await migrate(source, store)

    # Into a store with no embedder they stay as in their store: its first embedder drops them.
    store = await new_store(kind)
    await migrate(source, store)
    assert await store.use_embedder(EMBEDDER, 4)
    assert await store.count_memories_without_vectors() == 1
