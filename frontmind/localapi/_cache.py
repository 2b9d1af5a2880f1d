"""A prompt-cache simulator that accounts the way the Messages API does.

The prefix is flattened into blocks in processing order: tools, system, then message
content blocks. Each block's key is a hash chained over everything before it (model
first, `cache_control` left out), so a key names one exact prefix through one block
boundary. The docs' rules (prompt caching; extended thinking), as simulated:

- Entries are written only at breakpoints, and only when the prefix through the
  breakpoint reaches the model's minimum cacheable length (no error below it).
- Automatic caching (a top-level `cache_control`) puts a breakpoint on the last block
  that can carry one, so it moves forward as the conversation grows.
- Each breakpoint looks for an entry at its own boundary and at earlier boundaries, at
  most `LOOKBACK` positions in all counting its own (an entry at block 15 and a breakpoint
  at block 35 is a miss). A run of consecutive `tool_use` blocks is one position, and so
  is a run of consecutive `tool_result` blocks. The longest prefix found is read.
- `tool_choice`, the thinking configuration (on/off, budget) and the effort are part of
  the messages part of the prefix only: changing them re-writes the messages, while tools
  and system stay cached.
- Thinking blocks of assistant turns before the current one (the turn that began with the
  last user message that is not only tool results) are stripped from the context on
  models that do not keep them: they neither count nor take part in the prefix.
- A request looks its prefix up when it arrives, and its entries are written when its
  response starts: a request that arrived before that never reads them (so identical
  requests sent in parallel all write).
- An entry lives for its TTL (5m or 1h) counted from its last use; each hit refreshes it,
  for the TTL it was written with. A breakpoint at or before the longest hit writes
  nothing (only what lies after it is billed as a write), whatever its TTL.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from ._citations import citations_on
from ._clock import Clock
from ._images import ImageError, decode_image, image_tokens
from ._models import MODELS, ModelInfo
from ._pdf import PdfError, pdf_tokens
from ._schema import (
    Block,
    CacheControl,
    CompactionBlock,
    ContainerUploadBlock,
    DocumentBlock,
    ImageBlock,
    McpToolListingBlock,
    McpToolResultBlock,
    McpToolUseBlock,
    MessageParam,
    MessagesRequest,
    RedactedThinkingBlock,
    SearchResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolAdditionBlock,
    ToolReferenceBlock,
    ToolRemovalBlock,
    ToolResultBlock,
    ToolUseBlock,
    blocks_of,
)
from ._thinking import effective_thinking
from ._tokens import FRAMING, IMAGE_TOKENS, canonical_json, text_token_weight

__all__ = [
    "LOOKBACK",
    "CacheSimulator",
    "CacheUsage",
    "PrefixBlock",
    "context_messages",
    "edits_thinking",
    "min_cacheable_tokens",
    "prefix_blocks",
]

LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
_DEFAULT_MIN_CACHEABLE = 1024


def min_cacheable_tokens(model: str, models: Mapping[str, ModelInfo] = MODELS) -> int:
    """The model's minimum cacheable prefix (its row in `models`; 1,024 for others)."""
    info = models.get(model)
    return info.min_cacheable if info is not None else _DEFAULT_MIN_CACHEABLE


class PrefixBlock(NamedTuple):  # a tuple: a request makes one per block (800 at 400 turns)
    key: bytes
    tokens: int
    section: str  # "tools" | "system" | "messages"
    ttl: str | None  # the breakpoint's TTL, or None when the block is no breakpoint
    position: int = 0  # lookback position: a run of tool_use (or tool_result) blocks shares one
    carrier: bool = True  # can carry cache_control (thinking blocks cannot)


@dataclass(slots=True)
class _Entry:
    ttl: float
    expires_at: float


@dataclass(slots=True)
class CacheUsage:
    total: int
    read: int
    written_5m: int
    written_1h: int
    blocks: list[PrefixBlock] = field(default_factory=list)
    writes: list[tuple[bytes, float]] = field(default_factory=list)  # (key, TTL seconds)

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h

    @property
    def uncached(self) -> int:
        return self.total - self.read - self.written


