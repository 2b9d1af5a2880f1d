"""Cache efficiency: a 50-turn conversation under every layout and TTL policy.

Two scripts with the same 50 messages (chat, reminders, memories, searches, tool loops):
- `benchmark`: quick exchanges (1 to 4 minutes apart) with a lunch break and a night;
- `realistic`: seeded pauses, 15 of the 49 between 5 and 60 minutes and two overnight,
  the rest 1 to 4 minutes.
Each run goes through `frontmind simulate` (frontmind/cli/_simulate.py): the real turn path
against the local API's cache simulator on a simulated clock, so entries expire over the
pauses as they would. Per run: input cost in base-price tokens (the API's multipliers),
tokens read, written and uncached, and the avoidable misses: turns whose first call read
less than the previous turn's first call had cached, with neither the pause past that
turn's history TTL nor the layout's own change of its prefix to explain it. Zero means
no miss was avoidable ("no avoidable miss"); it is not a cost floor (the `none` layout
and the `oracle` policy are the floors).

Also: the notification center with the compact frame beside the seed's, the TTL
policies on more realistic seeds, and the channels (frame, role-system message, user
message) with thinking off and adaptive, on a model that takes role-system messages.
A PNG chart of the input cost per turn by layout (adaptive TTLs, realistic pauses) when
matplotlib is installed (`pip install -e '.[bench]'`).

And context management, on a longer conversation that outgrows its budget: 60 turns on
`claude-opus-4-8` with thinking on (summarized), each reading a file of about 2,000
tokens through a tool, two pauses of 45 minutes; the same replies in every run. Rows:
Frontmind keeping everything, Frontmind's own trimming (its 80,000-token history budget,
cut to half at a segment boundary) with its segment summaries, and the API's server-side
edits on Frontmind's own requests (the local API applies them as a client sending them
with the beta client would): `clear_tool_uses` and `compaction` triggered at 80,000 input
tokens, `clear_thinking` keeping the last thinking turn. Each row's total adds what the
turns cost to what summarising cost: Frontmind's background segment summaries (their
own calls), or a compaction's summary step (billed beside the reply, in
`usage.iterations`).

    .venv/bin/python -m bench.cache_efficiency
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from actors import HistorySettings, ModelSettings
from bench._common import RESULTS, run, write_results
from frontmind._exceptions import EdgeError
from frontmind.cli._demo import LAUNCH_PLAN
from frontmind.cli._simulate import (
    LAYOUTS,
    POLICIES,
    WARM,
    Row,
    SameReplies,
    ScriptTurn,
    layout_available,
    run_simulation,
    simulate_run,
    write_chart,
)
from frontmind.config import Config
from frontmind.localapi import MessagesRequest, Reply, ReplyThinking, TextBlock
from storage import TurnRecord

MINUTE, HOUR = 60.0, 3600.0
START = datetime(2026, 11, 30, 8, 55, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
REALISTIC_SEEDS = (1, 2, 3, 4, 5, 6)  # the first gets every layout; all get every TTL policy
# A model that takes both thinking modes and role-system messages (actors/_models.py).
CHANNEL_MODEL = "claude-opus-4-8"
CHANNELS = ("notification", "system_message", "user_message")
DOCUMENTS = {"launch-plan": LAUNCH_PLAN}


def messages() -> list[str]:
    topics = ["the launch", "the keynote", "the budget", "hiring", "the roadmap"]
    lines = []
    for i in range(50):
        topic = topics[i % len(topics)]
        if i % 9 == 3:
            lines.append(f"Remind me to follow up on {topic} in {30 + i} minutes.")
        elif i % 9 == 5:
            lines.append(f"Remember that {topic} is owned by team {i % 4}.")
        elif i % 11 == 7:
            lines.append(f"Search for {topic.split()[-1]}")
        elif i % 13 == 12:
            lines.append("List my reminders")
        else:
            lines.append(f"Turn {i}: let's talk about {topic}; what should I do next?")
    return lines


def benchmark_gaps() -> list[float]:
    """The original script: 1 to 4 minutes apart, 3 hours before turn 21, 16 before 39."""
    return [3 * HOUR if i == 20 else 16 * HOUR if i == 38 else (1 + i % 4) * MINUTE
            for i in range(1, 50)]  # fmt: skip


def realistic_gaps(seed: int) -> list[float]:
    """15 of 49 gaps between 5 and 60 minutes, two overnight, the rest 1 to 4 minutes."""
    rng = random.Random(seed)
    order = list(range(49))
    rng.shuffle(order)
    medium, night = set(order[:15]), set(order[15:17])
    gaps = []
    for i in range(49):
        if i in medium:
            gaps.append(rng.uniform(5.5, 60) * MINUTE)
        elif i in night:
            gaps.append(rng.uniform(9, 15) * HOUR)
        else:
            gaps.append(rng.uniform(1, 4.5) * MINUTE)
    return gaps


def script(gaps: Sequence[float]) -> list[ScriptTurn]:
    at, turns = START, []
    for gap, text in zip((0.0, *gaps), messages(), strict=True):
        at += gap
        turns.append(ScriptTurn(at, text))
    return turns


def _row(row: Row) -> dict[str, Any]:
    return {**row.as_json(turns=False), "per_turn_cost": [round(c, 2) for c in row.per_turn_cost]}


def _cost(rows: Sequence[Row], layout: str, ttl: str) -> float:
    return next(r.input_cost for r in rows if r.layout == layout and r.ttl == ttl)


def _table(title: str, rows: Sequence[Row]) -> None:
    print(f"\n{title}")
    print(
        f"  {'layout':<15}{'ttl':<10}{'input cost':>11}{'read':>10}{'written':>9}{'uncached':>9}"
        f"{'avoidable':>11}"
    )
    for r in rows:
        print(
            f"  {r.layout:<15}{r.ttl:<10}{r.input_cost:>11,.0f}{r.cache_read:>10,}"
            f"{r.cache_write:>9,}{r.uncached:>9,}{r.avoidable_misses:>11}"
        )
        for miss in r.misses:
            print(f"      {miss}")


def goals(scripts: dict[str, list[Row]], seeds: dict[int, list[Row]]) -> dict[str, Any]:
    """The issue's goals, measured."""
    per_seed = {}
    for seed, rows in seeds.items():
        five, hour = _cost(rows, "notification", "5m"), _cost(rows, "notification", "1h")
        adaptive = _cost(rows, "notification", "adaptive")
        warm = _cost(rows, "notification", WARM)
        oracle = _cost(rows, "notification", "oracle")
        per_seed[seed] = {
            "adaptive_vs_better_fixed": adaptive / min(five, hour),
            "adaptive_vs_5m": adaptive / five,
            "adaptive_vs_oracle": adaptive / oracle,
            "warm_vs_better_fixed": warm / min(five, hour),
            "warm_vs_5m": warm / five,
            "warm_vs_oracle": warm / oracle,
            "warm_vs_adaptive": warm / adaptive,
            "warm_ups": next(
                r.warm_ups for r in rows if r.layout == "notification" and r.ttl == WARM
            ),
        }
    totals = {
        ttl: sum(_cost(rows, "notification", ttl) for rows in seeds.values()) for ttl in POLICIES
    }
    bench = scripts["benchmark"]
    bench_adaptive = _cost(bench, "notification", "adaptive")
    everything = [r for rows in (*scripts.values(), *seeds.values()) for r in rows]
    realistic = scripts["realistic"]
    return {
        "realistic_seeds": per_seed,
        "realistic_all_seeds": {
            "adaptive_vs_better_fixed": totals["adaptive"] / min(totals["5m"], totals["1h"]),
            "adaptive_vs_5m": totals["adaptive"] / totals["5m"],
            "adaptive_vs_oracle": totals["adaptive"] / totals["oracle"],
            "warm_vs_better_fixed": totals[WARM] / min(totals["5m"], totals["1h"]),
            "warm_vs_5m": totals[WARM] / totals["5m"],
            "warm_vs_oracle": totals[WARM] / totals["oracle"],
            "warm_vs_adaptive": totals[WARM] / totals["adaptive"],
        },
        "benchmark": {
            "adaptive_vs_better_fixed": bench_adaptive
            / min(_cost(bench, "notification", "5m"), _cost(bench, "notification", "1h")),
            "adaptive_vs_oracle": bench_adaptive / _cost(bench, "notification", "oracle"),
            "warm_vs_adaptive": _cost(bench, "notification", WARM) / bench_adaptive,
        },
        "avoidable_misses": sum(r.avoidable_misses for r in everything),
        "notification_vs_user_message": {
            name: _cost(rows, "notification", "adaptive") / _cost(rows, "user_message", "adaptive")
            for name, rows in scripts.items()
        },
        "realistic_layouts_adaptive": {
            layout: _cost(realistic, layout, "adaptive")
            for layout in LAYOUTS
            if any(r.layout == layout for r in realistic)
        },
    }


