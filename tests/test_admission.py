"""Admission control: a bounded number of turns compose and stream at once, the rest wait
in a fair queue (round robin by user, then by continuum), and a turn is refused at the
door only when its wait would pass `turns.max_wait_s`, before anything is stored.

A real Frontmind (and the real daemon app on a socket) against the local Messages API.
Turns are held open by a user tool that waits for the test's go, so every step waits on
an event: the tool starting is the sign that its turn holds a slot."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import httpx2
import msgspec
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from actors import (
    Busy,
    Overloaded,
    SettingsError,
    ToolFinished,
    Turn,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
    TurnStream,
    validate_settings,
)
from actors._background import DroppedRecords
from frontmind import Frontmind
from frontmind.server._asgi import SocketLimits, serve_app
from frontmind.server._daemon import build_app
from frontmind.server._metrics import Metrics
from frontmind.server._sse import TurnEvents
from storage import NotFound, TurnRecord
from tests._harness import config
from tests._raw import address, answer_or_close

pytestmark = pytest.mark.anyio

LEFT_OUT = ("timeout", "failed", "stale")
HOLD = "call hold"  # the local model calls the `hold` tool when a message names it


class Tally:
    """A count a test waits on: `reach(n)` returns once it is `n` or more."""

    def __init__(self) -> None:
        self.value = 0
        self._changed = anyio.Event()

    def bump(self) -> None:
        self.value += 1
        self._changed.set()

    async def reach(self, n: int) -> None:
        with anyio.fail_after(20):
            while self.value < n:
                self._changed = anyio.Event()
                await self._changed.wait()


class Holds:
    """The `hold` tool: each call is counted as it starts and waits for its own go."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []  # (user, continuum), in start order
        self.running = 0
        self.most_running = 0
        self._gates: list[anyio.Event] = []
        self._arrived = Tally()

    def tool(self) -> Any:
        async def hold(turn: Turn) -> str:
            """Wait for the test's go."""
            gate = anyio.Event()
            self._gates.append(gate)
            self.started.append((turn.user, turn.continuum_id))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            self._arrived.bump()
            try:
                await gate.wait()
            finally:
                self.running -= 1
            return "held"

        return hold

    async def count(self, n: int) -> None:
        """Until `n` holds have started."""
        await self._arrived.reach(n)

    def release(self, index: int) -> None:
        self._gates[index].set()


@asynccontextmanager
async def opened(tmp_path: Path, holds: Holds, **turns: Any) -> AsyncIterator[Frontmind]:
    cfg = config(
        offline={"time_to_first_token_s": 0.0, "tokens_per_second": 0.0},
        turns=turns,
        tools={"timeout_s": 60},
    )
    async with Frontmind.open(tmp_path, cfg, offline=True, tools=[holds.tool()]) as fm:
        yield fm


class Answered:
    """An ASGI app whose requests are counted as they end (its call returned, however)."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None
        self.ended = Tally()

    def wrap(self, app: ASGIApp) -> ASGIApp:
        self.app = app
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        try:
            await self.app(scope, receive, send)
        finally:
            self.ended.bump()


def _as_is(app: ASGIApp) -> ASGIApp:
    return app


@asynccontextmanager
async def over_http(
    tmp_path: Path, holds: Holds, wrap: Callable[[ASGIApp], ASGIApp] = _as_is, **turns: Any
) -> AsyncIterator[tuple[Frontmind, httpx2.AsyncClient]]:
    """`opened`, served on a real socket (through `wrap`), with a client."""
    async with (
        opened(tmp_path, holds, **turns) as fm,
        serve_app(wrap(build_app(fm, metrics=Metrics())), graceful_seconds=10) as app,
        httpx2.AsyncClient(base_url=app.url, timeout=30) as http,
    ):
        yield fm, http


async def leave_mid_stream(http: httpx2.AsyncClient, holds: Holds, count: int) -> None:
    """`count` turns, each left mid-stream while its tool still waits."""
    for i in range(count):
        async with http.stream("POST", f"/v1/continuums/gone{i}/turns", json={"message": HOLD}):
            await holds.count(i + 1)


async def drain(stream: TurnStream, into: list[TurnEvent]) -> None:
    async with stream:
        async for event in stream:
            into.append(event)


async def hold_long(
    fm: Frontmind, holds: Holds, tg: anyio.abc.TaskGroup, held: list[TurnEvent]
) -> None:
    """A turn on continuum "long" that holds a slot (its `hold` tool waits for the
    test's go), read into `held` by a task of `tg`."""
    stream = fm.turn("long", HOLD)
    await stream.start()
    tg.start_soon(drain, stream, held)
    await holds.count(1)


def full(events: list[TurnEvent]) -> TurnCompleted:
    """The turn completed, with every section composed (none cut or stale)."""
    done = events[-1]
    assert isinstance(done, TurnCompleted), done
    assert done.sections
    assert not [s for s in done.sections if s.status in LEFT_OUT], done.sections
    return done


async def test_turns_beyond_the_slots_wait_and_all_complete_in_full(tmp_path: Path) -> None:
    holds = Holds()
    async with opened(tmp_path, holds, max_active=2) as fm:
        users = [fm.user("ann"), fm.user("bob")]
        results: list[list[TurnEvent]] = [[] for _ in range(6)]
        async with anyio.create_task_group() as tg:
            for i in range(6):
                stream = users[i % 2].turn(f"c{i}", HOLD)
                await stream.start()
                tg.start_soon(drain, stream, results[i])
            await holds.count(2)
            # Two hold their slots; the other four wait, none of them started.
            assert (fm.admission.active, fm.admission.waiting) == (2, 4)
            for i in range(6):
                await holds.count(i + 1)
                assert holds.running <= 2
                holds.release(i)
        assert holds.most_running == 2
        for events in results:
            full(events)
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)
        assert fm.admission.admitted == 6


