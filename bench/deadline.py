"""Deadline: one trinket that never answers in time, among all the built-ins.

Two kinds of bad trinket, each registered in the notification center beside the
built-ins: one that takes four deadlines per render (the composer waits out the deadline
every turn, and the trinket skips renders whose turn has moved on), and one that never
returns at all (its mailbox fills, after which it fails at once). Goal: over at least
1,000 compositions each, the compose time stays within the deadline plus 3 ms at p99.
The deadline defaults to 50 ms so that 2 × 1,000 compositions fit in two minutes.

    .venv/bin/python -m bench.deadline [--turns 1000] [--deadline-ms 50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from actors import ComposerSettings, Trinket, Turn
from bench._common import loaded, run, summary, write_results
from frontmind import Config, Frontmind
from frontmind._frontmind import NoModel
from frontmind.config import CustomTrinket, ServerConfig

__all__ = ["NeverAnswers", "Sluggish"]


class Sluggish(Trinket):
    """Renders, but four deadlines too late."""

    delay = 1.0

    async def render(self, turn: Turn) -> str:
        await anyio.sleep(self.delay)
        return "late news"


class NeverAnswers(Trinket):
    async def render(self, turn: Turn) -> str:
        await anyio.sleep_forever()
        return ""


def _trinket_class(kind: type) -> str:
    return f"bench.deadline:{kind.__name__}"


async def _variant(kind: type, turns: int, deadline_ms: float) -> dict[str, object]:
    config = Config(
        composer=ComposerSettings(deadline_ms=deadline_ms),
        server=ServerConfig(grace_seconds=1),  # the hanging trinket is cancelled at exit
        trinket=(
            CustomTrinket(
                name="bad_news", use=_trinket_class(kind), placement="notification", order=35
            ),
        ),
    )
    samples: list[float] = []
    statuses: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Frontmind.open(Path(tmp), config, model=NoModel()) as fm,
            loaded(fm, "bench"),
        ):
            for i in range(turns):
                started = time.perf_counter()
                composed = await fm.compose("bench", f"turn {i}")
                samples.append(time.perf_counter() - started)
                status = next(s.status for s in composed.sections if s.name == "bad_news")
                statuses[status] = statuses.get(status, 0) + 1
    result = summary(samples)
    over = result["p99_us"] / 1000 - deadline_ms
    print(
        f"{kind.__name__:<13} median {result['median_us'] / 1000:7.1f} ms  "
        f"p99 {result['p99_us'] / 1000:7.1f} ms  p99 - deadline {over:+6.2f} ms (goal ≤ +3)  "
        f"statuses {statuses}"
    )
    return {"compose": result, "p99_over_deadline_ms": over, "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--deadline-ms", type=float, default=50.0)
    args = parser.parse_args()

    async def body() -> None:
        Sluggish.delay = 4 * args.deadline_ms / 1000
        print(
            f"deadline {args.deadline_ms:.0f} ms, {args.turns} compositions each, "
            "goal: p99 within deadline + 3 ms"
        )
        results = {
            kind.__name__: await _variant(kind, args.turns, args.deadline_ms)
            for kind in (Sluggish, NeverAnswers)
        }
        write_results("deadline", {"deadline_ms": args.deadline_ms, "variants": results})

    run(body)


if __name__ == "__main__":
    main()
