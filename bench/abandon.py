"""Abandoned turns: SSE clients that disconnect mid-stream, and the daemon's memory before
and after them (goal: RSS back within 10 MB of its level before, once they are cancelled).

The real daemon runs as a child process against the local Messages API in a second child
process, replying slowly enough (`--tokens-per-second`) that every turn is still
streaming when its client leaves: each client reads up to the turn's first text and
disconnects. `--turns` turns (1,000) are abandoned over `--continuums` continuums, each
continuum's one after another, all continuums at once (`--concurrency` at most). The
continuums are loaded first (one completed and one abandoned turn each, so that their
actors, pools and caches exist before the measure); the figure is then what the
abandoned turns themselves leave behind. The daemon's memory is read from /proc (VmRSS,
and RssAnon: heap without the database's mapped pages) once /metrics shows every turn
cancelled and no slot held.

`--memtrace` runs the daemon under bench/_memtrace.py (tracemalloc) and prints the
growth by file and line (its RSS then includes tracemalloc's own bookkeeping).

    .venv/bin/python -m bench.abandon [--turns 1000] [--continuums 100]
        [--concurrency 100] [--tokens-per-second 20] [--memtrace]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from prometheus_client.parser import text_string_to_metric_families

from bench._common import run, write_results
from bench._model_server import model_server
from bench.load import KEEPALIVE_S, daemon, memtrace_snapshot, raise_file_limit, rss_anon_kib

GOAL_MIB = 10.0


def vm_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc")


async def metric(client: httpx2.AsyncClient, name: str, labels: dict[str, str]) -> float:
    text = (await client.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def abandon(client: httpx2.AsyncClient, continuum: str, text: str) -> str:
    """A turn left at its first text: "streaming" if it got that far, else how it ended
    ("HTTP 429", or the last event's name)."""
    async with client.stream(
        "POST", f"/v1/continuums/{continuum}/turns", json={"message": text}
    ) as response:
        if response.status_code != 200:
            return f"HTTP {response.status_code}"
        name = "no event"
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
                if name == "text.delta":
                    return "streaming"  # leaving the block closes the connection mid-stream
    return name


async def complete(client: httpx2.AsyncClient, continuum: str) -> None:
    async with client.stream(
        "POST", f"/v1/continuums/{continuum}/turns", json={"message": "hello"}
    ) as response:
        await response.aread()


async def settled(client: httpx2.AsyncClient, cancelled: float, limit: float = 120) -> float:
    """Until /metrics counts `cancelled` cancelled turns and no turn holds a slot or
    waits; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        done = await metric(client, "frontmind_turns_total", {"outcome": "cancelled"})
        active = await metric(client, "frontmind_turns_active", {})
        waiting = await metric(client, "frontmind_turn_queue_depth", {})
        if done >= cancelled and not active and not waiting:
            return time.monotonic() - started
        await anyio.sleep(0.2)
    raise SystemExit(f"the daemon did not settle in {limit:.0f} s")


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    traced: dict[str, Any] | None = None
    async with model_server(args.ttft_ms, args.tokens_per_second) as (url, _):
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            trace = data / "memtrace.json" if args.memtrace else None
            server = f"max_connections = {args.concurrency + 100}\n"  # all of them reach it
            async with daemon(url, data, memtrace=trace, server=server) as (process, base_url):
                limits = httpx2.Limits(
                    max_connections=args.concurrency + 4, keepalive_expiry=KEEPALIVE_S
                )
                async with httpx2.AsyncClient(
                    base_url=base_url, timeout=120, limits=limits
                ) as client:
                    loaded = [f"gone-{i}" for i in range(args.continuums)]

                    async def batch(names: list[str], rounds: int) -> dict[str, int]:
                        """`rounds` abandoned turns in each continuum, one after another
                        (all continuums at once, `--concurrency` at most)."""
                        ended: dict[str, int] = {}
                        limiter = anyio.Semaphore(args.concurrency)

                        async def one(continuum: str) -> None:
                            async with limiter:
                                for i in range(rounds):
                                    text = f"turn {i}, to be left mid-stream"
                                    how = await abandon(client, continuum, text)
                                    ended[how] = ended.get(how, 0) + 1

                        async with anyio.create_task_group() as tg:
                            for continuum in names:
                                tg.start_soon(one, continuum)
                        return ended

                    # Loaded first: each continuum's lane, one completed turn and one
                    # abandoned, so the measure holds what the abandoned turns leave.
                    for start in range(0, len(loaded), args.concurrency):
                        async with anyio.create_task_group() as tg:
                            for name in loaded[start : start + args.concurrency]:
                                tg.start_soon(complete, client, name)
                    warm = await batch(loaded, 1)
                    await settled(client, warm.get("streaming", 0))
                    before = vm_rss_kib(process.pid), rss_anon_kib(process.pid)
                    if trace is not None:
                        await memtrace_snapshot(trace)
                    started = time.perf_counter()
                    if args.fresh:  # one turn each in continuums new to the daemon
                        fresh = [f"new-{i}" for i in range(args.turns)]
                        ended = await batch(fresh, 1)
                    else:
                        ended = await batch(loaded, args.turns // len(loaded))
                    wall = time.perf_counter() - started
                    left = warm.get("streaming", 0) + ended.get("streaming", 0)
                    settle_s = await settled(client, left)
                    after = vm_rss_kib(process.pid), rss_anon_kib(process.pid)
                    if trace is not None:
                        await memtrace_snapshot(trace)
                        traced = json.loads(trace.read_text())
    grown = (after[0] - before[0]) / 1024
    print(
        f"{sum(ended.values())} turns abandoned over "
        f"{args.turns if args.fresh else args.continuums} continuums in "
        f"{wall:.1f} s ({ended}: 'streaming' were left mid-stream), every one cancelled "
        f"{settle_s:.1f} s later"
    )
    print(
        f"daemon VmRSS {before[0] / 1024:.1f} → {after[0] / 1024:.1f} MiB ({grown:+.1f} MiB, "
        f"goal ≤ {GOAL_MIB:g}); RssAnon {before[1] / 1024:.1f} → {after[1] / 1024:.1f} MiB "
        f"({(after[1] - before[1]) / 1024:+.1f})"
    )
    if traced is not None:
        print(f"tracemalloc: {traced['total_kib']:.0f} KiB grown; by line:")
        for row in traced["top"][:25]:
            print(f"  {row['kib']:9.1f} KiB {row['count']:8d} blocks  {row['where']}")
    return {
        "turns": args.turns,
        "continuums": args.turns if args.fresh else args.continuums,
        "fresh": args.fresh,
        "ended": ended,
        "vm_rss_kib_before": before[0],
        "vm_rss_kib_after": after[0],
        "rss_anon_kib_before": before[1],
        "rss_anon_kib_after": after[1],
        "grown_mib": grown,
        "goal_met": grown <= GOAL_MIB,
        "traced": traced,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--continuums", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--tokens-per-second", type=float, default=20.0)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="abandon one turn in each of --turns new continuums (their lanes are new)",
    )
    parser.add_argument("--memtrace", action="store_true", help="growth by line (tracemalloc)")
    args = parser.parse_args()
    raise_file_limit()

    async def body() -> None:
        result = await measure(args)
        if not args.memtrace:
            write_results("abandon", result)
        if not result["goal_met"]:
            raise SystemExit(f"RSS grew {result['grown_mib']:.1f} MiB (goal ≤ {GOAL_MIB:g})")

    run(body)


if __name__ == "__main__":
    main()
