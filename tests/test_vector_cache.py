"""SQLite's vector cache (storage/_vector_cache.py): the first pass of the nearest
memories held in memory, kept true to the database by the writer's own triggers."""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy
import pytest

from actors._recall import recall
from frontmind import Config, ConfigError
from frontmind._frontmind import open_storage
from frontmind.config import StorageConfig
from storage import DEFAULT_USER, AddMemory, Memory, SQLiteStorage, StorageUnavailable
from storage._vector_cache import VectorCache, _Entry
from tests._embedder import ConceptEmbedder

pytestmark = pytest.mark.anyio

DIMENSIONS = 32


def _cache(store: SQLiteStorage) -> VectorCache:
    cache = store._vector_cache
    assert cache is not None, "numpy and sqlite-vec are in the test environment"
    return cache


async def _loaded(store: SQLiteStorage, user: str = DEFAULT_USER) -> bool:
    return await anyio.to_thread.run_sync(_cache(store).loaded, user, DIMENSIONS, 60.0)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as storage:
        await storage.use_embedder("tests:Random", DIMENSIONS)
        yield storage


@asynccontextmanager
async def _budgeted(tmp_path: Path, budget: int) -> AsyncIterator[SQLiteStorage]:
    """A store whose vector cache holds `budget` bytes at most, the tests' embedder in use."""
    async with await SQLiteStorage.open(
        tmp_path / "frontmind.db", vector_cache_bytes=budget
    ) as store:
        await store.use_embedder("tests:Random", DIMENSIONS)
        yield store


async def _remember(
    store: SQLiteStorage, user: str, vectors: Sequence[Sequence[float]]
) -> dict[int, Sequence[float]]:
    async with store._transaction() as db:
        return {
            await store._insert_memory(db, user, AddMemory(f"m{i}", 0.5, 10.0, vector=tuple(v))): v
            for i, v in enumerate(vectors)
        }


async def _nearest_ids(store: SQLiteStorage, query: Sequence[float], k: int = 5) -> list[int]:
    return [m.id for m, _ in await store.nearest_memories(DEFAULT_USER, query, k=k, now=20.0)]


async def test_the_cache_ranks_as_the_exact_cosine_does(store: SQLiteStorage) -> None:
    """3,000 vectors: the ten nearest through the cache's passes (sign bits, int8, then
    the database's exact cosine) agree with brute force on at least 95% of places, and
    every similarity returned is the exact one."""
    rng = numpy.random.default_rng(4)
    centres = rng.standard_normal((30, DIMENSIONS))
    points = centres[rng.integers(0, 30, 3_000)] + 0.4 * rng.standard_normal((3_000, DIMENSIONS))
    vectors = await _remember(store, DEFAULT_USER, points.tolist())
    assert await _loaded(store)
    served = _cache(store).served
    ids = numpy.array(list(vectors))
    matrix = numpy.array(list(vectors.values()))
    matrix /= numpy.linalg.norm(matrix, axis=1, keepdims=True)
    agree = 0
    for _ in range(20):
        query = (centres[rng.integers(0, 30)] + 0.4 * rng.standard_normal(DIMENSIONS)).tolist()
        exact = set(ids[numpy.argsort(-(matrix @ query))[:10]].tolist())
        hits = await store.nearest_memories(DEFAULT_USER, query, k=10, now=20.0)
        agree += len(exact & {m.id for m, _ in hits})
        for memory, similarity in hits:
            assert similarity == pytest.approx(_cosine(vectors[memory.id], query), abs=1e-5)
    assert agree >= 190
    assert _cache(store).served == served + 20


