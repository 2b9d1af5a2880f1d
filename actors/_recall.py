"""Recall: which memories a turn's notification center shows.

Every memory the keyword search finds is ranked by the documented blend in
`storage._fts.memory_score` (text relevance × importance × recency × use). With an
embedder configured (`[memory] embedder = "pkg.mod:Embedder"`), its cosine similarity
joins the relevance term:

    relevance = (1 - w) × keyword relevance / best keyword relevance + w × cosine

with w = `memory.embedding_weight` (0.5), over the keyword hits and every memory with an
embedding whose cosine reaches MIN_SIMILARITY, so a paraphrase that shares no word with
a memory still finds it. Vectors are
written by the background worker beside the memories; nothing is downloaded for the
default (no embedder: keyword search alone).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from storage import MemoryHit, Storage, memory_score

from ._exceptions import SettingsError
from ._imports import import_module_near

__all__ = ["Embedder", "cosine", "load_embedder", "recall"]

log = logging.getLogger("frontmind.recall")
# Below this cosine a memory that no keyword found is not considered related at all.
MIN_SIMILARITY = 0.2


@runtime_checkable
class Embedder(Protocol):
    """What `[memory] embedder` names: a class built with no arguments."""

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


def load_embedder(spec: str, search: Sequence[str] = ()) -> Embedder:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SettingsError(f"memory.embedder: {spec!r} must look like 'package.module:Class'")
    try:
        cls = getattr(import_module_near(module_name, search), attribute)
        embedder = cls()
    except (ImportError, AttributeError) as exc:
        raise SettingsError(f"memory.embedder: cannot load {spec!r}: {exc}") from exc
    if not isinstance(embedder, Embedder):
        raise SettingsError(f"memory.embedder: {spec!r} has no async embed(texts) method")
    return embedder


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


async def recall(
    storage: Storage,
    user: str,
    text: str,
    *,
    limit: int,
    now: float,
    embedder: Embedder | None = None,
    weight: float = 0.5,
) -> list[MemoryHit]:
    if embedder is None:
        return await storage.search_memories(user, text, limit=limit, now=now)
    hits = await storage.search_memories(user, text, limit=limit * 4, now=now)
    if not text.strip():
        return hits[:limit]
    try:
        (query,) = await embedder.embed([text])
    # The embedder is the user's code: if it fails, recall falls back to keywords for
    # this turn rather than losing the section.
    except Exception:
        log.exception("the embedder failed; recall used keywords alone")
        return hits[:limit]
    best = max((h.score for h in hits), default=0.0)
    keyword = {h.memory.id: (h.score / best if best > 0 else 0.0) for h in hits}
    candidates = {h.memory.id: h.memory for h in hits}
    similarity: dict[int, float] = {}
    for memory, vector in await storage.memory_vectors(user, now=now):
        close = cosine(query, vector)
        if close >= MIN_SIMILARITY or memory.id in keyword:
            candidates[memory.id] = memory
            similarity[memory.id] = max(close, 0.0)
    ranked = []
    for memory_id, memory in candidates.items():
        relevance = (1 - weight) * keyword.get(memory_id, 0.0) + weight * similarity.get(
            memory_id, 0.0
        )
        if relevance <= 0:
            continue
        score = memory_score(-relevance, memory.importance, now - memory.created_at, memory.uses)
        ranked.append(MemoryHit(memory, score))
    ranked.sort(key=lambda h: h.score, reverse=True)
    return ranked[:limit]
