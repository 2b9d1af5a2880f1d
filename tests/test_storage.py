"""The storage contract, on real SQLite files and a real PostgreSQL server: exact
replay, atomicity, search ranking, timezone-aware reminders and refusal of bad input.

Every test that takes the `store` fixture runs against both adapters; the tests that are
about SQLite itself (its migrations, WAL, a kill -9 in mid-commit) open it directly."""

from __future__ import annotations

import copy
import random
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import anyio.lowlevel
import msgspec
import pytest

from storage import (
    DEFAULT_USER,
    INTERRUPTED_TURN,
    SCHEMA_VERSION,
    ContinuumModel,
    InvalidInput,
    Message,
    NotFound,
    Passage,
    PostgresStorage,
    RawBlock,
    SchemaTooNew,
    SQLiteStorage,
    StorageUnavailable,
    TableRows,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRecord,
    TurnUsage,
    TurnWrite,
    UnknownContinuum,
    add_memory_effect,
    add_reminder_effect,
    complete_reminder_effect,
    moment,
)
from storage._sqlite import DRIVER
from tests._factories import content_bytes, every_block_type, turn
from tests._postgres import PostgresServer

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent


Store = SQLiteStorage | PostgresStorage
TABLES = ("continuums", "turns", "messages", "segments", "reminders", "memories", "documents")


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    storage: Store
    if request.param == "sqlite":
        storage = await SQLiteStorage.open(tmp_path / "frontmind.db", segment_gap=600)
    else:
        server: PostgresServer = request.getfixturevalue("pg_server")
        storage = await PostgresStorage.open(server.new_database(), segment_gap=600)
    async with storage:
        yield storage


async def reopen(store: Store) -> Store:
    """The same database, opened afresh."""
    if isinstance(store, SQLiteStorage):
        return await SQLiteStorage.open(store.path)
    return await PostgresStorage.open(store.url)


