"""The daemon's wire format: request bodies, response pages, and how records cross it.

Records and events are the library's own msgspec structs; their times (`*_at`) are
`datetime`s, RFC 3339 on the wire. Two rules change their shape on the wire, applied in
one place (here) in both directions and in the OpenAPI schema:

- `input_json` (a tool input kept as exact JSON text) is `input`, a JSON object;
- in a message's content, a block kept as exact JSON (`RawBlock`: thinking, images,
  documents, server tools) is that JSON itself, and a tool result's `content_json` (a
  list of blocks) is its `content`.

Reading back, such JSON is re-encoded: the same value, not necessarily the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

import msgspec

from actors import Cost, McpServerStatus, ModelChoice, ToolsReload
from storage import (
    LABEL_PATTERN,
    MAX_ROW_ID,
    Continuum,
    ContinuumModel,
    Document,
    Job,
    Memory,
    MemoryHit,
    Message,
    Reminder,
    TurnRecord,
    User,
    excerpt,
)

from ._exceptions import BadBody, ClientError

T = TypeVar("T")
K = TypeVar("K")

__all__ = [
    "BackupBody",
    "BackupDone",
    "ContinuumPage",
    "ContinuumSummary",
    "CursorId",
    "CursorTime",
    "DocumentBody",
    "DocumentPage",
    "EmptyBody",
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "JobPage",
    "McpServers",
    "MemoryBody",
    "MemoryHitPage",
    "MemoryPage",
    "MessagePage",
    "ModelSettingsBody",
    "ModelSettingsReply",
    "PricedTurn",
    "ReminderBody",
    "ReminderPage",
    "ToolsReload",
    "TurnBody",
    "TurnPage",
    "UserBody",
    "UserCreated",
    "UserList",
    "decode_body",
    "decode_cursor",
    "encode_cursor",
    "from_wire",
    "priced",
    "quoting_excerpts",
    "summarize",
    "to_wire",
]

# Every timestamp a client sends must say its offset: a bare local time is ambiguous.
Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]


class TurnBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`{"message": "text"}` or `{"content": [blocks]}`; each block is kept as the
    exact JSON the client sent."""

    message: str | None = None
    content: list[msgspec.Raw] | None = None

    def user_input(self) -> str | list[msgspec.Raw]:
        if (self.message is None) == (self.content is None):
            raise BadBody("give either 'message' (text) or 'content' (a list of blocks)")
        return self.message if self.message is not None else list(self.content or ())


# PUT /v1/continuums/{id}/settings: the continuum's own model settings (null: config's).
ModelSettingsBody = ContinuumModel


class ModelSettingsReply(msgspec.Struct, frozen=True):
    own: ContinuumModel  # what the continuum chose (null: the config's)
    effective: ModelChoice  # what its turns run with


class ReminderBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    due_at: Timestamp | None = None


class MemoryBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    importance: float = 0.5
    expires_at: Timestamp | None = None


class DocumentBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    label: str
    content: str


class UserBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str


class UserCreated(msgspec.Struct, frozen=True):
    """A user just added, with its token: the only time the token is shown."""

    name: str
    token: str


class BackupBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: str  # a file on the daemon's machine


class BackupDone(msgspec.Struct, frozen=True):
    path: str
    bytes: int


class UserList(msgspec.Struct, frozen=True):
    users: list[User]


class EmptyBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`{}`: what a POST that needs nothing sends. The edge takes a POST only as JSON
    (a bodyless one with its Content-Type too); describing it so makes a generated
    client send `{}` as JSON rather than nothing, which the edge would refuse (415)."""


class McpServers(msgspec.Struct, frozen=True):
    """The MCP servers: state, offered tools, a pending tool list (admin only)."""

    servers: list[McpServerStatus]
    tools: list[str]  # the request's `tools` array, by name, in its order


class ErrorDetail(msgspec.Struct, frozen=True, omit_defaults=True):
    type: str
    message: str
    # A turn refused at the door (429 `busy`, 503 `overloaded`): the id of its record.
    turn_id: str | None = None
    # A continuum that has never had a turn (404 `not_found`, the library's
    # `UnknownContinuum`): its id, which the client's error carries as the library's does.
    continuum_id: str | None = None
    # A refusal that says when to retry (429 `busy`, 503 `overloaded`): the error's own
    # wait in seconds, exact, which the client's error carries as `retry_after` (the
    # Retry-After header beside it is whole seconds, and 1 where the error has none).
    retry_after: float | None = None


class ErrorBody(msgspec.Struct, frozen=True):
    error: ErrorDetail


class Health(msgspec.Struct, frozen=True):
    status: str


class ContinuumSummary(msgspec.Struct, frozen=True):
    """One continuum as a console lists it."""

    id: str
    created_at: Timestamp
    last_activity_at: Timestamp
    turns: int
    message_count: int
    cached_share: float  # of all input tokens, the share read from the prompt cache
    # Input cost so far in base-price input tokens (uncached 1x, 5-minute cache write
    # 1.25x, 1-hour write 2x, cache read 0.1x, or the model's own multipliers: each turn
    # priced on its model, actors/_cost.py); output tokens are counted apart.
    input_cost_tokens: float
    output_tokens: int
    # The same in dollars, output included (None: a model of unknown price was used).
    cost_usd: float | None = None


class Page(msgspec.Struct, Generic[T], frozen=True):
    """Lists come in pages; `next_cursor`, when not null, fetches the next one."""

    next_cursor: str | None


class ContinuumPage(Page[ContinuumSummary], frozen=True):
    continuums: list[ContinuumSummary]


class PricedTurn(TurnRecord, frozen=True):
    """A turn record with what it cost, priced on its model by the daemon (the console
    shows these figures rather than computing its own)."""

    input_cost_tokens: float = 0.0  # input cost in base-price tokens
    input_cost_usd: float | None = None  # None: the model's price is not known
    cost_usd: float | None = None  # input and output
    server_tools_usd: float = 0.0  # web searches and fetches, part of cost_usd

    def spent(self) -> Cost:
        """The daemon's figures as a `Cost`, for a view of them that sums turns (its
        input dollars are not split by kind: nothing shown from here needs the split).
        Read by a client, they are priced on the daemon's model data, which the client's
        machine may not hold (a `[[models]]` row of the daemon's config)."""
        rest = None if self.input_cost_usd is None else 0.0
        return Cost(
            input_tokens=self.input_cost_tokens,
            uncached_usd=self.input_cost_usd,
            write_5m_usd=rest,
            write_1h_usd=rest,
            read_usd=rest,
            output_usd=(
                self.cost_usd - self.input_cost_usd - self.server_tools_usd
                if self.cost_usd is not None and self.input_cost_usd is not None
                else None
            ),
            server_tools_usd=self.server_tools_usd,
        )


class TurnPage(Page[PricedTurn], frozen=True):
    turns: list[PricedTurn]


def priced(record: TurnRecord, spent: Cost) -> PricedTurn:
    fields = {f: getattr(record, f) for f in record.__struct_fields__}
    return PricedTurn(
        **fields,
        input_cost_tokens=spent.input_tokens,
        input_cost_usd=spent.input_usd,
        cost_usd=spent.total_usd,
        server_tools_usd=spent.server_tools_usd,
    )


class MessagePage(Page[Message], frozen=True):
    messages: list[Message]


class ReminderPage(Page[Reminder], frozen=True):
    reminders: list[Reminder]


class MemoryPage(Page[Memory], frozen=True):
    memories: list[Memory]


class MemoryHitPage(Page[MemoryHit], frozen=True):
    memories: list[MemoryHit]


class DocumentPage(Page[Document], frozen=True):
    documents: list[Document]


class JobPage(Page[Job], frozen=True):
    """The background jobs of a user (or of one continuum), oldest first."""

    jobs: list[Job]


def summarize(
    continuum: Continuum, turns: int, spent: Cost, cached_share: float, output: int
) -> ContinuumSummary:
    return ContinuumSummary(
        id=continuum.id,
        created_at=continuum.created_at,
        last_activity_at=continuum.last_turn_at or continuum.created_at,
        turns=turns,
        message_count=continuum.message_count,
        cached_share=cached_share,
        input_cost_tokens=spent.input_tokens,
        output_tokens=output,
        cost_usd=spent.total_usd,
    )


# -- bodies and cursors ---------------------------------------------------------------


def decode_body(body: bytes, type_: type[T]) -> T:
    if not body:
        raise BadBody("the request needs a JSON body")
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        raise BadBody(f"invalid request body: {quoting_excerpts(str(exc))}") from None
    except msgspec.DecodeError as exc:
        if _LONE_SURROGATE.search(_SURROGATE_PAIR.sub(b"", body)):
            # msgspec says "truncated" of it, which sends a client looking elsewhere.
            raise BadBody(
                "malformed JSON: a \\uD800-\\uDFFF escape without its pair (a lone "
                "surrogate is not Unicode)"
            ) from None
        raise BadBody(f"malformed JSON: {exc}") from None
    except RecursionError:  # arrays in arrays, a thousand deep, where the type says Any
        raise BadBody("malformed JSON: nested too deep") from None


# A JSON escape of a UTF-16 surrogate, and a high one followed by its low one (a pair).
_LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE_PAIR = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")

# A quoted value in msgspec's message: an enum value, an unknown field's name, a path.
_QUOTED = re.compile(r"'[^']*'|`[^`]*`")


def quoting_excerpts(message: str, limit: int = 120) -> str:
    """msgspec's message with every value it quotes cut to an excerpt: it quotes the
    rejected input whole (a megabyte-long enum value or field name, echoed back). A
    value with quotes of its own defeats the pairing: the whole is capped (at `limit`)
    as well. A value that is an excerpt already (a check's own message) is kept as it
    is, with its count of what was left out."""
    short = _QUOTED.sub(lambda m: m[0][0] + excerpt(m[0][1:-1], 80) + m[0][0], message)
    return excerpt(short, limit)


# What a cursor may hold, checked as it is decoded: a cursor is the sort key of the last
# item a page held, and a forged one must be refused here (400, naming the cursor), not
# reach the store. An id or seq (`CursorId`) is a SQLite integer (signed 64-bit) and
# never negative; a time (`CursorTime`, with the id of its row) is an RFC 3339 instant
# with its offset, beside a row's id as either store holds one (no NUL: PostgreSQL's
# text refuses it, and the read failed as if the store were down); a document's label
# (`CursorLabel`) is one as labels are written. The cursor's own length bounds the
# strings.
CursorId = Annotated[int, msgspec.Meta(ge=0, le=MAX_ROW_ID)]
CursorLabel = Annotated[str, msgspec.Meta(pattern=f"^{LABEL_PATTERN}$")]
_CursorRowId = Annotated[str, msgspec.Meta(pattern="^[^\\x00]*$")]


class CursorTime(msgspec.Struct, frozen=True, array_like=True):
    """A time cursor, `[instant, id]`: where a page ordered by time resumes."""

    at: Timestamp
    id: _CursorRowId

    def key(self) -> tuple[datetime, str]:
        return self.at, self.id


# What encode_cursor makes of the longest key (a 64-character id beside a time), with
# room to spare.
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,512}")


