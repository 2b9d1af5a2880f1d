"""Frontmind's domain actors: trinkets, the composer, the orchestrator, the LLM adapter.

Built on the kernel (`runtime`) and the storage port (`storage`).
"""

from ._composer import ComposerActor, SectionRecord
from ._content import UserInput, user_content
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
from ._layout import LOOKBACK_BLOCKS, MAX_BREAKPOINTS, ModelRequest, block_kind, build_request
from ._llm import AnthropicModel, ModelClient, ModelEvent, StreamDone, StreamText
from ._markup import escape_field, escape_text, neutralize_frame
from ._messages import Compose, Composed, SystemSection, Turn, TurnStart
from ._models import MODELS, ModelChoice, ModelInfo, model_info
from ._notification import DELIMITER, SHORTENED_MARKER, render_notification_center
from ._observe import current_turn
from ._placement import (
    BUILTIN_SECTIONS,
    PLACEMENT_NOTIFICATION,
    PLACEMENT_SYSTEM,
    PlacementRegistry,
    SectionSpec,
)
from ._prompt import DEFAULT_BASE_PROMPT
from ._settings import (
    CacheSettings,
    ComposerSettings,
    HistorySettings,
    ModelSettings,
    Settings,
    ToolSettings,
    TrinketSettings,
    TurnSettings,
)
from ._tokens import BLOCK_FRAMING_TOKENS, estimate_tokens
from ._tool_spec import Tool, ToolDefinition, ToolOutcome, as_tool, input_schema, tool
from ._tools import TOOL_NAMES, check_user_tools
from ._trinket import Directory, Trinket, TrinketActor

__all__ = [
    "BLOCK_FRAMING_TOKENS",
    "BUILTIN_SECTIONS",
    "DEFAULT_BASE_PROMPT",
    "DELIMITER",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "MODELS",
    "PLACEMENT_NOTIFICATION",
    "PLACEMENT_SYSTEM",
    "SHORTENED_MARKER",
    "TOOL_NAMES",
    "AnthropicModel",
    "Busy",
    "CacheSettings",
    "Compose",
    "Composed",
    "ComposerActor",
    "ComposerSettings",
    "Directory",
    "Engine",
    "FrontmindError",
    "HistorySettings",
    "InvalidModelSettings",
    "ModelChoice",
    "ModelClient",
    "ModelError",
    "ModelEvent",
    "ModelInfo",
    "ModelOverloaded",
    "ModelRefused",
    "ModelRejected",
    "ModelRequest",
    "ModelSettings",
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
    "TextDelta",
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
    "Turn",
    "TurnCompleted",
    "TurnError",
    "TurnEvent",
    "TurnSettings",
    "TurnStart",
    "TurnStarted",
    "UserInput",
    "as_tool",
    "block_kind",
    "build_request",
    "builtin_trinkets",
    "check_user_tools",
    "current_turn",
    "escape_field",
    "escape_text",
    "estimate_tokens",
    "input_schema",
    "model_info",
    "neutralize_frame",
    "render_notification_center",
    "tool",
    "user_content",
    "validate_settings",
]
