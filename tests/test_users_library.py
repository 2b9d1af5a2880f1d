"""Users in the library: `fm.user(name)` is the whole API scoped to one user, and no
request sent to the model, no context window and no search result of one user holds
another's data."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest

from frontmind import Frontmind, InvalidInput
from frontmind._frontmind import DATABASE_FILE
from frontmind.localapi import LocalMessagesAPI
from tests._harness import completed, frontmind, run_turn, tool_finishes

pytestmark = pytest.mark.anyio

WORDS = {"default": "otter", "alice": "zebra", "bob": "walrus"}


def others(user: str) -> list[str]:
    return [word for name, word in WORDS.items() if name != user]


def stored_bytes(data_dir: Path) -> bytes:
    """Every byte of the data directory (the database, its WAL and shared memory)."""
    assert (data_dir / DATABASE_FILE).exists()
    return b"".join(p.read_bytes() for p in data_dir.iterdir() if p.is_file())


async def searched(me: Frontmind) -> str:
    """The notification center once the user's background search has finished."""
    with anyio.fail_after(20):
        while True:
            center = (await me.compose("main", "and now?")).notification
            if "still running" not in center:
                return center


async def test_each_user_sees_only_their_own_data(tmp_path: Path) -> None:
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        scopes = {"default": fm, "alice": fm.user("alice"), "bob": fm.user("bob")}
        sent: dict[str, str] = {}
        for name, me in scopes.items():
            word = WORDS[name]
            await me.put_document("profile", f"quarterly profile {word}")
            await me.add_reminder(f"quarterly call {word}")
            await me.remember(f"quarterly memory {word}")
            before = len(api.message_bodies())
            for text in (
                f"my quarterly word is {word}",
                f"remember that the quarterly plan needs {word}",  # the remember tool
                "search for quarterly",  # the search_context tool
            ):
                completed(await run_turn(me, "main", text))
            sent[name] = json.dumps(api.message_bodies()[before:])
        for name, me in scopes.items():
            word = WORDS[name]
            # What went to the model: the user's own system prompt, reminders, memories.
            assert f"quarterly profile {word}" in sent[name]
            assert f"quarterly call {word}" in sent[name]
            assert f"quarterly memory {word}" in sent[name]
            # The context window now, and the finished search's passages.
            center = await searched(me)
            assert 'Search "quarterly":' in center
            assert "nothing found" not in center
            context = msgspec.json.encode(await me.context("main", "quarterly")).decode()
            composed = msgspec.json.encode(await me.compose("main", "quarterly")).decode()
            reads = msgspec.json.encode(
                [
                    await me.history("main"),
                    await me.turns(),
                    await me.turns("main"),
                    await me.reminders(include_completed=True),
                    await me.memories(),
                    await me.search_memories("quarterly"),
                    await me.documents(),
                ]
            ).decode()
            for seen in (sent[name], center, context, composed, reads):
                assert word in seen
                for other in others(name):
                    assert other not in seen, (name, other)
            assert f"the quarterly plan needs {word}" in [m.text for m in await me.memories()]
            assert me.loaded_continuums() == ["main"]
            assert me.user_name == name
        # The system prompt is each user's own (their documents), section by section.
        alice_system = (await scopes["alice"].compose("main", "hi")).system
        assert any("quarterly profile zebra" in s.text for s in alice_system)
        assert len(await fm.turns()) == 3
        assert sorted(await fm.unload_idle(0)) == ["main"]


async def test_users_and_their_tokens(tmp_path: Path) -> None:
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        token = await fm.add_user("alice")
        assert len(token) >= 40
        assert await fm.user_for_token(token) == "alice"
        assert await fm.user_for_token(token + "x") is None
        assert [u.name for u in await fm.users()] == ["alice"]
        with pytest.raises(InvalidInput, match="user name"):
            fm.user("not/ok")
        # Scoping needs no token: the user's data starts with its first write.
        assert await fm.user("carol").reminders() == []
    # The token itself is nowhere in the data directory.
    assert token.encode() not in stored_bytes(tmp_path)


async def test_tools_write_and_complete_only_the_turns_users_reminders(tmp_path: Path) -> None:
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        alice, bob = fm.user("alice"), fm.user("bob")
        bobs = await bob.add_reminder("bob's walrus errand")
        events = await run_turn(alice, "main", f"complete reminder {bobs.id}")
        finished = tool_finishes(events)
        assert [(e.name, e.is_error) for e in finished] == [("complete_reminder", True)]
        assert f"no reminder #{bobs.id}" in finished[0].content
        completed(await run_turn(alice, "main", "remind me to feed the zebra in 10 minutes"))
        assert [r.completed_at for r in await bob.reminders(include_completed=True)] == [None]
        assert [r.text for r in await alice.reminders()] == ["feed the zebra"]
        assert [r.text for r in await bob.reminders()] == ["bob's walrus errand"]
        assert await fm.reminders() == []
