"""What a turn costs: the one cost function every figure uses, and its price table.

The price table is the model data (`frontmind/models.toml`, with the Models API's and
the config's rows over it): each model's input and output price per million tokens and
its cache multipliers (5-minute write 1.25×, 1-hour write 2×, read 0.1×; Fable 5.1 and
Mythos 5.1 read at 0.025×, Opus 5.5 at 0.05×; the prompt-caching page's "Pricing").
The daemon's continuum list and turn records, `frontmind stats`, the demo, the simulator,
the console (which shows the daemon's figures) and a turn's warning of what a change
of model costs all count cost here:

- input cost in base-price tokens: a token of uncached input costs 1, a cache write
  its TTL's multiplier, a cache read the read multiplier (so figures compare across
  models of different prices);
- in dollars, with the 5-minute and 1-hour writes split, where the model's price is
  known, and the server tools' requests (`usage.server_tool_use`) at the row's
  `web_search_price` / `web_fetch_price` (models.toml; the web search page's "$10 per
  1,000 searches, plus standard token costs", the web fetch page's "no additional
  charges beyond standard token costs"), all in `total_usd`.

Code execution is not priced. Its charge is container time beyond an organization's
free hours (and nothing at all when web_search_20260209 / web_fetch_20260209 or later
are in the request: the code execution page), and the usage reports no container time:
`usage.server_tool_use` counts only web searches and web fetches, and a response's
`container` carries its id and expiry, not how long it ran. What a turn's code
execution costs cannot be told from what Frontmind is sent; the tokens it adds are
counted as every token is.

A usage whose cache writes are not split by TTL (older turn records) counts the unsplit
remainder at the 5-minute price. Without a row (a model no data knows), the documented
multipliers apply and there is no dollar figure.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from storage import TurnRecord, TurnUsage

from ._catalog import ModelCatalog, ModelRow

__all__ = [
    "NO_COST",
    "Cost",
    "cost",
    "input_cost",
    "records_cost",
]

_MILLION = 1_000_000
# The documented multipliers, for a usage of a model no data knows (ModelRow's defaults).
_ANY_MODEL = ModelRow(name="", context_window=1, max_output=1)


class Cost(msgspec.Struct, frozen=True, kw_only=True):
    """What a usage costs on one model (or several, summed)."""

    input_tokens: float  # input cost in base-price tokens
    uncached_usd: float | None = None
    write_5m_usd: float | None = None
    write_1h_usd: float | None = None
    read_usd: float | None = None
    output_usd: float | None = None
    server_tools_usd: float = 0.0  # web searches and fetches, beside the tokens

    @property
    def input_usd(self) -> float | None:
        parts = (self.uncached_usd, self.write_5m_usd, self.write_1h_usd, self.read_usd)
        return None if None in parts else sum(p for p in parts if p is not None)

    @property
    def total_usd(self) -> float | None:
        spent = self.input_usd
        if spent is None or self.output_usd is None:
            return None
        return spent + self.output_usd + self.server_tools_usd

    def __add__(self, other: Cost) -> Cost:
        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        return Cost(
            input_tokens=self.input_tokens + other.input_tokens,
            uncached_usd=add(self.uncached_usd, other.uncached_usd),
            write_5m_usd=add(self.write_5m_usd, other.write_5m_usd),
            write_1h_usd=add(self.write_1h_usd, other.write_1h_usd),
            read_usd=add(self.read_usd, other.read_usd),
            output_usd=add(self.output_usd, other.output_usd),
            server_tools_usd=self.server_tools_usd + other.server_tools_usd,
        )


NO_COST = Cost(input_tokens=0.0, uncached_usd=0.0, write_5m_usd=0.0, write_1h_usd=0.0,
               read_usd=0.0, output_usd=0.0)  # fmt: skip


def cost(usage: TurnUsage, row: ModelRow | None = None) -> Cost:
    """What `usage` costs on the model of `row` (see the module doc)."""
    priced = row or _ANY_MODEL
    unsplit = usage.cache_creation_input_tokens - usage.cache_creation_5m - usage.cache_creation_1h
    write_5m = usage.cache_creation_5m + max(unsplit, 0)
    weighted = {
        "uncached": usage.input_tokens * 1.0,
        "write_5m": write_5m * priced.cache_write_5m,
        "write_1h": usage.cache_creation_1h * priced.cache_write_1h,
        "read": usage.cache_read_input_tokens * priced.cache_read,
    }
    base = sum(weighted.values())
    # Per request, whatever the model's token prices (the row's, else the documented).
    tools = (
        usage.web_search_requests * priced.web_search_price
        + usage.web_fetch_requests * priced.web_fetch_price
    )
    if row is None or row.input_price is None:
        return Cost(input_tokens=base, server_tools_usd=tools)
    dollars = row.input_price / _MILLION
    output = None if row.output_price is None else usage.output_tokens * row.output_price / _MILLION
    return Cost(
        input_tokens=base,
        uncached_usd=weighted["uncached"] * dollars,
        write_5m_usd=weighted["write_5m"] * dollars,
        write_1h_usd=weighted["write_1h"] * dollars,
        read_usd=weighted["read"] * dollars,
        output_usd=output,
        server_tools_usd=tools,
    )


def input_cost(usage: TurnUsage, row: ModelRow | None = None) -> float:
    """Input cost in base-price tokens (`cost(...).input_tokens`)."""
    return cost(usage, row).input_tokens


def records_cost(records: Iterable[TurnRecord], catalog: ModelCatalog) -> Cost:
    """The summed cost of turns, each on its own model's row."""
    total = NO_COST
    for record in records:
        total += cost(record.usage, catalog.lookup(record.model))
    return total
