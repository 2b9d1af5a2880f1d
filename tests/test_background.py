"""Background work: segment summaries and memory extraction, run after the turns that
close segments, riding the conversation's cache; durable (retried, resumed) jobs.

All offline: the local API's default model answers the summary instruction with a
deterministic JSON summary, and the app runs on a manual clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors import SUMMARY_MARKER, Busy, input_cost
from frontmind import Frontmind, TextDelta, tool
from frontmind.cli._render import render_stats
from frontmind.localapi import (
    DefaultResponder,
    Latency,
    LocalMessagesAPI,
    MessagesRequest,
    Reply,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
)
from storage import DEFAULT_USER, SEGMENT_SUMMARY, TurnUsage, moment, segment_job_payload
from tests._embedder import GatedEmbedder
from tests._harness import FakeClock, completed, config, frontmind, run_turn
from tests._postgres import PostgresServer

pytestmark = pytest.mark.anyio

GAP = 30 * 60  # history.segment_gap_minutes, in seconds


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


def said_on(turn: int) -> str:
    if turn == 50:
        return "My sister's name is Ingrid and she lives in Bergen."
    if turn in (30, 130):  # said twice, 100 turns apart: one memory
        return "I prefer green tea in the morning."
    return f"Let us look at item {turn} of the garden plan: bed {turn % 7}, row {turn % 5}."


def notification_of(body: dict[str, Any]) -> str:
    for message in body["messages"]:
        if message["role"] == "assistant":
            text = "".join(b.get("text", "") for b in message["content"])
            if text.startswith("NOTIFICATION CENTER"):
                return text
    return ""


def section(notification: str, name: str) -> str:
    start = notification.index(f"<{name}>")
    return notification[start : notification.index(f"</{name}>", start)]


@pytest.mark.slow
async def test_two_hundred_turns_with_pauses_are_summarised_and_remembered(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    clock = FakeClock()
    cfg = config(
        history={"budget_tokens": 3000},
        trinkets={"manifest_segments": 50},
        composer={"notification_budget_tokens": 8000},
    )
    async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
        for n in range(1, 200):
            completed(await run_turn(fm, "ada", said_on(n)))
            # A pause longer than the segment gap every ten turns: twenty segments.
            clock.advance(GAP + 60 if n % 10 == 0 else 60)
        await fm.run_background()  # whatever waited behind a running turn
        question = "What is my sister's name?"
        done = completed(await run_turn(fm, "ada", question))
        await fm.run_background()

        # The answer came from what the notification center surfaced for it: the memory
        # extracted from turn 50, whose messages left the history window long ago.
        body = api.message_bodies()[-1]
        assert body["messages"][-1]["content"][0]["text"] == question
        assert "Ingrid" in section(notification_of(body), "relevant_memories")
        assert "relevant_memories" in done.text
        continuum = await fm.storage.continuum(DEFAULT_USER, "ada")
        assert continuum.history_start > 100  # turn 50 is long out of the window
        assert all("Ingrid" not in str(m) for m in body["messages"][:-3])

        # Every closed segment is summarised, and the manifest shows them all.
        segments = await fm.storage.recent_segments(DEFAULT_USER, "ada", limit=100)
        assert len(segments) == 20
        closed, active = segments[:-1], segments[-1]
        assert all(s.summary for s in closed)
        assert active.summary == ""  # still open
        manifest = (await fm.compose("ada", "hello")).notification
        for s in closed:
            assert s.title in manifest
            assert s.summary[:60] in manifest
        # The trimmed segment that held turn 50 is reachable through search too.
        (found,) = await fm.storage.search_segments(DEFAULT_USER, "Ingrid", continuum_id="ada")
        assert found.first_seq == 2 * 40  # turn 41 opens the fifth segment
        # Memories: extracted with their source segment, none twice.
        memories = await fm.memories()
        texts = [m.text for m in memories]
        assert len(texts) == len(set(texts))
        tea = [m for m in memories if "green tea" in m.text]
        assert len(tea) == 1
        ingrid = [m for m in memories if "Ingrid" in m.text]
        assert len(ingrid) == 1
        assert ingrid[0].source_segment == found.id
        assert ingrid[0].uses >= 1  # surfaced for the question (counted off the turn path)

        # The background calls rode the conversation's cache, and their cost is reported
        # beside the conversation's.
        jobs = await fm.jobs("ada")
        assert [j.state for j in jobs] == ["done"] * 19
        usage = sum((j.usage.usage for j in jobs if j.usage), TurnUsage())
        assert usage.cache_read_input_tokens / usage.total_input > 0.5
        summary_bodies = [
            b for b in api.message_bodies() if SUMMARY_MARKER in str(b["messages"][-1])
        ]
        assert len(summary_bodies) == 19
        for b in summary_bodies:
            assert notification_of(b) == ""  # the prefix and the instruction, nothing else
        records = await fm.turns("ada", limit=1000)
        assert len(records) == 200  # the background calls are not turns
        history = await fm.history("ada")
        assert not any(SUMMARY_MARKER in str(m) for m in history)
        stats = render_stats(records, jobs)
        assert "background jobs 19  (done 19), 19 model calls" in stats
        assert f"background {input_cost(usage):,.0f}" in stats


async def test_a_failed_summary_is_kept_and_retried_with_backoff(tmp_path: Path) -> None:
    responder = ScriptedResponder()
    responder.push("hello", "hello again", "no JSON here")
    clock = FakeClock()
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, clock=clock) as fm,
    ):
        completed(await run_turn(fm, "ada", "I prefer tea"))
        clock.advance(GAP + 1)
        completed(await run_turn(fm, "ada", "a new day"))  # closes the first segment
        # The worker was woken when that turn ended and ran the job (it failed: the
        # reply is not a summary); the drain queued behind it finds nothing due.
        assert await fm.run_background() == 0
        (job,) = await fm.jobs("ada")
        assert (job.state, job.attempts) == ("pending", 1)
        assert job.last_error is not None
        assert "holds no JSON object" in job.last_error
        assert job.next_at == moment(clock.now + 30)  # the first retry waits 30 s
        segment = (await fm.storage.recent_segments(DEFAULT_USER, "ada"))[0]
        assert segment.summary == ""
        responder.push('{"title": "Tea", "summary": "The user prefers tea.", "memories": []}')
        clock.advance(29)
        assert await fm.run_background() == 0  # not due yet
        clock.advance(1)
        assert await fm.run_background() == 1
        (job,) = await fm.jobs("ada")
        assert (job.state, job.attempts, job.last_error) == ("done", 2, None)
        segment = await fm.storage.segment(DEFAULT_USER, segment.id)
        assert (segment.title, segment.summary) == ("Tea", "The user prefers tea.")


async def test_a_memory_the_store_refuses_leaves_the_rest_of_the_summary(
    tmp_path: Path,
) -> None:
    """The summary's reply is the model's JSON; a proposed memory of nothing visible (a
    zero-width space) or holding a NUL, which the store refuses, failed the whole job on
    every try: the segment's summary and all its memories were never stored."""
    digest = (  # JSON escapes, as the model writes them
        '{"title": "Tea\\u0000", "summary": "The user prefers tea.", "memories": ['
        '{"text": "\\u200b", "importance": 0.5}, '
        '{"text": "Tea at\\u0000five", "importance": 0.5}, '
        '{"text": "The user prefers tea", "importance": 0.8}]}'
    )
    responder = ScriptedResponder()
    responder.push("hello", "hello again", digest)
    clock = FakeClock()
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, clock=clock) as fm,
    ):
        completed(await run_turn(fm, "ada", "I prefer tea"))
        clock.advance(GAP + 1)
        completed(await run_turn(fm, "ada", "a new day"))  # closes the first segment
        await fm.run_background()
        (job,) = await fm.jobs("ada")
        segment = (await fm.storage.recent_segments(DEFAULT_USER, "ada"))[0]
        memories = await fm.memories()
    assert (job.state, job.last_error) == ("done", None)
    assert (segment.title, segment.summary) == ("Tea\ufffd", "The user prefers tea.")
    assert sorted(m.text for m in memories) == ["Tea at\ufffdfive", "The user prefers tea"]


