"""The background worker: runs durable jobs (segment summaries and memory extraction)
after turns commit, never on a turn's path.

It is an actor of the Engine's system. A turn that closes a segment stores the summary
job in its own commit and tells the worker `Wake`; a ticker wakes it now and then for
retries and for jobs left by a process that died. Each job:

1. is claimed atomically (other replicas' workers share the work), skipping the
   continuums that have a turn running in this process (the worker yields to turns);
2. asks the continuum's conversation actor for its cached prefix plus the summary
   instruction (`RideCache`), so the call reads the cache the conversation paid for;
3. calls the model, parses the title, summary and proposed memories, de-duplicates the
   memories against those already stored, and stores everything with the call's usage
   in one transaction. A failure is stored and retried later with backoff.

With an embedder, each pass also embeds the memories that wait for a vector, oldest
first, in batches, a slice of `EMBED_SLICE_S` at a time with the jobs that came due
run between slices (after a change of embedder every memory waits: hours of calls).
A memory the embedder cannot embed (it raises for that text alone, or answers a vector
the store refuses: all zeros, not finite, another dimension) is held back in this
process with a backoff and logged once per try, so every other memory still gets its
vector; an embedder that is down, or late (`EMBED_TIMEOUT_S`), ends the pass.

Now and then it also gives the space of deleted rows back to the file system
(`Storage.reclaim_space`: SQLite's incremental vacuum).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import NamedTuple

import anyio
import anyio.lowlevel
import msgspec

from runtime import Actor, KernelError
from storage import (
    LEASE_SECONDS,
    MAX_ATTEMPTS,
    SEGMENT_SUMMARY,
    InvalidInput,
    Job,
    JobUsage,
    Memory,
    MemoryProposal,
    Message,
    SegmentDigest,
    SegmentJob,
    StorageError,
    TextBlock,
    TurnRecord,
    backoff,
    check_vector,
)
from storage import Storage as StoragePort

from ._conversation import RideCache
from ._digest import SAME_MEANING, DigestError, decide_memory, parse_digest
from ._exceptions import Busy, FrontmindError, ModelRejected, ShuttingDown
from ._layout import ModelRequest
from ._llm import ModelClient, StreamDone
from ._messages import Drain, MemoriesSurfaced, RecordsWaiting, Wake
from ._recall import Embedder, vectors_current
from ._surfacings import Surfacings
from ._too_long import TokenScales, learn_too_long, request_estimate, request_tool_prompt

__all__ = [
    "BackgroundMessage",
    "BackgroundWorker",
    "Drain",
    "DroppedRecords",
    "MemoriesSurfaced",
    "RecordsWaiting",
    "background_name",
]

log = logging.getLogger("frontmind.background")


def background_name() -> str:
    return "background"


BackgroundMessage = Wake | Drain | MemoriesSurfaced | RecordsWaiting

# Records waiting for the worker at most (`DroppedRecords`), and the users' text they
# hold: a burst of refusals is recorded whole, a flood cannot hold memory unbounded.
DROPPED_RECORDS_MAX = 10_000
DROPPED_TEXT_MAX = 64 * 1024 * 1024


class DroppedRecords:
    """The records of turns whose streams cannot write them (refused at the door, or
    dropped unread before their actor took them), waiting for the background worker.

    A buffer, not a message each: a burst of refusals would fill the worker's mailbox,
    and every record (and memory use counted) after it would be lost. The engine adds
    to it and tells the worker once (`RecordsWaiting`, `told`); the worker takes them
    all with that message, with any other it handles, and when it stops. Past its
    bounds the newest are let go, with a warning. While a user is deleted
    (`forgetting`) theirs wait, and are let go once the user is gone: written after the
    delete, they would be rows of a user who is forgotten (the turn's text, its
    continuum).
    """

    def __init__(self, limit: int = DROPPED_RECORDS_MAX, text: int = DROPPED_TEXT_MAX) -> None:
        self._limit, self._text_limit = limit, text
        self._records: list[tuple[str, TurnRecord]] = []
        self._text = 0
        self.told = False  # a `RecordsWaiting` is in the worker's mailbox
        self.let_go = 0  # records past the bounds, since the start
        self._warned = False  # of letting go, since the worker last took them
        self._forgotten: Counter[str] = Counter()  # users being deleted
        # Held by the worker while it writes one record (`write`), so that a delete
        # waits for a write begun before it.
        self._writing = anyio.Lock()

    @asynccontextmanager
    async def forgetting(self, user: str) -> AsyncIterator[None]:
        """While the block runs (the user's delete), none of `user`'s records is
        written: a write begun before is over when the block starts, and those the
        worker takes meanwhile wait again. Once the block has ended without an error
        (the user is gone), theirs are let go; after a refused delete they stay."""
        self._forgotten[user] += 1
        try:
            async with self._writing:
                pass
            yield
            kept = [(u, r) for u, r in self._records if u != user]
            self._records = kept
            self._text = sum(len(r.user_text) for _, r in kept)
        finally:
            self._forgotten[user] -= 1
            if not self._forgotten[user]:
                del self._forgotten[user]

    async def write(self, storage: StoragePort, user: str, record: TurnRecord) -> None:
        """Write one record the worker took; one of a user being deleted waits again."""
        async with self._writing:
            if user in self._forgotten:
                self._records.append((user, record))
                self._text += len(record.user_text)
            else:
                await storage.record_turn(user, record)

    def add(self, user: str, record: TurnRecord) -> None:
        size = len(record.user_text)
        if len(self._records) >= self._limit or self._text + size > self._text_limit:
            if not self._warned:
                self._warned = True
                log.warning(
                    "%d turn records wait for the background worker: more are let go",
                    len(self._records),
                )
            self.let_go += 1
            return
        self._records.append((user, record))
        self._text += size

    @property
    def waiting(self) -> bool:
        return bool(self._records)

    def take(self) -> list[tuple[str, TurnRecord]]:
        records, self._records, self._text = self._records, [], 0
        self.told = self._warned = False
        return records


# Surfacings (notification centers) counted together at most: one write per user and
# distinct count (usually one), not one per composition.
SURFACED_BATCH = 1000
# How often the worker looks for free space to give back (on the wake or drain after
# that long): deletes are rare, and the look is one small read.
RECLAIM_EVERY_S = 600.0

# The memories embedded in one call to the embedder.
EMBED_BATCH = 64
# How long one call to the embedder may take in the worker (a hung service must not
# stop the worker: its jobs run on the same mailbox).
EMBED_TIMEOUT_S = 60.0
# How long the worker embeds before it looks for due jobs again: a pass over every
# memory (after a change of embedder: hours for a large store on a hosted service)
# goes on in slices, and a segment's summary or a turn's record waits about one slice
# (the batch in hand finishes first), not the whole pass.
EMBED_SLICE_S = 5.0
# Texts embedded alone after a failed batch: this many straight failures (or one late
# answer) end the pass (the embedder is down or slow, not one text it refuses).
ALONE_FAILURES = 3
# The memories held back at most, each waiting out the backoff of a failure (beyond
# it, one that fails is only left out of the pass it failed in), and the failures one
# pass goes past at most: the store answers the waiting memories oldest first, with no
# place to start from, so each read asks for as many more as are left out.
SKIPPED_MAX = 1024
# What of an embedder's error a log line keeps.
REASON_CHARS = 200

PrefixFn = Callable[[str, str, RideCache], Awaitable[ModelRequest]]


class _Skipped(NamedTuple):
    """A memory the embedder failed: the text it failed for, how many times in a row,
    and when it is tried again."""

    text: str
    attempts: int
    retry_at: float


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


class _EmbedFailed(Exception):
    """The embedder gave no vectors for the texts: the reason (the embedder's own
    error, if any, is the cause), and whether it was only late."""

    def __init__(self, reason: str, *, late: bool = False) -> None:
        super().__init__(reason)
        self.late = late


async def _embed(embedder: Embedder, texts: list[str]) -> Sequence[Sequence[float]]:
    """The texts' vectors; `_EmbedFailed` when the embedder raised, was late, or
    answered another number of vectors. Cancellation goes through."""
    try:
        with anyio.fail_after(EMBED_TIMEOUT_S):
            vectors = await embedder.embed(texts)
        count = len(vectors)
    except TimeoutError as exc:
        raise _EmbedFailed(f"no answer within {EMBED_TIMEOUT_S:.0f} s", late=True) from exc
    # The embedder is the user's code: whatever it raises is the texts' failure.
    except Exception as exc:
        raise _EmbedFailed(_reason(exc)) from exc
    if count != len(texts):
        raise _EmbedFailed(f"{count} vectors for {len(texts)} texts")
    return vectors


def transcript(messages: list[Message]) -> str:
    return "\n".join(f"{m.role}: {m.text()}" for m in messages if m.text().strip())


class BackgroundWorker(Actor[BackgroundMessage, int | None]):
    protocol = BackgroundMessage

    def __init__(
        self,
        storage: StoragePort,
        model: ModelClient,
        *,
        prefix: PrefixFn,
        busy: Callable[[], Collection[tuple[str, str]]],
        clock: Callable[[], float],
        lease_seconds: float = LEASE_SECONDS,
        embedder: Embedder | None = None,
        same_cosine: float = SAME_MEANING,
        dropped: DroppedRecords | None = None,
        closing: Callable[[], bool] = lambda: False,
        surfacings: Surfacings | None = None,
        token_scales: TokenScales | None = None,
        tool_prompt: Mapping[str, int] | None = None,
    ) -> None:
        # The conversations' token scales, to learn from a summary refused as too long
        # (None: such a refusal fails the job as any other does), and the tool-use system
        # prompt by tool_choice type (the catalog's), which its count is learnt without.
        self._scales = token_scales
        self._tool_prompt = dict(tool_prompt or {})
        self._dropped = DroppedRecords() if dropped is None else dropped
        # Surfacings not yet counted (the memories sections add to it when this
        # worker's mailbox is full).
        self._surfacings = Surfacings() if surfacings is None else surfacings
        # Whether the instance is closing: a pass of embedding (every memory again after
        # a change of embedder: minutes) ends at its next batch rather than hold the
        # close for its whole grace; the memories left wait for the next start.
        self._closing = closing
        self._embedder = embedder
        self._same_cosine = same_cosine
        self._storage = storage
        self._model = model
        self._prefix = prefix
        self._busy = busy
        self._clock = clock
        self._lease = lease_seconds
        self._reclaim_at = float("-inf")  # when free space is next looked at
        self._told_stuck = False  # space that cannot be reclaimed is logged once
        # Memories the embedder failed, held back until their retry (per process), and
        # when the pass of embedding under way started (its slices go on from there).
        self._skipped: dict[int, _Skipped] = {}
        self._pass_started = float("-inf")

    async def stopped(self) -> None:
        await self._write_dropped()
        await self._count_surfaced()

    async def _write_dropped(self) -> None:
        """Write the records waiting in the engine's buffer (`DroppedRecords`)."""
        if not self._dropped.waiting:  # nearly always: it runs with every message
            return
        for user, record in self._dropped.take():
            try:
                await self._dropped.write(self._storage, user, record)
            except StorageError as exc:  # the turn never started: nothing else is lost
                log.warning("could not record turn %s: %s", record.turn_id, exc)

    async def _count_surfaced(self) -> None:
        """Store the surfacings counted so far (on a wake, a drain, every
        `SURFACED_BATCH` of them, and on stopping)."""
        for user, counts in self._surfacings.take().items():
            by_times: defaultdict[int, list[int]] = defaultdict(list)
            for memory_id, times in counts.items():
                by_times[times].append(memory_id)
            for times, ids in sorted(by_times.items()):
                try:
                    await self._storage.mark_memories_used(user, ids, times=times)
                except StorageError as exc:  # a missed count is not worth a crash
                    log.warning("could not count surfaced memories: %s", exc)

    async def handle(self, message: BackgroundMessage) -> int | None:
        # With any message: its `RecordsWaiting` may not have found room in the mailbox.
        await self._write_dropped()
        if isinstance(message, RecordsWaiting):
            return None
        if isinstance(message, MemoriesSurfaced):
            # Counted later, together: a write while turns compose would make every
            # reader connection drop its page cache (SQLite does on any change), and the
            # compositions reading beside it slowed by a third (bench/compose.py).
            self._surfacings.add(message.user, message.memory_ids)
            if self._surfacings.pending >= SURFACED_BATCH:
                await self._count_surfaced()
            return None
        await self._count_surfaced()
        ran = await self._run_due_jobs()
        position: int | None = 0
        while self._embedder is not None and position is not None:
            position = await self._embed_new_memories(self._embedder, position)
            if position is not None:  # a slice ended with memories left: jobs first
                await self._write_dropped()
                await self._count_surfaced()
                ran += await self._run_due_jobs()
        if self._clock() >= self._reclaim_at:
            await self._reclaim_space()
        return ran if isinstance(message, Drain) else None

    async def _run_due_jobs(self) -> int:
        """Claim and run the jobs that are due, one after another; how many ran."""
        ran = 0
        while True:
            try:
                job = await self._storage.claim_job(
                    now=self._clock(), lease_seconds=self._lease, exclude=tuple(self._busy())
                )
            except StorageError as exc:
                log.warning("cannot claim background jobs: %s", exc)
                return ran
            if job is None:
                return ran
            await self._run(job)
            ran += 1

    async def _reclaim_space(self) -> None:
        """Give the space of deleted rows back to the file system (the store decides
        whether there is enough of it; PostgreSQL's server does it on its own)."""
        self._reclaim_at = self._clock() + RECLAIM_EVERY_S
        try:
            done = await self._storage.reclaim_space()
        except StorageError as exc:  # tried again later
            log.warning("could not reclaim the store's free space: %s", exc)
            return
        if done.freed_bytes:
            log.info("gave %d bytes of deleted rows back to the file system", done.freed_bytes)
        if done.stuck_bytes and not self._told_stuck:
            self._told_stuck = True
            log.warning(
                "the store holds %d free bytes it cannot give back (it was made before"
                ' incremental auto-vacuum): the README\'s "Reclaiming space" shows how to'
                " switch it",
                done.stuck_bytes,
            )

    async def _embed_new_memories(self, embedder: Embedder, position: int) -> int | None:
        """Embed the memories that have no vector yet (extracted, or stored by a tool),
        for `EMBED_SLICE_S` at most: where the pass goes on from (the last id read), or
        None when it is over (every waiting memory read, the embedder down, closing).

        A memory the embedder cannot embed (it raises for its text alone, or answers a
        vector the store refuses) is held back with a backoff, so the others behind it
        still get theirs; a memory that failed in this pass is not tried again before
        the next."""
        ends = anyio.current_time() + EMBED_SLICE_S
        if not await vectors_current(self._storage, "the background worker"):
            return None  # its vectors would be refused: no call to the embedder
        if position == 0:
            self._pass_started = self._clock()
        try:
            while not self._closing():
                now = self._clock()
                rows = await self._storage.memories_without_vectors(
                    limit=EMBED_BATCH, after=position, now=now
                )
                if not rows:
                    # Every memory that waits was read: one held back whose retry was
                    # due when the pass started was tried (and held again, or
                    # embedded), so those left are of memories that no longer wait
                    # (deleted, or embedded by another replica). One whose retry came
                    # due during the pass (hours, after a change of embedder) keeps
                    # its backoff for the next.
                    for memory_id, skipped in list(self._skipped.items()):
                        if skipped.retry_at <= self._pass_started:
                            del self._skipped[memory_id]
                    return None
                position = rows[-1].id
                batch = [m for m in rows if not self._held(m, now)]
                if not batch:
                    continue
                if await self._embed_batch(embedder, batch) is None:
                    return None  # the embedder seems down: the next wake tries again
                if anyio.current_time() >= ends:
                    return position  # read on from here, past the ones held back
        except StorageError as exc:  # tried again on the next wake
            log.warning("could not embed memories: %s", exc)
        return None

    def _held(self, memory: Memory, now: float) -> bool:
        """Whether the memory waits out the backoff of a failure (of this very text)."""
        skipped = self._skipped.get(memory.id)
        return skipped is not None and skipped.text == memory.text and skipped.retry_at > now

    async def _embed_batch(self, embedder: Embedder, batch: list[Memory]) -> set[int] | None:
        """Embed and store one batch; the ids of the memories that failed, or None when
        the embedder seems down or slow (the pass ends)."""
        failures: dict[int, str] = {}
        embedded: list[tuple[Memory, Sequence[float]]] = []
        down = False
        try:
            vectors = await _embed(embedder, [m.text for m in batch])
            embedded = list(zip(batch, vectors, strict=True))
        except _EmbedFailed as failed:
            # One text the embedder refuses (a hosted API rejecting an input) fails the
            # whole call: the texts are tried alone to find it. A few straight failures,
            # or a late answer, mean the embedder itself is failing: the pass ends (the
            # texts tried so far wait out their backoff, the others the next wake).
            log.warning(
                "the embedder failed for %d memories (%s); trying them one at a time",
                len(batch),
                failed,
                exc_info=failed.__cause__,
            )
            straight = 0
            for memory in batch:
                try:
                    (vector,) = await _embed(embedder, [memory.text])
                except _EmbedFailed as alone:
                    failures[memory.id] = str(alone)
                    straight += 1
                    if alone.late or straight >= ALONE_FAILURES:
                        down = True
                        break
                else:
                    embedded.append((memory, vector))
                    straight = 0
        good: list[tuple[Memory, Sequence[float]]] = []
        for memory, vector in embedded:
            try:  # the store's own rule (the dimension it checks when writing)
                good.append((memory, check_vector(vector, "a vector")))
            except InvalidInput as exc:
                failures[memory.id] = str(exc)
            await anyio.lowlevel.checkpoint()  # a wide batch does not hold the loop
        failures.update(await self._store_vectors(good))
        for memory, _ in good:
            if memory.id not in failures:
                self._skipped.pop(memory.id, None)
        texts = {m.id: m.text for m in batch}
        for memory_id, reason in failures.items():
            self._skip(memory_id, texts[memory_id], reason)
        return None if down else set(failures)

    async def _store_vectors(self, good: list[tuple[Memory, Sequence[float]]]) -> dict[int, str]:
        """Store the vectors; when the store refuses the batch (a vector of another
        dimension than the embedder it records), each alone: the refused ones and why."""
        if not good:
            return {}
        try:
            await self._storage.set_memory_vectors(good)
            return {}
        except InvalidInput:
            pass
        refused: dict[int, str] = {}
        for pair in good:
            try:
                await self._storage.set_memory_vectors([pair])
            except InvalidInput as exc:
                refused[pair[0].id] = str(exc)
        return refused

    def _skip(self, memory_id: int, text: str, reason: str) -> None:
        """Hold the memory back with a backoff (longer each time), logged once per try.
        With `SKIPPED_MAX` held already, it is not: the ones held keep their place (a
        sweep past them goes on), and it is tried again on the next pass."""
        before = self._skipped.pop(memory_id, None)
        attempts = 1 if before is None or before.text != text else before.attempts + 1
        if len(self._skipped) >= SKIPPED_MAX:
            log.warning(
                "memory %d gets no vector (%s); tried again on the next pass (%d others"
                " are held back)",
                memory_id,
                reason,
                len(self._skipped),
            )
            return
        delay = backoff(attempts)
        self._skipped[memory_id] = _Skipped(text, attempts, self._clock() + delay)
        log.warning(
            "memory %d gets no vector (%s); tried again in %.0f s", memory_id, reason, delay
        )

    async def _run(self, job: Job) -> None:
        try:
            digest, usage = await self._summarise(job)
            await self._storage.finish_job(job, now=self._clock(), digest=digest, usage=usage)
        except anyio.get_cancelled_exc_class():
            # Cut short (the instance closing past its grace): the job goes back, due at
            # once, or its claim would keep the next process from it for the whole lease.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._put_back(job, "interrupted: the process was closing", self._clock())
            raise
        except (KernelError, ShuttingDown, Busy) as exc:
            # The continuum's conversation actor stopped under us (the instance closing,
            # or its lane evicted) or is given up on for now: not the job's fault, and
            # no reason to crash the worker. The job goes back for a later run.
            error = f"interrupted: {type(exc).__name__}: {exc}"
            log.info("background job %d (%s) put back: %s", job.id, job.kind, error)
            await self._put_back(job, error, self._clock() + backoff(0))
        except (FrontmindError, StorageError, DigestError, msgspec.DecodeError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            retry_at = (
                self._clock() + backoff(job.attempts) if job.attempts < MAX_ATTEMPTS else None
            )
            log.warning("background job %d (%s) failed: %s", job.id, job.kind, error)
            await self._put_back(job, error, retry_at)

    async def _put_back(self, job: Job, error: str, retry_at: float | None) -> None:
        try:
            await self._storage.fail_job(job, now=self._clock(), error=error, retry_at=retry_at)
        except StorageError as exc:  # the lease will hand the job out again
            log.warning("could not record the failure of job %d: %s", job.id, exc)

    async def _summarise(self, job: Job) -> tuple[SegmentDigest, JobUsage]:
        if job.kind != SEGMENT_SUMMARY:
            raise DigestError(f"unknown job kind {job.kind!r}")
        payload = msgspec.json.decode(job.payload, type=SegmentJob)
        segment = await self._storage.segment(job.user, payload.segment_id)
        messages = await self._storage.segment_messages(job.user, segment.id)
        end_seq = messages[-1].seq + 1 if messages else segment.first_seq
        ride = RideCache(segment.first_seq, end_seq, transcript(messages))
        request = await self._prefix(job.user, job.continuum_id, ride)
        started = time.perf_counter()
        try:
            done = await self._reply(request)
        except ModelRejected as refusal:
            request = await self._fitted_again(job, ride, request, refusal)
            started = time.perf_counter()  # the refused call cost nothing
            done = await self._reply(request)
        usage = JobUsage(
            request.model, done.usage, (time.perf_counter() - started) * 1000, done.message_id
        )
        text = "".join(b.text for b in done.content if isinstance(b, TextBlock))
        reply = parse_digest(text)
        accepted: list[MemoryProposal] = []
        vectors = await self._proposal_vectors([m.text for m in reply.memories])
        for index, proposed in enumerate(reply.memories):
            vector = None if vectors is None else vectors[index]
            near = None if vector is None else await self._nearest(job.user, vector)
            decided = await decide_memory(
                self._storage,
                job.user,
                proposed,
                accepted,
                near,
                now=self._clock(),
                same_cosine=self._same_cosine,
                vector=vector,
            )
            if near is not None and decided is not None and vector is not None:
                # Found by meaning: its vector is stored with it, in the job's transaction.
                checked = tuple(float(x) for x in vector)
                decided = msgspec.structs.replace(decided, vector=checked)
            if decided is not None:
                accepted.append(decided)
        return SegmentDigest(segment.id, reply.title, reply.summary, tuple(accepted)), usage

    async def _reply(self, request: ModelRequest) -> StreamDone:
        """The model's whole reply to the summary's request."""
        done: StreamDone | None = None
        async with aclosing(self._model.stream(request)) as events:
            async for event in events:
                if isinstance(event, StreamDone):
                    done = event
        if done is None:
            raise DigestError("the summary call ended without a reply")
        return done

    async def _fitted_again(
        self, job: Job, ride: RideCache, request: ModelRequest, refusal: ModelRejected
    ) -> ModelRequest:
        """The summary's request, refused as longer than the window, built again on the
        token scale the refusal's count says, as a turn's is (else `refusal` is raised).

        The conversation builds it on the continuum's scale, which a process measures on
        the continuum's turns: one that has just started has none, the estimate counts
        dense text (numbers, JSON) at a fourth of what the API does, and the history
        sent, fitted by the estimate, was too long on every try (the turns themselves
        learn from the refusal and are sent again). It is sent once more, fitted;
        refused again, the job fails as any other refusal does."""
        estimate = request_estimate(request)
        key = (job.user, job.continuum_id)
        added = request_tool_prompt(self._tool_prompt, request)
        if self._scales is None or not learn_too_long(self._scales, key, estimate, refusal, added):
            raise refusal
        again = await self._prefix(job.user, job.continuum_id, ride)
        if request_estimate(again) >= estimate:
            raise refusal  # nothing more could be left out: it would be refused again
        return again

    async def _nearest(
        self, user: str, vector: Sequence[float]
    ) -> list[tuple[Memory, float]] | None:
        """The user's memories nearest to a proposal; None when the store refuses the
        vector (another dimension than the embedder it records, or its vectors are now
        another embedder's: a replica started with it): words decide then."""
        try:
            return await self._storage.nearest_memories(user, vector, k=5, now=self._clock())
        except StorageError as exc:
            log.warning("a proposal's vector was refused; its words decide: %s", exc)
            return None

    async def _proposal_vectors(self, texts: list[str]) -> Sequence[Sequence[float]] | None:
        """The proposals' vectors, to find the memories they repeat by meaning; None
        without an embedder, or when it fails (the word-overlap rule then decides)."""
        if self._embedder is None or not texts:
            return None
        if not await vectors_current(self._storage, "the extraction"):
            return None
        try:  # under the worker's deadline: a hung embedder must not hold the job
            return await _embed(self._embedder, texts)
        except _EmbedFailed as failed:
            log.warning(
                "the embedder failed (%s); proposals deduplicated by their words",
                failed,
                exc_info=failed.__cause__,
            )
            return None
