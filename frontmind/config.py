"""Configuration: a TOML file decoded into typed structs, plus environment variables.

No file is needed: every setting has a default. Unknown keys and wrong types are refused
with the key's path (`$.composer.deadline_ms`). Environment: ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL, FRONTMIND_MODEL (overrides `model.name`), FRONTMIND_TOKEN,
FRONTMIND_DATA_DIR, FRONTMIND_DATABASE_URL (overrides `storage.url`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Literal

import msgspec

from actors import (
    BUILTIN_SECTIONS,
    CacheSettings,
    ComposerSettings,
    Directory,
    HistorySettings,
    McpServer,
    MemorySettings,
    ModelPatch,
    ModelSettings,
    PlacementRegistry,
    SectionConfigError,
    SectionSpec,
    Settings,
    SettingsError,
    Tool,
    ToolDefinitionError,
    ToolSettings,
    Trinket,
    TrinketEntry,
    TrinketLoadError,
    TrinketSettings,
    TurnSettings,
    check_mcp_servers,
    import_module_near,
    load_embedder,
    server_tools,
    validate_settings,
)

from ._exceptions import ConfigError
from ._models import load_catalog
from ._paths import default_data_dir

# The public tier: every struct a `Config` is made of, and how to load one.
__all__ = [
    "CONFIG_FILE",
    "CacheSettings",
    "ComposerSettings",
    "Config",
    "CustomTool",
    "CustomTrinket",
    "DocumentsConfig",
    "HistorySettings",
    "McpServer",
    "MemorySettings",
    "ModelPatch",
    "ModelSettings",
    "OfflineConfig",
    "RuntimeConfig",
    "ServerConfig",
    "StorageConfig",
    "ToolSettings",
    "TrinketSettings",
    "TurnSettings",
    "default_data_dir",
    "load_config",
]

CONFIG_FILE = "frontmind.toml"
BASE_PROMPT_FILE = "base_prompt.md"


class CustomTrinket(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[[trinket]]`: a user trinket, its section and where that section goes."""

    name: str
    use: str  # "package.module:Class"
    placement: Literal["system", "notification"]
    order: int
    priority: int = 0
    deadline_ms: float | None = None  # None: the composer's deadline
    options: dict[str, str | int | float | bool] = {}