def _json_text(value: Any) -> str:
    """JSON as the API renders it to the model (calibrated on this spacing, keys in the
    order sent)."""
    return json.dumps(value, ensure_ascii=False)


def _source_weight(block: ImageBlock | DocumentBlock) -> float:
    source = block.source
    kind = source.get("type")
    if isinstance(block, ImageBlock):
        if kind == "base64":
            try:
                width, height = decode_image(str(source.get("data")), str(source.get("media_type")))
            except ImageError:
                return IMAGE_TOKENS  # refused before counting; count_tokens checks first
            return image_tokens(width, height)
        return IMAGE_TOKENS  # a URL or a file: its size is unknown here
    if kind == "text":
        return text_token_weight(str(source.get("data", "")))
    if kind == "content":
        parts = source.get("content")
        if isinstance(parts, str):
            return text_token_weight(parts)
        return sum(
            text_token_weight(str(p.get("text", ""))) + FRAMING["text"]
            for p in parts or ()
            if isinstance(p, dict)
        )
    if kind == "base64" and source.get("media_type") == "application/pdf":
        try:
            return pdf_tokens(str(source.get("data")))
        except PdfError:
            return IMAGE_TOKENS
    return IMAGE_TOKENS  # a PDF by URL or file: one page of unknown text


def block_weight(block: Any) -> float:
    """A content block's tokens, unrounded: its content plus its kind's framing."""
    if isinstance(block, TextBlock):
        return text_token_weight(block.text) + FRAMING["text"]
    if isinstance(block, ToolUseBlock | ServerToolUseBlock | McpToolUseBlock):
        return FRAMING["tool_use"] + text_token_weight(block.name + _json_text(block.input))
    if isinstance(block, ThinkingBlock):
        return text_token_weight(block.thinking) + FRAMING["text"]
    if isinstance(block, RedactedThinkingBlock):
        return len(block.data) / 40 + FRAMING["text"]  # chosen: opaque, ~1 token per 30 bytes
    if isinstance(block, ImageBlock):
        return _source_weight(block) + FRAMING["text"]
    if isinstance(block, DocumentBlock):
        extra = text_token_weight((block.title or "") + (block.context or ""))
        return _source_weight(block) + extra + FRAMING["document"]
    if isinstance(block, SearchResultBlock):
        text = block.source + block.title
        return (
            FRAMING["search_result"]
            + text_token_weight(text)
            + sum(block_weight(part) for part in block.content)
        )
    if isinstance(block, ToolResultBlock | McpToolResultBlock):
        content = block.content
        if content is None:
            return FRAMING["tool_result"]
        if isinstance(content, str):
            return FRAMING["tool_result"] + text_token_weight(content)
        return FRAMING["tool_result"] + sum(block_weight(part) for part in content)
    if isinstance(block, ToolReferenceBlock):
        return FRAMING["text"] + text_token_weight(block.tool_name)
    if isinstance(block, CompactionBlock):
        summary = block.content or ""
        hidden = len(block.encrypted_content or "") / 40
        return FRAMING["text"] + text_token_weight(summary) + hidden
    if isinstance(block, ToolAdditionBlock | ToolRemovalBlock):
        return FRAMING["tool"] + text_token_weight(_json_text(block.tool))
    if isinstance(block, McpToolListingBlock):
        return FRAMING["tool"] + text_token_weight(_json_text(block.tools))
    if isinstance(block, ContainerUploadBlock):
        return FRAMING["server_block"] + text_token_weight(block.file_id)
    # server tool results: what the API returned, as JSON (web search results, ...)
    content = msgspec.to_builtins(getattr(block, "content", None))
    return FRAMING["server_block"] + _server_result_weight(content)