async def test_one_users_burst_does_not_starve_another_user(tmp_path: Path) -> None:
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1) as fm:
        ann, bob = fm.user("ann"), fm.user("bob")
        results: list[list[TurnEvent]] = [[] for _ in range(11)]
        async with anyio.create_task_group() as tg:
            for i in range(10):
                stream = ann.turn(f"a{i}", HOLD)
                await stream.start()
                tg.start_soon(drain, stream, results[i])
            await holds.count(1)  # a0 holds the one slot; a1..a9 wait
            stream = bob.turn("b0", HOLD)
            await stream.start()
            tg.start_soon(drain, stream, results[10])
            assert fm.admission.waiting == 10
            for i in range(11):
                await holds.count(i + 1)
                holds.release(i)
        # Round robin by user: Bob's one turn goes right after Ann's next, not after
        # her whole backlog (which a plain FIFO would do: 11th).
        order = [f"{user[0]}{cid}" for user, cid in holds.started]
        assert order == ["aa0", "aa1", "bb0", *[f"aa{i}" for i in range(2, 10)]]
        for events in results:
            full(events)


async def test_a_users_continuums_take_turns_and_a_continuum_keeps_its_order(
    tmp_path: Path,
) -> None:
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1) as fm:
        results: list[list[TurnEvent]] = [[] for _ in range(4)]
        async with anyio.create_task_group() as tg:
            # x gets three turns in a row, then y one: y's goes before x's last two.
            for i, cid in enumerate(["x", "x", "x", "y"]):
                stream = fm.turn(cid, f"{HOLD} {i}")
                await stream.start()
                tg.start_soon(drain, stream, results[i])
            for i in range(4):
                await holds.count(i + 1)
                holds.release(i)
        assert [cid for _, cid in holds.started] == ["x", "y", "x", "x"]
        history = await fm.history("x")
        texts = [m.text() for m in history if m.role == "user" and m.text()]
        assert texts == [f"{HOLD} 0", f"{HOLD} 1", f"{HOLD} 2"]  # x's own order kept


class Delegate:
    """The `delegate` tool: a sub-agent, a turn of another continuum run from inside
    the calling turn's tool, read to its end."""

    def __init__(self, to: str) -> None:
        self.to = to  # the continuum asked ("" for the calling turn's own)
        self.fm: Frontmind | None = None
        self.answers: list[TurnEvent] = []
        self.waiting_after = -1  # turns waiting for a slot when the asked turn had ended

    def tool(self) -> Any:
        async def delegate(turn: Turn) -> str:
            """Ask another continuum."""
            assert self.fm is not None
            async with self.fm.user(turn.user).turn(self.to or turn.continuum_id, "hi") as s:
                self.answers = [event async for event in s]
            self.waiting_after = self.fm.admission.waiting
            done = self.answers[-1]
            return done.text if isinstance(done, TurnCompleted) else repr(done)

        return delegate


class AskingHelper:
    """Continuum "asking", whose tool asks continuum "helper" (a nested turn), while
    helper's own turn holds a slot (its `hold` tool waits for the test's go)."""

    def __init__(self, holds: Holds) -> None:
        self.holds = holds
        self.fm: Frontmind | None = None
        self._started = anyio.Event()

    def tool(self) -> Any:
        async def delegate(turn: Turn) -> str:
            """Ask the helper."""
            assert self.fm is not None
            async with self.fm.user(turn.user).turn("helper", "hi") as stream:
                await stream.start()
                self._started.set()
                events = [event async for event in stream]
            last = events[-1]
            return last.text if isinstance(last, TurnCompleted) else repr(last)

        return delegate

    async def nested_waits(self, tg: anyio.abc.TaskGroup, results: list[list[TurnEvent]]) -> None:
        """Start helper's turn and then asking's, read into `results[0]` and `[1]` by
        tasks of `tg`, until asking's nested turn waits for helper's."""
        assert self.fm is not None
        for i, (cid, text) in enumerate([("helper", HOLD), ("asking", "call delegate")]):
            stream = self.fm.user("ann").turn(cid, text)
            await stream.start()
            tg.start_soon(drain, stream, results[i])
        await self.holds.count(1)  # "helper" holds a slot
        with anyio.fail_after(20):
            await self._started.wait()  # "asking" holds the other; its nested turn waits


