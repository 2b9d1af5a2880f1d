"""What Frontmind needs to know of each model: its context window, its output limit,
which thinking modes it takes, and whether it accepts `role: "system"` messages.

Kept as data, with its sources (late 2026):
- context windows, output limits and thinking modes: the model overview pages,
  https://platform.claude.com/docs/en/about-claude/models/overview and per model, e.g.
  .../models/opus-5/overview ("Context window: 1M tokens · Max output: 128K tokens",
  thinking "Adaptive"); Sonnet 5 takes no manual extended thinking (adaptive only).
- mid-conversation system messages: "Mid-conversation system messages" in the context
  management docs; Opus 5, Opus 4.8 and Fable 5 accept them, Sonnet 5 and older answer
  400 (docs/anthropic-api-facts.md).

A model missing from the table is not refused here (the API answers 404 for unknown
names): it is treated as a 200K-window model without system messages, and takes any
thinking mode, leaving the API to judge.
"""

from __future__ import annotations

import msgspec

from storage import ContinuumModel

from ._exceptions import SettingsError
from ._settings import ModelSettings

__all__ = [
    "MIN_THINKING_BUDGET",
    "MODELS",
    "ModelChoice",
    "ModelInfo",
    "check_model_choice",
    "choose_model",
    "model_info",
]


class ModelInfo(msgspec.Struct, frozen=True):
    context_window: int
    max_output: int
    thinking: frozenset[str]  # the thinking modes the model takes, besides "off"
    system_messages: bool = False


_K = 1000
_M = 1_000_000
_ADAPTIVE = frozenset({"adaptive"})
_BOTH = frozenset({"enabled", "adaptive"})
_MANUAL = frozenset({"enabled"})

MODELS: dict[str, ModelInfo] = {
    "claude-fable-5": ModelInfo(1 * _M, 128 * _K, _ADAPTIVE, system_messages=True),
    "claude-mythos-5": ModelInfo(1 * _M, 128 * _K, _ADAPTIVE),
    "claude-opus-5": ModelInfo(1 * _M, 128 * _K, _ADAPTIVE, system_messages=True),
    "claude-opus-4-8": ModelInfo(1 * _M, 128 * _K, _BOTH, system_messages=True),
    "claude-sonnet-5": ModelInfo(1 * _M, 128 * _K, _ADAPTIVE),
    "claude-opus-4-7": ModelInfo(1 * _M, 128 * _K, _ADAPTIVE),
    "claude-opus-4-6": ModelInfo(1 * _M, 128 * _K, _BOTH),
    "claude-sonnet-4-6": ModelInfo(1 * _M, 64 * _K, _BOTH),
    "claude-opus-4-5": ModelInfo(200 * _K, 64 * _K, _MANUAL),
    "claude-sonnet-4-5": ModelInfo(200 * _K, 64 * _K, _MANUAL),
    "claude-haiku-4-5": ModelInfo(200 * _K, 64 * _K, _MANUAL),
    "claude-opus-4-1": ModelInfo(200 * _K, 32 * _K, _MANUAL),
}
_UNKNOWN = ModelInfo(200 * _K, 32 * _K, _BOTH)


def model_info(name: str) -> ModelInfo:
    """The model's row; dated ids (`claude-haiku-4-5-20251001`) find their alias's."""
    info = MODELS.get(name)
    if info is None:
        base, _, date = name.rpartition("-")
        if date.isdigit() and len(date) == 8:
            info = MODELS.get(base)
    return info or _UNKNOWN


class ModelChoice(msgspec.Struct, frozen=True):
    """The model settings one turn runs with: the continuum's own over the config's."""

    name: str
    max_tokens: int
    thinking: str  # "off" | "enabled" | "adaptive"
    budget_tokens: int
    effort: str | None
    # What thinking blocks carry: "summarized" text or "omitted" (a signature only);
    # None: the model's own default.
    thinking_display: str | None = None

    @property
    def info(self) -> ModelInfo:
        return model_info(self.name)


def choose_model(defaults: ModelSettings, own: ContinuumModel) -> ModelChoice:
    return ModelChoice(
        name=own.model or defaults.name,
        max_tokens=own.max_tokens or defaults.max_tokens,
        thinking=own.thinking or defaults.thinking,
        budget_tokens=own.budget_tokens or defaults.budget_tokens,
        effort=own.effort or defaults.effort,
        thinking_display=own.thinking_display or defaults.thinking_display,
    )


MIN_THINKING_BUDGET = 1024


def check_model_choice(choice: ModelChoice, channel: str) -> ModelChoice:
    """Refuse a combination the API would refuse, naming the setting; else the choice."""
    info = choice.info
    if not choice.name.strip():
        raise SettingsError("model: the model name is empty")
    if not 1 <= choice.max_tokens <= info.max_output:
        raise SettingsError(
            f"max_tokens: must be from 1 to {info.max_output} for {choice.name}, "
            f"got {choice.max_tokens}"
        )
    if choice.thinking not in ("off", "enabled", "adaptive"):
        raise SettingsError(f"thinking: must be off, enabled or adaptive, not {choice.thinking!r}")
    if choice.thinking != "off" and choice.thinking not in info.thinking:
        modes = " or ".join(sorted(info.thinking)) or "none"
        raise SettingsError(
            f"thinking: {choice.name} does not take thinking = {choice.thinking!r} "
            f"(it takes {modes})"
        )
    # "budget_tokens must be ≥1024 and less than max_tokens" (extended thinking docs,
    # https://platform.claude.com/docs/en/build-with-claude/extended-thinking).
    if choice.thinking == "enabled" and not (
        MIN_THINKING_BUDGET <= choice.budget_tokens < choice.max_tokens
    ):
        raise SettingsError(
            f"budget_tokens: must be at least {MIN_THINKING_BUDGET} and less than "
            f"max_tokens ({choice.max_tokens}), got {choice.budget_tokens}"
        )
    if choice.thinking_display is not None and choice.thinking == "off":
        raise SettingsError(
            "thinking_display: applies to thinking; set thinking to enabled or adaptive "
            "(or leave thinking_display unset)"
        )
    if choice.effort is not None and choice.effort not in ("low", "medium", "high", "xhigh", "max"):
        raise SettingsError(
            f"effort: must be low, medium, high, xhigh or max, not {choice.effort!r}"
        )
    if channel == "system_message" and not info.system_messages:
        raise SettingsError(
            f"composer.channel: {choice.name} does not accept role-system messages "
            "(Opus 5, Opus 4.8 and Fable 5 do); use channel = 'frame' or another model"
        )
    return choice
