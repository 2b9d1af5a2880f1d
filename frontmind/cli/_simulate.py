"""`frontmind simulate SCRIPT`: what a conversation costs under each layout and TTL policy.

Every run replays the script through the real turn path (a `Frontmind` with its actors,
storage in a scratch directory, the `anthropic` SDK) against the local Messages API and
its cache simulator, on a simulated clock that both share, so cache entries expire over
the script's pauses exactly as they would. Nothing calls Anthropic.

SCRIPT is JSON Lines, one turn a line: `{"at": "<ISO 8601 with offset>", "message": "…"}`,
or an exported continuum: one JSON object with the `messages` of
`GET /v1/continuums/{id}/messages` and, for the turns' start times, the `turns` of
`GET /v1/continuums/{id}/turns` (without them, each turn's messages' `created_at`).
An exported turn is replayed with what its user message held: its text, or its blocks
when it holds an image or a document (a turn of an image alone is a turn too).

Layouts: where the per-turn context (the notification center) goes.
- notification: the seed's frame, before the current user message (the default);
- system_message: one role-system message after it (models that take one);
- user_message: a block at the start of the current user message, not stored;
- system_prompt: everything in the system prompt (the legacy placement);
- none: no per-turn context at all, the floor for any layout.
TTL policies: 5m (system 1h, history 5m: the fixed default), 1h (both 1h), adaptive
(actors/_ttl.py), adaptive+warm (adaptive with the cache warm-up, `cache.warm`: the
warm-ups fire on the simulated clock between turns and their input is counted in the
row), and oracle (no warm-ups), which knows the next pause and takes the cheapest choice for
it: the floor for any policy.

The model is the local API's default responder, made to give the same replies whatever
the layout (it sees only the user's own words), so the runs differ in layout alone.
"""

from __future__ import annotations

import bisect
import json
import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Final, Literal, get_args

import msgspec

from actors import (
    BUILTIN_SECTIONS,
    PLACEMENT_NOTIFICATION,
    TTL_CHOICES,
    TTL_SECONDS,
    AdaptivePolicy,
    AnthropicModel,
    CacheView,
    Channel,
    FixedPolicy,
    ModelCatalog,
    ModelRow,
    TtlPolicy,
    history_entry_after,
    input_cost,
    oracle_plan,
    user_content,
)
from storage import StorageError, TtlChoice, TurnRecord, TurnUsage

from .._exceptions import EdgeError
from .._frontmind import Frontmind
from .._models import load_catalog, local_api_rows, shipped_catalog
from ..config import Config
from ..localapi import (
    DefaultResponder,
    LocalMessagesAPI,
    MessagesRequest,
    Reply,
    ReplyText,
    Responder,
    TextBlock,
    ToolResultBlock,
)
from ._demo import SimulatedClock

__all__ = [
    "LAYOUTS",
    "POLICIES",
    "WARM",
    "OraclePolicy",
    "Row",
    "ScriptTurn",
    "TurnCost",
    "chart_backend",
    "load_script",
    "parse_script",
    "run_simulation",
    "simulate_run",
]

LAYOUTS: Final = ("notification", "system_message", "user_message", "system_prompt", "none")
POLICIES: Final = ("5m", "1h", "adaptive", "adaptive+warm", "oracle")
WARM: Final = "adaptive+warm"  # the adaptive policy with the cache warm-up (cache.warm)
CONTINUUM: Final = "simulated"
# Miss reasons that mean the layout changed the prefix itself: not avoidable by a TTL.
_LAYOUT_CHURN = frozenset({"system_changed", "tools_changed", "model_changed", "messages_changed"})


class ScriptTurn(msgspec.Struct, frozen=True):
    at: float  # POSIX seconds
    message: str | list[dict[str, Any]]  # text, or the content blocks the turn was given


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    at: datetime
    message: str


