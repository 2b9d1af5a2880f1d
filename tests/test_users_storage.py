"""Ownership at the storage port: every method sees only its user's rows, and a database
from before users existed migrates with everything belonging to `default`."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from storage import (
    DEFAULT_USER,
    SCHEMA_VERSION,
    InvalidInput,
    NotFound,
    PostgresStorage,
    SQLiteStorage,
    UnknownContinuum,
    User,
    UserExists,
    moment,
)
from tests._factories import turn
from tests._postgres import PostgresServer

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


Store = SQLiteStorage | PostgresStorage


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    storage: Store
    if request.param == "sqlite":
        storage = await SQLiteStorage.open(tmp_path / "f.db")
    else:
        server: PostgresServer = request.getfixturevalue("pg_server")
        storage = await PostgresStorage.open(server.new_database())
    async with storage:
        yield storage


async def fill(store: Store, user: str, word: str) -> int:
    """One user's data, every row of it marked with `word` (plus the shared "quarterly")."""
    write = turn("main", f"t-{user}", user_text=f"quarterly review {word}")
    assert await store.commit_turn(user, write)
    await store.record_turn(
        user,
        msgspec.structs.replace(
            turn("main", f"failed-{user}").record, status="failed", user_text=f"lost {word}"
        ),
    )
    reminder = await store.add_reminder(
        user, f"quarterly call {word}", due_at=NOW + timedelta(hours=1), origin="user"
    )
    await store.add_memory(user, f"quarterly memory {word}")
    await store.put_document(user, "profile", f"quarterly profile {word}")
    return reminder.id


async def everything(store: Store, user: str) -> str:
    """Every read of the port, for `user`, as one text."""
    reads: list[object] = [
        await store.continuum(user, "main"),
        await store.continuums(user),
        await store.history(user, "main"),
        await store.all_messages(user, "main"),
        await store.turns(user),
        await store.turns(user, "main"),
        await store.recent_segments(user, "main"),
        await store.active_reminders(user),
        await store.reminders_due_between(user, NOW, NOW + timedelta(days=1)),
        await store.reminders(user, include_completed=True),
        await store.memories(user),
        await store.search_memories(user, "quarterly memory walrus zebra"),
        await store.search_messages(user, "quarterly review walrus zebra"),
        await store.search_messages(user, "quarterly", continuum_id="main"),
        await store.documents(user),
    ]
    return msgspec.json.encode(reads).decode()


async def test_two_users_share_a_continuum_id_and_see_only_their_own_rows(
    store: Store,
) -> None:
    alice_reminder = await fill(store, "alice", "zebra")
    bob_reminder = await fill(store, "bob", "walrus")
    alice, bob = await everything(store, "alice"), await everything(store, "bob")
    assert "zebra" in alice
    assert "walrus" not in alice
    assert "walrus" in bob
    assert "zebra" not in bob
    # Each read found the user's own rows (the search matched, nothing came back empty).
    assert len(await store.search_messages("alice", "quarterly")) == 1
    assert len(await store.search_memories("bob", "quarterly")) == 1
    assert (await store.continuum("alice", "main")).message_count == 2
    # Another user's reminder id is as good as none: nothing changes.
    with pytest.raises(NotFound):
        await store.complete_reminder("alice", bob_reminder)
    assert [r.id for r in await store.active_reminders("bob")] == [bob_reminder]
    assert (await store.complete_reminder("alice", alice_reminder)).completed_at is not None
    # The same document label is each user's own.
    await store.put_document("bob", "profile", "replaced walrus")
    assert [d.content for d in await store.documents("alice")] == ["quarterly profile zebra"]
    # A user with nothing sees nothing (and default is a user like any other).
    assert "zebra" not in await everything_or_empty(store, DEFAULT_USER)
    with pytest.raises(UnknownContinuum):
        await store.continuum("carol", "main")
    assert await store.turns("carol") == []


async def everything_or_empty(store: Store, user: str) -> str:
    try:
        return await everything(store, user)
    except UnknownContinuum:
        return msgspec.json.encode(
            [await store.reminders(user), await store.memories(user), await store.documents(user)]
        ).decode()


async def test_a_turn_id_of_one_user_is_not_committed_again_by_another(
    store: Store,
) -> None:
    assert await store.commit_turn("alice", turn("main", "t1"))
    assert not await store.commit_turn("bob", turn("main", "t1"))  # turn ids are global
    with pytest.raises(UnknownContinuum):
        await store.history("bob", "main")


async def test_malformed_user_names_are_refused(store: Store) -> None:
    for name in ("", "a/b", "x" * 65, "al ice", "ali:ce"):
        with pytest.raises(InvalidInput, match="user name"):
            await store.documents(name)
        with pytest.raises(InvalidInput, match="user name"):
            await store.commit_turn(name, turn("main", "t1"))
    assert await store.turns(DEFAULT_USER) == []


async def test_users_are_stored_with_the_token_digest_only(store: Store) -> None:
    digest = hashlib.sha256(b"secret-token").hexdigest()
    added = await store.add_user("alice", digest, now=5.0)
    assert added == User("alice", moment(5.0))
    assert await store.users() == [User("alice", moment(5.0))]
    assert await store.user_for_token_hash(digest) == "alice"
    assert await store.user_for_token_hash(hashlib.sha256(b"other").hexdigest()) is None
    with pytest.raises(UserExists, match="already exists"):
        await store.add_user("alice", hashlib.sha256(b"again").hexdigest())
    with pytest.raises(InvalidInput, match="built-in user"):
        await store.add_user(DEFAULT_USER, hashlib.sha256(b"d").hexdigest())
    with pytest.raises(InvalidInput, match="SHA-256"):
        await store.add_user("bob", "secret-token")
    with pytest.raises(InvalidInput, match="SHA-256"):
        await store.user_for_token_hash("secret-token")
    assert await store.users() == [User("alice", moment(5.0))]


