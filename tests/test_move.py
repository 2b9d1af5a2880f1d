"""Moving a store: `frontmind export` / `import` and `frontmind migrate` between SQLite and
PostgreSQL, through the real command as a child process. Everything arrives (every
table's count and each continuum's digest are checked by the command, and again here),
a migration resumed after a partial copy copies nothing twice, and the next turn of
every continuum would send the very same request bytes from the new store."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from frontmind import Frontmind
from frontmind._frontmind import NoModel
from frontmind.config import Config, StorageConfig
from storage import PostgresStorage, SQLiteStorage
from tests._daemon import daemon, run_cli
from tests._postgres import PostgresServer
from tests.test_forget import ADMIN, auth, fill, ok

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NOW = 1_900_000_000.0  # one clock for every preview: the requests compared are of one instant


async def filled(data_dir: Path) -> dict[str, str]:
    """A data directory with two users' everything (and default's); their tokens."""
    tokens = {"default": ADMIN}
    async with daemon(data_dir, "--token", ADMIN) as d:
        async with d.client(headers=auth(ADMIN)) as admin:
            for name in ("alice", "bob"):
                created = await ok(await admin.post("/v1/users", json={"name": name}), 201)
                tokens[name] = created["token"]
        for name, word in (("alice", "zebra"), ("bob", "walrus"), ("default", "otter")):
            async with d.client(headers=auth(tokens[name])) as c:
                await fill(c, word)
        assert await d.stop() == 0
    return tokens


async def previews(data_dir: Path, url: str | None = None) -> dict[str, bytes]:
    """The request each continuum's next turn would send now, as bytes, by user/continuum."""
    # Every section waited for (no deadline a busy machine could miss): the requests
    # compared hold all of them.
    config = Config()
    config = msgspec.structs.replace(
        config, composer=msgspec.structs.replace(config.composer, deadline_ms=60_000.0)
    )
    if url is not None:
        config = msgspec.structs.replace(config, storage=StorageConfig(url=url))
    seen: dict[str, bytes] = {}
    async with Frontmind.open(data_dir, config, model=NoModel(), clock=lambda: NOW) as fm:
        for user in ("alice", "bob", "default"):
            mine = fm.user(user)
            for continuum in await mine.continuums():
                request = await mine.context(continuum.id, "what did we say?")
                seen[f"{user}/{continuum.id}"] = msgspec.json.encode(request)
    return seen


def table_lines(out: str) -> dict[str, int]:
    return {
        line.split("\t")[0]: int(line.split("\t")[1])
        for line in out.splitlines()
        if not line.split("\t")[1].startswith("sha256:")
    }


async def test_export_and_import_carry_everything_and_refuse_collisions(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    await filled(source)
    code, exported, err = await run_cli("export", "--data-dir", str(source))
    assert code == 0, err
    lines = [json.loads(line) for line in exported.splitlines()]
    assert lines[0]["kind"] == "header"
    assert all(line["format"] == 1 for line in lines)
    tables = {line["table"] for line in lines[1:]}
    assert {"users", "continuums", "turns", "messages", "segments", "memories", "reminders",
            "documents", "continuum_settings", "searches"} <= tables  # fmt: skip
    path = tmp_path / "export.jsonl"
    path.write_text(exported)
    code, out, err = await run_cli("import", str(path), "--data-dir", str(target))
    assert code == 0, err
    assert sum(table_lines(out).values()) == len(lines) - 1
    async with (
        await SQLiteStorage.open(source / "frontmind.db") as a,
        await SQLiteStorage.open(target / "frontmind.db") as b,
    ):
        assert await a.table_counts() == await b.table_counts()
        assert await a.continuum_digests() == await b.continuum_digests()
    assert await previews(source) == await previews(target)

    # Again into the same store: a collision, and nothing changes.
    code, out, err = await run_cli("import", str(path), "--data-dir", str(target))
    assert (code, out) == (2, "")
    assert "already" in err
    # One user alone.
    code, alice, err = await run_cli("export", "--user", "alice", "--data-dir", str(source))
    assert code == 0, err
    owners = {line["row"].get("owner", line["row"].get("name")) for line in
              map(json.loads, alice.splitlines()[1:])}  # fmt: skip
    assert owners == {"alice"}
    # A newer format, or a malformed line, is refused with its line number.
    newer = tmp_path / "newer.jsonl"
    newer.write_text(exported.replace('"format":1', '"format":2', 1))
    code, out, err = await run_cli("import", str(newer), "--data-dir", str(tmp_path / "c"))
    assert code == 2
    assert "line 1: export format 2 is newer than this Frontmind reads (format 1)" in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text(exported + "{not json\n")
    code, out, err = await run_cli("import", str(broken), "--data-dir", str(tmp_path / "c"))
    assert code == 2
    assert f"line {len(lines) + 1}: not JSON" in err


async def test_migrate_between_sqlite_and_postgres_verified_and_resumable(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    source, back, again = tmp_path / "a", tmp_path / "back", tmp_path / "again"
    tokens = await filled(source)
    before = await previews(source)
    url = pg_server.new_database()

    # A copy cut short: the first tables are in the target already (as a killed run
    # leaves them, each batch committed). The migration finishes it, copying only the rest.
    async with await SQLiteStorage.open(source / "frontmind.db") as a:
        counts = await a.table_counts()
        digests = await a.continuum_digests()
        parts = [part async for part in a.export_rows(batch=2)]

    async with await PostgresStorage.open(url) as pg:
        await pg.import_rows(parts[:3], skip_existing=True)
    first = sum(len(p.rows) for p in parts[:3])

    code, out, err = await run_cli("migrate", "--to", url, "--data-dir", str(source))
    assert code == 0, err
    assert "verified" in err
    copied = {
        line.split("\t")[0]: int(line.split("copied now: ")[1].rstrip(")"))
        for line in out.splitlines()
        if "copied now" in line
    }
    assert sum(copied.values()) == sum(counts.values()) - first
    printed = {line.split("\t")[0]: line.split("sha256:")[1] for line in out.splitlines()
               if "sha256:" in line}  # fmt: skip
    assert printed == {f"{u}/{c}": d for (u, c), d in digests.items()}
    # Run again: nothing left to copy.
    code, out, err = await run_cli("migrate", "--to", url, "--data-dir", str(source))
    assert code == 0, err
    assert all(line.endswith("(copied now: 0)") for line in out.splitlines() if "copied" in line)

    # PostgreSQL back to SQLite, and SQLite to SQLite.
    code, out, err = await run_cli(
        "migrate", "--to", str(back), "--data-dir", str(tmp_path / "pg"), "--database", url
    )
    assert code == 0, err
    code, out, err = await run_cli("migrate", "--to", str(again), "--data-dir", str(back))
    assert code == 0, err
    async with await SQLiteStorage.open(again / "frontmind.db") as store:
        assert await store.table_counts() == counts
        assert await store.continuum_digests() == digests

    # The next turn of every continuum sends the same bytes from each store.
    assert await previews(tmp_path / "pg", url) == before
    assert await previews(again) == before
    # And the moved store serves the same users with the same tokens.
    async with daemon(again, "--token", ADMIN) as d:
        async with d.client(headers=auth(tokens["alice"])) as alice:
            memories = await ok(await alice.get("/v1/memories"))
            assert [m["text"] for m in memories["memories"]] == ["memory zebra"]
        assert await d.stop() == 0
