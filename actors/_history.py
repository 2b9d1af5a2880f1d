"""A continuum's history window in memory, compact: each message as its msgpack bytes.

A loaded continuum keeps its whole window between turns. As structs that is several
objects per message (the message, its tuple, each block), all tracked by the garbage
collector, so every full collection walks every loaded continuum's history. As bytes a
message costs little more than its text and nothing to the collector; a turn decodes
the window once, to build its request, and lets the decoded structs go with the turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import msgspec

from storage import Message

__all__ = ["CompactHistory"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


class CompactHistory:
    """Messages in order, with what trimming needs (seq, turn id, tokens) beside them."""

    __slots__ = ("_encoded", "_seqs", "_tokens", "_turns", "_weigh", "tokens")

    def __init__(self, messages: Iterable[Message], weigh: Callable[[Message], int]) -> None:
        self._weigh = weigh
        self._encoded: list[bytes] = []
        self._seqs: list[int] = []
        self._turns: list[str] = []
        self._tokens: list[int] = []
        self.tokens = 0  # the window's estimated tokens
        self.extend(messages)

    def __len__(self) -> int:
        return len(self._encoded)

    def extend(self, messages: Iterable[Message]) -> None:
        for message in messages:
            tokens = self._weigh(message)
            self._encoded.append(_encoder.encode(message))
            self._seqs.append(message.seq)
            self._turns.append(message.turn_id)
            self._tokens.append(tokens)
            self.tokens += tokens

    def drop_before(self, seq: int) -> None:
        """Forget the messages before `seq` (the history was trimmed there)."""
        keep = next((i for i, s in enumerate(self._seqs) if s >= seq), len(self._seqs))
        for column in (self._encoded, self._seqs, self._turns, self._tokens):
            del column[:keep]
        self.tokens = sum(self._tokens)

    def entries(self) -> Iterator[tuple[int, str, int]]:
        """(seq, turn id, tokens) of each message, in order, without decoding any."""
        return zip(self._seqs, self._turns, self._tokens, strict=True)

    def messages(self, from_seq: int | None = None) -> list[Message]:
        """The messages (from `from_seq` on), decoded now."""
        start = 0
        if from_seq is not None:
            start = next((i for i, s in enumerate(self._seqs) if s >= from_seq), len(self))
        return [_decoder.decode(data) for data in self._encoded[start:]]
