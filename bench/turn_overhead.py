"""Turn overhead: a whole Frontmind turn beside a bare SDK stream of the same request.

The local Messages API runs in its own process (a configured time to first token), so
neither side is charged for the simulated model's work. The continuum starts with 400
turns of history. Each round asks Frontmind for the request its next turn would send,
streams exactly that request through a bare `AsyncAnthropic().messages.stream`, and
runs the turn through Frontmind, in alternating order: the difference of each pair is
Frontmind's own overhead (compose, layout, the commit, the events), measured under the
same conditions. Also reported: CPU per turn on each side (this process only: the model
server is elsewhere) and full (generation 2) garbage collections during each.

Goals: whole turn above the bare stream, median ≤ 3 ms and p99 ≤ 15 ms; CPU per turn
≤ 1.15× the bare call's; no full collections on the turn path.

    .venv/bin/python -m bench.turn_overhead [--turns 200] [--history 400] [--ttft-ms 150]
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import anthropic
import msgspec

from actors import AnthropicModel, TurnCompleted
from bench._common import run, summary, write_results
from bench._model_server import model_server
from bench._store import sentence
from frontmind import Config, Frontmind
from frontmind._startup import freeze_startup_objects
from storage import (
    DEFAULT_USER,
    Message,
    SQLiteStorage,
    TextBlock,
    TurnRecord,
    TurnUsage,
    TurnWrite,
)

CONTINUUM = "bench"


async def _history(path: Path, turns: int) -> None:
    rng = random.Random(5)
    now = time.time() - turns * 60
    async with await SQLiteStorage.open(path) as storage:
        for i in range(turns):
            now += 60
            user = Message("user", (TextBlock(sentence(rng, 14)),))
            reply = Message("assistant", (TextBlock(sentence(rng, 40)),))
            record = TurnRecord(
                f"h{i}",
                CONTINUUM,
                "completed",
                now,
                now + 1,
                "bench",
                user_text=user.text(),
                usage=TurnUsage(),
            )
            await storage.commit_turn(DEFAULT_USER, TurnWrite(record, (user, reply)))


class _FullCollections:
    """Counts generation-2 collections while `active`."""

    def __init__(self) -> None:
        self.active = False
        self.count = 0
        gc.callbacks.append(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if self.active and phase == "start" and info["generation"] == 2:
            self.count += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--history", type=int, default=400)
    parser.add_argument("--ttft-ms", type=float, default=150.0)
    args = parser.parse_args()

    async def body() -> None:
        frontmind: list[float] = []
        bare: list[float] = []
        cpu_fm: list[float] = []
        cpu_bare: list[float] = []
        full = {"frontmind": _FullCollections(), "bare": _FullCollections()}
        async with model_server(args.ttft_ms, 2000) as (url, _):
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp)
                await _history(data / "frontmind.db", args.history)
                model = AnthropicModel(api_key="bench", base_url=url, max_retries=0, timeout=30)
                client = anthropic.AsyncAnthropic(api_key="bench", base_url=url, max_retries=0)
                async with Frontmind.open(data, Config(), model=model) as fm:
                    freeze_startup_objects()  # as the daemon does once it is up

                    async def run_bare(params: dict[str, Any]) -> None:
                        async with client.messages.stream(**params) as stream:
                            async for _ in stream:
                                pass
                            await stream.get_final_message()

                    async def run_frontmind(text: str) -> None:
                        completed = False
                        async for event in fm.turn(CONTINUUM, text):
                            completed = completed or isinstance(event, TurnCompleted)
                        assert completed, "the turn did not complete"

                    for i in range(args.turns + 5):
                        text = f"Turn {i}: how is the work going?"
                        request = await fm.context(CONTINUUM, text)
                        params = msgspec.json.decode(msgspec.json.encode(request))
                        sides = [("bare", run_bare, params), ("frontmind", run_frontmind, text)]
                        if i % 2:
                            sides.reverse()
                        for name, fn, arg in sides:
                            counter = full[name]
                            counter.active = i >= 5
                            cpu, started = time.process_time(), time.perf_counter()
                            await fn(arg)  # type: ignore[operator]
                            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                            counter.active = False
                            if i >= 5:  # warm-up: connections, first compilation
                                (frontmind if name == "frontmind" else bare).append(wall)
                                (cpu_fm if name == "frontmind" else cpu_bare).append(cpu)
                await model.aclose()
                await client.close()
        overhead = [f - b for f, b in zip(frontmind, bare, strict=True)]
        results: dict[str, Any] = {
            "frontmind_turn": summary(frontmind),
            "bare_sdk_stream": summary(bare),
            "overhead": summary(overhead),
            "overhead_mean_ms": sum(overhead) / len(overhead) * 1000,
            "cpu_ms_per_turn": {
                "frontmind": sum(cpu_fm) / len(cpu_fm) * 1000,
                "bare": sum(cpu_bare) / len(cpu_bare) * 1000,
            },
            "full_collections": {name: c.count for name, c in full.items()},
        }
        ratio = sum(cpu_fm) / max(sum(cpu_bare), 1e-9)
        results["cpu_ratio"] = ratio
        print(
            f"time to first token {args.ttft_ms:.0f} ms, {args.history} turns of history, "
            f"{len(frontmind)} interleaved pairs"
        )
        for name, label in (("frontmind_turn", "Frontmind turn"), ("bare_sdk_stream", "bare SDK")):
            r = results[name]
            print(
                f"  {label:<24} median {r['median_us'] / 1000:7.2f} ms  "
                f"p99 {r['p99_us'] / 1000:7.2f} ms"
            )
        o = results["overhead"]
        print(
            f"  overhead (pairwise)      median {o['median_us'] / 1000:7.2f} ms (goal ≤ 3)  "
            f"p99 {o['p99_us'] / 1000:7.2f} ms (goal ≤ 15)"
        )
        cpu = results["cpu_ms_per_turn"]
        print(
            f"  CPU per turn             {cpu['frontmind']:.2f} ms vs {cpu['bare']:.2f} ms = "
            f"{ratio:.2f}x (goal ≤ 1.15x)"
        )
        print(
            f"  full collections         Frontmind {full['frontmind'].count}, bare "
            f"{full['bare'].count} (goal 0 on the turn path)"
        )
        write_results(
            "turn_overhead", {"ttft_ms": args.ttft_ms, "history_turns": args.history, **results}
        )

    run(body)


if __name__ == "__main__":
    main()