def write_v3_rows(path: Path) -> None:
    """What a single-person database held before users existed, written in raw SQL."""
    record = msgspec.json.encode(turn("main", "t1", user_text="the old budget").record)
    content = msgspec.json.encode([{"type": "text", "text": "the old budget"}])
    reply = msgspec.json.encode([{"type": "text", "text": "noted"}])
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO continuums (id, created_at, message_count) VALUES ('main', 0, 2)")
        conn.execute("INSERT INTO turns VALUES ('t1', 'main', 'completed', 0, ?)", (record,))
        conn.executemany(
            "INSERT INTO messages (continuum_id, seq, turn_id, role, content, text, created_at)"
            " VALUES ('main', ?, 't1', ?, ?, ?, 0)",
            [(0, "user", content, "the old budget"), (1, "assistant", reply, "noted")],
        )
        conn.execute(
            "INSERT INTO segments (continuum_id, started_at, ended_at, turn_count, title,"
            " first_seq) VALUES ('main', 0, 1, 1, 'the old budget', 0)"
        )
        conn.execute(
            "INSERT INTO reminders (text, due_at, created_at, origin)"
            " VALUES ('old reminder', NULL, 0, 'user')"
        )
        conn.execute(
            "INSERT INTO memories (text, created_at, importance) VALUES ('old memory', 0, 0.5)"
        )
        conn.execute("INSERT INTO documents VALUES ('profile', 'old profile', 0)")


async def test_a_database_from_before_users_migrates_to_default(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with await SQLiteStorage.open(path, schema_upto=3) as old:
        assert await old.schema_version() == 3
    write_v3_rows(path)
    async with await SQLiteStorage.open(path) as store:
        assert await store.schema_version() == SCHEMA_VERSION == 13
        # Everything is default's, as before: a single-person setup notices nothing.
        assert [m.text() for m in await store.history(DEFAULT_USER, "main")] == [
            "the old budget",
            "noted",
        ]
        assert [t.turn_id for t in await store.turns(DEFAULT_USER, "main")] == ["t1"]
        assert [s.title for s in await store.recent_segments(DEFAULT_USER, "main")] == [
            "the old budget"
        ]
        assert [r.text for r in await store.reminders(DEFAULT_USER)] == ["old reminder"]
        assert [h.memory.text for h in await store.search_memories(DEFAULT_USER, "memory")] == [
            "old memory"
        ]
        assert [h.text for h in await store.search_messages(DEFAULT_USER, "budget")] == [
            "the old budget"
        ]
        assert [d.content for d in await store.documents(DEFAULT_USER)] == ["old profile"]
        # ... and nobody else's.
        assert await everything_or_empty(store, "alice") == "[[],[],[]]"
        # The rebuilt tables work on: the next turn continues the numbering, and its
        # messages are indexed for search.
        assert await store.commit_turn(DEFAULT_USER, turn("main", "t2", user_text="new budget"))
        assert [m.seq for m in await store.history(DEFAULT_USER, "main")] == [0, 1, 2, 3]
        assert len(await store.search_messages(DEFAULT_USER, "budget")) == 2
        assert await store.search_messages("alice", "budget") == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


async def test_a_postgres_database_from_before_users_migrates_to_default(
    pg_server: PostgresServer,
) -> None:
    import asyncpg

    from storage._pg_schema import PG_MIGRATIONS, PG_SCHEMA_VERSION

    url = pg_server.new_database()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version, script in PG_MIGRATIONS[:3]:  # up to the last one before users
            await conn.execute(script)
            await conn.execute("INSERT INTO schema_version VALUES ($1)", version)
        record = msgspec.json.encode(turn("main", "t1", user_text="the old budget").record)
        content = msgspec.json.encode([{"type": "text", "text": "the old budget"}])
        await conn.execute(
            "INSERT INTO continuums (id, created_at, message_count) VALUES ('main', 0, 1)"
        )
        await conn.execute(
            "INSERT INTO turns (id, continuum_id, status, started_at, record)"
            " VALUES ('t1', 'main', 'completed', 0, $1)",
            record,
        )
        await conn.execute(
            "INSERT INTO messages (continuum_id, seq, turn_id, role, content, text, created_at)"
            " VALUES ('main', 0, 't1', 'user', $1, 'the old budget', 0)",
            content,
        )
        await conn.execute(
            "INSERT INTO term_stats (kind, term, docs) VALUES ('message', 'budget', 1)"
        )
        await conn.execute(
            "INSERT INTO reminders (text, created_at, origin) VALUES ('old reminder', 0, 'user')"
        )
        await conn.execute("INSERT INTO documents VALUES ('profile', 'old profile', 0)")
    finally:
        await conn.close()
    async with await PostgresStorage.open(url) as store:
        assert await store.schema_version() == PG_SCHEMA_VERSION == 12
        assert [m.text() for m in await store.history(DEFAULT_USER, "main")] == ["the old budget"]
        assert [h.text for h in await store.search_messages(DEFAULT_USER, "budget")] == [
            "the old budget"
        ]
        assert [r.text for r in await store.reminders(DEFAULT_USER)] == ["old reminder"]
        assert [d.content for d in await store.documents(DEFAULT_USER)] == ["old profile"]
        assert await everything_or_empty(store, "alice") == "[[],[],[]]"
        # Two users may now both have "main".
        assert await store.commit_turn("alice", turn("main", "t2", user_text="new budget"))
        assert [m.seq for m in await store.history("alice", "main")] == [0, 1]
        assert len(await store.history(DEFAULT_USER, "main")) == 1