async def test_every_write_after_the_load_is_seen_by_the_next_search(
    store: SQLiteStorage,
) -> None:
    """The cache is loaded, then memories are added, re-embedded, rewritten, deleted,
    another user's written, a write rolled back: each search answers as the database
    does (the triggers name each changed memory, read again at the next search)."""
    rng = random.Random(8)

    def vector() -> list[float]:
        return [rng.gauss(0, 1) for _ in range(DIMENSIONS)]

    await _remember(store, DEFAULT_USER, [vector() for _ in range(200)])
    assert await _loaded(store)
    query = vector()
    # A new memory at the query itself: first.
    (added,) = await _remember(store, DEFAULT_USER, [query])
    assert (await _nearest_ids(store, query))[0] == added
    # Its vector replaced by one far away (the worker's write): no longer near.
    memories = {m.id: m for m in await store.memories(DEFAULT_USER, limit=500)}
    await store.set_memory_vectors([(memories[added], [-x for x in query])])
    assert added not in await _nearest_ids(store, query)
    # Another memory moved onto the query; then deleted.
    other = next(i for i in memories if i != added)
    await store.set_memory_vectors([(memories[other], query)])
    assert (await _nearest_ids(store, query))[0] == other
    await store.delete_memory(DEFAULT_USER, other)
    assert other not in await _nearest_ids(store, query, k=50)
    # Another user's memory at the query: never ours.
    await store.add_user("other", "a" * 64, now=10.0)
    theirs = await _remember(store, "other", [query])
    assert set(theirs).isdisjoint(await _nearest_ids(store, query, k=50))

    # A write rolled back leaves nothing, in the database or the cache.
    async def rolled_back() -> None:
        async with store._transaction() as db:
            await store._insert_memory(
                db, DEFAULT_USER, AddMemory("gone", 0.5, 10.0, vector=tuple(query))
            )
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError, match="rolled back"):
        await rolled_back()
    texts = {m.text for m, _ in await store.nearest_memories(DEFAULT_USER, query, k=5, now=20.0)}
    assert "gone" not in texts
    # Exactly the database's ranking, through the cache, after all of it.
    live = {m.id for m in await store.memories(DEFAULT_USER, limit=500)}
    hits = await store.nearest_memories(DEFAULT_USER, query, k=10, now=20.0)
    assert {m.id for m, _ in hits} <= live
    assert _cache(store).size(DEFAULT_USER) == len(live)


async def test_a_forgotten_user_leaves_the_cache_and_another_embedder_empties_it(
    store: SQLiteStorage,
) -> None:
    await store.add_user("ann", "b" * 64, now=10.0)
    rng = random.Random(2)
    await _remember(store, "ann", [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(50)])
    await _remember(
        store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(50)]
    )
    assert await _loaded(store, "ann")
    assert await _loaded(store)
    assert _cache(store).size("ann") == 50
    await store.delete_user("ann")
    assert _cache(store).size("ann") == 0  # their vectors leave memory with the rows
    query = [1.0] * DIMENSIONS
    assert len(await _nearest_ids(store, query)) == 5
    # Another embedder of the same dimension: every vector dropped, none found.
    assert await store.use_embedder("tests:Another", DIMENSIONS)
    assert await _nearest_ids(store, query) == []


async def test_a_user_over_the_budget_is_searched_by_sqlite_vec(tmp_path: Path) -> None:
    async with _budgeted(tmp_path, 64 * 1024) as store:
        rng = random.Random(5)
        many = [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(2_000)]
        vectors = await _remember(store, DEFAULT_USER, many)
        assert not await _loaded(store)  # 2,000 × 32 dimensions do not fit in 64 KiB
        query = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
        exact = sorted(vectors, key=lambda i: -_cosine(vectors[i], query))
        assert await _nearest_ids(store, query, k=3) == exact[:3]
        assert _cache(store).served == 0


