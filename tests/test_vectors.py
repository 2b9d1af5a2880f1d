"""Vector recall in the database: the storage port's nearest-memories query on both
adapters (sqlite-vec on SQLite, the exact search in SQL on PostgreSQL), and the
embedder's lifecycle (its name and dimension recorded with the vectors)."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
import numpy
import pytest

from actors import SettingsError
from actors._digest import ProposedMemory, decide_memory, deduplicate
from actors._recall import load_embedder, recall
from frontmind import ToolFinished
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyToolUse, ScriptedResponder
from storage import (
    DEFAULT_USER,
    AddMemory,
    InvalidInput,
    JobUsage,
    Memory,
    MemoryProposal,
    PostgresStorage,
    SegmentDigest,
    SQLiteStorage,
    StorageError,
    TurnUsage,
    _sql,
    add_memory_effect,
    memory_score,
)
from storage._postgres import _numbered
from tests._daemon import run_cli
from tests._embedder import (
    CONCEPTS,
    BlockedEmbedder,
    ConceptEmbedder,
    CountingConceptEmbedder,
    OutageEmbedder,
)
from tests._factories import turn
from tests._harness import FakeClock, completed, config, frontmind, run_turn
from tests._postgres import PostgresServer

pytestmark = pytest.mark.anyio

Store = SQLiteStorage | PostgresStorage


class CachedSQLite(SQLiteStorage):
    """Every search through SQLite's vector cache (storage/_vector_cache.py): the user's
    vectors loaded before it. A store starts that load at the user's first search and
    answers through sqlite-vec until it is done, which is what the plain "sqlite" store
    of these tests meets (each test's searches come right after its writes)."""

    async def _nearest_rows(
        self, user: str, vector: Sequence[float], k: int, at: float, among: Sequence[int]
    ) -> list[Any]:
        cache = self._vector_cache
        assert cache is not None, "numpy and sqlite-vec are in the test environment"
        if k == 0:
            return await super()._nearest_rows(user, vector, k, at, among)
        assert await anyio.to_thread.run_sync(cache.loaded, user, len(vector), 60.0)
        served = cache.served
        rows = await super()._nearest_rows(user, vector, k, at, among)
        assert cache.served > served, "the search went through the cache"
        return rows


@pytest.fixture(params=["sqlite", "sqlite-cached", "postgres", "pgvector"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """SQLite (sqlite-vec; through the vector cache once a user's vectors are loaded),
    PostgreSQL without pgvector (the exact search in SQL) and PostgreSQL with it (the
    HNSW index)."""
    storage: Store
    if request.param == "sqlite":
        storage = await SQLiteStorage.open(tmp_path / "frontmind.db", segment_gap=600)
    elif request.param == "sqlite-cached":
        storage = await CachedSQLite.open(tmp_path / "frontmind.db", segment_gap=600)
    else:
        fixture = "pg_server" if request.param == "postgres" else "pgvector_server"
        server: PostgresServer = request.getfixturevalue(fixture)
        storage = await PostgresStorage.open(server.new_database(), segment_gap=600)
    async with storage:
        yield storage


async def test_postgres_uses_pgvector_where_the_server_has_it(
    store: Store, request: pytest.FixtureRequest
) -> None:
    await store.use_embedder("tests:Fixed", 3)
    if isinstance(store, PostgresStorage):
        async with store._transaction() as db:
            ((indexes,),) = await db.execute_fetchall(
                "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'memories_hnsw%'", ()
            )
        with_pgvector = request.node.callspec.params["store"] == "pgvector"
        assert (store._pgvector, indexes) == (with_pgvector, int(with_pgvector))


async def test_pgvector_with_halfvec_searches_a_half_precision_index(
    pgvector_server: PostgresServer,
) -> None:
    """Where pgvector has `halfvec` (0.7 and later), the HNSW index holds the vectors at
    half precision, and replaces the full-precision one a store made under an older
    pgvector kept; the nearest-memories statement orders by the index's own expression
    (else the planner could not use it), while its similarities stay exact."""
    url = pgvector_server.new_database()
    async with await PostgresStorage.open(url) as store:
        await store.use_embedder("tests:Random", 16)
        async with store._transaction() as db:  # the index an older pgvector made
            await db.execute("DROP INDEX memories_hnsw_half", ())
            await db.execute(
                "CREATE INDEX memories_hnsw ON memories USING hnsw (vec vector_cosine_ops)", ()
            )
    async with await PostgresStorage.open(url) as store:
        await store.use_embedder("tests:Random", 16)
        async with store._transaction() as db:
            indexes = await db.execute_fetchall(
                "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'memories_hnsw%'", ()
            )
        assert [name for (name,) in indexes] == ["memories_hnsw_half"]
        rng = random.Random(3)
        vectors: dict[Memory, list[float]] = {}
        for i in range(50):
            memory = await store.add_memory(DEFAULT_USER, f"memory {i}", now=10.0)
            vectors[memory] = [rng.gauss(0, 1) for _ in range(16)]
        await store.set_memory_vectors(list(vectors.items()))
        query = [rng.gauss(0, 1) for _ in range(16)]
        async with store._pool.acquire() as conn, conn.transaction():
            # SET LOCAL: gone with the transaction (the pool resets nothing on release).
            await conn.execute("SET LOCAL enable_seqscan = off")  # the index, if usable
            await conn.execute("SET LOCAL enable_sort = off")
            text = f"[{','.join(map(repr, query))}]"  # pgvector's text form, as sent
            plan = await conn.fetch(
                f"EXPLAIN {_numbered(store._nearest)}",
                *(DEFAULT_USER, 30.0, text, 5),
                *(DEFAULT_USER, 30.0, text, 5, 5),
                text,
                [],
                DEFAULT_USER,
                30.0,
            )
        assert "Index Scan using memories_hnsw_half" in "\n".join(row[0] for row in plan)
        by_id = {memory.id: vector for memory, vector in vectors.items()}
        hits = await store.nearest_memories(DEFAULT_USER, query, k=5, now=30.0)
        exact = sorted(by_id, key=lambda i: -exact_cosine(by_id[i], query))
        assert [m.id for m, _ in hits] == exact[:5]
        for memory, similarity in hits:  # from the full-precision vector
            assert similarity == pytest.approx(exact_cosine(by_id[memory.id], query), abs=1e-6)


async def test_vectors_wider_than_the_hnsw_index_takes_are_searched_exactly(
    pgvector_server: PostgresServer,
) -> None:
    """pgvector's HNSW index takes at most 4,000 dimensions (halfvec); an embedder of
    up to 4,096, as the store accepts, starts all the same and is searched exactly in
    SQL, and a narrower one after it gets its index again."""
    url = pgvector_server.new_database()
    rng = random.Random(5)
    async with await PostgresStorage.open(url) as store:
        await store.use_embedder("tests:Random", 16)  # an index of 16 dimensions first
        assert await store.use_embedder("tests:Wide", 4096)
        assert not store._pgvector
        vectors: dict[int, list[float]] = {}
        for i in range(3):
            memory = await store.add_memory(DEFAULT_USER, f"memory {i}", now=10.0)
            vectors[memory.id] = [rng.gauss(0, 1) for _ in range(4096)]
            await store.set_memory_vectors([(memory, vectors[memory.id])])
        query = [rng.gauss(0, 1) for _ in range(4096)]
        hits = await store.nearest_memories(DEFAULT_USER, query, k=5, now=20.0)
        exact = sorted(vectors, key=lambda i: -exact_cosine(vectors[i], query))
        assert [m.id for m, _ in hits] == exact
    async with await PostgresStorage.open(url) as store:  # the same embedder again
        assert not await store.use_embedder("tests:Wide", 4096)
        assert await store.count_memories_without_vectors() == 0
        assert await store.use_embedder("tests:Random", 16)
        assert store._pgvector


def exact_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


async def test_the_nearest_memories_are_the_users_own_alive_ones_by_cosine(store: Store) -> None:
    await store.use_embedder("tests:Random", 16)
    rng = random.Random(7)
    vectors = {}
    for i in range(300):
        memory = await store.add_memory(DEFAULT_USER, f"memory {i}", now=10.0)
        vectors[memory.id] = [rng.gauss(0, 1) for _ in range(16)]
    memories = {m.id: m for m in await store.memories(DEFAULT_USER, limit=1000)}
    query = [rng.gauss(0, 1) for _ in range(16)]
    exact = sorted(vectors, key=lambda i: -exact_cosine(vectors[i], query))
    # Another user's memory at the query itself, and an expired one, are never found.
    await store.add_user("other", "a" * 64, now=10.0)
    theirs = await store.add_memory("other", "theirs", now=10.0)
    gone = await store.add_memory(
        DEFAULT_USER, "gone", expires_at=datetime.fromtimestamp(20.0, UTC), now=10.0
    )
    await store.set_memory_vectors(
        [(memories[i], v) for i, v in vectors.items()] + [(theirs, query), (gone, query)]
    )
    hits = await store.nearest_memories(DEFAULT_USER, query, k=10, now=30.0)
    assert [m.id for m, _ in hits] == exact[:10]
    for memory, similarity in hits:
        assert similarity == pytest.approx(exact_cosine(vectors[memory.id], query), abs=1e-5)
    # An embedder's numpy floats are a query like any other (matplotlib brings numpy).
    as_numpy = await store.nearest_memories(
        DEFAULT_USER,
        numpy.array(query, dtype=numpy.float32),  # type: ignore[arg-type]
        k=10,
        now=30.0,
    )
    assert [m.id for m, _ in as_numpy] == exact[:10]
    # `among`: the similarity of memories beyond the k nearest (the keyword hits).
    far = exact[-1]
    hits = await store.nearest_memories(DEFAULT_USER, query, k=3, now=30.0, among=[far])
    assert [m.id for m, _ in hits] == [*exact[:3], far]
    ((found, similarity),) = await store.nearest_memories("other", query, k=5, now=30.0)
    assert found == theirs
    assert similarity == pytest.approx(1.0, abs=1e-5)


async def test_k_zero_gives_the_similarities_of_among_alone(store: Store) -> None:
    """Recall searches the nearest while the keyword search runs, then asks (k=0) only
    the similarities of the keyword hits the nearest left out: no second search."""
    await store.use_embedder("tests:Random", 16)
    rng = random.Random(13)
    memories = [await store.add_memory(DEFAULT_USER, f"m{i}", now=10.0) for i in range(40)]
    vectors = {m.id: [rng.gauss(0, 1) for _ in range(16)] for m in memories}
    gone = await store.add_memory(
        DEFAULT_USER, "gone", expires_at=datetime.fromtimestamp(20.0, UTC), now=10.0
    )
    await store.set_memory_vectors([*((m, vectors[m.id]) for m in memories), (gone, [1.0] * 16)])
    query = [rng.gauss(0, 1) for _ in range(16)]
    among = [memories[3].id, memories[30].id, gone.id]
    hits = await store.nearest_memories(DEFAULT_USER, query, k=0, now=30.0, among=among)
    assert sorted(m.id for m, _ in hits) == sorted(among[:2])  # the expired one left out
    for memory, similarity in hits:
        assert similarity == pytest.approx(exact_cosine(vectors[memory.id], query), abs=1e-5)
    assert await store.nearest_memories(DEFAULT_USER, query, k=0, now=30.0) == []


async def test_expired_memories_never_crowd_the_live_ones_out(store: Store) -> None:
    """Expired memories keep their vectors (and their place in an index): however many
    of them lie nearer the query than the live ones, even more than SQLite's coarse pass
    can hand over at once (4,096), the nearest live ones are found."""
    await store.use_embedder("tests:Random", 16)
    rng = random.Random(11)
    query = [rng.gauss(0, 1) for _ in range(16)]
    live: dict[int, list[float]] = {}
    async with store._transaction() as db:
        for i in range(4_200):  # each a little off the query itself
            near = tuple(x + rng.gauss(0, 0.05) for x in query)
            gone = AddMemory(f"gone {i}", 0.5, 10.0, expires_at=20.0, vector=near)
            await store._insert_memory(db, DEFAULT_USER, gone)
        for i in range(8):
            vector = [rng.gauss(0, 1) for _ in range(16)]
            live[
                await store._insert_memory(db, DEFAULT_USER, AddMemory(f"live {i}", 0.5, 10.0))
            ] = vector
    memories = {m.id: m for m in await store.memories(DEFAULT_USER, limit=8)}
    await store.set_memory_vectors([(memories[i], v) for i, v in live.items()])
    exact = sorted(live, key=lambda i: -exact_cosine(live[i], query))
    # Before the crowd expires, it is what is nearest.
    assert all(
        m.text.startswith("gone")
        for m, _ in await store.nearest_memories(DEFAULT_USER, query, k=5, now=15.0)
    )
    for k in (3, 8):
        hits = await store.nearest_memories(DEFAULT_USER, query, k=k, now=30.0)
        assert [m.id for m, _ in hits] == exact[:k]


async def test_wide_vectors_found_through_the_index_agree_with_the_exact_ranking(
    store: Store,
) -> None:
    """384 dimensions: a coarse pass over int8 vectors re-ranked exactly on SQLite, HNSW
    with pgvector; the ten nearest agree with exact brute-force cosine on at least 95%
    of places."""
    await store.use_embedder("tests:Wide", 384)
    rng = random.Random(11)
    memories = [await store.add_memory(DEFAULT_USER, f"m{i}", now=10.0) for i in range(400)]
    vectors = {m.id: [rng.gauss(0, 1) for _ in range(384)] for m in memories}
    await store.set_memory_vectors([(m, vectors[m.id]) for m in memories])
    agree = 0
    for _ in range(10):
        query = [rng.gauss(0, 1) for _ in range(384)]
        exact = sorted(vectors, key=lambda i: -exact_cosine(vectors[i], query))[:10]
        hits = await store.nearest_memories(DEFAULT_USER, query, k=10, now=20.0)
        assert len(hits) == 10
        agree += len(set(exact) & {m.id for m, _ in hits})
        for memory, similarity in hits:  # the similarities themselves are exact
            assert similarity == pytest.approx(exact_cosine(vectors[memory.id], query), abs=1e-4)
    assert agree >= 95


async def test_hnsw_finds_a_users_nearest_among_another_users_many(
    pgvector_server: PostgresServer,
) -> None:
    """Through the HNSW index, with a wider candidate list than pgvector's default:
    another user's 600 memories, every one nearer the query than any of ours, fill the
    index's candidates, and our nearest are still found (exactly, as the candidates held
    fewer than k of ours)."""
    async with await PostgresStorage.open(pgvector_server.new_database()) as store:
        ((ef_search,),) = await store._read("SHOW hnsw.ef_search")
        assert ef_search == "150"
        await store.use_embedder("tests:Random", 16)
        rng = random.Random(3)
        query = [rng.gauss(0, 1) for _ in range(16)]
        await store.add_user("other", "a" * 64, now=10.0)
        theirs = [await store.add_memory("other", f"theirs {i}", now=10.0) for i in range(600)]
        near_query = [[q + rng.gauss(0, 0.05) for q in query] for _ in theirs]
        ours = [await store.add_memory(DEFAULT_USER, f"ours {i}", now=10.0) for i in range(100)]
        vectors = {m.id: [rng.gauss(0, 1) for _ in range(16)] for m in ours}
        await store.set_memory_vectors(
            [*zip(theirs, near_query, strict=True), *((m, vectors[m.id]) for m in ours)]
        )
        await store._read("ANALYZE memories")  # the statistics that choose the index
        exact = sorted(vectors, key=lambda i: -exact_cosine(vectors[i], query))
        hits = await store.nearest_memories(DEFAULT_USER, query, k=10, now=20.0)
        assert [m.id for m, _ in hits] == exact[:10]
        # Their own search goes through the index's candidates (all theirs), nearly exact.
        hits = await store.nearest_memories("other", query, k=10, now=20.0)
        best = sorted(range(len(theirs)), key=lambda i: -exact_cosine(near_query[i], query))[:10]
        assert len({m.id for m, _ in hits} & {theirs[i].id for i in best}) >= 9


async def test_an_earlier_float32_index_is_made_anew_as_int8(tmp_path: Path) -> None:
    """A store whose vector index holds float32 vectors (as written before the coarse
    int8 pass) gets the int8 index when it opens, from the memories' own vectors."""
    path = tmp_path / "frontmind.db"
    rng = random.Random(5)
    async with await SQLiteStorage.open(path) as store:
        await store.use_embedder("tests:Random", 8)
        memories = [await store.add_memory(DEFAULT_USER, f"m{i}", now=10.0) for i in range(50)]
        vectors = {m.id: [rng.gauss(0, 1) for _ in range(8)] for m in memories}
        await store.set_memory_vectors([(m, vectors[m.id]) for m in memories])
        async with store._transaction() as db:
            await db.execute("DROP TABLE memory_vec", ())
            await db.execute(
                "CREATE VIRTUAL TABLE memory_vec USING vec0(owner TEXT PARTITION KEY,"
                " embedding float[8] distance_metric=cosine)",
                (),
            )
            await db.execute(
                "INSERT INTO memory_vec (rowid, owner, embedding)"
                " SELECT id, owner, embedding FROM memories",
                (),
            )
    async with await SQLiteStorage.open(path) as store:
        assert not await store.use_embedder("tests:Random", 8)  # the same embedder: kept
        ((sql,),) = await store._read("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'")
        assert "int8[8]" in sql
        query = [rng.gauss(0, 1) for _ in range(8)]
        exact = sorted(vectors, key=lambda i: -exact_cosine(vectors[i], query))
        hits = await store.nearest_memories(DEFAULT_USER, query, k=5, now=20.0)
        assert [m.id for m, _ in hits] == exact[:5]


async def test_the_memories_waiting_for_a_vector_have_an_index_of_their_own(
    store: Store,
) -> None:
    """The worker lists them and `stats` counts them: without the partial index both
    scanned every memory (about 400 ms at 500,000 on SQLite)."""
    if isinstance(store, SQLiteStorage):
        for query in (
            "SELECT m.id FROM memories m WHERE m.embedding IS NULL ORDER BY m.id LIMIT 64",
            "SELECT count(*) FROM memories WHERE embedding IS NULL",
        ):
            plan = " ".join(str(row[3]) for row in await store._read(f"EXPLAIN QUERY PLAN {query}"))
            assert "USING INDEX memories_waiting_for_vector" in plan or (
                "USING COVERING INDEX memories_waiting_for_vector" in plan
            ), plan
    else:
        ((definition,),) = await store._read(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_waiting_for_vector'"
        )
        assert definition.endswith("(id) WHERE (embedding IS NULL)"), definition


async def test_an_expired_memory_waits_for_no_vector(store: Store) -> None:
    """An expired memory is never recalled: the worker does not pay the embedder for it
    (again after every embedder change), and `stats` does not count it as waiting."""
    await store.use_embedder("tests:Random", 4)
    live = await store.add_memory(DEFAULT_USER, "live", now=10.0)
    await store.add_memory(
        DEFAULT_USER, "gone", expires_at=datetime.fromtimestamp(20.0, UTC), now=10.0
    )
    assert await store.count_memories_without_vectors(now=15.0) == 2
    assert [m.text for m in await store.memories_without_vectors(now=15.0)] == ["live", "gone"]
    assert await store.count_memories_without_vectors(now=30.0) == 1
    assert [m.id for m in await store.memories_without_vectors(now=30.0)] == [live.id]


async def test_a_vector_goes_with_its_memorys_text(store: Store) -> None:
    await store.use_embedder("tests:Fixed", 3)
    kept = await store.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
    deleted = await store.add_memory(DEFAULT_USER, "the user has a sister", now=10.0)
    await store.set_memory_vectors([(kept, [1.0, 0.0, 0.0]), (deleted, [1.0, 0.1, 0.0])])
    assert await store.count_memories_without_vectors() == 0
    await store.delete_memory(DEFAULT_USER, deleted.id)
    hits = await store.nearest_memories(DEFAULT_USER, [1.0, 0.0, 0.0], k=5, now=20.0)
    assert [m.id for m, _ in hits] == [kept.id]
    # The extraction rewrites the memory: its old vector is cleared in the same
    # transaction, and it waits for a new one.
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.0))
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=2200.0))
    job = await store.claim_job(now=3000.0, lease_seconds=60)
    assert job is not None
    (segment, _) = await store.recent_segments(DEFAULT_USER, "c1")
    update = MemoryProposal("the user likes coffee", 0.5, update_id=kept.id)
    digest = SegmentDigest(segment.id, "Drinks", "Coffee now.", (update,))
    usage = JobUsage("claude-sonnet-4-6", TurnUsage(input_tokens=5))
    assert await store.finish_job(job, now=3001.0, digest=digest, usage=usage)
    assert await store.nearest_memories(DEFAULT_USER, [1.0, 0.0, 0.0], k=5, now=3002.0) == []
    (waiting,) = await store.memories_without_vectors()
    assert waiting.text == "the user likes coffee"
    # A vector computed for the old text is not stored over the new one.
    await store.set_memory_vectors([(kept, [1.0, 0.0, 0.0])])
    assert await store.count_memories_without_vectors() == 1
    await store.set_memory_vectors([(waiting, [0.0, 1.0, 0.0])])
    hits = await store.nearest_memories(DEFAULT_USER, [0.0, 1.0, 0.0], k=5, now=3002.0)
    assert [(m.text, round(s, 5)) for m, s in hits] == [("the user likes coffee", 1.0)]


