"""A realistic store for benchmarks: 10,000 messages, 5,000 memories, 500 reminders."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from pathlib import Path

from storage import (
    DEFAULT_USER,
    Message,
    SQLiteStorage,
    TextBlock,
    TurnRecord,
    TurnUsage,
    TurnWrite,
    moment,
)

CONTINUUM = "bench"
_SYLLABLES = "ka lo mi ne ru sa ti vo ber lin dex cha pro gra mon tes ver dal fin sor".split()


def _vocabulary(size: int = 5000) -> list[str]:
    rng = random.Random(11)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


# Word frequencies follow Zipf's law, as in real text: a few words are everywhere, most
# are rare. Queries drawn from the same distribution match a realistic share of rows.
WORDS = _vocabulary()
_WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, _WEIGHTS, k=words)).capitalize() + "."


async def build_store(
    path: Path,
    *,
    messages: int = 10_000,
    memories: int = 5_000,
    reminders: int = 500,
    window: int = 200,
    seed: int = 7,
) -> float:
    """Fill a database; returns the simulated 'now' just after the last turn."""
    rng = random.Random(seed)
    now = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
    storage = await SQLiteStorage.open(path, segment_gap=1800)
    async with storage:
        turns = messages // 2
        for i in range(turns):
            now += rng.choice((60, 120, 300, 600, 4 * 3600))  # sessions with gaps
            user = Message("user", (TextBlock(sentence(rng, 14)),))
            reply = Message("assistant", (TextBlock(sentence(rng, 40)),))
            record = TurnRecord(
                f"t{i}",
                CONTINUUM,
                "completed",
                moment(now),
                moment(now + 2),
                "bench",
                user_text=user.text(),
                usage=TurnUsage(),
            )
            start = messages - window if i == turns - 1 else None
            await storage.commit_turn(
                DEFAULT_USER, TurnWrite(record, (user, reply), history_start=start)
            )
        for _ in range(memories):
            await storage.add_memory(
                DEFAULT_USER,
                sentence(rng, 12),
                importance=rng.random(),
                now=now - rng.random() * 200 * 86400,
            )
        for i in range(reminders):
            due = (
                None
                if i % 5 == 0
                else datetime.fromtimestamp(now + rng.uniform(-3, 30) * 86400, UTC)
            )
            await storage.add_reminder(DEFAULT_USER, sentence(rng, 5), due_at=due, origin="user")
            if i % 3 == 0:
                await storage.complete_reminder(DEFAULT_USER, i + 1)
    return now


def elapsed(start: float) -> float:
    return time.perf_counter() - start
