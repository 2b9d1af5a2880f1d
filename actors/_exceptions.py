"""Every error the domain actors raise, named by cause, under Frontmind's one root.

The root, `FrontmindError`, is storage's (the lowest layer that raises errors; see
`storage/_exceptions.py`) and is re-exported here. Each class's `type` is the one string
its error is reported with, in a `TurnError` event and in the daemon's answers alike;
the whole tree is drawn in `frontmind/_exceptions.py`.
"""

from __future__ import annotations

from storage import FrontmindError, InvalidInput

__all__ = [
    "Busy",
    "ComposeTimeout",
    "FrontmindError",
    "InvalidModelSettings",
    "McpUnavailable",
    "ModelError",
    "ModelOverloaded",
    "ModelRefused",
    "ModelRejected",
    "ModelStreamError",
    "ModelStreamOverloaded",
    "ModelUnavailable",
    "Overloaded",
    "SectionConfigError",
    "SettingsError",
    "ShuttingDown",
    "ToolDefinitionError",
    "TrinketLoadError",
]


class Busy(FrontmindError):
    """Too many turns are already queued on this continuum (or, as `Overloaded`, in
    this process). `retry_after`: seconds after which a retry is worth it, when known;
    `turn_id`: the refused turn's id, whose record says it was refused, when a turn was
    refused at its door."""

    type = "busy"

    def __init__(
        self, message: str, *, retry_after: float | None = None, turn_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.turn_id = turn_id


class Overloaded(Busy):
    """The process is past its capacity: more turns wait for a slot than it can start
    within `turns.max_wait_s` (refused at the door, before anything is composed or
    stored, with the seconds after which the queue should have room, `retry_after`), or,
    at the daemon's edge, its connections are all held (this request's was given to a
    client holding fewer while its body still arrived, or its token holds its share)."""

    type = "overloaded"


class ShuttingDown(FrontmindError):
    """The service is shutting down: a queued or running turn was ended (cancelled, with
    a record saying so; nothing of it is in the history)."""

    type = "shutting_down"


class McpUnavailable(FrontmindError):
    """An MCP server marked `required` did not start: the instance does not start."""

    type = "mcp_unavailable"


class ComposeTimeout(FrontmindError):
    """The composer itself did not answer (its trinkets' deadline is separate)."""

    type = "compose_timeout"


class ModelError(FrontmindError):
    """The model call failed (the SDK's error is chained as the cause)."""

    type = "model_error"


class ModelUnavailable(ModelError):
    """No usable API key, or the API could not be reached: says what to set."""

    type = "model_unavailable"


class ModelOverloaded(ModelError):
    """Rate limited or overloaded, and the SDK's retries are used up. `retry_after`: the
    seconds the API said to wait (its `retry-after` header), when it said."""

    type = "model_overloaded"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ModelRejected(ModelError):
    """The API refused the request (4xx other than auth and rate limits)."""

    type = "model_rejected"


class ModelRefused(ModelError):
    """The model declined the message (`stop_reason: "refusal"`)."""

    type = "refusal"


class ModelStreamError(ModelError):
    """The stream broke after it started (an `event: error` or a dropped connection)."""

    type = "stream_error"


class ModelStreamOverloaded(ModelStreamError, ModelOverloaded):
    """The API broke a started stream with an `overloaded_error` event. A broken stream
    first (its type, `stream_error`, and a turn retries it once if nothing had streamed
    yet), it says as a `ModelOverloaded` when to retry: `retry_after`, never None."""


class SettingsError(FrontmindError):
    """A setting has a value the runtime cannot work with (the message names it)."""

    type = "configuration_error"


class SectionConfigError(SettingsError):
    """A section is not in the placement registry, or the registry itself is inconsistent."""


class TrinketLoadError(SettingsError):
    """A configured trinket could not be imported or constructed."""


class ToolDefinitionError(SettingsError):
    """A tool cannot be declared: a bad name, no description, a signature with no schema."""


class InvalidModelSettings(SettingsError, InvalidInput):
    """A continuum's model settings were refused (the message names the setting); an
    `InvalidInput` too, like every other refused input."""

    type = "invalid_request"
