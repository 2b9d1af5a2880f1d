"""What a turn's input costs: the one cost function every figure uses.

The daemon's continuum list, `frontmind stats`, the demo, the simulator and the console
all count input cost here, in base-price tokens: a token of uncached input costs 1, a
cache write 1.25 with a 5-minute TTL and 2 with a 1-hour TTL, a cache read 0.1 (the
prompt-caching page's multipliers). A usage whose cache writes are not split by TTL
(older turn records) counts the unsplit remainder at the 5-minute price.
"""

from __future__ import annotations

from storage import TurnUsage

__all__ = ["WEIGHTS", "input_cost"]

# Input price relative to the base rate, as the API bills it.
WEIGHTS = {"uncached": 1.0, "write_5m": 1.25, "write_1h": 2.0, "read": 0.1}


def input_cost(usage: TurnUsage) -> float:
    """Input cost in base-price tokens, with the API's multipliers."""
    unsplit = usage.cache_creation_input_tokens - usage.cache_creation_5m - usage.cache_creation_1h
    return (
        usage.input_tokens * WEIGHTS["uncached"]
        + (usage.cache_creation_5m + max(unsplit, 0)) * WEIGHTS["write_5m"]
        + usage.cache_creation_1h * WEIGHTS["write_1h"]
        + usage.cache_read_input_tokens * WEIGHTS["read"]
    )
