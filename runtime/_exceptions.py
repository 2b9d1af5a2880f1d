"""Every error the actor kernel raises, named by cause under one root."""

from __future__ import annotations

__all__ = [
    "ActorCrashed",
    "ActorRestart",
    "ActorStopped",
    "CodecError",
    "DeadlineExceeded",
    "KernelError",
    "MailboxFull",
    "MessageFailed",
    "RestartLimitReached",
]


class KernelError(Exception):
    """Root of every error raised by the actor kernel."""


class ActorStopped(KernelError):
    """The actor is stopped (or stopping) and takes no more messages."""


class MailboxFull(KernelError):
    """A non-blocking send found the actor's bounded mailbox full."""


class DeadlineExceeded(KernelError):
    """A reply did not arrive before the deadline the caller set."""


class RestartLimitReached(KernelError):
    """The supervisor gave up on the actor after too many restarts in its window.

    `retry_after`: the seconds until its cool-down ends, when the supervisor takes a
    message to it again (the first is a trial; see `RestartPolicy`), so that a caller
    can wait that long instead of retrying at once into the same refusal (None: not
    known, as for one made outside the supervisor)."""

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ActorCrashed(KernelError):
    """The actor's handler raised while handling this message (the cause is chained)."""


class ActorRestart(KernelError):
    """Raised by an actor (from `started` or `handle`) for a failure it has reported
    itself and expects: a crash like any other (restarted with the policy's backoff,
    counted toward its limit), logged as one line without a traceback."""


class CodecError(KernelError):
    """A message could not be encoded or decoded for an encoded-mode mailbox."""


class MessageFailed(KernelError):
    """Raised by a handler to fail the message in hand without crashing the actor.

    The sender gets this error (the cause chained); the actor keeps its state and goes
    on with its next message, and the failure counts toward no restart limit. For
    failures a handler has contained: anything else it raises is a crash.
    """
