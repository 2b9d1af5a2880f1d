"""The models the local API serves, as data: one row per model name.

Sources, late 2026:
- minimum cacheable prefix: the prompt-caching page's per-model table (Opus 5, Fable 5 and
  Mythos 5: 512; Opus 4.8, Sonnet 5, Sonnet 4.5, Opus 4.1, Opus 4: 1,024; Opus 4.7: 2,048;
  Opus 4.6, Opus 4.5, Haiku 4.5: 4,096), as gathered in the project's API facts file.
  Sonnet 4.6 is reported as 1,024 or 2,048 by different sources; 1,024 is kept here.
  The 5.1/5.2/5.5 point releases are not in that table: they take their family's figure.
- role-system messages inside `messages`: Opus 5, Opus 4.8 and Fable 5 (not Sonnet 5).
- thinking on by default: Opus 5 ("what's new in Claude Opus 5"); Opus 5.5 cannot turn it
  off ("what's new in Claude Opus 5.5").
- prefill (a request ending on an assistant turn): removed from Claude 4.6 on
  ("what's new in Claude 4.6", prefill removal); older models still accept it.
- thinking blocks of earlier assistant turns: stripped from the context by the API for the
  Claude 4 models before Opus 4.5 ("context windows": previous thinking blocks are
  stripped from the context window calculation); kept from Opus 4.5 on.
- retired names answer 404 (`claude-mythos-preview` reached end of life on 2026-06-30,
  per the SDK's deprecation table; the Claude 3 family before it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODELS", "ModelInfo", "find_model"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    context_window: int
    min_cacheable: int
    system_messages: bool  # accepts {"role": "system"} inside messages
    thinks_by_default: bool
    prefill: bool  # accepts a request that ends on an assistant turn
    keeps_previous_thinking: bool  # earlier turns' thinking stays in context


_M = 1_000_000
_K200 = 200_000

# name, context window, min cacheable, system messages, thinks by default, prefill,
# keeps previous thinking
_ROWS: tuple[tuple[str, int, int, bool, bool, bool, bool], ...] = (
    ("claude-opus-5-5", _M, 512, True, True, False, True),
    ("claude-opus-5", _M, 512, True, True, False, True),
    ("claude-fable-5-2", _M, 512, True, False, False, True),
    ("claude-fable-5-1", _M, 512, True, False, False, True),
    ("claude-fable-5", _M, 512, True, False, False, True),
    ("claude-mythos-5-2", _M, 512, False, False, False, True),
    ("claude-mythos-5-1", _M, 512, False, False, False, True),
    ("claude-mythos-5", _M, 512, False, False, False, True),
    ("claude-sonnet-5-5", _M, 1024, False, False, False, True),
    ("claude-sonnet-5", _M, 1024, False, False, False, True),
    ("claude-haiku-5-5", _K200, 1024, False, False, False, True),
    ("claude-opus-4-8", _M, 1024, True, False, False, True),
    ("claude-opus-4-7", _M, 2048, False, False, False, True),
    ("claude-opus-4-6", _M, 4096, False, False, False, True),
    ("claude-sonnet-4-6", _M, 1024, False, False, False, True),
    ("claude-opus-4-5", _K200, 4096, False, False, True, True),
    ("claude-opus-4-5-20251101", _K200, 4096, False, False, True, True),
    ("claude-haiku-4-5", _K200, 4096, False, False, True, False),
    ("claude-haiku-4-5-20251001", _K200, 4096, False, False, True, False),
    ("claude-sonnet-4-5", _K200, 1024, False, False, True, False),
    ("claude-sonnet-4-5-20250929", _K200, 1024, False, False, True, False),
    ("claude-opus-4-1", _K200, 1024, False, False, True, False),
    ("claude-opus-4-1-20250805", _K200, 1024, False, False, True, False),
    ("claude-opus-4-0", _K200, 1024, False, False, True, False),
    ("claude-opus-4-20250514", _K200, 1024, False, False, True, False),
)

MODELS: dict[str, ModelInfo] = {row[0]: ModelInfo(*row) for row in _ROWS}


def find_model(name: str) -> ModelInfo | None:
    """The served model of this name, or None (unknown or retired: the API answers 404)."""
    return MODELS.get(name)
