"""Cache efficiency: one scripted 50-turn conversation, notification center vs legacy,
and the notification center over both channels (the frame, and a role-system message on
a model that takes one), with extended thinking off and on.

Time passes on a simulated clock shared with the local API's cache (so TTLs expire as
they would), with reminders, memories, searches and a few tool loops. Per turn: the
share of input read from the cache, and the input cost with the API's price multipliers;
the ratio between the two layouts. The physical limit: from the third turn on, a turn's
first call reads everything an earlier request already sent, i.e. its cache read equals
the previous turn's read plus its write. The share of turns where that holds is
printed, and every miss is explained. A PNG chart of the per-turn cached share is written
when matplotlib is installed (`pip install -e '.[bench]'`).

    .venv/bin/python -m bench.cache_efficiency
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from actors import ModelSettings
from bench._common import RESULTS, run, write_results
from frontmind._demo import input_cost, run_conversation
from storage import TurnRecord, TurnUsage

MINUTE, HOUR = 60.0, 3600.0
HISTORY_TTL = 5 * MINUTE


def script() -> list[tuple[float, str]]:
    """50 turns: chat, reminders, memories, searches; two long gaps (lunch, night)."""
    lines: list[tuple[float, str]] = []
    topics = ["the launch", "the keynote", "the budget", "hiring", "the roadmap"]
    for i in range(50):
        gap = 3 * HOUR if i == 20 else 16 * HOUR if i == 38 else (1 + i % 4) * MINUTE
        topic = topics[i % len(topics)]
        if i % 9 == 3:
            text = f"Remind me to follow up on {topic} in {30 + i} minutes."
        elif i % 9 == 5:
            text = f"Remember that {topic} is owned by team {i % 4}."
        elif i % 11 == 7:
            text = f"Search for {topic.split()[-1]}"
        elif i % 13 == 12:
            text = "List my reminders"
        else:
            text = f"Turn {i}: let's talk about {topic}; what should I do next?"
        lines.append((0.0 if i == 0 else gap, text))
    return lines


# A model that takes both thinking modes and role-system messages (actors/_models.py).
THINKING_MODEL = "claude-opus-4-8"
RUNS: tuple[tuple[str, bool, str, ModelSettings | None], ...] = (
    ("notification center", False, "frame", None),
    ("legacy placement", True, "frame", None),
    (
        "nc, system message",
        False,
        "system_message",
        ModelSettings(name=THINKING_MODEL, max_tokens=4096),
    ),
    (
        "nc, frame, thinking",
        False,
        "frame",
        ModelSettings(name=THINKING_MODEL, max_tokens=4096, thinking="enabled", budget_tokens=1024),
    ),
    (
        "nc, system msg, thinking",
        False,
        "system_message",
        ModelSettings(name=THINKING_MODEL, max_tokens=4096, thinking="enabled", budget_tokens=1024),
    ),
)


async def run_layout(
    legacy: bool,
    data_dir: Path,
    channel: str = "frame",
    model: ModelSettings | None = None,
) -> list[TurnRecord]:
    return await run_conversation(
        script(),
        legacy=legacy,
        data_dir=data_dir,
        model_settings=model,
        channel="system_message" if channel == "system_message" else "frame",
    )


def explain(index: int, records: list[TurnRecord], gaps: list[float]) -> str:
    record = records[index]
    if gaps[index] > HISTORY_TTL:
        return f"{gaps[index] / 60:.0f} min since the previous turn: the 5m cache expired"
    if record.cache_miss_reason:
        return f"the API reports {record.cache_miss_reason}"
    return "unexplained"


def analyse(name: str, records: list[TurnRecord]) -> dict[str, Any]:
    gaps = [gap for gap, _ in script()]
    first = [r.call_usage[0] for r in records]
    shares = [r.usage.cache_read_input_tokens / r.usage.total_input for r in records]
    holds, misses = 0, []
    for n in range(2, len(records)):
        expected = first[n - 1].cache_read_input_tokens + first[n - 1].cache_creation_input_tokens
        if first[n].cache_read_input_tokens == expected:
            holds += 1
        else:
            misses.append(
                {
                    "turn": n + 1,
                    "read": first[n].cache_read_input_tokens,
                    "expected": expected,
                    "why": explain(n, records, gaps),
                }
            )
    total = TurnUsage()
    for r in records:
        total = total + r.usage
    return {
        "layout": name,
        "turns": len(records),
        "per_turn_cached_share": shares,
        "cached_share": total.cache_read_input_tokens / total.total_input,
        "input_cost": input_cost(total),
        "usage": {
            "read": total.cache_read_input_tokens,
            "write": total.cache_creation_input_tokens,
            "uncached": total.input_tokens,
        },
        "limit_holds": holds,
        "limit_checked": len(records) - 2,
        "misses": misses,
    }


def chart(nc: dict[str, Any], legacy: dict[str, Any]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no chart; pip install -e '.[bench]')")
        return None
    figure, axes = plt.subplots(figsize=(9, 4))
    for result, style in ((nc, "-o"), (legacy, "-s")):
        shares = [100 * s for s in result["per_turn_cached_share"]]
        axes.plot(range(1, len(shares) + 1), shares, style, markersize=3, label=result["layout"])
    axes.set_xlabel("turn")
    axes.set_ylabel("input read from cache (%)")
    axes.set_ylim(0, 100)
    axes.set_title("Per-turn cached share of input, same 50-turn conversation")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "cache_efficiency.png"
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def main() -> None:
    # Legacy placement churns the system prompt on purpose; its guard warnings are expected.
    logging.getLogger("frontmind.cache_guard").setLevel(logging.ERROR)

    async def body() -> None:
        results = []
        with tempfile.TemporaryDirectory() as tmp:
            for n, (name, legacy_run, channel, model) in enumerate(RUNS):
                records = await run_layout(legacy_run, Path(tmp) / str(n), channel, model)
                results.append(analyse(name, records))
        nc, legacy = results[0], results[1]
        for result in results:
            print(
                f"{result['layout']:<26} cached share {result['cached_share']:6.1%}  "
                f"input cost {result['input_cost']:>9,.0f}  "
                f"limit reached on {result['limit_holds']}/{result['limit_checked']} turns"
            )
            for miss in result["misses"][:6]:
                print(
                    f"    turn {miss['turn']:>2}: read {miss['read']:>6,} of {miss['expected']:>6,}"
                    f" - {miss['why']}"
                )
            if len(result["misses"]) > 6:
                print(f"    … and {len(result['misses']) - 6} more")
        ratio = legacy["input_cost"] / nc["input_cost"]
        print(f"legacy / notification center input cost: {ratio:.2f}x")
        path = chart(nc, legacy)
        if path is not None:
            print(f"chart written to {path.relative_to(RESULTS.parent.parent)}")
        write_results(
            "cache_efficiency",
            {
                "notification_center": nc,
                "legacy": legacy,
                "cost_ratio_legacy_over_nc": ratio,
                "variants": results[2:],
            },
        )

    run(body)


if __name__ == "__main__":
    main()
