"""Unwrapping exception groups at the edges a user sees.

Task groups wrap an error in an `ExceptionGroup` at every level they cross; a user of
`Frontmind.open` or the CLI should see the one error that happened, not four levels of
groups around it.
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["raise_unwrapped", "unwrap_group"]


def unwrap_group(exc: BaseException) -> BaseException:
    """The single error inside nested one-error groups, else `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def raise_unwrapped(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Raise the error `unwrap_group` finds with its own cause and context (raised
    here, Python would make the group its context; `from None` lost a cause)."""
    error = unwrap_group(group)
    cause, context, suppressed = error.__cause__, error.__context__, error.__suppress_context__
    try:
        raise error
    finally:
        if error is not group:
            error.__cause__, error.__context__ = cause, context
            error.__suppress_context__ = suppressed