def _server_result_weight(content: Any) -> float:
    """A server tool's result as JSON, a document in it (web fetch's PDF: "PDF content
    ... returned as base64-encoded data", https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-fetch-tool)
    counted as a document block is, by its pages, never by the length of its base64."""
    documents: list[float] = []

    def without_documents(value: Any) -> Any:
        if isinstance(value, list):
            return [without_documents(item) for item in value]
        if not isinstance(value, dict):
            return value
        source = value.get("source")
        if value.get("type") == "document" and isinstance(source, dict):
            try:
                documents.append(_source_weight(msgspec.convert(value, DocumentBlock)))
            except msgspec.ValidationError:
                return value
            return {key: item for key, item in value.items() if key != "source"}
        return {key: without_documents(item) for key, item in value.items()}

    rest = without_documents(content)
    return text_token_weight(_json_text(rest)) + sum(documents)


def block_tokens(block: Block) -> int:
    return math.ceil(block_weight(block))


def _strip_cache_control(block: msgspec.Struct) -> bytes:
    if hasattr(block, "cache_control"):
        block = msgspec.structs.replace(block, cache_control=None)
    return msgspec.json.encode(block)


def _ttl(control: CacheControl | None) -> str | None:
    return None if control is None else control.ttl


def _run_kind(block: Block) -> str | None:
    if isinstance(block, ToolUseBlock):
        return "tool_use"
    if isinstance(block, ToolResultBlock):
        return "tool_result"
    if isinstance(block, ThinkingBlock | RedactedThinkingBlock):
        return "thinking"
    return None


def _after_compaction(messages: list[MessageParam]) -> list[MessageParam]:
    """What the model reads of a history holding a `compaction` block: the API drops
    every block before the last one (docs: compaction, "the API automatically drops all
    message blocks prior to the compaction block")."""
    for i in range(len(messages) - 1, -1, -1):
        blocks = messages[i].content
        if isinstance(blocks, str):
            continue
        for j in range(len(blocks) - 1, -1, -1):
            if isinstance(blocks[j], CompactionBlock):
                return [MessageParam(messages[i].role, blocks[j:]), *messages[i + 1 :]]
    return messages


def edits_thinking(request: MessagesRequest) -> bool:
    """Whether the request's own `clear_thinking_20251015` edit decides which thinking
    stays (it replaces the model's default; `_context.py` applies it)."""
    config = request.context_management
    edits = config.get("edits") if isinstance(config, dict) else None
    return any(
        isinstance(e, dict) and e.get("type") == "clear_thinking_20251015" for e in edits or ()
    )


def context_messages(
    messages: list[MessageParam], model: ModelInfo | None, keep_thinking: bool = False
) -> list[MessageParam]:
    """The messages as the model sees them: earlier turns' thinking stripped where the
    model does not keep it (docs: context windows, extended thinking), unless the
    request's own clear_thinking edit chose (`keep_thinking`)."""
    messages = _after_compaction(messages)
    if model is None or model.keeps_previous_thinking or keep_thinking:
        return messages
    current = 0  # the current turn begins at the last user message that is not only results
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role == "user" and any(
            not isinstance(b, ToolResultBlock) for b in blocks_of(message)
        ):
            current = i
            break
    out: list[MessageParam] = []
    for i, message in enumerate(messages):
        if i < current and message.role == "assistant" and isinstance(message.content, list):
            kept: list[Block] = [
                b
                for b in message.content
                if not isinstance(b, ThinkingBlock | RedactedThinkingBlock)
            ]
            if kept != message.content:
                message = MessageParam(message.role, kept)
        out.append(message)
    return out


def tool_prompt_tokens(request: MessagesRequest, model: ModelInfo | None) -> tuple[int, int]:
    """The tool-use system prompt the API adds: (tools part, messages part).

    The part every tool_choice shares belongs to the tools; what a forcing tool_choice
    adds belongs to the messages, as a tool_choice change re-writes only the messages
    (docs: prompt caching, "What invalidates the cache")."""
    if not request.tools or model is None:
        return 0, 0
    base = model.tool_prompt_tokens.get("auto", 0)
    kind = str((request.tool_choice or {}).get("type", "auto"))
    return base, model.tool_prompt_tokens.get(kind, base) - base