@asynccontextmanager
async def asking_helper(
    tmp_path: Path, holds: Holds
) -> AsyncIterator[tuple[Frontmind, AskingHelper]]:
    """A Frontmind with two turn slots, the `hold` tool and asking's `delegate`."""
    asking = AskingHelper(holds)
    cfg = config(
        offline={"time_to_first_token_s": 0.0, "tokens_per_second": 0.0},
        turns={"max_active": 2},
        tools={"timeout_s": 60},
    )
    async with Frontmind.open(
        tmp_path, cfg, offline=True, tools=[holds.tool(), asking.tool()]
    ) as fm:
        asking.fm = fm
        yield fm, asking


async def test_a_turn_started_from_a_tool_runs_at_once_on_a_slot_of_its_own(
    tmp_path: Path,
) -> None:
    # With every slot held by turns whose tools asked another continuum (a sub-agent),
    # the asked turns waited for a slot that their callers held until the tools timed
    # out: with one slot, a tool could never run a turn at all. A nested turn brings
    # its own slot and goes first; the queue's own turns still wait theirs.
    holds, delegate = Holds(), Delegate("helper")
    cfg = config(
        offline={"time_to_first_token_s": 0.0, "tokens_per_second": 0.0},
        turns={"max_active": 1},
        tools={"timeout_s": 60},
    )
    tools = [holds.tool(), delegate.tool()]
    async with Frontmind.open(tmp_path, cfg, offline=True, tools=tools) as fm:
        delegate.fm = fm
        held: list[TurnEvent] = []
        asked: list[TurnEvent] = []
        waiting: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            await hold_long(fm, holds, tg, held)  # the one slot, held
            asking = fm.turn("asking", "call delegate")
            await asking.start()
            tg.start_soon(drain, asking, asked)
            other = fm.user("bob").turn("other", HOLD)
            await other.start()
            tg.start_soon(drain, other, waiting)
            assert fm.admission.waiting == 2
            holds.release(0)  # "asking" has the slot next, and its tool asks "helper"
            await holds.count(2)  # then bob's turn, once "asking" has ended
            full(delegate.answers)
            assert delegate.waiting_after == 1  # bob's turn still waited for the slot
            holds.release(1)
        done = asked[-1]
        assert isinstance(done, TurnCompleted), asked
        assert "You said: “hi”" in done.text  # the helper's answer, well in time
        full(waiting)
        assert (fm.admission.active, fm.admission.waiting, fm.admission.nested) == (0, 0, 0)
        assert fm.admission.admitted == 4


async def test_a_tool_asking_its_own_continuum_is_refused_at_once(tmp_path: Path) -> None:
    # Its continuum runs one turn at a time: the nested turn would wait for the turn
    # that waits for it, until the tool's timeout.
    delegate = Delegate("")
    cfg = config(offline={"time_to_first_token_s": 0.0}, tools={"timeout_s": 60})
    async with Frontmind.open(tmp_path, cfg, offline=True, tools=[delegate.tool()]) as fm:
        delegate.fm = fm
        events: list[TurnEvent] = []
        with anyio.fail_after(30):  # far below the tool's timeout
            await drain(fm.turn("self", "call delegate"), events)
    done = events[-1]
    assert isinstance(done, TurnCompleted), events
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[0].is_error
    assert "is running the turn that started this one" in finished[0].content
    assert (fm.admission.active, fm.admission.waiting, fm.admission.nested) == (0, 0, 0)


async def test_a_tool_asking_back_the_continuum_that_asked_it_is_refused_at_once(
    tmp_path: Path,
) -> None:
    # "a" asks "b" (a sub-agent), whose tool asks "a" back: "a" runs the turn waiting on
    # all this, so the innermost turn waited for its own caller until the tools timed out.
    async def ask(turn: Turn) -> str:
        """Ask the other continuum."""
        other = "b" if turn.continuum_id == "a" else "a"
        async with fm.user(turn.user).turn(other, "call ask") as stream:
            events = [event async for event in stream]
        last = events[-1]
        return last.text if isinstance(last, TurnCompleted) else repr(last)

    cfg = config(offline={"time_to_first_token_s": 0.0}, tools={"timeout_s": 60})
    async with Frontmind.open(tmp_path, cfg, offline=True, tools=[ask]) as fm:
        events: list[TurnEvent] = []
        with anyio.fail_after(30):  # far below the tool's timeout
            await drain(fm.turn("a", "call ask"), events)
    assert isinstance(events[-1], TurnCompleted), events
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert not finished.is_error  # "b" answered: its own tool call failed at once
    assert "is running the turn that started this one" in finished.content
    assert (fm.admission.active, fm.admission.waiting, fm.admission.nested) == (0, 0, 0)


