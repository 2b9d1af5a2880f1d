"""Where replies go: one ask, one gather (many slots), or one reply stream.

A reply target settles each slot at most once; anything arriving after that (a late
reply past a gather's deadline, a second failure) is dropped right here, so it can never
leak into another request. Every gather owns its own slots, which is what keeps late
replies out of later gathers without any bookkeeping by turn id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._exceptions import ActorCrashed, KernelError
from ._outcomes import Failed, GatherResult, Replied, TimedOut

__all__ = ["AskSlot", "GatherSlots", "ReplyStream", "StreamSlot"]

T = TypeVar("T")


def as_kernel_error(error: BaseException) -> BaseException:
    """What an asker should see: kernel errors as they are, anything else as a crash."""
    if isinstance(error, KernelError):
        return error
    crashed = ActorCrashed(f"the actor raised {type(error).__name__}: {error}")
    crashed.__cause__ = error
    return crashed


class AskSlot:
    """The single reply to one `ask`: a future, settled at most once."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def reply(self, index: int, value: Any) -> None:
        if not self._future.done():
            self._future.set_result(value)

    def fail(self, index: int, error: BaseException) -> None:
        if not self._future.done():
            self._future.set_result(_Failure(error))

    async def wait(self) -> Any:
        value = await self._future
        if isinstance(value, _Failure):
            raise as_kernel_error(value.error)
        return value


class _Failure:
    """A failure travelling as a future's result (an exception there would be logged as
    never retrieved when the asker has gone away)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class GatherSlots:
    """One slot per actor of a scatter-gather; closed at the deadline."""

    __slots__ = ("_done", "_names", "_outcomes", "_pending", "_start", "closed")

    def __init__(self, names: list[str], count: int) -> None:
        """`names` may be filled in as the messages go out; each before its slot settles."""
        self._names = names
        self._outcomes: list[Replied[Any] | TimedOut | Failed | None] = [None] * count
        self._pending = count
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._start = time.perf_counter()
        self.closed = False
        if not count:
            self._done.set_result(None)

    def _settle(self, index: int, outcome: Replied[Any] | Failed | TimedOut) -> None:
        if self.closed or self._outcomes[index] is not None:
            return
        self._outcomes[index] = outcome
        self._pending -= 1
        if not self._pending:
            _resolve(self._done)  # the deadline may have resolved it a moment ago

    def reply(self, index: int, value: Any) -> None:
        # `_settle` written out: every reply of every gather comes through here.
        if self.closed or self._outcomes[index] is not None:
            return
        elapsed = time.perf_counter() - self._start
        self._outcomes[index] = Replied(self._names[index], value, elapsed)
        self._pending -= 1
        if not self._pending:
            _resolve(self._done)

    def fail(self, index: int, error: BaseException) -> None:
        self._settle(index, Failed(self._names[index], error, time.perf_counter() - self._start))

    def expire(self, indices: Sequence[int]) -> None:
        """These slots' own deadlines have passed: they time out now."""
        now = time.perf_counter() - self._start
        for index in indices:
            self._settle(index, TimedOut(self._names[index], now))

    async def wait(self, deadline: float, deadlines: Sequence[float] | None = None) -> None:
        """Until every slot is settled or `deadline` seconds have passed.

        The deadline is a loop timer resolving the same future, not a cancel scope:
        entering and leaving a `move_on_after` costs about 5 µs, a timer about 1 µs, and a
        gather is on every turn's path (bench/kernel.py). Cancellation of the caller still
        propagates through the await as usual.
        """
        done = self._done
        if done.done():
            return
        loop = asyncio.get_running_loop()
        timers = [_Deadline(loop, self._time_up, deadline)]
        if deadlines is not None:
            # One timer per distinct shorter deadline, each expiring its slots together.
            groups: dict[float, list[int]] = {}
            for index, own in enumerate(deadlines):
                if own < deadline:
                    groups.setdefault(own, []).append(index)
            for own, indices in groups.items():
                timers.append(_Deadline(loop, partial(self.expire, indices), own))
        try:
            await done
        finally:
            for timer in timers:
                timer.cancel()

    def _time_up(self) -> None:
        _resolve(self._done)

    def close(self) -> GatherResult[Any]:
        """Stop accepting replies; whatever has not answered has timed out."""
        self.closed = True
        now = time.perf_counter() - self._start
        if not self._pending:  # everyone answered: the usual case, and the fast one
            return GatherResult(tuple(self._outcomes), now)  # type: ignore[arg-type]
        outcomes = tuple(
            TimedOut(self._names[i], now) if o is None else o for i, o in enumerate(self._outcomes)
        )
        return GatherResult(outcomes, now)


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class _Deadline:
    """Calls `fire` at the deadline, precisely.

    A long event-loop wait can overshoot in proportion to its length (seen here: 2.8 ms
    late on a 250 ms `asyncio.sleep`), and loop timers round up to whole milliseconds. So
    the timer aims a little short and re-arms, and spends the last 1.5 ms yielding to
    the loop (`call_soon`) instead of sleeping: the deadline lands within a fraction of a
    millisecond, at the cost of a little CPU only when someone is actually late.
    """

    __slots__ = ("_end", "_fired", "_handle", "_loop", "_on_time")

    _handle: asyncio.Handle

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_time: Callable[[], None], seconds: float
    ) -> None:
        self._loop = loop
        self._on_time = on_time
        self._fired = False
        self._end = loop.time() + seconds
        self._handle = self._arm()

    def _arm(self) -> asyncio.Handle:
        remaining = self._end - self._loop.time()
        if remaining <= 0.0015:
            return self._loop.call_soon(self._fire)
        step = remaining - max(remaining * 0.03, 0.0015)
        return self._loop.call_later(step, self._fire)

    def _fire(self) -> None:
        if self._fired:
            return
        if self._loop.time() < self._end:
            self._handle = self._arm()
        else:
            self._fired = True
            self._on_time()

    def cancel(self) -> None:
        self._handle.cancel()


