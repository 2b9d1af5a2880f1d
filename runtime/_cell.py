"""One actor's mailbox, its supervision, and the drain that runs its messages.

An idle actor holds no task: its Cell (mailbox, supervision state, statistics) and its
actor instance are all it costs (bench/kernel.py). The first message to an idle actor
activates it: the system's worker pool (`_workers.py`) hands the cell to a worker task,
which runs `drain()`: the messages in order, one at a time, until the mailbox is empty;
then the worker goes back to the pool. A cell has at most one worker at a time, so an
actor never handles two messages at once and handles each sender's messages in order.

The instance is built from the factory at the first message, kept across activations,
and built afresh after a crash. The mailbox is bounded: its oldest message in a slot of
the cell, the rest in a deque made only when a second message waits and dropped when
the activation ends (most activations carry one message, and a deque costs 760 bytes and
a third of a microsecond to make and free; a gather activates every actor it asks).
`tell` refuses a full mailbox
(`MailboxFull`); `send` and `ask` wait for room, each waiting sender on a future of its
own with its message beside it: when the drain takes a message, the first waiting
sender's message moves into the mailbox at once, so waiting senders keep their order and
a `tell` can never take their place. The kernel runs on anyio's asyncio backend.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from typing import Any, Protocol

import anyio

from ._actor import Actor, ActorState, ActorStats, RestartPolicy
from ._codec import decode, encode
from ._exceptions import (
    ActorCrashed,
    ActorRestart,
    ActorStopped,
    MailboxFull,
    MessageFailed,
    RestartLimitReached,
)
from ._replies import StreamSlot
from ._workers import Worker, Workers

__all__ = ["Cell", "Envelope", "ReplyTarget"]

log = logging.getLogger("frontmind.runtime")

RUNNING = ActorState.RUNNING
RESTARTING = ActorState.RESTARTING
STOPPING = ActorState.STOPPING
STOPPED = ActorState.STOPPED
FAILED = ActorState.FAILED
HALF_OPEN = ActorState.HALF_OPEN


class ReplyTarget(Protocol):
    """Where a reply goes (an ask, a gather's slots, a reply stream)."""

    def reply(self, index: int, value: Any) -> None: ...

    def fail(self, index: int, error: BaseException) -> None: ...


# A message in a mailbox: the message (bytes in encoded mode), where its reply goes, and
# its slot there. A plain tuple: made in C, about a quarter of a small object's cost, and
# a gather makes one per actor.
Envelope = tuple[Any, "ReplyTarget | None", int]


# A sender waiting for room: its future (resolved with None once its message is in the
# mailbox, or with the error refusing it) and its message.
_Waiting = tuple["asyncio.Future[Exception | None]", Envelope]


class Cell:
    """Mailbox, supervisor and statistics of one actor."""

    __slots__ = (
        "_actor",
        "_capacity",
        "_crashes",
        "_done",
        "_factory",
        "_finished",
        "_head",
        "_in_hand",
        "_mailbox",
        "_policy",
        "_retry_at",
        "_retrying",
        "_senders",
        "_workers",
        "encoded",
        "failed_messages",
        "name",
        "processed",
        "restarts",
        "state",
        "worker",
    )

    def __init__(
        self,
        name: str,
        factory: Callable[[], Actor[Any, Any]],
        *,
        workers: Workers,
        capacity: int,
        policy: RestartPolicy,
        encoded: bool,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"actor {name!r}: mailbox capacity must be >= 1, got {capacity}")
        self.name = name
        self._factory = factory
        self._workers = workers
        self._policy = policy
        self.encoded = encoded
        self._capacity = capacity
        self._actor: Actor[Any, Any] | None = None  # built at the first message
        self._head: Envelope | None = None  # the oldest message in the mailbox
        self._mailbox: deque[Envelope] | None = None  # the others, when there are others
        self._senders: deque[_Waiting] | None = None  # made when a sender first waits
        self._in_hand: Envelope | None = None  # taken from the mailbox, not yet settled
        self._retrying = False  # the message in hand crashed the last instance once
        self._crashes: list[float] | None = None  # made at the first crash
        self._retry_at = 0.0  # when a failed actor may have its trial (monotonic)
        self._done: asyncio.Future[None] | None = None  # made when someone waits
        self._finished = False
        self.worker: Worker | None = None  # the worker draining this cell, if any
        self.state = RUNNING
        self.restarts = 0
        self.processed = 0
        self.failed_messages = 0

    # -- sending -------------------------------------------------------------------

    def _refuse(self) -> Exception:
        if self.state is FAILED:
            wait = max(self._retry_at - time.monotonic(), 0.0)
            return RestartLimitReached(
                f"actor {self.name!r} gave up after repeated crashes; it is tried again "
                f"in {wait:.0f}s",
                retry_after=wait,
            )
        return ActorStopped(f"actor {self.name!r} is stopped")

    def _admit(self) -> None:
        """Refuse a stopped actor's messages. A failed actor refuses them until its
        cool-down has passed; the first one after that is its trial (half-open)."""
        state = self.state
        if state is FAILED:
            if time.monotonic() < self._retry_at:
                raise self._refuse()
            self.state = HALF_OPEN
        elif state is STOPPING or state is STOPPED:
            raise self._refuse()

    def envelope(self, message: Any, target: ReplyTarget | None, index: int = 0) -> Envelope:
        if self.encoded:
            message = encode(message)
        return (message, target, index)

    def depth(self) -> int:
        """Messages in the mailbox (not counting the one in hand)."""
        if self._head is None:
            return 0
        return 1 + len(self._mailbox) if self._mailbox else 1

    def _append(self, envelope: Envelope) -> None:
        if self._head is None:
            self._head = envelope
        else:
            rest = self._mailbox
            if rest is None:
                rest = self._mailbox = deque()
            rest.append(envelope)

    def put_nowait(self, envelope: Envelope) -> None:
        if self.state is not RUNNING:
            self._admit()
        if self._head is None:  # an empty mailbox: the usual case
            self._head = envelope
        elif self.depth() >= self._capacity:
            raise MailboxFull(
                f"actor {self.name!r}: mailbox full ({self._capacity} messages waiting)"
            )
        else:
            self._append(envelope)
        if self.worker is None:
            self._workers.activate(self)

    async def put(self, envelope: Envelope) -> None:
        if self.state is not RUNNING:
            self._admit()
        if self._head is None or self.depth() < self._capacity:
            # Room: then no sender is waiting either.
            self._append(envelope)
            if self.worker is None:
                self._workers.activate(self)
            return
        senders = self._senders
        if senders is None:
            senders = self._senders = deque()
        waiter: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        waiting = (waiter, envelope)
        senders.append(waiting)
        try:
            refused = await waiter
        except BaseException:
            # Cancelled: unless its message is in the mailbox already, it never goes in.
            if not waiter.done() or waiter.cancelled():
                with suppress(ValueError):  # the drain may have passed over it already
                    senders.remove(waiting)
            raise
        if refused is not None:
            raise refused

    def _take_sender(self) -> None:
        """A message left the mailbox: the first waiting sender's message takes its place."""
        senders = self._senders
        while senders:
            waiter, envelope = senders.popleft()
            if not waiter.done():  # done: its sender was cancelled
                self._append(envelope)
                waiter.set_result(None)
                return

    def _refuse_senders(self, error: Exception) -> None:
        senders = self._senders
        while senders:
            waiter, _ = senders.popleft()
            if not waiter.done():
                waiter.set_result(error)

    # -- lifecycle -----------------------------------------------------------------

    def stop(self) -> None:
        """Take no more messages; finish the one in hand; refuse what is still queued."""
        if self._finished or self.state is STOPPING:
            return
        self.state = STOPPING
        self._refuse_senders(self._refuse())
        if self.worker is not None:
            return  # the drain sees STOPPING
        if self._actor is None:
            self._finish()  # never built (or given up on): nothing to run, nothing queued
        else:
            self._workers.activate(self)  # to call its `stopped()`

    def kill(self) -> None:
        """Cancel the drain (anyio's cancellation: shielded sections finish first)."""
        if self.worker is not None:
            self.worker.scope.cancel()

    def abort(self) -> None:
        """End at once, without running anything (its worker was cancelled)."""
        self._finish()

    async def wait_stopped(self) -> None:
        if self._finished:
            return
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._done)

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def busy(self) -> bool:
        """Whether it has a message in hand (handling it now)."""
        return self._in_hand is not None

    def stats(self) -> ActorStats:
        return ActorStats(
            name=self.name,
            state=self.state.value,
            mailbox_depth=self.depth(),
            mailbox_capacity=self._capacity,
            restarts=self.restarts,
            processed=self.processed,
            failed_messages=self.failed_messages,
        )

    def _finish(self) -> None:
        self.state = STOPPED
        self._actor = None
        error = self._refuse()
        envelope, self._in_hand = self._in_hand, None
        if envelope is not None:
            _fail(envelope, error)  # killed mid-message
        self._reject_queued(error)
        self._refuse_senders(error)
        self._finished = True
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    # -- the drain: one activation ---------------------------------------------------

    async def drain(self) -> None:
        """Run messages until the mailbox is empty, supervised; or run the actor's end.

        Returns on an empty mailbox with no await since it saw it empty, so a message
        that arrives after that finds the cell without a worker and activates it again.
        The message loop is written out here, not in a helper: a coroutine less per
        activation is a measurable share of a gather (bench/kernel.py).
        """
        encoded = self.encoded
        try:
            while True:
                actor = self._actor
                try:
                    if actor is None:
                        if self.state is STOPPING and self._in_hand is None:
                            break
                        actor = self._factory()
                        await actor.started()
                        self._actor = actor
                    envelope = self._in_hand  # a message that crashed the last instance
                    while True:
                        if envelope is None:
                            envelope = self._head
                            if envelope is None:
                                break
                            rest = self._mailbox
                            self._head = rest.popleft() if rest else None
                            if self._senders:
                                self._take_sender()
                            if self.state is STOPPING:
                                _fail(envelope, self._refuse())
                                envelope = None
                                continue
                        self._in_hand = envelope
                        message, target, index = envelope
                        if encoded:
                            message = decode(message, actor.protocol)
                        try:
                            if target is None:
                                await actor.handle(message)
                            elif type(target) is StreamSlot:
                                await self._stream(
                                    await actor.handle(message), target, actor.replies
                                )
                            else:
                                value = await actor.handle(message)
                                if encoded:
                                    value = decode(encode(value), actor.replies)
                                target.reply(index, value)
                        except MessageFailed as exc:
                            # Contained by the handler: this message fails, the actor
                            # goes on.
                            self.failed_messages += 1
                            if target is not None:
                                target.fail(index, exc)
                        else:
                            self.processed += 1
                        self._in_hand = envelope = None
                        if self._retrying:
                            self._retrying = False
                        if self.state is HALF_OPEN:
                            self.state = RUNNING  # the trial succeeded: the circuit closes
                # The supervisor's job is to catch any crash of the handler; cancellation
                # this worker was asked for passes straight through. A CancelledError
                # nobody asked for (a handler awaited a task someone else cancelled) is
                # the handler's crash: ended as a cancel, it would take the system down.
                except BaseException as exc:
                    crash = _crash(exc)
                    if crash is None:
                        raise
                    self._actor = None
                    if await self._recover(crash):
                        continue
                    if self.state is STOPPING:
                        break
                    self._mailbox = None
                    return  # given up on: idle until a trial message activates it again
                if self.state is not STOPPING:
                    self._mailbox = None
                    return
                try:
                    await actor.stopped()
                except Exception as exc:
                    log.error("actor %r failed in stopped()", self.name, exc_info=exc)
                break
        except BaseException:
            self._finish()  # cancelled (killed, or the system was): the actor ends
            raise
        self._finish()

    async def _recover(self, exc: Exception) -> bool:
        """After a crash: True to go on with a fresh instance (after the backoff), False
        when the actor is given up on."""
        trial = self.state is HALF_OPEN
        self._after_crash(exc)
        now = time.monotonic()
        crashes = self._crashes
        if crashes is None:
            crashes = self._crashes = []
        crashes.append(now)
        while crashes and now - crashes[0] > self._policy.within:
            del crashes[0]
        if trial or len(crashes) > self._policy.max_restarts:
            self._give_up()
            crashes.clear()
            return False
        self.restarts += 1
        if self.state is RUNNING:
            self.state = RESTARTING
        await anyio.sleep(self._policy.backoff(len(crashes)))
        if self.state is RESTARTING:
            self.state = RUNNING
        return True

    def _after_crash(self, exc: Exception) -> None:
        """Settle the message in hand, or keep it in hand when it deserves one more try."""
        if isinstance(exc, ActorRestart):  # expected, and reported by the actor itself
            log.warning("actor %r restarts: %s", self.name, exc)
        else:
            log.error("actor %r crashed", self.name, exc_info=exc)
        envelope = self._in_hand
        if envelope is None:
            return
        # A stream may already have emitted items; a message that crashed twice is
        # poison. Neither is retried: the sender learns at once.
        if type(envelope[1]) is StreamSlot or self._retrying:
            self._in_hand = None
            self._retrying = False
            self.failed_messages += 1
            _fail(envelope, exc)
        else:
            self._retrying = True

    def _give_up(self) -> None:
        if self.state is not STOPPING:  # stopping anyway: refuse what is left and end
            self.state = FAILED
            self._retry_at = time.monotonic() + self._policy.cooldown
            log.error(
                "actor %r: restart limit reached; refusing messages for %.1fs",
                self.name,
                self._policy.cooldown,
            )
        error = self._refuse()
        envelope, self._in_hand = self._in_hand, None
        self._retrying = False
        if envelope is not None:
            _fail(envelope, error)
        self._reject_queued(error)
        self._refuse_senders(error)

    def _reject_queued(self, error: Exception) -> None:
        envelope, self._head = self._head, None
        rest, self._mailbox = self._mailbox, None
        if envelope is not None:
            _fail(envelope, error)
        while rest:
            _fail(rest.popleft(), error)

    async def _stream(self, items: AsyncIterator[Any], slot: StreamSlot, replies: Any) -> None:
        with anyio.CancelScope() as scope:
            slot.scope = scope
            if slot.abandoned:
                scope.cancel()
            try:
                async for item in items:
                    if self.encoded:
                        item = decode(encode(item), replies)
                    await slot.send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the reader went away; abandon() has cancelled the scope too
            finally:
                aclose = getattr(items, "aclose", None)
                if aclose is not None:
                    with anyio.CancelScope(shield=True):
                        await aclose()
        slot.finish()


def _fail(envelope: Envelope, error: BaseException) -> None:
    target = envelope[1]
    if target is not None:
        target.fail(envelope[2], error)


def _crash(exc: BaseException) -> Exception | None:
    """What a handler raised as a crash to recover from, or None for a cancellation
    this task was asked for (a kill, the system's end) and anything not an error."""
    if isinstance(exc, Exception):
        return exc
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is not None and not task.cancelling():
            crash = ActorCrashed("the handler raised CancelledError without being cancelled")
            crash.__cause__ = exc
            return crash
    return None
