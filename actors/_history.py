"""A continuum's history window in memory, compact: one buffer of encoded messages.

A loaded continuum keeps its whole window between turns. As structs that is several
objects per message (the message, its tuple, each block), all tracked by the garbage
collector, so every full collection walks every loaded continuum's history. Here the
whole window is one `bytes` of msgpack bodies (role and content, as arrays: no field
names repeated per message) with its bookkeeping in typed arrays (offsets, seqs, times,
token counts, 4 bytes each while the values fit, widened to 8 when one does not) and the
turn ids in one table (a generated id, `turn_` and 32 hex digits, kept as its 16 raw
bytes): a message costs its text plus about 30 bytes, a turn about 25 more, and the
collector sees a handful of objects per continuum, whatever the window's length
(bench/load.py reports the memory per loaded continuum at 100 turns). A turn decodes
the window once, to build its request, and lets the structs go with it.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Literal

import msgspec

from storage import EPOCH, ContentBlock, Message, TextBlock, moment

__all__ = ["CompactHistory"]


class _Body(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """What a message says; where it sits (seq, turn, time) is kept in the columns."""

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]


# A message that is one text block (most are) is kept as its UTF-8 behind one byte
# saying its role, instead of msgpack with the block's field names: about 24 bytes less
# a message. msgpack bodies (an array of two) begin with 0x92, so the first byte tells.
_PLAIN = {"user": b"\x00", "assistant": b"\x01"}
_PLAIN_ROLES: tuple[Literal["user", "assistant"], ...] = ("user", "assistant")

# The datetimes of the latest turns' times, shared by every history in the process: each
# turn decodes its whole window, and making a datetime is 3-4 times a lookup.
_moment = functools.lru_cache(maxsize=4096)(moment)
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Body)


# Columns start narrow (4 bytes a value) and widen once a value does not fit: a window's
# offsets pass 4 GiB, or a store's seqs 2**31, only in stores far beyond the usual.
_WIDER: dict[str, Literal["Q", "q"]] = {"I": "Q", "i": "q"}
_RANGE = {
    "I": (0, 2**32 - 1),
    "i": (-(2**31), 2**31 - 1),
    "Q": (0, 2**64 - 1),
    "q": (-(2**63), 2**63 - 1),
}

# A generated turn id (`turn_` + uuid4 hex) is kept as its 16 bytes behind a 0 byte;
# any other id as its UTF-8 behind a 1 byte.
_PREFIX = "turn_"
_RAW, _TEXT = b"\x00", b"\x01"


def _fit(column: array[int], values: list[int], name: str) -> array[int]:
    """`column` able to hold `values` (itself, or a wider copy); refuses what no column
    can hold before anything changes."""
    if not values:
        return column
    low, high = min(values), max(values)
    code = column.typecode
    while not (_RANGE[code][0] <= low and high <= _RANGE[code][1]):
        if code not in _WIDER:
            bad = high if high > _RANGE[code][1] else low
            raise ValueError(f"history: a message's {name} {bad} does not fit in 64 bits")
        code = _WIDER[code]
    return column if code == column.typecode else array(code, column)


def _pack_turn_id(turn_id: str) -> bytes:
    hex_part = turn_id[len(_PREFIX) :]
    if turn_id.startswith(_PREFIX) and len(hex_part) == 32:
        try:
            raw = bytes.fromhex(hex_part)
        except ValueError:
            pass
        else:
            if raw.hex() == hex_part:  # lowercase, no spaces: it comes back the same
                return _RAW + raw
    return _TEXT + turn_id.encode()


def _unpack_turn_id(packed: bytes | memoryview) -> str:
    if packed[0] == 0:
        return _PREFIX + packed[1:].hex()
    return bytes(packed[1:]).decode()


class CompactHistory:
    """Messages in order, with what trimming needs (seq, turn id, tokens) beside them."""

    __slots__ = (
        "_created",
        "_data",
        "_ends",
        "_id_ends",
        "_ids",
        "_seqs",
        "_tokens",
        "_turn_at",
        "_weigh",
        "tokens",
    )

    def __init__(self, messages: Iterable[Message], weigh: Callable[[Message], int]) -> None:
        self._weigh = weigh
        self._data = b""  # the bodies, back to back (bytes: no room kept for growth)
        self._ends = array("I")  # where each body ends in `_data`
        self._seqs = array("i")
        self._created = array("d")
        self._tokens = array("i")
        # The turns' ids, packed back to back (one entry per run of a turn's messages),
        # where each ends, and each message's entry.
        self._ids = b""
        self._id_ends = array("I")
        self._turn_at = array("I")
        self.tokens = 0  # the window's estimated tokens
        self.extend(messages)

    def __len__(self) -> int:
        return len(self._seqs)

    def _turn_ids(self, first: int = 0) -> list[str]:
        """The turn ids of the entries from `first` on, decoded now (the hex of the table
        at once: a slice of it per generated id)."""
        data = self._ids
        base = begin = self._id_ends[first - 1] if first else 0
        table = data[base:].hex()
        out: list[str] = []
        for end in islice(self._id_ends, first, None):
            if data[begin] == 0:
                out.append(_PREFIX + table[2 * (begin - base) + 2 : 2 * (end - base)])
            else:
                out.append(data[begin + 1 : end].decode())
            begin = end
        return out

    def extend(self, messages: Iterable[Message]) -> None:
        bodies = [self._data]
        end = len(self._data)
        ends: list[int] = []
        seqs: list[int] = []
        created = array("d")  # the floats go straight in: none is kept as an object
        tokens: list[int] = []
        turn_at: list[int] = []
        ids = [self._ids]
        id_ends: list[int] = []
        id_end = len(self._ids)
        run = len(self._id_ends) - 1
        last = None
        if run >= 0:
            last = _unpack_turn_id(self._ids[self._id_ends[run - 1] if run else 0 :])
        for message in messages:
            content = message.content
            if len(content) == 1 and type(content[0]) is TextBlock:
                body = _PLAIN[message.role] + content[0].text.encode()
            else:
                body = _encoder.encode(_Body(message.role, content))
            bodies.append(body)
            end += len(body)
            ends.append(end)
            seqs.append(message.seq)
            created.append(message.created_at.timestamp())
            tokens.append(self._weigh(message))
            if message.turn_id != last:
                last = message.turn_id
                packed = _pack_turn_id(last)
                ids.append(packed)
                id_end += len(packed)
                id_ends.append(id_end)
                run += 1
            turn_at.append(run)
        # Every column checked before any changes: a refused message leaves it as it was.
        columns = (
            (_fit(self._ends, ends, "offset"), ends),
            (_fit(self._seqs, seqs, "seq"), seqs),
            (_fit(self._tokens, tokens, "token count"), tokens),
            (_fit(self._id_ends, id_ends, "turn id offset"), id_ends),
            (_fit(self._turn_at, turn_at, "turn number"), turn_at),
        )
        for column, values in columns:
            column.extend(values)
        self._ends, self._seqs, self._tokens, self._id_ends, self._turn_at = (
            column for column, _ in columns
        )
        self._created.extend(created)
        self.tokens += sum(tokens)
        self._data = b"".join(bodies)  # one copy per turn: a window is tens of KiB
        self._ids = b"".join(ids)

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
        self._ends = array(self._ends.typecode, (end - cut for end in self._ends[keep:]))
        for column in (self._seqs, self._created, self._tokens):
            del column[:keep]
        # The turn-id entries no kept message uses go too.
        first = self._turn_at[keep] if keep < len(self._turn_at) else len(self._id_ends)
        cut = self._id_ends[first - 1] if first else 0
        self._ids = self._ids[cut:]
        self._id_ends = array(self._id_ends.typecode, (e - cut for e in self._id_ends[first:]))
        self._turn_at = array(self._turn_at.typecode, (t - first for t in self._turn_at[keep:]))
        self.tokens = sum(self._tokens)

    def tokens_from(self, seq: int | None) -> int:
        """The estimated tokens of the messages from `seq` on (None: all of them)."""
        if seq is None or not self._seqs or seq <= self._seqs[0]:
            return self.tokens
        return sum(self._tokens[self._index(seq) :])

    def entries(self) -> Iterator[tuple[int, int, int]]:
        """(seq, turn, tokens) of each message, in order, without decoding anything:
        `turn` numbers the window's turns (a turn's messages share it, the next turn's
        is one more), which is all trimming needs to find where turns begin."""
        return zip(self._seqs, self._turn_at, self._tokens, strict=True)

    def turn_ids(self) -> list[str]:
        """Each message's turn id, in order (decoded now)."""
        ids = self._turn_ids()
        return [ids[t] for t in self._turn_at]

    def last_created_at(self) -> float | None:
        """When the newest message was stored (None for an empty history)."""
        return self._created[-1] if self._created else None

    def messages(self, from_seq: int | None = None) -> list[Message]:
        """The messages (from `from_seq` on), decoded now."""
        start = 0 if from_seq is None else self._index(from_seq)
        first = self._turn_at[start] if start < len(self._turn_at) else 0
        data, ids = self._data, self._turn_ids(first)  # only the turns asked for
        view = memoryview(data)  # slices without copies
        out: list[Message] = []
        append = out.append
        begin = self._ends[start - 1] if start else 0
        rows = zip(self._ends, self._seqs, self._turn_at, self._created, strict=True)
        # A turn's messages share their time: one datetime looked up per turn.
        stamp: float | None = None
        at = EPOCH
        for end, seq, turn, created in islice(rows, start, None):
            if created != stamp:
                stamp, at = created, _moment(created)
            kind = data[begin]
            if kind < 2:
                text = TextBlock(str(view[begin + 1 : end], "utf-8"))
                append(Message(_PLAIN_ROLES[kind], (text,), seq, ids[turn - first], at))
            else:
                body = _decoder.decode(view[begin:end])
                append(Message(body.role, body.content, seq, ids[turn - first], at))
            begin = end
        return out
