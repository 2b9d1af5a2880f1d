"""What a gather reports for each actor: replied, timed out, or failed."""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

from ._exceptions import ActorCrashed, DeadlineExceeded, KernelError

__all__ = ["Failed", "GatherResult", "Outcome", "Replied", "TimedOut"]

T = TypeVar("T")


class Replied(msgspec.Struct, Generic[T], frozen=True):
    """The actor answered in time."""

    name: str
    value: T
    elapsed: float


class TimedOut(msgspec.Struct, frozen=True):
    """The deadline passed first; a reply arriving later is dropped."""

    name: str
    elapsed: float


class Failed(msgspec.Struct, frozen=True):
    """The actor could not answer: it raised, was stopped, full, or given up on."""

    name: str
    error: BaseException
    elapsed: float


Outcome = Replied[T] | TimedOut | Failed


class GatherResult(msgspec.Struct, Generic[T], frozen=True):
    """One outcome per actor, in the order the actors were given."""

    outcomes: tuple[Replied[T] | TimedOut | Failed, ...]
    elapsed: float

    def replies(self) -> list[T]:
        """The values of the actors that replied in time, in order."""
        return [o.value for o in self.outcomes if isinstance(o, Replied)]

    def unwrap(self) -> list[T]:
        """Every value, or the first problem raised as a kernel error."""
        values: list[T] = []
        for o in self.outcomes:
            if isinstance(o, Replied):
                values.append(o.value)
            elif isinstance(o, TimedOut):
                raise DeadlineExceeded(f"actor {o.name!r} did not reply in time")
            elif isinstance(o.error, KernelError):
                raise o.error
            else:
                raise ActorCrashed(f"actor {o.name!r} failed") from o.error
        return values
