"""The model data file: its shape, its sources, its lookups, and that the product and the
local API read the same facts from it."""

from __future__ import annotations

import tomllib
from importlib import resources

import msgspec
import pytest

from actors import (
    ModelCatalog,
    ModelFacts,
    ModelPatch,
    ModelRow,
    SettingsError,
    apply_patches,
    decode_catalog,
    row_from_facts,
)
from frontmind._models import load_catalog, local_api_rows, shipped_catalog
from frontmind.localapi import MODELS
from frontmind.localapi._models import MODELS_FILE, RETIRED, load_models, served_models

# The facts every row must source (a line in its [model.sources] table).
FACTS = (
    "context_window",
    "max_output",
    "thinking",
    "thinking_display",
    "effort",
    "forced_tool_choice",
    "system_messages",
    "prefill",
    "keeps_previous_thinking",
    "min_cacheable",
    "prices",
    "media",
    "max_media",
    "context_management",
    "reads_thinking_of",
    "server_tools",
)
# Facts a row may leave to their default; a row that gives one sources it.
OPTIONAL_FACTS = ("prefix_check", "sampling_params")

# The lineup the docs name (December 2026).
LINEUP = (
    "claude-opus-5-5",
    "claude-opus-5",
    "claude-fable-5-1",
    "claude-fable-5",
    "claude-mythos-5-1",
    "claude-mythos-5",
    "claude-sonnet-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-opus-4-5",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "claude-opus-4-1",
    "claude-opus-4-0",
)


def _raw() -> dict[str, object]:
    return tomllib.loads(MODELS_FILE.read_text(encoding="utf-8"))


def test_the_package_ships_the_file_the_local_api_reads() -> None:
    shipped = resources.files("frontmind").joinpath("models.toml").read_bytes()
    assert shipped == MODELS_FILE.read_bytes()


def test_every_model_of_the_lineup_has_a_row() -> None:
    catalog = shipped_catalog()
    missing = [name for name in LINEUP if catalog.lookup(name) is None]
    assert missing == []
    assert "claude-mythos-preview" in catalog.retired
    assert catalog.lookup("claude-mythos-preview") is None


def test_every_fact_has_a_source_naming_a_reference() -> None:
    raw = _raw()
    references = raw["references"]
    assert isinstance(references, dict)
    rows = raw["model"]
    assert isinstance(rows, list)
    problems = []
    for row in rows:
        sources = row.get("sources", {})
        for fact in FACTS:
            line = sources.get(fact)
            if not line:
                problems.append(f"{row['name']}: no source for {fact}")
            elif line.split(":", 1)[0] not in references:
                problems.append(f"{row['name']}.{fact}: unknown reference in {line!r}")
        problems.extend(
            f"{row['name']}: no source for {fact}"
            for fact in OPTIONAL_FACTS
            if fact in row and not sources.get(fact)
        )
        problems.extend(
            f"{row['name']}: source for unknown fact {k}"
            for k in set(sources) - {*FACTS, *OPTIONAL_FACTS}
        )
    assert problems == []


# The facts the product and the local API both read from a row.
SHARED_FACTS = (
    "context_window",
    "max_output",
    "min_cacheable",
    "system_messages",
    "thinks_by_default",
    "prefill",
    "keeps_previous_thinking",
    "thinking_types",
    "thinking_refused_at_effort",
    "thinking_default",
    "thinking_display",
    "sampling_params",
    "effort_levels",
    "effort_default",
    "forced_tool_choice",
    "input_price",
    "output_price",
    "cache_write_5m",
    "cache_write_1h",
    "cache_read",
    "image_input",
    "pdf_input",
    "max_media",
    "context_management",
    "reads_thinking_of",
    "server_tools",
    "prefix_check",
)


def test_product_and_local_api_agree_on_every_row() -> None:
    catalog = shipped_catalog()
    served, retired = load_models()
    assert retired == catalog.retired == RETIRED
    product_ids = {alias for row in catalog.rows() for alias in (row.name, *row.aliases)}
    assert product_ids == set(served) == set(MODELS)
    for name, info in served.items():
        row = catalog.lookup(name)
        assert row is not None
        assert info.canonical == row.name
        for field in SHARED_FACTS:
            assert getattr(info, field) == getattr(row, field), (name, field)
        assert info.dynamic_server_tools == catalog.dynamic_server_tools


