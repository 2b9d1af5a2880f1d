"""`GET /v1/models` and `GET /v1/models/{id}`: the served models in the Models API's shape.

Docs: https://platform.claude.com/docs/en/api/models/retrieve and .../models/list (and the
SDK's `ModelInfo`): `max_input_tokens`, `max_tokens` and a `capabilities` object whose
keys are always present; the list pages with `limit` (1-1000, default 20), `after_id`
and `before_id`, newest first. Every fact comes from the model's row in models.toml.
Retrieving "can be used to ... resolve a model alias to a model ID": a row's alias (a
dated snapshot) answers with the row's own id, the one the list shows. The list's
`lifecycle` filter (the SDK's `ModelListParams`): "Up to 3 values. When omitted, the list
contains the `active` and `deprecated` models; `retired` models appear only when
`retired` is requested explicitly."
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._models import ModelInfo

__all__ = ["LIFECYCLES", "LISTED_BY_DEFAULT", "model_json", "model_page"]

_LINES = ("haiku", "sonnet", "opus", "fable", "mythos")
_EPOCH = "1970-01-01T00:00:00Z"  # the docs' value when the release date is unknown
LIFECYCLES = ("active", "deprecated", "retired")
LISTED_BY_DEFAULT = frozenset({"active", "deprecated"})


def _supported(value: bool) -> dict[str, bool]:
    return {"supported": value}


def _display_name(name: str) -> str:
    parts = name.removeprefix("claude-").split("-")
    words = [p for p in parts if not (p.isdigit() and len(p) == 8)]
    line, version = words[0].capitalize(), ".".join(words[1:])
    return f"Claude {line} {version}".strip()


def model_json(info: ModelInfo) -> dict[str, Any]:
    thinking_types = info.thinking_types
    strategies = ("clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112")
    line = next((x for x in _LINES if f"-{x}-" in f"-{info.name}-"), None)
    return {
        "type": "model",
        "id": info.canonical or info.name,
        "display_name": _display_name(info.canonical or info.name),
        "created_at": _EPOCH,
        "lifecycle": info.lifecycle,
        "line": line,
        "deprecated_at": None,
        "retires_at": None,
        "max_input_tokens": info.context_window,
        "max_tokens": info.max_output,
        "capabilities": {
            "batch": _supported(True),
            "citations": _supported(True),
            # Code that calls the request's tools: dynamic filtering, programmatic calling.
            "code_execution": _supported(bool(info.server_tools & info.dynamic_server_tools)),
            "context_management": {
                "supported": bool(info.context_management),
                **{s: _supported(s in info.context_management) for s in strategies},
            },
            "effort": {
                "supported": bool(info.effort_levels),
                **{
                    lvl: _supported(lvl in info.effort_levels)
                    for lvl in ("low", "medium", "high", "xhigh", "max")
                },
            },
            "image_input": _supported(info.image_input),
            "pdf_input": _supported(info.pdf_input),
            # True when the model takes at least one version of the tool (the docs).
            "server_tools": {
                "supported": info.takes_family("code_execution") or info.takes_family("web_search"),
                "code_execution": _supported(info.takes_family("code_execution")),
                "web_search": _supported(info.takes_family("web_search")),
            },
            "structured_outputs": _supported(True),
            "thinking": {
                "supported": bool(thinking_types - {"disabled"}),
                "types": {
                    kind: _supported(kind in thinking_types)
                    for kind in ("adaptive", "between_tools", "disabled", "enabled")
                },
            },
        },
    }


def model_page(
    models: Mapping[str, ModelInfo],
    limit: int,
    after_id: str | None,
    before_id: str | None,
    lifecycles: frozenset[str] = LISTED_BY_DEFAULT,
) -> dict[str, Any]:
    """One page of the list: the served rows in file order (newest first; rows given as
    data after the file's), of the given lifecycle stages."""
    ids = [
        name
        for name, info in models.items()
        if info.name == info.canonical and info.lifecycle in lifecycles
    ]
    start, end = 0, len(ids)
    if after_id is not None and after_id in ids:
        start = ids.index(after_id) + 1
    if before_id is not None and before_id in ids:
        end = ids.index(before_id)
        start = max(start, end - limit)
    chosen = ids[start:end][:limit]
    return {
        "data": [model_json(models[name]) for name in chosen],
        "has_more": start + len(chosen) < end or (before_id is not None and start > 0),
        "first_id": chosen[0] if chosen else None,
        "last_id": chosen[-1] if chosen else None,
    }
