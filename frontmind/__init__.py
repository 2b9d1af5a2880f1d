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
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors import (
        Busy,
        Composed,
        ComposeTimeout,
        FrontmindError,
        InvalidModelSettings,
        McpServerStatus,
        McpUnavailable,
        ModelChoice,
        ModelError,
        ModelOverloaded,
        ModelRefused,
        ModelRejected,
        ModelRequest,
        ModelStreamError,
        ModelUnavailable,
        Overloaded,
        SettingsError,
        ShuttingDown,
        TextDelta,
        ThinkingDelta,
        Tool,
        ToolFinished,
        ToolsReload,
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
    from storage import (
        Continuum,
        ContinuumModel,
        Document,
        ImportCollision,
        InvalidInput,
        Job,
        Memory,
        MemoryHit,
        Message,
        MessageTooLarge,
        MigrationMismatch,
        NotFound,
        Reminder,
        SchemaTooNew,
        StorageError,
        StorageUnavailable,
        TurnRecord,
        TurnUsage,
        UnknownContinuum,
        User,
        UserExists,
        UserForgotten,
    )

    from ._client import Client, ContinuumSummary, Page, RemoteTurn
    from ._exceptions import (
        BudgetExceeded,
        ClientError,
        ConfigError,
        DataDirLocked,
        Forbidden,
        RequestTimeout,
        UnsupportedMediaType,
    )
    from ._frontmind import Frontmind
    from ._sync_client import SyncClient
    from .config import Config, load_config

    __version__: str

# Where each public name lives; it is imported from there the first time it is asked for.
_HOMES = {
    "actors": (
        "Busy Composed ComposeTimeout FrontmindError InvalidModelSettings McpServerStatus "
        "McpUnavailable ModelChoice ModelError ModelOverloaded ModelRefused ModelRejected "
        "ModelRequest ModelStreamError ModelUnavailable Overloaded SettingsError "
        "ShuttingDown TextDelta ThinkingDelta Tool ToolFinished ToolsReload "
        "ToolStarted Trinket Turn TurnCompleted TurnError TurnEvent TurnStarted TurnStream "
        "escape_field escape_text tool"
    ),
    "storage": (
        "Continuum ContinuumModel Document ImportCollision InvalidInput Job Memory "
        "MemoryHit Message MessageTooLarge MigrationMismatch NotFound Reminder SchemaTooNew "
        "StorageError StorageUnavailable TurnRecord TurnUsage UnknownContinuum User "
        "UserExists UserForgotten"
    ),
    "frontmind._client": "Client ContinuumSummary Page RemoteTurn",
    "frontmind._exceptions": (
        "BudgetExceeded ClientError ConfigError DataDirLocked Forbidden RequestTimeout "
        "UnsupportedMediaType"
    ),
    "frontmind._frontmind": "Frontmind",
    "frontmind._sync_client": "SyncClient",
    "frontmind.config": "Config load_config",
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names.split()}

__all__ = [
    "BudgetExceeded",
    "Busy",
    "Client",
    "ClientError",
    "ComposeTimeout",
    "Composed",
    "Config",
    "ConfigError",
    "Continuum",
    "ContinuumModel",
    "ContinuumSummary",
    "DataDirLocked",
    "Document",
    "Forbidden",
    "Frontmind",
    "FrontmindError",
    "ImportCollision",
    "InvalidInput",
    "InvalidModelSettings",
    "Job",
    "McpServerStatus",
    "McpUnavailable",
    "Memory",
    "MemoryHit",
    "Message",
    "MessageTooLarge",
    "MigrationMismatch",
    "ModelChoice",
    "ModelError",
    "ModelOverloaded",
    "ModelRefused",
    "ModelRejected",
    "ModelRequest",
    "ModelStreamError",
    "ModelUnavailable",
    "NotFound",
    "Overloaded",
    "Page",
    "Reminder",
    "RemoteTurn",
    "RequestTimeout",
    "SchemaTooNew",
    "SettingsError",
    "ShuttingDown",
    "StorageError",
    "StorageUnavailable",
    "SyncClient",
    "TextDelta",
    "ThinkingDelta",
    "Tool",
    "ToolFinished",
    "ToolStarted",
    "ToolsReload",
    "Trinket",
    "Turn",
    "TurnCompleted",
    "TurnError",
    "TurnEvent",
    "TurnRecord",
    "TurnStarted",
    "TurnStream",
    "TurnUsage",
    "UnknownContinuum",
    "UnsupportedMediaType",
    "User",
    "UserExists",
    "UserForgotten",
    "__version__",
    "escape_field",
    "escape_text",
    "load_config",
    "tool",
]


def _check_layers() -> None:
    """Frontmind's layers are top-level packages beside it (`runtime`, `actors`,
    `storage`, kept so on purpose). An application's own package of one of those names
    found first on `sys.path` (its `storage/`, in the directory it runs from) would
    half-load Frontmind and fail later, obscurely: refuse now, in one line naming both.
    Nothing is imported to find out (so `frontmind.localapi` still loads nothing)."""
    home = Path(__file__).resolve().parent.parent
    for name in ("runtime", "actors", "storage"):
        expected = home / name / "__init__.py"
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        if origin is not None and Path(origin).resolve() == expected:
            continue
        found = origin or (
            "a folder without __init__.py" if spec is not None else "nothing: it is missing"
        )
        raise ImportError(
            f"frontmind: the {name!r} package Python finds ({found}) is not Frontmind's "
            f"own ({expected}): rename your {name!r} package, or run from a directory "
            "that does not hold it, so that the two do not share one name"
        )


_check_layers()


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
