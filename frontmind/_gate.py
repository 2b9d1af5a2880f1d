"""The per-user gate between turns and deleting their user.

Deleting a user unloads their continuums, then deletes their rows in one transaction.
A turn started in between would load its continuum again and commit after the delete,
leaving rows of a user who is gone; so would a reminder, memory, document or setting
written meanwhile (it waits for the writer, then commits after the delete). So every
turn of a `Frontmind` counts itself in the gate from its start (before it holds its
continuum's lane) to its end, every other write of a user's rows for its duration, and
a deletion first closes the gate: it is refused while a turn or write of the user is in
flight, and while it runs every new turn or write of theirs is refused (`Busy`).
Counting and closing happen without a suspension between check and change (one event
loop), so nothing slips between them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from actors import Busy, Engine, TurnStream, UserInput

__all__ = ["GatedTurn", "UserGate"]


class UserGate:
    """The turns in flight per user, and the users being deleted."""

    def __init__(self) -> None:
        self._turns: Counter[str] = Counter()
        self._writes: Counter[str] = Counter()
        self._closed: set[str] = set()

    def enter(self, user: str) -> None:
        if user in self._closed:
            raise Busy(f"user {user!r} is being deleted; no turn of theirs can start")
        self._turns[user] += 1

    def leave(self, user: str) -> None:
        self._turns[user] -= 1
        if not self._turns[user]:
            del self._turns[user]

    @contextmanager
    def writing(self, user: str) -> Iterator[None]:
        """One write of `user`'s rows outside a turn; `Busy` while they are deleted."""
        if user in self._closed:
            raise Busy(f"user {user!r} is being deleted; nothing of theirs can be written")
        self._writes[user] += 1
        try:
            yield
        finally:
            self._writes[user] -= 1
            if not self._writes[user]:
                del self._writes[user]

    @asynccontextmanager
    async def closed(self, user: str) -> AsyncIterator[None]:
        """No turn or write of `user` runs or starts inside the block; `Busy` if one is
        in flight."""
        if self._turns[user]:
            raise Busy(f"user {user!r} has a turn in progress; delete them when it has ended")
        if self._writes[user]:
            raise Busy(f"user {user!r} has a write in progress; delete them when it has ended")
        if user in self._closed:
            raise Busy(f"user {user!r} is being deleted already")
        self._closed.add(user)
        try:
            yield
        finally:
            self._closed.discard(user)


class GatedTurn(TurnStream):
    """A turn that counts itself in its user's gate while it runs (see the module)."""

    __slots__ = ("_gate", "_in_gate")

    def __init__(
        self, engine: Engine, continuum_id: str, message: UserInput, user: str, gate: UserGate
    ) -> None:
        super().__init__(engine, continuum_id, message, user)
        self._gate = gate
        self._in_gate = False

    async def start(self) -> None:
        if not self._in_gate and not self._closed:
            self._gate.enter(self._user)  # before the turn holds a lane
            self._in_gate = True
        try:
            await super().start()
        except BaseException:
            if self._events is None:  # refused before it was queued: it holds nothing
                self._leave()
            raise

    def _leave(self) -> None:
        if self._in_gate:
            self._in_gate = False
            self._gate.leave(self._user)

    def _close(self, *, ended: bool) -> None:
        super()._close(ended=ended)
        self._leave()