class CustomTool(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[[tool]]`: a function the model may call; its schema comes from its type hints."""

    use: str  # "package.module:function" (a plain function or one decorated with @tool)
    name: str | None = None  # default: the function's name
    description: str | None = None  # default: the docstring
    guidance: str | None = None  # the tool guidance line (default: the docstring's first)
    timeout_s: float | None = None  # default: tools.timeout_s
    max_result_chars: int | None = None  # a longer text result is cut, with a note (100,000)


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    token_file: str | None = None  # a file holding the token (used if no token is given)
    grace_seconds: int = 10
    # Host names (or name:port) besides the bound address that clients may use.
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = 32 << 20
    max_connections: int = 1000  # shared fairly by client address and token
    # A fixed cap per address and per token besides the fair share (unset: none).
    max_client_connections: int | None = None
    header_timeout_s: float = 10.0  # to deliver a whole request head
    body_timeout_s: float = 30.0  # longest pause while a request body arrives
    body_deadline_s: float = 120.0  # longest a whole request body may take
    body_min_rate: int = 1024  # bytes a second a body must average after the grace
    body_grace_s: float = 5.0
    keep_alive_s: int = 5  # an idle kept-alive connection is closed after this
    # While a response waits in a full send buffer, its client must take at least
    # send_min_rate bytes a second of it (or all that waited) every send_timeout_s.
    send_timeout_s: float = 30.0
    send_min_rate: int = 1024


class DocumentsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[documents]`: every document goes into every system prompt, so their total is
    capped (in estimated tokens); a write over it is refused."""

    budget_tokens: int = 50_000


class StorageConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[storage]`: where everything is kept. No URL: the SQLite file in the data dir."""

    url: str | None = None  # postgresql://user:password@host:port/database
    # SQLite with an embedder: the memory vector recall's first pass may keep (each
    # user's vectors quantized, about 500 bytes a memory at 384 dimensions, the least
    # recently searched users leaving first; storage/_vector_cache.py). 0: none, every
    # search scans sqlite-vec's index (about 20 ms at 50,000 memories).
    vector_cache_mb: float = 256.0


class OfflineConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The built-in local Messages API used by --offline: simulated model time."""

    time_to_first_token_s: float = 0.0
    tokens_per_second: float = 0.0  # 0: as fast as possible


class RuntimeConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[runtime]`: how the process itself is run.

    `gc = "idle"`: no automatic full garbage collection on a turn's path; the full
    collection runs when no turn is in flight (frontmind/_gc.py). `"python"`: CPython's
    own schedule, untouched. Unset: `idle` in the daemon, `python` in the library (the
    collector is the whole process's: a library changes it only when asked).
    """

    gc: Literal["idle", "python"] | None = None


class Config(Settings, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The whole configuration, `frontmind.toml` decoded: every table is a field here
    (`config.model`, `config.cache`, ...), each with the defaults the README gives."""

    server: ServerConfig = ServerConfig()
    documents: DocumentsConfig = DocumentsConfig()
    storage: StorageConfig = StorageConfig()
    offline: OfflineConfig = OfflineConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    trinket: tuple[CustomTrinket, ...] = ()
    tool: tuple[CustomTool, ...] = ()
    # `[[models]]`: add or correct a model's row of the shipped data (TOML allows no
    # `[[model]]` array beside the `[model]` table, hence the plural).
    models: tuple[ModelPatch, ...] = ()
    mcp: tuple[McpServer, ...] = ()  # `[[mcp]]`: MCP servers whose tools the model gets
    # `[[server_tool]]`: Anthropic's server tools, each as the API takes it (`type`, and
    # that type's options); checked against the `anthropic` SDK's definition of the type.
    server_tool: tuple[dict[str, Any], ...] = ()


# An [[mcp]] or [[tool]] entry's error as their other checks name it, `[[mcp]] #1 (time)`,
# not by msgspec's path `$.mcp[0]` (`[[models]]` rows keep `models[0]`, as theirs do);
# the key naming an entry, per table.
_ENTRY_PATH = re.compile(
    r"(?P<what>.*) - at `\$\.(?P<table>mcp|tool)\[(?P<index>\d+)\](?P<rest>[^`]*)`"
)
_ENTRY_NAME = {"mcp": "name", "tool": "use"}


def _located(message: str, text: bytes) -> str:
    found = _ENTRY_PATH.fullmatch(message)
    if found is None:
        return message
    table, index = found["table"], int(found["index"])
    entries = msgspec.toml.decode(text).get(table)  # it decoded once already
    entry = entries[index] if isinstance(entries, list) and index < len(entries) else {}
    name = entry.get(_ENTRY_NAME[table]) if isinstance(entry, dict) else None
    where = f"[[{table}]] #{index + 1}" + (f" ({name})" if isinstance(name, str) else "")
    rest = found["rest"].removeprefix(".")
    return f"{where}: {found['what']}" + (f" (at {rest})" if rest else "")


def _decode_config(data: bytes, here: Path) -> Config:
    """The file, in the directory `here`, as a `Config`. `[[model]]` rows (the singular
    spelling) are taken as `[[models]]` rows in a file without a `[model]` table: TOML
    allows no array of tables beside a table of the same name, so a file with `[model]`
    says `[[models]]`. A stdio `[[mcp]]` server's working directory is taken from `here`
    (`_mcp_beside`)."""
    raw = msgspec.toml.decode(data)
    if not isinstance(raw, dict):
        return msgspec.toml.decode(data, type=Config)  # refused, in msgspec's words
    if isinstance(raw.get("model"), list):
        if "models" in raw:
            raise msgspec.ValidationError("[[model]] and [[models]] both give model rows: use one")
        raw["models"] = raw.pop("model")
    if isinstance(raw.get("mcp"), list):
        # Before the entries are decoded: an `McpServer` made takes a relative `cwd`
        # from the process's working directory (actors/_mcp/_spec.py).
        raw["mcp"] = [_mcp_beside(entry, here) for entry in raw["mcp"]]
    # As `msgspec.toml.decode(data, type=Config)` converts what it read.
    return msgspec.convert(raw, Config, builtin_types=(datetime, date, time), str_keys=True)


def check_face_config(config: Config) -> None:
    """Refuse the unusable values of the keys the face itself reads, naming the key (the
    actors' own are `validate_settings`')."""
    if not config.documents.budget_tokens >= 0:
        # Below 0, every document write was refused as "over the budget of -1".
        raise SettingsError(
            "documents.budget_tokens: must be 0 (no documents) or more, "
            f"got {config.documents.budget_tokens}"
        )
    for key in ("time_to_first_token_s", "tokens_per_second"):
        value = getattr(config.offline, key)
        if not value >= 0:
            raise SettingsError(f"offline.{key}: must be 0 or more, got {value}")


def load_config(
    path: Path | None,
    data_dir: Path,
    environ: Mapping[str, str] | None = None,
    *,
    check_plugins: bool = True,
) -> Config:
    """The config file (given, or frontmind.toml in the data dir, or none) plus env.

    `check_plugins=False`: the `[[server_tool]]` entries are not checked against the SDK
    (importing it costs seconds) and the `[memory] embedder` is not built (it may need
    its service's key, or load a model): for the commands that open the store alone
    (`users`, `stats`, the data commands), which never call a model or an embedder."""
    env = os.environ if environ is None else environ
    candidate = path if path is not None else data_dir / CONFIG_FILE
    config = Config()
    if path is not None and not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ConfigError(f"config file {path} {what}")
    if candidate.is_file():
        text = candidate.read_bytes()
        here = candidate.resolve().parent
        try:
            config = _decode_config(text, here)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"{candidate}: {_located(str(exc), text)}") from None
        except msgspec.DecodeError as exc:
            raise ConfigError(f"{candidate}: not valid TOML: {exc}") from None
        # `use` modules are also looked for beside the config file (actors/_imports.py).
        near = (*(str(here / entry) for entry in config.module_path), str(here))
        config = msgspec.structs.replace(config, module_path=near)
        # So is a relative token file (a daemon started from another directory, by a
        # service manager, reads the same file); `~` is the user's home.
        if config.server.token_file:
            token_file = str(here / Path(config.server.token_file).expanduser())
            server = msgspec.structs.replace(config.server, token_file=token_file)
            config = msgspec.structs.replace(config, server=server)
    if env.get("FRONTMIND_MODEL"):
        model = msgspec.structs.replace(config.model, name=env["FRONTMIND_MODEL"])
        config = msgspec.structs.replace(config, model=model)
    if env.get("FRONTMIND_DATABASE_URL"):
        store = msgspec.structs.replace(config.storage, url=env["FRONTMIND_DATABASE_URL"])
        config = msgspec.structs.replace(config, storage=store)
    if env.get("FRONTMIND_TOKEN"):
        server = msgspec.structs.replace(config.server, token=env["FRONTMIND_TOKEN"])
        config = msgspec.structs.replace(config, server=server)
    prompt_file = data_dir / BASE_PROMPT_FILE
    if config.base_prompt is None and prompt_file.is_file():
        config = msgspec.structs.replace(config, base_prompt=prompt_file.read_text("utf-8"))
    try:
        # An unusable value fails here, naming its key.
        names = [*(s.name for s in BUILTIN_SECTIONS), *(t.name for t in config.trinket)]
        catalog = load_catalog(config.models)
        # A model the data does not know may be one the Models API knows: checked when
        # Frontmind opens (online: after asking it), not here.
        known = catalog.lookup(config.model.name) is not None
        validate_settings(config, names, catalog=catalog if known else None)
        check_face_config(config)
        check_mcp_servers(config.mcp)
        if check_plugins:
            server_tools(config.server_tool)
            if config.memory.embedder is not None:  # a bad one fails at startup
                load_embedder(config.memory.embedder, config.module_path)
    except (SettingsError, ToolDefinitionError) as exc:
        where = f"{candidate}: " if candidate.is_file() else ""
        raise ConfigError(f"{where}{exc}") from None
    return config


def _mcp_beside(entry: object, here: Path) -> object:
    """An `[[mcp]]` entry as read, a stdio server's working directory taken from `here`,
    the config file's directory: a relative `cwd` joined to it (`~` is the user's home),
    none given is `here` itself. Both were the daemon's own working directory (`/` under
    a service manager), so a server found by a relative path (`["python", "./server.py"]`)
    ran from one directory and not from another. A url server's entry is left as it is
    (a `cwd` there is refused by the checks)."""
    if not isinstance(entry, dict) or "url" in entry:
        return entry
    cwd = entry.get("cwd", "")
    if not isinstance(cwd, str):
        return entry  # refused as it is decoded, naming the key
    return {**entry, "cwd": str(here / Path(cwd).expanduser())}


def _import(use: str, what: str, shape: str, search: tuple[str, ...]) -> object:
    """The object `use` ("package.module:attribute") names; `what` says whose entry it is."""
    module_name, _, attribute = use.partition(":")
    if not module_name or not attribute:
        raise ToolDefinitionError(f"{what}: use = {use!r} must look like {shape!r}")
    try:
        module = import_module_near(module_name, search)
    except ImportError as exc:
        raise ToolDefinitionError(f"{what}: cannot import {module_name!r}: {exc}") from exc
    # The module's own code failed (a missing environment variable, a syntax error):
    # said with the entry it serves, not as a bare traceback naming neither.
    except Exception as exc:
        raise ToolDefinitionError(
            f"{what}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise ToolDefinitionError(f"{what}: {module_name!r} has no attribute {attribute!r}")
    return found


def custom_tools(config: Config) -> list[Tool[..., Any]]:
    """The config's `[[tool]]` entries as tools, built now so a bad entry fails at startup."""
    tools = []
    for index, entry in enumerate(config.tool):
        what = f"[[tool]] #{index + 1} ({entry.use})"
        found = _import(entry.use, what, "package.module:function", config.module_path)
        if not callable(found):
            raise ToolDefinitionError(f"{what}: {entry.use!r} is not a function")
        try:
            if isinstance(found, Tool):
                built = found.with_options(
                    name=entry.name,
                    description=entry.description,
                    guidance=entry.guidance,
                    timeout_s=entry.timeout_s,
                    max_result_chars=entry.max_result_chars,
                )
            else:
                built = Tool(
                    found,
                    name=entry.name,
                    description=entry.description,
                    guidance=entry.guidance,
                    timeout_s=entry.timeout_s,
                    max_result_chars=entry.max_result_chars,
                )
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"{what}: {exc}") from None
        tools.append(built)
    return tools