async def table_counts(store: Store) -> dict[str, int]:
    if isinstance(store, SQLiteStorage):
        # Through the store's own SQLite library, closed at once: a connection of another
        # copy of SQLite in this process (Python's sqlite3 beside sqlean's) is blind to
        # the store's locks, and one left to the collector read a count from before the
        # store's last delete (a run of the suite on a loaded machine).
        with closing(DRIVER.connect(store.path)) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    async with await PostgresStorage.open(store.url) as other:
        return {t: int(await other._pool.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}


# -- migrations -------------------------------------------------------------------------


async def test_fresh_database_is_at_the_newest_schema(tmp_path: Path) -> None:
    store = await SQLiteStorage.open(tmp_path / "frontmind.db")
    async with store:
        assert await store.schema_version() == SCHEMA_VERSION == 13
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def write_v1_turn(path: Path, cid: str, turn_id: str, text: str) -> None:
    """A turn as code of schema 1 to 3 stored it (no owners yet), in raw SQL."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO continuums (id, created_at, message_count) VALUES (?, 0, 2)", (cid,)
        )
        conn.execute(
            "INSERT INTO turns VALUES (?, ?, 'completed', 0, ?)",
            (turn_id, cid, msgspec.json.encode(turn(cid, turn_id, user_text=text).record)),
        )
        for seq, (role, said) in enumerate((("user", text), ("assistant", "noted"))):
            content = msgspec.json.encode([{"type": "text", "text": said}])
            conn.execute(
                "INSERT INTO messages (continuum_id, seq, turn_id, role, content, text, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 0)",
                (cid, seq, turn_id, role, content, said),
            )
        conn.execute(
            "INSERT INTO segments"
            " (continuum_id, started_at, ended_at, turn_count, title, first_seq)"
            " VALUES (?, 0, 0, 1, ?, 0)",
            (cid, text),
        )


async def test_upgrade_keeps_data_and_indexes_old_messages(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with await SQLiteStorage.open(path, schema_upto=1) as old:
        assert await old.schema_version() == 1
    write_v1_turn(path, "c1", "t1", "the quarterly budget review")
    async with await SQLiteStorage.open(path) as new:
        assert await new.schema_version() == SCHEMA_VERSION
        hits = await new.search_messages(DEFAULT_USER, "budget")
        assert [h.seq for h in hits] == [0]
        assert len(await new.history(DEFAULT_USER, "c1")) == 2


async def test_newer_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    async with await SQLiteStorage.open(path) as store:
        await store.commit_turn(DEFAULT_USER, turn("c1", "t1"))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew, match=rf"schema version 99.*only up to {SCHEMA_VERSION}"):
        await SQLiteStorage.open(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == 99
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    assert len(path.read_bytes()) == len(before)


# -- exact replay ------------------------------------------------------------------------


async def test_every_block_type_replays_byte_identically(store: Store) -> None:
    messages = every_block_type("t1")
    assert await store.commit_turn(DEFAULT_USER, turn("c1", "t1", messages=messages))
    history = await store.history(DEFAULT_USER, "c1")
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert [m.seq for m in history] == [0, 1, 2, 3]
    for original, stored in zip(messages, history, strict=True):
        assert content_bytes(stored.content) == content_bytes(original.content)
    # The tool input keeps its exact bytes: spacing, key order, 1.50, 2e3, escapes.
    tool_use = history[1].content[1]
    assert isinstance(tool_use, ToolUseBlock)
    assert tool_use.input_json == '{"z": 1.50, "a":[1, 2e3, "\\u00e9"], "nested": {"k": null}}'
    # And again after reopening the file.
    async with await reopen(store) as again:
        replay = await again.history(DEFAULT_USER, "c1")
    assert [content_bytes(m.content) for m in replay] == [
        content_bytes(m.content) for m in messages
    ]


async def test_commit_is_idempotent_by_turn_id(store: Store) -> None:
    write = turn("c1", "t1")
    assert await store.commit_turn(DEFAULT_USER, write) is True
    assert await store.commit_turn(DEFAULT_USER, write) is False
    assert len(await store.history(DEFAULT_USER, "c1")) == 2
    assert (await store.continuum(DEFAULT_USER, "c1")).message_count == 2


async def test_history_window_and_segments(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=0, user_text="morning planning"))
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=100))
    await store.commit_turn(
        DEFAULT_USER, turn("c1", "t3", at=5000, user_text="afternoon " + "x" * 80)
    )
    segments = await store.recent_segments(DEFAULT_USER, "c1")
    assert [(s.turn_count, s.first_seq) for s in segments] == [(2, 0), (1, 4)]
    assert segments[0].title == "morning planning"
    assert segments[1].title.endswith("…")
    assert len(segments[1].title) == 60
    window = turn("c1", "t4", at=5100)
    await store.commit_turn(
        DEFAULT_USER, type(window)(window.record, window.messages, history_start=4)
    )
    assert [m.seq for m in await store.history(DEFAULT_USER, "c1")] == [4, 5, 6, 7]
    assert len(await store.all_messages(DEFAULT_USER, "c1")) == 8


async def test_failed_turn_keeps_the_user_message_out_of_history(store: Store) -> None:
    record = TurnRecord(
        "t9",
        "c2",
        "failed",
        moment(1.0),
        moment(2.0),
        "m",
        user_text="please keep me",
        error="overloaded",
    )
    await store.record_turn(DEFAULT_USER, record)
    assert await store.history(DEFAULT_USER, "c2") == []
    (stored,) = await store.turns(DEFAULT_USER, "c2")
    assert stored.status == "failed"
    assert stored.user_text == "please keep me"


async def test_a_failed_turn_keeping_its_tool_rounds_is_committed_with_them(
    store: Store,
) -> None:
    """A turn whose model call failed, or that was cancelled, after its tools ran keeps
    those rounds: its failed (or cancelled) record and its messages are committed in one
    transaction, as a completed turn's. A running turn is still refused."""
    messages = (
        Message("user", (TextBlock("send the report"),)),
        Message("assistant", (ToolUseBlock("toolu_1", "send_mail", "{}"),)),
        Message("user", (ToolResultBlock("toolu_1", "mail sent"),)),
        Message("assistant", (TextBlock("I stopped before I could answer."),)),
    )
    kept = turn("c1", "t1", messages=messages)
    record = msgspec.structs.replace(kept.record, status="failed", error="model_overloaded: x")
    assert await store.commit_turn(DEFAULT_USER, TurnWrite(record, messages))
    assert [m.content for m in await store.history(DEFAULT_USER, "c1")] == [
        m.content for m in messages
    ]
    (stored,) = await store.turns(DEFAULT_USER, "c1")
    assert (stored.status, stored.error) == ("failed", "model_overloaded: x")
    running_turn = msgspec.structs.replace(record, turn_id="t-running", status="running")
    with pytest.raises(InvalidInput, match="not 'running' ones"):
        await store.commit_turn(DEFAULT_USER, TurnWrite(running_turn, messages))
    assert len(await store.history(DEFAULT_USER, "c1")) == len(messages)
    cancelled = msgspec.structs.replace(
        record, turn_id="t-cancelled", status="cancelled", error="cancelled"
    )
    assert await store.commit_turn(DEFAULT_USER, TurnWrite(cancelled, messages, base=len(messages)))
    assert len(await store.history(DEFAULT_USER, "c1")) == 2 * len(messages)
    ended = {r.turn_id: r.status for r in await store.turns(DEFAULT_USER, "c1")}
    assert ended == {"t1": "failed", "t-cancelled": "cancelled"}


def running(turn_id: str, continuum_id: str, at: float = 1.0) -> TurnRecord:
    """A turn's record as the turn writes it when it starts."""
    return TurnRecord(
        turn_id, continuum_id, "running", moment(at), moment(at), "m", user_text=f"ask {turn_id}"
    )


def statuses(records: list[TurnRecord]) -> dict[str, tuple[str, str | None]]:
    return {r.turn_id: (r.status, r.error) for r in records}


async def test_a_running_turn_reads_running_until_it_ends_or_is_found_stale(
    store: Store,
) -> None:
    """A turn's record says `running` while it runs, not failed. One no process runs any
    more (its process was killed) reads failed, "interrupted", once the store's owner
    starts again, or once its continuum's next turn starts (which holds the continuum);
    a turn's own end still replaces its record, and no ended record is touched."""
    await store.commit_turn(DEFAULT_USER, turn("c1", "done", at=0.5))
    await store.record_turn(DEFAULT_USER, running("t1", "c1"))
    (_, stored) = await store.turns(DEFAULT_USER, "c1")
    assert (stored.status, stored.error, stored.started_at) == ("running", None, moment(1.0))
    assert stored.user_text == "ask t1"
    # The turn ends: its record is replaced.
    await store.record_turn(
        DEFAULT_USER, msgspec.structs.replace(running("t1", "c1"), status="cancelled")
    )
    assert statuses(await store.turns(DEFAULT_USER, "c1"))["t1"] == ("cancelled", None)

    # Killed mid-turn: left running, in two continuums.
    await store.record_turn(DEFAULT_USER, running("t2", "c1", at=2.0))
    await store.record_turn(DEFAULT_USER, running("t3", "c2", at=2.0))
    # The next turn of c1 finds t2 stale: it holds c1 now. c2's is not its to judge.
    await store.record_turn(DEFAULT_USER, running("t4", "c1", at=3.0))
    assert statuses(await store.turns(DEFAULT_USER)) == {
        "done": ("completed", None),
        "t1": ("cancelled", None),
        "t2": ("failed", INTERRUPTED_TURN),
        "t3": ("running", None),
        "t4": ("running", None),
    }
    # The store's owner starts again: whatever was left running is interrupted.
    assert await store.interrupt_stale_turns() == 2
    assert await store.interrupt_stale_turns() == 0
    records = await store.turns(DEFAULT_USER)
    assert statuses(records) == {
        "done": ("completed", None),
        "t1": ("cancelled", None),
        "t2": ("failed", INTERRUPTED_TURN),
        "t3": ("failed", INTERRUPTED_TURN),
        "t4": ("failed", INTERRUPTED_TURN),
    }
    interrupted = next(r for r in records if r.turn_id == "t3")
    assert msgspec.structs.replace(interrupted, status="running", error=None) == running(
        "t3", "c2", at=2.0
    )
    # A turn found stale that ends after all (its lease was cut, not its process) still
    # leaves its own outcome.
    await store.record_turn(
        DEFAULT_USER, msgspec.structs.replace(running("t4", "c1", at=3.0), status="failed")
    )
    assert statuses(await store.turns(DEFAULT_USER, "c1"))["t4"] == ("failed", None)


async def test_postgres_leaves_a_running_turn_another_replica_holds(
    pg_server: PostgresServer,
) -> None:
    """Replicas share the database: one starting leaves alone the running turns of
    continuums whose lease another live replica holds, and interrupts those whose
    replica died (its session, and so its lease, gone)."""
    url = pg_server.new_database()
    async with (
        await PostgresStorage.open(url) as alive,
        await PostgresStorage.open(url) as starting,
    ):
        async with alive.continuum_lease(DEFAULT_USER, "busy"):
            await alive.record_turn(DEFAULT_USER, running("held", "busy"))
            await alive.record_turn(DEFAULT_USER, running("orphan", "idle"))
            assert await starting.interrupt_stale_turns() == 1
            assert statuses(await starting.turns(DEFAULT_USER)) == {
                "held": ("running", None),
                "orphan": ("failed", INTERRUPTED_TURN),
            }
        # Its replica dies with the turn still running: the lease is gone with it.
        assert await starting.interrupt_stale_turns() == 1
        (held,) = await starting.turns(DEFAULT_USER, "busy")
        assert (held.status, held.error) == ("failed", INTERRUPTED_TURN)


# -- atomicity and crash safety --------------------------------------------------------------


async def test_cancelled_before_commit_leaves_nothing(store: Store) -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await store.commit_turn(DEFAULT_USER, turn("c1", "t1"))
    with pytest.raises(UnknownContinuum):
        await store.history(DEFAULT_USER, "c1")


async def test_cancellation_at_any_moment_leaves_whole_turns_or_none(
    store: Store,
) -> None:
    rng = random.Random(7)
    for i in range(30):
        turn_id = f"t{i}"
        with anyio.move_on_after(rng.random() * 0.004):
            await store.commit_turn(
                DEFAULT_USER, turn("c1", turn_id, at=float(i), messages=every_block_type(turn_id))
            )
    all_messages = await store.all_messages(DEFAULT_USER, "c1")
    by_turn: dict[str, int] = {}
    for message in all_messages:
        by_turn[message.turn_id] = by_turn.get(message.turn_id, 0) + 1
    assert set(by_turn.values()) <= {4}
    records = {r.turn_id for r in await store.turns(DEFAULT_USER, "c1")}
    assert records == set(by_turn)
    assert [m.seq for m in all_messages] == list(range(len(all_messages)))


@pytest.mark.slow
def test_kill_during_writes_never_corrupts_or_loses_commits(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    rng = random.Random(2026)
    confirmed: set[str] = set()
    for round_ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests._kill_writer", str(path), f"r{round_}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        watchdog = threading.Timer(60, child.kill)  # a broken child must fail, not hang
        watchdog.start()
        for _ in range(rng.randint(1, 25)):
            line = child.stdout.readline()
            assert line.startswith("committed "), line
            confirmed.add(line.split()[1])
        child.kill()  # SIGKILL, most likely in the middle of the next commit
        child.wait()
        watchdog.cancel()
        child.stdout.close()

    async def check() -> None:
        async with await SQLiteStorage.open(path) as store:
            messages = await store.all_messages(DEFAULT_USER, "killme")
            turns = {r.turn_id for r in await store.turns(DEFAULT_USER, "killme", limit=10_000)}
        per_turn: dict[str, int] = {}
        for m in messages:
            per_turn[m.turn_id] = per_turn.get(m.turn_id, 0) + 1
        assert confirmed <= turns, "a committed turn was lost"
        assert set(per_turn) == turns
        assert set(per_turn.values()) == {4}, "a turn was left half-written"
        assert [m.seq for m in messages] == list(range(len(messages)))

    anyio.run(check)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_reads_do_not_wait_for_an_open_write(tmp_path: Path) -> None:
    store = await SQLiteStorage.open(tmp_path / "frontmind.db")
    async with store:
        await _reads_do_not_wait(store)


async def _reads_do_not_wait(store: SQLiteStorage) -> None:
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1"))
    other = sqlite3.connect(store.path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO documents VALUES ('default', 'x', 'uncommitted', 0)")
        with anyio.fail_after(2):
            assert len(await store.history(DEFAULT_USER, "c1")) == 2
            assert await store.documents(DEFAULT_USER) == []
    finally:
        other.execute("ROLLBACK")
        other.close()


# -- search ---------------------------------------------------------------------------------


async def test_memory_search_ranks_by_relevance_then_recency(store: Store) -> None:
    now = 10_000_000.0
    day = 86400.0
    await store.add_memory(DEFAULT_USER, "dogs love bones", now=now)
    await store.add_memory(DEFAULT_USER, "the cat sat on the mat", now=now - 300 * day)
    await store.add_memory(DEFAULT_USER, "Tom the cat: a cat person's cat", now=now)
    await store.add_memory(DEFAULT_USER, "the cat sat on the mat", now=now - day)
    await store.add_memory(
        DEFAULT_USER,
        "cat facts that expired",
        now=now,
        expires_at=datetime.fromtimestamp(now - 1, UTC),
    )
    hits = await store.search_memories(DEFAULT_USER, "tell me about my cat", limit=5, now=now)
    texts = [h.memory.text for h in hits]
    assert texts[0] == "Tom the cat: a cat person's cat"
    assert texts[1:] == ["the cat sat on the mat", "the cat sat on the mat"]
    assert hits[1].memory.created_at > hits[2].memory.created_at  # newer first
    assert "cat facts that expired" not in texts
    assert await store.search_memories(DEFAULT_USER, "the and of", now=now) == []
    assert await store.search_memories(DEFAULT_USER, '"; DROP TABLE memories; --', now=now) == []


async def test_message_search_scoped_to_a_continuum(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("a", "t1", user_text="the launch date is friday"))
    await store.commit_turn(DEFAULT_USER, turn("b", "t2", user_text="launch party snacks"))
    everywhere = await store.search_messages(DEFAULT_USER, "launch")
    assert {h.continuum_id for h in everywhere} == {"a", "b"}
    only_a = await store.search_messages(DEFAULT_USER, "launch", continuum_id="a")
    assert [h.text for h in only_a] == ["the launch date is friday"]


async def test_a_reply_holding_a_nul_is_stored_as_it_came(store: Store) -> None:
    """The model's text goes to the store as it came (it replays byte for byte), and it
    may hold a NUL (U+0000), which PostgreSQL's text refuses: the message's search text
    took it as it was, and the turn failed at its commit ("invalid byte sequence for
    encoding UTF8: 0x00"), its reply lost. The search text takes U+FFFD in its place;
    the content keeps the NUL."""
    reply = TextBlock("the byte is \x00 here, said plainly")
    messages = (Message("user", (TextBlock("what byte?"),)), Message("assistant", (reply,)))
    assert await store.commit_turn(DEFAULT_USER, turn("c1", "t1", messages=messages))
    history = await store.history(DEFAULT_USER, "c1")
    assert history[1].content == (reply,)
    (hit,) = await store.search_messages(DEFAULT_USER, "plainly")
    assert hit.text == "the byte is \ufffd here, said plainly"


# -- reminders --------------------------------------------------------------------------------


async def test_reminder_due_queries_across_timezones(store: Store) -> None:
    new_york, tokyo = ZoneInfo("America/New_York"), ZoneInfo("Asia/Tokyo")
    late_ny = await store.add_reminder(
        DEFAULT_USER,
        "call mom",
        due_at=datetime(2026, 11, 29, 23, 30, tzinfo=new_york),
        origin="user",
    )
    morning_utc = await store.add_reminder(
        DEFAULT_USER, "standup", due_at=datetime(2026, 11, 29, 10, 0, tzinfo=UTC), origin="agent"
    )
    await store.add_reminder(DEFAULT_USER, "someday", due_at=None, origin="user")
    ny_day = datetime(2026, 11, 29, tzinfo=new_york)
    in_ny = await store.reminders_due_between(DEFAULT_USER, ny_day, ny_day + timedelta(days=1))
    assert [r.id for r in in_ny] == [morning_utc.id, late_ny.id]
    tokyo_day = datetime(2026, 11, 30, tzinfo=tokyo)  # 15:00 UTC on the 29th onwards
    in_tokyo = await store.reminders_due_between(
        DEFAULT_USER, tokyo_day, tokyo_day + timedelta(days=1)
    )
    assert [r.id for r in in_tokyo] == [late_ny.id]
    active = await store.active_reminders(DEFAULT_USER)
    assert [r.text for r in active] == ["standup", "call mom", "someday"]
    done = await store.complete_reminder(DEFAULT_USER, morning_utc.id, now=5.0)
    assert done.completed_at == moment(5.0)
    assert [r.text for r in await store.active_reminders(DEFAULT_USER)] == ["call mom", "someday"]
    assert len(await store.reminders(DEFAULT_USER, include_completed=True)) == 3


async def test_reminders_due_at_one_instant_come_in_id_order(store: Store) -> None:
    """Reminders due at the same instant, stored out of id order (an import, a resumed
    migration): by id on either database. PostgreSQL gave them in the order its rows
    lay in the table."""
    due = datetime(2026, 11, 29, 9, 0, tzinfo=UTC).timestamp()
    rows = [(i, DEFAULT_USER, f"r{i}", due, 1.0, None, "user") for i in (3, 1, 2)]
    await store.import_rows([TableRows("reminders", rows)])
    day = datetime(2026, 11, 29, tzinfo=UTC)
    found = await store.reminders_due_between(DEFAULT_USER, day, day + timedelta(days=1))
    assert [r.id for r in found] == [1, 2, 3]


# -- bad input --------------------------------------------------------------------------------


async def test_bad_input_is_refused_and_changes_nothing(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1"))
    await store.add_reminder(DEFAULT_USER, "keep", due_at=None, origin="user")
    await store.add_memory(DEFAULT_USER, "keep this")
    await store.put_document(DEFAULT_USER, "notes", "keep")
    before = await table_counts(store)
    naive = datetime(2026, 11, 29, 12, 0)
    refusals = [
        (store.commit_turn(DEFAULT_USER, turn("bad id!", "t2")), "malformed"),
        (
            store.commit_turn(DEFAULT_USER, turn("c1", "t3", user_text="x" * 100_001)),
            "limit is 100000",
        ),
        (
            store.commit_turn(
                DEFAULT_USER, turn("c1", "t4", messages=(Message("assistant", (TextBlock("hi"),)),))
            ),
            "starts with the user",
        ),
        (store.add_reminder(DEFAULT_USER, "   ", due_at=None, origin="user"), "is empty"),
        (store.add_reminder(DEFAULT_USER, "x" * 1001, due_at=None, origin="user"), "limit is 1000"),
        (store.add_reminder(DEFAULT_USER, "ok", due_at=naive, origin="user"), "timezone-aware"),
        (store.add_memory(DEFAULT_USER, "ok", importance=2.0), "between 0 and 1"),
        (store.put_document(DEFAULT_USER, "bad label/..", "x"), "malformed"),
        (store.put_document(DEFAULT_USER, "..", "x"), "dots alone"),  # no URL reaches it
        (store.delete_document(DEFAULT_USER, "a\x00"), "malformed"),  # not a 404
        (store.add_memory(DEFAULT_USER, "ok", importance="high"), "a number from 0 to 1"),  # type: ignore[arg-type]
        (store.add_memory(DEFAULT_USER, "x\ud800"), "lone surrogate"),
        (store.add_reminder(DEFAULT_USER, "a\x00b", due_at=None, origin="user"), "NUL"),
        (store.complete_reminder(DEFAULT_USER, 0), "integer from 1 to 9223372036854775807"),
    ]
    for call, message in refusals:
        with pytest.raises(InvalidInput, match=message):
            await call
    with pytest.raises(UnknownContinuum, match="nobody"):
        await store.history(DEFAULT_USER, "nobody")
    with pytest.raises(UnknownContinuum) as unknown:
        await store.turns(DEFAULT_USER, "nobody")
    assert unknown.value.continuum_id == "nobody"  # a caller need not parse the message
    assert copy.copy(unknown.value).continuum_id == "nobody"
    with pytest.raises(NotFound, match="#999"):
        await store.complete_reminder(DEFAULT_USER, 999)
    assert await table_counts(store) == before
    assert len(await store.history(DEFAULT_USER, "c1")) == 2


# -- tool effects -------------------------------------------------------------------------


async def test_staged_tool_effects_apply_with_the_turn_only(store: Store) -> None:
    kept = await store.add_reminder(DEFAULT_USER, "done by the tool", due_at=None, origin="user")
    due = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    effects = (
        add_reminder_effect("call the dentist", due, now=100.0),
        complete_reminder_effect(kept.id, now=101.0),
        add_memory_effect("prefers mornings for calls", 0.7, now=102.0),
    )
    write = turn("c1", "t1")
    assert await store.commit_turn(DEFAULT_USER, msgspec.structs.replace(write, effects=effects))
    assert [r.text for r in await store.active_reminders(DEFAULT_USER)] == ["call the dentist"]
    assert (await store.reminder(DEFAULT_USER, kept.id)).completed_at == moment(101.0)
    hits = await store.search_memories(DEFAULT_USER, "mornings", now=200.0)
    assert [h.memory.text for h in hits] == ["prefers mornings for calls"]
    # A retried commit of the same turn applies nothing twice.
    assert not await store.commit_turn(
        DEFAULT_USER, msgspec.structs.replace(write, effects=effects)
    )
    assert len(await store.reminders(DEFAULT_USER, include_completed=True)) == 2
    assert len(await store.memories(DEFAULT_USER)) == 1


async def test_a_staged_memory_that_replaces_one_updates_it_in_place(store: Store) -> None:
    kept = await store.add_memory(DEFAULT_USER, "likes tea", importance=0.8)
    other = await store.add_memory("alice", "likes tea", importance=0.1)
    effects = (
        add_memory_effect("likes green tea", 0.4, now=102.0, replaces=kept.id),
        # Another user's memory is never touched, whatever id a turn names.
        add_memory_effect("likes coffee", 0.9, now=102.0, replaces=other.id),
    )
    write = msgspec.structs.replace(turn("c1", "t1"), effects=effects)
    assert await store.commit_turn(DEFAULT_USER, write)
    mine = await store.memories(DEFAULT_USER)
    assert [(m.id, m.text, m.importance) for m in mine] == [(kept.id, "likes green tea", 0.8)]
    theirs = await store.memories("alice")
    assert [(m.id, m.text, m.importance) for m in theirs] == [(other.id, "likes tea", 0.1)]
    hits = await store.search_memories(DEFAULT_USER, "green", now=200.0)
    assert [h.memory.id for h in hits] == [kept.id]


# -- blocks carried as they came, and a continuum's model settings -----------------------


async def test_raw_blocks_and_model_settings_round_trip(store: Store) -> None:
    thinking = RawBlock("thinking", '{"type":"thinking","thinking":"Hm.","signature":"c2ln"}')
    image = RawBlock("image", '{"type": "image", "source": {"type": "url", "url": "https://x"}}')
    result = ToolResultBlock("toolu_1", "chart", content_json=f"[{image.json}]")
    messages = (
        Message("user", (image, TextBlock("look"))),
        Message("assistant", (thinking, ToolUseBlock("toolu_1", "plot", '{"x": 1.50}'))),
        Message("user", (result,)),
        Message("assistant", (thinking, TextBlock("done"))),
    )
    record = TurnRecord("t1", "c1", "completed", moment(1.0), moment(2.0), "claude-opus-5", "look")
    await store.commit_turn(DEFAULT_USER, TurnWrite(record, messages))
    stored = await store.history(DEFAULT_USER, "c1")
    assert tuple(m.content for m in stored) == tuple(m.content for m in messages)
    assert await store.continuum_model(DEFAULT_USER, "c1") == ContinuumModel()
    own = ContinuumModel("claude-opus-4-8", "enabled", 2048, 8192, "high")
    await store.set_continuum_model(
        DEFAULT_USER, "not-yet", own
    )  # before the continuum's first turn
    assert await store.continuum_model(DEFAULT_USER, "not-yet") == own
    await store.set_continuum_model(DEFAULT_USER, "not-yet", ContinuumModel(max_tokens=512))
    assert await store.continuum_model(DEFAULT_USER, "not-yet") == ContinuumModel(max_tokens=512)
    # Deleting the continuum takes its settings, though it has had no turn yet (the
    # settings stayed, and the delete said there was no such continuum).
    await store.delete_continuum(DEFAULT_USER, "not-yet")
    assert await store.continuum_model(DEFAULT_USER, "not-yet") == ContinuumModel()
    with pytest.raises(UnknownContinuum):
        await store.delete_continuum(DEFAULT_USER, "not-yet")


# -- background jobs, segment summaries, extracted memories ------------------------------


async def closed_segment(store: Store) -> int:
    """Two turns 20 minutes apart (the gap is 10): the second closes the first segment."""
    await store.commit_turn(
        DEFAULT_USER, turn("c1", "t1", at=1000.0, user_text="my sister Ingrid lives in Bergen")
    )
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=2200.0, user_text="a new topic"))
    first, second = await store.recent_segments(DEFAULT_USER, "c1")
    assert second.first_seq == 2
    return first.id


async def test_a_turn_that_closes_a_segment_writes_its_summary_job(store: Store) -> None:
    segment_id = await closed_segment(store)
    (job,) = await store.jobs(DEFAULT_USER, "c1")
    assert (job.kind, job.state, job.attempts, job.next_at) == (
        "segment_summary",
        "pending",
        0,
        moment(2201.0),
    )
    assert msgspec.json.decode(job.payload) == {"segment_id": segment_id}
    # Another turn in the same segment closes nothing.
    await store.commit_turn(DEFAULT_USER, turn("c1", "t3", at=2300.0))
    assert len(await store.jobs(DEFAULT_USER, "c1")) == 1
    assert [m.seq for m in await store.segment_messages(DEFAULT_USER, segment_id)] == [0, 1]


async def test_deleting_a_continuum_takes_its_jobs(store: Store) -> None:
    """A deleted continuum's pending summary job goes with it: on SQLite a new segment
    may take the deleted one's id, and the job would summarise another continuum's."""
    await closed_segment(store)
    await store.commit_turn(DEFAULT_USER, turn("c2", "u1", at=2300.0))
    await store.enqueue_job(DEFAULT_USER, "memory_extraction", "c2", "{}", now=2300.0)
    await store.delete_continuum(DEFAULT_USER, "c1")
    assert await store.jobs(DEFAULT_USER, "c1") == []
    assert [j.continuum_id for j in await store.jobs(DEFAULT_USER)] == ["c2"]  # not another's


async def test_deleting_a_continuum_takes_its_summaries_out_of_the_search_index(
    store: Store,
) -> None:
    """A deleted continuum's summaries leave the search index with it: on SQLite they
    stayed in `segments_fts`, and a later segment (another user's) that took the deleted
    one's id was found by the deleted summary's words."""
    from storage import JobUsage, SegmentDigest, TurnUsage

    segment_id = await closed_segment(store)
    job = await store.claim_job(now=3000.0, lease_seconds=60)
    assert job is not None
    digest = SegmentDigest(segment_id, "Walrus talk", "The user spoke of a walrus.", ())
    usage = JobUsage("claude-sonnet-4-6", TurnUsage(input_tokens=5))
    assert await store.finish_job(job, now=3001.0, digest=digest, usage=usage)
    assert [s.id for s in await store.search_segments(DEFAULT_USER, "walrus")] == [segment_id]
    await store.delete_continuum(DEFAULT_USER, "c1")
    await store.add_user("bob", "b" * 64)
    await store.commit_turn("bob", turn("b1", "u1", at=5000.0, user_text="hello there"))
    await store.commit_turn("bob", turn("b1", "u2", at=9000.0, user_text="a new topic"))
    assert await store.search_segments(DEFAULT_USER, "walrus") == []
    assert await store.search_segments("bob", "walrus") == []


async def test_a_finished_job_stores_summary_and_memories_in_one_go(store: Store) -> None:
    from storage import JobUsage, MemoryProposal, SegmentDigest, TurnUsage

    segment_id = await closed_segment(store)
    old = await store.add_memory(DEFAULT_USER, "Ingrid lives in Oslo", importance=0.4, now=10.0)
    job = await store.claim_job(now=3000.0, lease_seconds=60)
    assert job is not None
    assert job.state == "running"
    assert job.attempts == 1
    assert await store.claim_job(now=3000.0, lease_seconds=60) is None  # claimed once
    digest = SegmentDigest(
        segment_id,
        "Family in Bergen",
        "The user said their sister Ingrid lives in Bergen.",
        (
            MemoryProposal("Ingrid lives in Bergen", 0.7, update_id=old.id),
            MemoryProposal("The user has a sister called Ingrid", 0.6),
        ),
    )
    usage = JobUsage("claude-sonnet-4-6", TurnUsage(input_tokens=5, cache_read_input_tokens=900))
    assert await store.finish_job(job, now=3001.0, digest=digest, usage=usage)
    segment = await store.segment(DEFAULT_USER, segment_id)
    assert (segment.title, segment.summary) == (digest.title, digest.summary)
    assert [
        s.id for s in await store.search_segments(DEFAULT_USER, "Bergen", continuum_id="c1")
    ] == [segment_id]
    assert await store.search_segments(DEFAULT_USER, "nothing-like-it") == []
    memories = {m.id: m for m in await store.memories(DEFAULT_USER)}
    assert len(memories) == 2  # updated in place, not copied
    assert (memories[old.id].text, memories[old.id].importance) == ("Ingrid lives in Bergen", 0.7)
    (new,) = [m for m in memories.values() if m.id != old.id]
    assert new.source_segment == segment_id
    hits = await store.search_memories(DEFAULT_USER, "Bergen", now=3001.0)
    assert [h.memory.id for h in hits] == [old.id]  # the old text is gone from the index
    (done,) = await store.jobs(DEFAULT_USER, "c1")
    assert (done.state, done.finished_at, done.usage) == ("done", moment(3001.0), usage)
    # A worker whose claim is gone writes nothing.
    assert not await store.finish_job(job, now=3002.0, digest=digest)


async def test_a_failed_job_is_kept_and_retried_later(store: Store) -> None:
    await closed_segment(store)
    job = await store.claim_job(now=3000.0, lease_seconds=60)
    assert job is not None
    assert await store.fail_job(job, now=3000.0, error="ModelOverloaded: busy", retry_at=3030.0)
    (kept,) = await store.jobs(DEFAULT_USER)
    assert (kept.state, kept.last_error, kept.next_at) == (
        "pending",
        "ModelOverloaded: busy",
        moment(3030.0),
    )
    assert await store.claim_job(now=3029.0, lease_seconds=60) is None
    again = await store.claim_job(now=3030.0, lease_seconds=60)
    assert again is not None
    assert again.attempts == 2
    assert await store.fail_job(again, now=3031.0, error="bad reply", retry_at=None)
    (given_up,) = await store.jobs(DEFAULT_USER)
    assert (given_up.state, given_up.last_error) == ("failed", "bad reply")
    assert await store.claim_job(now=99_999.0, lease_seconds=60) is None


async def test_a_claim_past_its_lease_is_claimable_again(store: Store) -> None:
    await closed_segment(store)
    first = await store.claim_job(now=3000.0, lease_seconds=60)
    assert first is not None
    assert await store.claim_job(now=3059.0, lease_seconds=60) is None
    second = await store.claim_job(now=3061.0, lease_seconds=60)  # the first worker died
    assert second is not None
    assert second.id == first.id
    assert second.attempts == 2
    assert not await store.fail_job(first, now=3062.0, error="late", retry_at=None)
    assert await store.finish_job(second, now=3062.0)


async def test_a_deleted_reminders_or_memorys_id_is_never_given_again(store: Store) -> None:
    """The newest reminder and memory deleted, the next ones get new ids: a retried
    delete (or a model's tool call) naming the old id never reaches a newer row."""
    first = await store.add_reminder(
        DEFAULT_USER, "water the plants", due_at=None, origin="user", now=10.0
    )
    newest = await store.add_reminder(
        DEFAULT_USER, "call Ada", due_at=None, origin="user", now=11.0
    )
    await store.delete_reminder(DEFAULT_USER, newest.id)
    again = await store.add_reminder(
        DEFAULT_USER, "feed the cat", due_at=None, origin="user", now=12.0
    )
    assert again.id > newest.id > first.id
    kept = await store.add_memory(DEFAULT_USER, "Ada likes tea", now=10.0)
    gone = await store.add_memory(DEFAULT_USER, "Ada has a cat", now=11.0)
    await store.delete_memory(DEFAULT_USER, gone.id)
    fresh = await store.add_memory(DEFAULT_USER, "Ada plays the cello", now=12.0)
    assert fresh.id > gone.id > kept.id
    hits = await store.search_memories(DEFAULT_USER, "cello", now=13.0)
    assert [h.memory.id for h in hits] == [fresh.id]


async def test_a_claim_interrupted_again_and_again_is_given_up(store: Store) -> None:
    """A job (or a search) whose worker dies every time it runs it (one that kills its
    process would kill every restart) is claimed MAX_ATTEMPTS times, then given up
    with the reason, not claimed forever."""
    from storage import MAX_ATTEMPTS

    await closed_segment(store)
    await store.request_search(DEFAULT_USER, "c1", "harbour", now=3000.0)
    at = 3000.0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job = await store.claim_job(now=at, lease_seconds=60)
        search = await store.claim_search(now=at, lease_seconds=60)
        assert job is not None
        assert search is not None
        assert (job.attempts, search.attempts) == (attempt, attempt)
        at += 61  # each worker died holding its claim
    assert await store.claim_job(now=at, lease_seconds=60) is None
    assert await store.claim_search(now=at, lease_seconds=60) is None
    (job,) = await store.jobs(DEFAULT_USER, "c1")
    assert job.state == "failed"
    assert job.last_error is not None
    assert f"interrupted {MAX_ATTEMPTS} times" in job.last_error
    (search,) = await store.searches(DEFAULT_USER, "c1")
    assert (search.state, search.passages) == ("done", ())
    assert search.error is not None
    assert f"interrupted {MAX_ATTEMPTS} times" in search.error


async def test_jobs_of_a_busy_continuum_wait_and_workers_share_the_rest(store: Store) -> None:
    await closed_segment(store)
    await store.enqueue_job(DEFAULT_USER, "segment_summary", "c2", '{"segment_id": 1}', now=100.0)
    await store.enqueue_job(DEFAULT_USER, "segment_summary", "c3", '{"segment_id": 1}', now=100.0)
    claimed: list[int] = []

    async def worker() -> None:
        job = await store.claim_job(now=3000.0, lease_seconds=60, exclude=[(DEFAULT_USER, "c1")])
        assert job is not None
        claimed.append(job.id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        tg.start_soon(worker)
    assert len(set(claimed)) == 2
    assert (
        await store.claim_job(now=3000.0, lease_seconds=60, exclude=[(DEFAULT_USER, "c1")]) is None
    )
    job = await store.claim_job(now=3000.0, lease_seconds=60)
    assert job is not None
    assert job.continuum_id == "c1"


async def test_surfaced_memories_count_their_uses_and_rank_higher(store: Store) -> None:
    a = await store.add_memory(DEFAULT_USER, "tea with lemon in the morning", now=10.0)
    b = await store.add_memory(DEFAULT_USER, "tea with honey in the morning", now=10.0)
    await store.mark_memories_used(DEFAULT_USER, [b.id, b.id])
    await store.mark_memories_used(DEFAULT_USER, [b.id])
    uses = {m.id: m.uses for m in await store.memories(DEFAULT_USER)}
    assert uses == {a.id: 0, b.id: 2}  # a list naming one memory twice counts it once per call
    hits = await store.search_memories(DEFAULT_USER, "tea morning", now=20.0)
    assert [h.memory.id for h in hits] == [b.id, a.id]
    await store.mark_memories_used(DEFAULT_USER, [a.id], times=3)  # counted in a batch
    uses = {m.id: m.uses for m in await store.memories(DEFAULT_USER)}
    assert uses == {a.id: 3, b.id: 2}
    with pytest.raises(InvalidInput, match="times"):
        await store.mark_memories_used(DEFAULT_USER, [a.id], times=0)
    with pytest.raises(InvalidInput, match="memory id"):
        await store.mark_memories_used(DEFAULT_USER, [a.id, 0])


async def test_a_read_goes_to_a_reader_that_is_not_busy(tmp_path: Path) -> None:
    # A composition's memory search must not wait behind another section's slow read
    # while a reader connection sits idle.
    slow = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000)"
        " SELECT count(*) FROM c"
    )
    async with await SQLiteStorage.open(tmp_path / "db.sqlite") as store:
        assert len(store._readers) == 3
        async with anyio.create_task_group() as tg:
            done: list[str] = []

            async def read(name: str) -> None:
                await store._read(slow)
                done.append(name)

            tg.start_soon(read, "first")
            while sum(store._in_flight) < 1:
                await anyio.lowlevel.checkpoint()
            await store._read("SELECT 1")  # a reader in turn, the slow one's neighbour
            tg.start_soon(read, "second")
            while sum(store._in_flight) < 2:
                await anyio.lowlevel.checkpoint()
            # Two readers are busy, one is idle: the next read takes the idle one (taking
            # the next in turn, it would wait behind a slow read).
            await store._read("SELECT 1")
            assert done == []


async def test_a_turn_that_trims_into_the_open_segment_closes_it(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.0))
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=1010.0))  # no pause: the same segment
    trimming = turn("c1", "t3", at=1020.0)
    await store.commit_turn(DEFAULT_USER, msgspec.structs.replace(trimming, history_start=2))
    first, second = await store.recent_segments(DEFAULT_USER, "c1")
    assert (first.turn_count, second.first_seq) == (2, 4)
    (job,) = await store.jobs(DEFAULT_USER, "c1")
    assert msgspec.json.decode(job.payload) == {"segment_id": first.id}


