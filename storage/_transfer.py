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
mean nothing without it); a format-1 file is still read, its vectors of no named
embedder (a store with one makes them again). Every value is of its column's type
below, checked line by line before anything is written. Bytes are
`{"base64": "..."}`; numbers are JSON numbers (a float printed as its shortest exact
form, so timestamps come back bit for bit).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Annotated, Any

import msgspec

from ._exceptions import InvalidInput
from ._jobs import usage_decoder
from ._shared import content_decoder, record_decoder
from ._validation import LABEL_PATTERN, NAME_PATTERN

__all__ = [
    "COLUMNS",
    "EXPORT_FORMAT",
    "KEYS",
    "PORTABLE_TABLES",
    "TableRows",
    "decode_line",
    "encode_header",
    "encode_row",
]

# The version of the export format; an import refuses a newer one.
EXPORT_FORMAT = 2

# (table, its portable columns with their JSON types, the ORDER BY that lists its rows
# as they were written). A type is `str`, `int`, `float` or `bytes`, `?` when the column
# may be null: an import checks every value against it (storage refuses few types on
# its own: SQLite stores "yesterday" as a timestamp, and every read of it then fails).
# `turns` is ordered by insertion (`{turn_order}`, each adapter's own) so that turns
# started at the same instant keep their order.
_TABLES = (
    ("vector_model", "model:str dimensions:int", "model"),  # one row at most, of no user
    ("users", "name:str token_hash:str created_at:float", "name"),
    ("documents", "owner:str label:str content:str updated_at:float", "owner, label"),
    (
        "reminders",
        "id:int owner:str text:str due_at:float? created_at:float completed_at:float? origin:str",
        "id",
    ),
    (
        "continuums",
        "owner:str id:str created_at:float history_start:int message_count:int"
        " last_turn_at:float? last_message_id:str?",
        "owner, id",
    ),
    ("continuum_settings", "owner:str continuum_id:str settings:bytes", "owner, continuum_id"),
    (
        "turns",
        "id:str owner:str continuum_id:str status:str started_at:float record:bytes",
        "{turn_order}",
    ),
    (
        "segments",
        "id:int owner:str continuum_id:str started_at:float ended_at:float turn_count:int"
        " title:str first_seq:int summary:str",
        "id",
    ),
    (
        "messages",
        "id:int owner:str continuum_id:str seq:int turn_id:str role:str content:bytes"
        " text:str created_at:float",
        "id",
    ),
    (
        "memories",
        "id:int owner:str text:str created_at:float expires_at:float? importance:float"
        " source_segment:int? uses:int embedding:bytes?",
        "id",
    ),
    (
        "jobs",
        "id:int owner:str kind:str continuum_id:str payload:bytes state:str attempts:int"
        " next_at:float claimed_at:float? last_error:str? created_at:float finished_at:float?"
        " record:bytes?",
        "id",
    ),
    (
        "searches",
        "id:int owner:str continuum_id:str query:str state:str requested_at:float attempts:int"
        " claimed_at:float? finished_at:float? turns_left:int? passages:bytes? error:str?",
        "id",
    ),
)
PORTABLE_TABLES: tuple[tuple[str, tuple[str, ...], str], ...] = tuple(
    (table, tuple(c.split(":")[0] for c in columns.split()), order)
    for table, columns, order in _TABLES
)
COLUMNS = {table: columns for table, columns, _ in PORTABLE_TABLES}
# The key each row is known by (its table's primary key): a migration resumed brings a
# row it finds changed up to date by it. Messages never change once written, and
# `vector_model` is not copied row by row: neither is here.
KEYS: dict[str, tuple[str, ...]] = {
    "users": ("name",),
    "documents": ("owner", "label"),
    "reminders": ("id",),
    "continuums": ("owner", "id"),
    "continuum_settings": ("owner", "continuum_id"),
    "turns": ("id",),
    "segments": ("id",),
    "memories": ("id",),
    "jobs": ("id",),
    "searches": ("id",),
}


class _Base64(msgspec.Struct, forbid_unknown_fields=True):
    """Bytes in JSON: `{"base64": "..."}`."""

    base64: str


_INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
# A row's numeric id: one a call can name (ids start at 1), with room left for the
# store to number the rows made after it. An id at SQLite's largest left every later
# insert failing as "database or disk is full", PostgreSQL's sequence "reached maximum
# value"; past 2^53 a client in JavaScript (the console) reads another id.
MAX_IMPORTED_ID = 2**53 - 1
_ROW_ID = Annotated[int, msgspec.Meta(ge=1, le=MAX_IMPORTED_ID)]
# Text as both databases store it: no NUL (PostgreSQL's `text` refuses U+0000; a lone
# surrogate the JSON decoder refuses already). Names and labels of the forms the store
# writes and reads them in: a row under another could be neither read nor deleted.
_TEXT = Annotated[str, msgspec.Meta(pattern="^[^\\x00]*$")]
_NAME = Annotated[str, msgspec.Meta(pattern=f"^{NAME_PATTERN}$")]
_LABEL = Annotated[str, msgspec.Meta(pattern=f"^{LABEL_PATTERN}$")]
# What a value that does not match says, in words.
_PATTERN_WORDS = {
    "^[^\\x00]*$": "holds a NUL character (U+0000), which PostgreSQL cannot store",
    f"^{NAME_PATTERN}$": "malformed: use 1 to 64 of A-Z a-z 0-9 _ -",
    f"^{LABEL_PATTERN}$": "malformed: use 1 to 64 of A-Z a-z 0-9 _ . -",
}
_TYPES: dict[str, Any] = {"str": _TEXT, "int": _INT64, "float": float, "bytes": _Base64}
# The columns holding a user's name, a continuum's id or a document's label.
_NAMED = {"owner": _NAME, "continuum_id": _NAME, "label": _LABEL}
_NAMED_BY_TABLE = {("users", "name"): _NAME, ("continuums", "id"): _NAME}