async def test_a_nested_turn_that_waits_for_its_continuum_keeps_its_slot_to_itself(
    tmp_path: Path,
) -> None:
    # The slot a nested turn brings is for it: while it waited for its continuum's
    # running turn, the queue's next turn took it, and more turns ran than max_active.
    holds = Holds()
    async with asking_helper(tmp_path, holds) as (fm, asking):
        results: list[list[TurnEvent]] = [[], [], []]
        async with anyio.create_task_group() as tg:
            await asking.nested_waits(tg, results)
            other = fm.user("bob").turn("other", HOLD)
            await other.start()
            tg.start_soon(drain, other, results[2])
            a = fm.admission
            assert (a.active, a.waiting, a.nested) == (2, 2, 1)  # bob's turn waits
            # The metrics say why more turns than max_active may run (once it does).
            metrics = Metrics()
            metrics.watch_admission(a)
            exposed = generate_latest(metrics.registry).decode()
            assert sample(exposed, "frontmind_turns_nested") == 1
            assert sample(exposed, "frontmind_turns_active") == 2
            holds.release(0)  # "helper" is free: the nested turn, then "asking", end
            await holds.count(2)  # and bob's turn has the slot "asking" gave back
            assert holds.started[1] == ("bob", "other")
            holds.release(1)
        for events in results:
            full(events)
        assert (a.active, a.waiting, a.nested) == (0, 0, 0)
        assert holds.most_running == 1


async def test_a_waiting_nested_turn_does_not_lengthen_the_queues_expected_wait(
    tmp_path: Path,
) -> None:
    # A nested turn waiting for its continuum was counted ahead of the queue's turns as
    # if it would take one of the shared slots: it runs on the slot it brought, so a
    # turn of another continuum was refused (and told to retry) a whole slot's turn
    # later than it would be served.
    holds = Holds()
    async with asking_helper(tmp_path, holds) as (fm, asking):
        warm: list[TurnEvent] = []
        await drain(fm.turn("warm", "hello"), warm)  # a measured turn time
        full(warm)
        a = fm.admission
        assert a.turn_seconds is not None
        results: list[list[TurnEvent]] = [[], [], []]
        async with anyio.create_task_group() as tg:
            await asking.nested_waits(tg, results)
            assert (a.active, a.waiting, a.nested) == (2, 1, 1)
            # Nothing ahead of bob's turn for the shared slots: it has the first of
            # them to free, at max_active slots a turn's time.
            assert a.expected_wait("bob", "other") == a.turn_seconds / 2
            a.max_wait_s = 0.75 * a.turn_seconds  # a wait of one slot passes; two don't
            first = fm.user("bob").turn("other", "hello")
            await first.start()  # taken in
            tg.start_soon(drain, first, results[2])
            late = fm.user("carl").turn("late", "hello")  # bob's turn is ahead of it
            with pytest.raises(Overloaded) as caught:
                await late.start()
            holds.release(0)  # "helper" is free: the nested turn, "asking", bob's turn end
        assert str(caught.value).startswith(
            "all 2 turn slots are taken and 1 turn waits for them: about "
        )
        for events in results:
            full(events)
        assert (a.active, a.waiting, a.nested) == (0, 0, 0)


async def test_a_turn_is_refused_at_the_door_when_the_wait_is_too_long(
    tmp_path: Path,
) -> None:
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1, max_wait_s=0.000_001) as fm:
        events: list[TurnEvent] = []
        await drain(fm.turn("warm", "hello"), events)  # a measured turn time
        full(events)
        held: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            await hold_long(fm, holds, tg, held)  # the one slot is taken
            refused = fm.turn("late", "hello")
            with pytest.raises(Busy) as caught:
                await refused.start()
            holds.release(0)
        assert isinstance(caught.value, Overloaded)
        assert caught.value.retry_after is not None
        assert caught.value.retry_after >= 1
        assert "max_wait_s" in str(caught.value)
        # What held it up, with no queue ("0 turns are waiting for one of 1 slots" read
        # as if nothing stood in the way).
        assert str(caught.value).startswith("the one turn slot is taken: about ")
        full(held)
        # Refused at the door: no actor started, nothing of it composed or stored but
        # its record, which says so (written by the background worker).
        assert "late" not in fm.loaded_continuums()
        await fm.run_background()  # the worker has taken what was sent before
        (record,) = await fm.turns("late")
        assert (record.status, record.user_text) == ("cancelled", "hello")
        assert record.error is not None
        assert record.error.startswith("overloaded: ")
        assert "max_wait_s" in record.error
        assert caught.value.turn_id == record.turn_id  # the refusal names its record
        assert await fm.history("late") == []
        assert fm.admission.refused == 1
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)