def _context_weight(request: MessagesRequest, model: ModelInfo | None) -> float:
    """What the request's settings add at the head of the messages (they re-write the
    messages when they change, not tools or system)."""
    thinking = effective_thinking(request.thinking, model is not None and model.thinks_by_default)
    weight = float(tool_prompt_tokens(request, model)[1])
    if thinking["type"] == "enabled":
        weight += FRAMING["thinking_enabled"]
    elif thinking["type"] == "adaptive" and model is not None and "enabled" in model.thinking_types:
        weight += FRAMING["thinking_adaptive"]
    if (request.output_config or {}).get("task_budget") is not None:
        weight += FRAMING["task_budget"]
    output_format = (request.output_config or {}).get("format")
    if isinstance(output_format, dict):
        schema = output_format.get("schema") or {}
        weight += FRAMING["output_format"] + text_token_weight(_json_text(schema))
    return weight


_Flat = tuple[str, bytes, float, str | None, str | None]  # section, bytes, weight, TTL, kind


def _system_marks(request: MessagesRequest) -> bytes:
    """What the system's part of the key depends on besides the system: a fast request
    and a request with citations enabled each have a mark; a standard one (sent or not)
    without citations has none."""
    fast = b"speed:fast\0" if request.speed == "fast" else b""
    return fast + (b"citations\0" if citations_on(request) else b"")


def _head(request: MessagesRequest, model: ModelInfo | None) -> tuple[list[_Flat], float]:
    """The tools' and the system's blocks, and the weight carried to the first message
    block (the request's framing when there are none, and the settings' weight)."""
    head: list[_Flat] = []
    pending = FRAMING["request"]  # the request's own framing goes to its first block
    tools_prompt = float(tool_prompt_tokens(request, model)[0])
    for tool in request.tools or ():
        if tool.input_schema is not None:
            schema = _json_text(tool.input_schema)
            text = tool.name + tool.description + schema
        else:
            text = _json_text(msgspec.to_builtins(tool))
        weight = pending + tools_prompt + FRAMING["tool"] + text_token_weight(text)
        pending = tools_prompt = 0.0
        head.append(("tools", _strip_cache_control(tool), weight, _ttl(tool.cache_control), None))
    system = request.system
    if isinstance(system, str):
        system = [TextBlock(text=system)] if system else []
    # Docs: prompt caching, "What invalidates the cache": "Switching between `speed:
    # \"fast\"` and standard speed invalidates system and message caches", and
    # "Enabling/disabling citations modifies the system prompt" (the tools stay): the
    # marks open the system's part of the key (and the messages' context).
    marks = _system_marks(request)
    for block in system or ():
        weight = pending + FRAMING["system"] + text_token_weight(block.text)
        pending = 0.0
        data = marks + _strip_cache_control(block)
        marks = b""
        head.append(("system", data, weight, _ttl(block.cache_control), None))
    return head, pending + _context_weight(request, model)


def _message_blocks(index: int, message: MessageParam) -> Iterator[_FlatBlock]:
    for position, block in enumerate(blocks_of(message)):
        # Role and message boundary belong to the prefix as much as the text does.
        marker = f"{index}:{message.role}:{position}".encode()
        control = getattr(block, "cache_control", None)
        data = marker + _strip_cache_control(block)
        yield data, block_weight(block), _ttl(control), _run_kind(block)


def flatten(request: MessagesRequest, models: Mapping[str, ModelInfo]) -> Iterator[_Flat]:
    """(section, canonical bytes, tokens, breakpoint TTL, run kind) for every prefix block."""
    model = models.get(request.model)
    head, pending = _head(request, model)
    yield from head
    messages = context_messages(request.messages, model, edits_thinking(request))
    for index, message in enumerate(messages):
        pending += FRAMING["message"]
        for data, weight, ttl, kind in _message_blocks(index, message):
            yield "messages", data, pending + weight, ttl, kind
            pending = 0.0


