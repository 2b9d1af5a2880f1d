"""The background worker's embedding of memories that wait for a vector: one memory the
embedder cannot embed (it answers a vector the store refuses, or raises for that text)
is held back with a backoff, and every other memory still gets its vector.

Through the library (offline local API, SQLite) and through the worker alone on a real
SQLite store, on a manual clock: no test sleeps."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from actors import _background
from actors._background import BackgroundWorker, Drain
from frontmind._frontmind import NoModel
from frontmind.localapi import LocalMessagesAPI, ScriptedResponder
from runtime import ActorSystem
from storage import DEFAULT_USER, SQLiteStorage, backoff
from tests._harness import FakeClock, completed, config, frontmind, run_turn

pytestmark = pytest.mark.anyio

WIDTH = 4
POISON = "42 :-) 99"  # no letters: an embedder with no token for it answers zeros
REFUSED = "REFUSED input the service rejects"


def letters_vector(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return [0.0] * WIDTH
    return [float(len(words)), float(sum(map(len, words))), 1.0, 0.5]


class ZeroForSymbols:
    """Like many real embedders on a text with no known token: all zeros for it."""

    dimensions = WIDTH

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [letters_vector(t) for t in texts]


class RefusesOne:
    """A hosted API that rejects the whole request when one input is refused."""

    dimensions = WIDTH

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any(t.startswith("REFUSED") for t in texts):
            raise RuntimeError("400: one input was rejected")
        return [letters_vector(t) for t in texts]


class Switchable:
    """Refuses the texts in `refused` (by raising, or with a vector of another width or
    a NaN, per `how`) until the test takes them out; records every call."""

    def __init__(self, refused: set[str], how: str = "raise") -> None:
        self.refused = refused
        self.how = how
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        bad = self.refused.intersection(texts)
        if bad and self.how == "raise":
            raise RuntimeError("400: one input was rejected")
        vectors = [letters_vector(t) for t in texts]
        for index, text in enumerate(texts):
            if text in bad and self.how == "wide":
                vectors[index] = [*vectors[index], 1.0]
            elif text in bad and self.how == "nan":
                vectors[index][0] = float("nan")
        return vectors

    def embedded(self, text: str) -> int:
        return sum(text in call for call in self.calls)


class Hung:
    """Never answers; says when a call started."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.started.set()
        await anyio.Event().wait()
        raise AssertionError("never answered")


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


def good(n: int) -> str:
    return f"the user likes topic number {n} alpha beta"


async def waiting_texts(store: SQLiteStorage) -> set[str]:
    return {m.text for m in await store.memories_without_vectors(limit=-1)}


# -- through the library ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("embedder", "bad"),
    [
        ("tests.test_embedding_worker:ZeroForSymbols", POISON),
        ("tests.test_embedding_worker:RefusesOne", REFUSED),
    ],
)
async def test_one_memory_the_embedder_cannot_embed_blocks_no_other(
    api: LocalMessagesAPI,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    embedder: str,
    bad: str,
) -> None:
    clock = FakeClock()
    cfg = config(memory={"embedder": embedder})
    async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
        await fm.run_background()  # the wake sent on opening is behind us
        poison = await fm.remember(bad)  # the oldest: read first by every pass
        for n in range(70):  # more than one batch behind it
            await fm.remember(good(n))
        caplog.set_level(logging.WARNING, logger="frontmind.background")
        await fm.run_background()
        assert await fm.storage.count_memories_without_vectors() == 1
        assert isinstance(fm.storage, SQLiteStorage)
        assert await waiting_texts(fm.storage) == {bad}
        told = [r.getMessage() for r in caplog.records if f"memory {poison.id} " in r.getMessage()]
        assert len(told) == 1, told
        assert bad not in "\n".join(r.getMessage() for r in caplog.records)
        # The next passes within its backoff leave it alone, and say nothing of it.
        caplog.clear()
        await fm.run_background()
        await fm.run_background()
        assert not [r for r in caplog.records if f"memory {poison.id} " in r.getMessage()]
        assert await fm.storage.count_memories_without_vectors() == 1
        # A memory added later is embedded too: the held one is not read in its place.
        await fm.remember(good(100))
        await fm.run_background()
        assert await fm.storage.count_memories_without_vectors() == 1


# -- the worker alone, on a real SQLite store -----------------------------------------


async def no_prefix(*_: object) -> Any:
    raise AssertionError("no summary is asked for")


