"""Daemon replicas sharing one PostgreSQL database, as real child processes over HTTP.

Two `frontmind serve --database URL` processes, 50 continuums, turns sent to a random
replica, concurrent turns on one continuum through both; then `kill -9` of one replica
in the middle of a turn, and the conversation goes on through the other.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from storage import DEFAULT_USER, INTERRUPTED_TURN, SEARCH_LEASE_SECONDS, PostgresStorage
from tests._daemon import Daemon, daemon, run_cli, sse_events, turn
from tests._postgres import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CONTINUUMS = 50
ROUNDS = 3


def check_history(messages: list[dict[str, Any]]) -> Counter[str]:
    """No interleaving, no gaps: each turn's messages are contiguous and start with the
    user's message. Returns the user texts (a duplicated turn shows as a count of 2)."""
    assert [m["seq"] for m in messages] == list(range(len(messages)))
    seen: list[str] = []
    for message in messages:
        if not seen or seen[-1] != message["turn_id"]:
            assert message["turn_id"] not in seen, "a turn's messages are interleaved"
            assert message["role"] == "user"
            seen.append(message["turn_id"])
    return Counter(
        m["content"][0]["text"]
        for i, m in enumerate(messages)
        if i == 0 or messages[i - 1]["turn_id"] != m["turn_id"]
    )


