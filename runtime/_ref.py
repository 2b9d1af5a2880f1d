"""References: the only way to talk to an actor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

from ._actor import ActorStats
from ._cell import Cell
from ._replies import AskSlot, ReplyStream, StreamSlot

__all__ = ["ActorRef"]

M = TypeVar("M")
R = TypeVar("R")


class ActorRef(Generic[M, R]):
    """An address of an actor. Cheap to copy and to pass around.

    Timeouts belong to the caller: wrap `ask` in `anyio.fail_after` (or use
    `scatter_gather`, whose deadline is its purpose). An abandoned ask's reply is dropped.
    """

    __slots__ = ("_cell",)

    def __init__(self, cell: Cell) -> None:
        self._cell = cell

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def busy(self) -> bool:
        """Whether it is handling a message now."""
        return self._cell.busy

    def tell(self, message: M) -> None:
        """Fire and forget; raises `MailboxFull` instead of waiting for room."""
        cell = self._cell
        cell.put_nowait(cell.envelope(message, None))

    async def send(self, message: M) -> None:
        """Fire and forget, waiting for room in the mailbox (backpressure)."""
        cell = self._cell
        await cell.put(cell.envelope(message, None))

    async def ask(self, message: M) -> R:
        """Send and wait for the reply (request/response)."""
        cell = self._cell
        slot = AskSlot()
        await cell.put(cell.envelope(message, slot))
        reply: R = await slot.wait()
        return reply

    @asynccontextmanager
    async def stream(
        self, message: M, *, buffer: int = 64, wait: bool = True
    ) -> AsyncIterator[ReplyStream[Any]]:
        """Send and read many replies. Leaving the block early cancels the handler.

        With `wait=False` a full mailbox raises `MailboxFull` instead of waiting.
        """
        if wait:
            cell = self._cell
            slot = StreamSlot(buffer)
            await cell.put(cell.envelope(message, slot))
            replies: ReplyStream[Any] = ReplyStream(slot)
        else:
            replies = self.stream_nowait(message, buffer=buffer)
        try:
            yield replies
        finally:
            replies.abandon()

    def stream_nowait(self, message: M, *, buffer: int = 64) -> ReplyStream[Any]:
        """Send now (`MailboxFull` if there is no room) and read many replies from the
        stream returned, which the caller owns: `abandon()` stops reading and cancels the
        handler if it still runs. For an owner that holds more than the stream (the
        engine's turns); `stream` is this in an `async with` block."""
        cell = self._cell
        slot = StreamSlot(buffer)
        cell.put_nowait(cell.envelope(message, slot))
        return ReplyStream(slot)

    def stats(self) -> ActorStats:
        return self._cell.stats()

    def __repr__(self) -> str:
        return f"<ActorRef {self._cell.name!r} {self._cell.state.value}>"
