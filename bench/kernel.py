"""Kernel: broadcast-and-gather to N actors, beside asyncio.gather and sequential awaits.

Each round sends one message to N actors that reply at once and gathers the replies;
the baselines run the same handler coroutines with `asyncio.gather` and one after
another, in the same process and loop. Also: the memory of an idle actor, never sent
anything and idle again after a message.

    .venv/bin/python -m bench.kernel [--rounds 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc
from typing import Any

import msgspec

from bench._common import run, summary, write_results
from runtime import Actor, ActorSystem, scatter_gather


class Ping(msgspec.Struct, frozen=True, tag=True):
    n: int


class Pong(msgspec.Struct, frozen=True, tag=True):
    n: int


class Echo(Actor[Ping, Pong]):
    protocol = Ping
    replies = Pong

    async def handle(self, message: Ping) -> Pong:
        return Pong(message.n)


async def _interleaved(fns: list[Any], rounds: int) -> list[list[float]]:
    """Time each function `rounds` times, taking turns round by round, so that noise
    from a shared machine falls on all of them alike."""
    for _ in range(min(200, rounds)):  # warm up
        for fn in fns:
            await fn()
    samples: list[list[float]] = [[] for _ in fns]
    clock = time.perf_counter
    for _ in range(rounds):
        for fn, out in zip(fns, samples, strict=True):
            start = clock()
            await fn()
            out.append(clock() - start)
    return samples


async def measure(n: int, rounds: int, encoded: bool) -> dict[str, Any]:
    async with ActorSystem(encoded=encoded) as system:
        refs = [system.spawn(Echo, name=f"echo{i}") for i in range(n)]
        handlers = [Echo() for _ in range(n)]
        message = Ping(1)

        async def actors() -> None:
            result = await scatter_gather(refs, message, deadline=1.0)
            assert len(result.outcomes) == n

        async def gathered() -> None:
            await asyncio.gather(*(h.handle(message) for h in handlers))

        async def sequential() -> None:
            for h in handlers:
                await h.handle(message)

        a, g, s = await _interleaved([actors, gathered, sequential], rounds)
    actor, gather, seq = summary(a), summary(g), summary(s)
    return {
        "n": n,
        "mode": "encoded" if encoded else "direct",
        "actors": actor,
        "asyncio_gather": gather,
        "sequential": seq,
        "ratio_median_vs_gather": actor["median_us"] / gather["median_us"],
    }


async def idle_actor_bytes(count: int = 2000, *, warm: bool) -> float:
    """Memory per idle actor: spawned and never sent anything (`warm=False`), or idle
    again after one message each (`warm=True`: the instance has been built, and every
    worker that ran them is parked again; the parked workers are counted in too)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    async with ActorSystem() as system:
        refs = [system.spawn(Echo, name=f"idle{i}", mailbox=16) for i in range(count)]
        if warm:
            for ref in refs:
                await ref.ask(Ping(0))
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
        after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return grown / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3000)
    args = parser.parse_args()

    async def body() -> None:
        rows = []
        print(
            f"{'N':>4} {'mode':<8} {'actors med':>11} {'p99':>8} {'gather med':>11} "
            f"{'p99':>8} {'sequential':>11} {'ratio':>6}"
        )
        for encoded in (False, True):
            for n in (1, 8, 32, 128):
                rounds = args.rounds if n <= 32 else args.rounds // 4
                row = await measure(n, rounds, encoded)
                rows.append(row)
                actors, gather = row["actors"], row["asyncio_gather"]
                print(
                    f"{n:>4} {row['mode']:<8} {actors['median_us']:>9.1f}µs "
                    f"{actors['p99_us']:>6.1f}µs {gather['median_us']:>9.1f}µs "
                    f"{gather['p99_us']:>6.1f}µs "
                    f"{row['sequential']['median_us']:>9.1f}µs "
                    f"{row['ratio_median_vs_gather']:>5.2f}x"
                )
        idle = await idle_actor_bytes(warm=False)
        warm = await idle_actor_bytes(warm=True)
        print(
            f"idle actor: {idle / 1024:.2f} KiB never sent anything, {warm / 1024:.2f} KiB "
            f"idle after a message (goal ≤ 2 KiB)"
        )
        eight = next(r for r in rows if r["n"] == 8 and r["mode"] == "direct")
        print(
            f"N=8 direct: {eight['ratio_median_vs_gather']:.2f}x asyncio.gather "
            f"(goal ≤ 1.0x); p99 {eight['actors']['p99_us']:.1f}µs"
        )
        write_results(
            "kernel", {"rows": rows, "idle_actor_bytes": idle, "idle_actor_bytes_warm": warm}
        )

    run(body)


if __name__ == "__main__":
    main()
