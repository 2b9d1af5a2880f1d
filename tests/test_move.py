"""Moving a store: `frontmind export` / `import` and `frontmind migrate` between SQLite and
PostgreSQL, through the real command as a child process. Everything arrives (every
table's count and each continuum's digest are checked by the command, and again here),
a migration resumed after a partial copy copies nothing twice, and the next turn of
every continuum would send the very same request bytes from the new store."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import msgspec
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from frontmind import Frontmind
from frontmind._frontmind import NoModel
from frontmind.config import Config, StorageConfig
from frontmind.localapi import LocalMessagesAPI
from storage import (
    EXPORT_FORMAT,
    ImportCollision,
    InvalidInput,
    PostgresStorage,
    SQLiteStorage,
    TableRows,
    migrate,
)
from storage._transfer import PORTABLE_TABLES
from tests._daemon import COMMAND, ROOT, child_env, daemon, run_cli
from tests._embedder import ConceptEmbedder
from tests._factories import turn as factory_turn
from tests._harness import config, frontmind
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


def readme_header() -> dict[str, object]:
    """The export header the README shows (its section on moving a store), and the tables
    it lists there in the order they are written, checked against the format's own."""
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"The first line is\s+`(\{[^`]*\})`", readme)
    assert match is not None, "the README shows no export header"
    listed = re.search(r"per row, parents first\s+\(([^)]*)\)", readme)
    assert listed is not None, "the README lists no export tables"
    assert re.findall(r"`(\w+)`", listed.group(1)) == [t for t, _, _ in PORTABLE_TABLES]
    header: dict[str, object] = json.loads(match.group(1))
    return header


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
    assert all(line["format"] == EXPORT_FORMAT for line in lines)
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
    rows = [json.loads(line) for line in alice.splitlines()[1:]]
    owners = {r["row"].get("owner", r["row"].get("name")) for r in rows
              if r["table"] != "vector_model"}  # fmt: skip
    assert owners == {"alice"}
    # The README's example of the header is the header (format, schema, keys).
    assert json.loads(alice.splitlines()[0]) == readme_header()
    # A newer format, or a malformed line, is refused with its line number.
    newer = tmp_path / "newer.jsonl"
    later = EXPORT_FORMAT + 1
    newer.write_text(exported.replace(f'"format":{EXPORT_FORMAT}', f'"format":{later}', 1))
    code, out, err = await run_cli("import", str(newer), "--data-dir", str(tmp_path / "c"))
    assert code == 2
    assert (
        f"line 1: export format {later} is newer than this Frontmind reads (format {EXPORT_FORMAT})"
    ) in err
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


# -- vectors travel with their memories ------------------------------------------------

EMBEDDER = "tests._embedder:ConceptEmbedder"  # as the store records it
MEMORIES = {"alice": ["Ingrid is the user's sister", "Green tea every morning"],
            "bob": ["The garden needs new soil"]}  # fmt: skip


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


async def embedded(api: LocalMessagesAPI, data_dir: Path) -> None:
    """Memories embedded by the background worker with the test embedder, as in use."""
    cfg = config(memory={"embedder": EMBEDDER})
    async with frontmind(api, data_dir, cfg=cfg) as fm:
        for user, texts in MEMORIES.items():
            for text in texts:
                await fm.user(user).remember(text)
        await fm.run_background()
        assert await fm.storage.count_memories_without_vectors() == 0


async def indexed_vectors(store: SQLiteStorage | PostgresStorage) -> int:
    """The memories in the store's vector index, read before any embedder starts."""
    if isinstance(store, SQLiteStorage):
        ((count,),) = await store._read("SELECT count(*) FROM memory_vec")
    else:
        ((count,),) = await store._read("SELECT count(*) FROM memories WHERE vector IS NOT NULL")
        if await store._read("SELECT 1 FROM pg_extension WHERE extname = 'vector'"):
            ((with_vec,),) = await store._read(
                "SELECT count(*) FROM memories WHERE vec IS NOT NULL"
            )
            assert with_vec == count
    return int(count)


async def vectors_arrived(store: SQLiteStorage | PostgresStorage) -> None:
    """The index was rebuilt by the import, and the embedder's next start keeps it: the
    nearest memory to "sibling" (a word of no memory) is found by its meaning."""
    assert await indexed_vectors(store) == 3
    assert await store._read("SELECT model, dimensions FROM vector_model") == [(EMBEDDER, 4)]
    assert not await store.use_embedder(EMBEDDER, 4)  # what starting it does: kept
    assert await store.count_memories_without_vectors() == 0
    (sibling,) = await ConceptEmbedder().embed(["my sibling"])
    ((nearest, _),) = await store.nearest_memories("alice", sibling, k=1)
    assert nearest.text == "Ingrid is the user's sister"
    assert await store.nearest_memories("carol", sibling, k=1) == []


