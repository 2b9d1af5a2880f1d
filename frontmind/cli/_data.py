"""The commands that look after a store's data over its life: `users rotate`, `users
delete`, `export`, `import` and `migrate`.

They open the store alone (no actors, no model), like `users add`: SQLite in the data
directory, or the PostgreSQL database given by `--database` or the config. Those that
read or write a whole SQLite store hold its data directory's lock, so no daemon runs on
it meanwhile (the copy is consistent, and no loaded continuum misses a change).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage import Storage, TableRows

# The commands import the store and the config when they run: registering them (for
# `frontmind --help`) loads nothing of the project.

__all__ = ["add_data_commands", "add_user_actions"]


@asynccontextmanager
async def _store(
    args: argparse.Namespace,
    *,
    exclusive: bool = False,
    existing: bool = True,
    upgrade: bool = True,
    settle: bool = False,
) -> AsyncIterator[Storage]:
    """The command's store. `exclusive`: with SQLite, hold the data directory's lock too,
    so that no daemon is running on it (one that is would keep the user's continuums
    loaded; it must be asked through its API instead). `existing`: with SQLite, the data
    directory must hold a database already; opening one would make an empty store, and
    a mistyped `--data-dir` would then back up, export or migrate nothing, and say it
    succeeded. Only `import` makes a store. `upgrade=False`: the store is not migrated
    (see `open_storage`). `settle`: not `exclusive`, the turns a dead owner left running
    are recorded as interrupted first (`_settle_stale_turns`)."""
    import msgspec

    from .._exceptions import DataDirLocked, EdgeError
    from .._frontmind import DATABASE_FILE, open_storage
    from .._lock import data_dir_lock
    from ..config import load_config

    config = load_config(args.config, args.data_dir, check_plugins=False)
    if args.database is not None:
        config = msgspec.structs.replace(
            config, storage=msgspec.structs.replace(config.storage, url=args.database)
        )
    if existing and config.storage.url is None and not (args.data_dir / DATABASE_FILE).exists():
        raise EdgeError(f"no Frontmind database in {args.data_dir}")
    async with AsyncExitStack() as stack:
        if exclusive and config.storage.url is None:
            try:
                stack.enter_context(data_dir_lock(args.data_dir))
            except DataDirLocked as exc:
                raise DataDirLocked(f"{exc}: {args.while_running}") from None
        storage = await open_storage(config, args.data_dir, upgrade=upgrade)
        stack.push_async_callback(storage.close)
        if settle and not exclusive:
            await _settle_stale_turns(storage, args.data_dir)
        yield storage


async def _settle_stale_turns(storage: Storage, data_dir: Path) -> None:
    """Record as interrupted the turns a dead owner left `running`, as the next daemon
    to open the store would: in a SQLite store when no process holds the data
    directory's lock (a store a live process owns is not written to: its running turns
    run); in a shared one (PostgreSQL) those whose continuum's lease no live session
    holds or awaits, which the store's statement checks as it writes each, so the
    replicas serving meanwhile keep their running turns.

    The lock is an flock the kernel drops when its holder dies, however it dies: free,
    no process runs a turn on the store, and each running record is a turn that died
    with its process. Only the owner's next start made them so, and until then `stats`
    showed a killed daemon's last turn running, for ever. The store's own
    `interrupt_stale_turns` does it (rather than this reader counting them otherwise):
    one meaning of a stale turn, the record made right for every later reader too (the
    store keeps the killed turn's usage and reply, only its status changes). The lock
    is held for that one transaction: a daemon starting meanwhile is refused, as beside
    any command holding it, for no longer. A replica killed mid-turn leaves no lock on
    the data directory of whoever reads its store: its lease, which PostgreSQL dropped
    with its session, says the turn died with it."""
    from .._exceptions import DataDirLocked
    from .._lock import data_dir_lock

    if storage.shared:
        interrupted = await storage.interrupt_stale_turns()
    else:
        try:
            with data_dir_lock(data_dir):
                interrupted = await storage.interrupt_stale_turns()
        except DataDirLocked:
            return
    if interrupted:
        print(
            f"{interrupted} turn{'s' if interrupted != 1 else ''} left running by a process"
            " that ended: recorded as interrupted",
            file=sys.stderr,
        )


def store_of(args: argparse.Namespace) -> AbstractAsyncContextManager[Storage]:
    """The command's store (`--database`, the config's storage.url, or the data dir's
    SQLite file), for commands outside this module (`stats`, `users list`): its turns a
    dead owner left running read as interrupted (see `_settle_stale_turns`)."""
    return _store(args, settle=True)


def cmd_rotate(args: argparse.Namespace) -> None:
    import anyio

    from .._users import new_token, token_digest

    async def main() -> None:
        # A running daemon looks tokens up on every request: the old token is refused
        # from the next request on, and no restart is needed.
        async with _store(args) as storage:
            token = new_token()
            await storage.set_user_token(args.name, token_digest(token))
        print(token)
        print(
            f"user {args.name!r} has a new token (shown only now); the old one no longer works",
            file=sys.stderr,
        )

    anyio.run(main)


def cmd_delete(args: argparse.Namespace) -> None:
    import anyio

    from .._frontmind import delete_user_leased

    async def main() -> None:
        async with _store(args, exclusive=True) as storage:
            forgotten = await delete_user_leased(storage, args.name)
        for table, count in forgotten.rows.items():
            print(f"{table}\t{count}")
        print(f"deleted user {args.name!r} and every row of theirs", file=sys.stderr)

    anyio.run(main)


def add_user_actions(
    users: argparse._SubParsersAction[argparse.ArgumentParser],
    options: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Register `users rotate` and `users delete`; `options` adds the common ones."""
    rotate = users.add_parser("rotate", help="give a user a new token (the old one stops working)")
    options(rotate)
    rotate.add_argument("name", help="the user")
    rotate.set_defaults(func=cmd_rotate, while_running="")
    delete = users.add_parser(
        "delete", help="forget a user: their token and every row of theirs, in one transaction"
    )
    options(delete)
    delete.add_argument("name", help="the user")
    delete.set_defaults(
        func=cmd_delete,
        while_running="while a daemon runs, delete the user through it"
        " (DELETE /v1/users/NAME with the admin token)",
    )