async def test_a_load_that_fails_leaves_the_searches_to_sqlite_vec(
    store: SQLiteStorage, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache's loading thread opens the file again by its path: with the file moved
    away (the store's own connections keep theirs), the load fails, is logged, and the
    searches are answered all the same. It is not tried again at every search (30 s,
    doubling): once the file is back and that time has passed, the next load works."""
    rng = random.Random(6)
    vectors = await _remember(
        store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(100)]
    )
    moved = store.path.with_name("moved.db")
    store.path.rename(moved)
    try:
        with caplog.at_level(logging.ERROR, logger="storage._vector_cache"):
            assert not await _loaded(store)
        assert "could not load the vectors" in caplog.text
        query = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
        exact = sorted(vectors, key=lambda i: -_cosine(vectors[i], query))
        assert await _nearest_ids(store, query, k=3) == exact[:3]
    finally:
        moved.rename(store.path)
    caplog.clear()
    assert not await _loaded(store)  # held: no second try yet
    assert "could not load" not in caplog.text
    cache = _cache(store)
    cache.clock = lambda: time.monotonic() + 31
    assert await _loaded(store)


async def test_k_zero_gives_the_similarities_of_among_alone(store: SQLiteStorage) -> None:
    rng = random.Random(9)
    vectors = await _remember(
        store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(30)]
    )
    query = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    among = list(vectors)[:3]
    for _ in range(2):  # before the cache is loaded and after
        hits = await store.nearest_memories(DEFAULT_USER, query, k=0, now=20.0, among=among)
        assert sorted(m.id for m, _ in hits) == sorted(among)
        for memory, similarity in hits:
            assert similarity == pytest.approx(_cosine(vectors[memory.id], query), abs=1e-5)
        assert await _loaded(store)


async def test_recall_raises_the_keyword_searchs_own_error(tmp_path: Path) -> None:
    """Recall runs the keyword search beside the embedding and the nearest memories: a
    store that fails is the caller's error as the store raised it, not a group."""
    store = await SQLiteStorage.open(tmp_path / "frontmind.db")
    await store.use_embedder("tests:Concept", 4)
    memory: Memory = await store.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
    await store.set_memory_vectors([(memory, [0.0, 1.0, 0.0, 0.01])])
    (hit,) = await recall(store, DEFAULT_USER, "tea", limit=5, now=20.0, embedder=ConceptEmbedder())
    assert hit.memory.id == memory.id
    await store.close()
    with pytest.raises(StorageUnavailable, match="the storage is closed"):
        await recall(store, DEFAULT_USER, "tea", limit=5, now=20.0, embedder=ConceptEmbedder())


async def test_the_cache_budget_is_a_storage_setting(tmp_path: Path) -> None:
    """`[storage] vector_cache_mb` bounds the cache of the store a Frontmind opens (0:
    none); a budget that is no size is refused before the store opens."""
    default = await open_storage(Config(), tmp_path)
    assert isinstance(default, SQLiteStorage)
    async with default:
        assert default._vector_cache is not None
    for mb, kept in ((0.0, False), (0.5, True)):
        settings = Config(storage=StorageConfig(vector_cache_mb=mb))
        store = await open_storage(settings, tmp_path)
        assert isinstance(store, SQLiteStorage)
        async with store:
            assert (store._vector_cache is not None) is kept
            if store._vector_cache is not None:
                assert store._vector_cache._budget == 512 * 1024
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ConfigError, match=r"storage\.vector_cache_mb: must be 0 to"):
            await open_storage(Config(storage=StorageConfig(vector_cache_mb=bad)), tmp_path)


async def test_vectors_alike_by_their_signs_never_widen_the_pass_to_all(
    store: SQLiteStorage,
) -> None:
    """5,000 memories of one vector, and one at the query: all but one sign distance
    tie, and the pass still ranks a bounded number (the query's own first);
    after the load the cache holds little more room than its vectors."""
    rng = random.Random(12)
    base = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    query = [-0.01 * base[0], *base[1:]]  # one sign apart from `base`
    await _remember(store, DEFAULT_USER, [base] * 5_000)
    (nearer,) = await _remember(store, DEFAULT_USER, [query])
    assert await _loaded(store)
    entry = _cache(store)._entries[DEFAULT_USER]
    assert entry.size == 5_001
    assert len(entry.ids) <= entry.size * 1.1 + 256
    hits = await store.nearest_memories(DEFAULT_USER, query, k=5, now=20.0)
    assert hits[0][0].id == nearer
    assert len(hits) == 5
    unit = numpy.array(query, numpy.float32) / numpy.linalg.norm(query)
    # Signs that tell none of them apart: the calibrated pass is a scan of all. With
    # the least share, the ties are still cut to the count asked.
    assert entry.share == 1.0
    entry.share = 0.0
    assert len(entry.by_signs(unit, 100)) == 100  # not the 5,000 tied


async def _rows(store: SQLiteStorage, ids: Sequence[int]) -> list[Any]:
    """The rows a search reads again for its dirty ids (as storage/_sqlite.py does)."""
    listed = ",".join(str(int(i)) for i in ids)
    return await store._read(f"SELECT id, owner, embedding FROM memories WHERE id IN ({listed})")


async def test_a_search_that_stops_half_way_leaves_its_ids_dirty(store: SQLiteStorage) -> None:
    """A search that took the dirty ids and was cancelled before it read them again
    (or failed reading) leaves them for the next one: the write is never lost."""
    rng = random.Random(14)
    await _remember(
        store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(50)]
    )
    assert await _loaded(store)
    query = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    (added,) = await _remember(store, DEFAULT_USER, [query])
    cache = _cache(store)
    assert list(await anyio.to_thread.run_sync(cache.dirty, DEFAULT_USER)) == [added]
    # ... and the search that took them ends there (cancelled, or its read failed).
    assert (await _nearest_ids(store, query))[0] == added


