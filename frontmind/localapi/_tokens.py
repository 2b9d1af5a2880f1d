"""The token estimate behind the server's usage.

Tokens are estimated, never exact: one token per 4 UTF-8 bytes of a block's canonical
text, rounded up, plus `BLOCK_FRAMING_TOKENS` per block. What is exact is the accounting
relative to this estimator: `input_tokens + cache_creation_input_tokens +
cache_read_input_tokens` always equals the sum of the request's block estimates.

The local API stands alone (it imports nothing else of Frontmind), so this is its own
copy of the rule Frontmind's budgets use (`actors.estimate_tokens`); a test checks that
the two agree.

- a text block: its text;
- a tool_use block: its name and its input as compact JSON with sorted keys;
- a tool_result block: its content's text (text blocks joined by newlines);
- a tool definition: its name, description and input schema as compact sorted JSON.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BLOCK_FRAMING_TOKENS", "canonical_json", "estimate_text_tokens"]

BLOCK_FRAMING_TOKENS = 3  # what a content block costs beyond its text


def estimate_text_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
