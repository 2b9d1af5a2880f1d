"""The commands that look after a store's data over its life: `users rotate` and
`users delete` (more to come: export, import, migrate, backup).

They open the store alone (no actors, no model), like `users add`: SQLite in the data
directory, or the PostgreSQL database given by `--database` or the config.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import msgspec

from storage import Storage

from .._exceptions import DataDirLocked
from .._frontmind import open_storage
from .._lock import data_dir_lock
from ..config import load_config

__all__ = ["add_user_actions"]


@asynccontextmanager
async def _store(args: argparse.Namespace, *, exclusive: bool = False) -> AsyncIterator[Storage]:
    """The command's store. `exclusive`: with SQLite, hold the data directory's lock too,
    so that no daemon is running on it (one that is would keep the user's continuums
    loaded; it must be asked through its API instead)."""
    config = load_config(args.config, args.data_dir)
    if args.database is not None:
        config = msgspec.structs.replace(
            config, storage=msgspec.structs.replace(config.storage, url=args.database)
        )
    async with AsyncExitStack() as stack:
        if exclusive and config.storage.url is None:
            try:
                stack.enter_context(data_dir_lock(args.data_dir))
            except DataDirLocked as exc:
                raise DataDirLocked(
                    f"{exc}: while a daemon runs, delete the user through it"
                    " (DELETE /v1/users/NAME with the admin token)"
                ) from None
        storage = await open_storage(config, args.data_dir)
        stack.push_async_callback(storage.close)
        yield storage


def cmd_rotate(args: argparse.Namespace) -> None:
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
    async def main() -> None:
        async with _store(args, exclusive=True) as storage:
            forgotten = await storage.delete_user(args.name)
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
    rotate.set_defaults(func=cmd_rotate)
    delete = users.add_parser(
        "delete", help="forget a user: their token and every row of theirs, in one transaction"
    )
    options(delete)
    delete.add_argument("name", help="the user")
    delete.set_defaults(func=cmd_delete)
