"""The actor base class and the supervision settings it runs under."""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Generic, TypeVar

import msgspec

__all__ = ["Actor", "ActorState", "ActorStats", "RestartPolicy"]

M = TypeVar("M")
R = TypeVar("R")


class Actor(Generic[M, R]):
    """A unit of state that handles its messages one at a time.

    Subclass it and implement `handle`. Its return value is the reply to an `ask`
    (ignored for a `tell`); for a `stream` request it returns an async iterator whose
    items are the replies. The instance is built from the factory when the first message
    arrives (an actor never sent anything is never built) and kept while the actor lives,
    idle or not; the supervisor builds a fresh one on every restart, so state never
    survives a crash.

    `protocol` and `replies` name the message and reply types (closed tagged unions of
    frozen Structs); encoded-mode mailboxes decode with them.
    """

    protocol: ClassVar[Any] = object
    replies: ClassVar[Any] = object

    async def started(self) -> None:
        """Called before the first message, and again after every restart."""

    async def stopped(self) -> None:
        """Called once when the actor stops normally (if it was ever built)."""

    async def handle(self, message: M) -> R:
        raise NotImplementedError


class ActorState(enum.Enum):
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"  # given up on; refuses messages until its cool-down has passed
    HALF_OPEN = "half_open"  # cooled down: one trial message decides


class RestartPolicy(msgspec.Struct, frozen=True):
    """One-for-one restarts: at most `max_restarts` within `within` seconds, then give up.

    The delay before restart n (from 0) is `min(backoff_initial * 2**n, backoff_max)`.
    Given up on, the actor refuses messages for `cooldown` seconds (a circuit breaker,
    open); the first message after that is a trial (half-open): the actor is built
    afresh and handles it, and if that succeeds the actor runs as before (closed), and
    if it crashes the actor is given up on for another cool-down. Nothing is left dead
    until a process restart.
    """

    max_restarts: int = 3
    within: float = 10.0
    backoff_initial: float = 0.005
    backoff_max: float = 1.0
    cooldown: float = 30.0

    def backoff(self, restarts_in_window: int) -> float:
        exponent = max(restarts_in_window - 1, 0)
        return float(min(self.backoff_initial * 2**exponent, self.backoff_max))


class ActorStats(msgspec.Struct, frozen=True):
    name: str
    state: str
    mailbox_depth: int
    mailbox_capacity: int
    restarts: int
    processed: int
    failed_messages: int
