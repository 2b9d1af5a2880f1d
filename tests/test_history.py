"""The compact in-memory history: messages kept as bytes, decoded exactly as they were."""

from __future__ import annotations

import gc
import tracemalloc
from array import array
from collections.abc import Callable
from typing import Literal

import msgspec
import pytest

from actors._history import CompactHistory
from actors._history_cost import message_tokens
from storage import Message, TextBlock, moment
from tests._factories import every_block_type


def numbered(turn: str, first_seq: int) -> list[Message]:
    return [
        Message(m.role, m.content, seq=first_seq + i, turn_id=turn, created_at=moment(1.5 + i))
        for i, m in enumerate(every_block_type(turn))
    ]


def test_messages_come_back_as_they_went_in() -> None:
    messages = numbered("t1", 0) + numbered("t2", 4)
    history = CompactHistory(messages, message_tokens)
    assert history.messages() == messages
    assert history.messages(4) == messages[4:]
    assert len(history) == 8
    assert list(history.entries()) == [
        (m.seq, 0 if m.turn_id == "t1" else 1, message_tokens(m)) for m in messages
    ]
    assert history.turn_ids() == [m.turn_id for m in messages]
    assert history.tokens == sum(message_tokens(m) for m in messages)


def test_trimming_and_extending_keep_the_token_count() -> None:
    history = CompactHistory(numbered("t1", 0), message_tokens)
    later = numbered("t2", 4)
    history.extend(later)
    history.drop_before(4)
    assert history.messages() == later
    assert history.tokens == sum(message_tokens(m) for m in later)
    history.drop_before(100)
    assert history.messages() == []
    assert history.tokens == 0