@asynccontextmanager
async def running(
    store: SQLiteStorage, embedder: object, clock: FakeClock
) -> AsyncIterator[Callable[[], Awaitable[object]]]:
    """The worker as the engine runs it (an actor); yields one pass: `await drain()`."""
    async with ActorSystem() as system:
        worker = system.spawn(
            lambda: BackgroundWorker(
                store,
                NoModel(),
                prefix=no_prefix,
                busy=list,
                clock=clock,
                embedder=embedder,  # type: ignore[arg-type]
            ),
            name="background",
        )
        yield partial(worker.ask, Drain())


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    async with await SQLiteStorage.open(tmp_path / "db.sqlite") as storage:
        await storage.use_embedder("test-embedder", WIDTH)
        yield storage


async def test_a_held_memory_is_tried_again_after_its_backoff_and_then_embedded(
    store: SQLiteStorage,
) -> None:
    clock = FakeClock()
    await store.add_memory(DEFAULT_USER, REFUSED)
    for n in range(5):
        await store.add_memory(DEFAULT_USER, good(n))
    embedder = Switchable({REFUSED})
    async with running(store, embedder, clock) as drain:
        await drain()
        assert await waiting_texts(store) == {REFUSED}
        assert embedder.embedded(REFUSED) == 2  # in the batch, then alone
        # Within its backoff it is not tried again, not even by a later pass.
        clock.advance(backoff(1) - 1)
        await drain()
        assert embedder.embedded(REFUSED) == 2
        # After it, it is; it fails again, and waits twice as long.
        clock.advance(1)
        await drain()
        assert embedder.embedded(REFUSED) == 4
        assert await waiting_texts(store) == {REFUSED}
        embedder.refused.clear()  # the service accepts it now
        clock.advance(backoff(2) - 1)
        await drain()
        assert embedder.embedded(REFUSED) == 4
        assert await waiting_texts(store) == {REFUSED}
        clock.advance(1)
        await drain()
        assert embedder.embedded(REFUSED) == 5
        assert await store.count_memories_without_vectors() == 0


@pytest.mark.parametrize("how", ["wide", "nan"])
async def test_a_vector_the_store_refuses_is_held_back_alone(
    store: SQLiteStorage, how: str
) -> None:
    # A vector of another dimension (only the store knows it) or with a NaN in it.
    clock = FakeClock()
    for n in range(3):
        await store.add_memory(DEFAULT_USER, good(n))
    await store.add_memory(DEFAULT_USER, "the odd one out")
    for n in range(3, 6):
        await store.add_memory(DEFAULT_USER, good(n))
    embedder = Switchable({"the odd one out"}, how=how)
    async with running(store, embedder, clock) as drain:
        await drain()
        assert await waiting_texts(store) == {"the odd one out"}
        await drain()
    assert embedder.embedded("the odd one out") == 1  # the second pass held it back


async def test_a_changed_text_is_not_held_back_for_the_old_one(store: SQLiteStorage) -> None:
    clock = FakeClock()
    memory = await store.add_memory(DEFAULT_USER, REFUSED)
    embedder = Switchable({REFUSED})
    async with running(store, embedder, clock) as drain:
        await drain()
        assert await waiting_texts(store) == {REFUSED}
        # The same memory said again in other words, stored without a vector (as a
        # summary's update is without one): embedded within the old text's backoff.
        async with store._transaction() as db:
            await store._update_memory(db, DEFAULT_USER, memory.id, "a new text", 0.5)
        await drain()
    assert await store.count_memories_without_vectors() == 0


