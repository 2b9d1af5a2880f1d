"""Typed settings for the runtime's actors. Every field has a sensible default."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "CacheSettings",
    "ComposerSettings",
    "HistorySettings",
    "MemorySettings",
    "ModelSettings",
    "Settings",
    "ToolSettings",
    "TrinketSettings",
    "TurnSettings",
]

TTL = Literal["5m", "1h"]
TtlPolicyName = Literal["adaptive", "fixed"]
Frame = Literal["seed", "compact"]
Thinking = Literal["off", "enabled", "adaptive"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
Channel = Literal["frame", "system_message", "user_message"]
ThinkingDisplay = Literal["summarized", "omitted"]


class ModelSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    name: str = "claude-sonnet-4-6"
    max_tokens: int = 1024
    thinking: Thinking = "off"  # "enabled" takes budget_tokens; "adaptive" the model decides
    budget_tokens: int = 2048
    effort: Effort | None = None  # output_config.effort; None: the model's default
    # thinking.display: "summarized" (thinking text, summarized) or "omitted" (empty
    # thinking with its signature: faster to first text); None: the model's default.
    thinking_display: ThinkingDisplay | None = None
    max_retries: int = 2  # the SDK's retries for 408/409/429/5xx before the stream starts
    timeout_s: float = 120.0


class CacheSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    system_ttl: TTL = "1h"
    history_ttl: TTL = "5m"
    diagnostics: bool = True  # send diagnostics.previous_message_id
    # "adaptive": each turn's TTLs chosen from the continuum's pauses (actors/_ttl.py);
    # "fixed": system_ttl and history_ttl on every turn.
    policy: TtlPolicyName = "adaptive"
    # The cache warm-up (actors/_ttl.py, `warm_plan`): a continuum idle this long whose
    # history entry is 5m sends one small request that moves its prefix into a 1h entry,
    # when the pauses it has seen say that pays. Before 300 s: a 5m entry must be alive.
    warm: bool = False
    warm_after_seconds: float = 270.0


class ComposerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    deadline_ms: float = 250.0
    # Per-section deadlines in ms, replacing `deadline_ms` for those sections, e.g.
    # `[composer.deadlines] relevant_memories = 100` (a `[[trinket]]` sets its own).
    deadlines: dict[str, float] = {}
    # A system section (base prompt, tool guidance: the cached prefix) that has never
    # answered yet, as on a continuum's first turn in a process, has nothing older to
    # stand in for it: cutting it would send the turn without its instructions and
    # change the cached prefix (a re-write now and another on the next turn). So it is
    # waited for this long instead (a loaded machine's first turn can take longer than
    # `deadline_ms` to render anything); once it has answered, `deadline_ms` applies
    # and a late one is replaced by its last content, marked stale.
    first_system_deadline_ms: float = 5000.0
    notification_budget_tokens: int = 2000
    legacy_placement: bool = False  # every section in the system prompt (for comparison)
    # How the notification center travels: "frame" (a delimiter user message and an
    # assistant message before the current user message), "system_message" (one
    # role-system message after it; only models that accept them) or "user_message" (a
    # block at the start of the current user message, left out of the stored history).
    channel: Channel = "frame"
    guard_window: int = 20
    guard_threshold: float = 0.3
    guard_min_turns: int = 5
    frame: Frame = "seed"  # "compact": a shorter delimiter and header, same meaning


class HistorySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    budget_tokens: int = 80_000
    keep_fraction: float = 0.5  # after a trim, keep at most this share of the budget
    segment_gap_minutes: float = 30.0


class ToolSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    enabled: tuple[str, ...] = (
        "add_reminder",
        "list_reminders",
        "complete_reminder",
        "remember",
        "search_context",
    )
    timeout_s: float = 10.0
    max_iterations: int = 8
    # False: the model asks for one call a reply (`tool_choice.disable_parallel_tool_use`)
    # and the calls of a reply run one at a time, for tools not safe to run side by side.
    parallel: bool = True


class TrinketSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    memories_top_k: int = 5
    search_keep_turns: int = 3
    search_results: int = 5
    manifest_segments: int = 8


class MemorySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[memory]`: recall. `embedder` names a class ("pkg.mod:Embedder", built with no
    arguments) with `async embed(texts) -> vectors`; its similarity joins the ranking
    (actors/_recall.py). None: keyword relevance, importance, recency and use alone."""

    embedder: str | None = None
    embedding_weight: float = 0.5
    # The query's embedding within a turn: later than this, that turn's recall uses
    # keywords alone (inside the composer's own deadline for the section).
    embed_deadline_ms: float = 150.0
    # With an embedder, an extracted memory whose cosine to a stored one reaches this
    # updates it instead of adding a copy (without: word overlap, actors/_digest.py).
    same_memory_cosine: float = 0.9


class TurnSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    max_queued: int = 4  # turns waiting per continuum before new ones are refused as busy
    idle_minutes: float = 30.0  # a continuum unused this long is unloaded (0: never)
    # The most continuums loaded at once (0: no bound). Each holds its history window in
    # memory and grows with it (about its text a turn), so many continuums in use within
    # `idle_minutes` would grow the process without end: past this, a continuum loading
    # unloads the one unused the longest (any not running a turn), which reloads from
    # storage, byte for byte, on its next turn (bench/soak.py).
    max_loaded: int = 1000
    # Turns composing and streaming at once in this process; the rest wait in a fair
    # queue (actors/_admission.py). One event loop serves them all, so the number is
    # what one core keeps up with, not a multiple of the cores: on bench/load (2 cores,
    # 13 ms of CPU per turn) 128 kept every section of 1,000 continuums at once, at
    # some 7% less throughput than starting every turn at once; 64 lost more, 192 and
    # more let the composer's deadline cut sections again (bench/README.md, "admission").
    max_active: int = 128
    # A turn whose expected wait for a slot is longer than this is refused at the door
    # (`Overloaded`: HTTP 503 with Retry-After), before anything is composed or stored.
    max_wait_s: float = 30.0


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    timezone: str = "UTC"
    base_prompt: str | None = None  # None: the built-in prompt (or base_prompt.md in the data dir)
    disabled_sections: tuple[str, ...] = ()  # built-in trinkets to leave out
    model: ModelSettings = ModelSettings()
    cache: CacheSettings = CacheSettings()
    composer: ComposerSettings = ComposerSettings()
    history: HistorySettings = HistorySettings()
    tools: ToolSettings = ToolSettings()
    trinkets: TrinketSettings = TrinketSettings()
    turns: TurnSettings = TurnSettings()
    memory: MemorySettings = MemorySettings()
    # Where the modules `use = "module:attribute"` names are looked for when Python's
    # own path has none of that name (actors/_imports.py); then the working directory.
    # `load_config` makes its entries absolute (relative to the config file) and adds
    # the config file's own directory.
    module_path: tuple[str, ...] = ()