async def test_a_job_whose_conversation_stopped_goes_back_and_the_worker_lives(
    tmp_path: Path,
) -> None:
    responder = ScriptedResponder()
    responder.push("hello", "hello again", "no JSON here")  # the first try fails
    clock = FakeClock()
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, clock=clock) as fm,
    ):
        completed(await run_turn(fm, "ada", "I prefer tea"))
        clock.advance(GAP + 1)
        completed(await run_turn(fm, "ada", "a new day"))
        assert await fm.run_background() == 0
        (job,) = await fm.jobs("ada")
        assert (job.state, job.attempts) == ("pending", 1)
        # The continuum's conversation actor stops (as when the instance closes) while
        # the job is due: the ride is refused, the job goes back, the worker lives on.
        conversation = fm._system.lookup("conversation:default/ada")
        assert conversation is not None
        await fm._system.stop(conversation)
        clock.advance(30)
        assert await fm.run_background() == 1
        (job,) = await fm.jobs("ada")
        assert (job.state, job.attempts) == ("pending", 2)
        assert job.last_error is not None
        assert job.last_error.startswith("interrupted: ShuttingDown")
        (worker,) = [s for s in fm.statistics() if s.name == "background"]
        assert worker.restarts == 0


async def test_a_pending_summary_survives_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    responder = ScriptedResponder()
    responder.push("one", "two")  # nothing left for the summary: the API answers 500
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, clock=clock, max_retries=0) as fm,
    ):
        completed(await run_turn(fm, "ada", "My cat is called Miso."))
        clock.advance(GAP + 1)
        completed(await run_turn(fm, "ada", "later"))
        await fm.run_background()
        (job,) = await fm.jobs("ada")
        assert job.state == "pending"
        assert job.last_error is not None
    clock.advance(60)
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path, clock=clock) as fm:
        # A new process resumes it (its worker is woken at start; the drain waits for it).
        await fm.run_background()
        (job,) = await fm.jobs("ada")
        assert job.state == "done"
        (memory,) = await fm.memories()
        assert memory.text == "The user said: My cat is called Miso"
        assert (
            memory.source_segment == (await fm.storage.recent_segments(DEFAULT_USER, "ada"))[0].id
        )