# -- context management on a conversation that outgrows its budget -----------------------------

CONTEXT_MODEL = "claude-opus-4-8"  # keeps earlier thinking; takes all three strategies
CONTEXT_TURNS = 60
CONTEXT_TRIGGER = 80_000  # Frontmind's default history budget
_WORDS = (
    "the build step reads its settings from the project file and writes the bundle to "
    "the output folder; the tests run after it and report each failure with its file "
    "and line, and the deploy script checks the version before it uploads anything"
).split()


def read_file(path: str) -> str:
    """Read a file of the project by its path."""
    start = sum(map(ord, path)) % len(_WORDS)
    words = [_WORDS[(start + i) % len(_WORDS)] for i in range(1500)]
    return f"{path}:\n" + " ".join(words)


class Thoughtful(SameReplies):
    """The same replies, each led by some 300 tokens of thinking (as a real model's,
    which clear_thinking can clear): written from the message it answers."""

    def respond(self, request: MessagesRequest) -> Reply:
        reply = super().respond(request)
        if any(isinstance(b, ReplyThinking) for b in reply.blocks):
            return reply
        last = request.messages[-1].content
        said = (
            last
            if isinstance(last, str)
            else " ".join(b.text for b in last if isinstance(b, TextBlock)) or "the tool's result"
        )
        words = (f"I am asked: {said}. " + " ".join(_WORDS) + ". ").split()
        thought = " ".join(words[i % len(words)] for i in range(230))
        return Reply((ReplyThinking(thought), *reply.blocks), reply.stop_reason)