# The thinking table of ../shared/reference/anthropic-api-facts.md ("Troubleshooting
# thinking"): model, accepted types, default, refused types.
THINKING_TABLE = [
    ("claude-fable-5-1", {"adaptive"}, "always", {"enabled", "disabled"}),
    ("claude-mythos-5-1", {"adaptive"}, "always", {"enabled", "disabled"}),
    ("claude-fable-5", {"adaptive"}, "always", {"enabled", "disabled"}),
    ("claude-mythos-5", {"adaptive"}, "always", {"enabled", "disabled"}),
    ("claude-opus-5", {"adaptive", "disabled"}, "on", {"enabled"}),
    ("claude-opus-4-8", {"adaptive", "disabled"}, "off", {"enabled"}),
    ("claude-opus-4-7", {"adaptive", "disabled"}, "off", {"enabled"}),
    ("claude-sonnet-5", {"adaptive", "disabled"}, "on", {"enabled"}),
    ("claude-opus-4-6", {"adaptive", "enabled", "disabled"}, "off", set()),
    ("claude-sonnet-4-6", {"adaptive", "enabled", "disabled"}, "off", set()),
    ("claude-opus-4-5", {"enabled", "disabled"}, "off", {"adaptive"}),
    ("claude-sonnet-4-5", {"enabled", "disabled"}, "off", {"adaptive"}),
    ("claude-haiku-4-5", {"enabled", "disabled"}, "off", {"adaptive"}),
    ("claude-opus-4-1", {"enabled", "disabled"}, "off", {"adaptive"}),
]


@pytest.mark.parametrize(("name", "accepted", "default", "refused"), THINKING_TABLE)
def test_the_thinking_table(name: str, accepted: set[str], default: str, refused: set[str]) -> None:
    row = shipped_catalog().lookup(name)
    assert row is not None
    assert row.thinking_default == default
    for kind in ("adaptive", "enabled", "disabled"):
        assert row.refuses_thinking(kind, None) == (kind in refused), kind
        assert (kind in row.thinking_types) == (kind in accepted), kind


def test_opus_5_refuses_thinking_off_only_at_high_efforts() -> None:
    row = shipped_catalog().lookup("claude-opus-5")
    assert row is not None
    assert not row.refuses_thinking("disabled", "high")
    assert not row.refuses_thinking("disabled", None)
    assert row.refuses_thinking("disabled", "xhigh")
    assert row.refuses_thinking("disabled", "max")


def test_figures_the_issue_names() -> None:
    catalog = shipped_catalog()
    fable51, fable5 = catalog.lookup("claude-fable-5-1"), catalog.lookup("claude-fable-5")
    haiku = catalog.lookup("claude-haiku-4-5")
    assert fable51 is not None
    assert fable5 is not None
    assert haiku is not None
    assert (fable51.context_window, fable51.max_output) == (1_000_000, 128_000)
    assert (fable51.input_price, fable51.output_price) == (10.0, 50.0)
    assert fable51.cache_read * 4 == fable5.cache_read  # reads at a quarter of Fable 5's
    assert not fable51.forced_tool_choice
    assert fable5.forced_tool_choice
    assert haiku.effort_levels == frozenset()
    assert (fable51.cache_write_5m, fable51.cache_write_1h) == (1.25, 2.0)


def test_lookup_finds_aliases_and_dated_ids() -> None:
    catalog = shipped_catalog()
    for name in ("claude-haiku-4-5-20251001", "claude-haiku-4-5", "claude-haiku-4-5-20991231"):
        row = catalog.lookup(name)
        assert row is not None
        assert row.name == "claude-haiku-4-5"
    assert catalog.lookup("claude-opus-4-20250514") is not None
    assert catalog.lookup("claude-nonexistent-9") is None
    assert catalog.lookup("claude-nonexistent-20250101") is None


def test_a_5_1_thinking_block_is_unreadable_by_earlier_models() -> None:
    catalog = shipped_catalog()
    for earlier in ("claude-opus-5", "claude-opus-4-8", "claude-fable-5", "claude-sonnet-5"):
        assert not catalog.can_read_thinking(earlier, "claude-fable-5-1"), earlier
        assert catalog.can_read_thinking("claude-fable-5-1", earlier), earlier
    assert catalog.can_read_thinking("claude-fable-5-1", "claude-opus-5-5")
    assert not catalog.can_read_thinking("claude-opus-5-5", "claude-fable-5")
    assert catalog.can_read_thinking("claude-opus-5-5", "claude-opus-4-8")
    assert catalog.can_read_thinking("claude-opus-4-8", "claude-opus-4-6")
    # The same model, under a dated id, always reads its own blocks.
    assert catalog.can_read_thinking("claude-haiku-4-5-20251001", "claude-haiku-4-5")