async def test_two_replicas_share_one_database(tmp_path: Path, pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    rng = random.Random(16)
    acknowledged: dict[str, list[str]] = {f"c{i}": [] for i in range(CONTINUUMS)}
    async with (
        daemon(tmp_path / "a", "--database", url) as a,
        daemon(tmp_path / "b", "--database", url) as b,
        a.client() as ca,
        b.client() as cb,
    ):
        clients = [ca, cb]

        async def one(client: httpx2.AsyncClient, cid: str, text: str) -> None:
            events = await turn(client, cid, text)
            name, data = events[-1]
            assert name == "turn.completed", events[-1]
            acknowledged[cid].append(text)
            assert data["text"]

        limiter = anyio.CapacityLimiter(16)

        async def limited(client: httpx2.AsyncClient, cid: str, text: str) -> None:
            async with limiter:
                await one(client, cid, text)

        for round_ in range(ROUNDS):
            async with anyio.create_task_group() as tg:
                for i in range(CONTINUUMS):
                    tg.start_soon(limited, rng.choice(clients), f"c{i}", f"round {round_} in c{i}")
        # The same continuum through both replicas at once: one runs after the other.
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(one, ca, f"c{i}", f"both A c{i}")
                tg.start_soon(one, cb, f"c{i}", f"both B c{i}")

        # Whatever one replica wrote, the other serves.
        for i in range(CONTINUUMS):
            cid = f"c{i}"
            for client in clients:
                messages = (await client.get(f"/v1/continuums/{cid}/messages")).json()["messages"]
                texts = check_history(messages)
                assert texts == Counter(acknowledged[cid]), cid
        # A reminder written through A is in B's next context window.
        created = await ca.post("/v1/reminders", json={"text": "water the ferns"})
        assert created.status_code == 201
        context = await cb.get("/v1/continuums/c1/context", params={"message": "what's up?"})
        assert "water the ferns" in context.text


async def _kill_mid_turn(victim: Daemon, client: httpx2.AsyncClient, cid: str) -> None:
    """Start a turn on `victim` and kill -9 it once the reply has begun streaming."""
    async with client.stream(
        "POST", f"/v1/continuums/{cid}/turns", json={"message": "a long story please"}
    ) as response:
        assert response.status_code == 200
        async for name, _ in sse_events(response):
            if name == "text.delta":
                victim.process.send_signal(signal.SIGKILL)
                return
    raise AssertionError("the turn never started streaming")


async def test_a_killed_replica_loses_nothing_acknowledged(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    url = pg_server.new_database()
    slow = tmp_path / "slow"
    slow.mkdir()
    # The killed replica streams slowly, so that the kill lands mid-reply.
    (slow / "frontmind.toml").write_text("[offline]\ntokens_per_second = 20.0\n")
    async with daemon(tmp_path / "b", "--database", url) as b, b.client() as cb:
        for i in range(3):
            assert (await turn(cb, "story", f"before {i}"))[-1][0] == "turn.completed"
        async with daemon(slow, "--database", url) as a, a.client() as ca:
            assert (await turn(ca, "story", "on A"))[-1][0] == "turn.completed"
            await _kill_mid_turn(a, ca, "story")
            with anyio.fail_after(30):
                await a.process.wait()
        # The lease died with A's session: B goes on at once, from the stored history.
        with anyio.fail_after(30):
            after = await turn(cb, "story", "after the crash")
        assert after[-1][0] == "turn.completed"
        messages = (await cb.get("/v1/continuums/story/messages")).json()["messages"]
        texts = check_history(messages)
        assert texts == Counter(["before 0", "before 1", "before 2", "on A", "after the crash"])
        records = (await cb.get("/v1/continuums/story/turns")).json()["turns"]
        statuses = Counter(r["status"] for r in records)
        assert statuses["completed"] == 5
        interrupted = [r for r in records if r["user_text"] == "a long story please"]
        assert len(interrupted) == 1, "the killed replica's in-flight turn left no record"
        # Found stale by the continuum's next turn (B holds the lease now): no replica
        # restarted, yet it no longer reads `running`.
        assert (interrupted[0]["status"], interrupted[0]["error"]) == ("failed", INTERRUPTED_TURN)


async def test_stats_on_the_database_reads_a_killed_replicas_turn_as_interrupted(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """`frontmind stats --database URL` showed a replica's turn `running` for as long as
    nothing opened the store after the replica was killed mid-turn. It records it as
    interrupted, as the next replica to open the store would (and says so on stderr),
    while a live replica's running turn, whose continuum's lease its session holds,
    stays `running`."""
    url = pg_server.new_database()
    # A streams slowly, so that its turn is killed mid-reply. B's model never answers
    # in the test's time: its turn is running through every check below, however long
    # a loaded machine takes over them (streaming at 5 tokens a second, it once
    # completed first), and is cancelled when the test leaves it.
    configs = {"a": "tokens_per_second = 5.0", "b": "time_to_first_token_s = 600.0"}
    for name, offline in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "frontmind.toml").write_text(f"[offline]\n{offline}\n")
    reader = tmp_path / "reader"  # the command's own data dir: no store, no lock of use
    reader.mkdir()

    async def stats(cid: str) -> tuple[str, str]:
        code, out, err = await run_cli(
            "stats", "--database", url, "--data-dir", str(reader), "--continuum", cid
        )
        assert code == 0, err
        return out, err

    async with daemon(tmp_path / "b", "--database", url) as b, b.client() as cb:
        live = cb.stream(
            "POST", "/v1/continuums/live/turns", json={"message": "a long story please " * 50}
        )
        async with live as response:
            assert response.status_code == 200
            events = sse_events(response)
            async for name, _ in events:  # held: dropping it would end B's turn
                if name == "turn.started":
                    break
            async with daemon(tmp_path / "a", "--database", url) as a, a.client() as ca:
                await _kill_mid_turn(a, ca, "story")
                with anyio.fail_after(30):
                    await a.process.wait()
            # Until PostgreSQL has ended the killed replica's session, and its lease
            # with it: taken here, which waits for exactly that.
            async with await PostgresStorage.open(url) as store:
                with anyio.fail_after(30):
                    async with store.continuum_lease(DEFAULT_USER, "story"):
                        pass
            out, err = await stats("story")
            assert "turns           1  (failed 1)" in out, out
            # One: B's turn, running meanwhile, is not among them.
            assert "1 turn left running by a process that ended: recorded as interrupted" in err
            out, err = await stats("live")
            assert "turns           1  (running 1)" in out, out
            assert "interrupted" not in err, err
            (record,) = (await cb.get("/v1/continuums/live/turns")).json()["turns"]
            assert record["status"] == "running"
        (record,) = (await cb.get("/v1/continuums/story/turns")).json()["turns"]
        assert (record["status"], record["error"]) == ("failed", INTERRUPTED_TURN)


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


async def searched(client: httpx2.AsyncClient, cid: str, query: str) -> str:
    """The continuum's next context window, as this replica composes it, once the search
    for `query` has finished (on whichever replica ran it)."""
    with anyio.fail_after(30):
        while True:
            response = await client.get(f"/v1/continuums/{cid}/context", params={"message": "hm"})
            assert response.status_code == 200, response.text
            text = "\n".join(strings(response.json()))
            if f'Search "{query}":' in text and f'Search "{query}": still running' not in text:
                return text


async def test_a_search_through_one_replica_is_shown_and_run_by_another(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    url = pg_server.new_database()
    async with daemon(tmp_path / "b", "--database", url) as b, b.client() as cb:
        async with daemon(tmp_path / "a", "--database", url) as a, a.client() as ca:
            created = await ca.post("/v1/memories", json={"text": "the harbour opens at six"})
            assert created.status_code == 201
            assert (await turn(ca, "port", "search for harbour"))[-1][0] == "turn.completed"
            # B composes the next turn from the store: A's search, with what it found.
            context = await searched(cb, "port", "harbour")
            assert "the harbour opens at six" in context
        # A replica claims a search and dies before finishing it (its claim is older than
        # the lease); the live replica's searcher runs it when next woken.
        async with await PostgresStorage.open(url) as dead:
            await dead.request_search(DEFAULT_USER, "port", "harbour hours", now=time.time())
            claim = await dead.claim_search(
                now=time.time() - SEARCH_LEASE_SECONDS - 1, lease_seconds=SEARCH_LEASE_SECONDS
            )
            assert claim is not None
            assert claim.query == "harbour hours"
        assert (await turn(cb, "port", "search for ferry"))[-1][0] == "turn.completed"
        context = await searched(cb, "port", "harbour hours")
        assert "the harbour opens at six" in context.split('Search "harbour hours":')[1]
        async with await PostgresStorage.open(url) as store:
            runs = {s.query: s.attempts for s in await store.searches(DEFAULT_USER, "port")}
        assert runs["harbour hours"] == 2, "claimed by the dead replica, then run by B"


async def test_a_bad_database_url_fails_at_start_with_one_line(tmp_path: Path) -> None:
    for url, expected in [
        ("mysql://nobody@127.0.0.1/x", "not a supported database"),
        ("postgresql://nobody@127.0.0.1:1/x", "cannot connect to the database"),
    ]:
        code, out, err = await run_cli(
            "serve", "--offline", "--port", "0", "--data-dir", str(tmp_path), "--database", url
        )
        assert code == 2, (out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert expected in lines[0]
        assert "Traceback" not in err


def _cut_leases(server: PostgresServer, url: str) -> int:
    """Terminate every session holding an advisory lock in the database (a lease's
    connection cut: a restart, a network fault, `idle_session_timeout`); how many."""
    name = url.rsplit("/", 1)[1]
    cut = server.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM (SELECT DISTINCT l.pid FROM pg_locks l"
        " JOIN pg_database d ON d.oid = l.database"
        f" WHERE l.locktype = 'advisory' AND d.datname = '{name}') AS s"
    )
    return int(cut.strip())


def _slow_replica(tmp_path: Path, name: str) -> Path:
    data = tmp_path / name
    data.mkdir()
    (data / "frontmind.toml").write_text("[offline]\ntokens_per_second = 20.0\n")
    return data


async def test_a_turn_whose_lease_connection_is_cut_ends_once(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """The lease's session dies mid-turn: the turn still ends with its own outcome (one
    terminal event, no internal error from releasing a lock that died with the
    session), and the continuum goes on."""
    url = pg_server.new_database()
    slow = _slow_replica(tmp_path, "a")
    async with daemon(slow, "--database", url) as a, a.client() as ca:
        assert (await turn(ca, "cut", "before"))[-1][0] == "turn.completed"
        names: list[str] = []
        async with ca.stream(
            "POST", "/v1/continuums/cut/turns", json={"message": "a long story please"}
        ) as response:
            assert response.status_code == 200
            async for name, data in sse_events(response):
                names.append(name)
                if names.count("text.delta") == 1:
                    assert _cut_leases(pg_server, url) == 1
                assert name != "error" or data["type"] != "internal_error", data
        assert names[-1] == "turn.completed", names
        assert names.count("turn.completed") + names.count("error") == 1, names
        assert (await turn(ca, "cut", "after"))[-1][0] == "turn.completed"
        messages = (await ca.get("/v1/continuums/cut/messages")).json()["messages"]
        texts = check_history(messages)
        assert texts == Counter(["before", "a long story please", "after"])


async def test_a_turn_that_lost_its_lease_to_another_replica_is_not_kept(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """A's lease is cut mid-turn and B runs the continuum's next turn meanwhile: A's
    turn answered a history without B's turn, and committing it after B's would make
    it follow a turn it never saw. It is refused (a retryable error), and A's next turn
    is composed from the history with B's turn in it."""
    url = pg_server.new_database()
    slow = _slow_replica(tmp_path, "a")
    async with (
        daemon(slow, "--database", url) as a,
        daemon(tmp_path / "b", "--database", url) as b,
        a.client() as ca,
        b.client() as cb,
    ):
        assert (await turn(cb, "race", "before"))[-1][0] == "turn.completed"
        events: list[tuple[str, Any]] = []
        async with ca.stream(
            "POST", "/v1/continuums/race/turns", json={"message": "a long story please"}
        ) as response:
            assert response.status_code == 200
            async for name, data in sse_events(response):
                events.append((name, data))
                if [n for n, _ in events].count("text.delta") == 1:
                    assert _cut_leases(pg_server, url) == 1
                    with anyio.fail_after(30):
                        assert (await turn(cb, "race", "on B meanwhile"))[-1][0] == (
                            "turn.completed"
                        )
        name, data = events[-1]
        assert name == "error", events[-1]
        assert data["type"] == "storage_unavailable", data
        messages = (await cb.get("/v1/continuums/race/messages")).json()["messages"]
        assert check_history(messages) == Counter(["before", "on B meanwhile"])
        # A reloads: its next turn follows B's.
        assert (await turn(ca, "race", "after"))[-1][0] == "turn.completed"
        messages = (await ca.get("/v1/continuums/race/messages")).json()["messages"]
        assert check_history(messages) == Counter(["before", "on B meanwhile", "after"])
        records = (await ca.get("/v1/continuums/race/turns")).json()["turns"]
        lost = [r for r in records if r["user_text"] == "a long story please"]
        assert [r["status"] for r in lost] == ["failed"]


async def test_a_continuum_deleted_and_begun_again_elsewhere_is_reloaded(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """A holds a continuum's history; B deletes the continuum and a new conversation
    begins there, as long as the old one (the same message count). A's next turn is
    composed from the new history, never from the deleted one."""
    url = pg_server.new_database()
    async with (
        daemon(tmp_path / "a", "--database", url) as a,
        daemon(tmp_path / "b", "--database", url) as b,
        a.client() as ca,
        b.client() as cb,
    ):
        assert (await turn(ca, "again", "the old plum secret"))[-1][0] == "turn.completed"
        assert (await cb.delete("/v1/continuums/again")).status_code == 204
        assert (await turn(cb, "again", "a new start"))[-1][0] == "turn.completed"
        context = await ca.get("/v1/continuums/again/context", params={"message": "hm"})
        assert context.status_code == 200, context.text
        assert "a new start" in context.text
        assert "plum" not in context.text, "the deleted conversation was sent again"
        assert (await turn(ca, "again", "and on"))[-1][0] == "turn.completed"
        messages = (await cb.get("/v1/continuums/again/messages")).json()["messages"]
        assert check_history(messages) == Counter(["a new start", "and on"])


async def test_a_turn_while_the_database_is_down_is_told_so_and_the_replica_recovers(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """The server stops under a replica: a turn sent meanwhile ends with the storage's
    own error (not an internal error from a crashed actor), and once the server is back
    the same continuum's turns run again."""
    url = pg_server.new_database()
    async with daemon(tmp_path / "a", "--database", url) as a, a.client() as ca:
        assert (await turn(ca, "down", "before"))[-1][0] == "turn.completed"
        assert (await ca.get("/readyz")).json() == {"status": "ready"}
        pg_server.stop("fast")
        try:
            events = await turn(ca, "down", "while down")
            name, data = events[-1]
            # A preview too: the storage's 503, not a 500 from a crashed actor.
            preview = await ca.get("/v1/continuums/down/context", params={"message": "hi"})
            # Alive, not ready: a load balancer routes around it.
            live, ready = await ca.get("/healthz"), await ca.get("/readyz")
        finally:
            pg_server.start()
        assert live.status_code == 200
        assert ready.status_code == 503, ready.text
        assert ready.json()["error"]["type"] == "storage_unavailable"
        assert (await ca.get("/readyz")).json() == {"status": "ready"}
        assert name == "error", data
        assert data["type"] == "storage_unavailable", data
        assert events[0][0] == "turn.started"  # its id first, as for any turn
        assert preview.status_code == 503, preview.text
        assert preview.json()["error"]["type"] == "storage_unavailable"
        assert (await turn(ca, "down", "after"))[-1][0] == "turn.completed"
        messages = (await ca.get("/v1/continuums/down/messages")).json()["messages"]
        assert check_history(messages) == Counter(["before", "after"])
        assert await a.stop() == 0
        logged = (await a.read_stderr()).decode()
    # The outage in one line a request, not a traceback each (a probe every few seconds).
    assert "storage_unavailable on /readyz: a read failed:" in logged
    assert "storage_unavailable on /v1/continuums/down/context: " in logged
    assert "in get_context\n" not in logged
    assert "in get_ready\n" not in logged
