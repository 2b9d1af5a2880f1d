"""The token estimate behind the server's usage: Frontmind's own, so the two agree.

Tokens are estimated, never exact: `actors.estimate_tokens` (one token per 4 UTF-8
bytes, rounded up) of a block's canonical text, plus `BLOCK_FRAMING_TOKENS` per block.
What is exact is the accounting relative to this estimator: `input_tokens +
cache_creation_input_tokens + cache_read_input_tokens` always equals the sum of the
request's block estimates.

- a text block: its text;
- a tool_use block: its name and its input as compact JSON with sorted keys;
- a tool_result block: its content's text (text blocks joined by newlines);
- a tool definition: its name, description and input schema as compact sorted JSON.
"""

from __future__ import annotations

import json
from typing import Any

from actors import BLOCK_FRAMING_TOKENS
from actors import estimate_tokens as estimate_text_tokens

__all__ = ["BLOCK_FRAMING_TOKENS", "canonical_json", "estimate_text_tokens"]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
