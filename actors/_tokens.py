"""The token estimate Frontmind uses for budgets and the cache guard.

One token per 4 UTF-8 bytes, rounded up, plus a fixed framing cost per content block.
The local Messages API counts with these same functions, so budgets and simulated
usage agree.
"""

from __future__ import annotations

__all__ = ["BLOCK_FRAMING_TOKENS", "estimate_tokens"]

BLOCK_FRAMING_TOKENS = 3  # what a content block costs beyond its text


def estimate_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4
