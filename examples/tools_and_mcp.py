"""Your own tool and an MCP server's, offered to the model side by side.

    python examples/tools_and_mcp.py

`stock` is a plain function made a tool with `@tool`; `inventory_server.py` beside this
file is an MCP server (stdio) whose `price` tool the model sees as
`mcp__inventory__price`. Offline (no ANTHROPIC_API_KEY), the local model calls a tool
that your message names, with arguments drawn from its schema, so you can watch both
run before you give Frontmind a key.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import anyio
import msgspec

from frontmind import Frontmind, TextDelta, ToolFinished, ToolStarted, Turn, tool

HERE = Path(__file__).resolve().parent
SHELVES = {("42", "main"): 7}  # your inventory system


@tool(timeout_s=5, guidance="stock: check stock before promising a delivery date.")
async def stock(
    sku: Annotated[str, msgspec.Meta(description="The item's SKU.")],
    warehouse: str = "main",
    *,
    turn: Turn,
) -> dict[str, int]:
    """How many of an item are in stock."""
    return {"count": SHELVES.get((sku, warehouse), 0)}


INVENTORY = {"name": "inventory", "command": [sys.executable, str(HERE / "inventory_server.py")]}


async def main() -> None:
    offline = not os.environ.get("ANTHROPIC_API_KEY")
    with tempfile.TemporaryDirectory(prefix="frontmind-tools-") as data_dir:
        async with Frontmind.open(data_dir, offline=offline, tools=[stock], mcp=[INVENTORY]) as fm:
            for message in ("Use the stock tool for sku 42", "Use the price tool for sku 42"):
                print(f"you> {message}")
                async for event in fm.turn("shop", message):
                    if isinstance(event, ToolStarted):
                        print(f"\n[{event.name}] {event.input_json}")
                    elif isinstance(event, ToolFinished):
                        print(f"  -> {event.content}")
                    elif isinstance(event, TextDelta):
                        print(event.text, end="")
                print()


if __name__ == "__main__":
    anyio.run(main)
