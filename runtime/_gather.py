"""Scatter-gather: one message to many actors, replies collected until a deadline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ._codec import encode
from ._exceptions import KernelError
from ._outcomes import GatherResult
from ._ref import ActorRef
from ._replies import GatherSlots

__all__ = ["scatter_gather"]

M = TypeVar("M")
R = TypeVar("R")


async def scatter_gather(
    refs: Sequence[ActorRef[M, R]],
    message: M,
    *,
    deadline: float,
    deadlines: Sequence[float] | None = None,
) -> GatherResult[R]:
    """Send `message` to every actor at once and gather replies for at most `deadline` s.

    Never waits on a full mailbox: that actor's slot fails at once. An actor that is
    stopped, given up on, or crashes on this message settles its slot as failed the moment
    that happens. Replies after the deadline are dropped. One deadline covers the whole
    gather, not one per actor; `deadlines`, one per actor, gives some of them less time
    (an actor's slot times out at the smaller of its own deadline and `deadline`).
    """
    names: list[str] = []
    slots = GatherSlots(names, len(refs))
    payload: bytes | None = None  # encoded once for every encoded mailbox
    try:
        for index, ref in enumerate(refs):
            cell = ref._cell
            names.append(cell.name)
            try:
                if cell.encoded:
                    if payload is None:
                        payload = encode(message)
                    cell.put_nowait((payload, slots, index))
                else:
                    cell.put_nowait((message, slots, index))
            except KernelError as exc:
                slots.fail(index, exc)
        await slots.wait(deadline, deadlines)
    finally:
        result = slots.close()
    return result
