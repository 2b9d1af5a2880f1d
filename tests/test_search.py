"""Search whose cost does not grow with the store: the ranking contract at the edges
where a word becomes too common to count or to rank by; context searches as durable
work, stored, claimed under a lease and shown from the store; background jobs that
yield to turns running anywhere. Every test runs on both adapters."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from actors import Turn
from actors._messages import Drain
from actors._trinkets._search import ContextSearcher, SearchTrinket
from runtime import ActorSystem
from storage import (
    DEFAULT_USER,
    MAX_SEARCH_ATTEMPTS,
    SEGMENT_SUMMARY,
    InvalidInput,
    Passage,
    PostgresStorage,
    SegmentDigest,
    SQLiteStorage,
    moment,
    segment_job_payload,
)
from storage._fts import COUNT_CAP, ROW_BUDGET, search_plan
from tests._factories import turn
from tests._postgres import PostgresServer

U = DEFAULT_USER
pytestmark = pytest.mark.anyio

NOW = 10_000_000.0


Store = SQLiteStorage | PostgresStorage


Opener = Callable[[], Awaitable[Store]]


@pytest.fixture(params=["sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens a store on one database, as many times as asked (each open is what one more
    replica would hold); all are closed afterwards."""
    url = None
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("pg_server")
        url = server.new_database()
    async with AsyncExitStack() as stack:

        async def open_store() -> Store:
            storage: Store
            if url is None:
                storage = await SQLiteStorage.open(tmp_path / "frontmind.db", segment_gap=600)
            else:
                storage = await PostgresStorage.open(url, segment_gap=600)
            return await stack.enter_async_context(storage)

        yield open_store


@pytest.fixture
async def store(opener: Opener) -> Store:
    """Both adapters keep the same ranking contract."""
    return await opener()


