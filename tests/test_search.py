"""Search whose cost does not grow with the store: the ranking contract at the edges
where a word becomes too common to count or to rank by."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import DEFAULT_USER, PostgresStorage, SQLiteStorage
from storage._fts import COUNT_CAP, ROW_BUDGET, search_plan
from tests._factories import turn
from tests._postgres import PostgresServer

U = DEFAULT_USER
pytestmark = pytest.mark.anyio

NOW = 10_000_000.0


Store = SQLiteStorage | PostgresStorage


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Both adapters keep the same ranking contract."""
    storage: Store
    if request.param == "sqlite":
        storage = await SQLiteStorage.open(tmp_path / "frontmind.db", segment_gap=600)
    else:
        server: PostgresServer = request.getfixturevalue("pg_server")
        storage = await PostgresStorage.open(server.new_database(), segment_gap=600)
    async with storage:
        yield storage


def test_the_plan_keeps_rare_terms_within_the_row_budget() -> None:
    counts = {"rare": 3, "uncommon": ROW_BUDGET - 3, "another": 50, "common": COUNT_CAP}
    plan = search_plan(["common", "another", "rare", "uncommon", "absent"], counts)
    assert plan is not None
    assert plan.ranked
    assert plan.terms == ["rare", "another"]  # rarest first, within the budget
    only_common = search_plan(["common", "absent"], counts)
    assert only_common is not None
    assert not only_common.ranked
    assert only_common.terms == ["common"]
    assert search_plan(["absent"], counts) is None


async def test_a_rare_word_decides_the_ranking_beside_a_common_one(
    store: Store,
) -> None:
    for i in range(COUNT_CAP + 20):  # "weather" is now too common to count or rank by
        await store.add_memory(U, f"weather note {i}", now=NOW - i)
    await store.add_memory(U, "the weather in Bergen was snow", now=NOW - 5000)
    await store.add_memory(U, "Bergen trip planned", now=NOW - 6000)
    hits = await store.search_memories(U, "weather in Bergen", limit=3, now=NOW)
    assert {h.memory.text for h in hits} == {
        "the weather in Bergen was snow",
        "Bergen trip planned",
    }
    assert len(hits) == 2, "the common word alone does not bring in its rows"


async def test_a_query_of_common_words_finds_recent_matches_holding_most_of_them(
    store: Store,
) -> None:
    for i in range(COUNT_CAP + 20):
        await store.commit_turn(
            U, turn("c1", f"t{i}", at=NOW + i, user_text=f"coffee budget round {i}")
        )
    await store.commit_turn(U, turn("c1", "tx", at=NOW + 5000, user_text="coffee only"))
    hits = await store.search_messages(U, "coffee budget", continuum_id="c1", limit=3)
    assert [h.text for h in hits] == [
        f"coffee budget round {COUNT_CAP + 19}",
        f"coffee budget round {COUNT_CAP + 18}",
        f"coffee budget round {COUNT_CAP + 17}",
    ]
    assert [h.score for h in hits] == [2.0, 2.0, 2.0]
    memories = await store.search_memories(U, "coffee budget", now=NOW)
    assert memories == []