def cmd_export(args: argparse.Namespace) -> None:
    import anyio

    from storage import DEFAULT_USER, encode_header, encode_row

    from .._exceptions import EdgeError

    async def main() -> None:
        out = sys.stdout.buffer
        async with _store(args, exclusive=True) as storage:
            header: bytes | None = encode_header(await storage.schema_version(), args.user)
            async for part in storage.export_rows(args.user):
                for row in part.rows:
                    if header is not None:
                        out.write(header)
                        header = None
                    out.write(encode_row(part.table, row))
            if header is not None:
                # Nothing of theirs: a mistyped name exported a header alone, and exit 0.
                if args.user not in (None, DEFAULT_USER) and args.user not in {
                    user.name for user in await storage.users()
                }:
                    raise EdgeError(f"no user named {args.user!r}")
                out.write(header)
        out.flush()

    anyio.run(main)


def read_export(path: str) -> list[TableRows]:
    """The file's rows, runs of one table together; every line checked before any row
    is written (a bad line names its number). An export opens with its header: a file
    without one (empty, as a failed `export > FILE` leaves it) is refused, not imported
    as nothing."""
    from storage import InvalidInput, TableRows, decode_line

    from .._exceptions import EdgeError

    parts: list[TableRows] = []
    try:
        lines = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise EdgeError(f"cannot read {path}: {exc.strerror}") from None
    header = False
    with lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            decoded = decode_line(line, number)
            if decoded is None:
                header = True
                continue
            if not header:
                raise InvalidInput(f"line {number}: an export starts with its header line")
            table, row = decoded
            if parts and parts[-1].table == table:
                parts[-1].rows.append(row)
            else:
                parts.append(TableRows(table, [row]))
    if not header:
        raise InvalidInput(f"{path} holds no export: not even its header line")
    return parts


def cmd_import(args: argparse.Namespace) -> None:
    import anyio

    async def main() -> None:
        parts = read_export(args.file)
        async with _store(args, exclusive=True, existing=False) as storage:
            inserted = await storage.import_rows(parts)
        for table, count in inserted.items():
            print(f"{table}\t{count}")

    anyio.run(main)


async def _sqlite_or_nothing(path: Path) -> bool:
    """Whether `path` is missing, empty, or a SQLite database (by its header)."""
    import anyio

    try:
        async with await anyio.open_file(path, "rb") as file:
            head = await file.read(16)
    except OSError:  # missing (made), or what opening it will say better
        return True
    return head in (b"", b"SQLite format 3\x00")


# `user:password@…` at the start, or a libpq keyword's `password=`: a database's
# address written without `postgresql://`, never a data directory or file.
_SCHEMELESS_DATABASE = re.compile(r"^[^/:@\s]+:[^@]*@|(^|\s)password\s*=", re.IGNORECASE)


