"""The segment summary pass: the instruction sent after the conversation's own cached
prefix, the reply it expects, and the de-duplication of the memories it proposes.

The instruction is the final user message of a request that is otherwise the
continuum's prefix exactly as its turns send it (tools, system, history, the same
breakpoints), so the call reads the cache the conversation has already paid for. It
begins with a marker line, which the local API's default model recognises so that
offline runs produce deterministic summaries.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import msgspec

from storage import (
    MAX_MEMORY_CHARS,
    Memory,
    MemoryProposal,
    Message,
    Storage,
    storable,
    visible,
)

__all__ = [
    "SUMMARY_MARKER",
    "DigestError",
    "DigestReply",
    "ProposedMemory",
    "deduplicate",
    "parse_digest",
    "similarity",
    "summary_instruction",
]

SUMMARY_MARKER = "[frontmind:segment-summary]"
TRANSCRIPT_CHARS = 24_000  # a segment quoted in the instruction is cut to this
MAX_MEMORIES = 8
SAME_MEMORY = 0.6  # word overlap (Jaccard) at which a proposal is the same memory
# With an embedder: the cosine at which it is (`memory.same_memory_cosine` sets it).
SAME_MEANING = 0.9

_SHAPE = (
    'Reply with one JSON object and nothing else: {"title": "at most 8 words", '
    '"summary": "2 to 4 sentences", "memories": [{"text": "one durable fact, preference, '
    'decision or commitment, in the third person", "importance": 0.0 to 1.0}]}. '
    "Propose only what will still matter in weeks; an empty list is fine."
)


def summary_instruction(
    history: list[Message], first_seq: int, end_seq: int | None, transcript: str
) -> str:
    """The instruction for the segment [first_seq, end_seq), pointing at its messages
    by position when they are in the history sent, else quoting them."""
    positions = [
        i + 1
        for i, m in enumerate(history)
        if m.seq >= first_seq and (end_seq is None or m.seq < end_seq)
    ]
    head = (
        f"{SUMMARY_MARKER}\n"
        "This is a background request from the application, not a message from the user: "
        "the conversation above continues after it, unchanged. "
    )
    in_window = bool(positions) and history[0].seq <= first_seq
    if in_window:
        where = (
            f"Summarise one closed segment of the conversation above: messages "
            f"#{positions[0]} to #{positions[-1]} (counting the messages above from #1)."
        )
    else:
        where = (
            "Summarise one closed segment of this conversation, no longer shown above; "
            f"its messages are quoted here:\n<segment>\n{transcript[:TRANSCRIPT_CHARS]}\n</segment>"
        )
    return f"{head}{where}\n{_SHAPE}"


class ProposedMemory(msgspec.Struct, frozen=True):
    text: str
    importance: float = 0.5


class DigestReply(msgspec.Struct, frozen=True):
    title: str
    summary: str
    memories: tuple[ProposedMemory, ...] = ()


class DigestError(ValueError):
    """The model's reply is not a usable summary (the job is retried later)."""


_decoder = msgspec.json.Decoder(DigestReply)


