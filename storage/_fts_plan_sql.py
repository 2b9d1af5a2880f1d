"""The search plan of `_fts.search_plan`, in SQLite's SQL: counted and chosen in the same
statement as the search that uses it.

Planning in Python needs the terms' counts first: a statement of its own, and on a busy
daemon a second trip through a reader thread before the search can start. A
composition's memory search is on the turn's critical path, and that trip cost more
than the counting itself (bench/compose.py: compose 4.0 → 2.6 ms median at 50k
memories without it). So the plan is a few common table expressions:

- `counts`: each term's documents, counted up to COUNT_CAP;
- `present`: the terms that occur, rarest first (ties in query order), at most
  MAX_SELECTIVE_TERMS, each with the running total of documents;
- `plan`: one row. `ranked` when the rarest term is rare (below the cap); `chosen`, the
  FTS5 query of the rarest terms within ROW_BUDGET rows (the rarest always);
  `every`, the query of every present term, for a search of only common words; `term1`
  … `termN`, each present term alone, for counting how many a document holds.

A query the plan does not use is `'""'`, an empty phrase that matches nothing (FTS5
refuses NULL), so the branch of the statement it feeds finds no rows at once.
tests/test_search.py checks the SQL plan against `search_plan` term for term.

The limits are written into the text as literals, not bound: with the SQLite that
sqlean builds (ENABLE_STAT4; the standard library's is built without it), a statement
with a bare parameter as a LIMIT is compiled again at every execution, and these
statements take some 3 ms to compile (the memory search: 3.3 ms a run, 0.05 ms with its
limits fixed; 3.4 ms of a reader thread's CPU in every turn of bench/turn_overhead.py).
A limit that varies per call is bound as `+:name`, an expression rather than a bare
parameter, which leaves the compiled statement valid.
"""

from __future__ import annotations

import json

from ._fts import COUNT_CAP, MAX_SELECTIVE_TERMS, ROW_BUDGET, fts_query

__all__ = ["NOTHING", "plan_ctes", "plan_parameters", "term_hits"]

NOTHING = '""'  # an FTS5 query that matches no document


def plan_ctes(table: str) -> str:
    """`counts`, `present` and `plan` over FTS5 `table`, for the terms in the JSON array
    `:terms` (the text after WITH; the statement's own CTEs follow it after a comma).

    One text for any number of terms: each statement is compiled once per connection,
    and one with a branch per term took SQLite some 20 ms to compile for each count.
    """
    counted = (
        "SELECT key AS ord, value AS q, (SELECT count(*) FROM (SELECT 1 FROM"
        f" {table} WHERE {table} MATCH terms.value LIMIT {COUNT_CAP})) AS n"
        " FROM json_each(:terms) AS terms"
    )
    singles = "".join(
        f", CASE WHEN r.ranked THEN '{NOTHING}' ELSE coalesce("
        f"(SELECT q FROM present WHERE rank = {k}), '{NOTHING}') END AS term{k}"
        for k in range(1, MAX_SELECTIVE_TERMS + 1)
    )
    return (
        f"counts AS MATERIALIZED ({counted}),"
        " present AS MATERIALIZED (SELECT q, n, row_number() OVER w AS rank,"
        " sum(n) OVER w AS total FROM counts WHERE n > 0"
        " WINDOW w AS (ORDER BY n, ord ROWS UNBOUNDED PRECEDING)"
        f" ORDER BY n, ord LIMIT {MAX_SELECTIVE_TERMS}),"
        f" rarest AS MATERIALIZED (SELECT coalesce((SELECT n < {COUNT_CAP} FROM present"
        " WHERE rank = 1), 1) AS ranked, coalesce((SELECT min(rank) FROM present"
        f" WHERE rank > 1 AND (n >= {COUNT_CAP} OR total > {ROW_BUDGET})),"
        f" {MAX_SELECTIVE_TERMS + 1}) AS stop),"
        " plan AS MATERIALIZED (SELECT r.ranked,"
        f" CASE WHEN r.ranked THEN coalesce((SELECT group_concat(q, ' OR ') FROM present"
        f" WHERE rank < r.stop), '{NOTHING}') ELSE '{NOTHING}' END AS chosen,"
        f" CASE WHEN r.ranked THEN '{NOTHING}' ELSE coalesce((SELECT group_concat(q, ' OR ')"
        f" FROM present), '{NOTHING}') END AS every{singles} FROM rarest r)"
    )


def term_hits(table: str) -> str:
    """A query of one `id` row per (term, document) for each of the plan's terms alone,
    within the ids `bounds.lo` … `bounds.hi` (a CTE of the statement): counting a
    document's rows gives how many of the words it holds, read from the index.

    `bounds` is the outer loop (CROSS JOIN fixes SQLite's join order), so each term's
    list is read over that range of ids alone. Left to the planner, only the first
    branch had it so: the others read every document of their (common) word and then
    filtered by the range, 60 ms a search at 500,000 memories (6 at 50,000)."""
    return " UNION ALL ".join(
        f"SELECT rowid AS id FROM bounds CROSS JOIN {table} WHERE {table} MATCH"
        f" (SELECT term{k} FROM plan) AND rowid BETWEEN bounds.lo AND bounds.hi"
        for k in range(1, MAX_SELECTIVE_TERMS + 1)
    )


def plan_parameters(terms: list[str]) -> dict[str, object]:
    """The named parameters `plan_ctes` reads."""
    return {"terms": json.dumps([fts_query([term]) for term in terms])}
