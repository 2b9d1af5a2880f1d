"""The models the local API serves: the rows of Frontmind's shipped `models.toml`.

The local API stands alone (it imports nothing of the project), so it reads the same data
file as the product by path, with this small loader of its own; a test checks that both
views of the file agree. Every fact and its source (the docs page, and what was chosen
where the docs are unclear) is in the file, beside the row. Names under `[retired]` and
names in no row answer 404 `not_found_error`, as the API does for unknown and retired
models. Rows given as data (`LocalMessagesAPI(models=...)`: Frontmind offline hands it
its config's `[[models]]` rows) are served beside the file's, over a row of the same name.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = [
    "MODELS",
    "MODELS_FILE",
    "RETIRED",
    "ModelInfo",
    "find_model",
    "load_models",
    "served_models",
]

# frontmind/models.toml: package data beside this package.
MODELS_FILE = Path(__file__).resolve().parent.parent / "models.toml"

_ALL_THINKING = frozenset({"adaptive", "enabled", "disabled"})
_ALL_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
# A row's server_tools: dated types ("web_search_20250305"), or a family for every version.
SERVER_TOOL_FAMILIES = ("web_search", "web_fetch", "code_execution")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str  # the id it is served under (a row's name or one of its aliases)
    context_window: int
    min_cacheable: int
    system_messages: bool  # accepts {"role": "system"} inside messages
    thinks_by_default: bool
    prefill: bool  # accepts a request that ends on an assistant turn
    keeps_previous_thinking: bool  # earlier turns' thinking stays in context
    canonical: str = ""  # the row's name ("" : the same as `name`)
    max_output: int = 0
    thinking_types: frozenset[str] = _ALL_THINKING
    thinking_refused_at_effort: dict[str, frozenset[str]] = field(default_factory=dict)
    thinking_default: str = "off"  # "off", "on" or "always"
    thinking_display: str = "summarized"
    sampling_params: bool = True  # temperature / top_p / top_k at a non-default value
    effort_levels: frozenset[str] = _ALL_EFFORTS
    effort_default: str | None = None
    forced_tool_choice: bool = True
    input_price: float | None = None
    output_price: float | None = None
    cache_write_5m: float = 1.25
    cache_write_1h: float = 2.0
    cache_read: float = 0.1
    image_input: bool = True
    pdf_input: bool = True
    max_media: int = 100  # images and PDF pages a request may hold
    context_management: frozenset[str] = frozenset()
    reads_thinking_of: frozenset[str] = frozenset()
    server_tools: frozenset[str] = frozenset(SERVER_TOOL_FAMILIES)
    dynamic_server_tools: frozenset[str] = frozenset()  # need capabilities.code_execution
    # "none", "new_accounts" or "every_account": who gets the thinking prefix check
    prefix_check: str = "none"
    # the tool-use system prompt by tool_choice type (the file's [tool_prompt_tokens])
    tool_prompt_tokens: dict[str, int] = field(default_factory=dict)
    lifecycle: str = "active"

    def server_tool_family(self, kind: str) -> str | None:
        return next((f for f in SERVER_TOOL_FAMILIES if kind.startswith(f + "_")), None)

    def takes_server_tool(self, kind: str) -> bool:
        family = self.server_tool_family(kind)
        return kind in self.server_tools or family in self.server_tools

    def takes_family(self, family: str) -> bool:
        """Some version of the family (the Models API's capabilities.server_tools)."""
        return any(e == family or e.startswith(family + "_") for e in self.server_tools)


def _info(
    row: dict[str, Any],
    groups: dict[str, list[str]],
    tool_prompt: dict[str, int],
    tool_groups: dict[str, list[str]],
) -> ModelInfo:
    tools: set[str] = set()
    for entry in row.get("server_tools", SERVER_TOOL_FAMILIES):
        tools.update(tool_groups[entry[1:]] if entry.startswith("@") else [entry])
    readers: set[str] = set()
    for entry in row.get("reads_thinking_of", []):
        readers.update(groups[entry[1:]] if entry.startswith("@") else [entry])
    readers.discard(row["name"])
    thinking_default = row.get("thinking_default", "off")
    return ModelInfo(
        name=row["name"],
        canonical=row["name"],
        context_window=row["context_window"],
        max_output=row["max_output"],
        min_cacheable=row.get("min_cacheable", 1024),
        system_messages=row.get("system_messages", False),
        thinks_by_default=thinking_default != "off",
        prefill=row.get("prefill", False),
        keeps_previous_thinking=row.get("keeps_previous_thinking", True),
        thinking_types=frozenset(row.get("thinking_types", _ALL_THINKING)),
        thinking_refused_at_effort={
            kind: frozenset(efforts)
            for kind, efforts in row.get("thinking_refused_at_effort", {}).items()
        },
        thinking_default=thinking_default,
        thinking_display=row.get("thinking_display", "summarized"),
        sampling_params=row.get("sampling_params", True),
        effort_levels=frozenset(row.get("effort_levels", _ALL_EFFORTS)),
        effort_default=row.get("effort_default"),
        forced_tool_choice=row.get("forced_tool_choice", True),
        input_price=row.get("input_price"),
        output_price=row.get("output_price"),
        cache_write_5m=row.get("cache_write_5m", 1.25),
        cache_write_1h=row.get("cache_write_1h", 2.0),
        cache_read=row.get("cache_read", 0.1),
        image_input=row.get("image_input", True),
        pdf_input=row.get("pdf_input", True),
        max_media=row.get("max_media", 100),
        context_management=frozenset(row.get("context_management", [])),
        reads_thinking_of=frozenset(readers),
        server_tools=frozenset(tools),
        dynamic_server_tools=frozenset(tool_groups.get("dynamic", [])),
        prefix_check=row.get("prefix_check", "none"),
        tool_prompt_tokens=dict(tool_prompt),
    )


def load_models(
    path: Path = MODELS_FILE, extra: Iterable[Mapping[str, Any]] = ()
) -> tuple[dict[str, ModelInfo], dict[str, str]]:
    """Every served id (row names and their aliases) and the retired names. `extra`: rows
    in the file's `[[model]]` shape, each laid over the file's row of its name (the
    fields it gives) or added (then it gives `context_window` and `max_output`)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rows: dict[str, dict[str, Any]] = {row["name"]: row for row in data.get("model", [])}
    for given in extra:
        name = given.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a model row without a name: {dict(given)!r}")
        row = {**rows.get(name, {}), **given}
        missing = [key for key in ("context_window", "max_output") if key not in row]
        if missing:
            raise ValueError(f"model {name!r}: {missing[0]} is required for a new model")
        rows[name] = row
    groups: dict[str, list[str]] = data.get("thinking_groups", {})
    served: dict[str, ModelInfo] = {}
    for row in rows.values():
        info = _info(
            row, groups, data.get("tool_prompt_tokens", {}), data.get("server_tool_groups", {})
        )
        for name in (row["name"], *row.get("aliases", [])):
            served[name] = replace(info, name=name)
    retired: dict[str, str] = data.get("retired", {})
    return served, retired


def served_models(extra: Iterable[Mapping[str, Any]] = ()) -> dict[str, ModelInfo]:
    """The models served with these rows over the shipped file's (`MODELS` if none)."""
    rows = list(extra)
    return load_models(extra=rows)[0] if rows else MODELS


MODELS, RETIRED = load_models()


def find_model(name: str) -> ModelInfo | None:
    """The served model of this name, or None (unknown or retired: the API answers 404)."""
    return MODELS.get(name)
