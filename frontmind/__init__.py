"""Frontmind: a runtime for long-lived Claude agents that keeps the prompt cache warm.

    from frontmind import Frontmind

    async with Frontmind.open("./data", offline=True) as fm:
        async for event in fm.turn("ada", "hello"):
            ...

This is the public face: the library (`Frontmind`), its configuration, the events a turn
streams, what a trinket author needs, and the errors to catch. Importing it loads no
HTTP server; the daemon loads when `frontmind serve` runs. The local Messages API is
`frontmind.localapi` and stands alone.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from actors import (
    Busy,
    FrontmindError,
    ModelError,
    TextDelta,
    Tool,
    ToolFinished,
    ToolStarted,
    Trinket,
    Turn,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStarted,
    escape_field,
    escape_text,
    tool,
)
from storage import InvalidInput, MessageTooLarge, NotFound, StorageError

from ._client import Client, ContinuumSummary, Page
from ._exceptions import ClientError, ConfigError
from ._frontmind import Frontmind, TurnStream
from .config import Config, load_config

try:
    __version__ = version("frontmind")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Busy",
    "Client",
    "ClientError",
    "Config",
    "ConfigError",
    "ContinuumSummary",
    "Frontmind",
    "FrontmindError",
    "InvalidInput",
    "MessageTooLarge",
    "ModelError",
    "NotFound",
    "Page",
    "StorageError",
    "TextDelta",
    "Tool",
    "ToolFinished",
    "ToolStarted",
    "Trinket",
    "Turn",
    "TurnCompleted",
    "TurnError",
    "TurnEvent",
    "TurnStarted",
    "TurnStream",
    "__version__",
    "escape_field",
    "escape_text",
    "load_config",
    "tool",
]