async def test_a_preview_composes_in_a_turn_slot_too(tmp_path: Path) -> None:
    # A preview (`context`, `compose`) composes every section as a turn does: a flood
    # of them on many continuums, outside the slots, lagged the loop until the turns'
    # own sections were cut. So it waits for a slot, or is refused at the door.
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1, max_wait_s=0.000_001) as fm:
        await drain(fm.turn("warm", "hello"), [])  # a measured turn time
        held: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            await hold_long(fm, holds, tg, held)  # the one slot is taken
            with pytest.raises(Overloaded):
                await fm.context("peek", "hello")
            with pytest.raises(Overloaded):
                await fm.user("bob").compose("peek", "hello")
            assert "peek" not in fm.loaded_continuums()  # nothing was composed
            holds.release(0)
        full(held)
        request = await fm.context("peek", "hello")  # a slot is free again
        assert request.messages
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)
        # A refused preview leaves no turn record: it was never a turn.
        assert [r.continuum_id for r in await fm.turns() if r.continuum_id == "peek"] == []


async def test_a_preview_behind_its_continuums_turn_holds_no_slot_while_it_waits(
    tmp_path: Path,
) -> None:
    # A preview of a continuum whose turn runs is answered after that turn (its
    # conversation actor takes one message at a time). Holding a slot meanwhile, it
    # sat idle, and another continuum's turn found no slot free.
    holds = Holds()
    async with opened(tmp_path, holds, max_active=2, max_wait_s=60) as fm:
        held: list[TurnEvent] = []
        previews: list[Any] = []

        async def preview() -> None:
            previews.append(await fm.context("long", "hello"))

        async with anyio.create_task_group() as tg:
            await hold_long(fm, holds, tg, held)  # one of the two slots is taken
            tg.start_soon(preview)
            await anyio.wait_all_tasks_blocked()  # the preview is in at the door
            assert (fm.admission.active, fm.admission.waiting) == (1, 1)  # behind "long"
            other: list[TurnEvent] = []
            with anyio.fail_after(20):  # the second slot is free: no wait for "long"
                await drain(fm.turn("other", "hello"), other)
            full(other)
            holds.release(0)
        full(held)
        (request,) = previews
        assert request.messages
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)


async def test_a_burst_of_refusals_leaves_every_record(tmp_path: Path) -> None:
    """Refusals come faster than the background worker writes (here: with no await
    between them), more of them than its mailbox holds: each refused turn still leaves
    its record."""
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1, max_wait_s=0.000_001) as fm:
        await drain(fm.turn("warm", "hello"), [])  # a measured turn time
        held: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            await hold_long(fm, holds, tg, held)  # the one slot is taken
            for i in range(100):
                with pytest.raises(Overloaded):
                    await fm.turn(f"late-{i}", f"hello {i}").start()
            holds.release(0)
        full(held)
        await fm.run_background()
        for i in range(100):
            (record,) = await fm.turns(f"late-{i}")
            assert (record.status, record.user_text) == ("cancelled", f"hello {i}")
            assert record.error is not None
            assert record.error.startswith("overloaded: ")
        assert fm.admission.refused == 100


async def test_a_user_deleted_after_their_turn_was_refused_keeps_no_record_of_it(
    tmp_path: Path,
) -> None:
    """A refused turn's record is written later, by the background worker: a delete of
    its user meanwhile must not be followed by that write, which left the turn's text
    and a continuum of a user who was forgotten."""
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1, max_wait_s=0.000_001) as fm:
        await fm.add_user("alice")
        alice, bob = fm.user("alice"), fm.user("bob")
        await drain(fm.turn("warm", "hello"), [])  # a measured turn time
        held: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            await hold_long(fm, holds, tg, held)  # the one slot is taken
            with pytest.raises(Overloaded):
                await alice.turn("a", "refused at the door").start()
            await fm.delete_user("alice")
            # A delete refused (bob was never added, and has no row yet) leaves the
            # user's refused turns their records.
            with pytest.raises(Overloaded):
                await bob.turn("b", "refused too").start()
            with pytest.raises(NotFound):
                await fm.delete_user("bob")
            holds.release(0)
        full(held)
        await fm.run_background()  # the worker has taken what was sent before
        assert await alice.turns() == []
        assert await alice.continuums() == []
        assert [r.user_text for r in await bob.turns("b")] == ["refused too"]