class _SignalsSummaries(DefaultResponder):
    """The default model, saying when a segment summary is asked of it."""

    def __init__(self) -> None:
        self.summarising = anyio.Event()

    def respond(self, request: MessagesRequest) -> Reply:
        last = request.messages[-1].content
        said = last if isinstance(last, str) else " ".join(getattr(b, "text", "") for b in last)
        if said.startswith(SUMMARY_MARKER):
            self.summarising.set()
        return super().respond(request)


@pytest.mark.slow
async def test_a_summary_cut_short_by_closing_is_put_back_at_once(tmp_path: Path) -> None:
    # Closing (the daemon's SIGTERM) while the worker waited for a summary's model call
    # left its job "running", claimed by a process that was gone: the next start did not
    # run it until the claim's 5 minutes had passed.
    clock = FakeClock()
    responder = _SignalsSummaries()
    cfg = config(server={"grace_seconds": 1})  # then the worker's call is cancelled
    async with LocalMessagesAPI(responder=responder) as api:
        async with frontmind(api, tmp_path, clock=clock, cfg=cfg) as fm:
            completed(await run_turn(fm, "ada", "My cat is called Miso."))
            clock.advance(GAP + 1)
            async with fm.turn("ada", "a new day") as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        # Its own call is under way: the next one, the summary, is slow.
                        api.set_latency(Latency(time_to_first_token=600))
            with anyio.fail_after(30):
                await responder.summarising.wait()
        api.set_latency(Latency())
        async with frontmind(api, tmp_path, clock=clock) as fm:
            await fm.run_background()
            (job,) = await fm.jobs("ada")
            assert job.state == "done"
            (memory,) = await fm.memories()
            assert memory.text == "The user said: My cat is called Miso"


async def test_background_work_waits_for_the_continuums_running_turn(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    from storage import segment_job_payload as payload

    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "ada", "We decided to paint the shed blue."))
        (segment,) = await fm.storage.recent_segments(DEFAULT_USER, "ada")
        await fm.storage.enqueue_job(
            DEFAULT_USER, "segment_summary", "ada", payload(segment.id), now=0.0
        )
        async with fm.turn("ada", "and the fence?") as events:
            await events.__anext__()  # the turn has started and is running
            assert await fm.run_background() == 0
            (job,) = await fm.jobs("ada")
            assert job.state == "pending"
            async for _ in events:
                pass
        assert await fm.run_background() == 1
        (job,) = await fm.jobs("ada")
        assert job.state == "done"
        assert [m.text for m in await fm.memories()] == [
            "The user said: We decided to paint the shed blue"
        ]