class StreamSlot:
    """A bounded stream of replies to one `stream` request.

    The handler's items flow through a bounded memory stream, so a slow reader slows the
    actor (backpressure) instead of piling items up. When the reader goes away the
    handler's cancel scope is cancelled: abandoned work stops at once instead of running
    to its end for nobody.
    """

    __slots__ = ("_ended", "abandoned", "ended", "error", "receive", "scope", "send")

    def __init__(self, capacity: int) -> None:
        self.send: MemoryObjectSendStream[Any]
        self.receive: MemoryObjectReceiveStream[Any]
        self.send, self.receive = anyio.create_memory_object_stream[Any](capacity)
        self.scope: anyio.CancelScope | None = None
        self.error: BaseException | None = None
        self.abandoned = False
        self.ended = False  # the handler has returned (its cleanup done), or failed
        self._ended: anyio.Event | None = None  # made only for a reader that waits

    def reply(self, index: int, value: Any) -> None:  # pragma: no cover - streams emit
        raise AssertionError("stream slots receive items, not a single reply")

    def fail(self, index: int, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.send.close()
        self._end()

    def finish(self) -> None:
        self.send.close()
        self._end()

    def _end(self) -> None:
        self.ended = True
        if self._ended is not None:
            self._ended.set()

    async def wait_ended(self) -> None:
        if not self.ended:
            if self._ended is None:
                self._ended = anyio.Event()
            await self._ended.wait()

    def abandon(self) -> None:
        self.abandoned = True
        if self.scope is not None:
            self.scope.cancel()
        self.receive.close()


class ReplyStream(Generic[T]):
    """The reader's side of a `stream` request: an async iterator of replies."""

    __slots__ = ("_slot",)

    def __init__(self, slot: StreamSlot) -> None:
        self._slot = slot

    def __aiter__(self) -> ReplyStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            item: T = await self._slot.receive.receive()
        except anyio.EndOfStream:
            if self._slot.error is not None:
                raise as_kernel_error(self._slot.error) from None
            raise StopAsyncIteration from None
        return item

    async def aclose(self) -> None:
        self._slot.abandon()

    def abandon(self) -> None:
        """Stop reading: the handler is cancelled (usable where nothing can be awaited)."""
        self._slot.abandon()

    async def wait_ended(self) -> None:
        """Until the handler has returned, its cleanup done (after `abandon`: what it
        does when cancelled, such as recording so)."""
        await self._slot.wait_ended()
