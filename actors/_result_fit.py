"""What of the history's tool results and documents a request can carry when one turn
alone is over the history's budget.

Trimming cuts the history at turn boundaries, and keeps at least the newest turn. A
turn can hold far more than the next request has room for: a tool loop's results read
near the window's edge, a plain-text document of megabytes, or either on a continuum
then switched to a model of a smaller window (a 1M model's turn of 300k tokens, then a
200k one). Kept whole, that turn made every later
request longer than the window, and every later turn of the continuum failed.

So the oldest tool results and documents of the history sent go as a note, in the
request only, until the history fits; the stored history keeps them, and the pairs of tool_use and
tool_result stay whole. Once a newer turn is stored, trimming leaves the large turn out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from storage import ContentBlock, Message, RawBlock, TextBlock, ToolResultBlock

from ._history_cost import message_tokens

__all__ = ["fit_results"]

# A result that would save fewer tokens than this stays: the note costs some itself.
_MIN_SAVED = 200


def fit_results(messages: Sequence[Message], over: int) -> list[Message]:
    """`messages` with their oldest tool results as notes, enough of them to save `over`
    estimated tokens (or as many as there are)."""
    fitted = list(messages)
    for i, message in enumerate(fitted):
        if over <= 0:
            break
        if message.role != "user":
            continue
        blocks: list[ContentBlock] = []
        for block in message.content:
            note = _noted(block) if over > 0 else None
            if note is not None:
                saved = _tokens(block) - _tokens(note)
                if saved >= _MIN_SAVED:
                    block, over = note, over - saved
            blocks.append(block)
        fitted[i] = msgspec.structs.replace(message, content=tuple(blocks))
    return fitted


def _tokens(block: ContentBlock) -> int:
    return message_tokens(Message("user", (block,)))


def _noted(block: ContentBlock) -> ContentBlock | None:
    """What stands for a tool result or a document left out (the same for the same
    block), or None for any other block."""
    if isinstance(block, ToolResultBlock):
        size = len(block.content_json or block.content)
        what = f"a tool result of {size:,} characters"
        return ToolResultBlock(block.tool_use_id, _note(what, "call the tool"), block.is_error)
    if isinstance(block, RawBlock) and block.kind == "document":
        fields: Any = msgspec.json.decode(block.json)
        title = fields.get("title") if isinstance(fields, dict) else None
        named = f" ({title:.80})" if isinstance(title, str) and title else ""
        return TextBlock(_note(f"a document{named}", "ask for it"))
    return None


def _note(what: str, again: str) -> str:
    return (
        f"[{what}, left out of this request: the conversation's context window cannot "
        f"hold it with what followed; {again} again if its content is needed]"
    )
