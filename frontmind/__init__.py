"""Frontmind: a runtime for long-lived Claude agents that keeps the prompt cache warm.

    from frontmind import Frontmind

    async with Frontmind.open("./data", offline=True) as fm:
        async for event in fm.turn("ada", "hello"):
            ...

This is the public face: the library (`Frontmind`), its configuration, the daemon's
client, the events a turn streams, what trinket and tool authors need, and the errors to
catch. The rooms beside it serve other audiences: `frontmind.server` (the daemon, for
operators), `frontmind.cli` (the `frontmind` command) and `frontmind.localapi` (the local
Messages API, which stands alone).

Names load on first use (PEP 562), so `import frontmind` is cheap and importing one of
the rooms (`frontmind.localapi` above all) does not drag in the model client, storage or
the actors through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors import (
        Busy,
        FrontmindError,
        ModelError,
        TextDelta,
        ThinkingDelta,
        Tool,
        ToolFinished,
        ToolStarted,
        Trinket,
        Turn,
        TurnCompleted,
        TurnError,
        TurnEvent,
        TurnStarted,
        TurnStream,
        escape_field,
        escape_text,
        tool,
    )
    from storage import InvalidInput, MessageTooLarge, NotFound, StorageError

    from ._client import Client, ContinuumSummary, Page
    from ._exceptions import ClientError, ConfigError
    from ._frontmind import Frontmind
    from .config import Config, load_config

    __version__: str

# Where each public name lives; it is imported from there the first time it is asked for.
_HOMES = {
    "actors": (
        "Busy FrontmindError ModelError TextDelta ThinkingDelta Tool ToolFinished ToolStarted "
        "Trinket Turn TurnCompleted TurnError TurnEvent TurnStarted TurnStream escape_field "
        "escape_text tool"
    ),
    "storage": "InvalidInput MessageTooLarge NotFound StorageError",
    "frontmind._client": "Client ContinuumSummary Page",
    "frontmind._exceptions": "ClientError ConfigError",
    "frontmind._frontmind": "Frontmind",
    "frontmind.config": "Config load_config",
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names.split()}

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
    "ThinkingDelta",
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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("frontmind")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
    elif name in _HOME_OF:
        value = getattr(importlib.import_module(_HOME_OF[name]), name)
    else:
        raise AttributeError(f"module 'frontmind' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
