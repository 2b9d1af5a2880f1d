"""Soak: a year of an agent's life on one machine, compressed. The real daemon (a child
process, SQLite, idle continuums unloaded) runs `--turns` turns over `--continuums`
continuums against the local Messages API (a second child process), `--workers` at a
time, each turn on a continuum picked at random. Every `--every` turns it samples the
daemon's RssAnon (its heap: the database's mapped pages are the OS page cache), the
database's size (file + WAL) and its free pages, the content stored so far, and the bytes
the daemon logged. The report: growth per 1,000 turns after the warm-up (the first
`--warmup` turns, while continuums are first loaded) by least squares: RSS (goal ≤ 0.2
MB per 1,000 turns), database bytes beside the content stored (messages, turn records;
the rest is indexes: it should grow only by what is stored, and free pages stay near
zero: nothing is deleted in a soak), and log bytes
(warnings and errors only, as the daemon runs by default; its access log is off).

A loaded continuum keeps its history window in memory (actors/_history.py: each
message's text and about 25 bytes, a turn about 21 more), and with turns spread over
every continuum most of them stay loaded while their histories grow. So each sample also
counts the history the loaded continuums hold (those with a turn within the idle time and
the unloader's period, by the same measure), and the report gives RSS growth beyond it:
what the daemon keeps that is not the conversations it is holding.

`--minutes M` starts no turn after M minutes (a busy machine may not finish the turns
asked for in the time it has): the report covers the turns that finished.
`--max-loaded N` bounds the continuums the daemon keeps loaded (`[turns] max_loaded`;
250, a quarter of them: the rest reload from storage on their next turn).
`--from-log FILE` reports again from the samples a run printed (one dict a line), for a
run stopped before its end.

    .venv/bin/python -m bench.soak [--turns 100000] [--continuums 1000] [--workers 16]
        [--idle-minutes 0.5] [--max-loaded 250] [--every 1000] [--warmup 10000]
        [--ttft-ms 0] [--minutes M] [--from-log FILE]
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

from bench._common import run, write_results
from bench._model_server import model_server
from bench.load import daemon, rss_anon_kib, timed_turn


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares growth of y per unit of x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def database(data: Path) -> tuple[int, int, int]:
    """The database's bytes (file + WAL), its free pages' bytes, and the bytes of the
    content stored in it (messages' content and text, turn records)."""
    path = data / "frontmind.db"
    size = path.stat().st_size + (data / "frontmind.db-wal").stat().st_size
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
        stored = db.execute(
            "SELECT (SELECT coalesce(sum(length(content) + length(text)), 0) FROM messages)"
            " + (SELECT coalesce(sum(length(record)), 0) FROM turns)"
        ).fetchone()[0]
    return size, free * page, stored


def held_bytes(data: Path, loaded: set[str]) -> int:
    """The bytes the history windows of the `loaded` continuums take in the daemon's
    memory, by actors/_history.py's layout: each message's text and 25 bytes of
    columns, each turn 21 bytes of id (nothing is trimmed in a soak)."""
    path = data / "frontmind.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT continuum_id, sum(length(CAST(text AS BLOB))) + 25 * count(*)"
            " + 21 * count(DISTINCT turn_id) FROM messages GROUP BY continuum_id"
        ).fetchall()
    return sum(int(held) for continuum, held in rows if continuum in loaded)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    samples: list[dict[str, float]] = []
    errors: dict[str, int] = {}
    logged = 0
    with tempfile.TemporaryDirectory(prefix="frontmind-soak-") as scratch:
        data = Path(scratch)
        config = f"idle_minutes = {args.idle_minutes}\nmax_loaded = {args.max_loaded}\n"
        async with (
            model_server(args.ttft_ms, 10_000.0) as (url, _),
            daemon(url, data, config=config) as (process, base),
        ):
            assert process.stderr is not None
            stderr = process.stderr

            async def count_log() -> None:
                nonlocal logged
                async for chunk in stderr:
                    logged += len(chunk)

            done, sample_at = 0, args.every
            # When each continuum's last turn ended: the daemon unloads one idle for
            # `idle_minutes`, checking every quarter of that, and past `max_loaded` the
            # one unused the longest.
            last_turn: dict[str, float] = {}
            unload_after = args.idle_minutes * 60 * (1 + 1 / 8)  # the check's mean delay
            started = time.perf_counter()
            stop_at = started + args.minutes * 60 if args.minutes else float("inf")

            async def worker(client: httpx2.AsyncClient, seed: int, share: int) -> None:
                nonlocal done, sample_at
                rng = random.Random(seed)
                for _ in range(share):
                    if time.perf_counter() > stop_at:
                        return
                    continuum = f"c{rng.randrange(args.continuums)}"
                    text = f"turn {done} in {continuum}: how is the garden doing this week?"
                    ended = await timed_turn(client, continuum, text)
                    if "turn.completed" not in ended:
                        key = str(ended.get("error", ended))[:80]
                        errors[key] = errors.get(key, 0) + 1
                    done += 1
                    last_turn[continuum] = time.monotonic()
                    if done >= sample_at:
                        sample_at += args.every
                        size, free, stored = await anyio.to_thread.run_sync(database, data)
                        now = time.monotonic()
                        recent = sorted(
                            (c for c, at in last_turn.items() if now - at < unload_after),
                            key=last_turn.__getitem__,
                            reverse=True,
                        )  # the bound unloads the one unused the longest first
                        loaded = set(recent[: args.max_loaded or None])
                        held = await anyio.to_thread.run_sync(held_bytes, data, loaded)
                        samples.append(
                            {"turns": done, "rss_kib": rss_anon_kib(process.pid),
                             "db_bytes": size, "free_bytes": free, "log_bytes": logged,
                             "stored_bytes": stored,
                             "loaded": len(loaded), "held_kib": held // 1024,
                             "load_1m": os.getloadavg()[0],
                             "errors": sum(errors.values()),
                             "seconds": round(time.perf_counter() - started, 1)}
                        )  # fmt: skip
                        print(samples[-1], flush=True)

            async with anyio.create_task_group() as logs:
                logs.start_soon(count_log)
                async with (
                    httpx2.AsyncClient(base_url=base, timeout=120) as client,
                    anyio.create_task_group() as tg,
                ):
                    # `--turns` in all: the first `turns % workers` workers one more.
                    share, extra = divmod(args.turns, args.workers)
                    for seed in range(args.workers):
                        tg.start_soon(worker, client, seed, share + (seed < extra))
                logs.cancel_scope.cancel()
    return {**report(args, samples, done), "errors": errors}