def context_script() -> list[ScriptTurn]:
    at, turns = START, []
    for i in range(CONTEXT_TURNS):
        at += 0.0 if i == 0 else 45 * MINUTE if i in (20, 40) else 2 * MINUTE
        text = f"Turn {i}: use the read_file tool for path notes/{i}.md and say what changed"
        turns.append(ScriptTurn(at, text))
    return turns


CONTEXT_RUNS: dict[str, tuple[int, dict[str, Any] | None]] = {
    # name: (Frontmind's history budget, the server-side context_management)
    "frontmind, no trimming": (1_000_000, None),
    "frontmind trimming + summaries": (CONTEXT_TRIGGER, None),
    "clear_tool_uses": (
        1_000_000,
        {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": CONTEXT_TRIGGER},
                    "keep": {"type": "tool_uses", "value": 3},
                    "clear_at_least": {"type": "input_tokens", "value": 10_000},
                }
            ]
        },
    ),
    "clear_thinking": (
        1_000_000,
        {
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
            ]
        },
    ),
    "compaction": (
        1_000_000,
        {
            "edits": [
                {
                    "type": "compact_20260112",
                    "trigger": {"type": "input_tokens", "value": CONTEXT_TRIGGER},
                }
            ]
        },
    ),
}


def _peak(records: Sequence[TurnRecord]) -> int:
    """The largest input one model call read (what the context grew to)."""
    return max(
        (
            u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
            for r in records
            for u in r.call_usage
        ),
        default=0,
    )


