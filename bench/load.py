"""Load: the daemon over HTTP at 50, 200 and 500 continuums, all running turns at once.

The real daemon runs as a child process, talking to the local Messages API in a second
child process (with a configured time to first token), so the simulated model's work is
not counted as the daemon's. For each level: turns per second, latency percentiles,
sections left out or served stale (goal ≤ 0.1%), errors (goal: none, no full mailboxes),
the daemon's CPU per turn and its marginal memory per continuum.

    .venv/bin/python -m bench.load [--levels 50,200,500] [--turns 4] [--ttft-ms 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.streams.buffered import BufferedByteReceiveStream

from bench._common import run, summary, write_results
from bench._model_server import model_server

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc")


async def one_turn(
    client: httpx2.AsyncClient, continuum: str, text: str
) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    done: dict[str, Any] = {}
    async with client.stream(
        "POST", f"/v1/continuums/{continuum}/turns", json={"message": text}
    ) as response:
        if response.status_code != 200:
            return time.perf_counter() - started, {"error": response.status_code}
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and name in ("turn.completed", "error"):
                done = {name: json.loads(line[6:])}
    return time.perf_counter() - started, done


async def level(url: str, continuums: int, turns: int) -> dict[str, Any]:
    """One fresh daemon, `continuums` conversations of `turns` turns each, all at once."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        (data / "frontmind.toml").write_text("[turns]\nmax_queued = 4\n")
        command = [sys.executable, "-m", "frontmind", "serve", "--port", "0"]
        command += ["--data-dir", str(data)]
        env = {**os.environ, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "bench"}
        process = await anyio.open_process(command, cwd=ROOT, env=env)
        assert process.stdout is not None
        async with process:
            with anyio.fail_after(30):
                line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 200)
            limits = httpx2.Limits(max_connections=continuums * 2)
            async with httpx2.AsyncClient(
                base_url=line.decode(), timeout=120, limits=limits
            ) as client:
                await one_turn(client, "warmup", "hello")
                rss_before, cpu_before = rss_kib(process.pid), cpu_seconds(process.pid)
                totals: list[float] = []
                composes: list[float] = []
                errors: list[object] = []

                async def conversation(index: int) -> None:
                    for turn in range(turns):
                        seconds, done = await one_turn(
                            client, f"load-{index}", f"message {turn} from user {index}"
                        )
                        if "turn.completed" in done:
                            totals.append(seconds)
                            composes.append(done["turn.completed"]["timings_ms"]["compose"] / 1000)
                        else:
                            errors.append(done)

                started = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for index in range(continuums):
                        tg.start_soon(conversation, index)
                wall = time.perf_counter() - started
                rss_after, cpu_after = rss_kib(process.pid), cpu_seconds(process.pid)
                sections: dict[str, int] = {}
                for index in range(continuums):
                    records = (await client.get(f"/v1/continuums/load-{index}/turns")).json()
                    for record in records["turns"]:
                        for section in record["sections"]:
                            sections[section["status"]] = sections.get(section["status"], 0) + 1
            process.terminate()
            await process.wait()
    count = len(totals)
    left_out = sum(n for status, n in sections.items() if status in ("timeout", "failed"))
    stale = sections.get("stale", 0)
    all_sections = max(sum(sections.values()), 1)
    total, compose = summary(totals), summary(composes)
    result = {
        "continuums": continuums,
        "turns_completed": count,
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": wall,
        "turns_per_s": count / wall,
        "compose": compose,
        "total": total,
        "section_statuses": sections,
        "sections_left_out_or_stale_share": (left_out + stale) / all_sections,
        "daemon_cpu_ms_per_turn": (cpu_after - cpu_before) * 1000 / max(count, 1),
        "rss_kib_before": rss_before,
        "rss_kib_after": rss_after,
        "rss_kib_per_continuum": (rss_after - rss_before) / continuums,
    }
    print(
        f"{continuums:>4} continuums: {count} turns in {wall:5.1f} s = "
        f"{count / wall:6.1f} turns/s; errors {len(errors)}; "
        f"total p50 {total['median_us'] / 1000:6.1f} ms p90 {total['p90_us'] / 1000:6.1f} ms "
        f"p99 {total['p99_us'] / 1000:6.1f} ms; compose p50 {compose['median_us'] / 1000:.2f} ms "
        f"p99 {compose['p99_us'] / 1000:.2f} ms"
    )
    print(
        f"      sections left out {left_out}, stale {stale} of {all_sections} "
        f"({result['sections_left_out_or_stale_share']:.2%}, goal ≤ 0.1%); daemon CPU "
        f"{result['daemon_cpu_ms_per_turn']:.1f} ms/turn; "
        f"{result['rss_kib_per_continuum']:.0f} KiB per continuum"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--levels", default="50,200,500")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    args = parser.parse_args()

    async def body() -> None:
        levels = [int(n) for n in args.levels.split(",")]
        print(f"{args.turns} turns per continuum, time to first token {args.ttft_ms:.0f} ms")
        results = []
        async with model_server(args.ttft_ms, 400) as (url, _):
            for continuums in levels:
                results.append(await level(url, continuums, args.turns))
        write_results(
            "load",
            {"ttft_ms": args.ttft_ms, "turns_per_continuum": args.turns, "levels": results},
        )
        failed = sum(r["errors"] for r in results)
        if failed:
            raise SystemExit(f"{failed} turns failed")

    run(body)


if __name__ == "__main__":
    main()