_FlatBlock = tuple[bytes, float, str | None, str | None]  # bytes, weight, TTL, run kind
_State = tuple[bytes, float, int, int, str | None, bool]


@dataclass(slots=True)
class _Prefix:
    """prefix_blocks' running state: the chained key, the weight so far and the whole
    tokens given out for it, the lookback position and the run it is in."""

    chain: bytes
    context: bytes  # what the messages part depends on besides the messages
    weight: float = 0.0
    rounded: int = 0
    position: int = -1
    run: str | None = None
    in_messages: bool = False
    blocks: list[PrefixBlock] = field(default_factory=list)

    def add(
        self, section: str, data: bytes, weight: float, ttl: str | None, kind: str | None
    ) -> None:
        # Whole tokens per block that add up to the rounded total.
        self.weight += weight
        tokens = round(self.weight) - self.rounded
        self.rounded += tokens
        if section == "messages" and not self.in_messages:
            self.in_messages = True
            self.chain = hashlib.blake2b(self.chain + self.context, digest_size=16).digest()
        self.chain = hashlib.blake2b(self.chain + data, digest_size=16).digest()
        run = kind if kind in ("tool_use", "tool_result") else None
        if run is None or run != self.run:
            self.position += 1
        self.run = run
        self.blocks.append(
            PrefixBlock(self.chain, tokens, section, ttl, self.position, kind != "thinking")
        )

    def state(self) -> _State:
        return self.chain, self.weight, self.rounded, self.position, self.run, self.in_messages

    def resume(self, state: _State) -> None:
        self.chain, self.weight, self.rounded, self.position, self.run, self.in_messages = state


_Kept = tuple[tuple[PrefixBlock, ...], _State, float]  # blocks, state after, pending after


class _MessagePrefixes:
    """Each message's prefix blocks, kept for the messages seen lately.

    A conversation resends its whole history every turn (400 turns: 800 messages), and a
    message that follows the same prefix at the same place makes the same prefix blocks
    each time. The key is the prefix state before the message (its chained key, which
    names everything before it, the weight so far, the lookback position), what the
    messages part depends on besides the messages (thinking, tool choice, format: the
    first message's key would not name them otherwise), and the message's place and
    encoded bytes, breakpoints included (a message whose breakpoint moved is made
    again). At most `limit` bytes are kept, the least recently used going
    first; a message over a 64th of that is not kept. With 400 turns of history this
    takes prefix_blocks from 7 to 2 ms."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._kept: OrderedDict[tuple[_State, bytes, float, int, bytes], tuple[_Kept, int]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()  # servers may run in threads of one process

    def extend(self, prefix: _Prefix, pending: float, index: int, message: MessageParam) -> float:
        """Add the message's blocks to `prefix`; returns the weight still pending."""
        key = (prefix.state(), prefix.context, pending, index, msgspec.json.encode(message))
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        if kept is not None:
            blocks, state, pending = kept[0]
            prefix.blocks.extend(blocks)
            prefix.resume(state)
            return pending
        start = len(prefix.blocks)
        for data, weight, ttl, kind in _message_blocks(index, message):
            prefix.add("messages", data, pending + weight, ttl, kind)
            pending = 0.0
        made = tuple(prefix.blocks[start:])
        # Bytes held: the message's, the key's and states' objects, a PrefixBlock each.
        size = len(key[4]) + 960 + 160 * len(made)
        if size <= self._limit // 64:
            with self._lock:
                if key not in self._kept:
                    self._kept[key] = ((made, prefix.state(), pending), size)
                    self._bytes += size
                while self._bytes > self._limit:
                    self._bytes -= self._kept.popitem(last=False)[1][1]
        return pending


_message_prefixes = _MessagePrefixes(16 * 1024 * 1024)


