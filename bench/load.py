"""Load: the daemon over HTTP, 50 continuums each running 10 turns, all at once.

The real daemon runs as a child process in offline mode (the local Messages API with a
configured time to first token). Reports turns per second, p50/p99 compose and total
latency, errors (must be zero), and the daemon's resident memory per continuum.

    .venv/bin/python -m bench.load [--continuums 50] [--turns 10] [--ttft-ms 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.streams.buffered import BufferedByteReceiveStream

from bench._common import run, summary, write_results

ROOT = Path(__file__).resolve().parent.parent


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--continuums", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    args = parser.parse_args()

    async def body() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            (data / "frontmind.toml").write_text(
                f"[offline]\ntime_to_first_token_s = {args.ttft_ms / 1000}\n"
                "tokens_per_second = 400\n[turns]\nmax_queued = 4\n"
            )
            command = [
                sys.executable,
                "-m",
                "frontmind",
                "serve",
                "--offline",
                "--port",
                "0",
                "--data-dir",
                str(data),
            ]
            process = await anyio.open_process(command, cwd=ROOT)
            assert process.stdout is not None
            async with process:
                with anyio.fail_after(30):
                    url = (
                        await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 200)
                    ).decode()
                limits = httpx2.Limits(max_connections=args.continuums * 2)
                async with httpx2.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
                    await one_turn(client, "warmup", "hello")
                    rss_before = rss_kib(process.pid)
                    totals: list[float] = []
                    composes: list[float] = []
                    errors: list[object] = []

                    async def conversation(index: int) -> None:
                        for turn in range(args.turns):
                            seconds, done = await one_turn(
                                client, f"load-{index}", f"message {turn} from user {index}"
                            )
                            if "turn.completed" in done:
                                totals.append(seconds)
                                composes.append(
                                    done["turn.completed"]["timings_ms"]["compose"] / 1000
                                )
                            else:
                                errors.append(done)

                    started = time.perf_counter()
                    async with anyio.create_task_group() as tg:
                        for index in range(args.continuums):
                            tg.start_soon(conversation, index)
                    wall = time.perf_counter() - started
                    rss_after = rss_kib(process.pid)
                    sections: dict[str, int] = {}
                    for index in range(args.continuums):
                        records = (await client.get(f"/v1/continuums/load-{index}/turns")).json()
                        for record in records["turns"]:
                            for section in record["sections"]:
                                sections[section["status"]] = sections.get(section["status"], 0) + 1
                process.terminate()
                await process.wait()
        count = len(totals)
        per_continuum = (rss_after - rss_before) / args.continuums
        total, compose = summary(totals), summary(composes)
        print(
            f"{args.continuums} continuums x {args.turns} turns, time to first token "
            f"{args.ttft_ms:.0f} ms"
        )
        print(f"  turns completed   {count} in {wall:.1f} s = {count / wall:.1f} turns/s")
        print(f"  errors            {len(errors)}")
        print(
            f"  compose           p50 {compose['median_us'] / 1000:.2f} ms  "
            f"p99 {compose['p99_us'] / 1000:.2f} ms"
        )
        print(
            f"  total (client)    p50 {total['median_us'] / 1000:.1f} ms  "
            f"p99 {total['p99_us'] / 1000:.1f} ms"
        )
        print(f"  section statuses  {sections}")
        print(
            f"  daemon RSS        {rss_before / 1024:.1f} MiB before, {rss_after / 1024:.1f} MiB "
            f"after: {per_continuum:.0f} KiB per continuum"
        )
        write_results(
            "load",
            {
                "continuums": args.continuums,
                "turns_per_continuum": args.turns,
                "ttft_ms": args.ttft_ms,
                "turns_completed": count,
                "errors": len(errors),
                "error_samples": errors[:5],
                "wall_s": wall,
                "turns_per_s": count / wall,
                "compose": compose,
                "total": total,
                "rss_kib_before": rss_before,
                "rss_kib_after": rss_after,
                "rss_kib_per_continuum": per_continuum,
                "section_statuses": sections,
            },
        )
        if errors:
            raise SystemExit(f"{len(errors)} turns failed: {errors[:3]}")

    run(body)


if __name__ == "__main__":
    main()