def test_the_plan_keeps_rare_terms_within_the_row_budget() -> None:
    counts = {"rare": 3, "uncommon": ROW_BUDGET - 3, "another": 50, "common": COUNT_CAP}
    plan = search_plan(["common", "another", "rare", "uncommon", "absent"], counts)
    assert plan is not None
    assert plan.ranked
    assert plan.terms == ["rare", "another"]  # rarest first, within the budget
    # At the budget's edge: rows up to it are ranked, one more row is not.
    big = min(COUNT_CAP - 1, ROW_BUDGET // 2)
    edge = {"rare": 3, "mid": ROW_BUDGET - 3 - big, "big": big}
    within = search_plan(["big", "mid", "rare"], edge)
    assert within is not None
    assert within.terms == ["rare", "mid", "big"]
    over = search_plan(["big", "mid", "rare"], {**edge, "mid": edge["mid"] + 1})
    assert over is not None
    assert over.terms == ["rare", "mid"]
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


async def test_better_matches_of_other_users_or_expired_ones_crowd_nothing_out(
    store: Store,
) -> None:
    # The ranking looks at the index's best candidates first; here every one of them
    # belongs to another user or has expired, so the search has to look further.
    await store.add_user("other", hashlib.sha256(b"other").hexdigest(), now=NOW)
    for i in range(60):
        await store.add_memory("other", f"zebra zebra zebra {i}", now=NOW - i)
        await store.commit_turn(
            "other", turn("c1", f"o{i}", at=NOW + i, user_text=f"zebra zebra zebra {i}")
        )
    gone = datetime.fromtimestamp(NOW - 1, UTC)
    for i in range(30):
        await store.add_memory(U, f"zebra zebra stale {i}", now=NOW - 100, expires_at=gone)
    await store.add_memory(U, "a zebra at the zoo, among many other animals", now=NOW - 50)
    await store.add_memory(U, "one zebra, once, in a long list of things seen", now=NOW - 60)
    hits = await store.search_memories(U, "zebra", limit=3, now=NOW)
    assert sorted(h.memory.text for h in hits) == [
        "a zebra at the zoo, among many other animals",
        "one zebra, once, in a long list of things seen",
    ]
    for i in range(3):
        await store.commit_turn(
            U, turn("c1", f"u{i}", at=NOW + 100 + i, user_text=f"a zebra in my notes {i}")
        )
    await store.commit_turn(
        U, turn("c1", "u9", at=NOW + 200, user_text="zebra zebra zebra zebra at last")
    )
    found = await store.search_messages(U, "zebra", continuum_id="c1", limit=5)
    assert found[0].text == "zebra zebra zebra zebra at last"  # the best first
    assert sorted(h.text for h in found[1:]) == [f"a zebra in my notes {i}" for i in range(3)]
    assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
    other = await store.search_messages("other", "zebra", continuum_id="c1", limit=5)
    assert len(other) == 5
    assert all(h.text.startswith("zebra zebra zebra") for h in other)


# -- context searches: durable, shared, shown from the store ----------------------------


def for_turn(continuum: str = "c1", now: float = NOW) -> Turn:
    return Turn("t", continuum, "and now?", now, "UTC", user=U)


def searcher(store: Store, *, keep_turns: int = 2) -> ContextSearcher:
    return ContextSearcher(store, limit=5, keep_turns=keep_turns, clock=lambda: NOW)


async def test_a_search_is_pending_then_found_then_gone_after_its_turns(store: Store) -> None:
    await store.commit_turn(U, turn("c1", "t0", at=NOW - 7300, user_text="the launch is in May"))
    await store.add_memory(U, "launch party at the harbour", now=NOW - 86400)
    trinket = SearchTrinket(store)
    requested = await store.request_search(U, "c1", "launch date", now=NOW)
    assert requested.state == "pending"
    assert await trinket.render(for_turn()) == 'Search "launch date": still running…'
    assert await trinket.render(for_turn("c2")) == "", "a search is its continuum's own"
    async with ActorSystem() as system:
        ref = system.spawn(lambda: searcher(store, keep_turns=2), name="searcher")
        assert await ref.ask(Drain()) == 1
        assert await ref.ask(Drain()) == 0, "a finished search is not run again"
    shown = await trinket.render(for_turn())
    assert shown.splitlines() == [
        'Search "launch date": 2 passages',
        "- [message, 2 hours ago] the launch is in May",
        "- [memory, 1 day ago] launch party at the harbour",
    ]
    await store.commit_turn(U, turn("c1", "t1", at=NOW + 10))
    assert await trinket.render(for_turn()) == shown, "shown for keep_turns turns"
    await store.commit_turn(U, turn("c1", "t2", at=NOW + 20))
    assert await trinket.render(for_turn()) == ""
    assert await store.searches(U, "c1") == []


async def test_summaries_come_first_and_errors_are_shown(store: Store) -> None:
    await store.commit_turn(U, turn("c1", "t0", at=NOW - 4000, user_text="budget for the boat"))
    await store.commit_turn(U, turn("c1", "t1", at=NOW - 100, user_text="something else"))
    (job,) = await store.jobs(U, "c1")
    claimed = await store.claim_job(now=NOW, lease_seconds=60)
    assert claimed is not None
    assert claimed.id == job.id
    (segment, _) = await store.recent_segments(U, "c1")
    digest = SegmentDigest(segment.id, "Boat budget", "The boat budget was set.")
    assert await store.finish_job(claimed, now=NOW, digest=digest)
    await store.request_search(U, "c1", "boat budget", now=NOW)
    async with ActorSystem() as system:
        ref = system.spawn(lambda: searcher(store), name="searcher")
        assert await ref.ask(Drain()) == 1
    lines = (await SearchTrinket(store).render(for_turn())).splitlines()
    assert lines[0] == 'Search "boat budget": 2 passages'
    assert lines[1].startswith("- [summary, ")
    assert "Boat budget: The boat budget was set." in lines[1]
    assert lines[2].startswith("- [message, ")
    assert "budget for the boat" in lines[2]
    failed = await store.request_search(U, "c1", "weather", now=NOW)
    claim = await store.claim_search(now=NOW, lease_seconds=60)
    assert claim is not None
    assert claim.id == failed.id
    assert await store.finish_search(
        claim, now=NOW, passages=(), error="StorageUnavailable: gone", keep_turns=1
    )
    rendered = await SearchTrinket(store).render(for_turn())
    assert rendered.splitlines()[-1] == 'Search "weather": failed (StorageUnavailable: gone)'


async def test_equal_matches_come_newest_first_on_either_database(store: Store) -> None:
    """Memories and segment summaries that rank the same (the same words, the same age)
    come newest first, as messages do, on SQLite as on PostgreSQL: SQLite gave them
    oldest first, so a search's limit kept other rows there than on PostgreSQL."""
    memories = [await store.add_memory(U, "the boat is blue", now=NOW) for _ in range(3)]
    found = await store.search_memories(U, "blue boat", limit=2, now=NOW)
    assert [hit.memory.id for hit in found] == [memories[2].id, memories[1].id]
    for n in range(3):  # three segments, each closed by the next turn
        await store.commit_turn(U, turn("c1", f"t{n}", at=NOW + 4000 * n))
    for job in await store.jobs(U, "c1"):
        claimed = await store.claim_job(now=NOW * 2, lease_seconds=60)
        assert claimed is not None
        segment_id = int(msgspec.json.decode(job.payload)["segment_id"])
        digest = SegmentDigest(segment_id, "Boat", "The boat is blue.")
        assert await store.finish_job(claimed, now=NOW * 2, digest=digest)
    summarised = [s.id for s in await store.recent_segments(U, "c1") if s.summary]
    assert len(summarised) == 2
    found_segments = await store.search_segments(U, "blue boat", limit=5)
    assert [s.id for s in found_segments] == sorted(summarised, reverse=True)


async def test_a_repeated_query_replaces_and_a_continuum_keeps_five(store: Store) -> None:
    for i in range(7):
        await store.request_search(U, "c1", f"query {i}", now=NOW + i)
    await store.request_search(U, "c1", "query 3", now=NOW + 10)
    # The newest five; the repeated query moves to the end.
    assert [s.query for s in await store.searches(U, "c1")] == [
        "query 2",
        "query 4",
        "query 5",
        "query 6",
        "query 3",
    ]
    with pytest.raises(InvalidInput):
        await store.request_search(U, "c1", "   ", now=NOW)
    with pytest.raises(InvalidInput):
        await store.request_search(U, "c1", "x" * 1001, now=NOW)
    await store.commit_turn(U, turn("c1", "t1", at=NOW))
    await store.delete_continuum(U, "c1")
    assert await store.searches(U, "c1") == []


async def test_a_claim_whose_replica_died_is_run_by_another(opener: Opener) -> None:
    mine, other = await opener(), await opener()
    search = await mine.request_search(U, "c1", "harbour", now=NOW)
    await mine.add_memory(U, "the harbour opens at six", now=NOW - 60)
    dead = await mine.claim_search(now=NOW, lease_seconds=60)  # then its replica dies
    assert dead is not None
    assert dead.id == search.id
    assert dead.attempts == 1
    assert await other.claim_search(now=NOW + 59, lease_seconds=60) is None, "still leased"
    assert (await other.searches(U, "c1"))[0].state == "running"
    async with ActorSystem() as system:
        ref = system.spawn(
            lambda: ContextSearcher(other, limit=5, keep_turns=2, clock=lambda: NOW + 61),
            name="searcher",
        )
        assert await ref.ask(Drain()) == 1
    assert not await mine.finish_search(dead, now=NOW + 62, passages=(), error=None, keep_turns=2)
    (found,) = await mine.searches(U, "c1")
    assert found.state == "done"
    assert found.attempts == 2
    assert found.passages == (Passage("memory", "the harbour opens at six", moment(NOW - 60)),)


async def test_a_search_whose_searchers_keep_dying_is_shown_as_failed(store: Store) -> None:
    await store.request_search(U, "c1", "cursed", now=NOW)
    for attempt in range(MAX_SEARCH_ATTEMPTS):
        claim = await store.claim_search(now=NOW + 100 * attempt, lease_seconds=60)
        assert claim is not None
        assert claim.attempts == attempt + 1
    async with ActorSystem() as system:
        ref = system.spawn(
            lambda: ContextSearcher(store, limit=5, keep_turns=1, clock=lambda: NOW + 1000),
            name="searcher",
        )
        assert await ref.ask(Drain()) == 1
    rendered = await SearchTrinket(store).render(for_turn())
    assert rendered == f'Search "cursed": failed (interrupted {MAX_SEARCH_ATTEMPTS} times)'


# -- background jobs yield to turns running in any process sharing the store -------------


async def test_a_job_waits_while_its_continuum_has_a_turn_anywhere(
    opener: Opener, request: pytest.FixtureRequest
) -> None:
    store = await opener()
    # On PostgreSQL the turn runs on another replica (its own sessions); a SQLite file
    # has one owning process.
    replica = store if isinstance(store, SQLiteStorage) else await opener()
    job = await store.enqueue_job(U, SEGMENT_SUMMARY, "c1", segment_job_payload(1), now=NOW)
    other = await store.enqueue_job(U, SEGMENT_SUMMARY, "c2", segment_job_payload(2), now=NOW)
    async with replica.continuum_lease(U, "c1"):
        first = await store.claim_job(now=NOW, lease_seconds=60)
        assert first is not None
        assert first.id == other.id, "c2 has no turn: its job runs"
        assert await store.claim_job(now=NOW, lease_seconds=60) is None, "c1 has a turn"
    after = await store.claim_job(now=NOW, lease_seconds=60)
    assert after is not None
    assert after.id == job.id


async def test_a_long_message_is_found_as_a_fragment_around_its_words(store: Store) -> None:
    filler = " ".join(f"word{i}" for i in range(60))
    text = f"{filler} the lighthouse keeper {filler}"
    await store.commit_turn(U, turn("c1", "t1", at=NOW, user_text=text))
    await store.commit_turn(U, turn("c1", "t2", at=NOW + 1, user_text="a short lighthouse note"))
    hits = await store.search_messages(U, "lighthouse", continuum_id="c1", limit=5)
    assert sorted(h.seq for h in hits) == [0, 2]
    by_seq = {h.seq: h.text for h in hits}
    assert by_seq[2] == "a short lighthouse note", "a short text comes whole"
    assert "lighthouse" in by_seq[0]
    assert len(by_seq[0].split()) <= 42, "a long one as a fragment of about 40 words"


async def test_searches_survive_a_restart_of_the_embedded_store(tmp_path: Path) -> None:
    path = tmp_path / "frontmind.db"
    async with await SQLiteStorage.open(path) as store:
        await store.add_memory(U, "the ferry leaves at noon", now=NOW - 60)
        await store.request_search(U, "c1", "ferry", now=NOW)  # then the process stops
    async with await SQLiteStorage.open(path) as store:
        assert await SearchTrinket(store).render(for_turn()) == 'Search "ferry": still running…'
        async with ActorSystem() as system:
            ref = system.spawn(lambda: searcher(store), name="searcher")
            assert await ref.ask(Drain()) == 1
    async with await SQLiteStorage.open(path) as store:
        shown = await SearchTrinket(store).render(for_turn())
    assert shown.splitlines() == [
        'Search "ferry": 1 passages',
        "- [memory, 1 minute ago] the ferry leaves at noon",
    ]


async def test_the_plan_in_sql_is_the_plan_in_python(tmp_path: Path) -> None:
    # SQLite plans a memory search in the statement that runs it (storage/_fts_plan_sql.py):
    # it must choose exactly what `search_plan` chooses, at every edge of the cap and the
    # budget. Word "wK" occurs in exactly K memories.
    import random

    from storage._fts import MAX_SELECTIVE_TERMS
    from storage._fts_plan_sql import NOTHING, plan_ctes, plan_parameters

    sizes = (1, 2, 40, 250, 260, 280, 299, 300, 301, 420)
    async with await SQLiteStorage.open(tmp_path / "plan.db") as store:
        for i in range(max(sizes)):
            await store.add_memory(U, " ".join(f"w{k}" for k in sizes if i < k), now=NOW)
        rng = random.Random(7)
        words = [f"w{k}" for k in sizes] + ["absent", "also"]
        for _ in range(150):
            terms = rng.sample(words, rng.randint(1, 8))
            query = " ".join(terms)
            counts = {}
            for term in terms:
                ((count,),) = await store._read(
                    "SELECT count(*) FROM (SELECT 1 FROM memories_fts"
                    f" WHERE memories_fts MATCH ? LIMIT {COUNT_CAP})",
                    (f'"{term}"',),
                )
                counts[term] = count
            expected = search_plan(terms, counts)
            rows = await store._read(
                f"WITH {plan_ctes('memories_fts')} SELECT * FROM plan", plan_parameters(terms)
            )
            ranked, chosen, every, *singles = rows[0]
            assert len(singles) == MAX_SELECTIVE_TERMS
            if expected is None:
                assert (chosen, every) == (NOTHING, NOTHING), query
                continue
            quoted = [f'"{t}"' for t in expected.terms]
            if expected.ranked:
                assert ranked == 1, query
                assert sorted(chosen.split(" OR ")) == sorted(quoted), query
                assert every == NOTHING, query
            else:
                assert ranked == 0, query
                assert chosen == NOTHING, query
                assert sorted(every.split(" OR ")) == sorted(quoted), query
                assert [s for s in singles if s != NOTHING] == quoted, query


async def test_each_words_count_reads_its_index_over_the_recent_range_alone(
    tmp_path: Path,
) -> None:
    # A search of common words only counts, for the most recent matches, how many of the
    # words each holds: each word's list read over those matches' range of ids. Left to
    # SQLite's planner, only the first word's branch was read so; the others read every
    # document of their word (60 ms a search at 500,000 memories). The plan says which:
    # FTS5's index number carries the rowid range (`><`) where it is used.
    from storage._fts import MAX_SELECTIVE_TERMS
    from storage._fts_plan_sql import plan_parameters
    from storage._sqlite import _MEMORY_SEARCH, _MESSAGE_SEARCH

    async with await SQLiteStorage.open(tmp_path / "plan.db") as store:
        for i in range(400):  # word statistics the planner reads, common and rare
            await store.add_memory(U, f"common shared word{i % 7} item{i}", now=NOW)
        args = {**plan_parameters(["common", "shared"]), "user": U, "at": NOW}
        for statement, table, more in (
            (_MEMORY_SEARCH, "memories_fts", {"candidates": 40}),
            (_MESSAGE_SEARCH, "messages_fts", {"continuum": None, "limit": 5, "candidates": 10}),
        ):
            plan = [
                row[3]
                for row in await store._read(f"EXPLAIN QUERY PLAN {statement}", {**args, **more})
            ]
            branches = plan[plan.index("MATERIALIZE hits") : plan.index("SCAN hits")]
            scans = [line for line in branches if line.startswith(f"SCAN {table} VIRTUAL")]
            assert len(scans) == MAX_SELECTIVE_TERMS + 1, scans  # `recent` is in there too
            assert all(scan.endswith("M1><") for scan in scans[1:]), scans


async def test_a_repeated_read_runs_the_statement_already_compiled(tmp_path: Path) -> None:
    # The searches take milliseconds to compile: a bound parameter in one of their LIMITs
    # made the SQLite sqlean builds (ENABLE_STAT4) compile them again at every execution,
    # 3 ms of a reader's CPU in every turn (and the turn's smaller reads with a LIMIT
    # compiled each time). The authorizer is called only while a statement compiles, so
    # a read run a second time must call it not at all.
    from storage._sqlite import DRIVER

    async with await SQLiteStorage.open(tmp_path / "compiled.db") as store:
        await store.add_memory(U, "the harbour crane lifts steel", now=NOW)
        await store.commit_turn(U, turn("c1", "t1", user_text="the crane in the harbour"))
        compiled: list[str | None] = []

        def authorize(action: int, arg1: str | None, *_: object) -> int:
            compiled.append(arg1)
            return int(DRIVER.SQLITE_OK)

        async def search(limit: int) -> None:
            memories = await store.search_memories(U, f"harbour crane {limit}", limit=limit)
            assert [hit.memory.text for hit in memories] == ["the harbour crane lifts steel"]
            messages = await store.search_messages(U, f"harbour crane {limit}", limit=limit)
            assert [hit.seq for hit in messages] == [0]
            assert await store.active_reminders(U, limit=limit) == []
            assert await store.documents(U, limit=limit) == []

        for reader in store._readers:
            await reader.set_authorizer(authorize)
        await search(5)
        assert compiled, "the authorizer does not see a compilation"
        compiled.clear()
        for limit in (5, 3, 8):  # other terms, other limits: the same statements
            await search(limit)
        assert compiled == [], "a repeated read was compiled again"
