"""The one table from errors to the wire: (HTTP status, error type) by exception class.

The daemon answers with it; the client reads it back the other way. The most specific
class wins (the table is searched along the exception's MRO), so a new error subclass
inherits its parent's status until it is given its own row.
"""

from __future__ import annotations

from actors import (
    Busy,
    FrontmindError,
    InvalidModelSettings,
    ModelError,
    ModelOverloaded,
    ModelRejected,
    ModelUnavailable,
    SettingsError,
)
from storage import (
    InvalidInput,
    MessageTooLarge,
    NotFound,
    StorageError,
    StorageUnavailable,
    UnknownContinuum,
    UserExists,
)

from ._exceptions import (
    BadBody,
    BodyTooLarge,
    BudgetExceeded,
    ConfigError,
    Forbidden,
    ForbiddenRequest,
    RequestTimeout,
    UnsupportedMediaType,
)

__all__ = ["FROM_WIRE", "WIRE_ERRORS", "wire_error"]

WIRE_ERRORS: dict[type[BaseException], tuple[int, str]] = {
    BadBody: (400, "invalid_request"),
    BodyTooLarge: (413, "request_too_large"),
    BudgetExceeded: (413, "budget_exceeded"),
    ForbiddenRequest: (403, "forbidden"),
    UnsupportedMediaType: (415, "unsupported_media_type"),
    RequestTimeout: (408, "request_timeout"),
    InvalidInput: (400, "invalid_request"),
    MessageTooLarge: (413, "request_too_large"),
    UnknownContinuum: (404, "not_found"),
    NotFound: (404, "not_found"),
    Forbidden: (403, "forbidden"),
    UserExists: (409, "conflict"),
    Busy: (429, "busy"),
    InvalidModelSettings: (400, "invalid_request"),
    SettingsError: (400, "configuration_error"),
    ConfigError: (400, "configuration_error"),
    ModelRejected: (502, "model_rejected"),
    ModelOverloaded: (503, "model_overloaded"),
    ModelUnavailable: (503, "model_unavailable"),
    ModelError: (502, "model_error"),
    StorageUnavailable: (503, "storage_unavailable"),
    StorageError: (503, "storage_unavailable"),
    FrontmindError: (500, "internal_error"),
}

# The other way, for `frontmind.Client`: the class raised for each wire type. Where
# several classes share a type, the one callers catch (the most general) is named here.
FROM_WIRE: dict[str, type[BaseException]] = {
    **{kind: cls for cls, (_, kind) in WIRE_ERRORS.items()},
    "invalid_request": InvalidInput,
    "not_found": NotFound,
    "configuration_error": ConfigError,
    "storage_unavailable": StorageError,
}


def wire_error(exc: BaseException) -> tuple[int, str] | None:
    """The (status, type) for `exc`, or None when it is not one of ours (a bug: 500)."""
    for cls in type(exc).__mro__:
        row = WIRE_ERRORS.get(cls)
        if row is not None:
            return row
    return None
