"""The segment summary pass: the instruction sent after the conversation's own cached
prefix, the reply it expects, and the de-duplication of the memories it proposes.

The instruction is the final user message of a request that is otherwise the
continuum's prefix exactly as its turns send it (tools, system, history, the same
breakpoints), so the call reads the cache the conversation has already paid for. It
begins with a marker line, which the local API's default model recognises so that
offline runs produce deterministic summaries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from storage import MAX_MEMORY_CHARS, Memory, MemoryProposal, Message, Storage

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
    title = " ".join(reply.title.split())[:120]
    summary = reply.summary.strip()[:4000]
    if not title or not summary:
        raise DigestError("the summary reply has an empty title or summary")
    memories = tuple(
        ProposedMemory(" ".join(m.text.split())[:MAX_MEMORY_CHARS], min(max(m.importance, 0), 1))
        for m in reply.memories[:MAX_MEMORIES]
        if m.text.strip()
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


def deduplicate(
    proposed: ProposedMemory,
    candidates: list[Memory],
    accepted: list[MemoryProposal],
    *,
    closeness: Mapping[int, float] | None = None,
    same_cosine: float = SAME_MEANING,
) -> MemoryProposal | None:
    """The proposal as it should be written: an update of the existing memory it
    repeats (None when it adds nothing), or a new memory. `accepted` are this pass's
    earlier proposals, so one pass never writes the same memory twice.

    A candidate repeats the proposal when their word overlap reaches SAME_MEMORY (the
    rule for keyword-only setups); with an embedder, `closeness` gives each candidate's
    cosine to the proposal, and the same meaning is a cosine reaching `same_cosine`.
    """
    for earlier in accepted:
        if similarity(earlier.text, proposed.text) >= SAME_MEMORY:
            return None

    def score(memory: Memory) -> float:
        if closeness is None:
            return similarity(memory.text, proposed.text)
        return closeness.get(memory.id, 0.0)

    threshold = SAME_MEMORY if closeness is None else same_cosine
    best: Memory | None = None
    best_score = 0.0
    for memory in candidates:
        if (memory_score := score(memory)) > best_score:
            best, best_score = memory, memory_score
    if best is not None and best_score >= threshold:
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
) -> MemoryProposal | None:
    """`deduplicate` against the store, as the `remember` tool and the extraction both
    decide: by meaning when `near` gives the memories nearest to the proposal's vector
    and their cosines, else by words (the word-overlap rule over a keyword search)."""
    if near is None:
        hits = await storage.search_memories(user, proposed.text, limit=5, now=now)
        return deduplicate(proposed, [h.memory for h in hits], accepted)
    return deduplicate(
        proposed,
        [memory for memory, _ in near],
        accepted,
        closeness={memory.id: close for memory, close in near},
        same_cosine=same_cosine,
    )