def encode_cursor(key: Any) -> str:
    """An opaque cursor: the sort key of the last item a page held, as unpadded
    URL-safe base64 of its JSON."""
    return base64.urlsafe_b64encode(msgspec.json.encode(key)).decode().rstrip("=")


def decode_cursor(cursor: str, type_: type[K]) -> K:
    """The key `cursor` holds, of `type_` (one of the Cursor* types above, whose ranges
    are checked), or `BadBody`. Only what `encode_cursor` makes is read: its alphabet
    (base64 decoding would skip any other character), its length."""
    refused = BadBody(f"invalid cursor {excerpt(cursor)!r}: pass a next_cursor as given")
    if not _CURSOR.fullmatch(cursor):
        raise refused
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return msgspec.json.decode(raw, type=type_)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise refused from None


# -- records both ways ----------------------------------------------------------------


def _block_out(block: Any) -> Any:
    if isinstance(block, dict) and block.get("type") == "raw" and "json" in block:
        return msgspec.json.decode(block["json"])
    if isinstance(block, dict) and block.get("type") == "tool_result":
        block = dict(block)
        kept = block.pop("content_json", "")
        if kept:
            block["content"] = msgspec.json.decode(kept)
    return _out(block)


def _out(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_out(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "role" in value and isinstance(value.get("content"), list | tuple):
        value = {**value, "content": [_block_out(b) for b in value["content"]]}
    shown: dict[str, Any] = {}
    for key, item in value.items():
        if key == "input_json" and isinstance(item, str):
            shown["input"] = msgspec.json.decode(item)
        elif key == "content" and "role" in value:
            shown[key] = item  # the blocks, shown above
        else:
            shown[key] = _out(item)
    return shown


def to_wire(value: Any) -> Any:
    """A record, event or page as the JSON-ready value the daemon sends."""
    return _out(msgspec.to_builtins(value))


_KNOWN_BLOCKS = ("text", "tool_use", "tool_result")


def _block_in(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind not in _KNOWN_BLOCKS:
        return {"type": "raw", "kind": str(kind), "json": msgspec.json.encode(block).decode()}
    if kind == "tool_result" and isinstance(block.get("content"), list):
        blocks = block["content"]
        text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        block = {**block, "content": text, "content_json": msgspec.json.encode(blocks).decode()}
    return _in(block)


def _in(value: Any) -> Any:
    if isinstance(value, list):
        return [_in(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "role" in value and isinstance(value.get("content"), list):
        value = {**value, "content": [_block_in(b) for b in value["content"]]}
    read: dict[str, Any] = {}
    for key, item in value.items():
        if key == "input" and "name" in value and "input_json" not in value:
            # The same JSON value; its bytes are msgspec's, not necessarily the model's.
            read["input_json"] = msgspec.json.encode(item).decode()
        elif key == "content" and "role" in value:
            read[key] = item  # the blocks, read above
        else:
            read[key] = _in(item)
    return read


def from_wire(data: bytes | str, type_: type[T]) -> T:
    """What `to_wire` sent, back as the library's own type."""
    try:
        return msgspec.convert(_in(msgspec.json.decode(data)), type_)
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as exc:
        name = getattr(type_, "__name__", "event")
        raise ClientError(f"the daemon sent an unreadable {name}: {exc}") from None