async def _target(
    url: str, gap: float, stack: AsyncExitStack, *, source: Path | None = None
) -> Storage:
    """The store `--to` names: a PostgreSQL URL, a SQLite file (`*.db`), or a data
    directory (created if missing; its lock held, so no daemon runs on it meanwhile).
    `source`: the SQLite file being migrated, which the target may not be."""
    import anyio

    from storage import SQLiteStorage

    from .._exceptions import EdgeError
    from .._frontmind import DATABASE_FILE
    from .._lock import data_dir_lock

    if url.startswith(("postgresql://", "postgres://")):
        from storage import PostgresStorage

        store: Storage = await PostgresStorage.open(url, segment_gap=gap)
    elif "://" in url and not url.startswith("sqlite://"):
        # Else `mysql://…` or `postgresql+asyncpg://…` became a folder named after the
        # scheme, the store was copied into SQLite there, and the copy said "verified".
        raise EdgeError(
            f"--to: {url.split('://')[0]!r} is not a supported database; use "
            "postgresql://user:password@host:port/database, a SQLite file (*.db) or a "
            "data directory"
        )
    elif "://" not in url and _SCHEMELESS_DATABASE.search(url):
        # Else `user:secret@db/frontmind` (the scheme forgotten) or a libpq
        # `host=db password=secret` became a data directory named after the password,
        # the store was copied into SQLite there, and the copy said "verified".
        raise EdgeError(
            "--to: a database URL without its scheme; use "
            "postgresql://user:password@host:port/database, a SQLite file (*.db) or a "
            "data directory"
        )
    else:
        path = Path(url.removeprefix("sqlite://"))
        directory = path.suffix != ".db" and not await anyio.Path(path).is_file()
        file = path / DATABASE_FILE if directory else path
        if source is not None and (
            await anyio.Path(file).resolve() == await anyio.Path(source).resolve()
        ):
            # Else its own data dir was "in use by another process" (this one), and its
            # own database file was copied onto itself and said "verified".
            raise EdgeError(f"--to {url}: that is the store being migrated; name another")
        if not directory and not await _sqlite_or_nothing(file):
            # Else any file named by --to (notes.txt) was made a database, its text lost.
            raise EdgeError(f"--to {url}: the file exists and is no SQLite database")
        if directory:
            stack.enter_context(data_dir_lock(path))
        path = file
        store = await SQLiteStorage.open(path, segment_gap=gap)
    stack.push_async_callback(store.close)
    return store


def cmd_migrate(args: argparse.Namespace) -> None:
    import anyio

    from storage import migrate

    from .._frontmind import DATABASE_FILE
    from ..config import load_config

    async def main() -> None:
        async with _store(args, exclusive=True) as source, AsyncExitStack() as stack:
            config = load_config(args.config, args.data_dir, check_plugins=False)
            sqlite = args.database is None and config.storage.url is None
            target = await _target(
                args.to,
                config.history.segment_gap_minutes * 60,
                stack,
                source=args.data_dir / DATABASE_FILE if sqlite else None,
            )

            def committed(table: str, rows: int) -> None:
                # Each batch as it is committed: what a run killed now would keep.
                print(f"copied {rows} {table} rows", file=sys.stderr, flush=True)

            done = await migrate(source, target, batch=args.batch, progress=committed)
        for table, count in done.counts.items():
            print(f"{table}\t{count}\t(copied now: {done.copied.get(table, 0)})")
        for continuum, digest in done.digests.items():
            print(f"{continuum}\tsha256:{digest}")
        print(
            "verified: every table's row count and every continuum's digest match", file=sys.stderr
        )

    anyio.run(main)


def cmd_backup(args: argparse.Namespace) -> None:
    import anyio

    async def main() -> None:
        # No lock: the backup is taken beside a running daemon, as a consistent snapshot.
        # Nor any migration: a store of an earlier schema (a daemon of the release before
        # still serving it, a backup taken before upgrading) is copied as it is; migrated,
        # it would change under that daemon, and neither it nor its backup would open
        # with the release before any more.
        from .._lock import check_not_lock

        check_not_lock(args.path.absolute(), args.data_dir)
        async with _store(args, upgrade=False) as storage:
            size = await storage.backup(args.path.absolute())
        print(f"backed up to {args.path} ({size} bytes)", file=sys.stderr)

    anyio.run(main)


def _batch_rows(text: str) -> int:
    """`--batch`, refused as the command line is read: refused later, by the migration
    itself, the target's store had been made by then, and was left behind empty."""
    try:
        rows = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a batch is a number of rows, not {text!r}") from None
    if rows < 1:
        raise argparse.ArgumentTypeError(f"a batch is at least 1 row, not {rows}")
    return rows


def add_data_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    options: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Register `export`, `import` and `migrate`; `options` adds the common ones."""
    busy = "stop the daemon first (it would keep writing meanwhile)"
    p = sub.add_parser("export", help="write the store (or one user) as JSON Lines to stdout")
    options(p)
    p.add_argument("--user", default=None, help="only this user's rows")
    p.set_defaults(func=cmd_export, while_running=busy)
    p = sub.add_parser("import", help="read an export into this store (refuses collisions)")
    options(p)
    p.add_argument("file", help="the export's file (- for stdin)")
    p.set_defaults(func=cmd_import, while_running=busy)
    p = sub.add_parser("migrate", help="copy the whole store to another (resumable, verified)")
    options(p)
    p.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="postgresql://user:password@host/db, or a SQLite file or data directory",
    )
    p.add_argument(
        "--batch",
        type=_batch_rows,
        default=500,
        metavar="ROWS",
        help="rows copied per transaction in the target (default 500)",
    )
    p.set_defaults(func=cmd_migrate, while_running=busy)
    p = sub.add_parser("backup", help="a consistent snapshot of the (running) store to a file")
    options(p)
    p.add_argument("path", type=Path, help="the backup's file (replaced whole)")
    p.set_defaults(func=cmd_backup, while_running="")