async def test_a_vector_given_with_the_text_is_written_in_its_transaction(store: Store) -> None:
    """A writer that has the new text's vector (`remember`'s effect, the extraction's
    proposals) stores it with the text: nothing waits for the worker, and the nearest
    query finds it at once; without one (or of another dimension) the memory waits."""
    await store.use_embedder("tests:Fixed", 3)
    tea = await store.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
    await store.set_memory_vectors([(tea, [1.0, 0.0, 0.0])])
    write = turn("c1", "t1", at=1000.0)
    effects = (
        add_memory_effect(
            "the user likes green tea", 0.6, now=1000.0, replaces=tea.id, vector=[0.9, 0.1, 0.0]
        ),
        add_memory_effect("Ingrid is the user's sister", 0.7, now=1000.0, vector=[0.0, 1.0, 0.0]),
        add_memory_effect("no vector yet", 0.5, now=1000.0),
        add_memory_effect("made by another embedder", 0.5, now=1000.0, vector=[1.0, 1.0]),
    )
    assert await store.commit_turn(DEFAULT_USER, msgspec.structs.replace(write, effects=effects))
    waiting = {m.text for m in await store.memories_without_vectors()}
    assert waiting == {"no vector yet", "made by another embedder"}
    hits = await store.nearest_memories(DEFAULT_USER, [0.9, 0.1, 0.0], k=2, now=2000.0)
    assert [(m.id, m.text, round(s, 5)) for m, s in hits] == [
        (tea.id, "the user likes green tea", 1.0),
        (
            hits[1][0].id,
            "Ingrid is the user's sister",
            round(exact_cosine([0.9, 0.1, 0.0], [0, 1, 0]), 5),
        ),
    ]
    # The extraction's proposals: a new memory and an update, each with its vector.
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=3000.0))
    job = await store.claim_job(now=4000.0, lease_seconds=60)
    assert job is not None
    (_, segment) = await store.recent_segments(DEFAULT_USER, "c1")
    proposals = (
        MemoryProposal("the user gardens", 0.5, vector=(0.0, 0.0, 1.0)),
        MemoryProposal("the user likes coffee", 0.6, update_id=tea.id, vector=(0.0, 0.2, 1.0)),
    )
    digest = SegmentDigest(segment.id, "Hobbies", "Gardening.", proposals)
    usage = JobUsage("claude-sonnet-4-6", TurnUsage(input_tokens=5))
    assert await store.finish_job(job, now=4001.0, digest=digest, usage=usage)
    assert await store.count_memories_without_vectors() == 2  # the two above, still
    hits = await store.nearest_memories(DEFAULT_USER, [0.0, 0.0, 1.0], k=2, now=5000.0)
    assert [m.text for m, _ in hits] == ["the user gardens", "the user likes coffee"]
    assert hits[1][1] == pytest.approx(exact_cosine([0.0, 0.2, 1.0], [0.0, 0.0, 1.0]), abs=1e-5)
    # The old text's vector is gone with it: the first query now finds coffee's.
    hits = await store.nearest_memories(DEFAULT_USER, [1.0, 0.0, 0.0], k=5, now=5000.0)
    assert "the user likes green tea" not in {m.text for m, _ in hits}


