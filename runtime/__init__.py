"""The Frontmind actor kernel: actors, references, supervision, scatter-gather.

It knows nothing of trinkets, storage or the process edges (those live in `actors`,
`storage` and `frontmind`).
"""

from ._actor import Actor, ActorState, ActorStats, RestartPolicy
from ._exceptions import (
    ActorCrashed,
    ActorRestart,
    ActorStopped,
    CodecError,
    DeadlineExceeded,
    KernelError,
    MailboxFull,
    MessageFailed,
    RestartLimitReached,
)
from ._gather import scatter_gather
from ._outcomes import Failed, GatherResult, Replied, TimedOut
from ._ref import ActorRef
from ._replies import ReplyStream
from ._system import ActorSystem

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorRef",
    "ActorRestart",
    "ActorState",
    "ActorStats",
    "ActorStopped",
    "ActorSystem",
    "CodecError",
    "DeadlineExceeded",
    "Failed",
    "GatherResult",
    "KernelError",
    "MailboxFull",
    "MessageFailed",
    "Replied",
    "ReplyStream",
    "RestartLimitReached",
    "RestartPolicy",
    "TimedOut",
    "scatter_gather",
]