def test_records_waiting_for_the_worker_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    """Past its bounds (records, their text) the buffer lets the newest go, warning
    once per burst; what the worker takes empties it."""
    at = datetime.now(UTC)
    record = TurnRecord("t", "c", "cancelled", at, at, "m", "x" * 10)
    buffer = DroppedRecords(limit=2, text=25)
    with caplog.at_level(logging.WARNING, logger="frontmind.background"):
        for _ in range(4):
            buffer.add("u", record)
    assert (len(buffer.take()), buffer.let_go, buffer.waiting) == (2, 2, False)
    assert len([r for r in caplog.records if "let go" in r.getMessage()]) == 1
    buffer.add("u", record)
    buffer.add("u", msgspec.structs.replace(record, user_text="y" * 20))  # past the text
    assert (len(buffer.take()), buffer.let_go) == (1, 3)


async def test_a_turn_behind_its_own_continuums_turns_is_refused_when_they_take_too_long(
    tmp_path: Path,
) -> None:
    # A continuum's turns go one at a time: with slots free, a turn behind its
    # continuum's running one still waits for all of it, however fast slots free up.
    holds = Holds()
    async with opened(tmp_path, holds, max_active=4, max_wait_s=0.000_001) as fm:
        events: list[TurnEvent] = []
        await drain(fm.turn("warm", "hello"), events)  # a measured turn time
        full(events)
        held: list[TurnEvent] = []
        other: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            stream = fm.turn("c", HOLD)
            await stream.start()
            tg.start_soon(drain, stream, held)
            await holds.count(1)  # c's turn holds one of the four slots
            behind = fm.turn("c", "hello")
            with pytest.raises(Busy) as caught:
                await behind.start()
            beside = fm.turn("d", "hello")  # a slot is free for another continuum
            await beside.start()
            tg.start_soon(drain, beside, other)
            holds.release(0)
        assert not isinstance(caught.value, Overloaded)  # the continuum's state, a 429
        assert caught.value.retry_after is not None
        assert caught.value.retry_after >= 1
        assert "one at a time" in str(caught.value)
        assert "max_wait_s" in str(caught.value)
        full(held)
        full(other)
        assert fm.admission.refused == 1
        await fm.run_background()  # the worker has taken what was sent before
        records = [r for r in await fm.turns("c") if r.status == "cancelled"]
        assert [(r.user_text, (r.error or "").split(":")[0]) for r in records] == [
            ("hello", "busy")
        ]
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)


async def test_turns_left_as_they_start_do_not_shorten_the_measured_wait(
    tmp_path: Path,
) -> None:
    # Turns take about a second here. A client that leaves each of its turns as soon
    # as it starts frees its slot at once: that says nothing of how long turns take,
    # and must not make the door take in a queue far past max_wait_s.
    cfg = config(
        offline={"time_to_first_token_s": 1.0, "tokens_per_second": 0.0},
        turns={"max_active": 1, "max_wait_s": 1.5},
    )
    async with Frontmind.open(tmp_path, cfg, offline=True) as fm:
        events: list[TurnEvent] = []
        await drain(fm.turn("warm", "hello"), events)  # a measured turn time: about 1 s
        full(events)
        for i in range(60):
            async with fm.turn(f"left{i}", "hello") as left:
                assert isinstance(await left.__anext__(), TurnStarted)  # it holds the slot
        running: list[TurnEvent] = []
        async with anyio.create_task_group() as tg:
            stream = fm.turn("running", "hello")
            await stream.start()
            tg.start_soon(drain, stream, running)
            first = fm.turn("next", "hello")  # one turn ahead of it: about 1 s
            await first.start()
            tg.start_soon(drain, first, [])
            late = fm.turn("late", "hello")  # two ahead: about 2 s, past 1.5
            with pytest.raises(Overloaded):
                await late.start()
        full(running)


async def test_abandoned_turns_give_back_their_slot_and_their_place(tmp_path: Path) -> None:
    holds = Holds()
    async with opened(tmp_path, holds, max_active=1) as fm:
        running = fm.turn("a", HOLD)
        await running.start()
        async with running:
            assert isinstance(await running.__anext__(), TurnStarted)  # it holds the slot
            await holds.count(1)
            queued = fm.turn("b", "hello")
            await queued.start()
            assert fm.admission.waiting == 1
            await queued.aclose()  # left while waiting: its place goes at once
            assert fm.admission.waiting == 0
        # Left mid-stream (the tool still waiting): the slot goes with the stream, and
        # so do the lanes those turns started (nothing of them to keep in memory).
        assert fm.admission.active == 0
        assert fm.loaded_continuums() == []
        events: list[TurnEvent] = []
        with anyio.fail_after(20):
            await drain(fm.turn("c", "hello"), events)
        full(events)
        # A loaded continuum keeps its lane when a later turn of it is abandoned.
        async with fm.turn("c", HOLD) as left:
            await left.__anext__()
            await holds.count(2)
        assert fm.loaded_continuums() == ["c"]
        records = {r.continuum_id: r.status for r in await fm.turns()}
        assert records["a"] == "cancelled"
        # Taken in, then left before it started: its record says so, and nothing else
        # of it was stored.
        (left_b,) = [r for r in await fm.turns() if r.continuum_id == "b"]
        assert (left_b.status, left_b.user_text) == ("cancelled", "hello")
        assert left_b.error == "cancelled: the caller left before the turn started"
        assert await fm.history("b") == []


