"""Timers by key: the cache warm-up's, one per continuum, replaced or cancelled by the
next turn. `TaskTimers` runs them as tasks of a task group its owner holds (cancelled
with it on shutdown); `frontmind simulate`'s clock runs them as it is advanced."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

__all__ = ["TaskTimers", "Timers"]

Fire = Callable[[], Awaitable[None]]


class Timers(Protocol):
    def schedule(self, key: Hashable, at: float, fire: Fire) -> None:
        """Call `fire` at clock time `at`, replacing the timer `key` had."""
        ...

    def cancel(self, key: Hashable) -> None:
        """Drop the timer `key` has, if it has not fired yet."""
        ...


class TaskTimers:
    """Each timer a task of `group`, sleeping until its time on `clock`."""

    def __init__(self, group: TaskGroup, clock: Callable[[], float]) -> None:
        self._group = group
        self._clock = clock
        self._pending: dict[Hashable, anyio.CancelScope] = {}

    def schedule(self, key: Hashable, at: float, fire: Fire) -> None:
        self.cancel(key)
        scope = anyio.CancelScope()
        self._pending[key] = scope
        self._group.start_soon(self._run, key, scope, at, fire)

    def cancel(self, key: Hashable) -> None:
        scope = self._pending.pop(key, None)
        if scope is not None:
            scope.cancel()

    def pending(self) -> int:
        return len(self._pending)

    async def _run(self, key: Hashable, scope: anyio.CancelScope, at: float, fire: Fire) -> None:
        with scope:
            await anyio.sleep(max(0.0, at - self._clock()))
            if self._pending.get(key) is scope:
                del self._pending[key]  # firing: a turn from now on waits behind it
            await fire()