async def test_more_bad_memories_than_are_held_still_let_the_others_through(
    store: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two held at most, batches of three: five bad memories among the good ones.
    monkeypatch.setattr(_background, "SKIPPED_MAX", 2)
    monkeypatch.setattr(_background, "EMBED_BATCH", 3)
    clock = FakeClock()
    bad = {f"{n} {n}" for n in range(5)}
    for n in range(6):
        if n < 5:
            await store.add_memory(DEFAULT_USER, f"{n} {n}")
        await store.add_memory(DEFAULT_USER, good(n))
    async with running(store, ZeroForSymbols(), clock) as drain:
        # A pass reads on past every memory it cannot embed, held back or not: the
        # good ones behind them all get theirs in that pass.
        await drain()
        assert await waiting_texts(store) == bad


async def test_a_held_memory_that_no_longer_waits_is_forgotten(store: SQLiteStorage) -> None:
    clock = FakeClock()
    memory = await store.add_memory(DEFAULT_USER, POISON)
    worker = BackgroundWorker(
        store, NoModel(), prefix=no_prefix, busy=list, clock=clock, embedder=ZeroForSymbols()
    )
    await worker.handle(Drain())
    assert set(worker._skipped) == {memory.id}
    await store.delete_memory(DEFAULT_USER, memory.id)
    clock.advance(backoff(1))
    await worker.handle(Drain())
    assert not worker._skipped


async def test_a_held_memory_due_during_a_long_pass_keeps_its_backoff(
    store: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass after a change of embedder lasts hours: a memory held back when the pass
    read it, whose retry came due later in the same pass, was taken at the pass's end
    for one that no longer waits and forgotten, so its next failure was its first
    again (the shortest backoff, logged as new, on every pass). It keeps its count."""
    monkeypatch.setattr(_background, "EMBED_BATCH", 1)
    monkeypatch.setattr(_background, "EMBED_SLICE_S", 0.0)
    clock = FakeClock()
    held = await store.add_memory(DEFAULT_USER, REFUSED)  # the oldest: read first
    worker = BackgroundWorker(
        store, NoModel(), prefix=no_prefix, busy=list, clock=clock, embedder=Switchable({REFUSED})
    )
    await worker.handle(Drain())
    assert worker._skipped[held.id].attempts == 1

    class Slow(Switchable):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            clock.advance(backoff(1))  # the pass's hours, one call
            return await super().embed(texts)

    for n in range(3):
        await store.add_memory(DEFAULT_USER, good(n))
    worker._embedder = Slow({REFUSED})
    await worker.handle(Drain())  # read while held; due before the pass ended
    assert await waiting_texts(store) == {REFUSED}
    assert worker._skipped[held.id].attempts == 1  # kept, not forgotten
    await worker.handle(Drain())  # tried again, failed again: twice now
    assert worker._skipped[held.id].attempts == 2


async def test_an_embedder_that_keeps_failing_ends_the_pass_after_a_few_calls(
    store: SQLiteStorage,
) -> None:
    clock = FakeClock()
    texts = [good(n) for n in range(10)]
    for text in texts:
        await store.add_memory(DEFAULT_USER, text)
    embedder = Switchable(set(texts))  # a service that is down refuses everything
    async with running(store, embedder, clock) as drain:
        await drain()
        # The batch, then three texts alone: not one call per memory.
        assert len(embedder.calls) == 1 + _background.ALONE_FAILURES
        assert await store.count_memories_without_vectors() == 10
        # Once it is back, the next pass embeds those not held back; later, all.
        embedder.refused.clear()
        await drain()
        assert await store.count_memories_without_vectors() == _background.ALONE_FAILURES
        clock.advance(backoff(1))
        await drain()
        assert await store.count_memories_without_vectors() == 0


async def test_a_hung_embedder_does_not_hold_the_worker(
    store: SQLiteStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_background, "EMBED_TIMEOUT_S", 0.05)
    clock = FakeClock()
    await store.add_memory(DEFAULT_USER, good(1))
    await store.add_memory(DEFAULT_USER, good(2))
    embedder = Hung()
    with anyio.fail_after(30):
        async with running(store, embedder, clock) as drain:
            await drain()  # the batch late, then the first text alone: the pass ends
            await drain()  # the worker still answers; the second memory is tried
    assert embedder.calls == 4
    assert await store.count_memories_without_vectors() == 2


async def test_cancelling_the_worker_during_an_embedding_call_goes_through(
    store: SQLiteStorage,
) -> None:
    clock = FakeClock()
    await store.add_memory(DEFAULT_USER, good(1))
    embedder = Hung()
    worker = BackgroundWorker(
        store, NoModel(), prefix=no_prefix, busy=list, clock=clock, embedder=embedder
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.handle, Drain())
        await embedder.started.wait()
        tg.cancel_scope.cancel()
    assert tg.cancel_scope.cancelled_caught
    assert not worker._skipped  # a cancelled call is no failure of the memory's


class Slow:
    """A service that takes a while for every call (a local model on a busy CPU):
    says when the first of the worker's calls started."""

    dimensions = WIDTH
    started: anyio.Event | None = None
    calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if list(texts) != ["dimension check"]:
            Slow.calls += 1
            if Slow.started is None:
                Slow.started = anyio.Event()
            Slow.started.set()
            await anyio.sleep(0.1)  # the service's own time for a call
        return [letters_vector(t) for t in texts]


async def test_closing_ends_a_pass_of_embedding_at_its_next_batch(
    tmp_path: Path, api: LocalMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a change of embedder the worker embeds every memory again, one batch
    after another, for minutes with a large store: closing (the library's way out, the
    daemon's SIGTERM) ends that pass at its next batch, every vector stored so far kept,
    instead of waiting out `server.grace_seconds` and cancelling it with a warning."""
    monkeypatch.setattr(_background, "EMBED_BATCH", 1)
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        for n in range(100):  # a pass of 100 calls: ten seconds
            await store.add_memory(DEFAULT_USER, good(n))
    Slow.started, Slow.calls = None, 0
    cfg = config(
        memory={"embedder": "tests.test_embedding_worker:Slow"}, server={"grace_seconds": 60}
    )
    with anyio.fail_after(8):  # the close included: not the pass's ten seconds
        async with frontmind(api, tmp_path, cfg=cfg):
            Slow.started = Slow.started or anyio.Event()
            await Slow.started.wait()  # the pass woken at opening is under way
    assert Slow.calls < 20
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        # Each call finished was stored; the rest wait for the next start.
        assert await store.count_memories_without_vectors() == 100 - Slow.calls


class HungAfterStart:
    """Answers the startup's dimension check, then never answers again (a hosted
    service that hangs, or a local model stuck in its thread)."""

    dimensions = WIDTH
    calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if list(texts) == ["dimension check"]:
            return [letters_vector(t) for t in texts]
        HungAfterStart.calls += 1
        await anyio.Event().wait()
        raise AssertionError("never answered")


async def test_a_hung_embedder_does_not_hold_the_extraction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extraction embeds its proposals (to find the memories they repeat by
    meaning) under the worker's deadline for the embedder: a call that never answers
    leaves them to the word-overlap rule, and the job is done, not stuck running."""
    monkeypatch.setattr(_background, "EMBED_TIMEOUT_S", 0.05)
    HungAfterStart.calls = 0
    digest = (
        '{"title": "Tea", "summary": "The user prefers tea.", "memories": ['
        '{"text": "The user prefers green tea", "importance": 0.6}]}'
    )
    responder = ScriptedResponder()
    responder.push("hello", "hello again", digest)
    clock = FakeClock()
    cfg = config(memory={"embedder": "tests.test_embedding_worker:HungAfterStart"})
    async with (
        LocalMessagesAPI(responder=responder) as server,
        frontmind(server, tmp_path, cfg=cfg, clock=clock) as fm,
    ):
        completed(await run_turn(fm, "ada", "I prefer tea"))
        clock.advance(30 * 60 + 1)
        completed(await run_turn(fm, "ada", "a new day"))  # closes the first segment
        with anyio.fail_after(30):
            await fm.run_background()
        (job,) = await fm.jobs("ada")
        assert job.state == "done"
        assert [m.text for m in await fm.memories()] == ["The user prefers green tea"]
        assert HungAfterStart.calls >= 1


class Paced:
    """A service the test holds at the worker's first call for a stored memory, then
    lets answer; each of those calls notes how many model requests the local API had
    received by then."""

    dimensions = WIDTH
    api: LocalMessagesAPI | None = None
    started: anyio.Event | None = None
    go: anyio.Event | None = None
    seen: ClassVar[list[int]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if texts[0].startswith(good(0)[:20]):  # the worker's (not a recall's query)
            assert Paced.api is not None
            assert Paced.started is not None
            assert Paced.go is not None
            Paced.started.set()
            await Paced.go.wait()
            Paced.seen.append(len(Paced.api.message_bodies()))
        return [letters_vector(t) for t in texts]


async def test_a_summary_due_during_a_pass_of_embedding_runs_before_the_pass_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change of embedder embeds every memory again: hours for a large store on a
    hosted service. The worker embeds in slices and runs the jobs that came due between
    them: a segment closed meanwhile is summarised in the middle of the pass, not after
    it (the summary is the next turns' history)."""
    monkeypatch.setattr(_background, "EMBED_BATCH", 1)
    monkeypatch.setattr(_background, "EMBED_SLICE_S", 0.0)  # a slice a call
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        for n in range(40):
            await store.add_memory(DEFAULT_USER, good(n))
    digest = '{"title": "Tea", "summary": "The user prefers tea.", "memories": []}'
    responder = ScriptedResponder()
    responder.push("hello", "hello again", digest)
    clock = FakeClock()
    cfg = config(memory={"embedder": "tests.test_embedding_worker:Paced"})
    async with LocalMessagesAPI(responder=responder) as server:
        Paced.api, Paced.started, Paced.go, Paced.seen = server, anyio.Event(), anyio.Event(), []
        async with frontmind(server, tmp_path, cfg=cfg, clock=clock) as fm:
            with anyio.fail_after(30):
                await Paced.started.wait()  # the pass woken at opening is under way
            completed(await run_turn(fm, "ada", "I prefer tea"))
            clock.advance(30 * 60 + 1)
            completed(await run_turn(fm, "ada", "a new day"))  # closes the first segment
            assert len(server.message_bodies()) == 2
            Paced.go.set()
            with anyio.fail_after(30):
                await fm.run_background()  # behind the pass and the turn's wake
            (job,) = await fm.jobs("ada")
            assert job.state == "done"
            assert await fm.storage.count_memories_without_vectors() == 0
    # The summary's request reached the API after the pass's first call and before its
    # last: the job ran between two slices.
    assert len(Paced.seen) == 40
    assert Paced.seen[0] == 2
    assert Paced.seen[-1] == 3