async def test_a_turn_left_before_its_actor_reached_it_leaves_a_record(tmp_path: Path) -> None:
    holds = Holds()
    async with opened(tmp_path, holds) as fm:
        stream = fm.turn("a", "hello")
        # Handed to the conversation actor (no await since), then left before the actor
        # ran it: its handler is cancelled at its first event.
        assert await stream._submit() is not None
        with anyio.fail_after(20):
            await stream.aclose()
        (record,) = await fm.turns("a")
        assert (record.turn_id, record.status) == (stream.turn_id, "cancelled")
        assert await fm.history("a") == []
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)
        assert fm.loaded_continuums() == []


# -- the daemon ----------------------------------------------------------------------------


def sample(metrics: str, name: str) -> float:
    for family in text_string_to_metric_families(metrics):
        for s in family.samples:
            if s.name == name:
                return s.value
    raise AssertionError(f"no {name} in /metrics")


async def sse_events(response: httpx2.Response) -> list[str]:
    return [line[7:] async for line in response.aiter_lines() if line.startswith("event: ")]


async def test_readiness_ends_when_shutdown_begins(tmp_path: Path) -> None:
    # A balancer holding its connection open through the shutdown's grace saw "ready"
    # and kept sending turns that could only end as shutting down.
    async with over_http(tmp_path, Holds()) as (fm, http):
        assert (await http.get("/readyz")).json() == {"status": "ready"}
        fm.drain()  # what SIGTERM does first
        stopping = await http.get("/readyz")
        assert stopping.status_code == 503
        assert stopping.json()["error"]["type"] == "shutting_down"
        assert (await http.get("/healthz")).status_code == 200  # alive all the same


async def test_the_daemon_queues_shows_the_queue_and_refuses_with_retry_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="frontmind")
    holds = Holds()
    async with over_http(tmp_path, holds, max_active=1, max_wait_s=0.000_001) as (fm, http):
        body = {"message": HOLD}
        async with http.stream("POST", "/v1/continuums/c1/turns", json=body) as held:
            assert held.status_code == 200
            await holds.count(1)
            # Nothing measured yet: a second turn waits (it is not refused on a guess).
            queued_body = {"message": "hello"}
            async with http.stream("POST", "/v1/continuums/c2/turns", json=queued_body) as queued:
                assert queued.status_code == 200  # its headers: queued, not started
                metrics = (await http.get("/metrics")).text
                assert sample(metrics, "frontmind_turn_queue_depth") == 1
                assert sample(metrics, "frontmind_turns_active") == 1
                assert sample(metrics, "frontmind_turns_max_active") == 1
                holds.release(0)
                assert (await sse_events(held))[-1] == "turn.completed"
                assert (await sse_events(queued))[-1] == "turn.completed"
        metrics = (await http.get("/metrics")).text
        assert sample(metrics, "frontmind_turn_queue_wait_seconds_count") == 2
        assert sample(metrics, "frontmind_turn_queue_wait_seconds_sum") > 0  # c2 waited
        async with http.stream("POST", "/v1/continuums/c3/turns", json=body) as held:
            await holds.count(2)
            refused = await http.post("/v1/continuums/c4/turns", json={"message": "hello"})
            holds.release(1)
            assert (await sse_events(held))[-1] == "turn.completed"
        assert refused.status_code == 503
        assert int(refused.headers["retry-after"]) >= 1
        error = refused.json()["error"]
        assert error["type"] == "overloaded"
        assert "max_wait_s" in error["message"]
        # Nothing of it composed or stored but its record, which says so.
        await fm.run_background()  # the worker has taken what was sent before
        (record,) = (await http.get("/v1/continuums/c4/turns")).json()["turns"]
        assert (record["status"], record["user_text"]) == ("cancelled", "hello")
        assert record["error"].startswith("overloaded: ")
        assert error["turn_id"] == record["turn_id"]  # the refusal names its record
        assert (await http.get("/v1/continuums/c4/messages")).json()["messages"] == []
        # A refusal is the service's state, not a fault: one line, no traceback.
        said = [r for r in caplog.records if "overloaded on /v1/continuums/c4" in r.getMessage()]
        assert [(r.levelno, r.exc_info) for r in said] == [(logging.INFO, None)]
        metrics = (await http.get("/metrics")).text
        assert sample(metrics, "frontmind_turns_refused_total") == 1
        assert sample(metrics, "frontmind_turn_queue_depth") == 0