async def test_jobs_summaries_and_memories_stay_their_users(store: Store) -> None:
    from storage import JobUsage, MemoryProposal, SegmentDigest, TurnUsage

    await store.add_user("bob", "b" * 64)
    segment_id = await closed_segment(store)
    assert await store.jobs("bob") == []
    job = await store.claim_job(now=3000.0, lease_seconds=60)
    assert job is not None
    assert job.user == DEFAULT_USER
    digest = SegmentDigest(segment_id, "Bergen", "Ingrid", (MemoryProposal("Ingrid, Bergen"),))
    usage = JobUsage("m", TurnUsage())
    assert await store.finish_job(job, now=3001.0, digest=digest, usage=usage)
    assert await store.memories("bob") == []
    assert await store.search_segments("bob", "Bergen") == []
    with pytest.raises(NotFound):
        await store.segment("bob", segment_id)


# -- listing in pages, deleting ----------------------------------------------------------------


async def test_lists_page_by_key_and_deletes_leave_nothing_behind(store: Store) -> None:
    for n, cid in enumerate(("a", "b", "c")):
        await store.commit_turn(
            DEFAULT_USER, turn(cid, f"{cid}1", at=1000.0 + n, user_text=f"zebra {cid}")
        )
    await store.commit_turn(
        DEFAULT_USER, turn("a", "a2", at=1000.0, user_text="again")
    )  # same instant
    await store.set_continuum_model(DEFAULT_USER, "b", ContinuumModel(model="claude-opus-4-7"))
    first = await store.continuums(DEFAULT_USER, limit=2)
    rest = await store.continuums(
        DEFAULT_USER, limit=2, after=(first[-1].last_turn_at or first[-1].created_at, first[-1].id)
    )
    assert [c.id for c in first + rest] == ["c", "b", "a"]
    usage = await store.usage_by_continuum(DEFAULT_USER, ["a", "b", "zz"])
    assert usage["a"] == (2, TurnUsage(input_tokens=20, output_tokens=10))
    assert set(usage) == {"a", "b"}
    latest = await store.turns(DEFAULT_USER, "a", limit=1)
    earlier = await store.turns(
        DEFAULT_USER, "a", limit=5, before=(latest[0].started_at, latest[0].turn_id)
    )
    assert [t.turn_id for t in earlier + latest] == ["a1", "a2"]
    page = await store.all_messages(DEFAULT_USER, "a", limit=3)
    assert [m.seq for m in page] == [0, 1, 2]
    assert [m.seq for m in await store.all_messages(DEFAULT_USER, "a", after=2)] == [3]

    # Another user's view and deletes never reach the default user's rows.
    assert await store.continuums("bob") == []
    assert await store.usage_by_continuum("bob", ["a", "b"]) == {}
    with pytest.raises(UnknownContinuum):
        await store.delete_continuum("bob", "b")

    before = await table_counts(store)
    await store.delete_continuum(DEFAULT_USER, "b")
    after = await table_counts(store)
    assert before["messages"] - after["messages"] == 2
    assert before["turns"] - after["turns"] == 1
    assert before["continuums"] - after["continuums"] == 1
    assert {h.continuum_id for h in await store.search_messages(DEFAULT_USER, "zebra")} == {
        "a",
        "c",
    }
    with pytest.raises(UnknownContinuum):
        await store.continuum(DEFAULT_USER, "b")
    with pytest.raises(UnknownContinuum):
        await store.delete_continuum(DEFAULT_USER, "b")
    assert await store.continuum_model(DEFAULT_USER, "b") == ContinuumModel()  # settings went too

    memories = [await store.add_memory(DEFAULT_USER, f"walrus fact {n}") for n in range(3)]
    assert [m.id for m in await store.memories(DEFAULT_USER, limit=5, before=memories[2].id)] == [
        memories[1].id,
        memories[0].id,
    ]
    await store.delete_memory(DEFAULT_USER, memories[1].id)
    assert {h.memory.id for h in await store.search_memories(DEFAULT_USER, "walrus", limit=5)} == {
        memories[0].id,
        memories[2].id,
    }
    with pytest.raises(NotFound):
        await store.delete_memory(DEFAULT_USER, memories[1].id)
    with pytest.raises(NotFound):
        await store.delete_memory("bob", memories[0].id)
    if isinstance(store, PostgresStorage):
        # The per-word counts that plan searches forget deleted rows.
        async with await PostgresStorage.open(store.url) as other:
            counts = dict(
                await other._pool.fetch(
                    "SELECT kind, docs FROM term_stats WHERE term = ANY($1::text[])",
                    ["zebra", "walrus"],
                )
            )
        assert counts == {"message": 2, "memory": 2}

    reminders = [
        await store.add_reminder(DEFAULT_USER, f"r{n}", due_at=None, origin="user")
        for n in range(3)
    ]
    assert [r.text for r in await store.reminders(DEFAULT_USER, after=reminders[0].id)] == [
        "r1",
        "r2",
    ]
    await store.delete_reminder(DEFAULT_USER, reminders[1].id)
    assert [r.text for r in await store.reminders(DEFAULT_USER)] == ["r0", "r2"]
    with pytest.raises(NotFound):
        await store.delete_reminder(DEFAULT_USER, reminders[1].id)
    with pytest.raises(NotFound):
        await store.delete_reminder("bob", reminders[0].id)

    for label in ("x", "y", "z"):
        await store.put_document(DEFAULT_USER, label, "text")
    assert [d.label for d in await store.documents(DEFAULT_USER, limit=1, after="x")] == ["y"]
    with pytest.raises(InvalidInput, match="after holds a lone surrogate"):
        await store.documents(DEFAULT_USER, after="\ud800")  # was UnicodeEncodeError
    await store.delete_document(DEFAULT_USER, "y")
    assert [d.label for d in await store.documents(DEFAULT_USER)] == ["x", "z"]
    with pytest.raises(NotFound):
        await store.delete_document(DEFAULT_USER, "y")
    with pytest.raises(NotFound):
        await store.delete_document("bob", "x")
    assert [d.label for d in await store.documents(DEFAULT_USER)] == ["x", "z"]