def _load_class(entry: CustomTrinket, search: tuple[str, ...]) -> type[Trinket]:
    module_name, _, attribute = entry.use.partition(":")
    if not module_name or not attribute:
        raise TrinketLoadError(
            f"trinket {entry.name!r}: use = {entry.use!r} must look like 'package.module:Class'"
        )
    try:
        module = import_module_near(module_name, search)
    except ImportError as exc:
        raise TrinketLoadError(
            f"trinket {entry.name!r}: cannot import {module_name!r}: {exc}"
        ) from exc
    except Exception as exc:  # the module's own code failed: as in `_import`
        raise TrinketLoadError(
            f"trinket {entry.name!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    cls = getattr(module, attribute, None)
    if cls is None:
        # Not "not a subclass": the name is wrong, not the class (a typo, a rename).
        raise TrinketLoadError(
            f"trinket {entry.name!r}: {module_name!r} has no attribute {attribute!r}"
        )
    if not (isinstance(cls, type) and issubclass(cls, Trinket)):
        raise TrinketLoadError(
            f"trinket {entry.name!r}: {entry.use!r} is not a subclass of actors.Trinket"
        )
    return cls


def custom_trinkets(
    config: Config, registry: PlacementRegistry
) -> tuple[PlacementRegistry, list[TrinketEntry]]:
    """Register the config's trinkets and build them now, so a bad entry fails at startup."""
    for t in config.trinket:
        if t.name in registry:
            # Not "registered twice": the entry is there once, its name is taken.
            raise TrinketLoadError(
                f"trinket {t.name!r}: the name of a built-in section; choose another "
                "(disabled_sections leaves the built-in out but keeps its name)"
            )
    specs = [
        SectionSpec(
            t.name, t.placement, cached=t.placement == "system", order=t.order, priority=t.priority
        )
        for t in config.trinket
    ]
    try:
        registry = registry.with_sections(specs)
    except SectionConfigError as exc:
        raise TrinketLoadError(f"[[trinket]]: {exc}") from None
    entries = []
    for entry in config.trinket:
        cls = _load_class(entry, config.module_path)
        try:
            # Built once, now: a bad entry fails at startup, and this one instance
            # serves every user and continuum (each continuum's actor renders with it),
            # as trinket authors are told, so what it keeps by `turn.user` is whole.
            trinket = cls(**entry.options)
        except Exception as exc:
            raise TrinketLoadError(
                f"trinket {entry.name!r}: {entry.use} could not be constructed: {exc}"
            ) from exc
        if cls.render is Trinket.render:
            # Else every turn's render fails with a bare NotImplementedError, in the log.
            raise TrinketLoadError(
                f"trinket {entry.name!r}: {entry.use!r} does not define "
                "`async def render(self, turn)`"
            )
        if entry.deadline_ms is not None and not entry.deadline_ms > 0:
            raise TrinketLoadError(
                f"trinket {entry.name!r}: deadline_ms must be greater than 0, "
                f"got {entry.deadline_ms}"
            )
        factory = _shared(trinket)
        entries.append(TrinketEntry(entry.name, factory, deadline_ms=entry.deadline_ms))
    return registry, entries


def _shared(trinket: Trinket) -> Callable[[Directory], Trinket]:
    def build(_: Directory) -> Trinket:
        return trinket

    return build
