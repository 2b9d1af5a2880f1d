"""An MCP server (the `mcp` SDK, stdio) whose tools have input schemas that MCP allows
but the Messages API refuses, beside one it takes.

    python -m tests._mcp_schemas_server

`either` has a top-level `anyOf` and `branches` a top-level `allOf` (JSON Schema
2020-12, which MCP 2026-07-28 permits), `dated` properties named as an HTTP API's
parameters (`StartTime<`), which the API's property names may not be; `misspelled`
an object schema that is not a valid JSON Schema (a property's `"type": "strnig"`),
`listed` one whose `required` is not a list; `plain` is an ordinary object schema.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool


def _answer(text: str = "") -> str:
    return f"plain: {text}"


def _tool(name: str, schema: dict[str, Any]) -> Tool:
    tool = Tool.from_function(_answer, name=name, description=f"The {name} tool.")
    return tool.model_copy(update={"parameters": schema})


TOOLS = [
    _tool("plain", {"type": "object", "properties": {"text": {"type": "string"}}}),
    _tool(
        "either",
        {
            "type": "object",
            "properties": {"id": {"type": "string"}, "slug": {"type": "string"}},
            "anyOf": [{"required": ["id"]}, {"required": ["slug"]}],
        },
    ),
    _tool(
        "dated",
        {
            "type": "object",
            "properties": {"StartTime<": {"type": "string"}, "StartTime>": {"type": "string"}},
        },
    ),
    _tool(
        "misspelled",
        {"type": "object", "properties": {"text": {"type": "strnig"}}},
    ),
    _tool(
        "listed",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": "text"},
    ),
    _tool(
        "branches",
        {
            "type": "object",
            "properties": {"mode": {"type": "string"}},
            "allOf": [{"if": {"required": ["mode"]}, "then": {"required": ["mode"]}}],
        },
    ),
]

server = MCPServer("schemas", tools=TOOLS)

if __name__ == "__main__":
    server.run("stdio")
