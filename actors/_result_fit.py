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

The running turn's own tool loop grows the same way, one result a round (eight reads of
a 30k-token file on a 200k model): every request of the loop is fitted too (`fit_loop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from storage import ContentBlock, Message, RawBlock, TextBlock, ToolResultBlock

from ._history_cost import message_tokens
from ._tokens import estimate_tokens

__all__ = ["LoopFit", "fit_loop", "fit_results"]

# A result that would save fewer tokens than this stays: the note costs some itself.
_MIN_SAVED = 200
# Bytes per estimated token (`estimate_tokens`): what cutting a text saves.
_BYTES_PER_TOKEN = 4


def fit_results(messages: Sequence[Message], over: int) -> list[Message]:
    """`messages` with their oldest tool results as notes, enough of them to save `over`
    estimated tokens (or as many as there are)."""
    return _note_oldest(messages, over).messages


class _Noted(NamedTuple):
    messages: list[Message]
    over: int  # the tokens still to save (0 or less: none)
    noted: int  # the blocks that went as notes


def _note_oldest(
    messages: Sequence[Message], over: int, keep: frozenset[int] = frozenset()
) -> _Noted:
    """`fit_results`, leaving the messages at the indexes `keep` whole."""
    fitted = list(messages)
    noted = 0
    for i, message in enumerate(fitted):
        if over <= 0:
            break
        if message.role != "user" or i in keep:
            continue
        blocks: list[ContentBlock] = []
        for block in message.content:
            note = _noted(block) if over > 0 else None
            if note is not None:
                saved = _tokens(block) - _tokens(note)
                if saved >= _MIN_SAVED:
                    block, over, noted = note, over - saved, noted + 1
            blocks.append(block)
        fitted[i] = msgspec.structs.replace(message, content=tuple(blocks))
    return _Noted(fitted, over, noted)


class LoopFit(NamedTuple):
    """A request of a tool loop as sent: the history and the turn's own messages, the
    estimated tokens that saved, and what was left out for it."""

    history: list[Message]
    tail: list[Message]
    saved: int = 0
    history_saved: int = 0  # of `saved`, the history's
    noted: int = 0  # tool results and documents that went as notes
    # The newest results cut, by their tool_use id: how many characters were left out.
    cut: tuple[tuple[str, int], ...] = ()
    # Every newest result went as its note alone (nothing of it is in the request): the
    # window is full of what the request must send (`fixed`), and the model could only
    # ask again for smaller parts, each of which would go the same way.
    full: bool = False


def fit_loop(
    history: Sequence[Message], tail: Sequence[Message], over: int, *, fixed: int = 0
) -> LoopFit:
    """A request of a turn's tool loop `over` estimated tokens shorter, by leaving out, in
    this order: the turn's own older tool results (as notes; the message being answered,
    `tail[0]`, and the newest results stay whole: they are what the model works on), then
    the history's (oldest first), and last the end of the newest results (cut, with a
    note saying how much). What is still over after all that (a message larger than the
    window) goes as it is: the API says it is too long.

    `fixed`: the history and the first `fixed` messages of `tail` go as given (thinking
    written after them is bound to them as they were sent)."""
    newest = max(i for i, m in enumerate(tail) if m.role == "user")
    wanted = over
    own = _note_oldest(tail, over, keep=frozenset({0, newest, *range(fixed)}))
    earlier = _Noted(list(history), own.over, 0) if fixed else _note_oldest(history, own.over)
    fitted_tail, over = own.messages, earlier.over
    cut: tuple[tuple[str, int], ...] = ()
    if over > 0 and newest > 0 and newest >= fixed:
        message, over, cut = _cut_newest(fitted_tail[newest], over)
        fitted_tail[newest] = message
    noted = own.noted + earlier.noted
    history_saved = own.over - earlier.over
    # Only where the loop's earlier messages must go unchanged (`fixed`): elsewhere the
    # next request notes the turn's older results and has room again. A result of
    # content blocks goes as a note whole by design (no smaller part to ask for).
    results = [b for b in tail[newest].content if isinstance(b, ToolResultBlock)]
    left_out = dict(cut)
    full = (
        fixed > 0
        and bool(results)
        and all(
            not b.content_json and b.content and left_out.get(b.tool_use_id) == len(b.content)
            for b in results
        )
    )
    return LoopFit(earlier.messages, fitted_tail, wanted - over, history_saved, noted, cut, full)


def _cut_newest(message: Message, over: int) -> tuple[Message, int, tuple[tuple[str, int], ...]]:
    """The results `message` with the ends of its largest text results cut to save `over`
    estimated tokens (each with a note); the tokens still over and the characters cut of
    each result cut. A result of content blocks (text with images) goes as a note whole."""
    blocks = list(message.content)
    results = [(i, b) for i, b in enumerate(blocks) if isinstance(b, ToolResultBlock)]
    cut: list[tuple[str, int]] = []
    for i, block in sorted(results, key=lambda result: -_tokens(result[1])):
        if over <= 0:
            break
        shorter: ContentBlock
        if block.content_json:
            shorter, left_out = _noted_result(block), len(block.content)
        else:
            shorter, left_out = _cut_result(block, over)
        saved = _tokens(block) - _tokens(shorter)
        if saved > 0:
            blocks[i], over = shorter, over - saved
            cut.append((block.tool_use_id, left_out))
    return msgspec.structs.replace(message, content=tuple(blocks)), over, tuple(cut)


def _cut_result(block: ToolResultBlock, over: int) -> tuple[ToolResultBlock, int]:
    """`block` with the end of its text cut, enough to save `over` estimated tokens with
    the note that says so (what is left of it may be nothing); and the characters cut."""
    text = block.content
    data = text.encode()
    note_tokens = estimate_tokens(_cut_note(len(text)))
    keep = max(0, len(data) - (over + note_tokens) * _BYTES_PER_TOKEN)
    kept = data[:keep].decode(errors="ignore")
    left_out = len(text) - len(kept)
    return ToolResultBlock(block.tool_use_id, kept + _cut_note(left_out), block.is_error), left_out


def _cut_note(left_out: int) -> str:
    return (
        f"\n[truncated: {left_out:,} more characters of this result were left out of this "
        "request: the conversation's context window cannot hold it whole; call the tool "
        "again for a smaller part if the rest is needed]"
    )


def _tokens(block: ContentBlock) -> int:
    return message_tokens(Message("user", (block,)))


def _noted(block: ContentBlock) -> ContentBlock | None:
    """What stands for a tool result or a document left out (the same for the same
    block), or None for any other block."""
    if isinstance(block, ToolResultBlock):
        return _noted_result(block)
    if isinstance(block, RawBlock) and block.kind == "document":
        fields: Any = msgspec.json.decode(block.json)
        title = fields.get("title") if isinstance(fields, dict) else None
        named = f" ({title:.80})" if isinstance(title, str) and title else ""
        return TextBlock(_note(f"a document{named}", "ask for it"))
    return None


def _noted_result(block: ToolResultBlock) -> ToolResultBlock:
    size = len(block.content_json or block.content)
    what = f"a tool result of {size:,} characters"
    return ToolResultBlock(block.tool_use_id, _note(what, "call the tool"), block.is_error)


def _note(what: str, again: str) -> str:
    return (
        f"[{what}, left out of this request: the conversation's context window cannot "
        f"hold it with what followed; {again} again if its content is needed]"
    )
