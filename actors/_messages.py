"""The messages actors exchange: frozen Structs in closed tagged unions."""

from __future__ import annotations

import time

import msgspec

from storage import DEFAULT_USER, Passage, SectionStatus

__all__ = [
    "Compose",
    "Composed",
    "ComposerMessage",
    "Drain",
    "MemoriesSurfaced",
    "Passage",
    "RecordsWaiting",
    "SectionLate",
    "SectionReply",
    "SystemSection",
    "TrinketMessage",
    "Turn",
    "TurnCommitted",
    "TurnStart",
    "Wake",
]


class Turn(msgspec.Struct, frozen=True):
    """What a trinket knows about the turn it renders for."""

    turn_id: str
    continuum_id: str
    user_text: str
    now: float  # seconds since the epoch
    timezone: str
    # Whose turn it is: a trinket reads only this user's data (the continuum id is the
    # user's own, so (user, continuum_id) is what identifies the conversation).
    user: str = DEFAULT_USER
    # The continuum's first message still in the model's context, as its conversation
    # actor holds it for this turn (checked against the store as the turn began); None
    # where nobody holds it (a preview, a test): a trinket that needs it reads it.
    history_start: int | None = None
    # A preview (`fm.context`, `fm.compose`): nothing goes to the model, so a trinket
    # counts nothing as shown (the memories' `uses`) and writes nothing.
    preview: bool = False


class TurnStart(msgspec.Struct, frozen=True, tag=True):
    turn: Turn
    deadline_at: float  # epoch seconds; a reply after this is late and warms the next turn


class TurnCommitted(msgspec.Struct, frozen=True, tag=True):
    user: str
    continuum_id: str
    turn_id: str


TrinketMessage = TurnStart | TurnCommitted


class SectionReply(msgspec.Struct, frozen=True, tag=True):
    section: str
    content: str


class SectionLate(msgspec.Struct, frozen=True, tag=True):
    """A render that finished after its turn's deadline, kept for the next turn."""

    user: str
    continuum_id: str
    section: str
    content: str
    rendered_at: float


class Compose(msgspec.Struct, frozen=True, tag=True):
    turn: Turn
    # When it was made, just before it is sent (`time.perf_counter`, this process): its
    # trip to the composer is the composer's measure of the event loop's lag.
    sent_at: float = msgspec.field(default_factory=time.perf_counter)


ComposerMessage = Compose | SectionLate


class SystemSection(msgspec.Struct, frozen=True):
    name: str
    text: str
    cached: bool


class Composed(msgspec.Struct, frozen=True):
    """The context a turn would get (`Frontmind.compose`): the system sections, the
    notification center's text, each section's status and the composer's warnings."""

    system: tuple[SystemSection, ...]
    notification: str  # "" when the notification center is empty
    sections: tuple[SectionStatus, ...]
    warnings: tuple[str, ...]
    compose_ms: float


class Wake(msgspec.Struct, frozen=True, tag=True):
    """Background work may be due: the worker looks for claimable jobs."""


class Drain(msgspec.Struct, frozen=True, tag=True):
    """Run every background job that is due now; the reply is how many ran."""


class RecordsWaiting(msgspec.Struct, frozen=True, tag=True):
    """Records of turns whose streams cannot write them wait in the engine's buffer
    (`DroppedRecords`): turns refused at the door (the refusal answers at once) and
    turns dropped unread before their actor took them (a finalizer cannot await). The
    background worker writes them; one message however many wait."""


class MemoriesSurfaced(msgspec.Struct, frozen=True, tag=True):
    """These memories were shown in a notification center (counted off the turn path)."""

    user: str
    memory_ids: tuple[int, ...]