@pytest.mark.parametrize("to", ["sqlite", "postgres", "pgvector"])
async def test_vectors_move_with_their_memories(
    api: LocalMessagesAPI, tmp_path: Path, request: pytest.FixtureRequest, to: str
) -> None:
    source = tmp_path / "a"
    await embedded(api, source)
    target = str(tmp_path / "b")
    if to != "sqlite":
        server: PostgresServer = request.getfixturevalue(
            "pg_server" if to == "postgres" else "pgvector_server"
        )
        target = server.new_database()
    code, out, err = await run_cli("migrate", "--to", target, "--data-dir", str(source))
    assert code == 0, err
    assert "vector_model\t1\t(copied now: 1)" in out
    moved: SQLiteStorage | PostgresStorage
    if to == "sqlite":
        moved = await SQLiteStorage.open(Path(target) / "frontmind.db")
    else:
        moved = await PostgresStorage.open(target)
    async with moved:
        await vectors_arrived(moved)
    if to != "sqlite":
        return
    # And through an export: the whole store, and one user's (it carries the embedder).
    for user, count in ((None, 3), ("alice", 2)):
        args = ["--user", user] if user else []
        code, exported, err = await run_cli("export", *args, "--data-dir", str(source))
        assert code == 0, err
        path = tmp_path / f"{user}.jsonl"
        path.write_text(exported)
        into = tmp_path / f"into-{user}"
        code, out, err = await run_cli("import", str(path), "--data-dir", str(into))
        assert code == 0, err
        async with await SQLiteStorage.open(into / "frontmind.db") as store:
            assert await indexed_vectors(store) == count
            if user is None:
                await vectors_arrived(store)


async def test_vectors_of_another_embedder_are_not_mixed_in(tmp_path: Path) -> None:
    async with await SQLiteStorage.open(tmp_path / "a.db") as source:
        await source.use_embedder(EMBEDDER, 4)
        memory = await source.add_memory("alice", "Ingrid is the user's sister")
        await source.set_memory_vectors([(memory, [1.0, 0.0, 0.0, 0.01])])
        parts = [part async for part in source.export_rows()]
    async with await SQLiteStorage.open(tmp_path / "b.db") as other:
        await other.use_embedder("tests:Another", 3)
        # A migration into it is refused (it is another store), nothing copied.
        with pytest.raises(ImportCollision, match="'tests:Another' \\(3 dimensions\\)"):
            await other.import_rows(parts, skip_existing=True)
        counts = await other.table_counts()
        assert counts["vector_model"] == 1
        assert sum(counts.values()) == 1
        # An import keeps the store's embedder: the memory comes without its vector,
        # for that embedder to make in the background.
        inserted = await other.import_rows(parts)
        assert inserted["vector_model"] == 0
        assert inserted["memories"] == 1
        assert await other.count_memories_without_vectors() == 1
        assert await indexed_vectors(other) == 0
        assert not await other.use_embedder("tests:Another", 3)