async def test_an_update_of_a_memory_deleted_meanwhile_is_kept_as_a_new_one(
    store: Store,
) -> None:
    """`remember` (or the extraction) found the memory its text repeats, and that memory
    was deleted before the turn (or the job) committed: the new text is stored as a new
    memory, with its vector, instead of updating nothing and being lost (the tool had
    told the model it was saved)."""
    await store.use_embedder("tests:Fixed", 3)
    tea = await store.add_memory(DEFAULT_USER, "the user likes black tea", now=10.0)
    garden = await store.add_memory(DEFAULT_USER, "the user has a garden", now=11.0)
    effects = (
        add_memory_effect(
            "the user now likes green tea", 0.6, now=1000.0, replaces=tea.id, vector=[1, 0, 0]
        ),
    )
    await store.delete_memory(DEFAULT_USER, tea.id)
    write = msgspec.structs.replace(turn("c1", "t1", at=1000.0), effects=effects)
    assert await store.commit_turn(DEFAULT_USER, write)
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=3000.0))
    job = await store.claim_job(now=4000.0, lease_seconds=60)
    assert job is not None
    (_, segment) = await store.recent_segments(DEFAULT_USER, "c1")  # the closed one
    proposal = MemoryProposal("the user grows roses", 0.5, update_id=garden.id, vector=(0, 1, 0))
    await store.delete_memory(DEFAULT_USER, garden.id)
    digest = SegmentDigest(segment.id, "Hobbies", "Roses.", (proposal,))
    assert await store.finish_job(job, now=4001.0, digest=digest)
    kept = {m.text: m for m in await store.memories(DEFAULT_USER)}
    assert set(kept) == {"the user now likes green tea", "the user grows roses"}
    assert kept["the user grows roses"].source_segment == segment.id
    assert await store.count_memories_without_vectors(now=5000.0) == 0
    hits = await store.nearest_memories(DEFAULT_USER, [1.0, 0.0, 0.0], k=1, now=5000.0)
    assert [m.text for m, _ in hits] == ["the user now likes green tea"]


