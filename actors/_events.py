"""What a turn's caller receives: an async stream of typed events.

The tag of each event is its server-sent event name in the daemon's HTTP API.
"""

from __future__ import annotations

import msgspec

from storage import SectionStatus, TurnUsage

__all__ = [
    "TextDelta",
    "ThinkingDelta",
    "Timings",
    "ToolFinished",
    "ToolStarted",
    "TurnCompleted",
    "TurnError",
    "TurnEvent",
    "TurnStarted",
]


class TurnStarted(msgspec.Struct, frozen=True, tag_field="event", tag="turn.started"):
    """The turn holds its slot and has begun: the first event of every turn that runs."""

    turn_id: str
    continuum_id: str


class TextDelta(msgspec.Struct, frozen=True, tag_field="event", tag="text.delta"):
    """A piece of the reply's text, as it streams."""

    text: str


class ThinkingDelta(msgspec.Struct, frozen=True, tag_field="event", tag="thinking.delta"):
    """The model's thinking as it streams (a summary on the models that summarize it;
    nothing when its display is "omitted"). A `redacted_thinking` block is announced
    with `redacted=True` and no text: its data is encrypted and never shown."""

    text: str
    redacted: bool = False


class ToolStarted(msgspec.Struct, frozen=True, tag_field="event", tag="tool.started"):
    """The model called a tool: its call id, its name and its input as JSON text."""

    id: str
    name: str
    input_json: str


class ToolFinished(msgspec.Struct, frozen=True, tag_field="event", tag="tool.finished"):
    """A tool call's result (`is_error`: it raised, timed out or got bad input), as the
    model receives it."""

    id: str
    name: str
    is_error: bool
    content: str


class Timings(msgspec.Struct, frozen=True):
    compose: float
    first_token: float | None
    total: float


class TurnCompleted(msgspec.Struct, frozen=True, tag_field="event", tag="turn.completed"):
    """The turn is committed: the reply's text, its usage summed over its model calls,
    timings in ms, each section's status, the API's cache miss reason, its warnings and
    why the reply stopped. The last event of a turn that succeeded."""

    turn_id: str
    text: str
    usage: TurnUsage
    timings_ms: Timings
    sections: tuple[SectionStatus, ...]
    cache_miss_reason: str | None
    model_calls: int
    warnings: tuple[str, ...] = ()
    # Why the last model call stopped: end_turn, stop_sequence, max_tokens (the reply
    # was cut off; see warnings), pause_turn, model_context_window_exceeded.
    stop_reason: str | None = None


class TurnError(msgspec.Struct, frozen=True, tag_field="event", tag="error"):
    """The turn failed or was cancelled: the error's one type string (`busy`,
    `shutting_down`, `model_overloaded`, ...) and its message. The last event of a turn
    that did not complete. Nothing of the turn is in the history, unless a model call
    failed after tool rounds of the turn ran: those are kept, and the message says so."""

    type: str
    message: str
    turn_id: str | None = None
    # `model_overloaded`: the seconds the API said to wait before a retry, when it said;
    # a stream the API broke off as overloaded (`stream_error`): the adapter's wait.
    retry_after: float | None = None


TurnEvent = (
    TurnStarted | TextDelta | ThinkingDelta | ToolStarted | ToolFinished | TurnCompleted | TurnError
)
