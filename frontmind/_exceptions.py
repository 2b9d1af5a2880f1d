"""Errors of the process edge (config, daemon, CLI, client), under the one root.

Every error Frontmind raises on purpose derives from `FrontmindError` (defined with the
domain actors, re-exported by `frontmind`); storage refusals derive from `StorageError`
and bad input from `InvalidInput`. `frontmind._errors.WIRE_ERRORS` maps them all to
HTTP statuses.
"""

from __future__ import annotations

from actors import FrontmindError

__all__ = [
    "BadBody",
    "BodyTooLarge",
    "BudgetExceeded",
    "ClientError",
    "ConfigError",
    "DataDirLocked",
    "EdgeError",
    "Forbidden",
    "ForbiddenRequest",
    "RequestTimeout",
    "UnsupportedMediaType",
]


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


class BodyTooLarge(EdgeError):
    """A request body is over `server.max_body_bytes` (HTTP 413), refused unread."""

    kind = "request_too_large"


class BudgetExceeded(EdgeError):
    """A write would take a total over its configured budget (HTTP 413); names the key."""

    kind = "budget_exceeded"


class ForbiddenRequest(EdgeError):
    """A foreign `Host` or `Origin`: cross-site use or DNS rebinding (HTTP 403)."""

    kind = "forbidden"


class UnsupportedMediaType(EdgeError):
    """A state-changing request without `Content-Type: application/json` (HTTP 415)."""

    kind = "unsupported_media_type"


class RequestTimeout(EdgeError):
    """The request body stalled longer than the idle timeout (HTTP 408)."""

    kind = "request_timeout"


class DataDirLocked(EdgeError):
    """Another process holds the data directory's lock."""

    kind = "data_dir_locked"


class Forbidden(EdgeError):
    """The request's token is valid but may not do this: only the admin token manages
    users (HTTP 403)."""

    kind = "forbidden"
