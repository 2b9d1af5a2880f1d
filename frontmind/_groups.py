"""Unwrapping exception groups at the edges a user sees.

Task groups wrap an error in an `ExceptionGroup` at every level they cross; a user of
`Frontmind.open` or the CLI should see the one error that happened, not four levels of
groups around it.
"""

from __future__ import annotations

__all__ = ["unwrap_group"]


def unwrap_group(exc: BaseException) -> BaseException:
    """The single error inside nested one-error groups, else `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
