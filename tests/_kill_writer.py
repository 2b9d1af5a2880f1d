"""Child process for the kill-during-write test: commits turns until it is killed.

Usage: python -m tests._kill_writer DB_PATH PREFIX
Prints "committed <turn id>" after each commit returns.
"""

from __future__ import annotations

import sys

import anyio

from storage import DEFAULT_USER, SQLiteStorage
from tests._factories import every_block_type, turn


async def main(path: str, prefix: str) -> None:
    storage = await SQLiteStorage.open(path)
    async with storage:
        i = 0
        while True:
            turn_id = f"{prefix}-{i}"
            write = turn("killme", turn_id, at=1000.0 + i, messages=every_block_type(turn_id))
            await storage.commit_turn(DEFAULT_USER, write)
            await storage.add_memory(DEFAULT_USER, f"memory {turn_id} " + "x" * 500)
            print(f"committed {turn_id}", flush=True)
            i += 1


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
