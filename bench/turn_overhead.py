"""Turn overhead: a whole Frontmind turn beside a bare SDK stream of the same request.

The local Messages API runs in its own process (a configured time to first token), so
neither side is charged for the simulated model's work. The continuum starts with 400
turns of history. Each round asks Frontmind for the request its next turn would send,
streams exactly that request through a bare `AsyncAnthropic().messages.stream`, and
runs the turn through Frontmind, in alternating order: the difference of each pair is
Frontmind's own overhead (compose, layout, the commit, the events), measured under the
same conditions. Each round also streams the same request bare a second time (the
control, its place in the round rotating with the others'): the difference between the
two bare calls is what two identical calls differ by on this machine, the harness's own
spread, reported beside the overhead so that a tail above the goal can be told apart from
the machine's. Also reported: CPU per turn on each side (this process only: the model
server is elsewhere), and the garbage collections of each generation that started during
each side and in the pauses between them (a gc callback attributes every collection to
the phase it started in).

The GC policy is the daemon's (`[runtime] gc = "idle"`, or `--gc python` for CPython's
own schedule). After every side the script pauses a little longer than the policy's
quiet time, outside both measurements, as a user pauses between turns: that is where
the daemon runs its full collections, and any that lands inside a side is counted there.

Goals: whole turn above the bare stream, median ≤ 3 ms and p99 ≤ 15 ms (the p99 of the
pairwise differences, each pair run back to back in alternating order); CPU per turn
≤ 1.15× the bare call's; no full collections on the turn path. The control's p99 (bare
again minus bare) is no goal: it is the resolution the p99 is measured at.

    .venv/bin/python -m bench.turn_overhead [--turns 200] [--history 400] [--ttft-ms 150]
        [--gc idle|python]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import anthropic
import anyio
import msgspec

from actors import AnthropicModel, TurnCompleted
from bench._common import run, summary, write_results
from bench._model_server import model_server
from bench._store import sentence
from frontmind import Config, Frontmind
from frontmind._gc import SETTLE_S
from frontmind.config import RuntimeConfig
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
                moment(now),
                moment(now + 1),
                "bench",
                user_text=user.text(),
                usage=TurnUsage(),
            )
            await storage.commit_turn(DEFAULT_USER, TurnWrite(record, (user, reply)))


PHASES = ("frontmind", "bare", "control", "between")


class _Collections:
    """Every collection by the phase it started in and its generation, with the time
    the full ones took. `phase` is set by the script; None: not counted (warm-up)."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.counts = {p: [0, 0, 0] for p in PHASES}
        self.full_ms = dict.fromkeys(PHASES, 0.0)
        self._started: tuple[str, float] | None = None

    def observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            if self.phase is not None:
                self.counts[self.phase][info["generation"]] += 1
                if info["generation"] == 2:
                    self._started = (self.phase, time.perf_counter())
        elif self._started is not None:
            where, started = self._started
            self.full_ms[where] += (time.perf_counter() - started) * 1000
            self._started = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--history", type=int, default=400)
    parser.add_argument("--ttft-ms", type=float, default=150.0)
    parser.add_argument("--gc", choices=("idle", "python"), default="idle")
    args = parser.parse_args()
    pause = SETTLE_S + 0.02  # after each side: the policy's quiet time, and a little

    async def body() -> None:
        load_before = os.getloadavg()[0]  # the machine's, reported with the figures
        frontmind: list[float] = []
        bare: list[float] = []
        control: list[float] = []  # the same request bare again, in the same round
        cpu_fm: list[float] = []
        cpu_bare: list[float] = []
        collections = _Collections()
        gc.callbacks.append(collections.observe)
        config = Config(runtime=RuntimeConfig(gc=args.gc))
        async with model_server(args.ttft_ms, 2000) as (url, _):
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp)
                await _history(data / "frontmind.db", args.history)
                model = AnthropicModel(api_key="bench", base_url=url, max_retries=0, timeout=30)
                client = anthropic.AsyncAnthropic(api_key="bench", base_url=url, max_retries=0)
                async with Frontmind.open(data, config, model=model) as fm:

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
                        measured = i >= 5  # warm-up: connections, first compilation
                        text = f"Turn {i}: how is the work going?"
                        request = await fm.context(CONTINUUM, text)
                        params = msgspec.json.decode(msgspec.json.encode(request))
                        # Frontmind and the bare call in alternating order, the control
                        # taking each place in the round in turn (first, between, last).
                        sides = [("bare", run_bare, params), ("frontmind", run_frontmind, text)]
                        if i % 2:
                            sides.reverse()
                        sides.insert(i // 2 % 3, ("control", run_bare, params))
                        for name, fn, arg in sides:
                            collections.phase = name if measured else None
                            cpu, started = time.process_time(), time.perf_counter()
                            await fn(arg)  # type: ignore[operator]
                            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                            collections.phase = "between" if measured else None
                            if measured and name == "control":
                                control.append(wall)
                            elif measured:
                                (frontmind if name == "frontmind" else bare).append(wall)
                                (cpu_fm if name == "frontmind" else cpu_bare).append(cpu)
                            await anyio.sleep(pause)
                        collections.phase = None
                    idle_collections = fm._collector.collections if fm._collector else 0
                await model.aclose()
                await client.close()
        # Each pair ran back to back under the same conditions: its difference is the
        # overhead of that turn; the p99 is taken over those differences, never as a
        # difference of two separately sorted tails.
        overhead = [f - b for f, b in zip(frontmind, bare, strict=True)]
        spread = [c - b for c, b in zip(control, bare, strict=True)]
        turns = len(frontmind)
        counts = collections.counts
        results: dict[str, Any] = {
            "gc_policy": args.gc,
            "frontmind_turn": summary(frontmind),
            "bare_sdk_stream": summary(bare),
            "overhead": summary(overhead),
            "overhead_max_ms": max(overhead) * 1000,
            "overhead_mean_ms": sum(overhead) / len(overhead) * 1000,
            # Two identical bare calls of the same round: the harness's own spread.
            "control": summary(spread),
            "control_max_ms": max(spread) * 1000,
            "cpu_ms_per_turn": {
                "frontmind": sum(cpu_fm) / len(cpu_fm) * 1000,
                "bare": sum(cpu_bare) / len(cpu_bare) * 1000,
                # The full collections between turns, shared out over the turns.
                "full_collections_between": collections.full_ms["between"] / turns,
            },
            "full_collections": {p: counts[p][2] for p in PHASES},
            "full_collections_ms": collections.full_ms,
            "idle_collections": idle_collections,
            "young_collections_per_turn": {
                p: {"gen0": counts[p][0] / turns, "gen1": counts[p][1] / turns}
                for p in ("frontmind", "bare")
            },
        }
        ratio = sum(cpu_fm) / max(sum(cpu_bare), 1e-9)
        results["cpu_ratio"] = ratio
        results["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
        print(
            f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
            f"time to first token {args.ttft_ms:.0f} ms, {args.history} turns of history, "
            f"{turns} interleaved pairs, gc policy {args.gc!r}"
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
            f"p99 {o['p99_us'] / 1000:7.2f} ms (goal ≤ 15)  "
            f"max {results['overhead_max_ms']:.2f} ms"
        )
        c = results["control"]
        print(
            f"  control (bare − bare)    median {c['median_us'] / 1000:7.2f} ms"
            f"{'':>14}p99 {c['p99_us'] / 1000:7.2f} ms (the harness's own spread)  "
            f"max {results['control_max_ms']:.2f} ms"
        )
        cpu = results["cpu_ms_per_turn"]
        print(
            f"  CPU per turn             {cpu['frontmind']:.2f} ms vs {cpu['bare']:.2f} ms = "
            f"{ratio:.2f}x (goal ≤ 1.15x)"
        )
        full_ms = collections.full_ms
        print(
            f"  full collections         in Frontmind turns {counts['frontmind'][2]} "
            f"({full_ms['frontmind']:.0f} ms), in bare calls {counts['bare'][2]} "
            f"({full_ms['bare']:.0f} ms) (goal 0 on the turn path); between turns "
            f"{counts['between'][2]} ({full_ms['between']:.0f} ms, {idle_collections} by "
            "the idle policy)"
        )
        young = results["young_collections_per_turn"]
        print(
            "  young collections/turn   "
            + ", ".join(
                f"{label} gen0 {young[p]['gen0']:.2f} gen1 {young[p]['gen1']:.2f}"
                for p, label in (("frontmind", "Frontmind"), ("bare", "bare"))
            )
        )
        write_results(
            "turn_overhead", {"ttft_ms": args.ttft_ms, "history_turns": args.history, **results}
        )

    run(body)


if __name__ == "__main__":
    main()
