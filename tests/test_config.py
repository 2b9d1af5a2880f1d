"""Settings and configuration: every bad value is a clear error naming its key."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from actors import SettingsError, validate_settings
from frontmind import Config, ConfigError, Frontmind, load_config
from frontmind._frontmind import NoModel
from storage import SQLiteStorage, StorageUnavailable
from tests._harness import config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"timezone": "Mars/Olympus"}, "timezone: unknown zone 'Mars/Olympus'"),
        ({"cache": {"system_ttl": "5m", "history_ttl": "1h"}}, "a 1h breakpoint may not follow"),
        ({"tools": {"enabled": ["add_reminder", "teleport"]}}, "tools.enabled: unknown tools"),
        ({"disabled_sections": ["weather"]}, "disabled_sections: unknown built-in sections"),
        ({"composer": {"deadline_ms": 0}}, "composer.deadline_ms: must be greater than 0"),
        ({"turns": {"max_queued": 0}}, "turns.max_queued: must be greater than 0"),
        ({"turns": {"idle_minutes": -1}}, "turns.idle_minutes: must be 0"),
        ({"history": {"keep_fraction": 1.5}}, "history.keep_fraction: must be in (0, 1]"),
    ],
)
def test_bad_settings_name_their_key(sections: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        validate_settings(config(**sections))
    assert message in str(info.value)


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
