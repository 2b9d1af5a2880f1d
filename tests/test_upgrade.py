"""Upgrades: a store written at every earlier schema version (the fixtures in
tests/stores/, made by tests/stores/make.py) opens with this Frontmind, migrates forward
in one transaction, holds every row it held byte for byte, and replays: each
continuum's next turn sends the very bytes the same content sends from a store made
new. A store from a newer version is refused with a message naming both versions."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from frontmind.cli._data import read_export
from storage import (
    DEFAULT_USER,
    INTERRUPTED_TURN,
    PostgresStorage,
    SchemaTooNew,
    SQLiteStorage,
    Storage,
    TableRows,
)
from storage._migrations import SCHEMA_VERSION
from storage._pg_schema import PG_SCHEMA_VERSION
from storage._transfer import COLUMNS
from tests._postgres import PostgresServer
from tests.test_move import previews

pytestmark = pytest.mark.anyio

STORES = Path(__file__).resolve().parent / "stores"
# What a column added after a fixture's version holds once migrated (its schema default).
ADDED_DEFAULTS: dict[str, Any] = {
    "owner": "default",
    "uses": 0,
    "summary": "",
    "source_segment": None,
    "embedding": None,
}


def content() -> list[TableRows]:
    return read_export(str(STORES / "content.jsonl"))


def expected_at(had: dict[str, list[str]]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows a store of that version held (its tables, its columns), as this version
    holds them: a column it lacked holds its default."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    for part in content():
        if part.table not in had:
            continue
        columns = COLUMNS[part.table]
        rows[part.table] = [
            tuple(
                value if column in had[part.table] else ADDED_DEFAULTS[column]
                for column, value in zip(columns, row, strict=True)
            )
            for row in part.rows
        ]
    return rows


async def rows_of(store: Storage) -> dict[str, list[tuple[Any, ...]]]:
    rows: dict[str, list[tuple[Any, ...]]] = {}
    async for part in store.export_rows():
        rows.setdefault(part.table, []).extend(
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in part.rows
        )
    return rows


async def fresh_previews(
    rows: dict[str, list[tuple[Any, ...]]], data_dir: Path
) -> dict[str, bytes]:
    """The previews of the same rows imported into a store made new."""
    async with await SQLiteStorage.open(data_dir / "frontmind.db") as store:
        await store.import_rows([TableRows(table, list(r)) for table, r in rows.items()])
    return await previews(data_dir)


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
async def test_every_earlier_sqlite_store_upgrades_and_replays(
    version: int, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "frontmind.db"
    shutil.copyfile(STORES / f"sqlite_v{version}.db", path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM schema_version").fetchone()[0] == version
        had = {
            table: [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
            for table in COLUMNS
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        }
    async with await SQLiteStorage.open(path) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        upgraded = await rows_of(store)
    expected = expected_at(had)
    assert {t: r for t, r in upgraded.items() if r} == expected
    assert await previews(data) == await fresh_previews(expected, tmp_path / "fresh")


async def restored(pg_server: PostgresServer, version: int) -> str:
    """A new database holding the PostgreSQL fixture of that schema version; its URL."""
    url = pg_server.new_database()
    await anyio.run_process(
        [str(pg_server.bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f",
         str(STORES / f"postgres_v{version}.sql"), url],
        check=True,
    )  # fmt: skip
    return url


@pytest.mark.parametrize("version", range(1, PG_SCHEMA_VERSION))
async def test_every_earlier_postgres_store_upgrades_and_replays(
    version: int, tmp_path: Path, pg_server: PostgresServer
) -> None:
    url = await restored(pg_server, version)
    had: dict[str, list[str]] = {}
    for table in COLUMNS:
        result = await anyio.run_process(
            [str(pg_server.bin_dir / "psql"), "-X", "-q", "-t", "-A", "-c",
             "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
             f" AND table_name = '{table}'", url],
            check=True,
        )  # fmt: skip
        if result.stdout.split():
            had[table] = result.stdout.decode().split()
    async with await PostgresStorage.open(url) as store:
        assert await store.schema_version() == PG_SCHEMA_VERSION
        upgraded = await rows_of(store)
    expected = expected_at(had)
    assert {t: r for t, r in upgraded.items() if r} == expected
    assert await previews(tmp_path / "pg", url) == await fresh_previews(
        expected, tmp_path / "fresh"
    )


async def test_a_newer_store_is_refused_naming_both_versions(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    path = tmp_path / "frontmind.db"
    shutil.copyfile(STORES / "sqlite_v1.db", path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(
        SchemaTooNew,
        match=rf"schema version {SCHEMA_VERSION + 1}, but this Frontmind understands only up "
        rf"to {SCHEMA_VERSION}",
    ):
        await SQLiteStorage.open(path)
    url = pg_server.new_database()
    async with await PostgresStorage.open(url):
        pass
    database = url.rsplit("/", 1)[1]
    await anyio.run_process(
        [str(pg_server.bin_dir / "psql"), "-X", "-q", "-c",
         f"UPDATE schema_version SET version = {PG_SCHEMA_VERSION + 1}", pg_server.url(database)],
        check=True,
    )  # fmt: skip
    with pytest.raises(
        SchemaTooNew,
        match=rf"schema version {PG_SCHEMA_VERSION + 1}, but this Frontmind understands only "
        rf"up to {PG_SCHEMA_VERSION}",
    ):
        await PostgresStorage.open(url)


async def test_a_store_from_before_running_turns_takes_their_records(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """A store of the release whose turn records could only say completed, failed or
    cancelled takes a running turn's record once upgraded (its CHECK refused one), and
    interrupts it when it is left behind."""
    path = tmp_path / "frontmind.db"
    shutil.copyfile(STORES / "sqlite_v12.db", path)
    url = await restored(pg_server, 11)
    for store in (await SQLiteStorage.open(path), await PostgresStorage.open(url)):
        async with store:
            (first, *_) = await store.turns(DEFAULT_USER, "main")
            started = msgspec.structs.replace(first, turn_id="t_new", status="running")
            await store.record_turn(DEFAULT_USER, started)
            assert (await store.turns(DEFAULT_USER, "main"))[-1] == started
            assert await store.interrupt_stale_turns() == 1
            last = (await store.turns(DEFAULT_USER, "main"))[-1]
            assert (last.status, last.error) == ("failed", INTERRUPTED_TURN)