@pytest.mark.parametrize("embedder", [None, "tests._embedder:ConceptEmbedder"])
async def test_an_embedder_finds_a_paraphrase_that_shares_no_word(
    api: LocalMessagesAPI, tmp_path: Path, embedder: str | None
) -> None:
    cfg = config(memory={"embedder": embedder})
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        await fm.remember("Ingrid is the user's sister")
        await fm.remember("Green tea every morning")
        await fm.run_background()  # the worker stores the vectors beside the memories
        composed = await fm.compose("ada", "Tell me about my sibling")
        surfaced = "Ingrid" in composed.notification
        assert surfaced is (embedder is not None)
        if embedder is not None:
            assert await fm.storage.count_memories_without_vectors() == 0
            (near, _), *_ = await fm.storage.nearest_memories(DEFAULT_USER, [1, 0, 0, 0.01], k=2)
            assert near.text == "Ingrid is the user's sister"
            assert "Green tea" not in composed.notification  # unrelated: not surfaced


async def test_a_users_segments_are_summarised_into_that_users_memories(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    clock = FakeClock()
    async with frontmind(api, tmp_path, clock=clock) as fm:
        alice = fm.user("alice")
        completed(await run_turn(alice, "main", "My dog is called Rex."))
        clock.advance(GAP + 1)
        completed(await run_turn(alice, "main", "another day"))
        await fm.run_background()
        (job,) = await alice.jobs("main")
        assert (job.user, job.state) == ("alice", "done")
        assert await fm.jobs() == []  # default's own jobs: none
        assert [m.text for m in await alice.memories()] == ["The user said: My dog is called Rex"]
        assert await fm.memories() == []


class Held:
    """The `hold` tool: a turn that calls it holds its continuum (and its lease) until
    the test lets go; `entered` is set as it starts."""

    def __init__(self) -> None:
        self.entered, self.release = anyio.Event(), anyio.Event()

        @tool()
        async def hold() -> str:
            """Waits until the test lets go."""
            self.entered.set()
            await self.release.wait()
            return "released"

        self.tool = hold


async def test_a_job_waits_while_its_continuum_has_a_turn_on_another_replica(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """Two replicas (each its own Frontmind, connections and worker) on one database: B's
    worker leaves alone the continuum whose turn runs on A, and takes it up after."""
    held = Held()
    responder = ScriptedResponder()
    responder.push(Reply((ReplyToolUse("hold", {}, "toolu_hold"),)), "Done.")
    cfg = config(storage={"url": pg_server.new_database()})
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path / "a", cfg=cfg, tools=[held.tool]) as a,
        frontmind(api, tmp_path / "b", cfg=cfg) as b,
    ):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_turn, a, "c1", "hold on")
            await held.entered.wait()  # A's turn holds the continuum's lease
            # Due now; its segment does not exist, so running it fails (and counts as run).
            job = await b.storage.enqueue_job(
                DEFAULT_USER, SEGMENT_SUMMARY, "c1", segment_job_payload(999), now=FakeClock().now
            )
            assert await b.run_background() == 0
            (waiting,) = await b.jobs("c1")
            assert (waiting.id, waiting.state, waiting.attempts) == (job.id, "pending", 0)
            held.release.set()
        await b.run_background()  # A's worker, woken by its ticker, may have run it first
        (ran,) = await b.jobs("c1")
        assert ran.attempts == 1
        assert ran.last_error is not None
        assert "segment #999" in ran.last_error


