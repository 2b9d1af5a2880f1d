"""Per-continuum lanes: every continuum composes through its own trinket actors, so none
waits behind another's render; per-section deadlines beside the composer's."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

import anyio
import pytest

from actors import (
    Busy,
    CacheView,
    Composed,
    Trinket,
    TrinketLoadError,
    Turn,
    TurnCompleted,
)
from frontmind import ConfigError, Frontmind
from frontmind.config import load_config
from runtime import (
    ActorCrashed,
    ActorState,
    ActorSystem,
    Replied,
    RestartPolicy,
    TimedOut,
    scatter_gather,
)
from storage import TtlChoice

from ._harness import completed, run_turn
from .test_kernel import Block, Gate, Recorder

pytestmark = pytest.mark.anyio

CONTINUUMS = 20


class Rendezvous(Trinket):
    """A 30 ms render that only finishes once every continuum's render has started.

    Renders served one at a time (one trinket actor for every continuum) never all
    start together, so each would wait for the composer's deadline and time out.
    """

    started: ClassVar[int] = 0
    everyone: ClassVar[anyio.Event | None] = None

    async def render(self, turn: Turn) -> str:
        cls = type(self)
        assert cls.everyone is not None
        cls.started += 1
        if cls.started == CONTINUUMS:
            cls.everyone.set()
        await cls.everyone.wait()
        await anyio.sleep(0.03)  # the render's own work
        return f"rendered for {turn.continuum_id}"


class Hang(Trinket):
    """Renders only once the test lets it (after the compose it is late for)."""

    release: ClassVar[anyio.Event | None] = None

    async def render(self, turn: Turn) -> str:
        assert self.release is not None
        await self.release.wait()
        return "too late"


class Unhurried(Trinket):
    """A render that takes 5.6 s of its own work: within its own deadline (9 s), past
    the composer's default one and the 5 s a turn allowed the composer beyond it."""

    async def render(self, turn: Turn) -> str:
        await anyio.sleep(5.6)
        return "worth the wait"


def write_config(tmp_path: Path, text: str) -> None:
    (tmp_path / "frontmind.toml").write_text(text)


def section(composed: Composed, name: str) -> tuple[str, float]:
    found = next(s for s in composed.sections if s.name == name)
    return found.status, found.elapsed_ms


async def test_twenty_continuums_compose_at_once_without_timeouts(tmp_path: Path) -> None:
    Rendezvous.started, Rendezvous.everyone = 0, anyio.Event()
    write_config(
        tmp_path,
        """
[composer]
deadline_ms = 10000

[[trinket]]
name = "rendezvous"
use = "tests.test_lanes:Rendezvous"
placement = "notification"
order = 60
""",
    )
    results: dict[str, Composed] = {}
    async with Frontmind.open(tmp_path, offline=True) as fm:

        async def compose(cid: str) -> None:
            results[cid] = await fm.compose(cid, "hello")

        async with anyio.create_task_group() as tg:
            for i in range(CONTINUUMS):
                tg.start_soon(compose, f"c{i}")
    assert Rendezvous.started == CONTINUUMS
    for cid, composed in results.items():
        assert {s.status for s in composed.sections} <= {"fresh", "empty"}, composed.sections
        assert f"rendered for {cid}" in composed.notification


