"""The per-user gate between turns and deleting their user.

Deleting a user unloads their continuums, then deletes their rows in one transaction.
A turn started in between would load its continuum again and commit after the delete,
leaving rows of a user who is gone. So every turn of a `Frontmind` counts itself in
the gate from its start (before it holds its continuum's lane) to its end, and a
deletion first closes the gate: it is refused while a turn of the user is in flight,
and while it runs every new turn of theirs is refused (`Busy`). Counting and closing
happen without a suspension between check and change (one event loop), so no turn
slips between them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from actors import Busy, Engine, TurnStream, UserInput

__all__ = ["GatedTurn", "UserGate"]


class UserGate:
    """The turns in flight per user, and the users being deleted."""

    def __init__(self) -> None:
        self._turns: Counter[str] = Counter()
        self._closed: set[str] = set()

    def enter(self, user: str) -> None:
        if user in self._closed:
            raise Busy(f"user {user!r} is being deleted; no turn of theirs can start")
        self._turns[user] += 1

    def leave(self, user: str) -> None:
        self._turns[user] -= 1
        if not self._turns[user]:
            del self._turns[user]

    @asynccontextmanager
    async def closed(self, user: str) -> AsyncIterator[None]:
        """No turn of `user` runs or starts inside the block; `Busy` if one is in flight."""
        if self._turns[user]:
            raise Busy(f"user {user!r} has a turn in progress; delete them when it has ended")
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