async def test_two_searches_refreshing_out_of_order_keep_the_newest_vector(
    store: SQLiteStorage,
) -> None:
    """Search A reads a memory's row, the memory is re-embedded, search B reads the new
    row and applies it, then A applies its older row: the cache keeps B's."""
    rng = random.Random(15)
    await _remember(
        store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(50)]
    )
    assert await _loaded(store)
    cache = _cache(store)
    query = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    (moved,) = await _remember(store, DEFAULT_USER, [[-x for x in query]])
    seen_by_a = await anyio.to_thread.run_sync(cache.dirty, DEFAULT_USER)
    rows_of_a = await _rows(store, list(seen_by_a))
    memory = next(m for m in await store.memories(DEFAULT_USER, limit=100) if m.id == moved)
    await store.set_memory_vectors([(memory, query)])  # now at the query itself
    seen_by_b = await anyio.to_thread.run_sync(cache.dirty, DEFAULT_USER)
    assert seen_by_b[moved] > seen_by_a[moved]
    await anyio.to_thread.run_sync(
        cache.refresh, DEFAULT_USER, seen_by_b, await _rows(store, [moved])
    )
    await anyio.to_thread.run_sync(cache.refresh, DEFAULT_USER, seen_by_a, rows_of_a)
    assert await anyio.to_thread.run_sync(cache.dirty, DEFAULT_USER) == {}
    served = cache.served
    assert (await _nearest_ids(store, query, k=1)) == [moved]
    assert cache.served == served + 1


async def test_the_budget_counts_what_vectors_need_and_holds_as_a_user_grows(
    tmp_path: Path,
) -> None:
    """9,000 vectors of 32 dimensions need about 1 MB: they load under a 1.2 MB budget
    (the load's doubled capacity is not what they keep). The user then grows past it
    through their searches' refreshes: they leave the cache, and sqlite-vec answers."""
    async with _budgeted(tmp_path, 1_200_000) as store:
        rng = numpy.random.default_rng(16)
        vectors = await _remember(
            store, DEFAULT_USER, rng.standard_normal((9_000, DIMENSIONS)).tolist()
        )
        assert await _loaded(store)
        cache = _cache(store)
        query = rng.standard_normal(DIMENSIONS).tolist()
        vectors.update(
            await _remember(store, DEFAULT_USER, rng.standard_normal((3_000, DIMENSIONS)).tolist())
        )
        served = cache.served
        exact = sorted(vectors, key=lambda i: -_cosine(vectors[i], query))[:5]
        assert await _nearest_ids(store, query) == exact  # refreshed, then over the budget
        assert cache.size(DEFAULT_USER) == 0
        assert await _nearest_ids(store, query) == exact
        assert not await _loaded(store)  # not loaded again
        assert cache.served <= served + 1


