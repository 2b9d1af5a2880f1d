"""The built-in trinkets' sections, on real storage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import msgspec
import pytest

from actors import Turn
from actors._trinkets import (
    DateTimeTrinket,
    ManifestTrinket,
    MemoriesTrinket,
    RemindersTrinket,
)
from actors._trinkets._timefmt import relative
from storage import DEFAULT_USER, SQLiteStorage, moment
from tests._factories import turn as stored_turn

pytestmark = pytest.mark.anyio

OSLO = ZoneInfo("Europe/Oslo")
NOW = datetime(2026, 11, 30, 14, 5, tzinfo=OSLO)


def at(when: datetime, text: str = "hello", continuum: str = "c1") -> Turn:
    return Turn("t", continuum, text, when.timestamp(), "Europe/Oslo")


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    store = await SQLiteStorage.open(tmp_path / "db", segment_gap=1800)
    async with store:
        yield store


async def test_datetime_in_the_users_zone_to_the_minute() -> None:
    text = await DateTimeTrinket().render(at(NOW))
    assert text == "Current date and time: Monday, 30 November 2026, 14:05 (Europe/Oslo, UTC+01:00)"


def test_a_time_stored_to_the_microsecond_reads_as_asked() -> None:
    """ "In 10 minutes" from a clock with a fraction of a second, stored at the
    microsecond, is 599.9999995 s away: it read "in 9 minutes" about a third of the
    time (a reminder's tool result told the model the wrong time)."""
    for fraction in range(0, 1_000_000, 7_919):
        now = 1_795_000_000 + fraction / 1_000_000 + 0.000_000_3
        due = datetime.fromtimestamp(now, UTC) + timedelta(minutes=10)
        assert relative(moment(due.timestamp()), now) == "in 10 minutes"
        assert relative(now - 600.000_000_4, now) == "10 minutes ago"


async def test_reminders_overdue_first_then_today_then_upcoming(storage: SQLiteStorage) -> None:
    await storage.add_reminder(
        DEFAULT_USER, "plan the week", due_at=NOW + timedelta(days=3), origin="user"
    )
    await storage.add_reminder(
        DEFAULT_USER, "water plants", due_at=NOW + timedelta(hours=2), origin="user"
    )
    await storage.add_reminder(
        DEFAULT_USER, "call the bank", due_at=NOW - timedelta(minutes=90), origin="agent"
    )
    await storage.add_reminder(DEFAULT_USER, "read a book", due_at=None, origin="user")
    await storage.add_reminder(
        DEFAULT_USER, "renew the passport", due_at=NOW + timedelta(days=372), origin="user"
    )
    text = await RemindersTrinket(storage).render(at(NOW))
    assert text.splitlines() == [
        "OVERDUE:",
        "- #3 call the bank — due 1 hour ago (Mon 30 Nov 12:35) ⚠ OVERDUE",
        "Due today:",
        "- #2 water plants — due in 2 hours (Mon 30 Nov 16:05)",
        "Upcoming:",
        "- #1 plan the week — due in 3 days (Thu 03 Dec 14:05)",
        # Another year's date says its year ("Tue 07 Dec" alone reads as this week).
        "- #5 renew the passport — due in 372 days (Tue 07 Dec 2027 14:05)",
        "No due time:",
        "- #4 read a book",
    ]
    assert await RemindersTrinket(storage).render(at(NOW, continuum="c2")) == text


async def test_reminders_past_the_sections_bound_are_said_to_be_there(
    storage: SQLiteStorage,
) -> None:
    # The section shows 30 reminders, the most overdue first: a long-lived user's 30 old
    # overdue ones pushed today's out, and nothing told the model there were others.
    for i in range(30):
        await storage.add_reminder(
            DEFAULT_USER, f"old task {i}", due_at=NOW - timedelta(days=40 - i), origin="user"
        )
    await storage.add_reminder(
        DEFAULT_USER, "water plants", due_at=NOW + timedelta(hours=2), origin="user"
    )
    lines = (await RemindersTrinket(storage).render(at(NOW))).splitlines()
    assert lines[0] == "OVERDUE:"
    assert len([line for line in lines if line.startswith("- #")]) == 30
    assert lines[-1] == "More open reminders are not shown here: list_reminders lists them all."
    # At the bound exactly, nothing is left out and nothing is said.
    (last,) = [
        r for r in await storage.reminders(DEFAULT_USER, limit=-1) if r.text == "water plants"
    ]
    await storage.delete_reminder(DEFAULT_USER, last.id)
    lines = (await RemindersTrinket(storage).render(at(NOW))).splitlines()
    assert not lines[-1].startswith("More open reminders")


async def test_manifest_groups_segments_by_day(storage: SQLiteStorage) -> None:
    yesterday = NOW - timedelta(days=1)
    earlier = NOW - timedelta(days=5)
    for i, (when, text) in enumerate(
        [
            (earlier.replace(hour=9), "Budget <review>"),
            (yesterday.replace(hour=16), "Travel plans"),
            (NOW - timedelta(minutes=20), "Launch prep"),
        ]
    ):
        await storage.commit_turn(
            DEFAULT_USER, stored_turn("c1", f"t{i}", at=when.timestamp(), user_text=text)
        )
    text = await ManifestTrinket(storage, segments=8, gap_seconds=1800).render(at(NOW))
    assert text.splitlines() == [
        "Wednesday, 25 November 2026",
        "- 09:05–09:05 Budget &lt;review&gt; [1 turn]",
        "Yesterday",
        "- 16:05–16:05 Travel plans [1 turn]",
        "Today",
        "- 13:45–13:45 (active) Launch prep [1 turn]",
    ]
    assert (
        await ManifestTrinket(storage, segments=8, gap_seconds=1800).render(
            at(NOW, continuum="unknown")
        )
        == ""
    )


async def test_manifest_takes_the_history_start_the_turn_carries(storage: SQLiteStorage) -> None:
    """On a turn's path the conversation actor gives the history's start with the turn
    (it holds it, checked against the store): the manifest marks what is out of context
    by that, without a read of its own; a turn without it reads the store's."""
    for i, when in enumerate((NOW - timedelta(hours=3), NOW - timedelta(minutes=20))):
        await storage.commit_turn(
            DEFAULT_USER, stored_turn("c1", f"t{i}", at=when.timestamp(), user_text=f"topic {i}")
        )
    manifest = ManifestTrinket(storage, segments=8, gap_seconds=1800)
    stored = (await storage.continuum(DEFAULT_USER, "c1")).history_start
    assert stored == 0
    assert "no longer in context" not in await manifest.render(at(NOW))
    second = (await storage.recent_segments(DEFAULT_USER, "c1", limit=8))[-1].first_seq
    trimmed = msgspec.structs.replace(at(NOW), history_start=second)
    assert [line for line in (await manifest.render(trimmed)).splitlines() if "topic" in line] == [
        "- 11:05–11:05 (no longer in context) topic 0 [1 turn]",
        "- 13:45–13:45 (active) topic 1 [1 turn]",
    ]


async def test_memories_most_relevant_with_their_age(storage: SQLiteStorage) -> None:
    await storage.add_memory(
        DEFAULT_USER, "Bob likes green tea", now=(NOW - timedelta(days=2)).timestamp()
    )
    await storage.add_memory(DEFAULT_USER, "The car needs new tyres", now=NOW.timestamp())
    text = await MemoriesTrinket(storage, top_k=5).render(at(NOW, "what tea does Bob like?"))
    assert text == "- (2 days ago) Bob likes green tea"
    assert await MemoriesTrinket(storage, top_k=5).render(at(NOW, "the and of")) == ""
