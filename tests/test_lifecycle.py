"""A store over a long life: the space of deleted rows given back to the file system on the
background worker's schedule, a deleted user's vectors gone whether or not an embedder is
loaded, and no turn of a user slipping in while the user is being deleted."""

from __future__ import annotations

import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import cast

import anyio
import pytest

from actors import Busy, TurnError, TurnEvent
from actors._background import RECLAIM_EVERY_S
from frontmind import Frontmind
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyToolUse, ScriptedResponder
from storage import PostgresStorage, SQLiteStorage, Storage, UserForgotten
from tests._daemon import run_cli
from tests._embedder import ConceptEmbedder
from tests._harness import FakeClock, completed, config, frontmind, run_turn
from tests._postgres import PostgresServer
from tests.test_background import Held

pytestmark = pytest.mark.anyio

STORES = Path(__file__).parent / "stores"
MIB = 1024 * 1024


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


class WatchedLock:
    """The store's write lock, telling when a writer has had to wait for it."""

    def __init__(self, lock: anyio.Lock) -> None:
        self._lock = lock
        self.waiting = anyio.Event()

    async def __aenter__(self) -> None:
        if self._lock.locked():
            self.waiting.set()
        await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


async def fill_documents(store: SQLiteStorage, user: str, mib: int) -> None:
    # Distinct text per document (no page is shared with anything else's).
    for n in range(mib * 10):
        await store.put_document(user, f"doc-{n}", f"{user} {n} " + "lorem ipsum " * 8_000)