async def context_management() -> dict[str, dict[str, Any]]:
    model = ModelSettings(
        name=CONTEXT_MODEL, max_tokens=4096, thinking="adaptive", thinking_display="summarized"
    )
    measured: dict[str, dict[str, Any]] = {}
    for name, (budget, edits) in CONTEXT_RUNS.items():
        config = Config(model=model, history=HistorySettings(budget_tokens=budget))
        row, records = await simulate_run(
            context_script(),
            layout="notification",
            policy="adaptive",
            config=config,
            tools=[read_file],
            responder=Thoughtful(),
            server_edits=edits,
        )
        measured[name] = {
            **_row(row),
            "peak_input": _peak(records),
            # What summarising cost: Frontmind's segment summaries, or compactions.
            "summarising_cost": row.summary_cost + row.compaction_cost,
            "total_cost": row.input_cost + row.summary_cost + row.compaction_cost,
            "summarising_output": row.summary_output_tokens + row.compaction_output_tokens,
        }
    base = measured["frontmind, no trimming"]["total_cost"]
    print(f"\n{CONTEXT_MODEL}, {CONTEXT_TURNS} turns reading files, thinking on, adaptive TTLs")
    print(
        f"  {'run':<32}{'turns':>11}{'summaries':>11}{'total':>11}{'vs none':>9}{'read':>11}"
        f"{'written':>10}{'uncached':>10}{'output':>9}{'peak input':>12}"
    )
    for name, m in measured.items():
        m["vs_no_trimming"] = m["total_cost"] / base
        output = m["output_tokens"] + m["summarising_output"]
        print(
            f"  {name:<32}{m['input_cost']:>11,.0f}{m['summarising_cost']:>11,.0f}"
            f"{m['total_cost']:>11,.0f}{m['vs_no_trimming']:>8.3f}x{m['cache_read']:>11,}"
            f"{m['cache_write']:>10,}{m['uncached']:>10,}{output:>9,}{m['peak_input']:>12,}"
        )
    return measured


