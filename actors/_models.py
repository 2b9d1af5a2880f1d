"""The model settings a turn runs with, and the check that refuses what the model refuses.

What each model accepts is data (the `ModelCatalog`, from `frontmind/models.toml`, the
config's `[[models]]` rows and the Models API); this module holds only the rules that
read it, each beside the docs page that states it. A refusal names the setting and gives
the docs' reason, before anything is stored or sent.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from storage import MIN_THINKING_BUDGET, ContinuumModel, InvalidInput, check_model_name, excerpt

from ._catalog import ModelCatalog, ModelRow
from ._exceptions import SettingsError
from ._settings import ModelSettings

__all__ = [
    "MIN_THINKING_BUDGET",
    "THINKING_TYPE",
    "ModelChoice",
    "check_model_choice",
    "choose_model",
    "known_row",
]


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


def choose_model(defaults: ModelSettings, own: ContinuumModel) -> ModelChoice:
    return ModelChoice(
        name=own.model or defaults.name,
        max_tokens=own.max_tokens or defaults.max_tokens,
        thinking=own.thinking or defaults.thinking,
        budget_tokens=own.budget_tokens or defaults.budget_tokens,
        effort=own.effort or defaults.effort,
        thinking_display=own.thinking_display or defaults.thinking_display,
    )


# Frontmind's thinking setting -> the API's thinking.type.
THINKING_TYPE = {"off": "disabled", "enabled": "enabled", "adaptive": "adaptive"}
_EFFORTS = ("low", "medium", "high", "xhigh", "max")


def known_row(catalog: ModelCatalog, name: str) -> ModelRow:
    """The model's row, or a `SettingsError` saying why there is none: retired (the API
    answers 404), or unknown to Frontmind's data (and, online, to the Models API)."""
    if not name.strip():
        raise SettingsError("model: the model name is empty")
    try:
        check_model_name(name)
    except InvalidInput as exc:
        raise SettingsError(str(exc)) from None
    row = catalog.listed(name)
    if row is not None:
        return row
    retired = catalog.retired_on(name)
    if retired is not None:
        raise SettingsError(
            f"model: {name} is retired ({retired}); the API answers 404 not_found_error "
            "(https://platform.claude.com/docs/en/about-claude/model-deprecations)"
        )
    raise SettingsError(
        f"model: {excerpt(name)!r} is not a model Frontmind knows "
        f"(known: {', '.join(catalog.names())}); "
        "with an API key the Models API is asked first; offline, add it with a [[models]] "
        "row in the config"
    )


_ORDER = {name: i for i, name in enumerate((*_EFFORTS, "adaptive", "enabled", "disabled"))}


def _list(values: Iterable[str]) -> str:
    """`low, medium or high`, in the docs' order."""
    items = sorted(values, key=lambda v: (_ORDER.get(v, len(_ORDER)), v))
    if not items:
        return "none"
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _check_thinking(choice: ModelChoice, row: ModelRow) -> None:
    """The thinking table of "Troubleshooting thinking" (per model: the types accepted,
    the default, the ones refused with a 400), from the row."""
    if choice.thinking not in THINKING_TYPE:
        raise SettingsError(f"thinking: must be off, enabled or adaptive, not {choice.thinking!r}")
    kind = THINKING_TYPE[choice.thinking]
    if not row.refuses_thinking(kind, choice.effort):
        return
    docs = "https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting"
    if kind == "disabled" and row.thinking_default == "always":
        raise SettingsError(
            f"thinking: {row.name} always thinks and cannot turn thinking off "
            '("thinking.type.disabled" is not supported for this model; models marked '
            f'"Always on" cannot turn thinking off, {docs}); use thinking = "adaptive" '
            "and a lower effort to spend less on thinking"
        )
    if kind == "disabled" and kind in row.thinking_types:
        raise SettingsError(
            f"thinking: {row.name} accepts thinking off only at effort "
            f"{_list(set(row.effort_levels) - set(_refused_efforts(row, kind)))}, not with "
            f"effort = {choice.effort!r} (a 400 from the API, {docs}); lower the effort "
            "or leave thinking on"
        )
    if kind == "disabled":
        raise SettingsError(
            f"thinking: {row.name} cannot turn thinking off (it takes "
            f"{_list(row.thinking_types)}; {docs})"
        )
    if kind == "enabled":
        raise SettingsError(
            f'thinking: "thinking.type.enabled" is not supported for {row.name}. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking '
            f"behavior (manual extended thinking is refused on Claude 4.7 and later, {docs}); "
            'set thinking = "adaptive" and an effort'
        )
    raise SettingsError(
        f"thinking: adaptive thinking is not supported on {row.name}; it takes only "
        f'extended thinking (thinking = "enabled" with budget_tokens, {docs})'
    )


def _refused_efforts(row: ModelRow, kind: str) -> frozenset[str]:
    for refused, efforts in row.thinking_refused_at_effort.items():
        if refused == kind:
            return frozenset(efforts)
    return frozenset()


def check_model_choice(choice: ModelChoice, channel: str, catalog: ModelCatalog) -> ModelChoice:
    """Refuse a combination the API would refuse, naming the setting; else the choice."""
    row = known_row(catalog, choice.name)
    if not 1 <= choice.max_tokens <= row.max_output:
        raise SettingsError(
            f"max_tokens: must be from 1 to {row.max_output} for {choice.name} (its maximum "
            f"output, https://platform.claude.com/docs/en/models/overview), "
            f"got {choice.max_tokens}"
        )
    if choice.effort is not None and choice.effort not in _EFFORTS:
        raise SettingsError(
            f"effort: must be low, medium, high, xhigh or max, not {choice.effort!r}"
        )
    _check_thinking(choice, row)
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
    if choice.effort is not None and choice.effort not in row.effort_levels:
        effort_docs = "https://platform.claude.com/docs/en/build-with-claude/effort"
        if not row.effort_levels:
            raise SettingsError(
                f"effort: {row.name} does not support effort (output_config.effort is not "
                f"available on it, {effort_docs}); leave effort unset"
            )
        raise SettingsError(
            f"effort: {row.name} takes effort {_list(row.effort_levels)}, not "
            f"{choice.effort!r} ({effort_docs})"
        )
    if channel == "system_message" and not row.system_messages:
        takers = sorted(r.name for r in catalog.rows() if r.system_messages)
        raise SettingsError(
            f"composer.channel: {row.name} does not accept role-system messages (these "
            f"do: {', '.join(takers)}); use channel = 'frame' or another model"
        )
    return choice