async def test_the_models_api_answers_are_kept_and_replaced(store: Store) -> None:
    assert await store.model_facts("claude-opus-9") is None
    await store.put_model_facts("claude-opus-9", b'{"max_tokens": 1}', 100.0)
    assert await store.model_facts("claude-opus-9") == (b'{"max_tokens": 1}', 100.0)
    await store.put_model_facts("claude-opus-9", b'{"max_tokens": 2}', 200.0)
    assert await store.model_facts("claude-opus-9") == (b'{"max_tokens": 2}', 200.0)
    assert await store.model_facts("claude-opus-8") is None


async def test_usage_is_summed_per_continuum_and_model(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("a", "a1", at=1000.0))
    await store.commit_turn(DEFAULT_USER, turn("a", "a2", at=1001.0))
    other = turn("a", "a3", at=1002.0)
    other = msgspec.structs.replace(
        other, record=msgspec.structs.replace(other.record, model="claude-opus-4-8")
    )
    await store.commit_turn(DEFAULT_USER, other)
    await store.commit_turn(DEFAULT_USER, turn("b", "b1", at=1003.0))
    by_model = await store.usage_by_model(DEFAULT_USER, ["a", "b", "zz"])
    assert by_model["a"] == {
        "claude-sonnet-4-6": TurnUsage(input_tokens=20, output_tokens=10),
        "claude-opus-4-8": TurnUsage(input_tokens=10, output_tokens=5),
    }
    assert set(by_model) == {"a", "b"}
    assert await store.usage_by_model("bob", ["a"]) == {}


