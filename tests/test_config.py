"""Settings and configuration: every bad value is a clear error naming its key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from actors import SettingsError, tool_name, validate_settings
from frontmind import Config, ConfigError, Frontmind, FrontmindError, load_config
from frontmind._frontmind import NoModel
from frontmind.server._daemon import resolve_token
from storage import SQLiteStorage, StorageUnavailable
from tests._harness import config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"timezone": "Mars/Olympus"}, "timezone: unknown zone 'Mars/Olympus'"),
        # A folder of the zone data, and a name too long for a file: no zone either.
        ({"timezone": "America"}, "timezone: unknown zone 'America'"),
        ({"timezone": "Europe/" + "X" * 300}, "timezone: unknown zone 'Europe/XXXX"),
        ({"cache": {"system_ttl": "5m", "history_ttl": "1h"}}, "a 1h breakpoint may not follow"),
        ({"tools": {"enabled": ["add_reminder", "teleport"]}}, "tools.enabled: unknown tools"),
        ({"disabled_sections": ["weather"]}, "disabled_sections: unknown built-in sections"),
        ({"composer": {"deadline_ms": 0}}, "composer.deadline_ms: must be greater than 0"),
        ({"turns": {"max_queued": 0}}, "turns.max_queued: must be greater than 0"),
        # The SDK's client: 0 s times every request out, -1 retries ends every turn in
        # its "could not resolve response (should never happen)".
        ({"model": {"timeout_s": 0}}, "model.timeout_s: must be greater than 0"),
        ({"model": {"max_retries": -1}}, "model.max_retries: must be 0 (no retries) or more"),
        # TOML's nan is not greater than 0: each turn's deadline would crash the composer.
        ({"composer": {"deadline_ms": float("nan")}}, "composer.deadline_ms: must be greater"),
        ({"turns": {"max_wait_s": float("nan")}}, "turns.max_wait_s: must be greater than 0"),
        ({"turns": {"idle_minutes": float("nan")}}, "turns.idle_minutes: must be 0"),
        ({"turns": {"idle_minutes": -1}}, "turns.idle_minutes: must be 0"),
        ({"turns": {"max_loaded": -1}}, "turns.max_loaded: must be 0 (no bound) or more"),
        ({"history": {"keep_fraction": 1.5}}, "history.keep_fraction: must be in (0, 1]"),
        ({"history": {"segment_gap_minutes": -5}}, "history.segment_gap_minutes: must be"),
        # Over the store's search cap, the memories section failed on every turn.
        ({"trinkets": {"memories_top_k": 100_000}}, "trinkets.memories_top_k: must be 0 to"),
        ({"trinkets": {"search_results": -1}}, "trinkets.search_results: must be 0 to"),
        ({"trinkets": {"manifest_segments": -1}}, "trinkets.manifest_segments: must be 0"),
        # The cache guard's: 0 turns divided by 0 (or a negative shift) crashed the
        # composer on every turn.
        ({"composer": {"guard_min_turns": 0}}, "composer.guard_min_turns: must be at least 1"),
        ({"composer": {"guard_window": -1}}, "composer.guard_window: must be at least 1"),
        ({"composer": {"guard_threshold": -1}}, "composer.guard_threshold: must be in [0, 1]"),
    ],
)
def test_bad_settings_name_their_key(sections: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        validate_settings(config(**sections))
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        # Below 0 every document write was refused, "over the budget of -1".
        ("[documents]\nbudget_tokens = -1\n", "documents.budget_tokens: must be 0"),
        ("[offline]\ntokens_per_second = -1\n", "offline.tokens_per_second: must be 0 or"),
        ("[offline]\ntime_to_first_token_s = nan\n", "offline.time_to_first_token_s: must"),
    ],
)
async def test_bad_face_settings_name_their_key(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "frontmind.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_config(None, tmp_path)
    decoded = msgspec.toml.decode(toml.encode(), type=Config)  # as a library passes one
    with pytest.raises(SettingsError, match=message):
        async with Frontmind.open(tmp_path / "data", decoded, offline=True):
            pass


def test_defaults_are_valid() -> None:
    validate_settings(Config())


def test_environment_and_base_prompt_file(tmp_path: Path) -> None:
    (tmp_path / "base_prompt.md").write_text("You are terse.")
    loaded = load_config(
        None, tmp_path, environ={"FRONTMIND_MODEL": "claude-opus-4-8", "FRONTMIND_TOKEN": "t0k"}
    )
    assert loaded.model.name == "claude-opus-4-8"
    assert loaded.server.token == "t0k"
    assert loaded.base_prompt == "You are terse."
    (tmp_path / "frontmind.toml").write_text('base_prompt = "From the file."\n')
    assert load_config(None, tmp_path, environ={}).base_prompt == "From the file."
    assert msgspec.toml.decode(b"", type=Config) == Config()


async def test_compose_shows_the_sections_and_prompt(tmp_path: Path) -> None:
    (tmp_path / "base_prompt.md").write_text("You are terse.")
    async with Frontmind.open(tmp_path, model=NoModel(), clock=lambda: 1_795_000_000.0) as fm:
        await fm.remember("Tea is green")
        composed = await fm.compose("c1", "what colour is tea?")
    assert composed.system[0].text == "You are terse."
    statuses = {s.name: s.status for s in composed.sections}
    assert statuses["relevant_memories"] == "fresh"
    assert statuses["context_search_results"] == "empty"
    assert "Tea is green" in composed.notification


async def test_an_unusable_database_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the data directory should be")
    with pytest.raises(StorageUnavailable, match="cannot open the database"):
        await SQLiteStorage.open(blocker / "frontmind.db")


# -- the modules `use` names ----------------------------------------------------------------

SHOP = '''\
from frontmind import Trinket, Turn, tool

from {helpers} import COUNT  # a neighbour module: its directory is on the path too


@tool
def {tool}(sku: str) -> str:
    """How many of an item are in stock."""
    return str(COUNT)


class Shelf(Trinket):
    async def render(self, turn: Turn) -> str:
        return f"on the shelf: {{COUNT}}"
'''

SHOP_CONFIG = """\
[[tool]]
use = "{module}:{tool}"

