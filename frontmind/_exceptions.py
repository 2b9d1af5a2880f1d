"""Errors of the process edge (config, daemon, CLI, client), under the one root.

Every error Frontmind raises on purpose derives from `FrontmindError` (defined with the
domain actors, re-exported by `frontmind`); storage refusals derive from `StorageError`
and bad input from `InvalidInput`. `frontmind._errors.WIRE_ERRORS` maps them all to
HTTP statuses.
"""

from __future__ import annotations

from actors import FrontmindError

__all__ = ["BadBody", "ClientError", "ConfigError", "EdgeError"]


class EdgeError(FrontmindError):
    """Root of the errors raised by the process edge itself."""

    kind = "edge_error"


class ConfigError(EdgeError):
    """The configuration file or environment is wrong; the message names the key."""

    kind = "configuration_error"


class BadBody(EdgeError):
    """A request body is not valid JSON of the expected shape (HTTP 400)."""

    kind = "invalid_request"


class ClientError(EdgeError):
    """`frontmind.Client` could not reach the daemon, or could not read its answer."""

    kind = "client_error"
