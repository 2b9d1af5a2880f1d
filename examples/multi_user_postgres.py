"""A multi-user service on PostgreSQL: one database for every user (and for as many
replicas as you run), each user seeing only their own conversations, reminders,
memories and documents.

    export FRONTMIND_DATABASE_URL=postgresql://frontmind:secret@localhost/frontmind
    python examples/multi_user_postgres.py

(A local PostgreSQL in two minutes: see "PostgreSQL and replicas" in the README.)
Without ANTHROPIC_API_KEY the model is the built-in local Messages API. The same
database serves `frontmind serve --database "$FRONTMIND_DATABASE_URL"` replicas, where
each user talks with their own token (`frontmind users add NAME`).
"""

from __future__ import annotations

import os
import tempfile

import anyio

from frontmind import Frontmind, TextDelta

PEOPLE = {
    "alice": ("Alice lives in Bergen and grows tomatoes.", "Remind me to water the tomatoes"),
    "bob": ("Bob keeps bees in Oslo.", "Remind me to check the hives in 2 hours"),
}


async def main() -> None:
    if not os.environ.get("FRONTMIND_DATABASE_URL"):
        raise SystemExit(
            "multi_user_postgres: set FRONTMIND_DATABASE_URL=postgresql://user:pass@host/db"
        )
    offline = not os.environ.get("ANTHROPIC_API_KEY")
    # The data directory holds only this process's lock and config: everything users
    # own is in the database (FRONTMIND_DATABASE_URL, or [storage] url in the config).
    with tempfile.TemporaryDirectory(prefix="frontmind-multi-user-") as data_dir:
        async with Frontmind.open(data_dir, offline=offline) as fm:
            for name, (about, message) in PEOPLE.items():
                person = fm.user(name)  # every call through `person` is theirs alone
                await person.put_document("about-me", about)  # in their system prompt only
                print(f"{name}> {message}")
                async for event in person.turn("main", message):
                    if isinstance(event, TextDelta):
                        print(event.text, end="")
                print()
            for name in PEOPLE:
                open_reminders = [r.text for r in await fm.user(name).reminders()]
                print(f"{name}'s reminders: {open_reminders}")


if __name__ == "__main__":
    anyio.run(main)
