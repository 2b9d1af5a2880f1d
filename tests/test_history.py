"""The compact in-memory history: messages kept as bytes, decoded exactly as they were."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Literal

import msgspec

from actors._conversation import message_tokens
from actors._history import CompactHistory
from storage import Message, TextBlock
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
    kept = (history._data, history._ends, history._seqs, history._created, history._tokens)
    # A handful of objects per continuum, none per message.
    assert sum(map(gc.is_tracked, kept)) + gc.is_tracked(history._turns) <= len(kept) + 1
    assert not any(map(gc.is_tracked, history._turns))
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
                f"turn_{turn:032x}", 1e9 + turn)
        for turn in range(100)
        for i, role in enumerate(ROLES)
    ]  # fmt: skip
    text = sum(len(m.content[0].text) for m in messages if isinstance(m.content[0], TextBlock))
    size = allocated(lambda: CompactHistory(messages, message_tokens))
    assert size <= text + 48 * len(messages) + 100 * 90  # + one turn id string per turn
    history = CompactHistory(messages, message_tokens)
    assert history.messages() == messages
    assert history.last_created_at() == messages[-1].created_at