def _messages_context(request: MessagesRequest, models: Mapping[str, ModelInfo]) -> bytes:
    """What the messages part of the prefix depends on besides the messages themselves."""
    model = models.get(request.model)
    thinking = effective_thinking(request.thinking, model is not None and model.thinks_by_default)
    output_config = request.output_config or {}
    # Docs: prompt caching, "What invalidates the cache": "Changing the
    # `output_config.effort` value always invalidates message blocks"; no effort sent is
    # the model's default, as an omitted thinking is its default.
    effort = output_config.get("effort") or (model.effort_default if model else None)
    return canonical_json(
        {
            "thinking": thinking,
            "tool_choice": request.tool_choice,
            "format": output_config.get("format"),
            "effort": effort,
            "system": _system_marks(request).decode(),
        }
    ).encode()


def _plain(
    blocks: Iterator[tuple[str, bytes, float, str | None, str | None]],
    request: MessagesRequest,
    models: Mapping[str, ModelInfo],
) -> Iterator[tuple[str, bytes, float, str | None, str | None]]:
    """The plain count: one token per 4 UTF-8 bytes of a block's text plus 3 per block
    (an image 1,600), nothing for the request's structure. For tests that do token
    arithmetic by hand (`LocalMessagesAPI(token_counts="plain")`)."""
    texts = _plain_texts(request, models)
    for (section, data, _, ttl, kind), (text, images) in zip(blocks, texts, strict=True):
        yield section, data, (len(text.encode()) + 3) // 4 + 3 + images * IMAGE_TOKENS, ttl, kind


def _plain_texts(
    request: MessagesRequest, models: Mapping[str, ModelInfo]
) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for tool in request.tools or ():
        if tool.input_schema is not None:
            text = tool.name + tool.description + canonical_json(tool.input_schema)
        else:
            text = canonical_json(msgspec.to_builtins(tool))
        out.append((text + "\0" * 8, 0))  # 2 more tokens per tool
    system = request.system
    if isinstance(system, str):
        system = [TextBlock(text=system)] if system else []
    out.extend((block.text, 0) for block in system or ())
    model = models.get(request.model)
    for message in context_messages(request.messages, model, edits_thinking(request)):
        for block in blocks_of(message):
            out.append(_plain_text(block))
    return out


def _plain_text(block: Any) -> tuple[str, int]:
    if isinstance(block, TextBlock):
        return block.text, 0
    if isinstance(block, ToolUseBlock | ServerToolUseBlock | McpToolUseBlock):
        return block.name + canonical_json(block.input), 0
    if isinstance(block, ThinkingBlock):
        return block.thinking, 0
    if isinstance(block, RedactedThinkingBlock):
        return block.data, 0
    if isinstance(block, CompactionBlock):
        return block.content or "", 0  # the summary (its signature is no input)
    if isinstance(block, ImageBlock):
        return "", 1
    if isinstance(block, DocumentBlock):
        source = block.source
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return str(source["data"]), 0
        return canonical_json(source), 0
    if isinstance(block, SearchResultBlock):
        return block.title + "\n" + "\n".join(p.text for p in block.content), 0
    if isinstance(block, ToolResultBlock):
        content = block.content
        if content is None:
            return "", 0
        if isinstance(content, str):
            return content, 0
        parts = [_plain_text(part) for part in content]
        return "\n".join(t for t, _ in parts), sum(n for _, n in parts)
    return canonical_json(msgspec.to_builtins(block)), 0


def prefix_blocks(
    request: MessagesRequest, models: Mapping[str, ModelInfo], plain: bool = False
) -> list[PrefixBlock]:
    """The request's prefix blocks, read as `models` (the served rows) say its model reads."""
    chain = hashlib.blake2b(request.model.encode(), digest_size=16).digest()
    prefix = _Prefix(chain, _messages_context(request, models))
    if plain:
        for flat in _plain(flatten(request, models), request, models):
            prefix.add(*flat)
    else:
        model = models.get(request.model)
        head, pending = _head(request, model)
        for flat in head:
            prefix.add(*flat)
        messages = context_messages(request.messages, model, edits_thinking(request))
        for index, message in enumerate(messages):
            pending = _message_prefixes.extend(prefix, pending + FRAMING["message"], index, message)
    blocks = prefix.blocks
    if request.cache_control is not None:
        _place_automatic(request, blocks)
    return blocks


