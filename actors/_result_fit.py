"""What of the history's tool results a request can carry when one turn alone is over
the history's budget.

Trimming cuts the history at turn boundaries, and keeps at least the newest turn. A
turn's tool loop can hold far more than the next request has room for: results read
near the window's edge, or a continuum switched to a model of a smaller window (a 1M
model's turn of 300k tokens, then a 200k one). Kept whole, that turn made every later
request longer than the window, and every later turn of the continuum failed.

So the oldest tool results of the history sent go as a note, in the request only, until
the history fits; the stored history keeps them, and the pairs of tool_use and
tool_result stay whole. Once a newer turn is stored, trimming leaves the large turn out.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from storage import ContentBlock, Message, ToolResultBlock

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
            if over > 0 and isinstance(block, ToolResultBlock):
                note = ToolResultBlock(block.tool_use_id, _note(block), block.is_error)
                saved = _tokens(block) - _tokens(note)
                if saved >= _MIN_SAVED:
                    block, over = note, over - saved
            blocks.append(block)
        fitted[i] = msgspec.structs.replace(message, content=tuple(blocks))
    return fitted


def _tokens(block: ToolResultBlock) -> int:
    return message_tokens(Message("user", (block,)))


def _note(block: ToolResultBlock) -> str:
    """What stands for a result left out: the same for the same result."""
    size = len(block.content_json or block.content)
    return (
        f"[a tool result of {size:,} characters, left out of this request: the "
        "conversation's context window cannot hold it with what followed; call the tool "
        "again if its content is needed]"
    )
