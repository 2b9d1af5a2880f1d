"""The token estimate Frontmind uses for budgets and the cache guard.

One token per 4 UTF-8 bytes, rounded up, plus a fixed framing cost per content block:
cheap enough for every message and section of every turn, and close to the API's count
for prose. Dense text (JSON, CSV, code, numbers) the API counts some four times higher:
the history budget is scaled by what the API reported for each continuum
(`TokenScales`, actors/_conversation.py). The local Messages API counts with its own
calibrated rule (frontmind/localapi/_tokens.py), or with this one when started with
`token_counts="plain"`.
"""

from __future__ import annotations

__all__ = ["BLOCK_FRAMING_TOKENS", "estimate_tokens"]

BLOCK_FRAMING_TOKENS = 3  # what a content block costs beyond its text


def estimate_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4
