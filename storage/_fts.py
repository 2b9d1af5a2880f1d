"""Turning free text into a safe FTS5 query, and ranking memories.

User text never reaches FTS5 syntax: it is cut into words, each quoted, joined by OR.
"""

from __future__ import annotations

import re

__all__ = ["fts_query", "memory_score"]

_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 12


def fts_query(text: str) -> str | None:
    """An OR of quoted terms, or None when the text has nothing worth searching for."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in _STOPWORDS or word in terms:
            continue
        terms.append(word)
        if len(terms) == MAX_TERMS:
            break
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def memory_score(bm25: float, importance: float, age_seconds: float) -> float:
    """Relevance (BM25, higher is better), weighted by importance and recency.

    Recency halves a memory's weight after 30 days and keeps decaying slowly, so an old
    but exactly matching memory still beats a fresh vague one.
    """
    relevance = -bm25  # FTS5's bm25() is lower-is-better
    recency = 1.0 / (1.0 + max(age_seconds, 0.0) / (30 * 86400))
    return relevance * (0.75 + 0.5 * importance) * recency
