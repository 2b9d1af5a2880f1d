"""The token estimate behind the server's usage.

Tokens are estimated, never exact: one token per 4 UTF-8 bytes of a block's canonical
text, rounded up, plus `BLOCK_FRAMING_TOKENS` per block. What is exact is the accounting
relative to this estimator: `input_tokens + cache_creation_input_tokens +
cache_read_input_tokens` always equals the sum of the request's block estimates, which is
also what `count_tokens` answers.

Its error against Claude's real tokenizer is not stated because it cannot be measured
offline: Anthropic publishes no tokenizer for current models (token counts come only from
the `count_tokens` endpoint), and what PyPI offers under that name (`anthropic-tokenizer`)
is an unofficial reconstruction, so a figure measured against it would mean nothing. The
rule of thumb the docs give for English prose (about 3.5 characters per token) puts this
estimate some 10-15% low on prose; on code and JSON, which tokenize less well, the gap is
wider. Use it for relative figures (hit rates, what a change costs), not for bills.

The local API stands alone (it imports nothing else of Frontmind), so this is its own
copy of the rule Frontmind's budgets use (`actors.estimate_tokens`); a test checks that
the two agree.

- a text block: its text;
- a tool_use or server_tool_use block: its name and its input as compact JSON with
  sorted keys;
- a tool_result block: its content's text (text blocks joined by newlines), plus
  `IMAGE_TOKENS` per image in it;
- an image block: `IMAGE_TOKENS` (the docs' figure for an image at the size the API
  scales large images down to, about 1.15 megapixels: width * height / 750);
- a document block: its text for a text source, else its source as compact JSON;
- a thinking block: its thinking text; a redacted_thinking block: its data;
- a tool definition: its name, description and input schema as compact sorted JSON
  (a server tool: its definition as compact sorted JSON).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BLOCK_FRAMING_TOKENS", "IMAGE_TOKENS", "canonical_json", "estimate_text_tokens"]

BLOCK_FRAMING_TOKENS = 3  # what a content block costs beyond its text
IMAGE_TOKENS = 1600


def estimate_text_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
