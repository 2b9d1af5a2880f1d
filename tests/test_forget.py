"""Forgetting a user and rotating a token, against the real daemon as a child process, on
SQLite and on PostgreSQL: the delete takes every row of the user from every table (and
nothing of anyone else's), the answer counts them, and a rotated token is refused from
the next request on."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import msgspec
import pytest

from storage import NotFound, PostgresStorage
from tests._daemon import daemon, run_cli, turn
from tests._factories import turn as factory_turn
from tests._postgres import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADMIN = "admin-token-for-tests"
WORDS = {"alice": "zebra", "bob": "walrus"}

# Owner counts of every table that has an `owner` column, read straight from the database
# (not through the code under test): a table added later is covered without a change here.
Counter = Callable[[str], Awaitable[dict[str, int]]]


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def ok(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def sqlite_counter(path: Path) -> Counter:
    def count(owner: str) -> dict[str, int]:
        with sqlite3.connect(path) as db:
            tables = [
                name
                for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if any(col[1] == "owner" for col in db.execute(f"PRAGMA table_info({name})"))
            ]
            counts = {
                t: db.execute(f"SELECT count(*) FROM {t} WHERE owner = ?", (owner,)).fetchone()[0]
                for t in tables
            }
            # The search indexes hold exactly the rows that are left.
            for index, table in (("messages_fts", "messages"), ("memories_fts", "memories")):
                indexed = db.execute(f"SELECT count(*) FROM {index}").fetchone()[0]
                assert indexed == db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            stray = db.execute(
                "SELECT count(*) FROM segments_fts WHERE rowid NOT IN (SELECT id FROM segments)"
            ).fetchone()[0]
            assert stray == 0
            counts["users"] = db.execute(
                "SELECT count(*) FROM users WHERE name = ?", (owner,)
            ).fetchone()[0]
            return counts

    return lambda owner: anyio.to_thread.run_sync(count, owner)


def postgres_counter(server: PostgresServer, url: str) -> Counter:
    def query(sql: str) -> str:
        return _psql(server, url, sql)

    def count(owner: str) -> dict[str, int]:
        tables = query(
            "SELECT table_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND column_name = 'owner'"
        ).split()
        counts = {
            t: int(query(f"SELECT count(*) FROM {t} WHERE owner = '{owner}'")) for t in tables
        }
        counts["users"] = int(query(f"SELECT count(*) FROM users WHERE name = '{owner}'"))
        return counts

    return lambda owner: anyio.to_thread.run_sync(count, owner)


def _psql(server: PostgresServer, url: str, sql: str) -> str:
    result = subprocess.run(
        [str(server.bin_dir / "psql"), "-X", "-q", "-t", "-A", "-c", sql, url],
        capture_output=True,
        check=True,
        text=True,
    )
    return result.stdout.strip()


async def fill(c: httpx2.AsyncClient, word: str) -> None:
    """Some of everything a user owns: a document, a reminder, a memory, turns (messages,
    a segment, turn records), model settings, and a context search."""
    await ok(await c.post("/v1/documents", json={"label": "p", "content": f"profile {word}"}), 201)
    await ok(await c.post("/v1/reminders", json={"text": f"call {word}"}), 201)
    await ok(await c.post("/v1/memories", json={"text": f"memory {word}"}), 201)
    await ok(await c.put("/v1/continuums/main/settings", json={"max_tokens": 1234}))
    for text in (f"my word is {word}", "search for word"):
        events = await turn(c, "main", text)
        assert events[-1][0] == "turn.completed", events
    with anyio.fail_after(30):  # the search finishes in the background
        while "still running" in json.dumps(
            await ok(await c.get("/v1/continuums/main/context", params={"message": "hm"}))
        ):
            pass


async def forget_and_rotate(data_dir: Path, counter: Counter, *options: str) -> None:
    tokens: dict[str, str] = {}
    async with daemon(data_dir, "--token", ADMIN, *options) as d:
        async with d.client(headers=auth(ADMIN)) as admin:
            for name in WORDS:
                tokens[name] = (await ok(await admin.post("/v1/users", json={"name": name}), 201))[
                    "token"
                ]
        for name, word in WORDS.items():
            async with d.client(headers=auth(tokens[name])) as c:
                await fill(c, word)

        # Rotate alice's token with the CLI beside the running daemon: the old token is
        # refused from the next request on, the new one works.
        code, out, err = await run_cli(
            "users", "rotate", "alice", "--data-dir", str(data_dir), *options
        )
        assert code == 0, err
        new_token = out.strip()
        assert new_token != tokens["alice"]
        assert len(new_token) == 43
        async with d.client() as c:
            assert (await c.get("/v1/memories", headers=auth(tokens["alice"]))).status_code == 401
            mine = await ok(await c.get("/v1/memories", headers=auth(new_token)))
            assert [m["text"] for m in mine["memories"]] == ["memory zebra"]
        # And with the admin route: the CLI's token is refused in turn.
        async with d.client(headers=auth(ADMIN)) as admin:
            rotated = await ok(await admin.post("/v1/users/alice/token", json={}))
            assert rotated["name"] == "alice"
            assert (await admin.get("/v1/memories", headers=auth(new_token))).status_code == 401
            alice_token = rotated["token"]
            assert (await admin.get("/v1/memories", headers=auth(alice_token))).status_code == 200
            missing = await admin.post("/v1/users/nobody/token", json={})
            assert missing.status_code == 404
            # The built-in user is refused as its delete is, not as no user at all.
            builtin = await admin.post("/v1/users/default/token", json={})
            assert builtin.status_code == 400
            assert "built-in user" in builtin.json()["error"]["message"]

        before = {name: await counter(name) for name in WORDS}
        for table in ("continuums", "turns", "messages", "segments", "memories", "reminders",
                      "documents", "continuum_settings", "searches", "users"):  # fmt: skip
            assert before["alice"][table] > 0, (table, before["alice"])

        async with d.client(headers=auth(alice_token)) as alice:
            refused = await alice.delete("/v1/users/bob")
            assert refused.status_code == 403
        async with d.client(headers=auth(ADMIN)) as admin:
            forgotten = await ok(await admin.delete("/v1/users/alice"))
            assert forgotten["name"] == "alice"
            for table, count in before["alice"].items():
                assert forgotten["rows"][table] == count, (table, forgotten)
            assert (await admin.delete("/v1/users/alice")).status_code == 404
            assert (await admin.delete("/v1/users/default")).status_code == 400
            listed = await ok(await admin.get("/v1/users"))
            assert [u["name"] for u in listed["users"]] == ["bob"]

        after = {name: await counter(name) for name in WORDS}
        assert not any(after["alice"].values()), after["alice"]
        assert after["bob"] == before["bob"]
        async with d.client() as c:
            assert (await c.get("/v1/memories", headers=auth(alice_token))).status_code == 401
            hits = await ok(await c.get("/v1/memories?q=memory", headers=auth(tokens["bob"])))
            assert [h["memory"]["text"] for h in hits["memories"]] == ["memory walrus"]
        async with d.client(headers=auth(tokens["bob"])) as bob:
            events = await turn(bob, "main", "hi")
            assert events[-1][0] == "turn.completed"
        assert await d.stop() == 0


async def test_forget_and_rotate_on_sqlite(tmp_path: Path) -> None:
    await forget_and_rotate(tmp_path, sqlite_counter(tmp_path / "frontmind.db"))
    # FTS5 deletes by marker: alice's words stayed in the indexes' segments until a merge.
    with sqlite3.connect(tmp_path / "frontmind.db") as db:
        for index in ("messages_fts", "memories_fts", "segments_fts"):
            blocks = [row[0] for row in db.execute(f"SELECT block FROM {index}_data")]
            assert not any(b"zebra" in block for block in blocks if block), index
            assert any(b"walrus" in block for block in blocks if block) or index == "segments_fts"


async def test_forget_and_rotate_on_postgres(tmp_path: Path, pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    await forget_and_rotate(tmp_path, postgres_counter(pg_server, url), "--database", url)
    # PostgreSQL's word counts (which plan its searches) no longer count alice's words.
    left = _psql(pg_server, url, "SELECT count(*) FROM term_stats WHERE term='zebra'")
    assert int(left) == 0  # not even a row at 0: no trace of the word


async def test_a_turn_another_replica_began_before_the_forget_is_not_kept(
    pg_server: PostgresServer,
) -> None:
    """Two replicas on one database: one forgets alice while the other runs a turn of
    hers. That turn's commit, after the forget, is refused (it would have brought her
    back); a turn begun after it is a new user's first, and kept. The mark keeps a
    digest of her name, not the name."""
    url = pg_server.new_database()
    async with await PostgresStorage.open(url) as a, await PostgresStorage.open(url) as b:
        await a.commit_turn("alice", factory_turn("c1", "t1", at=time.time() - 60))
        in_flight = factory_turn("c1", "t2", at=time.time() - 1)  # began on replica B
        forgotten = await a.delete_user("alice")
        assert forgotten.rows["turns"] == 1
        with pytest.raises(NotFound, match="forgotten while this turn ran"):
            await b.commit_turn("alice", in_flight)
        failed = msgspec.structs.replace(in_flight.record, status="failed", error="x")
        with pytest.raises(NotFound, match="forgotten while this turn ran"):
            await b.record_turn("alice", failed)  # nor its record
        assert await b.continuums("alice") == []  # nothing of her came back
        await b.commit_turn("alice", factory_turn("c9", "t3", at=time.time() + 1))
        assert [c.id for c in await a.continuums("alice")] == ["c9"]
    assert "alice" not in _psql(pg_server, url, "SELECT * FROM forgotten_users")


async def test_users_delete_on_the_command_line(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path)]
    code, out, err = await run_cli("users", "add", "alice", *data)
    assert code == 0, err
    async with daemon(tmp_path) as d:
        async with d.client(headers=auth(out.strip())) as alice:
            await fill(alice, "zebra")
        # The daemon holds alice's continuum: it must be asked, not gone around.
        code, out, err = await run_cli("users", "delete", "alice", *data)
        assert (code, out) == (2, "")
        assert "DELETE /v1/users/NAME" in err
        assert await d.stop() == 0
    before = await sqlite_counter(tmp_path / "frontmind.db")("alice")
    code, out, err = await run_cli("users", "delete", "alice", *data)
    assert code == 0, err
    printed = {t: int(n) for t, n in (line.split("\t") for line in out.splitlines())}
    assert {t: n for t, n in printed.items() if t in before} == before
    assert set(printed) - set(before) == {"segments_fts"}  # SQLite's summary index
    assert not any((await sqlite_counter(tmp_path / "frontmind.db")("alice")).values())
    for args, message in (
        (("delete", "alice"), "no user named 'alice'"),
        (("delete", "default"), "built-in user"),
        (("rotate", "alice"), "no user named 'alice'"),
        (("rotate", "no/slash"), "malformed"),
    ):
        code, out, err = await run_cli("users", *args, *data)
        assert (code, out) == (2, ""), err
        assert message in err