# -- times: floats inside, datetimes outside ----------------------------------------------


async def raw_update(store: Store, sql: str, *args: object) -> None:
    """A write straight to the database, as an older Frontmind would have left it.

    Through the store's own SQLite library (`DRIVER`, which may be sqlean's build): a
    second SQLite library in the process would not share its file locks, and its
    closing a connection can drop the store's, leaving its readers on stale pages."""
    if isinstance(store, SQLiteStorage):
        with closing(DRIVER.connect(store.path)) as conn, conn:
            conn.execute(sql.replace("$1", "?").replace("$2", "?"), args)
        return
    async with await PostgresStorage.open(store.url) as other:
        await other._pool.execute(sql, *args)


async def test_a_claim_made_at_any_instant_is_still_held_when_read_back(store: Store) -> None:
    # A clock reads finer than the microsecond a record's datetime keeps; the claim is
    # checked against the time the record holds, so it is stored at that microsecond.
    await closed_segment(store)
    job = await store.claim_job(now=3000.123456789, lease_seconds=60)
    assert job is not None
    assert job.claimed_at == datetime(1970, 1, 1, 0, 50, 0, 123457, tzinfo=UTC)
    assert await store.finish_job(job, now=3001.0)
    search = await store.request_search(DEFAULT_USER, "c1", "harbour", now=3002.0)
    claimed = await store.claim_search(now=3003.987654321, lease_seconds=60)
    assert claimed is not None
    assert claimed.id == search.id
    assert await store.finish_search(claimed, now=3004.0, passages=(), error=None, keep_turns=1)


