"""The portable form of a store: what export writes, import reads and migrate copies.

A store is its tables' rows; the portable tables are the ones below, with the columns
both databases share (what each adapter derives on its own is left out: full-text
indexes and word counts, the vector index (SQLite's `memory_vec`, PostgreSQL's
normalized `vector` and pgvector's `vec`), PostgreSQL's turn order and job lease keys,
all rebuilt as the rows go in; and `model_facts`, a cache of the Models API's answers,
fetched again when wanted). A memory's vector travels as its `embedding` (float32
bytes), with `vector_model`, the embedder they are of: without it the next start of
that embedder would take them for another's and drop them all. Parents come before
the tables that refer to them, so the rows can be inserted in file order. Every row
keeps its ids, so a continuum's turn records, messages (their content bytes exactly),
segments and searches arrive as they were.

As JSON Lines (`frontmind export`), every line is one record carrying the format
version: first `{"format": 2, "kind": "header", "schema": N, "user": NAME|null}`, then
one `{"format": 2, "table": T, "row": {column: value}}` per row, in the order below.
Format 2 added `vector_model` (an export of one user carries it too: their vectors
mean nothing without it); a format-1 file is still read. Bytes are
`{"base64": "..."}`; numbers are JSON numbers (a float printed as its shortest exact
form, so timestamps come back bit for bit).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import msgspec

from ._exceptions import InvalidInput

__all__ = [
    "EXPORT_FORMAT",
    "PORTABLE_TABLES",
    "TableRows",
    "decode_line",
    "encode_header",
    "encode_row",
]

# The version of the export format; an import refuses a newer one.
EXPORT_FORMAT = 2

# (table, its portable columns, the ORDER BY that lists its rows as they were written).
# `turns` is ordered by insertion (`{turn_order}`, each adapter's own) so that turns
# started at the same instant keep their order.
_TABLES = (
    ("vector_model", "model dimensions", "model"),  # one row at most, of no user
    ("users", "name token_hash created_at", "name"),
    ("documents", "owner label content updated_at", "owner, label"),
    ("reminders", "id owner text due_at created_at completed_at origin", "id"),
    (
        "continuums",
        "owner id created_at history_start message_count last_turn_at last_message_id",
        "owner, id",
    ),
    ("continuum_settings", "owner continuum_id settings", "owner, continuum_id"),
    ("turns", "id owner continuum_id status started_at record", "{turn_order}"),
    (
        "segments",
        "id owner continuum_id started_at ended_at turn_count title first_seq summary",
        "id",
    ),
    ("messages", "id owner continuum_id seq turn_id role content text created_at", "id"),
    (
        "memories",
        "id owner text created_at expires_at importance source_segment uses embedding",
        "id",
    ),
    (
        "jobs",
        "id owner kind continuum_id payload state attempts next_at claimed_at last_error"
        " created_at finished_at record",
        "id",
    ),
    (
        "searches",
        "id owner continuum_id query state requested_at attempts claimed_at finished_at"
        " turns_left passages error",
        "id",
    ),
)
PORTABLE_TABLES: tuple[tuple[str, tuple[str, ...], str], ...] = tuple(
    (table, tuple(columns.split()), order) for table, columns, order in _TABLES
)
COLUMNS = {table: columns for table, columns, _ in PORTABLE_TABLES}


class TableRows(msgspec.Struct, frozen=True):
    """Some rows of one portable table, each in the table's column order."""

    table: str
    rows: list[tuple[Any, ...]]


_encoder = msgspec.json.Encoder()


def _out(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _in(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"base64"} or not isinstance(value["base64"], str):
            raise InvalidInput(f"a value {value!r} is neither a JSON scalar nor {{'base64': ...}}")
        return base64.b64decode(value["base64"], validate=True)
    return value


def encode_header(schema: int, user: str | None) -> bytes:
    header = {"format": EXPORT_FORMAT, "kind": "header", "schema": schema, "user": user}
    return _encoder.encode(header) + b"\n"


def encode_row(table: str, row: Sequence[Any]) -> bytes:
    named = {column: _out(value) for column, value in zip(COLUMNS[table], row, strict=True)}
    return _encoder.encode({"format": EXPORT_FORMAT, "table": table, "row": named}) + b"\n"


def decode_line(line: bytes, number: int) -> tuple[str, tuple[Any, ...]] | None:
    """One line of an export: (table, row in column order), or None for the header.
    `InvalidInput` naming the line for anything malformed or newer than this reads."""
    try:
        record = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"line {number}: not JSON ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("format"), int):
        raise InvalidInput(f"line {number}: not an export record (no format version)")
    if record["format"] > EXPORT_FORMAT:
        raise InvalidInput(
            f"line {number}: export format {record['format']} is newer than this Frontmind"
            f" reads (format {EXPORT_FORMAT}); import it with a newer Frontmind"
        )
    if record.get("kind") == "header":
        return None
    table, row = record.get("table"), record.get("row")
    if table not in COLUMNS or not isinstance(row, dict):
        raise InvalidInput(f"line {number}: unknown table {table!r}")
    columns = COLUMNS[table]
    if set(row) != set(columns):
        raise InvalidInput(
            f"line {number}: a {table} row needs exactly the columns {', '.join(columns)}"
        )
    return table, tuple(_in(row[column]) for column in columns)
