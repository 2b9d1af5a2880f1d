"""Compose: a whole turn's composition, and storage's per-turn reads, as the store grows.

Three stores: 1,000 messages with 1,000 memories, 10,000 with 5,000, and 100,000 with
50,000 (one continuum, a 200-message history window, 500 reminders). For each: the
storage reads of a turn (median and p99) and every built-in trinket composed under the
composer. Goals: message search p99 ≤ 5 ms at 100k messages, compose (whose memory
relevance search is on every turn's path) p99 ≤ 5 ms at 50k memories, and reads and
compose that do not grow with the store. Also reported: compose just after a write, as
after a turn's commit (every reader's page cache dropped).

Stores are built once and kept in the temporary directory (the largest takes minutes
to build through the storage API); `--rebuild` builds them afresh.

A section measures vector recall (bench/_vectors.py): 50,000 memories with a vector
each by default (`--vectors 50000,500000` adds the largest; `--vectors-only` skips the
stores above).

    .venv/bin/python -m bench.compose [--turns 400] [--first-token-ms 800] [--rebuild]
        [--vectors 50000,500000] [--vectors-only]
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._common import loaded, run, summary, write_results
from bench._store import CONTINUUM, build_store, sentence
from bench._vectors import measure_vectors, vector_store
from frontmind import Config, Frontmind
from frontmind._frontmind import NoModel
from storage import DEFAULT_USER, SCHEMA_VERSION, SQLiteStorage

SIZES = ((1_000, 1_000), (10_000, 5_000), (100_000, 50_000))
CACHE = Path(tempfile.gettempdir()) / "frontmind-bench-stores"
GOAL_MS = 5.0
VECTOR_GOALS_MS = {50_000: 5.0, 500_000: 10.0}  # compose p99 with an embedder


async def _time(fn: Callable[[], Awaitable[object]], rounds: int) -> dict[str, float]:
    for _ in range(20):
        await fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return summary(samples)


async def _store(messages: int, memories: int, rebuild: bool) -> tuple[Path, float]:
    """A built store of this size (cached across runs), and its simulated 'now'."""
    folder = CACHE / f"v{SCHEMA_VERSION}-{messages}-{memories}"
    marker = folder / "now"
    if rebuild or not marker.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        started = time.perf_counter()
        now = await build_store(folder / "frontmind.db", messages=messages, memories=memories)
        marker.write_text(repr(now))
        print(f"  (store built in {time.perf_counter() - started:.0f} s)")
    return folder, float(marker.read_text())


async def _measure(folder: Path, now: float, turns: int) -> dict[str, Any]:
    rng = random.Random(3)
    # User messages of the store's vocabulary, made before the clock starts: making one
    # costs about as much as a read, and is not the runtime's work.
    taken = itertools.cycle([sentence(rng, 14) for _ in range(max(turns, 300) + 40)])

    def query() -> str:
        return next(taken)

    async with await SQLiteStorage.open(folder / "frontmind.db") as storage:
        reads = {
            "history": lambda: storage.history(DEFAULT_USER, CONTINUUM),
            "active_reminders": lambda: storage.active_reminders(DEFAULT_USER),
            "memory_search": lambda: storage.search_memories(DEFAULT_USER, query(), now=now),
            "recent_segments": lambda: storage.recent_segments(DEFAULT_USER, CONTINUUM),
            "message_search": lambda: storage.search_messages(
                DEFAULT_USER, query(), continuum_id=CONTINUUM
            ),
        }
        results: dict[str, Any] = {name: await _time(fn, 300) for name, fn in reads.items()}
    with tempfile.TemporaryDirectory() as tmp:  # Frontmind takes a data dir: a copy
        data = Path(tmp)
        shutil.copy(folder / "frontmind.db", data / "frontmind.db")
        # The store's thousands of closed segments queued their summaries as it was
        # built; a deployment that old would have run them long ago. Without a model
        # here they would fail one by one beside the compositions measured below.
        with sqlite3.connect(data / "frontmind.db") as db:
            db.execute("UPDATE jobs SET state = 'done' WHERE state = 'pending'")
        async with (
            Frontmind.open(data, Config(), model=NoModel(), clock=lambda: now) as fm,
            loaded(fm, CONTINUUM),
        ):
            results["compose"] = await _time(lambda: fm.compose(CONTINUUM, query()), turns)
            sample = await fm.compose(CONTINUUM, query())
            # In a conversation the previous turn's commit comes just before: any write
            # makes every reader connection drop its page cache (SQLite does), so the
            # composition reads cold pages. Reported beside the goal, not for it.
            samples = []
            for _ in range(turns // 4):
                await fm.storage.mark_memories_used(DEFAULT_USER, [1])
                started = time.perf_counter()
                await fm.compose(CONTINUUM, query())
                samples.append(time.perf_counter() - started)
            results["compose_after_write"] = summary(samples)
    results["compose_statuses"] = {s.name: s.status for s in sample.sections}
    return results


async def _vector_section(memories: int, turns: int, rebuild: bool) -> dict[str, Any]:
    """Vector recall (bench/_vectors.py) at this many memories, printed as it ends."""
    print(f"vector recall, {memories:,} memories (384 dimensions), load {_load()}")
    folder, now = await vector_store(CACHE, memories, rebuild)
    result = await measure_vectors(folder, now, turns)
    goal = VECTOR_GOALS_MS.get(memories)
    late = result["loop_late_ms"]
    print(
        f"  nearest k=20 median/p99 {_ms(result['nearest_k20'], 'median_us')} /"
        f"{_ms(result['nearest_k20'], 'p99_us')} ms; compose median/p99"
        f" {_ms(result['compose'], 'median_us')} /{_ms(result['compose'], 'p99_us')} ms"
        + (f" (goal p99 ≤ {goal:.0f} ms)" if goal else "")
        + "\n  1 ms ticker late p99/max (ms): {} recalling, {} composing, {} alone".format(
            *(
                f"{late[k]['p99']:.2f}/{late[k]['max']:.2f}"
                for k in ("recalling", "composing", "idle")
            )
        )
        + " (goal: recall adds ≤ 5 ms)"
        f"\n  recall@10 {result['recall_at_10']:.3f} (goal ≥ 0.95); load {_load()}"
        + (
            ""
            if result["cache_load_s"] is None
            else f"\n  vector cache loaded in {result['cache_load_s']:.2f} s after opening"
        )
    )
    return {**result, "load": _load()}


def _load() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "?"


def _ms(r: dict[str, float], key: str) -> str:
    return f"{r[key] / 1000:7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--first-token-ms", type=float, default=800.0)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument(
        "--vectors",
        default="50000",
        help="memory counts of the vector recall section, comma-separated ('' for none)",
    )
    parser.add_argument("--vectors-only", action="store_true", help="that section alone")
    args = parser.parse_args()

    async def body() -> None:
        stores = []
        for messages, memories in () if args.vectors_only else SIZES:
            print(f"{messages:,} messages, {memories:,} memories")
            folder, now = await _store(messages, memories, args.rebuild)
            result = await _measure(folder, now, args.turns)
            stores.append({"messages": messages, "memories": memories, **result})
        names = ["history", "active_reminders", "recent_segments", "memory_search"]
        names += ["message_search", "compose", "compose_after_write"]
        header = "".join(f"{s['messages']:>12,} msgs" for s in stores)
        if stores:
            print(f"\n{'median / p99 (ms)':<20}{header}")
        for name in names if stores else ():
            cells = "".join(
                f"{_ms(s[name], 'median_us')} /{_ms(s[name], 'p99_us')}" for s in stores
            )
            print(f"{name:<20}{cells}")
        vectors = [
            {"memories": n, **await _vector_section(n, args.turns, args.rebuild)}
            for n in (int(n) for n in args.vectors.split(",") if n)
        ]
        if not stores:
            write_results("compose_vectors", {"vectors": vectors})
            return
        largest = stores[-1]
        print(
            f"\nmessage search at {largest['messages']:,} messages: p99 "
            f"{largest['message_search']['p99_us'] / 1000:.2f} ms (goal ≤ {GOAL_MS:.0f} ms)"
        )
        print(
            f"compose at {largest['memories']:,} memories: p99 "
            f"{largest['compose']['p99_us'] / 1000:.2f} ms (goal ≤ {GOAL_MS:.0f} ms); median "
            f"{largest['compose']['median_us'] / 1000 / args.first_token_ms:.2%} of a "
            f"{args.first_token_ms:.0f} ms first token"
        )
        write_results(
            "compose",
            {
                "first_token_ms": args.first_token_ms,
                "goal_p99_ms": GOAL_MS,
                "stores": stores,
                "vectors": vectors,
            },
        )

    run(body)


if __name__ == "__main__":
    main()
