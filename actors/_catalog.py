"""The model catalog: what each model accepts, costs and can read, as data.

The rows come from outside: the face (`frontmind`) decodes its shipped `models.toml`
with `decode_catalog`, lays the config's `[[models]]` rows over it (`apply_patches`) and
the Models API's answers (`ModelRow` built by the face), and hands the `ModelCatalog` to
the Engine. Nothing here knows where a row came from; every model-dependent figure
the actors use (context window, max output, cache minimum, prices, thinking rules) is
read from a row, never written in code. The file documents each field and its sources.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Literal

import msgspec

from storage import InvalidInput, check_model_name

from ._exceptions import SettingsError

# The documented multipliers of a model's base input price (prompt caching, "Pricing"):
# the defaults of a row that names none, and of the TTL policy before it knows the model.
CACHE_WRITE_5M = 1.25
CACHE_WRITE_1H = 2.0
CACHE_READ = 0.1

__all__ = [
    "SERVER_TOOL_FAMILIES",
    "CatalogFile",
    "MeetModel",
    "ModelCatalog",
    "ModelFacts",
    "ModelPatch",
    "ModelRow",
    "ModelSource",
    "apply_patches",
    "decode_catalog",
    "row_from_facts",
]

ThinkingType = Literal["adaptive", "enabled", "disabled", "between_tools"]
ThinkingDefault = Literal["off", "on", "always"]
ThinkingDisplay = Literal["summarized", "omitted"]
EffortLevel = Literal["low", "medium", "high", "xhigh", "max"]
# Whether the API checks that nothing before a replayed thinking block changed since it
# was written (preserved thinking, "Keeping the prefix unchanged"): "new_accounts"
# enforces it by default only for accounts created on or after 2026-08-31.
PrefixCheck = Literal["none", "new_accounts", "every_account"]

ALL_EFFORTS: tuple[EffortLevel, ...] = ("low", "medium", "high", "xhigh", "max")

# The server tools Frontmind passes on; each `type` is one dated version of a family
# (`web_search_20250305`). A row's `server_tools` names types, or a family for every
# version of it (the permissive default: the API judges).
SERVER_TOOL_FAMILIES = ("web_search", "web_fetch", "code_execution")
_DATED = re.compile(r"(web_search|web_fetch|code_execution)_\d{8}")


def server_tool_family(kind: str) -> str | None:
    """`web_search_20250305` -> `web_search`; None for a type of no known family."""
    return next((f for f in SERVER_TOOL_FAMILIES if kind == f or kind.startswith(f + "_")), None)


class ModelRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One model. Defaults are what a row that says nothing about a fact gets: the
    permissive choice (the API judges), and the documented cache multipliers."""

    name: str
    aliases: tuple[str, ...] = ()
    context_window: int
    max_output: int
    thinking_types: frozenset[ThinkingType] = frozenset({"adaptive", "enabled", "disabled"})
    thinking_refused_at_effort: dict[ThinkingType, frozenset[EffortLevel]] = {}
    thinking_default: ThinkingDefault = "off"
    thinking_display: ThinkingDisplay = "summarized"
    sampling_params: bool = True  # temperature / top_p / top_k at a non-default value
    effort_levels: frozenset[EffortLevel] = frozenset(ALL_EFFORTS)
    effort_default: EffortLevel | None = None
    forced_tool_choice: bool = True
    system_messages: bool = False
    prefill: bool = False
    keeps_previous_thinking: bool = True
    min_cacheable: int = 1024
    input_price: float | None = None  # dollars per million tokens; None: not known
    output_price: float | None = None
    cache_write_5m: float = CACHE_WRITE_5M  # multipliers of the input price
    cache_write_1h: float = CACHE_WRITE_1H
    cache_read: float = CACHE_READ
    image_input: bool = True
    pdf_input: bool = True
    # Images and PDF pages one request may hold, the history's included ("Images and
    # vision": 100 for a 200k-token window, 600 for the others).
    max_media: int = 100
    context_management: frozenset[str] = frozenset()
    reads_thinking_of: frozenset[str] = frozenset()  # names, or "@group" in the file
    server_tools: frozenset[str] = frozenset(SERVER_TOOL_FAMILIES)  # types or families
    # Dollars per server tool request, beside the tokens ("Usage and pricing" of the web
    # search and web fetch tools' pages: $10 per 1,000 searches; fetches cost only tokens).
    web_search_price: float = 0.01
    web_fetch_price: float = 0.0
    prefix_check: PrefixCheck = "none"
    sources: dict[str, str] = {}

    @property
    def thinks_by_default(self) -> bool:
        return self.thinking_default != "off"

    def refuses_thinking(self, kind: str, effort: str | None) -> bool:
        """Whether a request with `thinking.type = kind` at this effort is a 400."""
        if kind not in self.thinking_types:
            return True
        return any(
            refused == kind and effort in efforts
            for refused, efforts in self.thinking_refused_at_effort.items()
        )

    def takes_server_tool(self, kind: str) -> bool:
        """Whether the model takes the server tool of this `type` (per the data)."""
        family = server_tool_family(kind)
        return kind in self.server_tools or (family is not None and family in self.server_tools)

    def server_tools_of(self, family: str) -> list[str]:
        """The row's entries of one family (a dated type, or the family itself)."""
        return sorted(e for e in self.server_tools if server_tool_family(e) == family)


class CatalogFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The shape of `models.toml`."""

    schema: int
    references: dict[str, str] = {}
    thinking_groups: dict[str, tuple[str, ...]] = {}
    server_tool_groups: dict[str, tuple[str, ...]] = {}
    retired: dict[str, str] = {}
    # The tool-use system prompt by tool_choice type: read by the local API's token
    # counts, and by the runtime's estimate of a request (`tool_prompt_tokens`).
    tool_prompt_tokens: dict[str, int] = {}
    model: tuple[ModelRow, ...] = ()


class ModelPatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A `[[models]]` row of the config: every field of `ModelRow`, all optional. Over a
    known model it corrects the fields it gives; a new name must give at least
    `context_window` and `max_output`."""

    name: str
    aliases: tuple[str, ...] | None = None
    context_window: int | None = None
    max_output: int | None = None
    thinking_types: frozenset[ThinkingType] | None = None
    thinking_refused_at_effort: dict[ThinkingType, frozenset[EffortLevel]] | None = None
    thinking_default: ThinkingDefault | None = None
    thinking_display: ThinkingDisplay | None = None
    sampling_params: bool | None = None
    effort_levels: frozenset[EffortLevel] | None = None
    effort_default: EffortLevel | None = None
    forced_tool_choice: bool | None = None
    system_messages: bool | None = None
    prefill: bool | None = None
    keeps_previous_thinking: bool | None = None
    min_cacheable: int | None = None
    input_price: float | None = None
    output_price: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_read: float | None = None
    image_input: bool | None = None
    pdf_input: bool | None = None
    max_media: int | None = None
    context_management: frozenset[str] | None = None
    reads_thinking_of: frozenset[str] | None = None
    server_tools: frozenset[str] | None = None
    web_search_price: float | None = None
    web_fetch_price: float | None = None
    prefix_check: PrefixCheck | None = None


def _base_name(name: str) -> str | None:
    """`claude-haiku-4-5-20251001` -> `claude-haiku-4-5`: a dated snapshot's alias."""
    base, _, date = name.rpartition("-")
    if base and date.isdigit() and len(date) == 8:
        return base
    return None