async def test_a_section_deadline_stops_waiting_before_the_composers(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
[composer]
deadline_ms = 60000

[composer.deadlines]
relevant_memories = 40

[[trinket]]
name = "hang"
use = "tests.test_lanes:Hang"
placement = "notification"
order = 60
deadline_ms = 50
""",
    )
    Hang.release = anyio.Event()
    async with Frontmind.open(tmp_path, offline=True) as fm:
        with anyio.fail_after(30):  # a regression waits out the composer's 60 s
            composed = await fm.compose("c1", "hello")
        Hang.release.set()
    status, elapsed_ms = section(composed, "hang")
    assert status == "timeout"
    assert 49 <= elapsed_ms < 60000
    assert section(composed, "datetime_section")[0] == "fresh"


async def test_lanes_are_stopped_whole(tmp_path: Path) -> None:
    async with Frontmind.open(tmp_path, offline=True) as fm:
        for cid in ("c1", "c2"):
            assert [e async for e in fm.turn(cid, "hello")]
        names = {s.name for s in fm.statistics()}
        assert "trinket:default/c1:relevant_memories" in names
        assert "trinket:default/c2:relevant_memories" in names
        assert await fm._runtime.evict_idle(0) == [("default", "c1"), ("default", "c2")]
        names = {s.name for s in fm.statistics()}
    assert not any(name.startswith("trinket:") for name in names)


class Stuck(Trinket):
    """A render that never returns (a dead service without a timeout of its own)."""

    async def render(self, turn: Turn) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_closing_stops_lanes_with_hung_renders_in_one_grace(tmp_path: Path) -> None:
    # Each lane's two stuck renders outlive the turn that asked for them; closing must
    # cancel them after one grace in all, not one grace per actor (eight here).
    write_config(
        tmp_path,
        """
[composer]
deadline_ms = 50

[server]
grace_seconds = 1

[[trinket]]
name = "stuck_one"
use = "tests.test_lanes:Stuck"
placement = "notification"
order = 60

[[trinket]]
name = "stuck_two"
use = "tests.test_lanes:Stuck"
placement = "notification"
order = 61
""",
    )
    with anyio.fail_after(5):  # one actor after another, the close alone takes 8 s
        async with Frontmind.open(tmp_path, offline=True) as fm:
            for cid in ("c1", "c2", "c3", "c4"):
                events = [e async for e in fm.turn(cid, "hello")]
                assert isinstance(events[-1], TurnCompleted)
    assert fm.loaded_continuums() == []


@pytest.mark.slow
async def test_a_turn_waits_for_a_section_within_its_own_deadline(tmp_path: Path) -> None:
    """A section's own deadline (`[[trinket]] deadline_ms`, `[composer.deadlines]`) may
    be longer than the composer's: the turn waits for it as the composer does. The turn
    gave the composer its default deadline and 5 s more, then failed whole with
    `compose_timeout` while the section was still within its own deadline."""
    write_config(
        tmp_path,
        """
[[trinket]]
name = "unhurried"
use = "tests.test_lanes:Unhurried"
placement = "notification"
order = 60
deadline_ms = 9000
""",
    )
    async with Frontmind.open(tmp_path, offline=True) as fm:
        with anyio.fail_after(60):
            events = [e async for e in fm.turn("c1", "hello")]
    assert isinstance(events[-1], TurnCompleted), events[-1]
    (done,) = [s for s in events[-1].sections if s.name == "unhurried"]
    assert done.status == "fresh"


def test_deadline_settings_are_checked_where_they_enter(tmp_path: Path) -> None:
    write_config(tmp_path, "[composer.deadlines]\nno_such_section = 10\n")
    with pytest.raises(ConfigError, match=r"composer\.deadlines: unknown sections.*no_such"):
        load_config(None, tmp_path)
    write_config(tmp_path, "[composer.deadlines]\nrelevant_memories = 0\n")
    with pytest.raises(ConfigError, match=r"composer\.deadlines\.relevant_memories: must be"):
        load_config(None, tmp_path)
    write_config(
        tmp_path,
        '[[trinket]]\nname = "hang"\nuse = "tests.test_lanes:Hang"\n'
        'placement = "notification"\norder = 60\n\n[composer.deadlines]\nhang = 20\n',
    )
    assert load_config(None, tmp_path).composer.deadlines == {"hang": 20}


async def test_a_disabled_sections_deadline_does_not_refuse_the_start(tmp_path: Path) -> None:
    # README's configuration disables relevant_memories and gives it a deadline: the
    # daemon (and `frontmind simulate --layout none`, which disables sections) started
    # only to fail with "unknown sections" for a section that is known, only off.
    write_config(
        tmp_path,
        'disabled_sections = ["relevant_memories"]\n\n'
        "[composer.deadlines]\nrelevant_memories = 100\n",
    )
    async with Frontmind.open(tmp_path, offline=True) as fm:
        events = [e async for e in fm.turn("c1", "hello")]
        assert isinstance(events[-1], TurnCompleted)
        assert "relevant_memories" not in {s.name for s in events[-1].sections}


async def test_a_bad_trinket_deadline_is_a_startup_error(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        '[[trinket]]\nname = "hang"\nuse = "tests.test_lanes:Hang"\n'
        'placement = "notification"\norder = 60\ndeadline_ms = -1\n',
    )
    with pytest.raises(TrinketLoadError, match="'hang': deadline_ms must be greater than 0"):
        async with Frontmind.open(tmp_path, offline=True):
            pass


async def test_gather_times_out_each_slot_at_its_own_deadline() -> None:
    gate, open_gate = Gate(), Gate()
    open_gate.open.set()
    async with ActorSystem(stop_grace=0.05) as system:
        blocked = system.spawn(lambda: Recorder(gate), name="blocked")
        answering = system.spawn(lambda: Recorder(open_gate), name="answering")
        with anyio.fail_after(30):  # a regression waits out the gather's 60 s
            result = await scatter_gather(
                [blocked, answering], Block(), deadline=60, deadlines=[0.05, 60]
            )
        assert isinstance(result.outcomes[0], TimedOut)
        assert result.outcomes[0].elapsed >= 0.05
        # The other slot kept its own (longer) deadline and answered.
        assert result.outcomes[1] == Replied("answering", -1, result.outcomes[1].elapsed)
        gate.open.set()


class BreakingTtlPolicy:
    """A cache TTL policy that gets a bug once `broken` is set. A turn contains it (the
    turn fails, the actor goes on), but a preview asks it outside any turn: its error
    crashes the continuum's conversation actor, once per try."""

    broken = False

    def choose(self, view: CacheView) -> TtlChoice:
        if self.broken:
            raise RuntimeError("a bug in the TTL policy")
        return TtlChoice("5m", "5m", "fixed")


async def test_a_continuum_given_up_on_says_when_to_retry(tmp_path: Path) -> None:
    """The conversation actor crashed past its restart limit: the continuum is `Busy`,
    with `retry_after` the seconds until the supervisor takes it back (its cool-down),
    not a retry at once into the same refusal."""
    cooldown = RestartPolicy().cooldown  # the conversation actor's policy
    policy = BreakingTtlPolicy()
    async with Frontmind.open(tmp_path, offline=True, ttl_policy=policy) as fm:
        # A turn that completes keeps the lane loaded: a preview of a continuum without
        # one would spawn a lane of its own, and a fresh actor, every time.
        completed(await run_turn(fm, "ada", "hello"))
        policy.broken = True
        given_up: Busy | None = None
        for _ in range(10):  # each preview crashes the actor twice (it is retried once)
            try:
                await fm.context("ada", "hello")
            except ActorCrashed:
                continue  # restarted: not past its limit yet
            except Busy as exc:
                given_up = exc
                break
        assert given_up is not None, "the actor was never given up on"
        assert "recovering" in str(given_up)
        assert given_up.retry_after is not None
        assert 0 < given_up.retry_after <= cooldown
        with pytest.raises(Busy, match="recovering") as refused:
            await run_turn(fm, "ada", "again")
        assert refused.value.retry_after is not None
        assert 0 < refused.value.retry_after <= given_up.retry_after


async def test_a_background_worker_given_up_on_says_when_to_retry(tmp_path: Path) -> None:
    """`run_background` on a worker given up on for now: `Busy`, with the seconds left
    of its cool-down (set here on the kernel's cell, as a worker that crashed past its
    limit has it)."""
    async with Frontmind.open(tmp_path, offline=True) as fm:
        await fm.run_background()  # the wake sent on opening is behind us
        cell = fm._runtime._background._cell
        cell.state, cell._retry_at = ActorState.FAILED, time.monotonic() + 600
        with pytest.raises(Busy, match="background worker") as refused:
            await fm.run_background()
        assert refused.value.retry_after is not None
        assert 0 < refused.value.retry_after <= 600