async def test_a_deleted_users_space_goes_back_on_the_workers_schedule(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    clock = FakeClock()
    db = tmp_path / "frontmind.db"
    async with frontmind(api, tmp_path, clock=clock) as fm:
        store = fm.storage
        assert isinstance(store, SQLiteStorage)
        ((mode,),) = await store._read("PRAGMA auto_vacuum")
        assert mode == 2  # a new store is made with incremental auto-vacuum
        await fill_documents(store, "alice", 4)
        await fill_documents(store, "bob", 1)
        await completed_turn(fm.user("alice"))
        await fm.run_background()  # the worker looked now: the next look is due later
        # The file's size once its write-ahead log is written back into it.
        ((pages,),) = await store._read("PRAGMA page_count")
        ((page,),) = await store._read("PRAGMA page_size")
        assert page == 8192  # a new store's pages: a turn record of 2-3 KB shares one
        full = pages * page

        forgotten = await fm.delete_user("alice")
        assert forgotten.rows["documents"] == 40
        ((free,),) = await store._read("PRAGMA freelist_count")
        assert free * page >= 3 * MIB  # the rows are gone, their pages still in the file
        await fm.run_background()  # not due yet: the pages stay (SQLite reuses them)
        assert (await store._read("PRAGMA freelist_count"))[0][0] == free

        clock.advance(RECLAIM_EVERY_S)
        await fm.run_background()
        assert (await store._read("PRAGMA freelist_count"))[0][0] == 0
        assert db.stat().st_size <= full - 3 * MIB  # the file itself
        # Bob's rows are all there, and the store is whole.
        assert len(await store.documents("bob")) == 10
        assert (await store._read("PRAGMA integrity_check"))[0][0] == "ok"


async def completed_turn(fm: Frontmind) -> None:
    completed(await run_turn(fm, "main", "hello"))


async def test_a_store_made_before_incremental_vacuum_says_why_it_keeps_its_space(
    tmp_path: Path,
) -> None:
    # A store of an earlier release: opening it does not rewrite it (a VACUUM would
    # rewrite the whole file); its free space is reported as stuck, not given back.
    path = tmp_path / "frontmind.db"
    shutil.copy(STORES / "sqlite_v8.db", path)
    async with await SQLiteStorage.open(path) as store:
        ((mode,),) = await store._read("PRAGMA auto_vacuum")
        assert mode == 0
        await fill_documents(store, "alice", 2)
        await store.delete_user("alice")
        done = await store.reclaim_space()
        assert done.freed_bytes == 0
        assert done.stuck_bytes >= MIB
        nothing = await store.reclaim_space(min_free_bytes=done.stuck_bytes + 1)
        assert (nothing.freed_bytes, nothing.stuck_bytes) == (0, 0)


async def test_the_worker_warns_once_of_space_it_cannot_give_back(
    api: LocalMessagesAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copy(STORES / "sqlite_v8.db", tmp_path / "frontmind.db")
    clock = FakeClock()
    async with frontmind(api, tmp_path, clock=clock) as fm:
        assert isinstance(fm.storage, SQLiteStorage)
        await fill_documents(fm.storage, "alice", 2)
        await fm.delete_user("alice")
        for _ in range(2):
            clock.advance(RECLAIM_EVERY_S)
            await fm.run_background()
    warned = [r.getMessage() for r in caplog.records if "cannot give back" in r.getMessage()]
    assert len(warned) == 1, warned
    assert '"Reclaiming space"' in warned[0]


async def test_a_deleted_users_vectors_go_without_an_embedder_loaded(tmp_path: Path) -> None:
    path = tmp_path / "frontmind.db"
    embedder = ConceptEmbedder()
    async with await SQLiteStorage.open(path) as store:
        await store.use_embedder("tests._embedder:ConceptEmbedder", 4)
        for user, texts in (("alice", ["sister Ingrid", "green tea"]), ("bob", ["garden"])):
            memories = [await store.add_memory(user, text) for text in texts]
            vectors = await embedder.embed(texts)
            await store.set_memory_vectors(list(zip(memories, vectors, strict=True)))
        kept = await store.add_memory("alice", "a third, deleted below")
        await store.set_memory_vectors([(kept, (await embedder.embed(["tea"]))[0])])

    async def indexed(store: SQLiteStorage) -> dict[str, int]:
        rows = await store._read("SELECT owner, count(*) FROM memory_vec GROUP BY owner")
        return {str(owner): int(n) for owner, n in rows}

    # Opened as a command does (`users delete`, `import`): no embedder in use.
    async with await SQLiteStorage.open(path) as store:
        assert await indexed(store) == {"alice": 3, "bob": 1}
        await store.delete_memory("alice", kept.id)  # its vector goes with it
        assert await indexed(store) == {"alice": 2, "bob": 1}
        forgotten = await store.delete_user("alice")
        assert forgotten.rows["memory_vec"] == 2
        assert forgotten.rows["memories"] == 2
        assert await indexed(store) == {"bob": 1}
    # A store that never had an embedder has no index to count.
    async with await SQLiteStorage.open(tmp_path / "plain.db") as plain:
        await plain.add_memory("carol", "plain")
        assert "memory_vec" not in (await plain.delete_user("carol")).rows


async def test_no_turn_of_a_user_starts_while_the_user_is_deleted(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        alice = fm.user("alice")
        await completed_turn(alice)

        # A turn in flight (started, not yet read to its end): deletion is refused.
        stream = alice.turn("main", "still talking")
        await stream.start()
        with pytest.raises(Busy, match="has a turn in progress"):
            await fm.delete_user("alice")
        completed([event async for event in stream])

        # The delete waits for the writer (held here): a turn arriving meanwhile is
        # refused, where it would have loaded the continuum again and committed after.
        store = fm.storage
        assert isinstance(store, SQLiteStorage)
        result = []
        writer = WatchedLock(store._write_lock)
        store._write_lock = writer  # type: ignore[assignment]
        async with anyio.create_task_group() as tg, writer:

            async def delete() -> None:
                result.append(await fm.delete_user("alice"))

            tg.start_soon(delete)
            # Waiting for that event, not for every task to block: the local API's
            # server ticks every 0.1 s, and a waiter polling at the same period may
            # never see all tasks blocked at once.
            await writer.waiting.wait()
            with pytest.raises(Busy, match="being deleted"):
                await alice.turn("main", "let me in").start()
            with pytest.raises(Busy, match="being deleted"):
                await fm.delete_user("alice")
            # Nor may anything else of theirs be written: it would commit after the delete.
            writes: list[Callable[[], Awaitable[object]]] = [
                lambda: alice.add_reminder("call mum"),
                lambda: alice.remember("likes tea"),
                lambda: alice.put_document("notes", "some notes"),
                lambda: alice.set_model_settings("main", max_tokens=1000),
                lambda: alice.delete_continuum("main"),
            ]
            for write in writes:
                with pytest.raises(Busy, match="nothing of theirs can be written"):
                    await write()
        assert result[0].rows["turns"] == 2
        left = await store._read("SELECT count(*) FROM turns WHERE owner = 'alice'")
        assert left[0][0] == 0
        # Once deleted, the name is free again (in the library any name may be used).
        await completed_turn(alice)


async def test_a_write_in_flight_holds_off_the_users_deletion(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        alice = fm.user("alice")
        store = fm.storage
        assert isinstance(store, SQLiteStorage)
        writer = WatchedLock(store._write_lock)
        store._write_lock = writer  # type: ignore[assignment]
        async with anyio.create_task_group() as tg, writer:
            tg.start_soon(alice.add_reminder, "call mum")
            await writer.waiting.wait()  # the reminder waits for the writer
            with pytest.raises(Busy, match="has a write in progress"):
                await fm.delete_user("alice")
        # The write landed; the delete, tried again, takes it with the rest.
        assert [r.text for r in await alice.reminders()] == ["call mum"]
        forgotten = await fm.delete_user("alice")
        assert forgotten.rows["reminders"] == 1
        assert await alice.reminders() == []


def watch(store: Storage, hook: str, continuum_id: str | None = None) -> anyio.Event:
    """An event set as the store's `hook` (`_lease_lock`, `_user_lease_lock`) is asked
    for a lease (of `continuum_id`, if given)."""
    asked = anyio.Event()
    assert isinstance(store, PostgresStorage)
    lock = getattr(store, hook)

    def watched(user: str, *continuum: str) -> AbstractAsyncContextManager[None]:
        if continuum_id is None or continuum == (continuum_id,):
            asked.set()
        return cast(AbstractAsyncContextManager[None], lock(user, *continuum))

    setattr(store, hook, watched)
    return asked


@pytest.mark.slow  # `frontmind users delete` runs as a process of its own
async def test_a_user_is_not_deleted_under_a_turn_of_theirs_on_another_replica(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """B deletes alice while a turn of hers runs on A, whose clock runs an hour ahead.
    The delete went on at once, and A's turn, begun "after" it, was kept: rows of a
    user who is gone. Now, past a short wait, it is `Busy` (from `frontmind users
    delete` too), nothing is deleted and A's turn completes. A turn ending within the
    wait is kept until the delete, which then takes it with everything else of hers;
    a turn asking meanwhile is not kept either."""
    held = Held()
    responder = ScriptedResponder()
    for n in range(2):  # ids of their own: one continuum's history holds both calls
        responder.push(Reply((ReplyToolUse("hold", {}, f"toolu_hold{n}"),)), "Done.")
    responder.push("Done.")
    url = pg_server.new_database()
    cfg = config(storage={"url": url})
    ahead = FakeClock(time.time() + 3600)
    ended: dict[str, list[TurnEvent]] = {}

    async def run(fm: Frontmind, continuum: str, text: str) -> None:
        ended[continuum] = await run_turn(fm, continuum, text)

    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path / "a", cfg=cfg, clock=ahead, tools=[held.tool]) as a,
        frontmind(api, tmp_path / "b", cfg=cfg) as b,
    ):
        alice = a.user("alice")
        await a.add_user("alice")
        await alice.set_model_settings("c2", max_tokens=1000)  # a continuum without turns
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, alice, "c1", "hold on")
            await held.entered.wait()  # A's turn holds its continuum's lease
            with pytest.raises(Busy, match="another process") as caught:
                await b.delete_user("alice")
            assert caught.value.retry_after is not None
            (tmp_path / "cli").mkdir()
            code, out, err = await run_cli(
                "users", "delete", "alice", "--data-dir", str(tmp_path / "cli"), "--database", url
            )
            assert (code, out) == (2, ""), err
            assert "running in another process" in err
            assert [u.name for u in await b.users()] == ["alice"]  # nothing deleted
            assert len(await b.user("alice").turns("c1")) == 1
            held.release.set()
        completed(ended["c1"])

        held.entered, held.release = anyio.Event(), anyio.Event()
        deleting = watch(b.storage, "_user_lease_lock")
        asking = watch(a.storage, "_lease_lock", "c3")
        forgotten: list[UserForgotten] = []

        async def delete() -> None:
            forgotten.append(await b.delete_user("alice"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, alice, "c1", "hold on again")
            await held.entered.wait()
            tg.start_soon(delete)
            await deleting.wait()  # the delete waits for alice's lease
            tg.start_soon(run, alice, "c3", "and another thing")
            await asking.wait()  # a turn in c3 asks for its lease (behind the delete's)
            held.release.set()
        completed(ended["c1"])
        # The turn in c3 ran before the delete (and went with it), or after: not kept.
        last = ended["c3"][-1]
        if isinstance(last, TurnError):
            assert last.type == "not_found", last
        else:
            completed(ended["c3"])
        assert forgotten[0].rows["continuum_settings"] == 1
        assert forgotten[0].rows["turns"] == (2 if isinstance(last, TurnError) else 3)
        assert await b.users() == []
        store = b.storage
        assert isinstance(store, PostgresStorage)
        for table in ("continuums", "turns", "messages", "continuum_settings"):
            left = await store._read(f"SELECT count(*) FROM {table} WHERE owner = 'alice'")
            assert left[0][0] == 0, table
