"""The cache warm-up: a continuum idle `cache.warm_after_seconds` whose history entry is
5m sends one small request that moves its cached prefix into a 1h entry (actors/_ttl.py,
`warm_plan`), on timers a turn cancels; through the real SDK against the local API."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import pytest

from actors import AnthropicModel, SettingsError, TaskTimers, input_cost, validate_settings
from actors._conversation import WARM_MESSAGE
from frontmind import Frontmind
from frontmind.cli._demo import SimulatedClock
from frontmind.cli._simulate import ScriptTurn, simulate_run
from frontmind.localapi import LocalMessagesAPI
from storage import TurnUsage
from tests._harness import START, cache_marks, completed, config, run_turn

MIN = 60.0


def _open(
    api: LocalMessagesAPI, tmp: Path, clock: SimulatedClock, **cache: object
) -> tuple[AnthropicModel, AbstractAsyncContextManager[Frontmind]]:
    model = AnthropicModel(api_key="test-key", base_url=api.base_url, max_retries=0, timeout=10)
    # The fixed policy writes the history at 5m on every turn: each one leaves a 5m entry.
    cfg = config(cache={"warm": True, "policy": "fixed", **cache})
    return model, Frontmind.open(tmp, cfg, model=model, clock=clock, timers=clock)


async def _medium_habit(fm: Frontmind, clock: SimulatedClock) -> None:
    """Turns with the pauses of someone who often comes back within the hour."""
    for n, pause in enumerate([0, 2 * MIN, 30 * MIN, 2 * MIN, 40 * MIN, 1 * MIN]):
        await clock.run_until(clock() + pause)
        completed(await run_turn(fm, "c", f"turn {n}: tell me more"))


@pytest.mark.anyio
async def test_the_warm_up_fires_on_the_clock_and_sends_the_documented_request(
    tmp_path: Path,
) -> None:
    clock = SimulatedClock(START)
    async with LocalMessagesAPI(clock=clock) as api:
        model, opening = _open(api, tmp_path, clock)
        try:
            async with opening as fm:
                await _medium_habit(fm, clock)
                records = await fm.turns("c", limit=100)
                history = await fm.history("c")
                sent = len(api.message_bodies())
                assert all(r.cache_ttl and r.cache_ttl.history == "5m" for r in records)
                # Not yet: 269 s idle.
                await clock.run_until(clock() + 269)
                assert len(api.message_bodies()) == sent
                assert fm.warm_ups() == (0, TurnUsage())
                await clock.run_until(clock() + 2)
                bodies = api.message_bodies()
                assert len(bodies) == sent + 1
                body = bodies[-1]
                count, usage = fm.warm_ups()
                # Nothing stored: the history and the turns are as they were.
                assert await fm.history("c") == history
                assert len(await fm.turns("c", limit=100)) == len(records)
                # A pause of 30 minutes now reads the whole prefix.
                await clock.run_until(clock() + 30 * MIN)
                after = completed(await run_turn(fm, "c", "back again"))
        finally:
            await model.aclose()
    # The documented shape: max_tokens 1, the history as the next turn sends it with its
    # breakpoint at 1h (a 1h mark never after a 5m one), then a short user message after
    # the last breakpoint (not a prefill), and no thinking.
    assert body["max_tokens"] == 1
    assert "thinking" not in body
    final = body["messages"][-1]
    assert final["role"] == "user"
    assert [b.get("text") for b in final["content"]] == [WARM_MESSAGE]
    assert all("cache_control" not in b for b in final["content"])
    marks = cache_marks(body)
    assert [ttl for *_, ttl in marks] == ["1h"] * len(marks)
    assert marks[-1][1] == len(body["messages"]) - 2  # on the last history message
    assert body["messages"][-2]["role"] == "assistant"
    # Its usage is counted: the prefix read, the last exchange written at 1h, a few
    # tokens uncached, one output token.
    assert count == 1
    assert usage.cache_read_input_tokens > 0
    assert usage.cache_creation_1h > 0
    assert usage.cache_creation_5m == 0
    assert 0 < usage.input_tokens < 30
    assert usage.output_tokens == 1
    assert (
        input_cost(usage) < 0.2 * usage.cache_read_input_tokens + 2 * usage.cache_creation_1h + 30
    )
    # The turn after the 30-minute pause wrote only what followed the warmed prefix.
    assert after.usage.cache_read_input_tokens >= (
        usage.cache_read_input_tokens + usage.cache_creation_1h
    )


@pytest.mark.anyio
async def test_a_turn_cancels_a_pending_warm_up(tmp_path: Path) -> None:
    clock = SimulatedClock(START)
    async with LocalMessagesAPI(clock=clock) as api:
        model, opening = _open(api, tmp_path, clock)
        try:
            async with opening as fm:
                await _medium_habit(fm, clock)
                await clock.run_until(clock() + 200)
                completed(await run_turn(fm, "c", "one more"))  # before the 270 s mark
                sent = len(api.message_bodies())
                # 270 s after the first turn's end, 200 after this one's: nothing fires.
                await clock.run_until(clock() + 200)
                assert len(api.message_bodies()) == sent
                assert fm.warm_ups()[0] == 0
                await clock.run_until(clock() + 71)  # 271 s after this turn
                assert fm.warm_ups()[0] == 1
                assert len(api.message_bodies()) == sent + 1
        finally:
            await model.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("cache", "why"),
    [
        ({"policy": "fixed", "history_ttl": "1h"}, "the history entry is already 1h"),
        ({"warm": False}, None),
    ],
)
async def test_no_warm_up_when_the_entry_is_1h_or_when_disabled(
    tmp_path: Path, cache: dict[str, object], why: str | None
) -> None:
    clock = SimulatedClock(START)
    async with LocalMessagesAPI(clock=clock) as api:
        model, opening = _open(api, tmp_path, clock, **cache)
        try:
            async with opening as fm:
                await _medium_habit(fm, clock)
                sent = len(api.message_bodies())
                await clock.run_until(clock() + 280)
                assert len(api.message_bodies()) == sent
                assert fm.warm_ups() == (0, TurnUsage())
                reasons = fm._runtime.warm_reasons
        finally:
            await model.aclose()
    if why is None:
        assert reasons == []  # disabled: no timer was even set
    else:
        assert reasons
        assert all(r == why for r in reasons)


@pytest.mark.anyio
async def test_task_timers_fire_once_and_a_cancelled_one_never_does() -> None:
    fired: list[str] = []
    done = anyio.Event()

    async def fire(name: str) -> None:
        fired.append(name)
        done.set()

    async with anyio.create_task_group() as group:
        timers = TaskTimers(group, lambda: 0.0)
        timers.schedule("later", 3600.0, lambda: fire("later"))
        timers.cancel("later")
        timers.schedule("replaced", 3600.0, lambda: fire("replaced"))
        timers.schedule("replaced", 0.0, lambda: fire("now"))  # replaces the pending one
        with anyio.fail_after(5):
            await done.wait()
        assert timers.pending() == 0
        group.cancel_scope.cancel()
    assert fired == ["now"]


def test_warm_after_must_leave_the_5m_entry_alive() -> None:
    for bad in (0.0, 300.0, 400.0):
        with pytest.raises(SettingsError, match=r"cache\.warm_after_seconds"):
            validate_settings(config(cache={"warm_after_seconds": bad}))


@pytest.mark.anyio
async def test_simulate_counts_the_warm_ups_in_the_row(tmp_path: Path) -> None:
    # Pauses of 20 minutes (past the 5m TTL, short of a segment's 30-minute gap, so no
    # summary rides the cache): the first turns write their prefix at 5m, betting on a
    # quick pause, and the warm-up then keeps it for the next one.
    pauses = [0, 20, 20, 20, 20]
    at, script = START, []
    for n, minutes in enumerate(pauses):
        at += minutes * MIN
        script.append(ScriptTurn(at, f"Turn {n}: what should I do next?"))
    warm, records = await simulate_run(script, layout="notification", policy="adaptive+warm")
    plain, _ = await simulate_run(script, layout="notification", policy="adaptive")
    turns = sum((r.usage for r in records), TurnUsage())
    assert warm.warm_ups >= 1
    assert warm.warm_output_tokens == warm.warm_ups
    assert warm.warm_cost > 0
    assert warm.input_cost == pytest.approx(input_cost(turns) + warm.warm_cost)
    assert warm.cache_read > turns.cache_read_input_tokens  # the warm-ups' reads counted
    assert plain.warm_ups == 0
    assert warm.input_cost < plain.input_cost  # here it pays, its own cost counted
    assert plain.warm_cost == 0
    assert warm.avoidable_misses == 0


@pytest.mark.anyio
async def test_a_summary_riding_the_cache_writes_the_next_turns_entry_at_the_policys_ttl() -> None:
    # After the night the segment before it is closed and its summary rides the cache,
    # with its history breakpoint where the next turn's falls (so that turn's own mark
    # writes nothing). Written at the last turn's 5m marks, the 20-minute pause after it
    # would re-write the whole prefix; at the policy's choice for the next turn, it reads.
    pauses = [0, 1, 2, 1, 600, 20, 1]
    at, script = START, []
    for n, minutes in enumerate(pauses):
        at += minutes * MIN
        script.append(ScriptTurn(at, f"Turn {n}: what should I do next?"))
    fixed, _ = await simulate_run(script, layout="notification", policy="5m")
    row, records = await simulate_run(script, layout="notification", policy="adaptive")
    after_night, after_pause = records[4].usage, records[5].usage
    assert after_night.cache_creation_input_tokens > after_pause.cache_creation_input_tokens
    # The turn after the 20-minute pause reads at least all the turn after the night had.
    assert after_pause.cache_read_input_tokens >= (
        after_night.cache_read_input_tokens + after_night.cache_creation_input_tokens
    )
    assert row.avoidable_misses == 0
    assert row.input_cost < fixed.input_cost