@dataclass
class TurnCost:
    """One turn of a run: its input by kind (its model calls together), and its cost."""

    turn: int  # from 1
    at: float  # POSIX seconds
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    uncached: int
    output_tokens: int
    input_cost: float
    ttl: TtlChoice | None  # the TTLs its breakpoints were written with, and why
    cache_miss_reason: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "at": datetime.fromtimestamp(self.at, UTC).isoformat(),
            "cache_read": self.cache_read,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "uncached": self.uncached,
            "output_tokens": self.output_tokens,
            "input_cost": round(self.input_cost, 2),
            "ttl": None if self.ttl is None else [self.ttl.system, self.ttl.history],
            "ttl_reason": None if self.ttl is None else self.ttl.reason,
            "cache_miss_reason": self.cache_miss_reason,
        }


@dataclass
class Row:
    """The totals of one run: a layout under a TTL policy."""

    layout: str
    ttl: str
    input_cost: float
    cache_read: int
    cache_write: int
    uncached: int
    avoidable_misses: int
    # The writes by TTL: a 1h write costs 2x, a 5m one 1.25x, so two rows that read,
    # write and leave uncached the same tokens can still cost differently.
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    # The cache warm-ups sent between turns (adaptive+warm): their input is counted in
    # the totals above; their number and output tokens are reported here.
    warm_ups: int = 0
    warm_cost: float = 0.0  # their input cost, part of input_cost
    warm_output_tokens: int = 0
    # Server-side compactions (the local API's `context_management`): their summary
    # steps (outside the responses' top-level usage, so outside the totals above).
    compactions: int = 0
    compaction_cost: float = 0.0
    compaction_output_tokens: int = 0
    # The background summaries of closed segments (their own model calls, kept with
    # their jobs, outside the turns' usage and the totals above).
    summaries: int = 0
    summary_cost: float = 0.0
    summary_output_tokens: int = 0
    output_tokens: int = 0  # the turns' and the warm-ups' output tokens
    per_turn_cost: list[float] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)  # each avoidable miss, explained
    turns: list[TurnCost] = field(default_factory=list)

    def as_json(self, *, turns: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {
            "layout": self.layout,
            "ttl": self.ttl,
            "input_cost": round(self.input_cost, 2),
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "uncached": self.uncached,
            "avoidable_misses": self.avoidable_misses,
            "warm_ups": self.warm_ups,
            "warm_cost": round(self.warm_cost, 2),
            "warm_output_tokens": self.warm_output_tokens,
            "compactions": self.compactions,
            "compaction_cost": round(self.compaction_cost, 2),
            "compaction_output_tokens": self.compaction_output_tokens,
            "summaries": self.summaries,
            "summary_cost": round(self.summary_cost, 2),
            "summary_output_tokens": self.summary_output_tokens,
            "output_tokens": self.output_tokens,
        }
        if turns:
            # The warm-ups between turns are in the totals, not in any turn's row.
            body["turns"] = [t.as_json() for t in self.turns]
        return body


# -- the script -----------------------------------------------------------------------------


def _instant(value: object, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is not None:
                return parsed.timestamp()
    raise EdgeError(f"{where}: {value!r} is not an ISO 8601 time with an offset")


def _exported(data: Mapping[str, Any]) -> list[ScriptTurn]:
    """The user's turns of an exported continuum, with their start times."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise EdgeError("the exported continuum has no 'messages' list")
    starts: dict[str, float] = {}
    turns = data.get("turns", [])
    for i, record in enumerate(turns if isinstance(turns, list) else []):
        if isinstance(record, dict) and "turn_id" in record and "started_at" in record:
            starts[str(record["turn_id"])] = _instant(record["started_at"], f"turns[{i}]")
    script: list[ScriptTurn] = []
    seen: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        turn_id = str(message.get("turn_id", i))
        if turn_id in seen:
            continue  # tool results: part of a turn already taken
        replayed = _replayed(message.get("content", []))
        if replayed is None:
            continue  # tool results: part of a turn (an export without turn ids)
        if not replayed:
            raise EdgeError(f"messages[{i}]: a user turn with no text, image or document to replay")
        seen.add(turn_id)
        at = starts.get(turn_id)
        if at is None:
            at = _instant(message.get("created_at"), f"messages[{i}].created_at")
        script.append(ScriptTurn(at, replayed))
    return script


_TURN_BLOCKS = frozenset({"text", "image", "document"})  # what a turn may be given


def _replayed(content: object) -> str | list[dict[str, Any]] | None:
    """What a user message gives its turn: its text, or its blocks when it holds an
    image or a document (so a turn of an image alone is replayed, and costs what it
    did); None for tool results."""
    if isinstance(content, str):
        return content if content.strip() else ""
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if any(b.get("type") == "tool_result" for b in blocks):
        return None
    kept = [
        {k: v for k, v in b.items() if k != "cache_control"}
        for b in blocks
        if b.get("type") in _TURN_BLOCKS
    ]
    if all(b["type"] == "text" for b in kept):
        text = "\n".join(str(b.get("text", "")) for b in kept)
        return text if text.strip() else ""
    return kept


def parse_script(text: str) -> list[ScriptTurn]:
    """A JSON Lines script, or an exported continuum; refused with the line at fault."""
    stripped = text.strip()
    script: list[ScriptTurn] = []
    exported = False
    if stripped.startswith("{"):
        # One object, on one line (`json.dumps`, `jq -c`) or many; else JSON Lines.
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None  # not one object: JSON Lines
        if isinstance(data, dict) and "messages" in data:
            script, exported = _exported(data), True
    if not exported:
        decoder = msgspec.json.Decoder(_Line)
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = decoder.decode(line)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise EdgeError(
                    f"line {number}: {exc} (expected {{'at': ISO 8601, 'message': text}})"
                ) from None
            if item.at.tzinfo is None:
                raise EdgeError(f"line {number}: 'at' needs a UTC offset ({item.at.isoformat()})")
            script.append(ScriptTurn(item.at.timestamp(), item.message))
    if not script:
        raise EdgeError("the script has no turns")
    for number, (before, after) in enumerate(pairwise(script), start=2):
        if after.at < before.at:
            raise EdgeError(f"turn {number}: its time is before the previous turn's")
    for number, turn in enumerate(script, start=1):
        try:
            user_content(turn.message)  # as the turn will check it
        except StorageError as exc:
            raise EdgeError(f"turn {number}: {exc}") from None
    return script


def load_script(path: Path) -> list[ScriptTurn]:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise EdgeError(f"cannot read {path}: {exc.strerror}") from None
    return parse_script(text)


# -- policies and the model -------------------------------------------------------------------


class OraclePolicy:
    """Knows when every later turn comes, and takes the choice that is cheapest over
    all of them (`actors._ttl.oracle_plan`)."""

    def __init__(self, times: Sequence[float]) -> None:
        self._times = sorted(times)

    def choose(self, view: CacheView) -> TtlChoice:
        later = self._times[bisect.bisect_right(self._times, view.now) :]
        if view.ahead and later:
            # The entry written now is the next turn's (its own mark there writes
            # nothing): chosen as that turn would choose it, knowing the pause after it,
            # and never shorter than the pause until it.
            first, later = later[0] - view.now, later[1:]
            view = msgspec.structs.replace(view, now=view.now + first, since_last=0.0)
            choice = self._best(view, later)
            if choice.history == "5m" and first > TTL_SECONDS["5m"]:
                return TtlChoice(
                    "1h", "1h", f"{choice.reason}; the next turn is {first / 60:.1f} min away"
                )
            return choice
        return self._best(view, later)

    def _best(self, view: CacheView, later: Sequence[float]) -> TtlChoice:
        costs = oracle_plan(view, later)
        best = min(TTL_CHOICES, key=lambda c: (costs[c], TTL_CHOICES.index(c)))
        why = f"{(later[0] - view.now) / 60:.1f} min" if later else "no next turn"
        return TtlChoice(best[0], best[1], f"oracle: the next pause is {why}")


def _policy(name: str, times: Sequence[float]) -> TtlPolicy:
    if name == "5m":
        return FixedPolicy("1h", "5m")
    if name == "1h":
        return FixedPolicy("1h", "1h")
    if name in ("adaptive", WARM):
        return AdaptivePolicy("1h", "5m")
    return OraclePolicy(times)


class SameReplies:
    """The local API's default responder, made independent of the layout: it sees only
    the user's own words (the last text block of the current message) and does not say
    which sections it saw, so every layout stores the same history."""

    def __init__(self) -> None:
        self._inner = DefaultResponder()

    def respond(self, request: MessagesRequest) -> Reply:
        last = request.messages[-1]
        content: Any = last.content
        if isinstance(content, list) and not any(isinstance(b, ToolResultBlock) for b in content):
            texts = [b for b in content if isinstance(b, TextBlock)]
            media = [i for i, b in enumerate(content) if not isinstance(b, TextBlock)]
            # A message with an image or a document: its blocks from the first of them on
            # (the user_message layout's context block comes before them all).
            content = content[media[0] :] if media else texts[-1:] or content
        messages = [*request.messages[:-1], msgspec.structs.replace(last, content=content)]
        reply = self._inner.respond(msgspec.structs.replace(request, messages=messages))
        blocks = tuple(
            ReplyText(b.text.split(" I can see:")[0]) if isinstance(b, ReplyText) else b
            for b in reply.blocks
        )
        return Reply(blocks, reply.stop_reason)


# -- one run ----------------------------------------------------------------------------------


def layout_available(
    layout: str, model: str | None = None, catalog: ModelCatalog | None = None
) -> bool:
    """Whether this build has the layout's channel, and the model takes it: role-system
    messages only some models accept (actors/_models.py), as `catalog` says (the model
    data with the config's `[[models]]` rows; None: the shipped data)."""
    if layout in ("system_message", "user_message") and layout not in get_args(Channel):
        return False
    if layout == "system_message":
        row = (catalog or shipped_catalog()).lookup(model or Config().model.name)
        return row is not None and row.system_messages
    return layout in LAYOUTS


def layout_config(base: Config, layout: str, frame: str) -> Config:
    # The deadline bounds a turn's latency, not its cost: a replay waits for every
    # section, so a loaded machine gives the same sections and the same numbers.
    composer = msgspec.structs.replace(
        base.composer, frame=frame, deadline_ms=max(base.composer.deadline_ms, 10_000.0)
    )
    config = base
    if layout == "system_prompt":
        composer = msgspec.structs.replace(composer, legacy_placement=True)
    elif layout in ("system_message", "user_message"):
        composer = msgspec.structs.replace(composer, channel=layout)
    elif layout == "none":
        dynamic = [s.name for s in BUILTIN_SECTIONS if s.placement == PLACEMENT_NOTIFICATION]
        disabled = tuple(sorted({*base.disabled_sections, *dynamic}))
        config = msgspec.structs.replace(config, disabled_sections=disabled)
    return msgspec.structs.replace(config, composer=composer)


def avoidable_misses(records: Sequence[TurnRecord]) -> list[str]:
    """The turns whose first call read less than the previous turn's first call had
    cached (read + written), with neither the pause past the TTL of that turn's history
    entry nor the layout's own change of the prefix (the API's miss reason) to explain
    it. The entry's TTL is the one it was written with (`history_entry_after`): a 1h
    mark on a prefix already cached at 5m (by a background request riding the cache)
    writes nothing, and the entry stays 5m."""
    found = []
    entries: list[Literal["5m", "1h"] | None] = []
    entry: Literal["5m", "1h"] | None = None
    for record in records:
        entry = history_entry_after(entry, record) if record.status == "completed" else entry
        entries.append(entry)
    for n in range(2, len(records)):
        before, record = records[n - 1], records[n]
        if not before.call_usage or not record.call_usage:
            continue
        first, previous = record.call_usage[0], before.call_usage[0]
        cached = previous.cache_read_input_tokens + previous.cache_creation_input_tokens
        if first.cache_read_input_tokens >= cached:
            continue
        pause = (record.started_at - before.started_at).total_seconds()
        ttl = entries[n - 1] or (before.cache_ttl.history if before.cache_ttl else "5m")
        if pause > TTL_SECONDS[ttl] or record.cache_miss_reason in _LAYOUT_CHURN:
            continue
        mark = before.cache_ttl.history if before.cache_ttl else ttl
        found.append(
            f"turn {n + 1}: read {first.cache_read_input_tokens:,} of {cached:,} "
            f"after {pause / 60:.1f} min (history entry {ttl}, marked {mark})"
        )
    return found


async def simulate_run(
    script: Sequence[ScriptTurn],
    *,
    layout: str,
    policy: str,
    config: Config | None = None,
    frame: str = "seed",
    documents: Mapping[str, str] | None = None,
    data_dir: Path | None = None,
    tools: Sequence[Callable[..., Any]] = (),
    responder: Responder | None = None,
    server_edits: Mapping[str, Any] | None = None,
) -> tuple[Row, list[TurnRecord]]:
    """One replay of the script: its totals and its turn records. `tools`: functions the
    model may call; `responder`: the simulated model (default: `SameReplies`);
    `server_edits`: a `context_management` the local API applies to every request, as a
    client sending it with the beta client would (context editing, compaction)."""
    # The system_prompt layout churns the system prompt on purpose: its guard warnings
    # are expected, not news.
    logging.getLogger("frontmind.cache_guard").setLevel(logging.ERROR)
    config = layout_config(config or Config(), layout, frame)
    # Only the adaptive+warm row warms (the oracle knows the next pause: it needs none).
    cache = msgspec.structs.replace(config.cache, warm=policy == WARM)
    config = msgspec.structs.replace(config, cache=cache)
    times = [turn.at for turn in script]
    clock = SimulatedClock(times[0])
    with tempfile.TemporaryDirectory(prefix="frontmind-simulate-") as scratch:
        root = data_dir or Path(scratch)
        edits = None if server_edits is None else dict(server_edits)
        async with LocalMessagesAPI(
            clock=clock,
            responder=responder or SameReplies(),
            context_management=edits,
            # the config's [[models]] rows too, as Frontmind offline serves them
            models=local_api_rows(load_catalog(config.models), config.models),
        ) as api:
            model = AnthropicModel(
                api_key="offline-simulate", base_url=api.base_url, max_retries=2, timeout=30
            )
            try:
                async with Frontmind.open(
                    root,
                    config,
                    model=model,
                    clock=clock,
                    ttl_policy=_policy(policy, times),
                    timers=clock,
                    tools=tools,
                ) as fm:
                    for label, content in (documents or {}).items():
                        await fm.put_document(label, content)
                    for turn in script:
                        # Due timers (the cache warm-up) fire on the way, at their times.
                        await clock.run_until(turn.at)
                        async for _ in fm.turn(CONTINUUM, turn.message):
                            pass
                        # The background work the turn left (a closed segment's summary)
                        # runs now, as the worker runs it once the turn is over: not
                        # whenever the event loop happens to get to it, which would move
                        # it across the next turn and change what that turn finds.
                        await fm.run_background()
                    records = await fm.turns(CONTINUUM, limit=len(script) + 1)
                    warm_ups, warm_usage = fm.warm_ups()
                    priced = fm.models.lookup(config.model.name)  # its prices and multipliers
                    jobs = [j.usage.usage for j in await fm.jobs(CONTINUUM, limit=-1) if j.usage]
                compactions = list(api.state.compactions)
            finally:
                await model.aclose()
    compacted = sum((_iteration_usage(c) for c in compactions), TurnUsage())
    summarised = sum(jobs, TurnUsage())
    usage = sum((r.usage for r in records), warm_usage)
    misses = avoidable_misses(records)
    row = Row(
        layout=layout,
        ttl=policy,
        input_cost=input_cost(usage, priced),
        cache_read=usage.cache_read_input_tokens,
        cache_write=usage.cache_creation_input_tokens,
        uncached=usage.input_tokens,
        avoidable_misses=len(misses),
        cache_write_5m=usage.cache_creation_5m,
        cache_write_1h=usage.cache_creation_1h,
        warm_ups=warm_ups,
        warm_cost=input_cost(warm_usage, priced),
        warm_output_tokens=warm_usage.output_tokens,
        compactions=len(compactions),
        compaction_cost=input_cost(compacted, priced),
        compaction_output_tokens=compacted.output_tokens,
        summaries=len(jobs),
        summary_cost=input_cost(summarised, priced),
        summary_output_tokens=summarised.output_tokens,
        output_tokens=usage.output_tokens,
        per_turn_cost=[input_cost(r.usage, priced) for r in records],
        misses=misses,
        turns=[_turn_cost(n, r, priced) for n, r in enumerate(records, start=1)],
    )
    failed = [r for r in records if r.status != "completed"]
    if failed:
        raise EdgeError(f"{layout}/{policy}: turn {failed[0].turn_id} failed: {failed[0].error}")
    return row, records


def _iteration_usage(entry: Mapping[str, Any]) -> TurnUsage:
    """A `usage.iterations` entry (a compaction's summary step) as a turn's usage."""
    creation = entry.get("cache_creation") or {}
    return TurnUsage(
        input_tokens=int(entry.get("input_tokens", 0)),
        cache_creation_input_tokens=int(entry.get("cache_creation_input_tokens", 0)),
        cache_read_input_tokens=int(entry.get("cache_read_input_tokens", 0)),
        output_tokens=int(entry.get("output_tokens", 0)),
        cache_creation_5m=int(creation.get("ephemeral_5m_input_tokens", 0)),
        cache_creation_1h=int(creation.get("ephemeral_1h_input_tokens", 0)),
    )


def _turn_cost(number: int, record: TurnRecord, priced: ModelRow | None) -> TurnCost:
    u = record.usage
    return TurnCost(
        turn=number,
        at=record.started_at.timestamp(),  # on the simulated clock: the script's time
        cache_read=u.cache_read_input_tokens,
        cache_write_5m=u.cache_creation_5m,
        cache_write_1h=u.cache_creation_1h,
        uncached=u.input_tokens,
        output_tokens=u.output_tokens,
        input_cost=input_cost(u, priced),
        ttl=record.cache_ttl,
        cache_miss_reason=record.cache_miss_reason,
    )


async def run_simulation(
    script: Sequence[ScriptTurn],
    *,
    layouts: Sequence[str] = LAYOUTS,
    policies: Sequence[str] = POLICIES,
    config: Config | None = None,
    frame: str = "seed",
    documents: Mapping[str, str] | None = None,
) -> tuple[list[Row], list[str]]:
    """Every layout under every policy: the rows, and the layouts not available here
    (this build, or the model, has no such channel)."""
    rows: list[Row] = []
    missing: list[str] = []
    for layout in layouts:
        base = config or Config()
        if not layout_available(layout, base.model.name, load_catalog(base.models)):
            missing.append(layout)
            continue
        for policy in policies:
            row, _ = await simulate_run(
                script,
                layout=layout,
                policy=policy,
                config=config,
                frame=frame,
                documents=documents,
            )
            rows.append(row)
    return rows, missing


# -- output -----------------------------------------------------------------------------------


def render_table(
    rows: Sequence[Row],
    missing: Sequence[str],
    turns: int,
    priced: ModelRow | None = None,
    catalog: ModelCatalog | None = None,
) -> str:
    """`priced`: the row of the model the runs used, whose multipliers the costs were
    counted with (None: a model no data knows, counted at the documented ones);
    `catalog`: the model data the runs used (None: the shipped data)."""
    m = priced or ModelRow(name="", context_window=1, max_output=1)  # the documented
    lines = [
        f"{turns} turns; input cost in base-price tokens (uncached 1x, cache write "
        f"{m.cache_write_5m:g}x for 5m and {m.cache_write_1h:g}x for 1h, cache read "
        f"{m.cache_read:g}x)",
        f"{'layout':<15}{'ttl':<14}{'input cost':>12}{'read':>11}{'written 5m':>12}"
        f"{'written 1h':>12}{'uncached':>10}{'avoidable misses':>18}",
    ]
    for row in rows:
        lines.append(
            f"{row.layout:<15}{row.ttl:<14}{row.input_cost:>12,.0f}{row.cache_read:>11,}"
            f"{row.cache_write_5m:>12,}{row.cache_write_1h:>12,}{row.uncached:>10,}"
            f"{row.avoidable_misses:>18}"
        )
        if row.warm_ups:
            lines.append(
                f"    {row.warm_ups} cache warm-ups, counted above: input cost "
                f"{row.warm_cost:,.0f}, {row.warm_output_tokens} output tokens"
            )
        lines.extend(f"    {miss}" for miss in row.misses)
    takers = ", ".join(r.name for r in (catalog or shipped_catalog()).rows() if r.system_messages)
    for layout in missing:
        lines.append(
            f"{layout:<15}not available with this model (role-system messages: "
            f"{takers}; choose one with --model)"
        )
    return "\n".join(lines)


def chart_backend() -> Any:
    """matplotlib's pyplot, ready to draw to a file; checked before a run (`--chart`),
    so a missing matplotlib is said at once, not after the whole replay."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EdgeError(
            "--chart needs matplotlib: pip install matplotlib (or '.[bench]' in the clone)"
        ) from None
    return plt


def check_chart_path(path: Path) -> None:
    """Refuse a `--chart` file that could not be written, before the replay runs."""
    if path.is_dir():
        raise EdgeError(f"--chart {path}: is a directory; name the PNG file to write")
    if not path.parent.is_dir():
        raise EdgeError(f"--chart {path}: no directory {path.parent} to write it in")


def write_chart(rows: Sequence[Row], path: Path) -> list[str]:
    """Input cost per turn, one line per row given (each layout under each TTL policy
    asked for); returns the lines' labels."""
    plt = chart_backend()
    figure, axes = plt.subplots(figsize=(9, 4))
    policies = sorted({r.ttl for r in rows})
    layouts = sorted({r.layout for r in rows})
    labels = []
    for row in rows:
        turns = range(1, len(row.per_turn_cost) + 1)
        label = " · ".join(
            part
            for part, varies in ((row.layout, len(layouts) > 1), (row.ttl, len(policies) > 1))
            if varies
        )
        labels.append(label or row.layout)
        axes.plot(turns, row.per_turn_cost, "-o", markersize=2.5, label=labels[-1])
    axes.set_xlabel("turn")
    axes.set_ylabel("input cost (base-price tokens)")
    axes.set_yscale("log")
    axes.set_title(f"Input cost per turn ({', '.join(layouts)}; TTL policy {', '.join(policies)})")
    axes.legend(loc="upper left", fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:  # the folder went, or is not writable: one line, no traceback
        raise EdgeError(f"--chart {path}: cannot write it ({exc.strerror or exc})") from None
    finally:
        plt.close(figure)
    return labels
