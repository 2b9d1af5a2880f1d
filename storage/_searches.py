"""What both adapters share about context searches: their lease, limits and the
encoding of their found passages.

A search is one row of `searches`: written when the model asks for it (during a turn),
claimed by one searcher at a time (a claim not finished within SEARCH_LEASE_SECONDS, its
replica having died, is claimable again), and finished with its passages or its error.
A finished search is shown for `turns_left` more turns of its continuum (each committed
turn counts one down), then dropped; a continuum keeps at most MAX_SEARCHES.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ._records import ContextSearch, Passage
from ._time import moment, moment_or_none, stored_fields
from ._validation import check_text

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_SEARCHES",
    "MAX_SEARCH_ATTEMPTS",
    "SEARCH_LEASE_SECONDS",
    "check_query",
    "encode_passages",
    "search_from_row",
]

SEARCH_LEASE_SECONDS = 60.0  # a search is a few reads: a claim this old is abandoned
MAX_SEARCH_ATTEMPTS = 3  # claims that never finished; then it is shown as failed
MAX_SEARCHES = 5  # per continuum, the newest
MAX_QUERY_CHARS = 1000

# Passages are stored with their times as epoch floats (`stored_fields`); not strict, so
# that msgspec may read those floats as the datetimes they were.
_passages_decoder = msgspec.json.Decoder(tuple[Passage, ...], strict=False)
_encoder = msgspec.json.Encoder()


def check_query(query: str) -> str:
    return check_text(query, "the search query", MAX_QUERY_CHARS)


def encode_passages(passages: Sequence[Passage]) -> bytes:
    return _encoder.encode([stored_fields(p) for p in passages])


def search_from_row(row: Sequence[Any]) -> ContextSearch:
    """A ContextSearch from (id, owner, continuum_id, query, state, requested_at,
    attempts, claimed_at, finished_at, turns_left, passages, error)."""
    passages = row[10]
    return ContextSearch(
        int(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        row[4],
        moment(row[5]),
        int(row[6]),
        moment_or_none(row[7]),
        moment_or_none(row[8]),
        None if row[9] is None else int(row[9]),
        () if passages is None else _passages_decoder.decode(bytes(passages)),
        None if row[11] is None else str(row[11]),
    )
