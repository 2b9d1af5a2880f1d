"""What is stored: conversation content blocks and the records around them.

Content blocks are encoded once, when a turn is committed, and replayed as the same
bytes forever after: a tool input is kept as the exact JSON text the model produced
(`input_json`), so key order, whitespace and float formatting can never drift between
turns. A history that
re-renders differently would break the prompt cache for every later turn.

Times: every `*_at` field of every record is an aware UTC `datetime`, at the
microsecond, in the library and in `frontmind.Client` alike (the wire carries RFC 3339).
The databases keep epoch floats, turned to and from `datetime`s by the helpers of `_time`
where rows are read and written. A time given
*to* Frontmind (`due_at`, `expires_at`) is an aware `datetime` too: an offset is
required, so no local time is ever misread, and it is checked where it enters
(`to_epoch`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ._effects import Effect
from ._time import EPOCH, Instant
from ._validation import (
    MAX_ROW_ID,
    MIN_THINKING_BUDGET,
    MODEL_NAME_PATTERN,
    check_model_settings,
)

__all__ = [
    "INTERRUPTED_TURN",
    "ContentBlock",
    "ContextSearch",
    "Continuum",
    "ContinuumModel",
    "Document",
    "Job",
    "JobState",
    "JobUsage",
    "Memory",
    "MemoryHit",
    "MemoryProposal",
    "Message",
    "MessageHit",
    "Passage",
    "RawBlock",
    "Reminder",
    "SearchState",
    "SectionStatus",
    "Segment",
    "SegmentDigest",
    "SpaceReclaimed",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "TtlChoice",
    "TurnOutcome",
    "TurnRecord",
    "TurnStatus",
    "TurnUsage",
    "TurnWrite",
    "User",
]


# Messages and their blocks are `gc=False`: a turn decodes its whole history window into
# them (thousands at 400 turns), and tracked by the collector they set off young
# collections on every turn. A block holds only strings, a message only its blocks, all
# frozen: no reference cycle can pass through them, which is what makes untracking safe
# (msgspec, "Disabling Garbage Collection":
# https://jcristharif.com/msgspec/structs.html#struct-gc).


class TextBlock(msgspec.Struct, frozen=True, gc=False, tag="text", tag_field="type"):
    text: str


class ToolUseBlock(msgspec.Struct, frozen=True, gc=False, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input_json: str  # the tool input, as exact JSON text


class ToolResultBlock(msgspec.Struct, frozen=True, gc=False, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: str
    is_error: bool = False
    # When the result is a list of blocks (text with images or documents), their exact
    # JSON array; `content` then holds only the text, for search and display.
    content_json: str = ""


class RawBlock(msgspec.Struct, frozen=True, gc=False, tag="raw", tag_field="type"):
    """A block Frontmind carries but does not interpret, as the exact JSON it came as.

    Thinking (with its signature), redacted thinking, images, documents, server tool
    use and server tool results: replayed byte for byte, never re-rendered, because the
    API refuses a thinking block whose text or signature changed, and any drift would
    break the prompt cache of every later turn.
    """

    kind: str  # the block's own "type", e.g. "thinking"
    json: str  # the whole block, exactly as received


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | RawBlock
Role = Literal["user", "assistant"]


class Message(msgspec.Struct, frozen=True, gc=False):
    """One stored message. `seq` orders a continuum's messages from 0."""

    role: Role
    content: tuple[ContentBlock, ...]
    seq: int = -1
    turn_id: str = ""
    created_at: Instant = EPOCH  # set as the turn is stored

    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class TurnUsage(msgspec.Struct, frozen=True):
    """A turn's (or a model call's) tokens as the API reports them: uncached input
    (`input_tokens`), cache writes (split by TTL) and reads, output, and server tool
    requests. `+` adds two."""

    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_5m: int = 0
    cache_creation_1h: int = 0
    # Anthropic's server tools run on the API's side and are billed per request beside
    # the tokens (`usage.server_tool_use`): web searches and web fetches.
    web_search_requests: int = 0
    web_fetch_requests: int = 0

    def __add__(self, other: TurnUsage) -> TurnUsage:
        return TurnUsage(
            *(
                a + b
                for a, b in zip(
                    msgspec.structs.astuple(self), msgspec.structs.astuple(other), strict=True
                )
            )
        )

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