async def test_a_user_whose_vectors_fit_the_budget_stays_loaded(tmp_path: Path) -> None:
    """A load the budget admits keeps no spare room that would get it evicted (and
    loaded again at every search): 9,000 vectors of 32 dimensions, 1,044,000 bytes by
    the cache's count, under a budget just above that."""
    async with _budgeted(tmp_path, 1_046_000) as store:
        rng = numpy.random.default_rng(17)
        vectors = await _remember(
            store, DEFAULT_USER, rng.standard_normal((9_000, DIMENSIONS)).tolist()
        )
        assert await _loaded(store)
        cache = _cache(store)
        assert cache.size(DEFAULT_USER) == 9_000
        query = rng.standard_normal(DIMENSIONS).tolist()
        best = max(vectors, key=lambda i: _cosine(vectors[i], query))
        served = cache.served
        assert (await _nearest_ids(store, query, k=1)) == [best]
        assert cache.served == served + 1  # the cache answered, still holding them


async def test_commits_nobody_searches_after_are_not_kept(
    store: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes with no user cached queue nothing (an import, the worker re-embedding);
    with one cached and no search for long, the queue is cut to one mark, and that
    user's next search loads them again, the writes in it."""
    from storage import _vector_cache

    rng = random.Random(17)
    cache = _cache(store)
    for _ in range(20):
        await _remember(store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)]])
    assert len(cache._news) == 0
    assert await _loaded(store)
    monkeypatch.setattr(_vector_cache, "MAX_NEWS", 5)
    query = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    added = [(await _remember(store, DEFAULT_USER, [query]))] + [
        await _remember(store, DEFAULT_USER, [[rng.gauss(0, 1) for _ in range(DIMENSIONS)]])
        for _ in range(8)
    ]
    assert len(cache._news) <= 6
    (first,) = added[0]
    assert await _nearest_ids(store, query, k=1) == [first]  # sqlite-vec, while it reloads
    assert await _loaded(store)
    assert await _nearest_ids(store, query, k=1) == [first]


async def test_vectors_of_one_orthant_are_told_apart(store: SQLiteStorage) -> None:
    """An embedder whose vectors have no negative component (counts, TF-IDF, hashing)
    gives them all the same signs: the pass measures them from the vectors' own center
    in such dimensions, and finds the nearest as sqlite-vec's scan does (it kept an
    arbitrary thousand of the ties: recall@10 0.15)."""
    rng = numpy.random.default_rng(18)
    points = numpy.abs(rng.standard_normal((6_000, DIMENSIONS))) + 0.01
    vectors = await _remember(store, DEFAULT_USER, points.tolist())
    assert await _loaded(store)
    ids = numpy.array(list(vectors))
    unit = points / numpy.linalg.norm(points, axis=1, keepdims=True)
    agree = 0
    for _ in range(20):
        query = numpy.abs(rng.standard_normal(DIMENSIONS)) + 0.01
        exact = set(ids[numpy.argsort(-(unit @ (query / numpy.linalg.norm(query))))[:10]].tolist())
        agree += len(exact & set(await _nearest_ids(store, query.tolist(), k=10)))
    assert agree >= 180


