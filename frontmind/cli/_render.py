"""Text views for the CLI: the next turn's context window, and turn statistics."""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence

import msgspec

from actors import (
    COMPACT_DELIMITER,
    DELIMITER,
    MCP_PREFIX,
    NO_COST,
    TOOL_NAMES,
    Cost,
    ModelCatalog,
    ModelRequest,
    block_kind,
    cost,
    estimate_tokens,
    records_cost,
    tool_name,
    tool_text,
)
from storage import Job, TurnRecord, TurnUsage

from .._models import shipped_catalog
from .._wire import PricedTurn

__all__ = ["render_context", "render_stats", "tool_origins"]

_TAG = re.compile(r"^<([a-z_][a-z0-9_]*)>", re.IGNORECASE)
_BREAK = "◆ breakpoint"


def _block_text(block: object) -> str:
    if isinstance(block, msgspec.Raw):
        return bytes(block).decode()  # a block carried as-is (thinking, an image, ...)
    text = getattr(block, "text", None)
    if text is not None:
        return str(text)
    content = getattr(block, "content", None)
    if isinstance(content, str):
        return content
    name = getattr(block, "name", "")
    raw = getattr(block, "input", b"")
    return f"{name} {bytes(raw).decode()}" if raw else str(name)


def _preview(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def tool_origins(request: ModelRequest) -> dict[str, list[str]]:
    """The request's tools by where they came from, in the array's order: built-in,
    yours (`[[tool]]`, `tools=`), each MCP server's (`mcp__{server}__{tool}`), and
    Anthropic's server tools."""
    origins: dict[str, list[str]] = {}
    for tool in request.tools:
        name = tool_name(tool)
        if isinstance(tool, msgspec.Raw):
            kind = msgspec.json.decode(tool, type=dict).get("type", "")
            origin, name = "server tools", f"{name} ({kind})"
        elif name.startswith(MCP_PREFIX):
            server, _, short = name.removeprefix(MCP_PREFIX).partition("__")
            origin, name = f"mcp server {server}", short
        else:
            origin = "built-in" if name in TOOL_NAMES else "yours"
        origins.setdefault(origin, []).append(name)
    return origins


def render_context(request: ModelRequest) -> str:
    """Sections labelled, breakpoints marked, cached and uncached token estimates."""
    lines: list[str] = []
    cached = 0
    pending = 0  # tokens since the last breakpoint: cached once a breakpoint closes them

    def account(tokens: int, marked: bool) -> str:
        nonlocal cached, pending
        pending += tokens
        if marked:
            cached += pending
            pending = 0
        return f"  {_BREAK}: cached through here" if marked else ""

    tool_tokens = sum(estimate_tokens(tool_text(t)) for t in request.tools)
    pending += tool_tokens
    lines.append(f"TOOLS  {len(request.tools)} definitions, ~{tool_tokens} tokens")
    for origin, names in tool_origins(request).items():
        lines.append(f"  [{origin}] {', '.join(names)}")
    lines.append("SYSTEM")
    for i, block in enumerate(request.system):
        match = _TAG.match(block.text)
        label = match.group(1) if match else ("base_prompt" if i == 0 else f"block {i}")
        tokens = estimate_tokens(block.text)
        marked = block.cache_control is not None
        note = account(tokens, marked)
        ttl = f" [{block.cache_control.ttl}]" if block.cache_control else ""
        lines.append(f"  [{label}] ~{tokens} tokens{note}{ttl}")
    lines.append("MESSAGES")
    for index, message in enumerate(request.messages):
        text = " ".join(_block_text(b) for b in message.content)
        tokens = sum(estimate_tokens(_block_text(b)) for b in message.content)
        controls = [getattr(b, "cache_control", None) for b in message.content]
        marked = any(c is not None for c in controls)
        ttl = next((f" [{c.ttl}]" for c in controls if c is not None), "")
        if text == DELIMITER:
            label = "delimiter (═ × 60): opens the notification center"
        elif text == COMPACT_DELIMITER:
            label = "delimiter (═ × 3, compact frame): opens the notification center"
        elif message.role == "assistant" and text.startswith("NOTIFICATION CENTER"):
            sections = re.findall(r"^<([a-z_]+)>$", text, flags=re.MULTILINE)
            label = f"NOTIFICATION CENTER: {', '.join(sections)}"
        else:
            kinds = {block_kind(b) for b in message.content}
            label = f"{'+'.join(sorted(kinds))}: {_preview(text)}"
        note = account(tokens, marked)
        lines.append(f"  #{index:<3} {message.role:<9} ~{tokens:>5} tokens  {label}{note}{ttl}")
    marks = request.breakpoints()
    lines.append(
        f"ESTIMATE  cached prefix ~{cached} tokens, uncached tail ~{pending} tokens "
        f"({marks} breakpoint{'' if marks == 1 else 's'})"
    )
    return "\n".join(lines)


def _percentiles(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)

    def pick(q: float) -> float:
        # Nearest rank: the smallest value with at least q of them at or below it (the
        # rank one above it made the p50 of two turns the slower, the p99 of 100 the max).
        rank = math.ceil(round(q * len(ordered), 9))
        return ordered[min(max(rank, 1), len(ordered)) - 1]

    return f"p50 {pick(0.5):.1f}  p90 {pick(0.9):.1f}  p99 {pick(0.99):.1f}  max {ordered[-1]:.1f}"


def _spent(records: Sequence[TurnRecord], catalog: ModelCatalog) -> Cost:
    """What the turns cost: a record a daemon priced (read through `frontmind.Client`)
    at the daemon's figure, so `stats --url` and the chat's `/stats` say what the daemon
    and its console say, whatever model data this machine holds; others on `catalog`."""
    own = [r for r in records if not isinstance(r, PricedTurn)]
    total = records_cost(own, catalog)
    for record in records:
        if isinstance(record, PricedTurn):
            total += record.spent()
    return total


def render_background(
    records: Sequence[TurnRecord], jobs: Sequence[Job], catalog: ModelCatalog | None = None
) -> list[str]:
    """The background calls' cost beside the conversation's, and their share from cache."""
    if not jobs:
        return []
    catalog = catalog or shipped_catalog()
    states = Counter(j.state for j in jobs)
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
    usage = sum((j.usage.usage for j in jobs if j.usage is not None), TurnUsage())
    calls = sum(1 for j in jobs if j.usage is not None)
    share = usage.cache_read_input_tokens / usage.total_input if usage.total_input else 0.0
    talk_cost = _spent(records, catalog)  # every turn's calls, as billed
    bg = NO_COST
    for job in jobs:
        if job.usage is not None:
            bg += cost(job.usage.usage, catalog.lookup(job.usage.model))
    talk_tokens, bg_cost = talk_cost.input_tokens, bg.input_tokens
    relative = f" ({bg_cost / talk_tokens:.1%} of the conversation's)" if talk_tokens else ""
    return [
        f"background jobs {len(jobs)}  ({outcomes}), {calls} model calls",
        f"background read {share:.1%} of input tokens read from cache "
        f"({usage.cache_read_input_tokens} of {usage.total_input}), "
        f"{usage.output_tokens} output tokens",
        f"input cost      conversation {talk_tokens:,.0f}, background {bg_cost:,.0f} "
        f"base-price tokens{relative}",
    ]


def _dollars(value: float | None) -> str:
    return "price unknown" if value is None else f"${value:,.4f}"


def render_stats(
    records: Sequence[TurnRecord],
    jobs: Sequence[Job] = (),
    catalog: ModelCatalog | None = None,
    *,
    waiting_vectors: int | None = None,
) -> str:
    """`catalog`: the prices (None: the shipped model data); `waiting_vectors`: with an
    embedder, how many memories the background worker has still to embed."""
    vectors = [] if waiting_vectors is None else [f"memory vectors  {waiting_vectors} waiting"]
    if not records:
        return "\n".join(["no turns recorded yet", *vectors])
    catalog = catalog or shipped_catalog()
    done = [r for r in records if r.status == "completed"]
    statuses = Counter(r.status for r in records)
    read = sum(r.usage.cache_read_input_tokens for r in done)
    total = sum(r.usage.total_input for r in done)
    share = read / total if total else 0.0
    timeouts: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    for record in records:
        for section in record.sections:
            if section.status in ("timeout", "failed"):
                timeouts[section.name] += 1
            elif section.status == "stale":
                stale[section.name] += 1
    misses = Counter(r.cache_miss_reason for r in done if r.cache_miss_reason)
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    first_tokens = [r.first_token_ms for r in done if r.first_token_ms is not None]
    lines = [
        f"turns           {len(records)}  ({outcomes})",
        f"cache hit share {share:.1%} of input tokens read from cache ({read} of {total})",
        f"compose ms      {_percentiles([r.compose_ms for r in done])}",
        f"first token ms  {_percentiles(first_tokens)}",
        f"turn total ms   {_percentiles([r.total_ms for r in done])}",
    ]
    if done:
        lines.append(f"mean compose    {statistics.fmean(r.compose_ms for r in done):.2f} ms")
    # Every turn's calls, as billed: a failed or cancelled turn's finished calls were
    # paid too (the daemon's continuum summaries count them the same way).
    spent = _spent(records, catalog)
    if done or spent.input_tokens:
        tools = " and server tools" if spent.server_tools_usd else ""
        lines.append(
            f"cost            input {spent.input_tokens:,.0f} base-price tokens "
            f"({_dollars(spent.input_usd)}), with output{tools} {_dollars(spent.total_usd)}"
        )
    lines.append(
        "section misses  "
        + (", ".join(f"{name}: {n} timeout/failed" for name, n in timeouts.most_common()) or "none")
    )
    if stale:
        lines.append("stale sections  " + ", ".join(f"{k}: {v}" for k, v in stale.most_common()))
    lines.append(
        "cache misses    " + (", ".join(f"{k}: {v}" for k, v in misses.most_common()) or "none")
    )
    chosen = [r.cache_ttl for r in done if r.cache_ttl is not None]
    if chosen:
        ttls = Counter(f"system {c.system} history {c.history}" for c in chosen)
        lines.append("cache TTLs      " + ", ".join(f"{k}: {v}" for k, v in ttls.most_common()))
        lines.append(f"last TTL choice {chosen[-1].reason}")
    used = sum((r.usage for r in records), TurnUsage())
    if used.web_search_requests or used.web_fetch_requests:
        lines.append(
            f"server tools    {used.web_search_requests} web searches, "
            f"{used.web_fetch_requests} web fetches: "
            f"${spent.server_tools_usd:.4f} (in the cost above)"
        )
    lines.extend(render_background(records, jobs, catalog))
    lines.extend(vectors)
    return "\n".join(lines)