async def one_by_one(
    page: Callable[[Any], Awaitable[tuple[list[str], Any]]], count: int
) -> list[str]:
    """`count` pages of one item each, each from the cursor the one before gave."""
    seen: list[str] = []
    cursor = None
    for _ in range(count):
        ids, cursor = await page(cursor)
        seen += ids
    return seen


async def test_pages_resume_exactly_after_times_stored_finer_than_a_microsecond(
    store: Store,
) -> None:
    # Times written before records carried datetimes are floats of any precision; a
    # cursor made from a record's datetime is a fraction of a microsecond off them.
    for n, cid in enumerate(("a", "b", "c", "d")):
        await store.commit_turn(DEFAULT_USER, turn(cid, f"{cid}1", at=1000.0 + n))
    for n, cid in enumerate(("a", "b", "c", "d")):
        fine = 2000.0000004 + n + (0.0000002 if n % 2 else -0.0000002)
        (record,) = await store.turns(DEFAULT_USER, cid)
        old = msgspec.json.encode({**msgspec.to_builtins(record), "started_at": fine})
        await raw_update(store, "UPDATE continuums SET last_turn_at = $1 WHERE id = $2", fine, cid)
        await raw_update(store, "UPDATE turns SET started_at = $1 WHERE id = $2", fine, f"{cid}1")
        await raw_update(store, "UPDATE turns SET record = $1 WHERE id = $2", old, f"{cid}1")

    async def continuums(cursor: Any) -> tuple[list[str], Any]:
        (c,) = page = await store.continuums(DEFAULT_USER, limit=1, after=cursor)
        assert c.last_turn_at is not None
        return [c.id for c in page], (c.last_turn_at, c.id)

    async def turns(cursor: Any) -> tuple[list[str], Any]:
        (t,) = page = await store.turns(DEFAULT_USER, limit=1, before=cursor)
        return [t.turn_id for t in page], (t.started_at, t.turn_id)

    assert await one_by_one(continuums, 4) == ["d", "c", "b", "a"]  # each once, none skipped
    assert await one_by_one(turns, 4) == ["d1", "c1", "b1", "a1"]
    assert await store.turns(DEFAULT_USER, limit=1, before=(moment(2000.0), "a1")) == []
    # A cursor time is a record's own: an aware datetime, not epoch seconds.
    with pytest.raises(InvalidInput, match="cursor time must be a datetime, not float"):
        await store.turns(DEFAULT_USER, before=(2000.0, "a1"))  # type: ignore[arg-type]
    naive = datetime(2026, 1, 1)
    with pytest.raises(InvalidInput, match="cursor time must be timezone-aware"):
        await store.continuums(DEFAULT_USER, after=(naive, "a"))