class ModelCatalog:
    """Rows by name (and alias), the retired names, and the lookups the actors need."""

    def __init__(
        self,
        rows: Iterable[ModelRow],
        retired: Mapping[str, str] | None = None,
        *,
        references: Mapping[str, str] | None = None,
        dynamic_server_tools: frozenset[str] = frozenset(),
        tool_prompt_tokens: Mapping[str, int] | None = None,
    ):
        # What a row's source lines name (the file's [references]), the server tool
        # versions whose code calls the request's tools (the file's `dynamic` group), and
        # the tool-use system prompt the API adds by tool_choice type (the file's
        # [tool_prompt_tokens]; the same for every model).
        self.references = dict(references or {})
        self.dynamic_server_tools = dynamic_server_tools
        self.tool_prompt_tokens = dict(tool_prompt_tokens or {})
        self._rows: dict[str, ModelRow] = {}
        self._ids: dict[str, str] = {}
        for row in rows:
            self._rows[row.name] = row
        for row in self._rows.values():
            for alias in (row.name, *row.aliases):
                self._ids[alias] = row.name
        self._retired = dict(retired or {})

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self) -> list[ModelRow]:
        return [self._rows[name] for name in sorted(self._rows)]

    def names(self) -> list[str]:
        return sorted(self._rows)

    @property
    def retired(self) -> dict[str, str]:
        return dict(self._retired)

    def canonical(self, name: str) -> str | None:
        """The row name an id belongs to: itself, an alias, or a dated snapshot of one."""
        found = self._ids.get(name)
        if found is None and (base := _base_name(name)) is not None:
            found = self._ids.get(base)
        return found

    def lookup(self, name: str) -> ModelRow | None:
        """The row of `name`, a dated snapshot of a known alias included (a record's
        model, as the API answered it, is priced by its row)."""
        found = self.canonical(name)
        return None if found is None else self._rows[found]

    def listed(self, name: str) -> ModelRow | None:
        """The row of `name` only if the data names it (a row's name or alias): what a
        setting may ask for. A made-up date on a known alias is no model the API takes
        (the local API answers 404 for it, as the real one does)."""
        found = self._ids.get(name)
        return None if found is None else self._rows[found]

    def retired_on(self, name: str) -> str | None:
        """When a retired name reached its end of life (None: not retired)."""
        return self._retired.get(name)

    def can_read_thinking(self, reader: str, producer: str) -> bool:
        """Whether `reader` can read a thinking block `producer` wrote. A producer the
        catalog does not know is taken as readable: nothing says otherwise."""
        row = self.lookup(reader)
        made_by = self.canonical(producer)
        if row is None or made_by is None or made_by == row.name:
            return True
        return made_by in row.reads_thinking_of

    def with_rows(self, rows: Iterable[ModelRow]) -> ModelCatalog:
        """This catalog with `rows` added or replacing the rows of the same name."""
        merged = dict(self._rows)
        for row in rows:
            merged[row.name] = row
        return ModelCatalog(
            merged.values(),
            self._retired,
            references=self.references,
            dynamic_server_tools=self.dynamic_server_tools,
            tool_prompt_tokens=self.tool_prompt_tokens,
        )

    def source(self, row: ModelRow, fact: str) -> str:
        """The row's source line for a fact, with its reference's address ("" if none)."""
        line = row.sources.get(fact, "")
        key, _, note = line.partition(":")
        where = self.references.get(key.strip())
        if where is None:
            return line
        address = where.split()[0]  # a reference is its address, then what it says
        return f"{note.strip()}: {address}" if note.strip() else address


def decode_catalog(data: bytes | str) -> ModelCatalog:
    """A catalog from the text of a `models.toml`; `@group`s expanded, checked."""
    try:
        raw = msgspec.toml.decode(data, type=CatalogFile)
    except msgspec.ValidationError as exc:
        raise SettingsError(f"models.toml: {exc}") from None
    except msgspec.DecodeError as exc:
        raise SettingsError(f"models.toml: not valid TOML: {exc}") from None
    if raw.schema != 1:
        raise SettingsError(f"models.toml: schema {raw.schema} is not known (1 is)")
    rows: list[ModelRow] = []
    for i, row in enumerate(raw.model):
        where = f"models.toml: model[{i}] ({row.name})"
        tools: set[str] = set()
        for entry in row.server_tools:
            if entry.startswith("@"):
                members = raw.server_tool_groups.get(entry[1:])
                if members is None:
                    raise SettingsError(f"{where}.server_tools: no group {entry[1:]!r}")
                tools.update(members)
            else:
                tools.add(entry)
        row = msgspec.structs.replace(row, server_tools=frozenset(tools))
        readers: set[str] = set()
        for entry in row.reads_thinking_of:
            if entry.startswith("@"):
                group = raw.thinking_groups.get(entry[1:])
                if group is None:
                    raise SettingsError(
                        f"models.toml: model[{i}].reads_thinking_of: no group {entry[1:]!r}"
                    )
                readers.update(group)
            else:
                readers.add(entry)
        readers.discard(row.name)
        _check_row(row, where)
        rows.append(msgspec.structs.replace(row, reads_thinking_of=frozenset(readers)))
    names = [row.name for row in rows]
    if len(set(names)) != len(names):
        raise SettingsError("models.toml: a model name appears twice")
    dynamic = frozenset(raw.server_tool_groups.get("dynamic", ()))
    return ModelCatalog(
        rows,
        raw.retired,
        references=raw.references,
        dynamic_server_tools=dynamic,
        tool_prompt_tokens=raw.tool_prompt_tokens,
    )


