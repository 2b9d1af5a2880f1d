"""A tiny deterministic embedder for tests: each word votes for its concept."""

from __future__ import annotations

import re
from collections.abc import Sequence

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
