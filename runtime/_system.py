"""The actor system: owner of every actor and of the worker tasks that run them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from ._actor import Actor, ActorStats, RestartPolicy
from ._cell import Cell
from ._exceptions import ActorStopped
from ._ref import ActorRef
from ._workers import Workers

__all__ = ["ActorSystem"]

log = logging.getLogger("frontmind.runtime")

M = TypeVar("M")
R = TypeVar("R")


_DEFAULT_POLICY = RestartPolicy()


class ActorSystem:
    """Spawns actors and stops them in reverse order of start.

    An idle actor holds no task; an actor with messages is run by a worker task of the
    system's task group (see `_workers.py`), so no actor's work outlives the system.

    `encoded=True` runs every mailbox in encoded mode: messages and replies travel as
    msgpack bytes, as they would between processes.
    """

    def __init__(self, *, encoded: bool = False, stop_grace: float = 5.0) -> None:
        self.encoded = encoded
        self.stop_grace = stop_grace
        self._cells: list[Cell] = []
        self._names: dict[str, Cell] = {}
        self._tg: TaskGroup | None = None
        self._workers: Workers | None = None
        self._closing = False

    async def __aenter__(self) -> ActorSystem:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._workers = Workers(self._tg)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        assert self._workers is not None
        self._closing = True
        try:
            # Shielded so that stopping is orderly even when we leave by cancellation;
            # each actor still gets at most `stop_grace` to finish the message in hand.
            with anyio.CancelScope(shield=True):
                for cell in reversed(list(self._cells)):
                    await self._stop_cell(cell, self.stop_grace)
        finally:
            self._workers.close()  # parked workers end; the task group waits for the rest
            result = await self._tg.__aexit__(exc_type, exc, tb)
        return result

    def spawn(
        self,
        factory: Callable[[], Actor[M, R]],
        *,
        name: str,
        mailbox: int = 64,
        policy: RestartPolicy | None = None,
        encoded: bool | None = None,
    ) -> ActorRef[M, R]:
        """Register an actor under this system's supervision and return its reference.

        Nothing runs yet: the actor is built from `factory` when its first message
        arrives (and built afresh after a crash).
        """
        if self._workers is None or self._closing:
            raise ActorStopped(f"cannot spawn {name!r}: the actor system is not running")
        if name in self._names:
            raise ValueError(f"an actor named {name!r} is already running")
        cell = Cell(
            name,
            factory,
            workers=self._workers,
            capacity=mailbox,
            policy=policy or _DEFAULT_POLICY,
            encoded=self.encoded if encoded is None else encoded,
        )
        self._cells.append(cell)
        self._names[name] = cell
        return ActorRef(cell)

    async def stop(self, ref: ActorRef[Any, Any], *, grace: float | None = None) -> None:
        """Stop one actor: it finishes the message in hand, queued messages are refused.
        After `grace` seconds (`stop_grace` by default) the message in hand is cancelled:
        `grace=0` cancels it at once."""
        await self._stop_cell(ref._cell, self.stop_grace if grace is None else grace)

    async def _stop_cell(self, cell: Cell, grace: float) -> None:
        cell.stop()
        with anyio.move_on_after(grace):
            await cell.wait_stopped()
        if not cell.finished:
            if grace > 0:  # with none, the cancel was asked for
                log.warning("actor %r did not stop within %.1fs; cancelling it", cell.name, grace)
            cell.kill()
            await cell.wait_stopped()
        if cell in self._cells:
            self._cells.remove(cell)
        if self._names.get(cell.name) is cell:
            del self._names[cell.name]

    def lookup(self, name: str) -> ActorRef[Any, Any] | None:
        """The running actor registered under `name` (names are unique), if any."""
        cell = self._names.get(name)
        return None if cell is None else ActorRef(cell)

    def statistics(self) -> list[ActorStats]:
        return [cell.stats() for cell in self._cells]
