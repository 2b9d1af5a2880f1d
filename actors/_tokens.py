"""The token estimate Frontmind uses for budgets and the cache guard.

One token per 4 UTF-8 bytes, rounded up: the same rule as the local Messages API's
estimator, so budgets and simulated usage agree.
"""

from __future__ import annotations

__all__ = ["estimate_tokens"]


def estimate_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4