async def test_a_continuum_is_not_deleted_under_a_turn_on_another_replica(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """B deletes a continuum whose turn runs on A: refused as `Busy` (a turn's record
    written between the delete's statements refused it with a raw foreign-key error, a
    503), nothing deleted; once A's turn has ended, the delete goes through."""
    held = Held()
    responder = ScriptedResponder()
    responder.push("Hello.", Reply((ReplyToolUse("hold", {}, "toolu_hold"),)), "Done.")
    cfg = config(storage={"url": pg_server.new_database()})
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path / "a", cfg=cfg, tools=[held.tool]) as a,
        frontmind(api, tmp_path / "b", cfg=cfg) as b,
    ):
        await run_turn(a, "c1", "hello")
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_turn, a, "c1", "hold on")
            await held.entered.wait()  # A's turn holds the continuum's lease
            with pytest.raises(Busy, match="another process") as caught:
                await b.delete_continuum("c1")
            assert caught.value.retry_after is not None
            assert len(await b.turns("c1")) == 2  # nothing deleted: the first, the running
            held.release.set()
        assert [t.status for t in await b.turns("c1")] == ["completed", "completed"]
        await b.delete_continuum("c1")
        assert await b.continuums() == []


async def test_surfaced_memories_are_counted_together_off_the_compositions(
    tmp_path: Path,
) -> None:
    # A write while turns compose makes every reader drop its page cache: surfacings
    # are counted together, on the worker's next wake, and none is lost on closing.
    # A preview (`compose`, `context`) shows the model nothing and counts nothing.
    async with Frontmind.open(tmp_path, offline=True) as fm:
        memory = await fm.storage.add_memory(DEFAULT_USER, "the harbour opens at nine")
        await fm.run_background()  # the wake sent on opening is behind us
        for _ in range(3):
            composed = await fm.compose("ada", "when does the harbour open?")
            assert "the harbour opens at nine" in composed.notification
            await fm.context("ada", "when does the harbour open?")
        await fm.run_background()
        assert [m.uses for m in await fm.memories()] == [0]  # previews: none counted
        for _ in range(3):
            completed(await run_turn(fm, "ada", "when does the harbour open?"))
        await fm.run_background()
        assert [m.uses for m in await fm.memories()] == [3]
        for _ in range(2):
            completed(await run_turn(fm, "ada", "the harbour?"))
    async with Frontmind.open(tmp_path, offline=True) as fm:
        (counted,) = await fm.memories()
    assert counted.id == memory.id
    assert counted.uses == 5, "the worker counts what is left as it stops"


async def test_surfacings_while_the_worker_is_busy_are_all_counted(tmp_path: Path) -> None:
    """A turn tells the worker which memories it showed; while the worker runs a long
    pass (here its embedding, waiting on the embedder) its mailbox fills, and every
    surfacing told after that was lost: `uses`, a term of the ranking, undercounted.
    Now they wait in the tally the worker counts from."""
    GatedEmbedder.asked.clear()
    GatedEmbedder.entered, GatedEmbedder.release = anyio.Event(), anyio.Event()
    cfg = config(memory={"embedder": "tests._embedder:GatedEmbedder", "embed_deadline_ms": 5})
    turns = 40  # more than the worker's mailbox holds (16)
    try:
        async with Frontmind.open(tmp_path, cfg, offline=True) as fm:
            await fm.run_background()  # the wake sent on opening is behind us
            await fm.storage.add_memory(DEFAULT_USER, "the harbour opens at nine")
            async with anyio.create_task_group() as tg:
                tg.start_soon(fm.run_background)  # its pass waits in the embedder
                with anyio.fail_after(20):
                    await GatedEmbedder.entered.wait()
                assert GatedEmbedder.asked == ["the harbour opens at nine"]
                for _ in range(turns):
                    completed(await run_turn(fm, "ada", "when does the harbour open?"))
                GatedEmbedder.release.set()
            await fm.run_background()
            assert [m.uses for m in await fm.memories()] == [turns]
    finally:
        GatedEmbedder.entered = GatedEmbedder.release = None


