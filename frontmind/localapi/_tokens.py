"""The token estimate behind the server's usage, calibrated against the live API's counts.

Anthropic publishes no tokenizer for current models, so counts are estimated; the
estimate is calibrated against input figures the live API reported for known requests
(recorded traffic and the docs' examples: the error table is in `bench/README.md`, made
by `bench/token_calibration.py`). What is exact is the accounting relative to the
estimate: `input_tokens + cache_creation_input_tokens + cache_read_input_tokens` always
equals the sum of the request's block estimates, which `count_tokens` answers too.

Text is cut into the pieces a BPE tokenizer starts from, and each piece costs:

- a run of ASCII letters (with the space before it): one token up to 7 letters, then a
  token for every 4 letters more (common words are one token; long rare ones split);
- a digit: one token (numbers are cut digit by digit);
- whitespace holding a line break: nothing (it joins its neighbours' tokens); other
  whitespace runs: `SPACE_TOKENS`;
- punctuation: `PUNCT_TOKENS` per ASCII character, half a token per byte of anything
  else (CJK, emoji, accents).

On top of the text, the request's structure costs what `FRAMING` says (fitted on the
same figures): per request, per message, per kind of block, per tool definition; the
tool-use system prompt the API adds when `tools` is given is model data
(`models.toml`, `[tool_prompt_tokens]`, from the docs' pricing page). Images cost the
docs' `width * height / 750` after the API's downscaling (`image_tokens`), PDFs a page
image plus the page's text for every page (`pdf_tokens`).

The local API stands alone (it imports nothing else of Frontmind). Frontmind's budgets
use a cheaper rule, one token per 4 UTF-8 bytes (`actors.estimate_tokens`), scaled per
continuum by the counts this server (or the live API) reports; `token_counts="plain"`
makes the server count by that plain rule instead.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

__all__ = [
    "BLOCK_FRAMING_TOKENS",
    "FRAMING",
    "IMAGE_TOKENS",
    "canonical_json",
    "cut_to_tokens",
    "estimate_text_tokens",
    "text_token_weight",
]

_PIECES = re.compile(r" ?[A-Za-z]+|[0-9]|\s+|[^\sA-Za-z0-9]+")
_WORD_LETTERS = 7  # letters one token covers
_LETTERS_PER_EXTRA = 4  # letters each further token covers in a longer word
SPACE_TOKENS = 1.54
PUNCT_TOKENS = 1.22
OTHER_BYTE_TOKENS = 0.5

# What the request's structure costs beyond its text (fitted, see the module docstring).
FRAMING: dict[str, float] = {
    "request": 5.7,  # every request
    "message": 1.8,  # every turn (consecutive same-role messages are one turn)
    "text": 0.47,  # a text (or thinking) block
    "tool_use": 6.2,  # a tool_use block, besides its name and input
    "tool_result": 7.1,  # a tool_result block, besides its content
    "document": 40.4,  # a document block, besides its content
    "search_result": 12.0,  # chosen: between a text block and a document
    "tool": 10.8,  # a tool definition, besides its name, description and schema
    "system": 0.4,  # each system text block
    "thinking_enabled": 26.1,  # the instructions manual thinking adds
    "thinking_adaptive": 15.0,  # ... and adaptive thinking beside manual (Claude 4.6)
    "task_budget": 38.0,  # output_config.task_budget's instructions (Opus 4.7 figures)
    "output_format": 68.7,  # the structured-output instructions, besides the schema
    "server_block": 5.0,  # chosen: a server tool block, besides its content
}
# The old flat figures, kept for callers that price a block without knowing its kind.
BLOCK_FRAMING_TOKENS = 1
IMAGE_TOKENS = 1600  # an image whose size is unknown (a URL or a file): the docs' ~1.15 MP


# A conversation sends its whole history again every turn, so the same texts are weighed
# turn after turn: with 400 turns of history a request took the server 160 ms, most of
# it here (95 ms with this). The weights of recent texts are kept, as a text's weight
# depends on the text alone: texts up to `_KEPT_CHARS`, at most 4,096 of them (the
# texts themselves kept alive with them: some MB for a conversation's messages, 32 MB
# of characters at the very worst).
_KEPT_CHARS = 8192


def text_token_weight(text: str) -> float:
    """The calibrated token estimate of `text`, unrounded (sums round once)."""
    return _kept_weight(text) if len(text) <= _KEPT_CHARS else _weigh(text)


@functools.lru_cache(maxsize=4096)
def _kept_weight(text: str) -> float:
    return _weigh(text)


def _weigh(text: str) -> float:
    total = 0.0
    for match in _PIECES.finditer(text):
        piece = match.group(0)
        first = piece[-1] if piece[0] == " " and len(piece) > 1 else piece[0]
        if first.isascii() and first.isalpha():
            letters = len(piece) - (piece[0] == " ")
            extra = max(letters - _WORD_LETTERS, 0)
            total += 1 + extra / _LETTERS_PER_EXTRA
        elif first.isdigit():
            total += 1
        elif first.isspace():
            if "\n" not in piece:
                total += SPACE_TOKENS
        else:
            ascii_chars = sum(ch.isascii() for ch in piece)
            other = len(piece.encode()) - ascii_chars
            total += ascii_chars * PUNCT_TOKENS + other * OTHER_BYTE_TOKENS
    return total


def estimate_text_tokens(text: str) -> int:
    return math.ceil(text_token_weight(text))


def cut_to_tokens(text: str, tokens: int) -> str:
    """The longest head of `text`, cut between pieces, that the estimate counts at no more
    than `tokens`: a reply cut at `max_tokens` never reports more output than that (docs:
    Messages API, `max_tokens`, "the maximum number of tokens to generate")."""
    end = 0
    weight = 0.0
    for match in _PIECES.finditer(text):
        weight += _weigh(match.group(0))  # pieces: not worth keeping
        if weight > tokens:
            break
        end = match.end()
    head = text[:end]
    # A head's pieces can differ from the whole text's at its end: settle on the count.
    while head and estimate_text_tokens(head) > tokens:
        head = head[:-1]
    return head


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