[[trinket]]
name = "shelf"
use = "{module}:Shelf"
placement = "notification"
order = 60
"""


def _shop(folder: Path, module: str) -> str:
    """A tool and a trinket in `module`.py in `folder`; the tool's name."""
    tool = f"{module}_stock"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(SHOP.format(helpers=f"{module}_helpers", tool=tool))
    (folder / f"{module}_helpers.py").write_text("COUNT = 7\n")
    return tool


async def _tools_and_context(data: Path, config_file: Path) -> tuple[list[str], str]:
    async with Frontmind.open(data, config_file=config_file, model=NoModel()) as fm:
        request = await fm.context("shop", "what is in stock?")
    names = [tool_name(t) for t in request.tools]
    return names, msgspec.json.encode(request).decode()


async def test_use_finds_a_module_beside_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "app"
    tool = _shop(app, "shop_beside_config")
    config_file = app / "frontmind.toml"
    config_file.write_text(SHOP_CONFIG.format(module="shop_beside_config", tool=tool))
    monkeypatch.chdir(tmp_path)  # elsewhere: only the config file's directory has it
    names, request = await _tools_and_context(tmp_path / "data", config_file)
    assert names[-1] == tool
    assert "on the shelf: 7" in request


async def test_use_finds_a_module_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    tool = _shop(work, "shop_in_cwd")
    config_file = tmp_path / "etc" / "frontmind.toml"
    config_file.parent.mkdir()
    config_file.write_text(SHOP_CONFIG.format(module="shop_in_cwd", tool=tool))
    monkeypatch.chdir(work)
    names, request = await _tools_and_context(tmp_path / "data", config_file)
    assert names[-1] == tool
    assert "on the shelf: 7" in request


async def test_use_of_a_module_found_nowhere_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "etc" / "frontmind.toml"
    config_file.parent.mkdir()
    config_file.write_text('[[tool]]\nuse = "nowhere_tools:stock"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FrontmindError) as caught:
        await _tools_and_context(tmp_path / "data", config_file)
    assert str(caught.value) == (
        "[[tool]] #1 (nowhere_tools:stock): cannot import 'nowhere_tools': no module named "
        f"'nowhere_tools' on Python's path, nor in {config_file.parent}, {tmp_path}: put "
        "nowhere_tools.py (or the package nowhere_tools/) beside the config file or in the "
        "working directory, install it, or add its directory to PYTHONPATH"
    )


_ROOT = str(Path(__file__).resolve().parent.parent)


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ('[[tool]]\nuse = "needs_key:stock"\n', "[[tool]] #1 (needs_key:stock)"),
        (
            '[[trinket]]\nname = "weather"\nuse = "needs_key:Weather"\n'
            'placement = "notification"\norder = 15\n',
            "trinket 'weather'",
        ),
    ],
)
async def test_a_use_module_that_fails_on_import_is_one_line_naming_its_entry(
    tmp_path: Path, entry: str, named: str
) -> None:
    """A module that raised as it was imported (a missing environment variable, a
    syntax error) ended the CLI with a bare traceback naming neither the entry nor
    the config; it is one line, as a module that is not found is."""
    (tmp_path / "needs_key.py").write_text('import os\n\nKEY = os.environ["WEATHER_KEY_X"]\n')
    (tmp_path / "frontmind.toml").write_text(entry)
    command = ["serve", "--offline", "--port", "0", "--data-dir", str(tmp_path)]
    with anyio.fail_after(60):  # a daemon that started after all would serve on
        done = await anyio.run_process(
            [sys.executable, "-m", "frontmind", *command],
            env={"PYTHONPATH": _ROOT, "PATH": os.environ.get("PATH", "")},
            check=False,
        )
    assert done.returncode != 0
    assert done.stderr.decode() == (
        f"frontmind: error: {named}: importing 'needs_key' failed: KeyError: 'WEATHER_KEY_X'\n"
    )


