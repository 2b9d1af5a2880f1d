"""What a turn's input costs: the one cost function every figure uses.

The daemon's continuum list, `frontmind stats`, the demo, the simulator and the console
all count input cost here, in base-price tokens: a token of uncached input costs 1, a
cache write 1.25 with a 5-minute TTL and 2 with a 1-hour TTL, a cache read 0.1 (the
prompt-caching page's multipliers). A usage whose cache writes are not split by TTL
(older turn records) counts the unsplit remainder at the 5-minute price.
"""

from __future__ import annotations

from storage import TurnUsage

__all__ = ["SERVER_TOOL_PRICES", "WEIGHTS", "input_cost", "server_tool_cost"]

# Input price relative to the base rate, as the API bills it.
WEIGHTS = {"uncached": 1.0, "write_5m": 1.25, "write_1h": 2.0, "read": 0.1}


# Server tools billed per use, in dollars per request, beside the tokens their results
# add: web search "$10 per 1,000 searches, plus standard token costs"
# (https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool, "Usage
# and pricing"); web fetch "no additional charges beyond standard token costs"
# (.../tool-use/web-fetch-tool, "Usage and pricing").
SERVER_TOOL_PRICES = {"web_search_requests": 10.0 / 1000, "web_fetch_requests": 0.0}


def server_tool_cost(usage: TurnUsage) -> float:
    """What the usage's server tool requests cost, in dollars."""
    return sum(float(getattr(usage, field)) * price for field, price in SERVER_TOOL_PRICES.items())


def input_cost(usage: TurnUsage) -> float:
    """Input cost in base-price tokens, with the API's multipliers."""
    unsplit = usage.cache_creation_input_tokens - usage.cache_creation_5m - usage.cache_creation_1h
    return (
        usage.input_tokens * WEIGHTS["uncached"]
        + (usage.cache_creation_5m + max(unsplit, 0)) * WEIGHTS["write_5m"]
        + usage.cache_creation_1h * WEIGHTS["write_1h"]
        + usage.cache_read_input_tokens * WEIGHTS["read"]
    )