_REQUIRED_NEW = ("context_window", "max_output")


def apply_patches(
    catalog: ModelCatalog, patches: Iterable[ModelPatch], key: str = "models"
) -> ModelCatalog:
    """The catalog with the config's rows laid over it; errors name `key[i].field`."""
    rows: list[ModelRow] = []
    for i, patch in enumerate(patches):
        where = f"{key}[{i}]"
        if not patch.name.strip():
            raise SettingsError(f"{where}.name: the model name is empty")
        given = {
            field: value
            for field in patch.__struct_fields__
            if field != "name" and (value := getattr(patch, field)) is not None
        }
        base = catalog.lookup(patch.name)
        if base is not None and base.name == patch.name:
            row = msgspec.structs.replace(base, **given)
        else:
            missing = [field for field in _REQUIRED_NEW if field not in given]
            if missing:
                raise SettingsError(
                    f"{where}.{missing[0]}: required for {patch.name!r}, a model the "
                    f"catalog does not know (known: {', '.join(catalog.names())})"
                )
            row = ModelRow(name=patch.name, **given)
        _check_row(row, where)
        rows.append(row)
    return catalog.with_rows(rows)


def _check_row(row: ModelRow, where: str) -> None:
    for field in ("context_window", "max_output", "min_cacheable", "max_media"):
        if getattr(row, field) < 0 or (field != "min_cacheable" and getattr(row, field) == 0):
            raise SettingsError(f"{where}.{field}: must be greater than 0")
    if row.max_output > row.context_window:
        raise SettingsError(
            f"{where}.max_output: {row.max_output} is more than the context window "
            f"({row.context_window})"
        )
    for entry in sorted(row.server_tools):
        if entry not in SERVER_TOOL_FAMILIES and not _DATED.fullmatch(entry):
            raise SettingsError(
                f"{where}.server_tools: {entry!r} is neither a server tool type "
                f"(family_YYYYMMDD) nor a family ({', '.join(SERVER_TOOL_FAMILIES)})"
            )
    prices = ("input_price", "output_price", "cache_write_5m", "cache_write_1h", "cache_read",
              "web_search_price", "web_fetch_price")  # fmt: skip
    for field in prices:
        value = getattr(row, field)
        if value is not None and value < 0:
            raise SettingsError(f"{where}.{field}: must not be negative")
    if row.effort_default is not None and row.effort_default not in row.effort_levels:
        raise SettingsError(
            f"{where}.effort_default: {row.effort_default!r} is not among effort_levels"
        )


MeetModel = Callable[[str], Awaitable[ModelRow | None]]


class ModelSource:
    """The catalog in force, shared by the Engine and every conversation; with `meet`
    (online: the face reads the Models API), a model met for the first time is looked up
    before it is checked, and its row replaces or joins the file's. A model met more than
    `refresh_seconds` ago (on `clock`) is looked up again when next met, so a daemon that
    runs for weeks picks up the answers the face refreshes."""

    def __init__(
        self,
        catalog: ModelCatalog,
        meet: MeetModel | None = None,
        *,
        clock: Callable[[], float] = time.time,
        refresh_seconds: float = 24 * 3600.0,
    ) -> None:
        self._catalog = catalog
        self._meet = meet
        self._clock = clock
        self._refresh = refresh_seconds
        self._met: dict[str, float] = {}  # name -> when it was last looked up

    @property
    def catalog(self) -> ModelCatalog:
        return self._catalog

    @property
    def online(self) -> bool:
        return self._meet is not None

    async def meet(self, name: str) -> ModelCatalog:
        """The catalog once `name` has been looked up (once per name and refresh age).
        The lookup may raise `SettingsError` (the Models API answered 404)."""
        if self._meet is None or not name:
            return self._catalog
        try:  # nothing that is no model name goes to the Models API (or its cache)
            check_model_name(name)
        except InvalidInput as exc:
            raise SettingsError(str(exc)) from None
        now = self._clock()
        met = self._met.get(name)
        if met is None or now - met >= self._refresh:
            row = await self._meet(name)
            self._met[name] = now
            if row is not None:
                self._catalog = self._catalog.with_rows([row])
        return self._catalog


class ModelFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What `GET /v1/models/{id}` says of a model, as far as Frontmind uses it (kept in
    storage as JSON). None: the answer did not say."""

    id: str
    max_input_tokens: int | None = None
    max_tokens: int | None = None
    thinking_types: frozenset[ThinkingType] | None = None
    effort_levels: frozenset[EffortLevel] | None = None
    context_management: frozenset[str] | None = None
    image_input: bool | None = None
    pdf_input: bool | None = None
    # capabilities.server_tools: family -> supported (web_search, code_execution; "true
    # when the model supports at least one version of the tool, not necessarily every
    # version"), and capabilities.code_execution: whether code the model runs may call
    # the request's tools (the `dynamic` versions need it).
    server_tools: dict[str, bool] | None = None
    code_calls_tools: bool | None = None


def _server_tools_from_facts(
    row: ModelRow, facts: ModelFacts, dynamic: frozenset[str]
) -> tuple[frozenset[str], list[str]]:
    """The row's server tools once the Models API has answered, and what it changed."""
    takes = set(row.server_tools)
    said: list[str] = []
    for family, supported in sorted((facts.server_tools or {}).items()):
        mine = set(row.server_tools_of(family))
        if not supported and mine:
            takes -= mine
            said.append(f"capabilities.server_tools.{family}.supported is false")
        elif supported and not mine:
            takes.add(family)  # some version: which one, the API judges
    if facts.code_calls_tools is False and takes & dynamic:
        takes -= dynamic
        said.append(
            "capabilities.code_execution.supported is false (no dynamic filtering or "
            "programmatic tool calling)"
        )
    return frozenset(takes), said


def row_from_facts(
    base: ModelRow | None, name: str, facts: ModelFacts, dynamic: frozenset[str] = frozenset()
) -> ModelRow:
    """The row a model runs with once the Models API has answered: its answer over the
    data's row (`base`; None for a model the data does not know, whose other facts take
    the permissive defaults, the API judging). `dynamic`: the server tool versions that
    need capabilities.code_execution (the catalog's `dynamic_server_tools`)."""
    given: dict[str, object] = {}
    if facts.max_input_tokens is not None:
        given["context_window"] = facts.max_input_tokens
    if facts.max_tokens is not None:
        given["max_output"] = facts.max_tokens
    for field in ("thinking_types", "effort_levels", "context_management"):
        value = getattr(facts, field)
        if value is not None:
            given[field] = value
    for field in ("image_input", "pdf_input"):
        value = getattr(facts, field)
        if value is not None:
            given[field] = value
    if base is None:
        missing = [f for f in ("context_window", "max_output") if f not in given]
        if missing:
            raise SettingsError(
                f"model: the Models API did not give {name}'s {missing[0]}, and Frontmind's "
                "data does not know the model: add it with a [[models]] row in the config"
            )
        aliases = (facts.id,) if facts.id != name else ()
        row = ModelRow(name=name, aliases=aliases, **given)  # type: ignore[arg-type]
    else:
        row = msgspec.structs.replace(base, **given)
    if row.effort_default is not None and row.effort_default not in row.effort_levels:
        row = msgspec.structs.replace(row, effort_default=None)
    sources = {**row.sources, "models_api": f"GET /v1/models/{facts.id}"}
    takes, said = _server_tools_from_facts(row, facts, dynamic)
    if said:
        sources["server_tools"] = f"the Models API (GET /v1/models/{facts.id}): " + "; ".join(said)
    return msgspec.structs.replace(row, server_tools=takes, sources=sources)