async def test_module_path_entries_are_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _shop(tmp_path / "app" / "plugins", "shop_in_plugins")
    config_file = tmp_path / "app" / "frontmind.toml"
    config_file.write_text(
        'module_path = ["plugins"]\n\n' + SHOP_CONFIG.format(module="shop_in_plugins", tool=tool)
    )
    monkeypatch.chdir(tmp_path)
    loaded = load_config(config_file, tmp_path / "data")
    assert loaded.module_path == (str(tmp_path / "app" / "plugins"), str(tmp_path / "app"))
    names, _ = await _tools_and_context(tmp_path / "data", config_file)
    assert names[-1] == tool


def test_a_relative_token_file_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "secret").write_text("s3cret-token\n")
    config_file = tmp_path / "app" / "frontmind.toml"
    config_file.write_text('[server]\ntoken_file = "secret"\n')
    monkeypatch.chdir(tmp_path)  # a service manager starts the daemon elsewhere
    loaded = load_config(config_file, tmp_path / "data", environ={})
    assert loaded.server.token_file == str(tmp_path / "app" / "secret")
    assert resolve_token(loaded, None, None) == "s3cret-token"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config_file.write_text('[server]\ntoken_file = "~/token"\n')
    loaded = load_config(config_file, tmp_path / "data", environ={})
    assert loaded.server.token_file == str(tmp_path / "home" / "token")


def test_a_bad_models_row_in_the_config_names_its_key(tmp_path: Path) -> None:
    (tmp_path / "frontmind.toml").write_text(
        '[model]\nname = "claude-opus-4-8"\n\n[[models]]\nname = "claude-new-1"\nmax_output = 10\n'
    )
    with pytest.raises(ConfigError, match=r"models\[0\]\.context_window: required"):
        load_config(None, tmp_path, environ={})
    (tmp_path / "frontmind.toml").write_text('[[models]]\nname = "x"\nwindow = 1\n')
    with pytest.raises(ConfigError, match=r"unknown field `window` - at `\$\.models\[0\]`"):
        load_config(None, tmp_path, environ={})
    (tmp_path / "frontmind.toml").write_text(
        '[model]\nname = "claude-local-1"\nmax_tokens = 9000\n\n'
        '[[models]]\nname = "claude-local-1"\ncontext_window = 100000\nmax_output = 8000\n'
    )
    with pytest.raises(ConfigError, match="max_tokens: must be from 1 to 8000"):
        load_config(None, tmp_path, environ={})


def test_an_unknown_key_of_an_array_entry_names_the_entry(tmp_path: Path) -> None:
    """As the entry's other checks name it (`[[tool]] #2 (use)`), not msgspec's path."""
    (tmp_path / "frontmind.toml").write_text(
        '[[tool]]\nuse = "a:b"\n\n[[tool]]\nuse = "tools:stock"\ncolour = "red"\n'
    )
    with pytest.raises(ConfigError, match=r": \[\[tool\]\] #2 \(tools:stock\): .*`colour`$"):
        load_config(None, tmp_path, environ={})


def test_model_rows_may_be_spelt_model_without_a_model_table(tmp_path: Path) -> None:
    (tmp_path / "frontmind.toml").write_text(
        '[[model]]\nname = "claude-local-1"\ncontext_window = 100000\nmax_output = 8000\n'
    )
    loaded = load_config(None, tmp_path, environ={})
    assert [row.name for row in loaded.models] == ["claude-local-1"]
    assert loaded.model.name == Config().model.name  # the default [model] settings
    (tmp_path / "frontmind.toml").write_text(
        '[[model]]\nname = "a-1"\ncontext_window = 10\nmax_output = 5\n\n'
        '[[models]]\nname = "b-1"\ncontext_window = 10\nmax_output = 5\n'
    )
    with pytest.raises(ConfigError, match=r"\[\[model\]\] and \[\[models\]\] both"):
        load_config(None, tmp_path, environ={})


def test_a_config_path_that_is_a_folder_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, tmp_path, environ={})
    assert str(info.value) == f"config file {tmp_path} is not a file"
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nothing.toml", tmp_path, environ={})
    assert str(info.value) == f"config file {tmp_path / 'nothing.toml'} does not exist"