async def test_an_update_that_keeps_the_text_keeps_its_vector(store: Store) -> None:
    """The same memory said again with a higher importance and no new vector (the
    embedder late for `remember`): its text is unchanged, so its vector still is its
    text's, stays found by meaning, and nothing waits for the worker."""
    await store.use_embedder("tests:Fixed", 3)
    tea = await store.add_memory(DEFAULT_USER, "the user likes tea", importance=0.3, now=10.0)
    await store.set_memory_vectors([(tea, [1.0, 0.0, 0.0])])
    again = add_memory_effect("the user likes tea", 0.9, now=1000.0, replaces=tea.id)
    write = msgspec.structs.replace(turn("c1", "t1", at=1000.0), effects=(again,))
    assert await store.commit_turn(DEFAULT_USER, write)
    assert [(m.text, m.importance) for m in await store.memories(DEFAULT_USER)] == [
        ("the user likes tea", 0.9)
    ]
    assert await store.count_memories_without_vectors() == 0
    hits = await store.nearest_memories(DEFAULT_USER, [1.0, 0.0, 0.0], k=5, now=2000.0)
    assert [(m.id, round(s, 5)) for m, s in hits] == [(tea.id, 1.0)]


async def test_a_malformed_vector_is_refused_before_anything_is_written(store: Store) -> None:
    await store.use_embedder("tests:Fixed", 2)
    with pytest.raises(InvalidInput, match="finite and not all zeros"):
        add_memory_effect("the user likes tea", 0.5, now=10.0, vector=[0.0, 0.0])
    with pytest.raises(InvalidInput, match="sequence of numbers"):
        add_memory_effect("the user likes tea", 0.5, now=10.0, vector="[1, 2]")  # type: ignore[arg-type]
    await store.commit_turn(DEFAULT_USER, turn("c1", "t1", at=1000.0))
    await store.commit_turn(DEFAULT_USER, turn("c1", "t2", at=3000.0))
    job = await store.claim_job(now=4000.0, lease_seconds=60)
    assert job is not None
    (_, segment) = await store.recent_segments(DEFAULT_USER, "c1")
    bad = MemoryProposal("the user likes tea", 0.5, vector=(math.inf, 1.0))
    digest = SegmentDigest(segment.id, "Drinks", "Tea.", (bad,))
    with pytest.raises(InvalidInput, match="proposed memory's vector must be finite"):
        await store.finish_job(job, now=4001.0, digest=digest)
    assert await store.memories(DEFAULT_USER) == []


async def test_another_embedder_drops_every_vector(store: Store) -> None:
    assert await store.recorded_embedder() is None
    assert await store.use_embedder("tests:First", 3)  # nothing recorded yet
    assert await store.recorded_embedder() == ("tests:First", 3)
    memory = await store.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
    await store.set_memory_vectors([(memory, [1.0, 0.0, 0.0])])
    assert not await store.use_embedder("tests:First", 3)  # the same: kept
    assert await store.count_memories_without_vectors() == 0
    assert await store.use_embedder("tests:Second", 4)  # another: dropped, waiting
    assert await store.recorded_embedder() == ("tests:Second", 4)
    assert await store.count_memories_without_vectors() == 1
    assert await store.nearest_memories(DEFAULT_USER, [1.0, 0.0, 0.0, 0.0], k=5) == []
    with pytest.raises(InvalidInput, match="3 dimensions; the embedder in use has 4"):
        await store.set_memory_vectors([(memory, [1.0, 0.0, 0.0])])
    await store.set_memory_vectors([(memory, [0.0, 0.0, 0.0, 2.0])])
    hits = await store.nearest_memories(DEFAULT_USER, [0.0, 0.0, 0.0, 1.0], k=5)
    assert [m.id for m, _ in hits] == [memory.id]
    assert await store.use_embedder("tests:Second", 3)  # another dimension: dropped too
    assert await store.count_memories_without_vectors() == 1