def report(args: argparse.Namespace, samples: list[dict[str, float]], done: int) -> dict[str, Any]:
    """The figures per 1,000 turns after the warm-up, from the samples."""
    after = [s for s in samples if s["turns"] > args.warmup]
    held = bool(after) and all("held_kib" in s for s in after)

    def per_1000(key: str) -> float:
        return round(slope([(s["turns"] / 1000, s[key]) for s in after]), 1)

    return {
        "turns": done,
        "continuums": args.continuums,
        "workers": args.workers,
        "idle_minutes": args.idle_minutes,
        "max_loaded": args.max_loaded,
        "warmup_turns": args.warmup,
        "rss_kib_per_1000_turns": per_1000("rss_kib"),
        "rss_goal_kib_per_1000_turns": 204.8,
        # Samples of runs before the held history was counted have none.
        "held_history_kib_per_1000_turns": per_1000("held_kib") if held else None,
        "rss_beyond_held_kib_per_1000_turns": (
            round(per_1000("rss_kib") - per_1000("held_kib"), 1) if held else None
        ),
        "db_bytes_per_1000_turns": per_1000("db_bytes"),
        "stored_bytes_per_1000_turns": per_1000("stored_bytes"),
        "free_bytes_at_end": after[-1]["free_bytes"] if after else None,
        "log_bytes_per_1000_turns": per_1000("log_bytes"),
        "seconds_per_1000_turns": per_1000("seconds"),
        "loadavg": Path("/proc/loadavg").read_text(),
        "cpus": os.cpu_count(),
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--continuums", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--idle-minutes", type=float, default=0.5)
    parser.add_argument("--max-loaded", type=int, default=250)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=10_000)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--minutes", type=float, default=0.0)
    parser.add_argument("--from-log", type=Path, default=None)
    args = parser.parse_args()

    async def go() -> None:
        if args.from_log is not None:
            lines = args.from_log.read_text().splitlines()
            samples = [ast.literal_eval(line) for line in lines if line.startswith("{")]
            # Failed turns by kind are told only at a run's end; a stopped run's are not.
            results = {**report(args, samples, int(samples[-1]["turns"])), "errors": None}
        else:
            results = await soak(args)
        shown = {k: v for k, v in results.items() if k != "samples"}
        for key, value in shown.items():
            print(f"{key}: {value}")
        write_results("soak", results)

    run(go)


if __name__ == "__main__":
    main()
