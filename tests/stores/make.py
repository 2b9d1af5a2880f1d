# ruff: noqa: ASYNC221, ASYNC240 (a one-off generator script: blocking calls are fine here)
"""Make the upgrade fixtures: a small store at every earlier schema version.

    .venv/bin/python -m tests.stores.make

One conversation is held with the current Frontmind (offline, against the local API, at
a fixed clock): two turns, a reminder, a memory, a document and the continuum's own
model settings. Its rows are kept as `content.jsonl` (the export format). Then, for
each earlier schema version N, the schema migrations are run up to N and the rows are
written into it, each table with the columns that version has (a table it lacks is
left out), as the Frontmind of that version would have held them: `sqlite_vN.db`
(compacted) and, for PostgreSQL, `postgres_vN.sql` (pg_dump's plain SQL). Run it only
when a new schema version is released: the files are committed.
"""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
from pathlib import Path

import anyio

from frontmind import Frontmind
from frontmind.cli._data import read_export
from frontmind.config import Config
from storage import SQLiteStorage, TableRows, encode_header, encode_row
from storage._migrations import SCHEMA_VERSION
from storage._pg_schema import PG_SCHEMA_VERSION
from storage._postgres import PostgresStorage
from tests._postgres import running_server

HERE = Path(__file__).resolve().parent
NOW = 1_800_000_000.0


async def converse(data_dir: Path) -> None:
    async with Frontmind.open(data_dir, Config(), offline=True, clock=lambda: NOW) as fm:
        await fm.put_document("profile", "Ada likes tea and quiet mornings.")
        await fm.remember("Ada's cat is called Turing", importance=0.7)
        await fm.add_reminder("water the plants")
        await fm.set_model_settings("main", max_tokens=2048)
        for text in ("hello, I am Ada", "what do you remember about me?"):
            async with fm.turn("main", text) as stream:
                async for _ in stream:
                    pass


def columns_at(db: sqlite3.Connection, table: str) -> list[str]:
    return [column[1] for column in db.execute(f"PRAGMA table_info({table})")]


async def sqlite_fixture(version: int, parts: list[TableRows], path: Path) -> None:
    from storage._transfer import COLUMNS

    path.unlink(missing_ok=True)
    async with await SQLiteStorage.open(path, schema_upto=version):
        pass
    db = sqlite3.connect(path)
    with db:
        for part in parts:
            have = columns_at(db, part.table)
            if not have:
                continue
            keep = [i for i, c in enumerate(COLUMNS[part.table]) if c in have]
            names = ", ".join(COLUMNS[part.table][i] for i in keep)
            marks = ", ".join("?" * len(keep))
            db.executemany(
                f"INSERT INTO {part.table} ({names}) VALUES ({marks})",
                [[row[i] for i in keep] for row in part.rows],
            )
    db.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("PRAGMA page_size=1024")
    db.execute("VACUUM")
    db.close()


async def postgres_fixture(version: int, parts: list[TableRows], out: Path) -> None:
    from storage._transfer import COLUMNS

    with running_server() as server:
        url = server.new_database()
        store = await PostgresStorage.open(url, schema_upto=version)
        await store.close()
        for part in parts:
            have = subprocess.run(
                [str(server.bin_dir / "psql"), "-X", "-q", "-t", "-A", "-c",
                 "SELECT column_name FROM information_schema.columns WHERE table_schema ="
                 f" 'public' AND table_name = '{part.table}' AND is_generated = 'NEVER'", url],
                check=True, capture_output=True, text=True,
            ).stdout.split()  # fmt: skip
            if not have:
                continue
            keep = [i for i, c in enumerate(COLUMNS[part.table]) if c in have]
            names = ", ".join(COLUMNS[part.table][i] for i in keep)
            for row in part.rows:
                values = ", ".join(_literal(row[i]) for i in keep)
                subprocess.run(
                    [str(server.bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                     f"INSERT INTO {part.table} ({names}) VALUES ({values})", url],
                    check=True,
                )  # fmt: skip
        dump = subprocess.run(
            [str(server.bin_dir / "pg_dump"), "--no-owner", "--no-privileges", url],
            check=True,
            capture_output=True,
        )
        out.write_bytes(dump.stdout)


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"'\\x{value.hex()}'::bytea"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return f"{value!r}::double precision"
    return str(value)


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = Path(scratch)
        await converse(data_dir)
        async with await SQLiteStorage.open(data_dir / "frontmind.db") as store:
            lines = [encode_header(await store.schema_version(), None)]
            async for part in store.export_rows():
                lines += [encode_row(part.table, row) for row in part.rows]
    (HERE / "content.jsonl").write_bytes(b"".join(lines))
    parts = read_export(str(HERE / "content.jsonl"))
    for version in range(1, SCHEMA_VERSION):
        await sqlite_fixture(version, parts, HERE / f"sqlite_v{version}.db")
    for version in range(1, PG_SCHEMA_VERSION):
        await postgres_fixture(version, parts, HERE / f"postgres_v{version}.sql")


if __name__ == "__main__":
    anyio.run(main)