async def test_a_record_stored_with_epoch_floats_reads_as_datetimes(store: Store) -> None:
    # A turn's record as JSON written before records carried datetimes: the same
    # instants, read the new way.
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.25))
    record = (await store.turns(DEFAULT_USER, "c1"))[0]
    old = msgspec.json.encode(record).replace(b'"1970-01-01T00:16:40.250000Z"', b"1000.25")
    assert b"1000.25" in old
    await raw_update(store, "UPDATE turns SET record = $1 WHERE id = $2", old, "t1")
    (back,) = await store.turns(DEFAULT_USER, "c1")
    assert back == record
    assert back.started_at == moment(1000.25)


async def raw_fetch(store: Store, sql: str) -> list[tuple[Any, ...]]:
    if isinstance(store, SQLiteStorage):
        with closing(DRIVER.connect(store.path)) as conn:
            return [tuple(row) for row in conn.execute(sql)]
    async with await PostgresStorage.open(store.url) as other:
        return [tuple(row) for row in await other._pool.fetch(sql)]


async def test_stored_json_keeps_times_as_epoch_floats(store: Store) -> None:
    # What every release has written, so the release before this one still reads a
    # database written by this one (a rollback needs no migration back).
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.25))
    ((raw,),) = await raw_fetch(store, "SELECT record FROM turns")
    stored = msgspec.json.decode(bytes(raw))
    assert (stored["started_at"], stored["finished_at"]) == (1000.25, 1001.25)
    await store.request_search(DEFAULT_USER, "c1", "harbour", now=2000.0)
    claimed = await store.claim_search(now=2001.0, lease_seconds=60)
    assert claimed is not None
    found = (Passage("memory", "the harbour opens at six", moment(1500.5)),)
    assert await store.finish_search(claimed, now=2002.0, passages=found, error=None, keep_turns=2)
    ((raw,),) = await raw_fetch(store, "SELECT passages FROM searches")
    assert msgspec.json.decode(bytes(raw))[0]["created_at"] == 1500.5
    (search,) = await store.searches(DEFAULT_USER, "c1")
    assert search.passages == found


async def test_a_turns_times_are_checked_as_it_is_stored(store: Store) -> None:
    write = turn("c1", "t1", at=1000.0)
    naive = msgspec.structs.replace(write.record, started_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidInput, match="started_at must be timezone-aware"):
        await store.commit_turn(DEFAULT_USER, msgspec.structs.replace(write, record=naive))
    bad = msgspec.structs.replace(write.record, status="failed", finished_at=1.0)
    with pytest.raises(InvalidInput, match="finished_at must be a datetime, not float"):
        await store.record_turn(DEFAULT_USER, bad)
    odd = msgspec.structs.replace(write.messages[0], created_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidInput, match="created_at must be timezone-aware"):
        await store.commit_turn(
            DEFAULT_USER, msgspec.structs.replace(write, messages=(odd, *write.messages[1:]))
        )
    assert await store.turns(DEFAULT_USER) == []  # nothing of them was written
    # An offset other than UTC is the same instant, handed back in UTC.
    oslo = timezone(timedelta(hours=1))
    local = msgspec.structs.replace(write.record, started_at=datetime(2026, 1, 1, 10, tzinfo=oslo))
    assert await store.commit_turn(DEFAULT_USER, msgspec.structs.replace(write, record=local))
    (back,) = await store.turns(DEFAULT_USER)
    assert back.started_at == datetime(2026, 1, 1, 9, tzinfo=UTC)
    assert back.started_at.utcoffset() == timedelta(0)