def _place_automatic(request: MessagesRequest, blocks: list[PrefixBlock]) -> None:
    """The automatic breakpoint: on the last block that can carry `cache_control`
    (thinking blocks cannot); an explicit breakpoint already there stands."""
    assert request.cache_control is not None
    for i in range(len(blocks) - 1, -1, -1):
        block = blocks[i]
        if not block.carrier:
            continue
        if block.ttl is None:
            blocks[i] = block._replace(ttl=request.cache_control.ttl)
        return


class CacheSimulator:
    def __init__(
        self, clock: Clock, plain: bool = False, models: Mapping[str, ModelInfo] = MODELS
    ) -> None:
        self._clock = clock
        self._plain = plain
        self._models = models
        self._entries: dict[bytes, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def account(self, request: MessagesRequest) -> CacheUsage:
        """Look up and write at once (for requests that respond immediately)."""
        usage = self.lookup(request)
        self.commit(usage)
        return usage

    def commit(self, usage: CacheUsage) -> None:
        """Write the request's entries: called when its response starts."""
        now = self._clock.now()
        for key, seconds in usage.writes:
            entry = self._entries.get(key)
            if entry is None or entry.expires_at <= now:
                self._entries[key] = _Entry(seconds, now + seconds)
            else:
                entry.expires_at = max(entry.expires_at, now + seconds)
        self._evict(now)

    def lookup(
        self, request: MessagesRequest, blocks: list[PrefixBlock] | None = None
    ) -> CacheUsage:
        """Read what can be read now (refreshing the hit) and plan the writes."""
        now = self._clock.now()
        if blocks is None:
            blocks = prefix_blocks(request, self._models, self._plain)
        cumulative: list[int] = []
        running = 0
        for block in blocks:
            running += block.tokens
            cumulative.append(running)
        breakpoints = [i for i, block in enumerate(blocks) if block.ttl is not None]

        read_at = -1
        for bp in breakpoints:
            for j in range(bp, -1, -1):
                if blocks[bp].position - blocks[j].position + 1 > LOOKBACK:
                    break
                entry = self._entries.get(blocks[j].key)
                if entry is not None and entry.expires_at > now:
                    read_at = max(read_at, j)
                    break
        if read_at >= 0:
            hit = self._entries[blocks[read_at].key]
            hit.expires_at = now + hit.ttl
        read = cumulative[read_at] if read_at >= 0 else 0

        minimum = min_cacheable_tokens(request.model, self._models)
        covered = read
        written = {"5m": 0, "1h": 0}
        writes: list[tuple[bytes, float]] = []
        for bp in breakpoints:
            ttl = blocks[bp].ttl
            assert ttl is not None
            if cumulative[bp] < minimum:
                continue
            if bp <= read_at:
                # Read, not written: with mixed TTLs only what lies after the highest
                # hit A is billed as a write, 1h up to the last 1h breakpoint after A
                # and 5m beyond it ("Mixing different TTLs", https://platform.claude.com/
                # docs/en/build-with-claude/prompt-caching). So a breakpoint at or before
                # A writes nothing: a 1h mark on a prefix cached at 5m does not make it a
                # 1h entry, and where a longer entry was read none is added. Its own
                # entry, if alive, is used, so refreshed for its own TTL ("refreshed
                # each time the cached content is used").
                entry = self._entries.get(blocks[bp].key)
                if entry is not None and entry.expires_at > now:
                    entry.expires_at = now + entry.ttl
                continue
            if cumulative[bp] > covered:
                written[ttl] += cumulative[bp] - covered
                covered = cumulative[bp]
            writes.append((blocks[bp].key, TTL_SECONDS[ttl]))
        return CacheUsage(running, read, written["5m"], written["1h"], blocks, writes)

    def _evict(self, now: float) -> None:
        if len(self._entries) > 50_000:
            self._entries = {k: e for k, e in self._entries.items() if e.expires_at > now}
