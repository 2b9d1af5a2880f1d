"""Every error the domain actors raise, under one root, named by cause."""

from __future__ import annotations

from storage import InvalidInput

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
    "ModelUnavailable",
    "SectionConfigError",
    "SettingsError",
    "ToolDefinitionError",
    "TrinketLoadError",
]


class FrontmindError(Exception):
    """Root of every error raised by the actors package."""

    kind = "frontmind_error"


class SectionConfigError(FrontmindError):
    """A section is not in the placement registry, or the registry itself is inconsistent."""

    kind = "configuration_error"


class TrinketLoadError(FrontmindError):
    """A configured trinket could not be imported or constructed."""

    kind = "configuration_error"


class ToolDefinitionError(FrontmindError):
    """A tool cannot be declared: a bad name, no description, a signature with no schema."""

    kind = "configuration_error"


class McpUnavailable(FrontmindError):
    """An MCP server marked `required` did not start: the instance does not start."""

    kind = "mcp_unavailable"


class ComposeTimeout(FrontmindError):
    """The composer itself did not answer (its trinkets' deadline is separate)."""

    kind = "timeout"


class Busy(FrontmindError):
    """Too many turns are already queued on this continuum."""

    kind = "busy"


class ModelError(FrontmindError):
    """The model call failed (the SDK's error is chained as the cause)."""

    kind = "model_error"


class ModelUnavailable(ModelError):
    """No usable API key, or the API could not be reached: says what to set."""

    kind = "model_unavailable"


class ModelOverloaded(ModelError):
    """Rate limited or overloaded, and the SDK's retries are used up."""

    kind = "overloaded"


class ModelRejected(ModelError):
    """The API refused the request (4xx other than auth and rate limits)."""

    kind = "invalid_request"


class ModelRefused(ModelError):
    """The model declined the message (`stop_reason: "refusal"`)."""

    kind = "refusal"


class ModelStreamError(ModelError):
    """The stream broke after it started (an `event: error` or a dropped connection)."""

    kind = "stream_error"


class SettingsError(FrontmindError):
    """A setting has a value the runtime cannot work with (the message names it)."""

    kind = "configuration_error"


class InvalidModelSettings(SettingsError, InvalidInput):
    """A continuum's model settings were refused (the message names the setting); an
    `InvalidInput` too, like every other refused input."""

    kind = "invalid_request"