def allocated(build: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        built = build()
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del built
    return size


def test_the_kept_history_gives_the_collector_nothing_to_walk() -> None:
    messages = msgspec.msgpack.decode(
        msgspec.msgpack.encode([m for t in range(50) for m in numbered(f"t{t}", 4 * t)]),
        type=list[Message],
    )
    history = CompactHistory(messages, message_tokens)
    kept = [getattr(history, name) for name in CompactHistory.__slots__ if name != "_weigh"]
    # A handful of objects per continuum (bytes and arrays), none per message.
    assert len(kept) <= 10
    assert all(isinstance(column, (bytes, array, int)) for column in kept)
    as_structs = sum(
        gc.is_tracked(m) + gc.is_tracked(m.content) + sum(map(gc.is_tracked, m.content))
        for m in messages
    )
    # What every full collection walked before: each message's content tuple (messages
    # and blocks themselves are untracked structs, gc=False, but their tuples are not).
    assert as_structs >= len(messages)
    # ...and it takes about the memory of the structs it replaces (untracked, they lost
    # the collector's 16-byte header each and are now some 10% smaller than the bytes).
    compact = allocated(lambda: CompactHistory(history.messages(), message_tokens))
    assert compact <= 1.15 * allocated(history.messages)


ROLES: tuple[Literal["user", "assistant"], ...] = ("user", "assistant")


def test_a_kept_message_costs_its_text_and_little_more() -> None:
    # 100 turns of short chat: the window's bookkeeping, not its text, is what a loaded
    # continuum could waste (bench/load.py's memory figure is per continuum at 100 turns).
    messages = [
        Message(role, (TextBlock(f"{role} says {'words ' * 30}{turn}"),), 2 * turn + i,
                f"turn_{turn:032x}", moment(1e9 + turn))
        for turn in range(100)
        for i, role in enumerate(ROLES)
    ]  # fmt: skip
    text = sum(len(m.content[0].text) for m in messages if isinstance(m.content[0], TextBlock))
    size = allocated(lambda: CompactHistory(messages, message_tokens))
    # 25 bytes a message and 21 a turn (see below), the columns' spare room, the objects'
    # headers: under 40 a message in all (it was 48, and a 90-byte string per turn).
    assert size <= text + 40 * len(messages)
    history = CompactHistory(messages, message_tokens)
    assert history.messages() == messages
    assert history.last_created_at() == messages[-1].created_at.timestamp()


def test_a_kept_message_costs_25_bytes_besides_its_text_and_a_turn_21() -> None:
    # One text block (most messages): its UTF-8 behind a role byte, 4-byte columns, and
    # a generated turn id kept as its 16 raw bytes once per turn.
    messages = [
        Message(role, (TextBlock(f"{role} says {'words ' * 30}{turn}"),), 2 * turn + i,
                f"turn_{turn:032x}", moment(1e9 + turn))
        for turn in range(100)
        for i, role in enumerate(ROLES)
    ]  # fmt: skip
    text = sum(len(m.content[0].text) for m in messages if isinstance(m.content[0], TextBlock))
    history = CompactHistory(messages, message_tokens)
    kept = history._data, history._ends, history._seqs, history._created, history._tokens
    ids = history._ids, history._id_ends, history._turn_at
    payload = sum(len(c) * (c.itemsize if isinstance(c, array) else 1) for c in kept + ids)
    # Per message: role byte, offset, seq, token count, turn entry (4 each), time (8);
    # per turn: its id's 17 bytes and where they end (4).
    assert payload <= text + 25 * len(messages) + 21 * 100
    assert len(history._ids) == 17 * 100  # one entry per turn, not per message
    assert history.messages() == messages


def test_turn_ids_of_any_form_come_back_exactly() -> None:
    ids = ["t1", f"turn_{'AB' * 16}", f"turn_{'ab' * 16}", "turn_short", "turn_é" + "0" * 31, ""]
    messages = [
        Message(role, (TextBlock(f"{turn_id}:{role}"),), 2 * n + i, turn_id, moment(1.0))
        for n, turn_id in enumerate(ids)
        for i, role in enumerate(ROLES)
    ]
    history = CompactHistory(messages, message_tokens)
    assert history.messages() == messages
    assert history.turn_ids() == [m.turn_id for m in messages]
    for start in range(len(messages)):  # from any message: only its turns are decoded
        assert history.messages(messages[start].seq) == messages[start:]
    assert [turn for _, turn, _ in history.entries()] == [i // 2 for i in range(len(messages))]
    # A turn continued across extends stays one entry; trimming forgets unused entries.
    more = Message("user", (TextBlock("again"),), 99, ids[-1], moment(2.0))
    history.extend([more])
    assert len(history._id_ends) == len(ids)
    history.drop_before(3)  # in the middle of the second turn
    assert history.messages() == [*messages[3:], more]
    assert len(history._id_ends) == len(ids) - 1
    history.extend([Message("assistant", (TextBlock("new"),), 100, "t9", moment(3.0))])
    assert history.turn_ids() == [*(m.turn_id for m in messages[3:]), ids[-1], "t9"]
    # Turns numbered from the window's first: the second turn's last message is turn 0.
    turns = [turn for _, turn, _ in history.entries()]
    assert turns == [0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 5]


def test_columns_widen_for_values_past_32_bits_and_refuse_past_64() -> None:
    first = Message("user", (TextBlock("a"),), 5, "t1", moment(1.0))
    history = CompactHistory([first], message_tokens)
    assert str(history._seqs.typecode) == "i"
    big = Message("assistant", (TextBlock("b"),), 2**40, "t1", moment(2.0))
    history.extend([big])
    assert history._seqs.typecode == "q"
    assert history.messages() == [first, big]
    too_big = Message("user", (TextBlock("c"),), 2**64, "t2", moment(3.0))
    with pytest.raises(ValueError, match=r"seq 18446744073709551616 does not fit in 64 bits"):
        history.extend([too_big])
    # Refused before anything changed: the window is as it was.
    assert history.messages() == [first, big]
    assert list(history.entries()) == [(5, 0, message_tokens(first)),
                                       (2**40, 0, message_tokens(big))]  # fmt: skip
    assert history.turn_ids() == ["t1", "t1"]
    assert history.tokens == message_tokens(first) + message_tokens(big)