def parse_digest(text: str) -> DigestReply:
    """The JSON object in the model's reply (a fenced block or bare), checked."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DigestError(f"the summary reply holds no JSON object: {text[:200]!r}")
    try:
        reply = _decoder.decode(text[start : end + 1])
    except msgspec.DecodeError as exc:
        raise DigestError(f"the summary reply is not the expected JSON: {exc}") from None
    # The model's words, held to what the store takes (a NUL or a lone surrogate becomes
    # U+FFFD; a memory of nothing visible is left out): one it would refuse failed the
    # whole job on every try, the segment's summary and every memory with it.
    title = storable(" ".join(reply.title.split())[:120])
    summary = storable(reply.summary.strip()[:4000])
    if not visible(title) or not visible(summary):
        raise DigestError("the summary reply has an empty title or summary")
    memories = tuple(
        ProposedMemory(text, min(max(m.importance, 0), 1))
        for m in reply.memories[:MAX_MEMORIES]
        if visible(text := storable(" ".join(m.text.split())[:MAX_MEMORY_CHARS]))
    )
    return DigestReply(title, summary, memories)


_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 1}


def similarity(a: str, b: str) -> float:
    """Word overlap (Jaccard) of two texts, 0 to 1."""
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0 where either is zero). Used between a proposal and
    the few proposals of its own pass, never over the store."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return dot / norms if norms else 0.0


def deduplicate(
    proposed: ProposedMemory,
    candidates: list[Memory],
    accepted: list[MemoryProposal],
    *,
    closeness: Mapping[int, float] | None = None,
    same_cosine: float = SAME_MEANING,
    vector: Sequence[float] | None = None,
) -> MemoryProposal | None:
    """The proposal as it should be written: an update of the existing memory it
    repeats (None when it adds nothing), or a new memory. `accepted` are this pass's
    earlier proposals, so one pass never writes the same memory twice.

    Two texts say the same when their word overlap reaches SAME_MEMORY (the rule for
    keyword-only setups). With an embedder, a candidate whose cosine to the proposal is
    known (`closeness`) says the same when that cosine reaches `same_cosine`, and
    `vector`, the proposal's own, is compared with the earlier proposals that have one.
    Words still decide for the candidates with no cosine: a memory not embedded yet
    (just written, or waiting to be embedded again after an embedder change).
    """
    for earlier in accepted:
        if similarity(earlier.text, proposed.text) >= SAME_MEMORY:
            return None
        if (
            vector is not None
            and earlier.vector is not None
            and len(earlier.vector) == len(vector)
            and cosine(earlier.vector, vector) >= same_cosine
        ):
            return None
    # A memory an earlier proposal updates says that proposal's text from this pass on
    # (compared above): one that does not repeat it is not a second update of the
    # memory, which would overwrite the first in the same commit.
    updated = {earlier.update_id for earlier in accepted}
    candidates = [memory for memory in candidates if memory.id not in updated]
    close = closeness or {}

    def strength(memory: Memory) -> tuple[bool, float, float]:
        by_words = similarity(memory.text, proposed.text)
        if (by_meaning := close.get(memory.id)) is not None:
            return (by_meaning >= same_cosine, by_meaning, by_words)
        return (by_words >= SAME_MEMORY, 0.0, by_words)

    best = max(candidates, key=strength, default=None)
    if best is not None and strength(best)[0]:
        if best.text == proposed.text and best.importance >= proposed.importance:
            return None  # nothing new: the memory stays as it is
        return MemoryProposal(proposed.text, max(best.importance, proposed.importance), best.id)
    return MemoryProposal(proposed.text, proposed.importance)


async def decide_memory(
    storage: Storage,
    user: str,
    proposed: ProposedMemory,
    accepted: list[MemoryProposal],
    near: list[tuple[Memory, float]] | None,
    *,
    now: float,
    same_cosine: float,
    vector: Sequence[float] | None = None,
) -> MemoryProposal | None:
    """`deduplicate` against the store, as the `remember` tool and the extraction both
    decide: by words over a keyword search, and by meaning too when `near` gives the
    memories nearest to the proposal's `vector` and their cosines."""
    hits = await storage.search_memories(user, proposed.text, limit=5, now=now)
    found = {h.memory.id: h.memory for h in hits}
    if near is None:
        return deduplicate(proposed, list(found.values()), accepted)
    nearest = {memory.id for memory, _ in near}
    missed = [memory_id for memory_id in found if memory_id not in nearest]
    if missed and vector is not None:
        # A keyword hit beyond the nearest few has a cosine too (when it has a vector):
        # meaning decides for it, not its words, however many memories are nearer.
        near = [*near, *await storage.nearest_memories(user, vector, k=0, now=now, among=missed)]
    found.update((memory.id, memory) for memory, _ in near)
    return deduplicate(
        proposed,
        list(found.values()),
        accepted,
        closeness={memory.id: close for memory, close in near},
        same_cosine=same_cosine,
        vector=vector,
    )
