"""MCP servers as a source of tools: config, connections under the kernel's supervision,
and the tools they offer (see `_hub.py` for how the offered list stays stable)."""

from ._hub import DEFAULT_MCP_POLICY, McpHub, McpServerStatus, ToolsReload
from ._spec import MCP_PREFIX, McpServer, check_mcp_servers, mcp_servers, mcp_tool_name

__all__ = [
    "DEFAULT_MCP_POLICY",
    "MCP_PREFIX",
    "McpHub",
    "McpServer",
    "McpServerStatus",
    "ToolsReload",
    "check_mcp_servers",
    "mcp_servers",
    "mcp_tool_name",
]
