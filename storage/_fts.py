"""Turning free text into a safe FTS5 query, and ranking memories.

User text never reaches FTS5 syntax: it is cut into words, each quoted, joined by OR.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

__all__ = [
    "CANDIDATE_FACTOR",
    "COUNT_CAP",
    "MAX_SELECTIVE_TERMS",
    "SearchPlan",
    "fts_query",
    "matched_terms",
    "memory_score",
    "query_terms",
    "search_plan",
    "selective",
]

_STOPWORDS = frozenset(
    (
        "a an and are as at be but by did do does for from had has have he her his how i if "
        "in into is it its me my no not of on or our she so that the their them then there "
        "these they this to too us was we were what when where which who why will with you "
        "your "
    ).split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 24
MAX_SELECTIVE_TERMS = 6
# A term's documents are counted up to this many: counting further would cost exactly
# the rows a common word has, and past it a word is common whatever its true count.
COUNT_CAP = 300
# The rows a ranked search may score, across its terms. BM25 counts every document of
# each term it ranks by (its IDF), so ranking by a common word costs the whole table;
# and each row it scores costs a lookup of its length. The rarest terms carry the
# ranking (a word in hundreds of rows has little weight): at 1,000 the memory search on
# a turn's path set the composition's tail (bench/compose.py, 50k memories: p99 5.2 →
# 3.9 ms at 500).
ROW_BUDGET = 500
# A ranked search ranks in the index alone and joins only this many times the rows it
# wants to their table (for the owner, scope and expiry); too few left: the whole join.
CANDIDATE_FACTOR = 2


def query_terms(text: str) -> list[str]:
    """The distinct words of `text` worth searching for, in order."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in _STOPWORDS or word in terms:
            continue
        terms.append(word)
        if len(terms) == MAX_TERMS:
            break
    return terms


def selective(terms: list[str], doc_counts: dict[str, int]) -> list[str]:
    """The rarest terms that occur at all, at most MAX_SELECTIVE_TERMS.

    An OR over a word that half the rows contain makes FTS5 score half the table, and
    BM25 gives such a word almost no weight anyway: the rare words decide the ranking.
    """
    present = [t for t in terms if doc_counts.get(t, 0) > 0]
    present.sort(key=lambda t: doc_counts[t])
    return present[:MAX_SELECTIVE_TERMS]


class SearchPlan(NamedTuple):
    """What to ask FTS5: `terms` to match; `ranked` by BM25 (all of them rare enough), or
    else (every word common) the most recent matches, ranked by how many terms they hold."""

    terms: list[str]
    ranked: bool


def search_plan(terms: list[str], doc_counts: dict[str, int]) -> SearchPlan | None:
    """The terms to search for, with work bounded whatever the size of the store.

    `doc_counts` are capped at COUNT_CAP. Rare terms are taken rarest first while their
    documents together stay within ROW_BUDGET (the rarest always): the rare words decide
    a BM25 ranking anyway. A query of only common words is not ranked by BM25 at all.
    """
    present = selective(terms, doc_counts)
    if not present:
        return None
    if doc_counts[present[0]] >= COUNT_CAP:
        return SearchPlan(present, ranked=False)
    chosen, rows = [present[0]], doc_counts[present[0]]
    for term in present[1:]:
        rows += doc_counts[term]
        if doc_counts[term] >= COUNT_CAP or rows > ROW_BUDGET:
            break
        chosen.append(term)
    return SearchPlan(chosen, ranked=True)


def matched_terms(text: str, terms: list[str]) -> int:
    """How many of `terms` occur in `text` (the score of an unranked search)."""
    words = set(_WORD.findall(text.lower()))
    return sum(1 for term in terms if term in words)


def fts_query(terms: list[str]) -> str | None:
    """An OR of quoted terms (never raw user syntax), or None when there are none."""
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def memory_score(bm25: float, importance: float, age_seconds: float, uses: int = 0) -> float:
    """The blend that ranks memories (higher is better):

        relevance × (0.75 + 0.5 × importance) × recency × (1 + 0.1 × ln(1 + uses))

    - relevance: BM25 (FTS5) or ts_rank (PostgreSQL), higher is better;
    - importance in [0, 1] moves the weight between 0.75 and 1.25;
    - recency halves a memory's weight after 30 days and keeps decaying slowly, so an
      old but exactly matching memory still beats a fresh vague one;
    - use: each time a memory is surfaced in a notification center it counts once; a
      memory surfaced often gains slowly (logarithmically: 10 uses is +24%), so use
      breaks ties between equally relevant memories without burying new ones.

    With an embedder configured, the caller blends its cosine similarity in as well
    (actors/_recall.py).
    """
    relevance = -bm25  # FTS5's bm25() is lower-is-better
    recency = 1.0 / (1.0 + max(age_seconds, 0.0) / (30 * 86400))
    use = 1.0 + 0.1 * math.log1p(max(uses, 0))
    return relevance * (0.75 + 0.5 * importance) * recency * use
