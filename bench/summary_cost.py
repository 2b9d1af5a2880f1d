"""What a segment summary costs, riding the conversation's cache and without it.

A 60-turn offline conversation with a 45-minute pause every ten turns (six segments, so
five closed ones) on a simulated clock shared with the local API's cache, so TTLs expire
as they would. Each summary runs right after the turn that closed its segment, as the
background worker does, and rides the conversation's prefix: tools, system and history
exactly as the turns send them, then the instruction. For comparison, each segment is
then summarised by a standalone request: a short system prompt and the segment quoted
in one user message, nothing cached (a fresh prefix of that size is not worth a write).

Reported per summary: input tokens, the share read from the cache, and the input cost in
base-price tokens (uncached 1x, 5m write 1.25x, 1h write 2x, read 0.1x); beside them, the
conversation's own cost.

    .venv/bin/python -m bench.summary_cost
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import anthropic
import msgspec

from actors import AnthropicModel, input_cost, summary_instruction
from actors._background import transcript
from bench._common import run, write_results
from frontmind import Config, Frontmind
from frontmind.cli._demo import SimulatedClock
from frontmind.localapi import LocalMessagesAPI
from storage import SegmentJob, TurnUsage

TURNS = 60
PAUSE = 45 * 60.0
START = 1_795_000_000.0
STANDALONE_SYSTEM = "You summarise segments of a conversation for its long-term memory."


def said(i: int) -> str:
    if i % 10 == 4:
        return f"I prefer the {i}th option for the garden; my neighbour's name is N{i}."
    return (
        f"Turn {i}: let us plan bed {i % 7} of the garden, row {i % 5}, with what we "
        "discussed before about soil, light and watering, and what to buy this week."
    )


def usage_of(u: Any) -> TurnUsage:
    creation = u.cache_creation
    return TurnUsage(
        input_tokens=u.input_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
        output_tokens=u.output_tokens,
        cache_creation_5m=(creation.ephemeral_5m_input_tokens if creation else 0) or 0,
        cache_creation_1h=(creation.ephemeral_1h_input_tokens if creation else 0) or 0,
    )


async def main() -> None:
    clock = SimulatedClock(START)
    with tempfile.TemporaryDirectory() as tmp:
        async with LocalMessagesAPI(clock=clock) as api:
            model = AnthropicModel(
                api_key="offline-bench", base_url=api.base_url, max_retries=2, timeout=30
            )
            client = anthropic.AsyncAnthropic(api_key="offline-bench", base_url=api.base_url)
            try:
                async with Frontmind.open(Path(tmp), Config(), model=model, clock=clock) as fm:
                    for i in range(1, TURNS + 1):
                        async for _ in fm.turn("bench", said(i)):
                            pass
                        await fm.run_background()  # right after the turn, as the worker
                        clock.advance(PAUSE if i % 10 == 0 else 90.0)
                    await fm.run_background()
                    jobs = [j for j in await fm.jobs("bench") if j.usage is not None]
                    records = await fm.turns("bench", limit=TURNS)
                    standalone: list[TurnUsage] = []
                    for job in jobs:
                        payload = msgspec.json.decode(job.payload, type=SegmentJob)
                        messages = await fm.storage.segment_messages(job.user, payload.segment_id)
                        text = transcript(messages)
                        instruction = summary_instruction([], messages[0].seq, None, text)
                        reply = await client.messages.create(
                            model=fm.config.model.name,
                            max_tokens=1024,
                            system=STANDALONE_SYSTEM,
                            messages=[{"role": "user", "content": instruction}],
                        )
                        standalone.append(usage_of(reply.usage))
            finally:
                await model.aclose()
                await client.close()

    riding = [j.usage.usage for j in jobs if j.usage is not None]
    conversation = sum((r.usage for r in records), TurnUsage())

    def row(usages: list[TurnUsage]) -> dict[str, float]:
        total = sum(usages, TurnUsage())
        return {
            "summaries": len(usages),
            "input_tokens_mean": statistics.fmean(u.total_input for u in usages),
            "read_share": total.cache_read_input_tokens / total.total_input,
            "written_mean": statistics.fmean(u.cache_creation_input_tokens for u in usages),
            "input_cost_mean": statistics.fmean(input_cost(u) for u in usages),
            "output_tokens_mean": statistics.fmean(u.output_tokens for u in usages),
        }

    talk_cost = input_cost(conversation)
    background_cost = sum(input_cost(u) for u in riding)
    results: dict[str, Any] = {
        "turns": TURNS,
        "riding_the_cache": row(riding),
        "standalone": row(standalone),
        "conversation_input_cost": talk_cost,
        "background_input_cost": background_cost,
    }
    print(f"{TURNS} turns, {len(riding)} closed segments summarised\n")
    print(f"{'per summary':<22}{'input tok':>10}{'read':>8}{'written':>9}{'cost':>9}")
    for name in ("riding_the_cache", "standalone"):
        r = results[name]
        assert isinstance(r, dict)
        print(
            f"{name:<22}{r['input_tokens_mean']:>10,.0f}{r['read_share']:>8.0%}"
            f"{r['written_mean']:>9,.0f}{r['input_cost_mean']:>9,.0f}"
        )
    print(
        f"\nconversation input cost {talk_cost:,.0f}, background "
        f"{background_cost:,.0f} ({background_cost / talk_cost:.1%} of the conversation's)"
    )
    write_results("summary_cost", results)


if __name__ == "__main__":
    run(main)
