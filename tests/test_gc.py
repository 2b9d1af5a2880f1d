"""The `idle` garbage-collection policy: no full collection while a turn is in flight.

Nothing here is timed: the collector's own callbacks say which generation each
collection took and whether a turn was running, and the thresholds say what CPython
would do next.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from frontmind import ConfigError, load_config
from frontmind._gc import VALVE, IdleCollector
from frontmind.localapi import LocalMessagesAPI
from tests._daemon import daemon
from tests._harness import completed, config, frontmind, run_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


class _Watch:
    """Records the collections that start while `in_turn`, and wakes a waiter on the
    first full collection outside a turn."""

    def __init__(self) -> None:
        self.in_turn = False
        self.during_turn: list[int] = []  # the generation of each collection
        self.full_after = anyio.Event()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "start":
            return
        if self.in_turn:
            self.during_turn.append(info["generation"])
        elif info["generation"] == 2:
            self.full_after.set()


def _process_gc() -> tuple[tuple[int, int, int], list[Any], int]:
    return gc.get_threshold(), list(gc.callbacks), gc.get_freeze_count()


async def test_the_library_leaves_the_collector_alone_by_default(
    tmp_path: Path, api: LocalMessagesAPI
) -> None:
    before = _process_gc()
    async with frontmind(api, tmp_path) as fm:
        assert fm._collector is None
        completed(await run_turn(fm, "c1", "hello"))
        assert _process_gc() == before
    assert _process_gc() == before


async def test_idle_policy_keeps_full_collections_off_the_turn_path(
    tmp_path: Path, api: LocalMessagesAPI
) -> None:
    saved = gc.get_threshold()
    before = _process_gc()
    watch = _Watch()
    gc.callbacks.append(watch)
    try:
        async with frontmind(api, tmp_path, cfg=config(runtime={"gc": "idle"})) as fm:
            assert fm._collector is not None
            assert gc.get_threshold() == (saved[0], saved[1], saved[2] * VALVE)
            assert gc.get_freeze_count() > 0  # startup's objects are out of the walk
            completed(await run_turn(fm, "c1", "a first turn loads the continuum"))
            # CPython's count now asks for a full collection at the next chance, and the
            # young generation is one allocation short of its threshold: under CPython's
            # own schedule the turn's first allocations would collect everything.
            for _ in range(saved[2] + 1):
                gc.collect(1)
            assert gc.get_count()[2] > saved[2]
            ballast: list[list[int]] = [[] for _ in range(saved[0] - gc.get_count()[0])]
            watch.full_after = anyio.Event()  # opening collected in full, twice
            watch.in_turn = True
            events = await run_turn(fm, "c1", "hello again")
            watch.in_turn = False
            completed(events)
            assert 0 in watch.during_turn, "the turn ran no young collection at all"
            assert 2 not in watch.during_turn
            assert fm._collector.collections == 0
            # Once no turn is in flight, the full collection CPython wanted runs.
            with anyio.fail_after(10):
                await watch.full_after.wait()
            assert fm._collector.collections == 1
            del ballast
        assert _process_gc() == (before[0], [*before[1], watch], before[2])
    finally:
        gc.callbacks.remove(watch)


@pytest.mark.slow
async def test_the_daemon_keeps_full_collections_off_turns_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    """The daemon uses the policy unless told otherwise, and says so in its metrics."""
    async with daemon(tmp_path) as d, d.client() as client:
        for i in range(3):
            response = await client.post("/v1/continuums/c1/turns", json={"message": f"turn {i}"})
            assert response.status_code == 200
        metrics = (await client.get("/metrics")).text
        assert 'frontmind_gc_full_collections_total{when="turn"} 0.0' in metrics
        assert 'frontmind_gc_full_collections_total{when="idle"}' in metrics
        assert 'python_gc_collections_total{generation="2"}' in metrics
        assert await d.stop() == 0
    (tmp_path / "frontmind.toml").write_text('[runtime]\ngc = "python"\n')
    async with daemon(tmp_path) as d, d.client() as client:
        metrics = (await client.get("/metrics")).text
        assert "frontmind_gc_full_collections_total" not in metrics
        assert await d.stop() == 0


def test_a_bad_gc_policy_is_refused_naming_its_key(tmp_path: Path) -> None:
    (tmp_path / "frontmind.toml").write_text('[runtime]\ngc = "never"\n')
    with pytest.raises(ConfigError, match=r"runtime\.gc"):
        load_config(None, tmp_path, environ={})
    (tmp_path / "frontmind.toml").write_text('[runtime]\ngc = "idle"\n')
    assert load_config(None, tmp_path, environ={}).runtime.gc == "idle"


async def test_a_turns_history_and_request_are_not_tracked_by_the_collector(
    tmp_path: Path, api: LocalMessagesAPI
) -> None:
    """Thousands of them per turn at a long history: tracked, they alone set off young
    collections on every turn. Frozen and holding only strings, they cannot form cycles."""
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "remind me to water the plants in 10 minutes"))
        history = await fm.history("c1")
        request = await fm.context("c1", "and again")
    blocks = [b for m in history for b in m.content]
    assert {type(b).__name__ for b in blocks} >= {"TextBlock", "ToolUseBlock", "ToolResultBlock"}
    assert not any(gc.is_tracked(x) for x in [*history, *blocks])
    out = [b for m in request.messages for b in m.content]
    assert not any(gc.is_tracked(x) for x in [*request.messages, *out])
    assert any(getattr(b, "cache_control", None) is not None for b in out)


class _Starts:
    """Records the generation of every collection that starts."""

    def __init__(self) -> None:
        self.generations: list[int] = []

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.generations.append(info["generation"])


def _young_batches(n: int = 5) -> list[list[list[int]]]:
    """Enough new containers to pass the young threshold `n` times over."""
    return [[[] for _ in range(gc.get_threshold()[0] + 1)] for _ in range(n)]


def test_no_automatic_collection_runs_inside_a_composition() -> None:
    """A young collection (10-26 ms under load) or the valve's full one landing inside
    a deadline-bound gather is the composition's tail: under the policy none starts
    there, and the allocations made meanwhile are collected right after."""
    collector = IdleCollector()
    starts = _Starts()
    gc.callbacks.append(starts)
    try:
        with collector.installed():
            starts.generations.clear()  # installing collects, twice, on purpose
            with collector.composing(), collector.composing():  # two overlap
                assert not gc.isenabled()
                held = _young_batches()
                assert starts.generations == []
            assert gc.isenabled()
            more = _young_batches(1)
            assert starts.generations  # collected again at the next allocations
            del held, more
        # Outside the policy, a composition changes nothing.
        with collector.composing():
            assert gc.isenabled()
    finally:
        gc.callbacks.remove(starts)
    assert gc.isenabled()


def test_compositions_back_to_back_let_a_collection_through_at_the_bound() -> None:
    """Under load the compositions overlap without a gap: once the young generation
    passes the bound one collection runs, and collection is held again after it."""
    collector = IdleCollector(hold_max=2)
    starts = _Starts()
    gc.callbacks.append(starts)
    try:
        with collector.installed(), collector.composing():
            starts.generations.clear()  # installing collects, twice, on purpose
            kept = _young_batches(5)  # well past twice the threshold: no collection
            assert starts.generations == []
            assert not gc.isenabled()
            with collector.composing():  # the bound is passed: a collection may run
                assert gc.isenabled()
                kept.append([[]])
                assert starts.generations
            with collector.composing():  # it ran: held again, the overlap going on
                assert not gc.isenabled()
                ran = len(starts.generations)
                kept.extend(_young_batches(1))
                assert len(starts.generations) == ran
            del kept
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(starts)


def test_the_hold_leaves_collection_off_when_the_application_turned_it_off() -> None:
    collector = IdleCollector()
    gc.disable()
    try:
        with collector.installed():
            with collector.composing():
                assert not gc.isenabled()
            assert not gc.isenabled()
    finally:
        gc.enable()


def test_closing_the_policy_inside_a_composition_enables_collection() -> None:
    collector = IdleCollector()
    policy = ExitStack()
    policy.enter_context(collector.installed())
    with collector.composing():
        assert not gc.isenabled()
        policy.close()  # the instance closes while its composition still runs
        assert gc.isenabled()
    assert gc.isenabled()


async def test_the_turns_composition_runs_under_the_hold(
    tmp_path: Path, api: LocalMessagesAPI
) -> None:
    """Wired: the composer of a real turn runs with automatic collection held."""
    seen: list[bool] = []
    async with frontmind(api, tmp_path, cfg=config(runtime={"gc": "idle"})) as fm:
        assert fm._collector is not None
        hold = fm._collector.composing

        @contextmanager
        def watched() -> Iterator[None]:
            with hold():
                seen.append(gc.isenabled())
                yield

        fm._collector.composing = watched  # type: ignore[method-assign]
        completed(await run_turn(fm, "c1", "hello"))
        assert gc.isenabled()
    assert seen == [False]


def test_compositions_in_several_threads_leave_collection_on() -> None:
    """Instances on event loops in other threads share the hold: however their
    compositions interleave, collection is back on once the last one ends."""
    collector = IdleCollector()
    barrier = threading.Barrier(4)

    def compose_often() -> None:
        barrier.wait()
        for _ in range(5_000):
            with collector.composing():
                pass

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: an unguarded count drifts
    try:
        with collector.installed():
            threads = [threading.Thread(target=compose_often) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sys.setswitchinterval(switch)
            assert gc.isenabled()
            with collector.composing():  # the count came back to zero: a new hold begins
                assert not gc.isenabled()
    finally:
        sys.setswitchinterval(switch)
    assert gc.isenabled()


async def test_a_composition_that_never_ends_holds_collection_no_longer_than_the_bound() -> None:
    """The bound holds without compositions starting or ending: the collector's task
    looks at it too, so a composition stuck for good cannot keep collection off."""
    collector = IdleCollector(hold_max=2, backstop_s=0.01)
    looked = anyio.Event()
    backstop = collector._backstop

    def watched() -> None:
        backstop()
        if gc.isenabled():
            looked.set()

    collector._backstop = watched  # type: ignore[method-assign]
    starts = _Starts()
    gc.callbacks.append(starts)
    try:
        with collector.installed(), collector.composing():
            kept = _young_batches(5)
            assert not gc.isenabled()
            starts.generations.clear()
            async with anyio.create_task_group() as tg:
                tg.start_soon(collector.run)
                with anyio.fail_after(10):
                    await looked.wait()
                kept.append([[]])
                assert starts.generations  # the collection it let through ran
                tg.cancel_scope.cancel()
            del kept
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(starts)


def test_the_bound_follows_the_applications_threshold() -> None:
    """An application that sets its own young threshold after the policy is installed
    moves the bound with it; a threshold of 0 (automatic collection off) lets nothing
    through."""
    collector = IdleCollector(hold_max=2)
    saved = gc.get_threshold()
    try:
        with collector.installed(), collector.composing():
            kept = _young_batches(5)  # past 2 x the threshold of 700
            gc.set_threshold(saved[0] * 10, *gc.get_threshold()[1:])
            with collector.composing():  # not past 2 x 7,000: held still
                assert not gc.isenabled()
            gc.set_threshold(0, *gc.get_threshold()[1:])
            with collector.composing():
                assert not gc.isenabled()
            del kept
        assert gc.isenabled()
    finally:
        gc.set_threshold(*saved)