async def test_jobs_come_in_pages_oldest_first(store: Store) -> None:
    # Four turns 20 minutes apart (the gap is 10): three closed segments, three jobs.
    for n in range(4):
        await store.commit_turn(DEFAULT_USER, turn("c1", f"t{n}", at=1000.0 + 1200 * n))
    every = await store.jobs(DEFAULT_USER, limit=-1)
    assert len(every) == 3
    assert [j.id for j in every] == sorted(j.id for j in every)
    first = await store.jobs(DEFAULT_USER, limit=2)
    assert first == every[:2]
    assert await store.jobs(DEFAULT_USER, "c1", after=first[-1].id) == every[2:]
    assert await store.jobs(DEFAULT_USER, after=every[-1].id) == []


async def test_a_users_jobs_are_paged_through_an_index_not_sorted(store: Store) -> None:
    # A page of all the user's jobs, as `jobs(user, after=...)` asks for it.
    query = "SELECT id FROM jobs WHERE owner = 'default' AND id > 0 ORDER BY id LIMIT 100"
    if isinstance(store, SQLiteStorage):
        plan = " ".join(str(row[3]) for row in await store._read(f"EXPLAIN QUERY PLAN {query}"))
        assert "jobs_by_owner" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    else:
        ((definition,),) = await store._read(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_by_owner'"
        )
        assert "(owner, id)" in definition, definition


async def test_a_page_size_or_position_past_64_bits_is_refused_by_name(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.0))
    big, U = 2**63, DEFAULT_USER
    calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("limit", lambda: store.jobs(U, limit=big)),
        ("after", lambda: store.jobs(U, after=-big - 1)),
        ("before", lambda: store.memories(U, before=big)),
        ("limit", lambda: store.memories(U, limit=big)),
        ("after", lambda: store.reminders(U, after=big)),
        ("limit", lambda: store.active_reminders(U, limit=big)),
        ("after", lambda: store.all_messages(U, "c1", after=-big - 1)),
        ("limit", lambda: store.all_messages(U, "c1", limit=big)),
        ("limit", lambda: store.continuums(U, limit=big)),
        ("limit", lambda: store.turns(U, limit=big)),
        ("limit", lambda: store.recent_segments(U, "c1", limit=big)),
        ("limit", lambda: store.search_messages(U, "hello", limit=big)),
        ("limit", lambda: store.search_segments(U, "hello", limit=big)),
        ("limit", lambda: store.search_memories(U, "hello", limit=big)),
        ("limit", lambda: store.documents(U, limit=big)),
        ("limit", lambda: store.memories_without_vectors(limit=big)),
        ("after", lambda: store.memories_without_vectors(after=big)),
        ("limit", lambda: store.jobs(U, limit=True)),  # a bool is no page size
    ]
    for name, call in calls:
        with pytest.raises(InvalidInput, match=f"^{name} must be a 64-bit integer"):
            await call()
    # An id is 1 or more, for a delete as for any other use (not a NotFound for one).
    for bad in (0, -1, big):
        with pytest.raises(InvalidInput, match=r"^reminder id must be an integer from 1"):
            await store.delete_reminder(U, bad)
        with pytest.raises(InvalidInput, match=r"^reminder id must be an integer from 1"):
            await store.complete_reminder(U, bad)
        with pytest.raises(InvalidInput, match=r"^memory id must be an integer from 1"):
            await store.delete_memory(U, bad)
    # Past 4,300 digits an int has no repr(): the message gives its size instead.
    with pytest.raises(InvalidInput, match=r"^limit must be a 64-bit integer, not an integer of"):
        await store.jobs(U, limit=10**5000)
    with pytest.raises(InvalidInput, match=r"^memory id must be an integer from 1 to"):
        await store.delete_memory(U, -(10**5000))
    # A negative page size is every row, on either database (PostgreSQL refuses LIMIT -1).
    await store.add_memory(U, "a memory", now=1000.0)
    await store.add_reminder(U, "a reminder", due_at=None, origin="user", now=1000.0)
    assert len(await store.memories(U, limit=-1)) == 1
    assert len(await store.reminders(U, limit=-1)) == 1
    assert len(await store.active_reminders(U, limit=-1)) == 1
    assert len(await store.turns(U, limit=-1)) == 1
    assert len(await store.recent_segments(U, "c1", limit=-1)) == 1
    (waiting,) = await store.memories_without_vectors(limit=-1)
    assert await store.memories_without_vectors(after=waiting.id) == []  # a pass reads on
    assert await store.memories_without_vectors(after=waiting.id - 1) == [waiting]
    # A search ranks a multiple of its limit: past MAX_SEARCH_HITS it is refused.
    for search in (store.search_memories, store.search_messages):
        with pytest.raises(InvalidInput, match=r"^limit must be at most 10000 for a search"):
            await search(U, "hello", limit=10_001)
        assert len(await search(U, "hello", limit=10_000)) <= 1
    # The largest page that fits is an answer, not an error.
    assert len(await store.all_messages(U, "c1", limit=2**63 - 1)) == 2


async def test_a_cursor_of_the_wrong_shape_is_refused_by_name(store: Store) -> None:
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.0))
    when = moment(1000.0)
    for cursor in (when, (when,), (when, 5)):
        with pytest.raises(InvalidInput, match="cursor is \\(a record's time, its id\\)"):
            await store.turns(DEFAULT_USER, before=cursor)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="cursor is \\(a record's time, its id\\)"):
            await store.continuums(DEFAULT_USER, after=cursor)  # type: ignore[arg-type]


async def test_postgres_url_passwords_are_never_shown(pg_server: PostgresServer) -> None:
    """An error opening the database names the URL without its password: one in the
    user part, one given as a parameter (`?password=`, `?sslpassword=`), and one whose
    `/`, `#` or `?` was not percent-encoded (the driver's own words then quote the
    pieces it cut the password into)."""
    missing = pg_server.url("no_such_database")
    host = missing.removeprefix("postgresql://postgres@")
    cases = [
        (f"{missing}?password=hunter2secret&sslpassword=hunter2secret", "does not exist"),
        (f"{missing}?PASSWORD=hunter2secret", "does not exist"),
        (f"postgresql://postgres:hunter2secret@{host}", "does not exist"),
        (f"postgresql://postgres:x:hunter2secret/b@{host}", "percent-encode"),
        (f"postgresql://postgres:hunter2secret#b@{host}", "percent-encode"),
        (f"postgresql://postgres:a?hunter2secret@{host}", "percent-encode"),
    ]
    for url, expected in cases:
        with pytest.raises(StorageUnavailable) as caught:
            await PostgresStorage.open(url)
        shown = "".join(
            str(error) for error in (caught.value, caught.value.__cause__) if error is not None
        )
        assert expected in str(caught.value), (url, shown)
        assert "hunter" not in shown, (url, shown)


async def test_postgres_write_behind_a_held_lock_fails_in_time_saying_why(
    pg_server: PostgresServer,
) -> None:
    """Another session holds a lock the write needs (an operator's open transaction):
    the write does not wait for ever, and its error says what happened (the driver's
    timeout has no words of its own). Nothing of it is stored; once the lock is gone
    the same write goes through."""
    import asyncpg

    url = pg_server.new_database()
    async with await PostgresStorage.open(url, statement_timeout_s=0.5) as store:
        holder = await asyncpg.connect(url)
        try:
            transaction = holder.transaction()
            await transaction.start()
            await holder.execute("LOCK TABLE reminders IN ACCESS EXCLUSIVE MODE")
            with anyio.fail_after(10), pytest.raises(StorageUnavailable) as caught:
                await store.add_reminder(
                    DEFAULT_USER, "water the ferns", due_at=None, origin="user"
                )
            assert "did not answer within 0.5 s" in str(caught.value), caught.value
            assert "a lock another session holds" in str(caught.value)
            await transaction.rollback()
        finally:
            await holder.close()
        assert await store.reminders(DEFAULT_USER) == []
        await store.add_reminder(DEFAULT_USER, "water the ferns", due_at=None, origin="user")
        assert [r.text for r in await store.reminders(DEFAULT_USER)] == ["water the ferns"]