def main() -> None:
    async def body() -> None:
        layouts = [layout for layout in LAYOUTS if layout_available(layout)]
        scripts: dict[str, list[Row]] = {}
        for name, gaps in (
            ("benchmark", benchmark_gaps()),
            ("realistic", realistic_gaps(REALISTIC_SEEDS[0])),
        ):
            rows, _ = await run_simulation(script(gaps), layouts=layouts, documents=DOCUMENTS)
            scripts[name] = rows
            _table(f"{name} pauses: every layout and TTL policy", rows)
        seeds = {REALISTIC_SEEDS[0]: scripts["realistic"]}
        for seed in REALISTIC_SEEDS[1:]:
            rows, _ = await run_simulation(
                script(realistic_gaps(seed)), layouts=["notification"], documents=DOCUMENTS
            )
            seeds[seed] = rows
            _table(f"realistic pauses, seed {seed}", rows)
        compact: dict[str, dict[str, float]] = {}
        for name, gaps in (
            ("benchmark", benchmark_gaps()),
            ("realistic", realistic_gaps(REALISTIC_SEEDS[0])),
        ):
            rows, _ = await run_simulation(
                script(gaps),
                layouts=["notification"],
                policies=["adaptive"],
                documents=DOCUMENTS,
                frame="compact",
            )
            seed_cost = _cost(scripts[name], "notification", "adaptive")
            compact[name] = {
                "seed_frame": seed_cost,
                "compact_frame": rows[0].input_cost,
                "compact_vs_seed": rows[0].input_cost / seed_cost,
                "compact_vs_user_message": rows[0].input_cost
                / _cost(scripts[name], "user_message", "adaptive"),
            }
        channels: dict[str, list[Row]] = {}
        # Claude 4.7 and later refuse manual thinking: "adaptive" is the thinking-on mode.
        for thinking in ("off", "adaptive"):
            model = ModelSettings(name=CHANNEL_MODEL, max_tokens=4096, thinking=thinking)
            rows, _ = await run_simulation(
                script(benchmark_gaps()),
                layouts=CHANNELS,
                policies=["adaptive"],
                config=Config(model=model),
                documents=DOCUMENTS,
            )
            channels[thinking] = rows
            _table(f"{CHANNEL_MODEL}, thinking {thinking}, benchmark pauses", rows)
        managed = await context_management()
        measured = goals(scripts, seeds)
        print("\ngoals")
        for seed, ratios in measured["realistic_seeds"].items():
            print(
                f"  realistic seed {seed}: adaptive / better fixed "
                f"{ratios['adaptive_vs_better_fixed']:.3f}x, / fixed 5m "
                f"{ratios['adaptive_vs_5m']:.3f}x, / oracle {ratios['adaptive_vs_oracle']:.3f}x; "
                f"adaptive+warm ({ratios['warm_ups']} warm-ups) / better fixed "
                f"{ratios['warm_vs_better_fixed']:.3f}x, / fixed 5m {ratios['warm_vs_5m']:.3f}x, "
                f"/ oracle {ratios['warm_vs_oracle']:.3f}x, / adaptive "
                f"{ratios['warm_vs_adaptive']:.3f}x"
            )
        t = measured["realistic_all_seeds"]
        print(
            f"  realistic, all seeds together: adaptive / better fixed "
            f"{t['adaptive_vs_better_fixed']:.3f}x, / fixed 5m {t['adaptive_vs_5m']:.3f}x, "
            f"/ oracle {t['adaptive_vs_oracle']:.3f}x; adaptive+warm / better fixed "
            f"{t['warm_vs_better_fixed']:.3f}x, / fixed 5m {t['warm_vs_5m']:.3f}x, / oracle "
            f"{t['warm_vs_oracle']:.3f}x, / adaptive {t['warm_vs_adaptive']:.3f}x"
        )
        b = measured["benchmark"]
        print(
            f"  benchmark: adaptive / better fixed {b['adaptive_vs_better_fixed']:.3f}x, "
            f"/ oracle {b['adaptive_vs_oracle']:.3f}x; adaptive+warm / adaptive "
            f"{b['warm_vs_adaptive']:.3f}x"
        )
        print(f"  avoidable misses, every run: {measured['avoidable_misses']}")
        for name, ratio in measured["notification_vs_user_message"].items():
            c = compact[name]
            print(
                f"  {name}: notification / user_message {ratio:.3f}x; compact frame "
                f"{c['compact_frame']:,.0f} = {c['compact_vs_seed']:.3f}x the seed's frame, "
                f"{c['compact_vs_user_message']:.3f}x user_message"
            )
        path = RESULTS / "cache_efficiency.png"
        RESULTS.mkdir(exist_ok=True)
        try:
            write_chart([r for r in scripts["realistic"] if r.ttl == "adaptive"], path)
        except EdgeError as exc:  # no matplotlib: no chart, and say so
            print(f"(no chart: {exc})")
        else:
            print(f"chart written to {path.relative_to(RESULTS.parent.parent)}")
        write_results(
            "cache_efficiency",
            {
                "scripts": {name: [_row(r) for r in rows] for name, rows in scripts.items()},
                "realistic_seeds": {
                    str(seed): [_row(r) for r in rows] for seed, rows in seeds.items()
                },
                "compact_frame": compact,
                "channels": {k: [_row(r) for r in rows] for k, rows in channels.items()},
                "context_management": managed,
                "goals": measured,
            },
        )

    run(body)


if __name__ == "__main__":
    main()
