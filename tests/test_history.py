"""The compact in-memory history: messages kept as bytes, decoded exactly as they were."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import msgspec

from actors._conversation import message_tokens
from actors._history import CompactHistory
from storage import Message
from tests._factories import every_block_type


def numbered(turn: str, first_seq: int) -> list[Message]:
    return [
        Message(m.role, m.content, seq=first_seq + i, turn_id=turn, created_at=1.5 + i)
        for i, m in enumerate(every_block_type(turn))
    ]


def test_messages_come_back_as_they_went_in() -> None:
    messages = numbered("t1", 0) + numbered("t2", 4)
    history = CompactHistory(messages, message_tokens)
    assert history.messages() == messages
    assert history.messages(4) == messages[4:]
    assert len(history) == 8
    assert list(history.entries()) == [(m.seq, m.turn_id, message_tokens(m)) for m in messages]
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
    columns = (history._encoded, history._seqs, history._turns, history._tokens)
    assert sum(gc.is_tracked(item) for column in columns for item in column) == 0
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
