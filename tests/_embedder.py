"""A tiny deterministic embedder for tests: each word votes for its concept."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import anyio

CONCEPTS = (
    {"sister", "sibling", "brother", "family"},
    {"tea", "coffee", "drink", "beverage"},
    {"garden", "plants", "flowers", "soil"},
)


class ConceptEmbedder:
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            words = re.findall(r"\w+", text.lower())
            vectors.append([float(sum(w in c for w in words)) for c in CONCEPTS] + [0.01])
        return vectors


class CountingConceptEmbedder(ConceptEmbedder):
    """Counts each text it embeds (`embedded`), to see who embedded what."""

    embedded: ClassVar[Counter[str]] = Counter()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        CountingConceptEmbedder.embedded.update(texts)
        return await super().embed(texts)


class RenamedConceptEmbedder(ConceptEmbedder):
    """The same vectors under another model name: another embedder for the store."""

    model = "concepts-v2"


class BlockedEmbedder(ConceptEmbedder):
    """Says its dimension and answers the startup's dimension check; each turn's call
    waits for `release`, which no test sets: the call misses its deadline."""

    dimensions = len(CONCEPTS) + 1
    release: anyio.Event | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if list(texts) == ["dimension check"]:
            return await super().embed(texts)
        if BlockedEmbedder.release is None:
            BlockedEmbedder.release = anyio.Event()
        await BlockedEmbedder.release.wait()
        return await super().embed(texts)


class LoopBoundEmbedder(ConceptEmbedder):
    """Keeps what belongs to the event loop it first ran on, as an HTTP client keeps
    its pooled connections: here the loop itself, whose executor runs each embedding.
    On a loop closed since, every call fails ("Event loop is closed")."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        vectors = await super().embed(texts)
        return await asyncio.wrap_future(self._loop.run_in_executor(None, list, vectors))


class BrokenEmbedder:
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("the embeddings service is down")


class OutageEmbedder(ConceptEmbedder):
    """Says no dimension; fails every call while `down` (its service out)."""

    down: ClassVar[bool] = False

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if OutageEmbedder.down:
            raise RuntimeError("the embeddings service is down")
        return await super().embed(texts)


class KeylessEmbedder(ConceptEmbedder):
    """Reads its service's key when built, as the README's hosted embedder does, and
    finds none (a key missing from the environment)."""

    def __init__(self) -> None:
        raise KeyError("VOYAGE_API_KEY")


class MisdeclaredEmbedder(ConceptEmbedder):
    """Says one dimension more than its vectors have."""

    dimensions = len(CONCEPTS) + 2


class DeclaredBrokenEmbedder(BrokenEmbedder):
    """Says its dimension, and fails every call (a service down at startup)."""

    dimensions = len(CONCEPTS) + 1


class NoListEmbedder(ConceptEmbedder):
    """Answers the startup's dimension check, then `None` instead of a list of vectors
    (a wrapper that forgot its `return`)."""

    dimensions = len(CONCEPTS) + 1

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if list(texts) == ["dimension check"]:
            return await super().embed(texts)
        return None  # type: ignore[return-value]


class NoVectorsEmbedder:
    """Answers its dimension check with a list of numbers, not a list of vectors."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [0.5]  # type: ignore[list-item]


class SyncEmbedder(ConceptEmbedder):
    """Says its dimension, with a plain `def embed` (a local model called directly): it
    would run on the event loop at every turn, and its list cannot be awaited."""

    dimensions = len(CONCEPTS) + 1

    def embed(self, texts: Sequence[str]) -> list[list[float]]:  # type: ignore[override]
        return [[1.0] * self.dimensions for _ in texts]


class GatedEmbedder(ConceptEmbedder):
    """Says its dimension and answers the startup's check; every other call records its
    texts (`asked`, with `entered` set) and waits for `release`."""

    dimensions = len(CONCEPTS) + 1
    asked: ClassVar[list[str]] = []
    entered: anyio.Event | None = None
    release: anyio.Event | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if list(texts) == ["dimension check"]:
            return await super().embed(texts)
        GatedEmbedder.asked.extend(texts)
        if GatedEmbedder.entered is not None:
            GatedEmbedder.entered.set()
        if GatedEmbedder.release is not None:
            await GatedEmbedder.release.wait()
        return await super().embed(texts)
