"""A continuum's history window in memory, compact: one buffer of encoded messages.

A loaded continuum keeps its whole window between turns. As structs that is several
objects per message (the message, its tuple, each block), all tracked by the garbage
collector, so every full collection walks every loaded continuum's history. Here the
whole window is one `bytes` of msgpack bodies (role and content, as arrays: no field
names repeated per message) with its bookkeeping in typed arrays (offsets, seqs, times,
token counts) and one shared string per turn id: a message costs its text plus about
40 bytes, and the collector sees a handful of objects per continuum, whatever the
window's length (bench/load.py reports the memory per loaded continuum at 100 turns).
A turn decodes the window once, to build its request, and lets the structs go with it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

import msgspec

from storage import ContentBlock, Message

__all__ = ["CompactHistory"]


class _Body(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """What a message says; where it sits (seq, turn, time) is kept in the columns."""

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Body)


class CompactHistory:
    """Messages in order, with what trimming needs (seq, turn id, tokens) beside them."""

    __slots__ = ("_created", "_data", "_ends", "_seqs", "_tokens", "_turns", "_weigh", "tokens")

    def __init__(self, messages: Iterable[Message], weigh: Callable[[Message], int]) -> None:
        self._weigh = weigh
        self._data = b""  # the bodies, back to back (bytes: no room kept for growth)
        self._ends = array("Q")  # where each body ends in `_data`
        self._seqs = array("q")
        self._created = array("d")
        self._tokens = array("q")
        self._turns: list[str] = []  # consecutive messages of a turn share one string
        self.tokens = 0  # the window's estimated tokens
        self.extend(messages)

    def __len__(self) -> int:
        return len(self._seqs)

    def extend(self, messages: Iterable[Message]) -> None:
        bodies = [self._data]
        end = len(self._data)
        for message in messages:
            tokens = self._weigh(message)
            body = _encoder.encode(_Body(message.role, message.content))
            bodies.append(body)
            end += len(body)
            self._ends.append(end)
            self._seqs.append(message.seq)
            self._created.append(message.created_at)
            turns = self._turns
            turns.append(turns[-1] if turns and turns[-1] == message.turn_id else message.turn_id)
            self._tokens.append(tokens)
            self.tokens += tokens
        self._data = b"".join(bodies)  # one copy per turn: a window is tens of KiB

    def _index(self, seq: int) -> int:
        """The position of the first message at or after `seq`."""
        return next((i for i, s in enumerate(self._seqs) if s >= seq), len(self._seqs))

    def drop_before(self, seq: int) -> None:
        """Forget the messages before `seq` (the history was trimmed there)."""
        keep = self._index(seq)
        if not keep:
            return
        cut = self._ends[keep - 1]
        self._data = self._data[cut:]
        self._ends = array("Q", (end - cut for end in self._ends[keep:]))
        for column in (self._seqs, self._created, self._tokens):
            del column[:keep]
        del self._turns[:keep]
        self.tokens = sum(self._tokens)

    def entries(self) -> Iterator[tuple[int, str, int]]:
        """(seq, turn id, tokens) of each message, in order, without decoding any."""
        return zip(self._seqs, self._turns, self._tokens, strict=True)

    def last_created_at(self) -> float | None:
        """When the newest message was stored (None for an empty history)."""
        return self._created[-1] if self._created else None

    def messages(self, from_seq: int | None = None) -> list[Message]:
        """The messages (from `from_seq` on), decoded now."""
        start = 0 if from_seq is None else self._index(from_seq)
        seqs, turns, created = self._seqs, self._turns, self._created
        view = memoryview(self._data)  # slices without copies
        out: list[Message] = []
        begin = self._ends[start - 1] if start else 0
        for i in range(start, len(seqs)):
            end = self._ends[i]
            body = _decoder.decode(view[begin:end])
            out.append(Message(body.role, body.content, seqs[i], turns[i], created[i]))
            begin = end
        return out
