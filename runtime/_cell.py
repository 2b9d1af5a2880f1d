"""One actor's mailbox and the supervised loop that runs it.

The mailbox is a bounded anyio memory object stream (backpressure for `send`, a clear
error for `tell`), but the actor never calls its `receive()`: that costs a checkpoint (a
full scheduler round-trip) and a fresh Event on every wait. Instead the actor drains the
stream with `receive_nowait()` and, when it is empty, parks on a single future, its
doorbell, which senders ring after each put. That is one wake-up per message instead of
three, and it is most of what makes a gather cost about what `asyncio.gather` costs (see
bench/kernel.py). The kernel runs on anyio's asyncio backend.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
from anyio import TaskHandle

from ._actor import Actor, ActorState, ActorStats, RestartPolicy
from ._codec import decode, encode
from ._exceptions import ActorStopped, MailboxFull, MessageFailed, RestartLimitReached
from ._replies import StreamSlot

__all__ = ["Cell", "Envelope", "ReplyTarget"]

log = logging.getLogger("frontmind.runtime")


class ReplyTarget(Protocol):
    """Where a reply goes (an ask, a gather's slots, a reply stream)."""

    def reply(self, index: int, value: Any) -> None: ...

    def fail(self, index: int, error: BaseException) -> None: ...


class Envelope:
    __slots__ = ("attempts", "index", "message", "target")

    def __init__(self, message: Any, target: ReplyTarget | None, index: int = 0) -> None:
        self.message = message
        self.target = target
        self.index = index
        self.attempts = 0


class Cell:
    """Mailbox, supervisor and statistics of one actor."""

    __slots__ = (
        "_capacity",
        "_done",
        "_doorbell",
        "_encoded",
        "_factory",
        "_finished",
        "_in_hand",
        "_policy",
        "_protocol",
        "_queued",
        "_receive",
        "_replies",
        "_retry_at",
        "_send",
        "_task",
        "failed_messages",
        "name",
        "processed",
        "restarts",
        "state",
    )

    def __init__(
        self,
        name: str,
        factory: Callable[[], Actor[Any, Any]],
        *,
        capacity: int,
        policy: RestartPolicy,
        encoded: bool,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"actor {name!r}: mailbox capacity must be >= 1, got {capacity}")
        self.name = name
        self._factory = factory
        self._policy = policy
        self._encoded = encoded
        self._protocol: Any = object
        self._replies: Any = object
        self._send, self._receive = anyio.create_memory_object_stream[Envelope](capacity)
        self._capacity = capacity
        self._task: TaskHandle[None] | None = None  # set by the system when it spawns us
        self._done: asyncio.Future[None] | None = None  # created when someone waits
        self._in_hand: Envelope | None = None
        self._finished = False
        # Messages known to be in the buffer. The actor is the stream's only reader, so
        # while this is positive `receive_nowait()` cannot fail, and an empty mailbox
        # costs no WouldBlock exception on the hot path.
        self._queued = 0
        self._doorbell: asyncio.Future[None] | None = None
        self._retry_at = 0.0  # when a failed actor may have its trial (monotonic)
        self.state = ActorState.RUNNING
        self.restarts = 0
        self.processed = 0
        self.failed_messages = 0

    # -- sending -------------------------------------------------------------------

    def _refuse(self) -> Exception:
        if self.state is ActorState.FAILED:
            wait = max(self._retry_at - time.monotonic(), 0.0)
            return RestartLimitReached(
                f"actor {self.name!r} gave up after repeated crashes; it is tried again "
                f"in {wait:.0f}s"
            )
        return ActorStopped(f"actor {self.name!r} is stopped")

    def _admit(self) -> None:
        """A failed actor refuses messages until its cool-down has passed; the first one
        after that is its trial (half-open)."""
        if self.state is ActorState.FAILED:
            if time.monotonic() < self._retry_at:
                raise self._refuse()
            self.state = ActorState.HALF_OPEN

    def envelope(self, message: Any, target: ReplyTarget | None, index: int = 0) -> Envelope:
        if self._encoded:
            message = encode(message)
        return Envelope(message, target, index)

    def put_nowait(self, envelope: Envelope) -> None:
        self._admit()
        try:
            self._send.send_nowait(envelope)
        except anyio.WouldBlock:
            raise MailboxFull(
                f"actor {self.name!r}: mailbox full ({self._capacity} messages waiting)"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise self._refuse() from None
        self._queued += 1
        self._ring()

    async def put(self, envelope: Envelope) -> None:
        self._admit()
        try:
            await self._send.send(envelope)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise self._refuse() from None
        self._queued += 1
        self._ring()

    def _ring(self) -> None:
        doorbell = self._doorbell
        if doorbell is not None and not doorbell.done():
            doorbell.set_result(None)

    # -- lifecycle -----------------------------------------------------------------

    def stop(self) -> None:
        """Take no more messages; finish the one in hand; refuse what is still queued."""
        if self.state is not ActorState.STOPPED:
            self.state = ActorState.STOPPING
        self._send.close()
        self._ring()

    def attach(self, task: TaskHandle[None]) -> None:
        self._task = task

    def kill(self) -> None:
        # The task's own handle cancels it: no extra cancel scope per actor (about 1 KiB
        # of the idle actor's footprint, see bench/kernel.py).
        if self._task is not None:
            self._task.cancel()

    async def wait_stopped(self) -> None:
        if self._finished:
            return
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._done)

    def stats(self) -> ActorStats:
        return ActorStats(
            name=self.name,
            state=self.state.value,
            mailbox_depth=self._receive.statistics().current_buffer_used,
            mailbox_capacity=self._capacity,
            restarts=self.restarts,
            processed=self.processed,
            failed_messages=self.failed_messages,
        )

    # -- the supervised loop ---------------------------------------------------------

    async def run(self) -> None:
        crash_times: deque[float] | None = None  # made at the first crash: idle actors stay small
        retry: Envelope | None = None
        try:
            while True:
                try:
                    actor = self._factory()
                    self._protocol, self._replies = actor.protocol, actor.replies
                    await actor.started()
                    await self._process(actor, retry)
                # The supervisor's job is to catch any crash of the handler; cancellation
                # is a BaseException and passes straight through.
                except Exception as exc:  # noqa: BLE001
                    trial = self.state is ActorState.HALF_OPEN
                    retry = self._after_crash(exc)
                    now = time.monotonic()
                    crash_times = crash_times if crash_times is not None else deque()
                    crash_times.append(now)
                    while crash_times and now - crash_times[0] > self._policy.within:
                        crash_times.popleft()
                    if trial or len(crash_times) > self._policy.max_restarts:
                        self._give_up(retry)
                        crash_times.clear()
                        if not await self._await_trial():
                            return
                        retry = None
                        continue
                    self.restarts += 1
                    if self.state is ActorState.RUNNING:
                        self.state = ActorState.RESTARTING
                    await anyio.sleep(self._policy.backoff(len(crash_times)))
                    if self.state is ActorState.RESTARTING:
                        self.state = ActorState.RUNNING
                    continue
                await actor.stopped()
                return
        finally:
            if self.state is not ActorState.FAILED:
                self.state = ActorState.STOPPED
            self._send.close()
            self._reject_queued(self._refuse())
            self._finished = True
            if self._done is not None and not self._done.done():
                self._done.set_result(None)

    def _after_crash(self, exc: Exception) -> Envelope | None:
        """Settle the message in hand; returns it when it deserves one more try."""
        envelope, self._in_hand = self._in_hand, None
        log.error("actor %r crashed", self.name, exc_info=exc)
        if envelope is None:
            return None
        envelope.attempts += 1
        streaming = isinstance(envelope.target, StreamSlot)
        # A stream may already have emitted items; a message that crashed twice is
        # poison. Neither is retried: the sender learns at once.
        if streaming or envelope.attempts >= 2:
            self.failed_messages += 1
            if envelope.target is not None:
                envelope.target.fail(envelope.index, exc)
            return None
        return envelope

    def _give_up(self, retry: Envelope | None) -> None:
        if self.state is ActorState.STOPPING:
            # Stopping anyway: refuse what is left and let the loop end.
            self._send.close()
        else:
            self.state = ActorState.FAILED
            self._retry_at = time.monotonic() + self._policy.cooldown
            log.error(
                "actor %r: restart limit reached; refusing messages for %.1fs",
                self.name,
                self._policy.cooldown,
            )
        error = self._refuse()
        if retry is not None and retry.target is not None:
            retry.target.fail(retry.index, error)
        self._reject_queued(error)

    async def _await_trial(self) -> bool:
        """Park a given-up actor until a message is admitted as its trial (True) or it
        is stopped (False). Nothing is built or run meanwhile."""
        loop = asyncio.get_running_loop()
        while self.state is ActorState.FAILED:
            self._doorbell = doorbell = loop.create_future()
            try:
                await doorbell
            finally:
                self._doorbell = None
        return self.state is ActorState.HALF_OPEN

    def _reject_queued(self, error: Exception) -> None:
        while True:
            try:
                envelope = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            self._queued -= 1
            if envelope.target is not None:
                envelope.target.fail(envelope.index, error)

    async def _process(self, actor: Actor[Any, Any], retry: Envelope | None) -> None:
        if retry is not None:
            await self._handle(actor, retry)
        receive = self._receive
        loop = asyncio.get_running_loop()
        while True:
            if not self._queued:
                if self.state is ActorState.STOPPING:
                    return
                self._doorbell = doorbell = loop.create_future()
                try:
                    await doorbell
                finally:
                    self._doorbell = None
                continue
            envelope = receive.receive_nowait()
            self._queued -= 1
            if self.state is ActorState.STOPPING:
                if envelope.target is not None:
                    envelope.target.fail(envelope.index, self._refuse())
                continue
            await self._handle(actor, envelope)

    async def _handle(self, actor: Actor[Any, Any], envelope: Envelope) -> None:
        self._in_hand = envelope
        message = envelope.message
        if self._encoded:
            message = decode(message, self._protocol)
        target = envelope.target
        try:
            if target is None:
                await actor.handle(message)
            elif isinstance(target, StreamSlot):
                await self._stream(await actor.handle(message), target)
            else:
                value = await actor.handle(message)
                if self._encoded:
                    value = decode(encode(value), self._replies)
                target.reply(envelope.index, value)
        except MessageFailed as exc:
            # Contained by the handler: this message fails, the actor goes on.
            self.failed_messages += 1
            if target is not None:
                target.fail(envelope.index, exc)
        else:
            self.processed += 1
        self._in_hand = None
        if self.state is ActorState.HALF_OPEN:
            self.state = ActorState.RUNNING  # the trial succeeded: the circuit closes

    async def _stream(self, items: AsyncIterator[Any], slot: StreamSlot) -> None:
        with anyio.CancelScope() as scope:
            slot.scope = scope
            if slot.abandoned:
                scope.cancel()
            try:
                async for item in items:
                    if self._encoded:
                        item = decode(encode(item), self._replies)
                    await slot.send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the reader went away; abandon() has cancelled the scope too
            finally:
                aclose = getattr(items, "aclose", None)
                if aclose is not None:
                    with anyio.CancelScope(shield=True):
                        await aclose()
        slot.finish()