def turn_request(url: str, continuum: str, message: str) -> bytes:
    host, port = address(url)
    body = f'{{"message": "{message}"}}'.encode()
    return (
        f"POST /v1/continuums/{continuum}/turns HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


async def test_turns_waiting_for_a_slot_give_way_to_another_clients_connection(
    tmp_path: Path,
) -> None:
    # One address's turns queued for the one slot hold every connection: a client at
    # another address still gets one, taken from a turn that has not started (its
    # stream ends with an `overloaded` error event), never from the one running.
    holds = Holds()
    limits = SocketLimits(max_connections=3)
    async with (
        opened(tmp_path, holds, max_active=1) as fm,
        serve_app(build_app(fm, metrics=Metrics()), limits=limits) as served,
    ):
        host, port = address(served.url)
        flood = [await anyio.connect_tcp(host, port, local_host="127.0.0.2") for _ in range(3)]
        heads = [b""] * 3
        with anyio.fail_after(20):
            await flood[0].send(turn_request(served.url, "a", HOLD))
            await holds.count(1)  # a holds the slot
            for i, continuum in ((1, "b"), (2, "c")):
                await flood[i].send(turn_request(served.url, continuum, "hello"))
                while b"\r\n\r\n" not in heads[i]:  # its answer has begun: it waits
                    heads[i] += await flood[i].receive()
            assert fm.admission.waiting == 2
            other = await anyio.connect_tcp(host, port, local_host="127.0.0.1")
            await other.send(
                b"GET /healthz HTTP/1.1\r\nhost: %s:%d\r\n\r\n" % (host.encode(), port)
            )
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += await other.receive()
            await other.aclose()
            holds.release(0)
            ends = [heads[i] + await answer_or_close(flood[i]) for i in range(3)]
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert b"event: turn.completed" in ends[0]  # the running turn is never taken
        evicted = [e for e in ends[1:] if b"event: turn.completed" not in e]
        assert len(evicted) == 1, ends
        assert b"event: error" in evicted[0]
        assert b'"type":"overloaded"' in evicted[0]
        assert b"event: turn.started" not in evicted[0]
        records = {r.continuum_id: r.status for r in await fm.turns()}
        assert sorted(records.values()) == ["cancelled", "completed", "completed"]
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)


async def test_a_client_that_disconnects_gives_its_slot_back(tmp_path: Path) -> None:
    holds = Holds()
    async with over_http(tmp_path, holds, max_active=1) as (fm, http):
        await leave_mid_stream(http, holds, 3)
        # The next turn gets the slot (it would wait forever for a slot still held).
        with anyio.fail_after(20):
            async with http.stream(
                "POST", "/v1/continuums/next/turns", json={"message": "hi"}
            ) as r:
                assert (await sse_events(r))[-1] == "turn.completed"
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)


async def test_a_turn_left_mid_stream_leaves_no_reference_cycle(tmp_path: Path) -> None:
    # Issue 27, item 5: what an abandoned turn held (its connection: uvicorn's protocol,
    # transport and request cycle, the daemon's own wrappers; its stream: the pump's
    # cancellation and the turn's objects its traceback reaches) goes when the turn ends,
    # by reference counting. In cycles, it would wait for a full collection, which the
    # daemon's `idle` policy runs rarely under load: after 1,000 abandoned turns the
    # daemon kept 10 MiB more, 1.4 without the cycles (bench/README, bench.abandon).
    holds, answered = Holds(), Answered()
    async with over_http(tmp_path, holds, answered.wrap, max_active=4) as (fm, http):
        gc.collect()
        gc.disable()  # what is cyclic stays for the look below
        try:
            await leave_mid_stream(http, holds, 3)
            await answered.ended.reach(3)  # the server is done with them: each turn closed
            await anyio.lowlevel.checkpoint()  # and its request task's done callbacks ran
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            left = [type(o).__name__ for o in gc.garbage if _the_servers(o)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert left == []
        assert (fm.admission.active, fm.admission.waiting) == (0, 0)


def _the_servers(found: object) -> bool:
    """A connection's or an SSE response's object, or a cancellation raised through one
    (not another part of the process: the client, the local model)."""
    if isinstance(found, (H11Protocol, RequestResponseCycle, TurnEvents)):
        return True
    if not isinstance(found, asyncio.CancelledError):
        return False
    tb = found.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(("_sse.py", "h11_impl.py")):
            return True
        tb = tb.tb_next
    return False


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        ({"max_active": 0}, "turns.max_active: must be greater than 0"),
        ({"max_wait_s": 0}, "turns.max_wait_s: must be greater than 0"),
    ],
)
def test_the_limits_must_be_positive(turns: dict[str, float], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        validate_settings(config(turns=turns))