class _PausedAfterRecording:
    """A write transaction's connection that stops once it has recorded the embedder
    (its INSERT into `vector_model` run, not committed) until `go_on` is set."""

    def __init__(self, db: Any, recorded: anyio.Event, go_on: anyio.Event) -> None:
        self._db, self._recorded, self._go_on = db, recorded, go_on

    def execute_fetchall(self, sql: str, args: Sequence[Any]) -> Any:
        return self._db.execute_fetchall(sql, args)

    def executemany(self, sql: str, args: Any) -> Any:
        return self._db.executemany(sql, args)

    async def execute(self, sql: str, args: Sequence[Any]) -> None:
        await self._db.execute(sql, args)
        if sql.startswith("INSERT INTO vector_model"):
            self._recorded.set()
            await self._go_on.wait()


async def test_replicas_starting_together_record_their_embedder_once(
    pg_server: PostgresServer,
) -> None:
    """Two replicas start on one new database with their embedder: the second records it
    while the first has recorded it and not yet committed. The record is made once (a
    second row read as another embedder at every later start, which dropped every
    vector then: all of them embedded again)."""
    url = pg_server.new_database()
    async with await PostgresStorage.open(url) as first, await PostgresStorage.open(url) as second:
        recorded, go_on, second_done = anyio.Event(), anyio.Event(), anyio.Event()
        begin = first._begin

        @asynccontextmanager
        async def paused() -> AsyncIterator[Any]:
            async with begin() as db:
                yield _PausedAfterRecording(db, recorded, go_on)

        first._begin = paused  # type: ignore[method-assign]

        async def start_second() -> None:
            await second.use_embedder("tests:Embedder", 4)
            second_done.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(first.use_embedder, "tests:Embedder", 4)
            await recorded.wait()
            tasks.start_soon(start_second)
            # The second replica either finishes beside the first's open transaction,
            # or waits for it (a lock not granted): then the first commits.
            with anyio.fail_after(10):
                while not second_done.is_set():
                    waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    if (await first._read(waiting))[0][0]:
                        break
                    await anyio.sleep(0.01)
            go_on.set()
        rows = await first._read("SELECT model, dimensions FROM vector_model")
        assert [tuple(row) for row in rows] == [("tests:Embedder", 4)]
    async with await PostgresStorage.open(url) as third:
        assert not await third.use_embedder("tests:Embedder", 4)  # kept, not dropped


async def test_a_replica_with_the_replaced_embedder_writes_no_vector(
    pg_server: PostgresServer,
) -> None:
    """A replica started with another embedder (a rolling change of `[memory]
    embedder`, same dimension) drops every vector; a replica still running the old
    one must not store its vectors after that (they would be taken for the new
    embedder's and never embedded again): its memories wait for the new embedder."""
    url = pg_server.new_database()
    async with await PostgresStorage.open(url) as old, await PostgresStorage.open(url) as new:
        await old.use_embedder("tests:Embedder v1", 3)
        tea = await old.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
        assert await new.use_embedder("tests:Embedder v2", 3)
        assert not await old.embedder_current()  # its embedder's calls would be wasted
        assert await new.embedder_current()
        with pytest.raises(StorageError, match="now another embedder's"):
            await old.set_memory_vectors([(tea, [1.0, 0.0, 0.0])])
        effects = (add_memory_effect("Ingrid", 0.5, now=1000.0, vector=[0.0, 1.0, 0.0]),)
        write = msgspec.structs.replace(turn("c1", "t1", at=1000.0), effects=effects)
        assert await old.commit_turn(DEFAULT_USER, write)
        waiting = {m.text for m in await new.memories_without_vectors()}
        assert waiting == {"the user likes tea", "Ingrid"}
        # Nor search with its vectors against the new embedder's (recall: keywords).
        await new.set_memory_vectors([(tea, [0.0, 0.0, 1.0])])
        with pytest.raises(StorageError, match="now another embedder's"):
            await old.nearest_memories(DEFAULT_USER, [0.0, 0.0, 1.0], k=3)
        assert [m.text for m, _ in await new.nearest_memories(DEFAULT_USER, [0, 0, 1], k=3)] == [
            "the user likes tea"
        ]


class PausedAfterTheCheck(PostgresStorage):
    """A write with vectors held inside its transaction right after it read which
    embedder the store's vectors are of (`_ours`), until the test lets it go on."""

    checked: anyio.Event
    go: anyio.Event

    async def _ours(self, db: Any) -> bool:
        ours = await super()._ours(db)
        self.checked.set()
        await self.go.wait()
        return ours