async def test_a_migration_killed_mid_copy_finishes_on_the_next_run(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    async with await SQLiteStorage.open(source / "frontmind.db") as store:
        for n in range(20):
            write = factory_turn("main", f"t{n}", at=1_000_000.0 + 10 * n)
            assert await store.commit_turn("alice", write)
        # Enough rows that, one a transaction, the copy outlasts what the pipe of its
        # progress lines holds once the test stops reading it: it cannot finish first.
        reminders = [(n, "alice", f"reminder {n}", None, 1_000_000.0, None, "user")
                     for n in range(1, 4001)]  # fmt: skip
        await store.import_rows([TableRows("reminders", reminders)])
        counts, digests = await store.table_counts(), await store.continuum_digests()
    total = sum(counts.values())

    command = [*COMMAND, "migrate", "--to", str(target), "--batch", "1", "--data-dir", str(source)]
    process = await anyio.open_process(command, cwd=ROOT, env=child_env())
    async with process:
        assert process.stderr is not None
        with anyio.fail_after(60):
            line = await BufferedByteReceiveStream(process.stderr).receive_until(b"\n", 1000)
        assert line.startswith(b"copied 1 "), line  # a batch is committed: kill -9 now
        process.kill()
        assert await process.wait() == -signal.SIGKILL
    async with await SQLiteStorage.open(target / "frontmind.db") as store:
        kept = await store.table_counts()
    assert 0 < sum(kept.values()) < total  # killed mid-copy

    code, out, err = await run_cli(
        "migrate", "--to", str(target), "--batch", "100", "--data-dir", str(source)
    )
    assert code == 0, err
    assert "verified" in err
    copied = {
        line.split("\t")[0]: int(line.split("copied now: ")[1].rstrip(")"))
        for line in out.splitlines()
        if "copied now" in line
    }
    # Only what the first run had not committed, each row once.
    assert copied == {table: counts[table] - kept[table] for table in counts}
    async with await SQLiteStorage.open(target / "frontmind.db") as store:
        assert await store.table_counts() == counts
        assert await store.continuum_digests() == digests


async def test_a_migration_into_another_stores_rows_copies_nothing(tmp_path: Path) -> None:
    """A target holding rows that are not the source's is refused before any is copied:
    copied into, its messages of the same ids were skipped, and the source's continuum
    arrived there with holes (58 of its 62 messages) beside the target's own, before
    the counts refused."""
    source, target = tmp_path / "a", tmp_path / "b"
    async with await SQLiteStorage.open(source / "frontmind.db") as store:
        for n in range(3):
            assert await store.commit_turn("default", factory_turn("main", f"s{n}", at=1e6 + n))
    async with await SQLiteStorage.open(target / "frontmind.db") as store:
        assert await store.commit_turn("default", factory_turn("mine", "t0", at=2e6))
        before = (await store.table_counts(), await store.continuum_digests())
    code, _, err = await run_cli("migrate", "--to", str(target), "--data-dir", str(source))
    assert code == 2, err
    assert "the target holds rows that are not the source's (1 continuums)" in err, err
    assert "copied " not in err  # no batch was committed
    async with await SQLiteStorage.open(target / "frontmind.db") as store:
        assert (await store.table_counts(), await store.continuum_digests()) == before


async def test_a_migration_onto_its_own_store_is_refused(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """A PostgreSQL database migrated onto itself (another spelling of its URL) found
    every row "already there", copied nothing and said "verified"; so did one SQLite
    file reached by two paths. Refused before anything is read or written; another
    database of the same server is still a target."""
    url = pg_server.new_database()
    alias = url.replace("@127.0.0.1:", "@localhost:")
    assert alias != url
    async with await PostgresStorage.open(url) as store:
        assert await store.commit_turn("default", factory_turn("main", "t0", at=1e6))
    code, _, err = await run_cli(
        "migrate", "--to", alias, "--data-dir", str(tmp_path / "pg"), "--database", url
    )
    assert code == 2, err
    assert "the target is the source store itself" in err
    assert "verified" not in err
    async with (
        await PostgresStorage.open(url) as source,
        await PostgresStorage.open(pg_server.new_database()) as other,
    ):
        done = await migrate(source, other)
        assert done.counts == await other.table_counts()
    # One SQLite file by two paths: the same store.
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    async with (
        await SQLiteStorage.open(tmp_path / "a" / "frontmind.db") as source,
        await SQLiteStorage.open(tmp_path / "link" / "frontmind.db") as same,
    ):
        assert await source.commit_turn("default", factory_turn("main", "t0", at=1e6))
        with pytest.raises(InvalidInput, match="the target is the source store itself"):
            await migrate(source, same)
        assert (await same.table_counts())["turns"] == 1


async def test_a_migration_between_schemas_of_one_database_is_not_refused(
    pg_server: PostgresServer,
) -> None:
    """Two stores in one database, each in a schema of its own (a search_path in the
    URL): their tables are apart, yet the store's id named the server and the database
    only, and a migration from one into the other was refused as onto itself."""
    url = pg_server.new_database()
    for schema in ("tenant_a", "tenant_b"):
        await anyio.run_process(
            [str(pg_server.bin_dir / "psql"), "-X", "-q", "-c", f"CREATE SCHEMA {schema}", url]
        )
    async with (
        await PostgresStorage.open(f"{url}?search_path=tenant_a") as source,
        await PostgresStorage.open(f"{url}?search_path=tenant_b") as other,
    ):
        assert await source.commit_turn("default", factory_turn("main", "t0", at=1e6))
        assert (await other.table_counts())["turns"] == 0  # the schemas are apart
        assert await source.store_id() != await other.store_id()
        done = await migrate(source, other)
        assert done.counts == await other.table_counts()
        assert (await other.table_counts())["turns"] == 1


async def test_a_migration_with_no_rows_a_batch_is_refused_before_any_store_is_made(
    tmp_path: Path,
) -> None:
    """`--batch 0` (or a negative one) was refused only once the migration began: the
    target's store (a data directory and its database, or a PostgreSQL database's schema)
    was made by then, so a command that copied nothing left an empty store behind."""
    source, target = tmp_path / "a", tmp_path / "b"
    async with await SQLiteStorage.open(source / "frontmind.db") as store:
        assert await store.commit_turn("default", factory_turn("main", "s0", at=1e6))
    for rows in ("0", "-5"):
        code, _, err = await run_cli(
            "migrate", "--to", str(target), "--batch", rows, "--data-dir", str(source)
        )
        assert code == 2, err
        assert f"--batch: a batch is at least 1 row, not {rows}" in err, err
        assert not target.exists(), sorted(p.name for p in target.iterdir())
