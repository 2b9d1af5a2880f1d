"""Copying one store into another (`frontmind migrate`), verified.

The rows go over in batches, each batch one transaction in the target, so a copy killed
halfway keeps what it committed; run again, it re-reads the source and brings every row
the target already has up to date if the source changed it since (each portable table
has a key), so nothing is copied twice and the copy finishes. Then it checks: each
table's row count, and the content digests (each continuum's row, settings, turn
records, segments and messages; each user's token, documents, reminders and memories),
the same on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ._exceptions import InvalidInput, StorageError
from ._port import Storage
from ._transfer import COLUMNS

__all__ = ["Migration", "MigrationMismatch", "migrate"]


class MigrationMismatch(StorageError):
    """The target does not hold what the source holds after a copy."""


class Migration(msgspec.Struct, frozen=True):
    """A verified copy: rows inserted by this run, the row counts of both stores (equal),
    and each continuum's content digest ("user/continuum": SHA-256 hex, equal)."""

    copied: dict[str, int]
    counts: dict[str, int]
    digests: dict[str, str]


# What a row is known by across stores: its key and its owner and when it was made, which
# no later change of the row alters. A target holding a row the source has not (as
# known so) is another store, not a copy of this one resumed.
_IDENTITY = {
    "users": ("name", "created_at"),
    "reminders": ("id", "owner", "created_at"),
    "continuums": ("owner", "id", "created_at"),
    "memories": ("id", "owner", "created_at"),
}


async def _identities(store: Storage) -> dict[str, set[tuple[Any, ...]]]:
    found: dict[str, set[tuple[Any, ...]]] = {table: set() for table in _IDENTITY}
    async for part in store.export_rows():  # read to its end: the snapshot then closes
        if part.table in found:
            at = [COLUMNS[part.table].index(column) for column in _IDENTITY[part.table]]
            found[part.table].update(tuple(row[i] for i in at) for row in part.rows)
    return found


async def _check_resumable(source: Storage, target: Storage) -> None:
    """Refuse, before anything is copied, a target holding rows that are not the
    source's: copied into, its rows of the same ids were skipped or written over, and
    the source's continuums arrived there with holes in their messages."""
    if not any((await target.table_counts()).values()):
        return
    theirs, ours = await _identities(target), await _identities(source)
    foreign = {table: len(rows - ours[table]) for table, rows in theirs.items()}
    if any(foreign.values()):
        named = ", ".join(f"{count} {table}" for table, count in foreign.items() if count)
        raise MigrationMismatch(
            f"the target holds rows that are not the source's ({named}): nothing was"
            " copied; migrate into an empty store"
        )


async def migrate(
    source: Storage,
    target: Storage,
    *,
    batch: int = 500,
    progress: Callable[[str, int], object] | None = None,
) -> Migration:
    """Copy `source` into `target`, `batch` rows a transaction, and verify the copy;
    `progress(table, rows)` is told of each batch once it is committed."""
    if batch < 1:
        raise InvalidInput(f"a migration's batch is at least 1 row, not {batch}")
    if await source.store_id() == await target.store_id():
        # Else every row was "already there", nothing was copied, and the copy verified.
        raise InvalidInput("the target is the source store itself: migrate into another")
    await _check_resumable(source, target)
    copied: dict[str, int] = {}
    async for part in source.export_rows(batch=batch):
        for table, count in (await target.import_rows([part], skip_existing=True)).items():
            copied[table] = copied.get(table, 0) + count
            if progress is not None:
                progress(table, count)
    counts, there = await source.table_counts(), await target.table_counts()
    if counts != there:
        differ = ", ".join(f"{t}: {counts[t]} here, {there[t]} there" for t in counts
                           if counts[t] != there[t])  # fmt: skip
        raise MigrationMismatch(
            f"the target holds other rows than the source ({differ}): migrate into an empty store"
        )
    digests, theirs = await source.continuum_digests(), await target.continuum_digests()
    changed = [f"{u}/{c}" for (u, c), d in digests.items() if theirs.get((u, c)) != d]
    if changed:
        raise MigrationMismatch(f"continuums differ after the copy: {', '.join(changed)}")
    return Migration(copied, counts, {f"{u}/{c}": d for (u, c), d in digests.items()})
