"""A response as server-sent events: the events of each content block, as the API
streams them (every event named, its JSON `data` typed alike)."""

from __future__ import annotations

from typing import Any

import msgspec

from ._tokens import canonical_json, estimate_text_tokens

__all__ = ["block_events", "sse"]


def sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
    """content_block_start, its deltas and content_block_stop, with each delta's tokens."""
    kind = block["type"]
    events: list[tuple[str, dict[str, Any], int]] = []

    def start(content_block: dict[str, Any]) -> None:
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": content_block},
                0,
            )
        )

    if kind == "text":
        start({"type": "text", "text": ""})
        for piece in _chunks(block["text"], 24):
            delta = _delta(index, {"type": "text_delta", "text": piece})
            events.append(("content_block_delta", delta, estimate_text_tokens(piece)))
        for citation in block.get("citations") or ():
            delta = _delta(index, {"type": "citations_delta", "citation": citation})
            events.append(("content_block_delta", delta, 0))
    elif kind == "thinking":
        start({"type": "thinking", "thinking": "", "signature": ""})
        if block["thinking"]:
            for piece in _chunks(block["thinking"], 24):
                delta = _delta(index, {"type": "thinking_delta", "thinking": piece})
                events.append(("content_block_delta", delta, estimate_text_tokens(piece)))
        signature = _delta(index, {"type": "signature_delta", "signature": block["signature"]})
        events.append(("content_block_delta", signature, 0))
    elif kind in ("tool_use", "server_tool_use"):
        start({**block, "input": {}})
        for piece in _chunks(canonical_json(block["input"]), 32):
            delta = _delta(index, {"type": "input_json_delta", "partial_json": piece})
            events.append(("content_block_delta", delta, estimate_text_tokens(piece)))
    elif kind == "compaction":
        # Docs (compaction, "Streaming"): a content_block_start, then a single
        # content_block_delta with the complete summary, then content_block_stop.
        start({**block, "content": None})
        delta = {
            "type": "compaction_delta",
            "content": block.get("content"),
            "encrypted_content": block.get("encrypted_content"),
        }
        events.append(("content_block_delta", _delta(index, delta), 0))
    else:  # redacted_thinking, server tool results, ...: whole in content_block_start
        start(block)
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}, 0))
    return events