async def test_another_users_writes_leave_a_cached_user_as_it_is(store: SQLiteStorage) -> None:
    """Ids are dirty for the users who own them: a cached user's searches neither read
    again nor reload for another user's writes (all of them once held every id written,
    in memory the budget did not count, and reloaded whole past 5,000)."""
    from storage._vector_cache import MAX_DIRTY

    rng = numpy.random.default_rng(19)
    mine = await _remember(store, DEFAULT_USER, rng.standard_normal((200, DIMENSIONS)).tolist())
    await store.add_user("other", "c" * 64, now=10.0)
    assert await _loaded(store)
    cache = _cache(store)
    await _remember(store, "other", rng.standard_normal((MAX_DIRTY + 100, DIMENSIONS)).tolist())
    assert cache.dirty(DEFAULT_USER) == {}
    query = rng.standard_normal(DIMENSIONS).tolist()
    served = cache.served
    best = max(mine, key=lambda i: _cosine(mine[i], query))
    assert await _nearest_ids(store, query, k=1) == [best]
    assert cache.served == served + 1  # still loaded: not dropped for the other's writes
    # A memory given to the cached user by another is theirs at their next search.
    async with store._transaction() as db:
        await db.execute(
            "UPDATE memories SET owner = ? WHERE owner = 'other' AND id = ?",
            (DEFAULT_USER, max(mine) + 1),
        )
    assert max(mine) + 1 in cache.dirty(DEFAULT_USER)


async def test_users_who_cannot_both_fit_are_not_loaded_again_and_again(tmp_path: Path) -> None:
    """Two users of 60% of the budget each, searching in turn: the second's load pushes
    the first out, who is then left to sqlite-vec for a while instead of pushing the
    second out in turn (each of these loads is seconds at 500,000 vectors)."""
    async with _budgeted(tmp_path, 1_000_000) as store:
        await store.add_user("b", "d" * 64, now=10.0)
        rng = numpy.random.default_rng(20)
        for user in (DEFAULT_USER, "b"):  # 5,300 × 116 bytes: 61% of the budget
            await _remember(store, user, rng.standard_normal((5_300, DIMENSIONS)).tolist())
        cache = _cache(store)
        query = rng.standard_normal(DIMENSIONS).tolist()
        for _ in range(5):
            for user in (DEFAULT_USER, "b"):
                await store.nearest_memories(user, query, k=3, now=20.0)
                await anyio.to_thread.run_sync(cache.loaded, user, DIMENSIONS, 60.0)
        assert cache.loads == 2
        assert cache.size("b") == 5_300
        assert cache.size(DEFAULT_USER) == 0
        cache.clock = lambda: time.monotonic() + 61  # the hold has passed
        assert await _loaded(store)
        assert cache.loads == 3
        assert cache.size("b") == 0


async def test_a_user_over_the_budget_is_tried_again_once_they_shrink(tmp_path: Path) -> None:
    async with _budgeted(tmp_path, 64 * 1024) as store:
        rng = numpy.random.default_rng(21)
        vectors = await _remember(
            store, DEFAULT_USER, rng.standard_normal((2_000, DIMENSIONS)).tolist()
        )
        assert not await _loaded(store)  # 2,000 × 116 bytes: over 64 KiB
        async with store._transaction() as db:
            await db.execute("DELETE FROM memories WHERE id > ?", (min(vectors) + 99,))
        cache = _cache(store)
        assert not await _loaded(store)  # held for a while, not counted at every search
        cache.clock = lambda: time.monotonic() + 601
        assert await _loaded(store)
        assert cache.size(DEFAULT_USER) == 100


async def test_the_signs_center_is_measured_again_as_a_user_grows(store: SQLiteStorage) -> None:
    """A user's first search usually comes before their first vectors: their entry,
    loaded empty, had its center from nothing for good (non-negative vectors: recall@10
    0.135). Each doubling of their vectors loads them anew until a whole chunk did."""
    assert await _loaded(store)  # no vectors yet
    cache = _cache(store)
    rng = numpy.random.default_rng(22)
    points = numpy.abs(rng.standard_normal((3_000, DIMENSIONS))) + 0.01
    vectors = await _remember(store, DEFAULT_USER, points.tolist())
    await _nearest_ids(store, points[0].tolist())  # refreshed: grown, so loaded anew
    await _nearest_ids(store, points[0].tolist())
    assert await _loaded(store)
    assert cache._entries[DEFAULT_USER].center_from == 3_000
    ids = numpy.array(list(vectors))
    unit = points / numpy.linalg.norm(points, axis=1, keepdims=True)
    agree, served = 0, cache.served
    for _ in range(20):
        query = numpy.abs(rng.standard_normal(DIMENSIONS)) + 0.01
        exact = set(ids[numpy.argsort(-(unit @ (query / numpy.linalg.norm(query))))[:10]].tolist())
        agree += len(exact & set(await _nearest_ids(store, query.tolist(), k=10)))
    assert cache.served == served + 20
    assert agree >= 180


