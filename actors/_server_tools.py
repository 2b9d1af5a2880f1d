"""`[[server_tool]]`: Anthropic's server tools (web search, web fetch, code execution),
passed into the request's `tools` as given, after every client tool.

An entry is checked at startup against the `anthropic` SDK's own definition of its
`type` (the TypedDicts of `anthropic.types.ToolUnionParam`): an unknown type, an
unknown key or a value of the wrong type fails with one line naming the entry. `name`
may be left out (each server tool has one fixed name, which is filled in). Where the
model data says a model lacks a server tool's type, the entry is refused for that model
at settings time (`ServerToolSupport`, injected; `catalog_support` reads the catalog in
force: models.toml's `server_tools`, with the Models API's `capabilities` over it).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import msgspec

from ._catalog import SERVER_TOOL_FAMILIES, ModelCatalog, server_tool_family
from ._exceptions import SettingsError, ToolDefinitionError

__all__ = [
    "SERVER_TOOL_FAMILIES",
    "ServerTool",
    "ServerToolSupport",
    "catalog_support",
    "check_server_tool_support",
    "no_server_tool_data",
    "server_tools",
]

# (model, server tool type) -> why the model lacks it, or None when it takes it (or
# nothing is known of the model).
ServerToolSupport = Callable[[str, str], "str | None"]


def no_server_tool_data(model: str, kind: str) -> str | None:
    """Nothing known: the API judges."""
    return None


def catalog_support(catalog: Callable[[], ModelCatalog]) -> ServerToolSupport:
    """The model data's answer: the row of the catalog in force when asked (`catalog()`;
    online, the Models API's answer is in it once the model was met). A model no row
    knows: the API judges."""

    def support(model: str, kind: str) -> str | None:
        found = catalog()
        row = found.lookup(model)
        if row is None or row.takes_server_tool(kind):
            return None
        family = server_tool_family(kind) or kind
        listed = row.server_tools_of(family)
        has = f"only {', '.join(listed)} of {family}" if listed else f"no version of {family}"
        source = found.source(row, "server_tools") or "the model data"
        return f"it takes {has} ({source}); a [[models]] row with server_tools corrects the data"

    return support


class ServerTool(msgspec.Struct, frozen=True):
    """One server tool as the request carries it: its exact JSON."""

    name: str
    type: str
    family: str
    json: str


@cache
def _definitions() -> dict[str, tuple[type[Any], str]]:
    """Each server tool type the SDK knows: its TypedDict and family."""
    from anthropic.types import ToolUnionParam

    found: dict[str, tuple[type[Any], str]] = {}
    for member in typing.get_args(ToolUnionParam):
        hint = typing.get_type_hints(member).get("type")
        for value in typing.get_args(hint):
            if isinstance(value, str):
                family = next((f for f in SERVER_TOOL_FAMILIES if value.startswith(f + "_")), None)
                if family is not None:
                    found[value] = (member, family)
    return found


def _fixed_name(definition: type[Any]) -> str | None:
    hint = typing.get_type_hints(definition).get("name")
    values = [v for v in typing.get_args(hint) if isinstance(v, str)]
    return values[0] if len(values) == 1 else None


def server_tools(entries: Sequence[Mapping[str, Any]]) -> tuple[ServerTool, ...]:
    """The config's `[[server_tool]]` entries, checked, in their order."""
    if not entries:
        return ()  # the SDK's definitions (seconds to import) are needed only to check some
    import pydantic

    tools: list[ServerTool] = []
    known = _definitions()
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        kind = entry.get("type")
        where = f"[[server_tool]] #{index + 1}" + (f" ({kind})" if isinstance(kind, str) else "")
        if not isinstance(kind, str) or kind not in known:
            types = ", ".join(sorted(known))
            raise ToolDefinitionError(f"{where}: type must be one of {types}; got {kind!r}")
        definition, family = known[kind]
        if "cache_control" in entry:
            raise ToolDefinitionError(f"{where}: Frontmind places the cache breakpoints itself")
        # The SDK's keys but cache_control, which Frontmind sets itself.
        allowed = set(definition.__annotations__) - {"cache_control"}
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise ToolDefinitionError(
                f"{where}: unknown keys {unknown}; {kind} takes {sorted(allowed)}"
            )
        fields = dict(entry)
        name = _fixed_name(definition)
        if "name" not in fields and name is not None:
            fields = {
                "type": kind,
                "name": name,
                **{k: v for k, v in fields.items() if k != "type"},
            }
        try:
            # Strict: the entry is sent as given, so a value that would only pass coerced
            # (max_uses = "5") would reach the API as it is, and every request be refused.
            pydantic.TypeAdapter(definition).validate_python(fields, strict=True)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(part) for part in error["loc"])
            raise ToolDefinitionError(f"{where}: {key}: {error['msg']}") from None
        tool_name = str(fields.get("name", ""))
        if tool_name in seen:
            raise ToolDefinitionError(f"{where}: another [[server_tool]] is named {tool_name!r}")
        seen.add(tool_name)
        tools.append(ServerTool(tool_name, kind, family, msgspec.json.encode(fields).decode()))
    return tuple(tools)


def check_server_tool_support(
    tools: Sequence[ServerTool], model: str, support: ServerToolSupport, where: str
) -> None:
    """Refuse a server tool the model lacks (per the capabilities data), naming both."""
    for tool in tools:
        reason = support(model, tool.type)
        if reason is not None:
            raise SettingsError(f"{where}: {model} does not take the {tool.type} tool: {reason}")
