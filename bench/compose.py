"""Compose: a whole turn's composition on a realistic store, and storage's per-turn reads.

The store: 10,000 messages in one continuum (a 200-message history window), 5,000
memories, 500 reminders. Measured: every built-in trinket composed under the composer
(median and p99; goal under 5 ms median, and under 1% of a realistic first-token time),
and each storage read that runs on every turn (goal under 2 ms median).

    .venv/bin/python -m bench.compose [--turns 400] [--first-token-ms 800]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench._common import run, summary, write_results
from bench._store import CONTINUUM, build_store, sentence
from frontmind import Config, Frontmind
from frontmind._frontmind import NoModel
from storage import DEFAULT_USER, SQLiteStorage


async def _time(fn: Callable[[], Awaitable[object]], rounds: int) -> dict[str, float]:
    for _ in range(20):
        await fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return summary(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument(
        "--first-token-ms",
        type=float,
        default=800.0,
        help="a realistic time to first token to compare against",
    )
    args = parser.parse_args()

    async def body() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            started = time.perf_counter()
            now = await build_store(data / "frontmind.db")
            print(f"store built in {time.perf_counter() - started:.1f}s")
            rng = random.Random(3)

            def query() -> str:
                return sentence(rng, 14)  # a user message of the store's vocabulary

            async with await SQLiteStorage.open(data / "frontmind.db") as storage:
                reads = {
                    "history (200-message window)": lambda: storage.history(
                        DEFAULT_USER, CONTINUUM
                    ),
                    "active reminders": lambda: storage.active_reminders(DEFAULT_USER),
                    "memory search (top 5)": lambda: storage.search_memories(
                        DEFAULT_USER, query(), now=now
                    ),
                    "recent segments": lambda: storage.recent_segments(DEFAULT_USER, CONTINUUM),
                    "message search (top 5)": lambda: storage.search_messages(
                        DEFAULT_USER, query(), continuum_id=CONTINUUM
                    ),
                }
                read_results = {name: await _time(fn, 300) for name, fn in reads.items()}
            print(f"\n{'per-turn read':<32}{'median':>10}{'p99':>10}   goal < 2 ms median")
            for name, r in read_results.items():
                print(f"{name:<32}{r['median_us'] / 1000:>8.2f}ms{r['p99_us'] / 1000:>8.2f}ms")

            async with Frontmind.open(data, Config(), model=NoModel(), clock=lambda: now) as fm:
                compose = await _time(lambda: fm.compose(CONTINUUM, query()), args.turns)
                sample = await fm.compose(CONTINUUM, query())
            share = compose["median_us"] / 1000 / args.first_token_ms
            median, p99 = compose["median_us"] / 1000, compose["p99_us"] / 1000
            print(
                f"\ncompose (all {len(sample.sections)} built-in sections): "
                f"median {median:.2f} ms, p99 {p99:.2f} ms (goal < 5 ms median)"
            )
            print(f"  = {share:.2%} of a {args.first_token_ms:.0f} ms first token (goal < 1%)")
            statuses = {s.name: s.status for s in sample.sections}
            print(f"  sections: {statuses}")
            write_results(
                "compose",
                {
                    "reads": read_results,
                    "compose": compose,
                    "first_token_ms": args.first_token_ms,
                    "compose_share_of_first_token": share,
                    "store": {
                        "messages": 10_000,
                        "memories": 5_000,
                        "reminders": 500,
                        "history_window": 200,
                    },
                },
            )

    run(body)


if __name__ == "__main__":
    main()