SectionState = Literal["fresh", "stale", "timeout", "failed", "empty"]
# How a turn ended; a turn's record reads `running` from its start until then.
TurnOutcome = Literal["completed", "failed", "cancelled"]
TurnStatus = Literal["running", TurnOutcome]
# The error of a turn whose process ended while it ran (its `running` record, found by
# `Storage.interrupt_stale_turns` or by its continuum's next turn).
INTERRUPTED_TURN = "interrupted: the process ended before the turn finished"


class SectionStatus(msgspec.Struct, frozen=True):
    name: str
    placement: str
    status: SectionState
    elapsed_ms: float
    age_s: float | None = None  # for stale content: how old it is
    tokens: int = 0


class TtlChoice(msgspec.Struct, frozen=True):
    """The cache TTLs a turn's breakpoints carried, and why they were chosen."""

    system: Literal["5m", "1h"]
    history: Literal["5m", "1h"]
    reason: str = ""


class TurnRecord(msgspec.Struct, frozen=True):
    """Everything `stats` and the benchmarks need to know about one turn.

    `status` is `running` from the turn's start (its record is written then, its
    `finished_at` the time it was written) until it ends; a turn whose process ended
    before it finished reads `failed`, with the error "interrupted: …"."""

    turn_id: str
    continuum_id: str
    status: TurnStatus
    started_at: Instant
    finished_at: Instant
    model: str
    user_text: str
    reply_text: str = ""
    usage: TurnUsage = TurnUsage()
    cache_miss_reason: str | None = None
    compose_ms: float = 0.0
    first_token_ms: float | None = None
    total_ms: float = 0.0
    model_calls: int = 0
    call_usage: tuple[TurnUsage, ...] = ()  # per model call; `usage` is their sum
    sections: tuple[SectionStatus, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None
    message_id: str | None = None
    stop_reason: str | None = None  # of the turn's last model call
    cache_ttl: TtlChoice | None = None  # the TTLs of this turn's breakpoints, with the reason


class TurnWrite(msgspec.Struct, frozen=True):
    """One completed turn, committed atomically: its messages and its record."""

    record: TurnRecord
    messages: tuple[Message, ...]
    history_start: int | None = None  # move the continuum's history window, if set
    effects: tuple[Effect, ...] = ()  # what the turn's tools staged, applied with it
    # The continuum's message count the turn was composed on, if known: the commit is
    # refused when the store's differs (another process's turn, or a delete, came
    # between: this turn answered a history that is no longer the continuum's).
    base: int | None = None


ThinkingMode = Literal["off", "enabled", "adaptive"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
# The ranges `check_model_settings` holds the settings to, as their JSON schema says
# them (for the OpenAPI description; the check itself gives the clearer message).
_ModelName = Annotated[
    str, msgspec.Meta(extra_json_schema={"pattern": f"^{MODEL_NAME_PATTERN}$", "maxLength": 256})
]
_MaxTokens = Annotated[int, msgspec.Meta(extra_json_schema={"minimum": 1, "maximum": MAX_ROW_ID})]
_Budget = Annotated[
    int, msgspec.Meta(extra_json_schema={"minimum": MIN_THINKING_BUDGET, "maximum": MAX_ROW_ID})
]


class ContinuumModel(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A continuum's own model settings; None means "the configured default".

    Each value's own range is checked as the settings are made (a request body, a
    library call), so no value the API would refuse is ever stored."""

    model: _ModelName | None = None
    thinking: ThinkingMode | None = None
    budget_tokens: _Budget | None = None  # with thinking = "enabled"
    max_tokens: _MaxTokens | None = None
    effort: Effort | None = None
    thinking_display: Literal["summarized", "omitted"] | None = None

    def __post_init__(self) -> None:
        check_model_settings(self.model, self.max_tokens, self.budget_tokens)


class Continuum(msgspec.Struct, frozen=True):
    """A conversation: its id, when it began and last took a turn, and its message count."""

    id: str
    created_at: Instant
    history_start: int
    message_count: int
    last_turn_at: Instant | None
    last_message_id: str | None


class Segment(msgspec.Struct, frozen=True):
    id: int
    continuum_id: str
    started_at: Instant
    ended_at: Instant
    turn_count: int
    title: str
    first_seq: int
    summary: str = ""  # written by the segment's background summary; "" until then


class Reminder(msgspec.Struct, frozen=True):
    """A reminder: its text, when it is due (or None), and when it was completed (or None)."""

    id: int
    text: str
    due_at: Instant | None
    created_at: Instant
    completed_at: Instant | None
    origin: Literal["user", "agent"]


class Memory(msgspec.Struct, frozen=True):
    """A long-term memory: its text, importance (0 to 1), expiry, source segment and uses."""

    id: int
    text: str
    created_at: Instant
    expires_at: Instant | None
    importance: float
    source_segment: int | None = None  # the segment it was extracted from, if any
    uses: int = 0  # how often it was surfaced in a notification center


class MemoryHit(msgspec.Struct, frozen=True):
    """A memory found by `search_memories`, with its ranking score."""

    memory: Memory
    score: float


class MessageHit(msgspec.Struct, frozen=True):
    continuum_id: str
    seq: int
    role: Role
    text: str
    created_at: Instant
    score: float


class Document(msgspec.Struct, frozen=True):
    """A document of the user's system prompt, by its label."""

    label: str
    content: str
    updated_at: Instant


JobState = Literal["pending", "running", "done", "failed"]


class JobUsage(msgspec.Struct, frozen=True):
    """What a background job's model call cost (kept out of the conversation's turns)."""

    model: str
    usage: TurnUsage
    elapsed_ms: float = 0.0
    message_id: str | None = None


class Job(msgspec.Struct, frozen=True):
    """Durable background work: written with the turn that made it due, claimed by one
    worker at a time, retried with backoff, its failure kept."""

    id: int
    user: str  # whose continuum (and memories) the job works on
    kind: str  # "segment_summary"
    continuum_id: str
    payload: str  # JSON, by kind
    state: JobState
    attempts: int
    next_at: Instant
    claimed_at: Instant | None
    last_error: str | None
    created_at: Instant
    finished_at: Instant | None = None
    usage: JobUsage | None = None


class MemoryProposal(msgspec.Struct, frozen=True):
    """A memory the background pass found; `update_id` names an existing memory that
    says the same thing (it is updated in place, never copied)."""

    text: str
    importance: float = 0.5
    update_id: int | None = None
    # The text's vector by the embedder in use, when the pass has it (written with it).
    vector: tuple[float, ...] | None = None


class SegmentDigest(msgspec.Struct, frozen=True):
    """The outcome of a segment's summary job, stored in one transaction."""

    segment_id: int
    title: str
    summary: str
    memories: tuple[MemoryProposal, ...] = ()


class Passage(msgspec.Struct, frozen=True):
    """One passage a context search found."""

    source: str  # "message" | "memory" | "summary"
    text: str
    created_at: Instant


SearchState = Literal["pending", "running", "done"]


class ContextSearch(msgspec.Struct, frozen=True):
    """A context search the model asked for: requested during a turn, claimed and run by
    one replica's searcher off the turn path, its result kept beside the continuum and
    shown by whichever replica composes its next turns (`turns_left` more turns)."""

    id: int
    user: str
    continuum_id: str
    query: str
    state: SearchState
    requested_at: Instant
    attempts: int = 0
    claimed_at: Instant | None = None
    finished_at: Instant | None = None
    turns_left: int | None = None  # None until it is done
    passages: tuple[Passage, ...] = ()
    error: str | None = None


class User(msgspec.Struct, frozen=True):
    """A user with a token (the built-in `default` user has none and is not listed)."""

    name: str
    created_at: Instant


class UserForgotten(msgspec.Struct, frozen=True):
    """What deleting a user removed: the number of rows of each table (by table name;
    search-index tables included), every one of them in one transaction."""

    name: str
    rows: dict[str, int]


class SpaceReclaimed(msgspec.Struct, frozen=True):
    """What reclaiming a store's free space did: the bytes given back to the file system,
    and the free bytes it could not give back (a SQLite store made before incremental
    auto-vacuum: the README's "Reclaiming space" says how to switch it)."""

    freed_bytes: int
    stuck_bytes: int