def test_config_rows_correct_and_add_models() -> None:
    catalog = load_catalog(
        [
            ModelPatch(name="claude-opus-4-8", min_cacheable=2048, input_price=4.5),
            ModelPatch(name="claude-local-7", context_window=32_000, max_output=4_000),
        ]
    )
    opus = catalog.lookup("claude-opus-4-8")
    assert opus is not None
    assert (opus.min_cacheable, opus.input_price, opus.output_price) == (2048, 4.5, 25.0)
    added = catalog.lookup("claude-local-7")
    assert added is not None
    assert added.context_window == 32_000
    assert shipped_catalog().lookup("claude-opus-4-8").min_cacheable == 1024  # type: ignore[union-attr]


def test_the_local_api_serves_the_config_rows_as_the_product_reads_them() -> None:
    """Offline, the config's `[[models]]` rows reach the local API as data
    (`local_api_rows`), and it reads every shared fact of them as the product does."""
    patches = [
        ModelPatch(name="claude-opus-4-8", min_cacheable=2048, max_output=200_000),
        ModelPatch(
            name="claude-local-7",
            aliases=("claude-local-7-20260101",),
            context_window=32_000,
            max_output=4_000,
            thinking_types=frozenset({"enabled", "disabled"}),
        ),
    ]
    catalog = load_catalog(patches)
    served = served_models(local_api_rows(catalog, patches))
    assert set(served) == set(MODELS) | {"claude-local-7", "claude-local-7-20260101"}
    for name in ("claude-opus-4-8", "claude-local-7", "claude-local-7-20260101"):
        row = catalog.lookup(name)
        assert row is not None
        assert served[name].canonical == row.name
        for field in SHARED_FACTS:
            assert getattr(served[name], field) == getattr(row, field), (name, field)
    assert MODELS["claude-opus-4-8"].max_output == 128_000  # the shipped rows stay as they are


