"""The worker tasks that run active actors; an idle actor holds no task.

When a message reaches an idle actor, the pool hands its cell to a parked worker (a
task in the actor system's anyio task group, waiting on a future), or starts a new
worker when none is parked. The worker drains the cell (runs its messages in order
until the mailbox is empty) and parks again. A cell has at most one worker at a time:
the cell records it, and only a cell without one is activated.

Why parked workers and not a task per activation: anyio's `start_soon` costs about
10 µs a task (its task handle, cancel scope and done callback), eight of them four times
a whole `asyncio.gather` of eight; handing a cell to a parked worker costs about 1 µs
(bench/kernel.py). Every worker is still an ordinary child of the system's task group,
inside a cancel scope of its own: killing an actor cancels its worker's scope (anyio's
cancellation, so shielded sections such as a storage commit finish first), and
cancelling the system cancels every worker as any task group does.

Workers that were not needed for a whole `IDLE_S` leave the pool: the pool tracks the
fewest workers parked at once since its last trim (a comparison per activation, no clock
read), and a timer every `IDLE_S`, armed only while workers are parked, retires that
many. The pool follows the concurrency of recent traffic, not its all-time peak.

Context variables: a worker starts in a copy of the system's context (never its first
sender's). A handler that sets a context variable (`actors.current_turn`, say) changes
its worker's context, and the next actor that worker drained would see the value; so a
worker whose context changed during a drain leaves the pool instead of parking, and each
drain starts from the system's context, as each actor's own task used to.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from ._exceptions import ActorStopped

__all__ = ["IDLE_S", "Drainable", "Worker", "Workers"]

IDLE_S = 10.0  # workers not needed for this long leave the pool


class Drainable(Protocol):
    """What the pool needs of an actor's cell (runtime/_cell.py): the pool runs cells,
    and the cell module imports the pool, never the other way round."""

    name: str
    worker: Worker | None  # the worker draining it, set and cleared by the pool

    async def drain(self) -> None:
        """Run the mailbox's messages in order until it is empty."""

    def abort(self) -> None:
        """End at once, without running anything (its worker was cancelled)."""


class Worker:
    """One worker task: the scope that cancels it and the future it parks on."""

    __slots__ = ("parked", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.parked: asyncio.Future[Drainable | None] | None = None


class Workers:
    """The pool of workers of one actor system."""

    __slots__ = ("_closed", "_context", "_idle", "_loop", "_low", "_tg", "_timer")

    def __init__(self, tg: TaskGroup) -> None:
        self._tg = tg
        self._context = contextvars.copy_context()  # every worker starts from a copy
        self._loop = asyncio.get_running_loop()
        self._idle: deque[Worker] = deque()  # parked, the most recently parked last
        self._low = 0  # the fewest parked at once since the last trim: not needed
        self._timer: asyncio.TimerHandle | None = None  # the next trim, while any park
        self._closed = False

    def activate(self, cell: Drainable) -> None:
        """Start draining `cell`, which has no worker: a parked one, or a new one."""
        idle = self._idle
        while idle:
            worker = idle.pop()
            parked = worker.parked
            assert parked is not None
            if not parked.done():  # done: cancelled while parked, and on its way out
                cell.worker = worker
                parked.set_result(cell)
                if len(idle) < self._low:
                    self._low = len(idle)
                return
        self._low = 0
        if self._closed:
            raise ActorStopped(f"actor {cell.name!r}: the actor system is closing")
        worker = Worker()
        cell.worker = worker
        try:
            self._context.run(self._spawn, worker, cell)
        except BaseException:
            cell.worker = None
            raise

    def _spawn(self, worker: Worker, cell: Drainable) -> None:
        self._tg.start_soon(self._run, worker, cell, name="actor worker")

    def trim(self) -> None:
        """Retire the workers not needed since the last trim (the longest parked)."""
        idle = self._idle
        for _ in range(min(self._low, len(idle))):
            parked = idle.popleft().parked
            if parked is not None and not parked.done():
                parked.set_result(None)
        self._low = len(idle)

    def _on_timer(self) -> None:
        self._timer = None
        self.trim()
        if self._idle and not self._closed:
            self._timer = self._loop.call_later(IDLE_S, self._on_timer)

    def close(self) -> None:
        """No more parking: every parked worker ends; busy ones end after their drain."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._idle:
            parked = self._idle.pop().parked
            if parked is not None and not parked.done():
                parked.set_result(None)

    async def _run(self, worker: Worker, first: Drainable) -> None:
        # Parking is written out here, not in a helper: every activation resumes this
        # coroutine, and each frame on the way costs (bench/kernel.py).
        cell: Drainable | None = first
        del first  # a parked worker holds no cell (see below)
        loop = self._loop
        idle = self._idle
        copy_context = contextvars.copy_context
        context = copy_context()
        with worker.scope:
            while cell is not None:
                try:
                    await cell.drain()
                finally:
                    # The drain returned on an empty mailbox with no await since: from
                    # here on, the next message activates the cell again.
                    cell.worker = None
                if self._closed or copy_context() != context:
                    return  # closing, or a handler set a context variable: retire
                # Parked, the worker holds no cell: a stopped actor's state (and its
                # lane's) is freed now, not when this worker next runs or retires.
                cell = None
                worker.parked = parked = loop.create_future()
                idle.append(worker)
                if self._timer is None:
                    self._timer = loop.call_later(IDLE_S, self._on_timer)
                try:
                    cell = await parked
                except BaseException:
                    self._cancelled_while_parked(worker, parked)
                    raise

    def _cancelled_while_parked(
        self, worker: Worker, parked: asyncio.Future[Drainable | None]
    ) -> None:
        if parked.done() and not parked.cancelled():
            handed = parked.result()
            if handed is not None:
                # A cell was handed over just as we were cancelled: it ends here, as it
                # would have had it been running (its senders are told).
                handed.worker = None
                handed.abort()
        elif worker in self._idle:
            self._idle.remove(worker)