async def test_surfacings_are_written_once_a_batch_is_full(tmp_path: Path) -> None:
    # With no wake for a long while (no turn closing a segment), the counts still reach
    # the store once a batch is full, and none before.
    from actors._background import SURFACED_BATCH, BackgroundWorker, MemoriesSurfaced
    from frontmind._frontmind import NoModel
    from runtime import ActorSystem
    from storage import SQLiteStorage

    async def no_prefix(*_: object) -> Any:
        raise AssertionError("no summary is asked for")

    async with (
        await SQLiteStorage.open(tmp_path / "db.sqlite") as store,
        ActorSystem() as system,
    ):
        memory = await store.add_memory(DEFAULT_USER, "the harbour opens at nine")
        worker = system.spawn(
            lambda: BackgroundWorker(
                store, NoModel(), prefix=no_prefix, busy=list, clock=lambda: 0.0
            ),
            name="background",
        )
        surfaced = MemoriesSurfaced(DEFAULT_USER, (memory.id,))
        for _ in range(SURFACED_BATCH - 1):
            await worker.ask(surfaced)
        assert [m.uses for m in await store.memories(DEFAULT_USER)] == [0]
        await worker.ask(surfaced)
        assert [m.uses for m in await store.memories(DEFAULT_USER)] == [SURFACED_BATCH]


# A model row of a 60k window (the config's and the local API's alike), and a table of
# numbers the API counts some four times higher than Frontmind's estimate does.
DENSE_ROW = {"name": "claude-sonnet-4-5", "context_window": 60_000, "max_output": 8_000}
TABLE = "\n".join(",".join(str(1000 + 37 * i + j) for j in range(8)) for i in range(700))


class _ReadsTables(DefaultResponder):
    """A model that calls `read_table` until three results are in its request, then
    answers; the summary's call finds it down (a 500), as an outage would."""

    def respond(self, request: MessagesRequest) -> Reply:
        last = request.messages[-1].content
        said = last if isinstance(last, str) else " ".join(getattr(b, "text", "") for b in last)
        if said.startswith(SUMMARY_MARKER):
            raise LookupError("the model is down")
        done = sum(
            type(b).__name__ == "ToolResultBlock"
            for m in request.messages
            if not isinstance(m.content, str)
            for b in m.content
        )
        if done < 3:
            return Reply((ReplyToolUse("read_table", {}, f"toolu_{done}"),))
        return Reply((ReplyText("Read them."),))


async def test_a_summary_after_a_restart_learns_from_a_too_long_refusal(tmp_path: Path) -> None:
    """A turn refused as longer than the window (the estimate short of the API's count:
    a new process has not measured the continuum yet) learns the continuum's token
    scale from the refusal's count and is sent again fitted. A summary job run by a new
    process sent the history at the estimate's scale, was refused as too long, and
    failed on every try; it now learns and is sent again fitted, as a turn is."""

    @tool(max_result_chars=400_000)
    def read_table() -> str:
        """Read the table."""
        return TABLE

    cfg = config(
        model={"name": "claude-sonnet-4-5", "max_tokens": 1024},
        models=[DENSE_ROW],
        history={"budget_tokens": 1_000_000},
    )
    clock = FakeClock()
    async with (
        LocalMessagesAPI(responder=_ReadsTables(), models=[DENSE_ROW]) as api,
        frontmind(api, tmp_path, cfg=cfg, clock=clock, tools=[read_table], max_retries=0) as fm,
    ):
        # One turn of three reads, over the window by the API's count: its requests
        # carry the oldest results as notes (the store keeps them whole).
        completed(await run_turn(fm, "c1", "read the tables"))
        clock.advance(GAP + 1)
        completed(await run_turn(fm, "c1", "thanks"))  # closes the segment
        await fm.run_background()
        (job,) = await fm.jobs("c1")
        assert job.state == "pending", job  # the model was down for its summary
    clock.advance(60)
    async with (
        LocalMessagesAPI(models=[DENSE_ROW]) as api,
        frontmind(api, tmp_path, cfg=cfg, clock=clock, tools=[read_table]) as fm,
    ):
        await fm.run_background()  # the new process runs it, before any turn
        (job,) = await fm.jobs("c1")
        bodies = api.message_bodies()
        closed = (await fm.storage.recent_segments(DEFAULT_USER, "c1"))[0]
    assert (job.state, job.last_error) == ("done", None)
    assert closed.summary.startswith("In 1 message(s) the user brought up: read the tables")
    # Refused once as too long, then sent with the oldest results as notes.
    assert len(bodies) == 2
    sent = [b for m in bodies[-1]["messages"] for b in m["content"] if isinstance(b, dict)]
    results = [b for b in sent if b["type"] == "tool_result"]
    assert len(results) == 3
    assert "left out of this request" in json.dumps(results[0]["content"])
