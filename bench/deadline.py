"""Deadline: one trinket that never answers in time, among all the built-ins.

Two kinds of bad trinket, each registered in the notification center beside the
built-ins: one that takes four deadlines per render (the composer waits out the deadline
every turn, and the trinket skips renders whose turn has moved on), and one that never
returns at all (its mailbox fills, after which it fails at once). Goal: over at least
1,000 compositions each, the compose time stays within the deadline plus 3 ms at p99.
The deadline defaults to 50 ms so that 2 × 1,000 compositions fit in two minutes.

Reported beside each p99: the compositions that waited out the deadline (the bad
section's slot timed out rather than failing at once). For the slow trinket that is
every composition; for the one that never returns, only those before its mailbox
filled, so its overall p99 says little about the deadline itself. Full garbage
collections that started inside a composition are counted (the policy is the daemon's,
`[runtime] gc = "idle"`, unless `--gc python`).

The baseline, in the same run: after each composition with the slow trinket, a bare
`asyncio.sleep(deadline)` on the same loop. How late that wakes up is the machine's
share of the overshoot (a process not scheduled in time); the rest is Frontmind's.

    .venv/bin/python -m bench.deadline [--turns 1000] [--deadline-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from actors import ComposerSettings, Trinket, Turn
from bench._common import loaded, run, summary, write_results
from frontmind import Config, Frontmind
from frontmind._frontmind import NoModel
from frontmind.config import CustomTrinket, RuntimeConfig, ServerConfig

__all__ = ["NeverAnswers", "Sluggish"]


class Sluggish(Trinket):
    """Renders, but `delay` seconds late (the script passes four deadlines).

    The delay comes through the trinket's options: the runtime imports this class from
    `bench.deadline`, a different module object from the script run as `__main__`, so
    a class attribute set by the script would never reach it.
    """

    def __init__(self, delay: float = 1.0) -> None:
        self.delay = delay

    async def render(self, turn: Turn) -> str:
        await anyio.sleep(self.delay)
        return "late news"


class NeverAnswers(Trinket):
    async def render(self, turn: Turn) -> str:
        await anyio.sleep_forever()
        return ""


def _trinket_class(kind: type) -> str:
    return f"bench.deadline:{kind.__name__}"


class _FullCollections:
    """Full collections that start while `inside` (a composition is being timed)."""

    def __init__(self) -> None:
        self.inside = False
        self.count = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if self.inside and phase == "start" and info["generation"] == 2:
            self.count += 1


async def _variant(kind: type, turns: int, deadline_ms: float, policy: str) -> dict[str, object]:
    options: dict[str, str | int | float | bool] = {}
    if kind is Sluggish:
        options["delay"] = 4 * deadline_ms / 1000
    config = Config(
        composer=ComposerSettings(deadline_ms=deadline_ms),
        server=ServerConfig(grace_seconds=1),  # the hanging trinket is cancelled at exit
        runtime=RuntimeConfig(gc="idle" if policy == "idle" else "python"),
        trinket=(
            CustomTrinket(
                name="bad_news",
                use=_trinket_class(kind),
                placement="notification",
                order=35,
                options=options,
            ),
        ),
    )
    samples: list[float] = []
    sleeps: list[float] = []  # the baseline: a bare sleep of the deadline, how long it took
    waited: list[float] = []  # the compositions whose bad section timed out
    statuses: dict[str, int] = {}
    full = _FullCollections()
    gc.callbacks.append(full)
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Frontmind.open(Path(tmp), config, model=NoModel()) as fm,
            loaded(fm, "bench"),
        ):
            for i in range(turns):
                full.inside = True
                started = time.perf_counter()
                composed = await fm.compose("bench", f"turn {i}")
                elapsed = time.perf_counter() - started
                full.inside = False
                samples.append(elapsed)
                section = next(s for s in composed.sections if s.name == "bad_news")
                if section.elapsed_ms >= 0.9 * deadline_ms:  # timed out, not failed at once
                    waited.append(elapsed)
                statuses[section.status] = statuses.get(section.status, 0) + 1
                if kind is Sluggish:
                    started = time.perf_counter()
                    await asyncio.sleep(deadline_ms / 1000)
                    sleeps.append(time.perf_counter() - started)
    gc.callbacks.remove(full)
    result = summary(samples)
    over = result["p99_us"] / 1000 - deadline_ms
    timed = summary(waited) if waited else None
    waited_over = timed["p99_us"] / 1000 - deadline_ms if timed else None
    print(
        f"{kind.__name__:<13} median {result['median_us'] / 1000:7.1f} ms  "
        f"p99 {result['p99_us'] / 1000:7.1f} ms  p99 - deadline {over:+6.2f} ms (goal ≤ +3)  "
        f"statuses {statuses}"
    )
    if timed is not None:
        print(
            f"{'':<13} the {len(waited)} that waited out the deadline: p99 - deadline "
            f"{waited_over:+6.2f} ms; full collections during compositions: {full.count}"
        )
    baseline = summary(sleeps) if sleeps else None
    sleep_over = baseline["p99_us"] / 1000 - deadline_ms if baseline else None
    if baseline is not None:
        print(
            f"{'':<13} baseline: a bare sleep of the deadline on the same loop, "
            f"p99 - deadline {sleep_over:+6.2f} ms (the machine's share)"
        )
    return {
        "sleep_baseline": baseline,
        "sleep_p99_over_deadline_ms": sleep_over,
        "compose": result,
        "p99_over_deadline_ms": over,
        "waited": timed,
        "waited_p99_over_deadline_ms": waited_over,
        "full_collections": full.count,
        "statuses": statuses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--deadline-ms", type=float, default=50.0)
    parser.add_argument("--gc", choices=("idle", "python"), default="idle")
    args = parser.parse_args()

    async def body() -> None:
        print(
            f"deadline {args.deadline_ms:.0f} ms, {args.turns} compositions each, "
            f"goal: p99 within deadline + 3 ms; gc policy {args.gc!r}"
        )
        results = {
            kind.__name__: await _variant(kind, args.turns, args.deadline_ms, args.gc)
            for kind in (Sluggish, NeverAnswers)
        }
        write_results(
            "deadline", {"deadline_ms": args.deadline_ms, "gc_policy": args.gc, "variants": results}
        )

    run(body)


if __name__ == "__main__":
    main()
