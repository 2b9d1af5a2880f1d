"""The library refuses bad input where it enters, before anything is composed or sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontmind import ConfigError, InvalidInput, MessageTooLarge, StorageError
from frontmind._exceptions import wire_error
from frontmind.config import ComposerSettings, Config
from frontmind.localapi import LocalMessagesAPI
from storage import error_type
from tests._harness import frontmind, run_turn

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("continuum", "text", "error", "status"),
    [
        ("ada", "x " * 60_000, MessageTooLarge, 413),
        ("ada", "", InvalidInput, 400),
        ("ada", " \n\t ", InvalidInput, 400),
        ("not ok!", "hello", InvalidInput, 400),
        ("a" * 65, "hello", InvalidInput, 400),
    ],
)
async def test_bad_turn_input_is_refused_before_any_model_call(
    tmp_path: Path, continuum: str, text: str, error: type[Exception], status: int
) -> None:
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        with pytest.raises(error) as caught:
            await run_turn(fm, continuum, text)
        with pytest.raises(error):
            await fm.context(continuum, text)
        assert api.requests == []
        assert await fm.turns() == []
        # The daemon answers the same error with the same status.
        assert wire_error(caught.value) == (status, error_type(caught.value))
        # Nothing was lost: the instance still runs turns.
        await run_turn(fm, "ada", "hello")
        assert len(await fm.turns()) == 1


async def test_open_raises_the_error_itself_not_a_group(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    async with LocalMessagesAPI() as api:
        with pytest.raises(StorageError) as caught:
            async with frontmind(api, a_file):
                pass
        assert not isinstance(caught.value, BaseExceptionGroup)

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            async with frontmind(api, tmp_path / "data"):
                raise Boom


def test_a_bad_config_value_is_a_config_error(tmp_path: Path) -> None:
    from frontmind import load_config

    (tmp_path / "frontmind.toml").write_text("[composer]\ndeadline_ms = -1\n")
    with pytest.raises(ConfigError, match="deadline_ms"):
        load_config(None, tmp_path)
    assert Config(composer=ComposerSettings(deadline_ms=100)).composer.deadline_ms == 100


async def test_library_errors_are_the_documented_ones(tmp_path: Path) -> None:
    from frontmind import NotFound

    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        with pytest.raises(NotFound):  # an unknown continuum is a NotFound like any other
            await fm.history("nobody")
        with pytest.raises(InvalidInput, match="max_tokens"):
            await fm.set_model_settings("ada", max_tokens="9")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="budget"):
            await fm.set_model_settings("ada", thinking="enabled", budget_tokens=10)
        assert api.requests == []