async def test_a_store_opened_by_a_relative_path_loads_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with await SQLiteStorage.open(Path("data") / "frontmind.db") as store:
        await store.use_embedder("tests:Random", DIMENSIONS)
        await _remember(store, DEFAULT_USER, [[1.0] * DIMENSIONS, [-1.0] * DIMENSIONS])
        monkeypatch.chdir(tmp_path.parent)
        assert await _loaded(store)
        assert _cache(store).size(DEFAULT_USER) == 2


async def test_the_pass_keeps_the_share_the_users_vectors_need(tmp_path: Path) -> None:
    """How many candidates the signs must keep depends on the vectors: 1,000 of 10,000
    random ones of 64 dimensions gave recall@10 0.875. A load measures the share its
    vectors need (here a quarter or so), and the pass keeps that."""
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        await store.use_embedder("tests:Random64", 64)
        rng = numpy.random.default_rng(23)
        points = rng.standard_normal((10_000, 64))
        vectors = await _remember(store, DEFAULT_USER, points.tolist())
        assert await anyio.to_thread.run_sync(_cache(store).loaded, DEFAULT_USER, 64, 60.0)
        cache = _cache(store)
        assert cache._entries[DEFAULT_USER].share > 0.1
        ids = numpy.array(list(vectors))
        unit = points / numpy.linalg.norm(points, axis=1, keepdims=True)
        agree, served = 0, cache.served
        for _ in range(20):
            query = rng.standard_normal(64)
            exact = set(ids[numpy.argsort(-(unit @ (query / numpy.linalg.norm(query))))[:10]])
            found = await store.nearest_memories(DEFAULT_USER, query.tolist(), k=10, now=20.0)
            agree += len(exact & {m.id for m, _ in found})
        assert cache.served == served + 20
        assert agree >= 190