def _row_type(table: str, columns: str) -> type[msgspec.Struct]:
    """A struct of the table's row as JSON holds it: each value checked for its type."""
    fields: list[tuple[str, Any]] = []
    for column in columns.split():
        name, kind = column.split(":")
        base = _TYPES[kind.rstrip("?")]
        if kind == "str":
            base = _NAMED_BY_TABLE.get((table, name), _NAMED.get(name, base))
        elif kind == "int" and name == "id":
            base = _ROW_ID
        fields.append((name, base | None if kind.endswith("?") else base))
    return msgspec.defstruct(f"{table}_row", fields, forbid_unknown_fields=True)


_ROW_TYPES = {table: _row_type(table, columns) for table, columns, _ in _TABLES}

# The bytes every read of the row decodes, by the decoder the read uses: bytes it cannot
# decode (an export edited by hand) would be imported whole, and every turn of the
# continuum would then crash on them, or every listing of its turns or jobs.
_STORED: dict[tuple[str, str], tuple[str, msgspec.json.Decoder[Any]]] = {
    ("messages", "content"): ("a message's content blocks", content_decoder),
    ("turns", "record"): ("a turn record", record_decoder),
    ("continuum_settings", "settings"): ("settings", msgspec.json.Decoder(dict[str, Any])),
    ("jobs", "record"): ("a job's usage", usage_decoder),
}


class TableRows(msgspec.Struct, frozen=True):
    """Some rows of one portable table, each in the table's column order. Memories also
    name the embedder their vectors are of, `vector_model` (name, dimensions), when it
    is known apart from the rows (an export's parts: a migration imports each on its
    own); None: the `vector_model` rows imported with them tell, and without any, the
    vectors are of no known embedder."""

    table: str
    rows: list[tuple[Any, ...]]
    vector_model: tuple[str, int] | None = None


_encoder = msgspec.json.Encoder()


def _out(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _in(value: Any, where: str) -> Any:
    if not isinstance(value, _Base64):
        return value
    try:
        return base64.b64decode(value.base64, validate=True)
    except binascii.Error as exc:
        raise InvalidInput(f"{where}: not base64 ({exc})") from None


def encode_header(schema: int, user: str | None) -> bytes:
    header = {"format": EXPORT_FORMAT, "kind": "header", "schema": schema, "user": user}
    return _encoder.encode(header) + b"\n"


def encode_row(table: str, row: Sequence[Any]) -> bytes:
    named = {column: _out(value) for column, value in zip(COLUMNS[table], row, strict=True)}
    return _encoder.encode({"format": EXPORT_FORMAT, "table": table, "row": named}) + b"\n"


def _typed_row(table: str, row: dict[str, Any], number: int) -> tuple[Any, ...]:
    """The row's values in column order, each of its column's type; `InvalidInput`
    naming the line, the table and the column for one that is not."""
    try:
        typed = msgspec.convert(row, _ROW_TYPES[table], strict=True)
    except msgspec.ValidationError as exc:
        # msgspec says "Expected `float`, got `str` - at `$.updated_at`": the column goes first.
        reason, _, path = str(exc).partition(" - at `$.")
        column = path.split("`")[0].split(".")[0]
        for pattern, words in _PATTERN_WORDS.items():
            reason = reason.replace(f"Expected `str` matching regex {pattern!r}", words)
        if column == "id" and reason.startswith(("Expected `int` >=", "Expected `int` <=")):
            reason = f"an id must be 1 to {MAX_IMPORTED_ID}: {reason}"
        raise InvalidInput(f"line {number}: {table}.{column}: {reason}") from None
    values = tuple(
        _in(getattr(typed, column), f"line {number}: {table}.{column}") for column in COLUMNS[table]
    )
    for column, value in zip(COLUMNS[table], values, strict=True):
        stored = _STORED.get((table, column))
        if stored is not None and value is not None:
            what, decoder = stored
            try:
                decoder.decode(value)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise InvalidInput(
                    f"line {number}: {table}.{column}: not {what} this store reads ({exc})"
                ) from None
    return values


def decode_line(line: bytes, number: int) -> tuple[str, tuple[Any, ...]] | None:
    """One line of an export: (table, row in column order), or None for the header.
    `InvalidInput` naming the line for anything malformed (a value of another type than
    its column's among it) or newer than this reads."""
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
    return table, _typed_row(table, row, number)
