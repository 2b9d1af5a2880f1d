"""What the one SQL implementation of the port (storage/_sql.py) does alike on both
databases, where the adapters used to differ."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from storage import (
    MemoryProposal,
    PostgresStorage,
    SegmentDigest,
    SQLiteStorage,
    UnknownContinuum,
)
from tests._factories import turn
from tests._postgres import PostgresServer

pytestmark = pytest.mark.anyio

Store = SQLiteStorage | PostgresStorage


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    storage: Store
    if request.param == "sqlite":
        storage = await SQLiteStorage.open(tmp_path / "f.db", segment_gap=600)
    else:
        server: PostgresServer = request.getfixturevalue("pg_server")
        storage = await PostgresStorage.open(server.new_database(), segment_gap=600)
    async with storage:
        yield storage


async def test_a_turn_id_held_by_another_users_record_is_not_committed(store: Store) -> None:
    # Turn ids are global: a record alice's turn left when it started (or failed) keeps
    # its id; bob's commit under that id writes nothing, not even his continuum.
    started = turn("main", "t1")
    await store.record_turn("alice", msgspec.structs.replace(started.record, status="failed"))
    assert not await store.commit_turn("bob", turn("main", "t1", user_text="bob's question"))
    with pytest.raises(UnknownContinuum):
        await store.continuum("bob", "main")
    assert await store.turns("bob") == []
    assert await store.search_messages("bob", "question") == []
    (record,) = await store.turns("alice", "main")
    assert (record.turn_id, record.status) == ("t1", "failed")
    assert await store.commit_turn("alice", started)  # its own record is replaced
    assert [r.status for r in await store.turns("alice", "main")] == ["completed"]


async def test_a_memory_a_summary_rewrites_is_counted_once_in_the_search_plan(
    pg_server: PostgresServer,
) -> None:
    # PostgreSQL plans a search from each word's document count; a memory the segment
    # summary rewrites in place gives up its old words' counts as its new words count.
    async with await PostgresStorage.open(pg_server.new_database(), segment_gap=600) as store:
        old = await store.add_memory("alice", "Ingrid lives in Oslo", now=10.0)
        await store.add_memory("alice", "Oslo has a fjord", now=10.0)
        await store.commit_turn("alice", turn("c1", "t1", at=1000.0))
        await store.commit_turn("alice", turn("c1", "t2", at=2000.0))  # closes the first
        job = await store.claim_job(now=3000.0, lease_seconds=60)
        assert job is not None
        (first, _) = await store.recent_segments("alice", "c1")
        proposal = MemoryProposal("Ingrid lives in Bergen", 0.7, update_id=old.id)
        digest = SegmentDigest(first.id, "Family", "Ingrid moved.", (proposal,))
        assert await store.finish_job(job, now=3001.0, digest=digest)
        counts = dict(
            await store._pool.fetch(
                "SELECT term, docs FROM term_stats WHERE kind = 'memory'"
                " AND term = ANY($1::text[])",
                ["ingrid", "oslo", "bergen", "fjord"],
            )
        )
    assert counts == {"ingrid": 1, "oslo": 1, "bergen": 1, "fjord": 1}