async def test_a_search_whose_entry_went_stale_meanwhile_still_finds_what_was_committed(
    store: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search reads its dirty ids again; an import of more than MAX_DIRTY of the
    user's memories commits meanwhile (the entry goes stale, its dirty ids let go):
    the stale entry answers nothing, and sqlite-vec finds the memory committed before
    the search (it was left out)."""
    from storage._vector_cache import MAX_DIRTY

    rng = numpy.random.default_rng(24)
    await _remember(store, DEFAULT_USER, rng.standard_normal((500, DIMENSIONS)).tolist())
    assert await _loaded(store)
    query = rng.standard_normal(DIMENSIONS).tolist()
    (mine,) = await _remember(store, DEFAULT_USER, [query])
    read, imported = store._read, list[bool]()

    async def read_while_importing(sql: str, args: Any = ()) -> list[Any]:
        if sql.startswith("SELECT id, owner, embedding") and not imported:
            imported.append(True)
            far = -numpy.array(query) + 0.1 * rng.standard_normal((MAX_DIRTY + 1, DIMENSIONS))
            await _remember(store, DEFAULT_USER, far.tolist())
        return await read(sql, args)

    monkeypatch.setattr(store, "_read", read_while_importing)
    assert (await _nearest_ids(store, query, k=1)) == [mine]
    assert imported


async def test_users_searched_while_one_loads_leave_before_it(tmp_path: Path) -> None:
    """The eviction that follows a load takes the users searched while it loaded, not
    the user just loaded (its load paid for: it was evicted at once and held for a
    minute)."""
    async with _budgeted(tmp_path, 1_000_000) as store:
        rng = numpy.random.default_rng(25)
        # 116 bytes a vector: 464,000 + 406,000 + 174,000, over the budget together
        for user, count in ((DEFAULT_USER, 4_000), ("b", 3_500), ("p", 1_500)):
            if user != DEFAULT_USER:
                await store.add_user(user, ("c" if user == "b" else "d") * 64, now=10.0)
            await _remember(store, user, rng.standard_normal((count, DIMENSIONS)).tolist())
        cache = _cache(store)
        for user in (DEFAULT_USER, "b"):
            assert await _loaded(store, user)
        entered, gate = threading.Event(), threading.Event()
        connect = cache._connect

        class Gated:  # p's load waits in its first read until the others are searched
            def __init__(self) -> None:
                self.conn = connect()

            def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
                if "p" in args and "LIMIT" in sql:
                    entered.set()
                    gate.wait(30)
                return self.conn.execute(sql, args)

            def close(self) -> None:
                self.conn.close()

        cache._connect = Gated
        query = rng.standard_normal(DIMENSIONS).tolist()
        await store.nearest_memories("p", query, k=3, now=20.0)
        assert await anyio.to_thread.run_sync(entered.wait, 30)
        for user in (DEFAULT_USER, "b"):  # searched while p loads
            await store.nearest_memories(user, query, k=3, now=20.0)
        gate.set()
        assert await _loaded(store, "p")
        assert cache.size("p") == 1_500
        assert cache.size(DEFAULT_USER) == 0  # the least recently searched left instead
        assert cache.size("b") == 3_500


def test_the_int8_pass_ranks_vectors_of_a_shared_offset_by_their_distance() -> None:
    """An embedder whose vectors share most of their direction (cosines within a few
    thousandths of each other): ranked by the dot product with their int8 codes, the
    best 40 of 3,000 held 0.64 of the ten nearest (each code's rounding weighs as much
    as its direction); ranked by the distance from the query, all of them."""
    rng = numpy.random.default_rng(26)
    dimensions = 384
    offset = 1.5 * rng.standard_normal(dimensions)
    spread = rng.standard_normal((64, dimensions))

    def vectors(n: int) -> Any:
        shared = offset + 0.25 * (rng.standard_normal((n, 64)) @ spread) / 8
        return (shared + 0.15 * rng.standard_normal((n, dimensions))).astype(numpy.float32)

    points, queries = vectors(3_000), vectors(20)
    entry = _Entry(dimensions)
    entry.put(list(range(3_000)), points)
    entry.share = 1.0  # every vector ranked by int8: the signs are not what is tested
    unit = points / numpy.linalg.norm(points, axis=1, keepdims=True)
    found = 0
    for query in queries:
        exact = numpy.argsort(-(unit @ (query / numpy.linalg.norm(query))))[:10]
        found += len(set(exact.tolist()) & set(entry.nearest(query, 3_000, 40)))
    assert found >= 190


async def test_the_first_pass_runs_inside_the_search_statement(store: SQLiteStorage) -> None:
    """A loaded user with nothing written since their last search is searched in one
    statement: the readers' `vector_cache_pass` names the candidates (its status row
    counts them). Written since, or not loaded: the statement says it could not answer
    (NULL), and the search takes the whole way, with the same answer as the database."""
    from storage._shared import encode_vector
    from storage._sqlite import _NEAREST_CACHED, _STATUS

    rng = random.Random(12)
    vectors = [[rng.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(300)]
    await _remember(store, DEFAULT_USER, vectors)
    query = vectors[7]

    async def named() -> Any:
        args = {"vector": encode_vector(query), "user": DEFAULT_USER, "at": 20.0,
                "among": "[]", "top": 5, "coarse": 100, "wanted": 45}  # fmt: skip
        rows = await store._read(_NEAREST_CACHED, args)
        ((count,),) = [row[7:8] for row in rows if row[8] == _STATUS]
        return count

    assert await named() is None  # not loaded yet: its load starts
    assert await _loaded(store)
    assert await named() == 45
    fresh = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    (added,) = await _remember(store, DEFAULT_USER, [fresh])
    assert await named() is None  # a vector written since: read again first
    assert (await _nearest_ids(store, fresh))[:1] == [added]
    assert await named() == 45