def test_a_config_row_may_give_every_field_of_a_data_row() -> None:
    """The README: a `[[models]]` row takes "any field of the file's rows" (the source
    lines aside, which cite the docs, not the operator)."""
    assert set(ModelPatch.__struct_fields__) == set(ModelRow.__struct_fields__) - {"sources"}
    catalog = load_catalog([ModelPatch(name="claude-opus-4-8", sampling_params=True)])
    assert catalog.lookup("claude-opus-4-8").sampling_params  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (ModelPatch(name="claude-new-1", max_output=10), "models[0].context_window: required"),
        (ModelPatch(name=" "), "models[0].name: the model name is empty"),
        (
            ModelPatch(name="claude-opus-4-8", max_output=2_000_000),
            "models[0].max_output: 2000000 is more than the context window",
        ),
        (
            ModelPatch(name="claude-haiku-4-5", effort_default="high"),
            "models[0].effort_default: 'high' is not among effort_levels",
        ),
        (ModelPatch(name="claude-opus-4-8", input_price=-1.0), "models[0].input_price"),
    ],
)
def test_bad_config_rows_are_refused_with_their_key(patch: ModelPatch, message: str) -> None:
    with pytest.raises(SettingsError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        apply_patches(shipped_catalog(), [patch])


def test_a_bad_data_file_is_refused_with_its_path() -> None:
    with pytest.raises(SettingsError, match=r"models\.toml: .*max_output"):
        decode_catalog(b'schema = 1\n[[model]]\nname = "x"\ncontext_window = 10\n')
    with pytest.raises(SettingsError, match="no group 'nope'"):
        decode_catalog(
            b'schema = 1\n[[model]]\nname = "x"\ncontext_window = 10\nmax_output = 5\n'
            b'reads_thinking_of = ["@nope"]\n'
        )
    with pytest.raises(SettingsError, match="schema 2"):
        decode_catalog(b"schema = 2\n")


# Which server tool versions each model takes (models.toml's server_tools, sourced from
# each tool's page): every version from Claude 4.6 on; the basic ones on the 4.5 models.
def test_server_tool_versions_follow_the_docs() -> None:
    catalog = shipped_catalog()
    dynamic = ("web_search_20260209", "web_fetch_20260318", "code_execution_20260120")
    basic = ("web_search_20250305", "web_fetch_20250910", "code_execution_20250825")
    for name in ("claude-opus-5-5", "claude-fable-5", "claude-opus-4-6", "claude-sonnet-4-6"):
        row = catalog.lookup(name)
        assert row is not None
        assert all(row.takes_server_tool(kind) for kind in basic + dynamic), name
        assert not row.takes_server_tool("code_execution_20250522"), name
    for name in ("claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-5"):
        row = catalog.lookup(name)
        assert row is not None
        assert all(row.takes_server_tool(kind) for kind in basic), name
        assert not any(row.takes_server_tool(kind) for kind in dynamic), name
    assert catalog.dynamic_server_tools >= set(dynamic)
    # Each family's versions are the SDK's (a row naming a type the SDK lacks is a typo).
    from actors._server_tools import _definitions

    named = {kind for row in catalog.rows() for kind in row.server_tools}
    assert named <= set(_definitions())


def test_the_models_api_capabilities_correct_the_server_tools() -> None:
    catalog = shipped_catalog()
    opus = catalog.lookup("claude-opus-4-8")
    dynamic = catalog.dynamic_server_tools
    no_search = ModelFacts(id="claude-opus-4-8", server_tools={"web_search": False})
    row = row_from_facts(opus, "claude-opus-4-8", no_search, dynamic)
    assert not row.takes_server_tool("web_search_20250305")
    assert row.takes_server_tool("web_fetch_20260318")
    assert "web_search.supported is false" in row.sources["server_tools"]
    no_code = ModelFacts(id="claude-opus-4-8", code_calls_tools=False)
    row = row_from_facts(opus, "claude-opus-4-8", no_code, dynamic)
    assert not row.takes_server_tool("web_fetch_20260209")
    assert row.takes_server_tool("web_fetch_20250910")
    # A model the data lacks a version for, which the API says has the tool: the API judges.
    haiku = catalog.lookup("claude-haiku-4-5")
    assert haiku is not None
    bare = msgspec.structs.replace(haiku, server_tools=frozenset({"web_fetch_20250910"}))
    yes = ModelFacts(id="claude-haiku-4-5", server_tools={"web_search": True})
    assert row_from_facts(bare, "claude-haiku-4-5", yes).takes_server_tool("web_search_20260209")


def test_a_bad_server_tools_entry_is_refused() -> None:
    head = b'schema = 1\n[[model]]\nname = "x"\ncontext_window = 10\nmax_output = 5\n'
    with pytest.raises(SettingsError, match=r"server_tools: 'web_serch_20250305' is neither"):
        decode_catalog(head + b'server_tools = ["web_serch_20250305"]\n')
    with pytest.raises(SettingsError, match=r"model\[0\] \(x\)\.server_tools: no group 'nope'"):
        decode_catalog(head + b'server_tools = ["@nope"]\n')
    with pytest.raises(SettingsError, match=r"models\[0\]\.server_tools"):
        apply_patches(
            shipped_catalog(),
            [ModelPatch(name="claude-opus-4-8", server_tools=frozenset({"bing"}))],
        )


def test_rows_round_trip_as_msgspec_structs() -> None:
    row = shipped_catalog().lookup("claude-fable-5-1")
    assert row is not None
    again = msgspec.json.decode(msgspec.json.encode(row), type=ModelRow)
    assert again == row
    assert ModelCatalog([again]).lookup("claude-fable-5-1") == row


def test_the_catalog_keeps_the_tool_use_prompt_the_local_api_counts() -> None:
    """The runtime's estimate of a request with tools adds the tool-use system prompt
    the API adds (`[tool_prompt_tokens]`), read from the same data as the local API's
    counts: the catalog dropped the table, and the estimate was short by it. It stays
    through the config's rows laid over the file's."""
    table = tomllib.loads(resources.files("frontmind").joinpath("models.toml").read_text())
    expected = table["tool_prompt_tokens"]
    assert shipped_catalog().tool_prompt_tokens == expected
    added = ModelPatch(name="claude-local-7", context_window=32_000, max_output=4_000)
    patched = load_catalog([added])
    assert patched.tool_prompt_tokens == expected
    for row in MODELS.values():
        assert row.tool_prompt_tokens == expected
