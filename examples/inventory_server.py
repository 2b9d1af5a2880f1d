"""A small MCP server (the official `mcp` SDK) for examples/tools_and_mcp.py: the
warehouse's prices, as another team might run them. Speaks MCP over stdio.

    python examples/inventory_server.py
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

PRICES = {"42": 19.5, "7": 4.25}

server = MCPServer("inventory", instructions="The warehouse's price list.")


@server.tool(description="The price of an item, in euros.")
def price(sku: Annotated[str, Field(description="The item's SKU.")]) -> str:
    found = PRICES.get(sku)
    return f"sku {sku}: {found:.2f} EUR" if found is not None else f"sku {sku}: no price"


if __name__ == "__main__":
    server.run()