async def _blocked_on_a_lock(url: str, done: anyio.Event) -> None:
    """Until `done` is set or a session of the database waits for a lock."""
    async with await PostgresStorage.open(url) as watcher:
        while not done.is_set():
            if await watcher._read(
                "SELECT 1 FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ):
                return
            await anyio.sleep(0.01)  # a poll of the server's own view, not a guess


@pytest.mark.postgres
async def test_a_replica_storing_vectors_while_another_changes_embedder_keeps_none(
    pg_server: PostgresServer,
) -> None:
    """A replica still on the old embedder had checked, inside its write, that the
    vectors are its embedder's when a replica starting with a new one drops them all:
    the new one waits for that write and drops its vectors too, rather than leave a
    vector of the old embedder that nothing would ever embed again."""
    url = pg_server.new_database()
    async with (
        await PausedAfterTheCheck.open(url) as old,
        await PostgresStorage.open(url) as new,
    ):
        assert isinstance(old, PausedAfterTheCheck)
        await old.use_embedder("tests:Embedder v1", 3)
        tea = await old.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
        old.checked, old.go = anyio.Event(), anyio.Event()
        changed = anyio.Event()

        async def change() -> None:
            assert await new.use_embedder("tests:Embedder v2", 3)
            changed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(old.set_memory_vectors, [(tea, [1.0, 0.0, 0.0])])
            await old.checked.wait()
            tg.start_soon(change)
            await _blocked_on_a_lock(url, changed)  # done, or waiting for the write
            old.go.set()
        assert [m.id for m in await new.memories_without_vectors()] == [tea.id]


async def test_vectors_are_refused_without_an_embedder_or_when_malformed(store: Store) -> None:
    memory = await store.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
    with pytest.raises(InvalidInput, match="no embedder is in use"):
        await store.set_memory_vectors([(memory, [1.0])])
    with pytest.raises(InvalidInput, match="dimension must be 1 to 4096"):
        await store.use_embedder("tests:Huge", 5000)
    with pytest.raises(InvalidInput, match="name must be"):
        await store.use_embedder(" ", 3)
    await store.use_embedder("tests:Fixed", 2)
    with pytest.raises(InvalidInput, match="finite and not all zeros"):
        await store.set_memory_vectors([(memory, [0.0, 0.0])])
    with pytest.raises(InvalidInput, match="finite"):
        await store.set_memory_vectors([(memory, [math.nan, 1.0])])
    with pytest.raises(InvalidInput, match="k must be"):
        await store.nearest_memories(DEFAULT_USER, [1.0, 0.0], k=-1)
    # What an embedder of the user's may answer instead of numbers (recall falls back
    # to keywords on InvalidInput; a TypeError took the memory section down).
    for malformed in ([None, 1.0], [[1.0], [0.0]]):
        with pytest.raises(InvalidInput, match="sequence of numbers"):
            await store.nearest_memories(DEFAULT_USER, malformed, k=3)  # type: ignore[arg-type]
    assert await store.count_memories_without_vectors() == 1


# -- through Frontmind: the embedder's lifecycle and its deadline ---------------------


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


async def test_another_embedder_re_embeds_in_the_background(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    first = config(memory={"embedder": "tests._embedder:ConceptEmbedder"})
    async with frontmind(api, tmp_path, cfg=first) as fm:
        # The worker's pass at opening (jobs a previous process left) runs first: it
        # would embed whatever memories it meets, racing the two below.
        await fm.run_background()
        await fm.remember("Ingrid is the user's sister")
        await fm.remember("Green tea every morning")
        assert await fm.storage.count_memories_without_vectors() == 2
        await fm.run_background()
        assert await fm.storage.count_memories_without_vectors() == 0
    code, out, err = await run_cli("stats", "--data-dir", str(tmp_path))
    assert code == 0, err
    assert "memory vectors  0 waiting" in out
    second = config(memory={"embedder": "tests._embedder:RenamedConceptEmbedder"})
    async with frontmind(api, tmp_path, cfg=second) as fm:
        # Opening dropped the old vectors (the storage tests show none is used after);
        # the worker, woken at startup too, embeds the memories again.
        assert isinstance(fm.storage, SQLiteStorage)
        ((recorded,),) = await fm.storage._read("SELECT model FROM vector_model")
        assert recorded == "tests._embedder:RenamedConceptEmbedder concepts-v2"
        await fm.run_background()
        assert await fm.storage.count_memories_without_vectors() == 0
        assert "Ingrid" in (await fm.compose("ada", "Tell me about my sibling")).notification


@pytest.mark.postgres
async def test_a_replica_with_the_replaced_embedder_still_remembers_by_words(
    api: LocalMessagesAPI,
    tmp_path: Path,
    pg_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Mid rolling change of `[memory] embedder`: a replica still running the old one
    may no longer search by meaning (the store's vectors are the new one's), so its
    `remember` and its extraction decide by words, as its recall falls back to
    keywords: the memories are stored (the new embedder makes their vectors), not lost
    to an error. Nor does it call its embedder (a hosted service's calls are paid) for
    vectors the store would refuse: it says once why, and waits for its restart."""
    monkeypatch.setattr(_sql, "EMBEDDER_RECHECK_S", 0.0)  # the change seen at once
    caplog.set_level(logging.WARNING, logger="frontmind.recall")
    url = pg_server.new_database()
    digest = (
        '{"title": "Family", "summary": "Ingrid.", "memories": ['
        '{"text": "Green tea every morning", "importance": 0.4}]}'
    )
    remember = ReplyToolUse("remember", {"text": "Ingrid is the user's sister"}, "toolu_m")
    responder = ScriptedResponder()
    responder.push(Reply((remember,)), "Noted.", "hello again", digest)
    clock = FakeClock()

    def cfg(embedder: str) -> Any:
        return config(memory={"embedder": f"tests._embedder:{embedder}"}, storage={"url": url})

    async with (
        LocalMessagesAPI(responder=responder) as scripted,
        frontmind(
            scripted, tmp_path / "old", cfg=cfg("CountingConceptEmbedder"), clock=clock
        ) as old,
    ):
        await old.run_background()  # its pass at opening, before the other replica starts
        async with frontmind(api, tmp_path / "new", cfg=cfg("RenamedConceptEmbedder")) as new:
            CountingConceptEmbedder.embedded.clear()
            events = await run_turn(old, "ada", "my sister is Ingrid")
            done = [(e.content, e.is_error) for e in events if isinstance(e, ToolFinished)]
            assert done == [("remembered (saved with this turn)", False)]
            clock.advance(30 * 60 + 1)
            completed(await run_turn(old, "ada", "a new day"))  # closes the first segment
            await old.run_background()
            (job,) = await old.jobs("ada")
            assert (job.state, job.last_error) == ("done", None)
            texts = {m.text for m in await old.memories()}
            assert texts == {"Ingrid is the user's sister", "Green tea every morning"}
            # Its recall, `remember`, extraction and worker: not one call.
            assert await old.storage.count_memories_without_vectors() == 2
            assert not CountingConceptEmbedder.embedded
            replaced = [r for r in caplog.records if "now another embedder's" in r.getMessage()]
            assert len(replaced) == 1, [r.getMessage() for r in replaced]
            await new.run_background()
            assert await new.storage.count_memories_without_vectors() == 0


@pytest.mark.parametrize("top_k", [300, 3000])
async def test_many_memories_a_turn_still_recall_by_meaning(
    api: LocalMessagesAPI, tmp_path: Path, top_k: int
) -> None:
    """`trinkets.memories_top_k` takes up to 10,000: with an embedder a turn still finds
    a paraphrase by meaning, its candidates (four times as many, by words and by
    vector) cut to what one search takes, rather than the vector search refused at
    every turn (past 250) or the whole section failing (past 2,500)."""
    cfg = config(
        memory={"embedder": "tests._embedder:ConceptEmbedder"},
        trinkets={"memories_top_k": top_k},
    )
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        await fm.run_background()
        await fm.remember("Ingrid is the user's sister")
        await fm.run_background()  # its vector
        composed = await fm.compose("ada", "Tell me about my sibling")
        (memories,) = [s for s in composed.sections if s.name == "relevant_memories"]
        assert memories.status == "fresh"
        assert "Ingrid" in composed.notification


@pytest.mark.postgres
async def test_stats_shows_the_memories_waiting_for_a_vector_on_postgresql(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    url = pg_server.new_database()
    async with await PostgresStorage.open(url) as store:
        await store.use_embedder("tests:Fixed", 2)
        await store.add_memory(DEFAULT_USER, "the user likes tea", now=10.0)
        await store.add_memory(DEFAULT_USER, "the user has a cat", now=11.0)
    code, out, err = await run_cli("stats", "--data-dir", str(tmp_path), "--database", url)
    assert code == 0, err
    assert "memory vectors  2 waiting" in out


@pytest.mark.parametrize(
    ("embedder", "deadline_ms"),
    [("BlockedEmbedder", 20), ("NoListEmbedder", 150)],
)
async def test_a_late_or_malformed_embedder_leaves_the_turn_to_keywords(
    api: LocalMessagesAPI, tmp_path: Path, embedder: str, deadline_ms: int
) -> None:
    """An embedder that never answers (past its deadline), or answers something other
    than a list of vectors (None), has failed: the turn's recall uses keywords, as for
    one that raises, rather than losing the memories section."""
    cfg = config(
        memory={"embedder": f"tests._embedder:{embedder}", "embed_deadline_ms": deadline_ms},
        composer={"deadline_ms": 5000},
    )
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        await fm.remember("Ingrid is the user's sister")
        composed = await fm.compose("ada", "What does my sister like?")
        # The keyword hit is shown although the embedder gave no vector.
        assert "Ingrid" in composed.notification
        assert {s.name: s.status for s in composed.sections}["relevant_memories"] == "fresh"


async def test_the_query_embedding_ends_inside_the_sections_own_deadline(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """`embed_deadline_ms` longer than the memories section's own deadline (here the
    section's 500 ms of `[composer.deadlines]`) is cut to a share of it: a late
    embedder leaves the turn to keywords, never the whole section to the composer."""
    cfg = config(
        memory={"embedder": "tests._embedder:BlockedEmbedder", "embed_deadline_ms": 60_000},
        composer={"deadline_ms": 60_000, "deadlines": {"relevant_memories": 500}},
    )
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        await fm.remember("Ingrid is the user's sister")
        composed = await fm.compose("ada", "What does my sister like?")
        assert {s.name: s.status for s in composed.sections}["relevant_memories"] == "fresh"
        assert "Ingrid" in composed.notification
        # The worker's embedding call waits too: let it go, so the instance closes now
        # (and the next test's calls wait on an event of their own).
        release, BlockedEmbedder.release = BlockedEmbedder.release, None
        assert release is not None
        release.set()


@pytest.mark.parametrize(
    ("embedder", "said"),
    [
        ("NoVectorsEmbedder", "list of vectors"),  # an answer that is no list of vectors
        ("BrokenEmbedder", "the embeddings service is down"),  # it raised
        ("KeylessEmbedder", "could not be built: KeyError.*VOYAGE_API_KEY"),  # built, it raised
        ("SyncEmbedder", "must be async"),  # a plain def, though it says its dimension
    ],
)
async def test_an_embedder_that_fails_at_startup_is_a_settings_error(
    api: LocalMessagesAPI, tmp_path: Path, embedder: str, said: str
) -> None:
    cfg = config(memory={"embedder": f"tests._embedder:{embedder}"})
    with pytest.raises(SettingsError, match=rf"{embedder}.*{said}"):
        async with frontmind(api, tmp_path, cfg=cfg):
            pass


@pytest.mark.slow
async def test_commands_that_never_embed_do_not_build_the_embedder(tmp_path: Path) -> None:
    """`stats`, `users add` and the data commands open the store alone: an embedder that
    reads its service's key when built (absent from an operator's shell) or loads a
    model is not built by them. The daemon's start still refuses it, naming the file."""
    (tmp_path / "frontmind.toml").write_text(
        '[memory]\nembedder = "tests._embedder:KeylessEmbedder"\n'
    )
    for command in (("users", "add", "bob"), ("stats",), ("export",)):
        code, _, err = await run_cli(*command, "--data-dir", str(tmp_path))
        assert code == 0, (command, err)
    code, _, err = await run_cli("serve", "--offline", "--data-dir", str(tmp_path))
    assert code == 2
    assert "frontmind.toml: memory.embedder" in err, err
    assert "VOYAGE_API_KEY" in err, err


def test_each_event_loop_gets_its_own_embedder(tmp_path: Path) -> None:
    """A library user's second `asyncio.run` (a script's, or a test framework's loop per
    test) builds the embedder again: the first one's loop-bound resources (an HTTP
    client's connections) died with its loop, and reusing it left every turn to
    keywords. Within one loop it is built once (a local model loads once)."""
    cfg = config(memory={"embedder": "tests._embedder:LoopBoundEmbedder"})

    async def session(data: Path) -> tuple[str, object]:
        async with LocalMessagesAPI() as api, frontmind(api, data, cfg=cfg) as fm:
            await fm.remember("Ingrid is the user's sister")
            await fm.run_background()
            assert await fm.storage.count_memories_without_vectors() == 0
            composed = await fm.compose("ada", "Tell me about my sibling")
            return composed.notification, load_embedder(cfg.memory.embedder or "", cfg.module_path)

    first, built = asyncio.run(session(tmp_path / "first"))
    second, again = asyncio.run(session(tmp_path / "second"))
    assert "Ingrid" in first
    assert "Ingrid" in second  # found by meaning: no word of it is in the question
    assert again is not built


async def test_a_loop_keeps_its_embedder_while_another_loop_builds_its_own() -> None:
    """Two loops at once (a second in a thread): each has its own, and this loop's is
    not replaced by the other's (it would be built again within one `Frontmind.open`)."""
    spec = "tests._embedder:LoopBoundEmbedder"
    mine = load_embedder(spec)

    async def theirs() -> object:
        return load_embedder(spec)

    other = await anyio.to_thread.run_sync(asyncio.run, theirs())
    assert other is not mine
    assert load_embedder(spec) is mine


async def test_words_decide_for_a_memory_with_no_cosine_and_meaning_for_one_with(
    tmp_path: Path,
) -> None:
    """With an embedder, a stored memory without a vector (just written, or waiting to
    be embedded again after an embedder change) has no cosine to the proposal: the
    word-overlap rule decides for it, so `remember` and the extraction update it rather
    than add a copy. One with a cosine is judged by meaning alone."""
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as storage:
        await storage.use_embedder("tests:Fixed", 3)
        stored = await storage.add_memory(DEFAULT_USER, "Ada likes green tea", now=10.0)
        proposed = ProposedMemory("ada likes Green Tea", 0.5)
        decide = partial(
            decide_memory, storage, DEFAULT_USER, proposed, [], now=20.0, same_cosine=0.9
        )
        decided = await decide([], vector=[1.0, 0.0, 0.0])  # nothing near by meaning
        assert decided == MemoryProposal("ada likes Green Tea", stored.importance, stored.id)
        decided = await decide([(stored, 0.4)], vector=[1.0, 0.0, 0.0])
        assert decided == MemoryProposal("ada likes Green Tea", 0.5)  # other meaning


async def test_recall_ranks_by_the_documented_blend(store: Store) -> None:
    """relevance × (0.75 + 0.5 × importance) × recency × (1 + 0.1 × ln(1 + uses)) with
    relevance = (1 - w) × keyword / best keyword + w × cosine: importance, recency and
    uses count once, the keyword term being the text's relevance alone."""
    await store.use_embedder("tests:Concepts", 4)
    embedder = ConceptEmbedder()
    day = 86400.0
    written = [
        ("Tea, tea and more tea: the user's tea shelf", 0.0, 0.0),  # old, unimportant
        ("The user drinks green tea", 1.0, 200 * day),  # recent, important
        ("Coffee is the user's morning beverage", 0.5, 100 * day),  # no keyword, by meaning
    ]
    for text, importance, at in written:
        memory = await store.add_memory(DEFAULT_USER, text, importance=importance, now=at)
        (vector,) = await embedder.embed([text])
        await store.set_memory_vectors([(memory, vector)])
    await store.mark_memories_used(DEFAULT_USER, [1], times=9)
    now, query, weight = 230 * day, "which tea do I like?", 0.3
    (vector,) = await embedder.embed([query])
    cosines = {
        m.id: close
        for m, close in await store.nearest_memories(
            DEFAULT_USER, vector, k=0, now=now, among=[1, 2, 3]
        )
    }
    found = await store.search_memories(DEFAULT_USER, query, limit=10, now=now)

    def weight_of(memory: Memory) -> float:  # importance × recency × uses
        return memory_score(
            -1.0, memory.importance, now - memory.created_at.timestamp(), memory.uses
        )

    keyword = {h.memory.id: h.score / weight_of(h.memory) for h in found}
    assert set(keyword) == {1, 2}
    best = max(keyword.values())
    hits = await recall(
        store, DEFAULT_USER, query, limit=5, now=now, embedder=embedder, weight=weight
    )
    assert {h.memory.id for h in hits} == {1, 2, 3}
    for hit in hits:
        relevance = (1 - weight) * keyword.get(hit.memory.id, 0.0) / best + weight * cosines[
            hit.memory.id
        ]
        assert hit.score == pytest.approx(relevance * weight_of(hit.memory), rel=1e-6)


async def test_meaning_decides_for_a_keyword_hit_beyond_the_nearest_few(store: Store) -> None:
    """A stored memory whose words repeat the proposal's but whose meaning does not is
    kept, whether or not other memories are nearer to the proposal than it: its cosine
    is read too, and the word-overlap rule is not left to decide for it."""
    await store.use_embedder("tests:Fixed", 3)
    garden = await store.add_memory(DEFAULT_USER, "Ada's garden has red roses", now=10.0)
    await store.set_memory_vectors([(garden, [0.0, 0.0, 1.0])])
    for i in range(6):  # nearer to the proposal than the garden, not the same meaning
        drink = await store.add_memory(DEFAULT_USER, f"note {i} on drinks", now=11.0 + i)
        await store.set_memory_vectors([(drink, [0.0, 1.0, 0.2])])
    vector = [0.0, 1.0, 1.0]  # cosine 0.71 to the garden, 0.83 to each note
    near = await store.nearest_memories(DEFAULT_USER, vector, k=5, now=100.0)
    assert garden.id not in {memory.id for memory, _ in near}
    proposed = ProposedMemory("Ada's garden has red tea roses", 0.5)  # word overlap 0.86
    decided = await decide_memory(
        store, DEFAULT_USER, proposed, [], near, now=100.0, same_cosine=0.9, vector=vector
    )
    assert decided == MemoryProposal(proposed.text, 0.5)  # a new memory, no update


def test_one_pass_never_stores_two_proposals_of_the_same_meaning() -> None:
    """The proposals of one extraction pass (or the memories one turn stages) are
    compared by meaning too, when both have a vector: not by words alone."""
    earlier = MemoryProposal("The user drinks chai daily", 0.5, None, (1.0, 0.0, 0.1))
    proposed = ProposedMemory("Every day the user has a cup of tea", 0.5)
    assert deduplicate(proposed, [], [earlier], vector=[0.98, 0.05, 0.1]) is None
    kept = deduplicate(proposed, [], [earlier], vector=[0.0, 1.0, 0.0])
    assert kept == MemoryProposal(proposed.text, 0.5)
    assert deduplicate(proposed, [], [earlier]) == MemoryProposal(proposed.text, 0.5)


async def test_an_embedder_whose_vectors_are_not_the_dimension_it_says_is_refused(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """The dimension is checked when the embedder loads, also for one that says it:
    else every vector it made would be refused later, and no memory found by meaning."""
    cfg = config(memory={"embedder": "tests._embedder:MisdeclaredEmbedder"})
    with pytest.raises(SettingsError, match=r"says it has 5 dimensions but returned .* of 4"):
        async with frontmind(api, tmp_path, cfg=cfg):
            pass


async def test_an_embedder_that_says_its_dimension_starts_while_its_service_is_down(
    api: LocalMessagesAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A hosted embedder that says its dimension starts when it cannot answer the
    check (its service down at startup); its turns use keywords until it answers. The
    outage is logged with its traceback once, then in one line a call (it logged a
    traceback for every turn)."""
    caplog.set_level(logging.WARNING, logger="frontmind.recall")
    cfg = config(memory={"embedder": "tests._embedder:DeclaredBrokenEmbedder"})
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        await fm.remember("Ingrid is the user's sister")
        for _ in range(3):
            composed = await fm.compose("ada", "What does my sister like?")
            assert "Ingrid" in composed.notification
    failed = [
        r
        for r in caplog.records
        if r.name == "frontmind.recall" and r.getMessage().startswith("the embedder failed")
    ]
    assert len(failed) >= 3
    assert "(RuntimeError: the embeddings service is down)" in failed[-1].getMessage()
    assert [r.exc_info is not None for r in failed[1:]] == [False] * (len(failed) - 1)


async def test_an_embedder_seen_before_starts_while_its_service_is_down(
    api: LocalMessagesAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An embedder that does not say its dimension, down when Frontmind starts (a
    restart during its service's outage), starts with the dimension the store recorded
    for it: its vectors stay, its turns use keywords until it answers, then meaning
    again. One never run on the store has nothing to start with: a settings error."""
    spec = "tests._embedder:OutageEmbedder"
    cfg = config(memory={"embedder": spec})
    OutageEmbedder.down = False
    try:
        async with frontmind(api, tmp_path, cfg=cfg) as fm:
            await fm.remember("Ingrid is the user's sister")
            await fm.run_background()  # its vector
            assert await fm.storage.count_memories_without_vectors() == 0
        OutageEmbedder.down = True
        caplog.set_level(logging.WARNING, logger="frontmind.recall")
        async with frontmind(api, tmp_path, cfg=cfg) as fm:
            assert await fm.storage.recorded_embedder() == (spec, len(CONCEPTS) + 1)
            assert await fm.storage.count_memories_without_vectors() == 0  # none dropped
            # By words alone while it is down: "sibling" is not among the memory's.
            composed = await fm.compose("ada", "What does my sibling like?")
            assert "Ingrid" not in composed.notification
            OutageEmbedder.down = False  # back: by meaning again, no restart
            composed = await fm.compose("ada", "What does my sibling like?")
            assert "Ingrid" in composed.notification
        assert any("failed the dimension check" in r.getMessage() for r in caplog.records)
        OutageEmbedder.down = True
        with pytest.raises(SettingsError, match=r"OutageEmbedder.*the embeddings service is down"):
            async with frontmind(api, tmp_path / "new", cfg=cfg):
                pass
    finally:
        OutageEmbedder.down = False


@pytest.mark.parametrize("embedder", [None, "tests._embedder:CountingConceptEmbedder"])
async def test_extraction_updates_a_memory_of_the_same_meaning(
    tmp_path: Path, embedder: str | None
) -> None:
    """With an embedder, a proposal whose cosine to a stored memory passes
    `memory.same_memory_cosine` updates it, its vector written with its new text; by
    words alone (overlap 0.375) it is new."""
    CountingConceptEmbedder.embedded.clear()
    digest = (
        '{"title": "Family", "summary": "Ingrid.", "memories": ['
        '{"text": "The user has a sibling called Ingrid", "importance": 0.7},'
        '{"text": "Green tea every morning", "importance": 0.4}]}'
    )
    responder = ScriptedResponder()
    responder.push("hello", "hello again", digest)
    clock = FakeClock()
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, cfg=config(memory={"embedder": embedder}), clock=clock) as fm,
    ):
        sister = await fm.remember("Ingrid is the user's sister")
        await fm.run_background()  # its vector, with an embedder
        completed(await run_turn(fm, "ada", "my sister visited"))
        clock.advance(30 * 60 + 1)
        completed(await run_turn(fm, "ada", "a new day"))  # closes the first segment
        await fm.run_background()
        (job,) = await fm.jobs("ada")
        assert job.state == "done"
        texts = {m.id: m.text for m in await fm.memories()}
        if embedder is None:
            assert len(texts) == 3
            assert texts[sister.id] == "Ingrid is the user's sister"
        else:
            assert len(texts) == 2  # updated in place, not copied
            assert texts[sister.id] == "The user has a sibling called Ingrid"
            # Its new text's vector came with the job's outcome: embedded once, by the
            # extraction, never again by the worker.
            assert await fm.storage.count_memories_without_vectors() == 0
            assert CountingConceptEmbedder.embedded[texts[sister.id]] == 1


async def test_vectors_of_any_finite_scale_give_their_cosine(store: Store) -> None:
    """Only the direction counts: a vector of huge or tiny components is stored and
    searched at unit length (in float32, 1e20 overflowed to a similarity of 0, 1e-40
    underflowed to an infinite one)."""
    await store.use_embedder("tests:Fixed", 3)
    big = await store.add_memory(DEFAULT_USER, "big", now=10.0)
    await store.set_memory_vectors([(big, [1e30, 2e30, 2e30])])
    tiny = await store.add_memory(DEFAULT_USER, "tiny", now=10.0)
    await store.set_memory_vectors([(tiny, [2e-40, -1e-40, 2e-40])])
    for query in ([1.0, 0.0, 0.0], [1e-40, 0.0, 0.0], [1e20, 0.0, 0.0]):
        found = {
            m.text: close for m, close in await store.nearest_memories(DEFAULT_USER, query, k=2)
        }
        assert found == pytest.approx({"big": 1 / 3, "tiny": 2 / 3}, abs=1e-5)
    # A length past the largest float (each component is not): scaled first, not refused.
    found = {
        m.text: c for m, c in await store.nearest_memories(DEFAULT_USER, [1.7e308] * 2 + [0.0], k=2)
    }
    assert found == pytest.approx({"big": 0.5**0.5, "tiny": 1 / 18**0.5}, abs=1e-5)
