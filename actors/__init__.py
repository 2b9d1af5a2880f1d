"""Frontmind's domain actors: trinkets, the composer, the orchestrator, the LLM adapter.

Built on the kernel (`runtime`) and the storage port (`storage`).
"""

from ._background import BackgroundWorker, background_name
from ._catalog import (
    CatalogFile,
    MeetModel,
    ModelCatalog,
    ModelFacts,
    ModelPatch,
    ModelRow,
    ModelSource,
    apply_patches,
    decode_catalog,
    row_from_facts,
)
from ._composer import ComposerActor, SectionRecord
from ._content import UserInput, user_content
from ._conversation import WarmUpDone
from ._digest import SUMMARY_MARKER, DigestReply, parse_digest, summary_instruction
from ._engine import Engine, TrinketEntry, builtin_trinkets, validate_settings
from ._events import (
    TextDelta,
    Timings,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStarted,
)
from ._exceptions import (
    Busy,
    FrontmindError,
    InvalidModelSettings,
    ModelError,
    ModelOverloaded,
    ModelRefused,
    ModelRejected,
    ModelStreamError,
    ModelUnavailable,
    SectionConfigError,
    SettingsError,
    ToolDefinitionError,
    TrinketLoadError,
)
from ._imports import import_module_near
from ._layout import LOOKBACK_BLOCKS, MAX_BREAKPOINTS, ModelRequest, block_kind, build_request
from ._llm import AnthropicModel, ModelClient, ModelEvent, StreamDone, StreamText
from ._markup import escape_field, escape_text, neutralize_frame
from ._messages import Compose, Composed, SystemSection, Turn, TurnStart
from ._models import ModelChoice, check_model_choice, known_row
from ._notification import (
    COMPACT_DELIMITER,
    DELIMITER,
    SHORTENED_MARKER,
    render_notification_center,
)
from ._observe import current_turn
from ._placement import (
    BUILTIN_SECTIONS,
    PLACEMENT_NOTIFICATION,
    PLACEMENT_SYSTEM,
    PlacementRegistry,
    SectionSpec,
)
from ._prompt import DEFAULT_BASE_PROMPT
from ._recall import Embedder
from ._settings import (
    CacheSettings,
    ComposerSettings,
    HistorySettings,
    MemorySettings,
    ModelSettings,
    Settings,
    ToolSettings,
    TrinketSettings,
    TurnSettings,
)
from ._timers import TaskTimers, Timers
from ._tokens import BLOCK_FRAMING_TOKENS, estimate_tokens
from ._tool_spec import Tool, ToolDefinition, ToolOutcome, as_tool, input_schema, tool
from ._tools import TOOL_NAMES, check_user_tools
from ._trinket import Directory, Trinket, TrinketActor
from ._ttl import (
    AdaptivePolicy,
    CacheView,
    FixedPolicy,
    TtlPolicy,
    oracle_plan,
    plan,
    policy_for,
    warm_plan,
)

__all__ = [
    "BLOCK_FRAMING_TOKENS",
    "BUILTIN_SECTIONS",
    "COMPACT_DELIMITER",
    "DEFAULT_BASE_PROMPT",
    "DELIMITER",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "PLACEMENT_NOTIFICATION",
    "PLACEMENT_SYSTEM",
    "SHORTENED_MARKER",
    "SUMMARY_MARKER",
    "TOOL_NAMES",
    "AdaptivePolicy",
    "AnthropicModel",
    "BackgroundWorker",
    "Busy",
    "CacheSettings",
    "CacheView",
    "CatalogFile",
    "Compose",
    "Composed",
    "ComposerActor",
    "ComposerSettings",
    "DigestReply",
    "Directory",
    "Embedder",
    "Engine",
    "FixedPolicy",
    "FrontmindError",
    "HistorySettings",
    "InvalidModelSettings",
    "MeetModel",
    "MemorySettings",
    "ModelCatalog",
    "ModelChoice",
    "ModelClient",
    "ModelError",
    "ModelEvent",
    "ModelFacts",
    "ModelOverloaded",
    "ModelPatch",
    "ModelRefused",
    "ModelRejected",
    "ModelRequest",
    "ModelRow",
    "ModelSettings",
    "ModelSource",
    "ModelStreamError",
    "ModelUnavailable",
    "PlacementRegistry",
    "SectionConfigError",
    "SectionRecord",
    "SectionSpec",
    "Settings",
    "SettingsError",
    "StreamDone",
    "StreamText",
    "SystemSection",
    "TaskTimers",
    "TextDelta",
    "Timers",
    "Timings",
    "Tool",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolFinished",
    "ToolOutcome",
    "ToolSettings",
    "ToolStarted",
    "Trinket",
    "TrinketActor",
    "TrinketEntry",
    "TrinketLoadError",
    "TrinketSettings",
    "TtlPolicy",
    "Turn",
    "TurnCompleted",
    "TurnError",
    "TurnEvent",
    "TurnSettings",
    "TurnStart",
    "TurnStarted",
    "UserInput",
    "WarmUpDone",
    "apply_patches",
    "as_tool",
    "background_name",
    "block_kind",
    "build_request",
    "builtin_trinkets",
    "check_model_choice",
    "check_user_tools",
    "current_turn",
    "decode_catalog",
    "escape_field",
    "escape_text",
    "estimate_tokens",
    "import_module_near",
    "input_schema",
    "known_row",
    "neutralize_frame",
    "oracle_plan",
    "parse_digest",
    "plan",
    "policy_for",
    "render_notification_center",
    "row_from_facts",
    "summary_instruction",
    "tool",
    "user_content",
    "validate_settings",
    "warm_plan",
]
