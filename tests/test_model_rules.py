"""Model settings are refused where the model refuses them, before anything is stored or
sent, with the docs' reason; a continuum whose model changes replays a history that model
can read, and its turn says what the switch costs."""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors import InvalidModelSettings, ModelChoice, check_model_choice
from frontmind._models import shipped_catalog
from frontmind.localapi import (
    LocalMessagesAPI,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ScriptedResponder,
)
from storage import ContinuumModel, RawBlock
from tests._daemon import ROOT
from tests._harness import completed, config, frontmind, run_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
async def api() -> Any:
    responder = ScriptedResponder()
    async with LocalMessagesAPI(responder=responder) as server:
        yield server


REFUSED: list[tuple[dict[str, Any], str]] = [
    # "Troubleshooting thinking": models marked "Always on" cannot turn thinking off.
    ({"model": "claude-fable-5-1", "thinking": "off"}, "always thinks and cannot turn"),
    ({"model": "claude-mythos-5", "thinking": "off"}, "always thinks"),
    ({"model": "claude-opus-5-5", "thinking": "off"}, "always thinks"),
    # Manual extended thinking: refused on Claude 4.7 and later, with the API's text.
    (
        {"model": "claude-fable-5-1", "thinking": "enabled"},
        '"thinking.type.enabled" is not supported for claude-fable-5-1',
    ),
    ({"model": "claude-opus-4-8", "thinking": "enabled"}, '"thinking.type.enabled"'),
    ({"model": "claude-opus-4-7", "thinking": "enabled"}, '"thinking.type.enabled"'),
    ({"model": "claude-sonnet-5", "thinking": "enabled"}, '"thinking.type.enabled"'),
    ({"model": "claude-opus-5", "thinking": "enabled"}, '"thinking.type.enabled"'),
    # Opus 5 turns thinking off only at effort high or below (footnote 2).
    (
        {"model": "claude-opus-5", "thinking": "off", "effort": "xhigh"},
        "accepts thinking off only at effort low, medium or high, not with effort = 'xhigh'",
    ),
    ({"model": "claude-opus-5", "thinking": "off", "effort": "max"}, "only at effort"),
    # Extended-only models refuse adaptive.
    (
        {"model": "claude-haiku-4-5", "thinking": "adaptive"},
        "adaptive thinking is not supported on claude-haiku-4-5",
    ),
    ({"model": "claude-opus-4-5", "thinking": "adaptive"}, "adaptive thinking is not supported"),
    ({"model": "claude-sonnet-4-5", "thinking": "adaptive"}, "adaptive thinking is not"),
    # Effort where the model has none, or not that level.
    ({"model": "claude-haiku-4-5", "effort": "low"}, "claude-haiku-4-5 does not support effort"),
    ({"model": "claude-sonnet-4-5", "effort": "high"}, "does not support effort"),
    (
        {"model": "claude-opus-4-6", "effort": "xhigh"},
        "takes effort low, medium, high or max, not 'xhigh'",
    ),
    ({"model": "claude-opus-4-5", "effort": "max"}, "takes effort low, medium or high"),
    # max_tokens over the model's output limit.
    ({"model": "claude-haiku-4-5", "max_tokens": 64_001}, "from 1 to 64000 for claude-haiku-4-5"),
    ({"model": "claude-fable-5-1", "max_tokens": 128_001}, "from 1 to 128000"),
    # Unknown (offline: the data alone) and retired models.
    ({"model": "claude-nonexistent-9"}, "'claude-nonexistent-9' is not a model Frontmind knows"),
    ({"model": "claude-mythos-preview"}, "claude-mythos-preview is retired (2026-06-30)"),
]


@pytest.mark.parametrize(("settings", "fragment"), REFUSED)
async def test_settings_the_model_refuses_are_refused_before_any_call(
    api: LocalMessagesAPI, tmp_path: Path, settings: dict[str, Any], fragment: str
) -> None:
    async with frontmind(api, tmp_path) as fm:
        await fm.set_model_settings("c1", model="claude-sonnet-4-6", max_tokens=2048)
        with pytest.raises(InvalidModelSettings) as info:
            await fm.set_model_settings("c1", **settings)
        assert fragment in str(info.value)
        # Nothing refused was stored, and nothing was sent.
        own, _ = await fm.model_settings("c1")
        assert (own.model, own.max_tokens) == ("claude-sonnet-4-6", 2048)
    assert api.requests == []


# Each value's own range, checked as given (not only once the config fills the gaps) and
# whatever the thinking mode: a value the API would refuse is never stored.
OUT_OF_RANGE: list[tuple[dict[str, Any], str]] = [
    ({"max_tokens": 0}, "max_tokens: must be at least 1"),
    ({"max_tokens": -5}, "max_tokens: must be at least 1"),
    ({"max_tokens": 2**63}, "max_tokens: must be at least 1 (and at most 9223372036854775807)"),
    ({"budget_tokens": -1}, "budget_tokens: must be at least 1024"),
    ({"thinking": "off", "budget_tokens": -1}, "budget_tokens: must be at least 1024"),
    ({"thinking": "off", "budget_tokens": 2**63}, "at most 9223372036854775807), got"),
    ({"model": "claude-fable-5-1", "thinking": "adaptive", "budget_tokens": 1023}, "at least 1024"),
    ({"model": "a\x00b"}, "model: 'a\\x00b' is not a model name"),
    ({"model": ""}, "is not a model name"),
    ({"model": "claude-opus-4-6 "}, "is not a model name"),
    ({"model": "c" * 257}, "is not a model name"),
    # A made-up date on a known alias: no model the API (local or real) takes.
    ({"model": "claude-sonnet-4-5-20991231"}, "is not a model Frontmind knows"),
]


@pytest.mark.parametrize(("settings", "fragment"), OUT_OF_RANGE)
async def test_values_out_of_range_are_refused_whatever_the_thinking_mode(
    api: LocalMessagesAPI, tmp_path: Path, settings: dict[str, Any], fragment: str
) -> None:
    async with frontmind(api, tmp_path) as fm:
        await fm.set_model_settings("c1", max_tokens=2048)
        with pytest.raises(InvalidModelSettings) as info:
            await fm.set_model_settings("c1", **settings)
        assert fragment in str(info.value)
        assert (await fm.model_settings("c1"))[0] == ContinuumModel(max_tokens=2048)
    assert api.requests == []


async def test_a_refused_name_is_quoted_as_an_excerpt(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        with pytest.raises(InvalidModelSettings) as info:
            await fm.set_model_settings("c1", model="x" * 10_000_000)
    assert "…(9999960 more characters)…" in str(info.value)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("field", ["thinking", "effort", "thinking_display"])
async def test_a_refused_choice_is_quoted_as_an_excerpt(
    api: LocalMessagesAPI, tmp_path: Path, field: str
) -> None:
    # msgspec's "Invalid enum value '…'" quotes the value whole: the daemon's answer
    # cut it to an excerpt, the library's error kept all ten million characters.
    async with frontmind(api, tmp_path) as fm:
        refused: dict[str, Any] = {field: "x" * 10_000_000}
        with pytest.raises(InvalidModelSettings) as info:
            await fm.set_model_settings("c1", **refused)
    assert re.search(r"…\(99999\d\d more characters\)…", str(info.value))
    assert f"$.{field}" in str(info.value)
    assert len(str(info.value)) < 300


async def test_settings_stored_before_the_ranges_were_checked_read_as_unset(
    tmp_path: Path,
) -> None:
    """A row written before (a 0 max_tokens, a NUL in the name) does not fail every read
    and turn of its continuum: its refused values read as the config's."""
    responder = ScriptedResponder()
    responder.push("Hello.")
    async with LocalMessagesAPI(responder=responder) as api:
        async with frontmind(api, tmp_path) as fm:
            await fm.set_model_settings("c1", max_tokens=2048)
        with closing(sqlite3.connect(tmp_path / "frontmind.db")) as db, db:
            updated = db.execute(
                "UPDATE continuum_settings SET settings = ?",
                (b'{"model": "a\\u0000b", "max_tokens": 0, "budget_tokens": -1, "effort": "low"}',),
            ).rowcount
        assert updated == 1
        async with frontmind(api, tmp_path) as fm:
            own, effective = await fm.model_settings("c1")
            assert own == ContinuumModel(effort="low")
            assert (effective.name, effective.max_tokens) == (fm.config.model.name, 1024)
            completed(await run_turn(fm, "c1", "hello"))
        assert api.message_bodies()[-1]["max_tokens"] == 1024


ACCEPTED: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
    ({"model": "claude-fable-5-1", "thinking": "adaptive"}, {"type": "adaptive"}),
    ({"model": "claude-opus-5", "thinking": "off", "effort": "high"}, {"type": "disabled"}),
    ({"model": "claude-sonnet-5", "thinking": "off", "effort": "max"}, {"type": "disabled"}),
    ({"model": "claude-opus-4-8", "thinking": "off"}, None),  # off by default: omitted
    (
        {"model": "claude-opus-4-6", "thinking": "enabled", "budget_tokens": 1024},
        {"type": "enabled", "budget_tokens": 1024},
    ),
    (
        {"model": "claude-haiku-4-5-20251001", "thinking": "enabled", "budget_tokens": 1024},
        {"type": "enabled", "budget_tokens": 1024},
    ),
]


@pytest.mark.parametrize(("settings", "thinking"), ACCEPTED)
async def test_accepted_settings_send_what_the_model_takes(
    api: LocalMessagesAPI, tmp_path: Path, settings: dict[str, Any], thinking: Any
) -> None:
    async with frontmind(api, tmp_path) as fm:
        await fm.set_model_settings("c1", max_tokens=4096, **settings)
        request = json.loads(msgspec.json.encode(await fm.context("c1", "hi")))
    assert request.get("thinking") == thinking


async def test_a_turn_refuses_settings_the_catalog_no_longer_allows(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    """A turn checks its settings before any model call: settings stored while a config
    `[[models]]` row allowed them are refused once it no longer does."""
    loose = config(models=[{"name": "claude-opus-4-8", "thinking_types": ["enabled", "adaptive"]}])
    async with frontmind(api, tmp_path, cfg=loose) as fm:
        await fm.set_model_settings(
            "c1", model="claude-opus-4-8", thinking="enabled", budget_tokens=1024, max_tokens=4096
        )
    async with frontmind(api, tmp_path) as fm:
        events = await run_turn(fm, "c1", "hello")
    error = events[-1]
    assert getattr(error, "type", None) == "configuration_error"
    assert '"thinking.type.enabled" is not supported' in getattr(error, "message", "")
    assert api.requests == []


# -- the README's example ---------------------------------------------------------------------


def _readme_settings() -> dict[str, Any]:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"await fm\.set_model_settings\((.*?)\)\n", readme, flags=re.S)
    assert match is not None, "the README shows set_model_settings"
    call = ast.parse(f"f({match.group(1)})", mode="eval").body
    assert isinstance(call, ast.Call)
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None}


def test_the_readme_example_settings_pass_the_check() -> None:
    settings = _readme_settings()
    choice = ModelChoice(
        name=settings["model"],
        max_tokens=settings.get("max_tokens", 1024),
        thinking=settings.get("thinking", "off"),
        budget_tokens=settings.get("budget_tokens", 2048),
        effort=settings.get("effort"),
    )
    assert check_model_choice(choice, "frame", shipped_catalog()) == choice


async def test_the_readme_example_settings_are_accepted_and_sent(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    settings = _readme_settings()
    async with frontmind(api, tmp_path) as fm:
        await fm.set_model_settings("ada", **settings)
        request = await fm.context("ada", "hi")
    assert request.model == settings["model"]
    assert request.thinking is not None
    assert request.thinking.type == settings["thinking"]


# -- switching models ----------------------------------------------------------------------------


async def test_a_switch_drops_thinking_the_new_model_cannot_read_and_says_what_it_costs(
    tmp_path: Path,
) -> None:
    responder = ScriptedResponder()
    responder.push(
        Reply((ReplyThinking("Let me think about cats."), ReplyText("Cats purr."))),
        Reply((ReplyThinking("And dogs."), ReplyText("Dogs bark."))),
        "Birds sing.",
        "Fish swim.",
    )
    cfg = config(model={"name": "claude-fable-5-1", "thinking": "adaptive", "max_tokens": 4096})
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, cfg=cfg) as fm,
    ):
        first = completed(await run_turn(fm, "c1", "cats?"))
        second = completed(await run_turn(fm, "c1", "dogs?"))
        assert first.warnings == second.warnings == ()
        # Back to an earlier model, which cannot read a 5.1 thinking block.
        await fm.set_model_settings("c1", model="claude-opus-4-8", thinking="off")
        switched = completed(await run_turn(fm, "c1", "birds?"))
        after = completed(await run_turn(fm, "c1", "fish?"))
        bodies = api.message_bodies()
        stored = await fm.history("c1")
        records = await fm.turns("c1")
    assert any(
        "2 thinking block(s) written by claude-fable-5-1 are left out of the replay" in w
        and "claude-opus-4-8 cannot read them" in w
        for w in switched.warnings
    ), switched.warnings
    assert any(
        "the model changed from claude-fable-5-1 to claude-opus-4-8" in w
        and "wrote the whole prefix again" in w
        for w in switched.warnings
    ), switched.warnings
    assert after.warnings == ()  # said once, on the turn of the switch
    for body in bodies[2:]:
        kinds = [b["type"] for m in body["messages"] for b in m["content"]]
        assert "thinking" not in kinds
    # The store keeps the thinking: a switch back would read it again.
    assert any(isinstance(b, RawBlock) and b.kind == "thinking" for b in stored[1].content)
    assert records[-2].warnings == switched.warnings  # the turn record says so too
    assert switched.usage.cache_read_input_tokens == 0  # the cache is per model


async def test_a_switch_back_within_the_ttl_reads_the_cache_and_says_so(tmp_path: Path) -> None:
    # Caches are per model, but each model's entries live on: back on the first model
    # within their TTL, the turn reads its old prefix, and its warning must say what
    # happened, not that the whole prefix was written again (and what that cost).
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        for text in ("one " * 200, "two"):
            completed(await run_turn(fm, "c1", text))
        await fm.set_model_settings("c1", model="claude-opus-4-8")
        away = completed(await run_turn(fm, "c1", "three"))
        await fm.set_model_settings("c1", model="claude-sonnet-4-6")
        back = completed(await run_turn(fm, "c1", "four"))
    assert back.usage.cache_read_input_tokens > 0  # sonnet's own entries were alive
    (said,) = [w for w in back.warnings if "the model changed" in w]
    assert "whole prefix" not in said, said
    assert f"{back.usage.cache_read_input_tokens:,} tokens of this prefix were still cached" in said
    assert f"this turn wrote {back.usage.cache_creation_input_tokens:,}" in said
    # Away, nothing was cached for opus: its figure is what the call wrote.
    assert away.usage.cache_read_input_tokens == 0
    assert any(
        "to claude-opus-4-8" in w
        and f"wrote the whole prefix again ({away.usage.cache_creation_input_tokens:,} tokens" in w
        for w in away.warnings
    ), away.warnings


async def test_a_model_that_reads_the_old_blocks_keeps_them(tmp_path: Path) -> None:
    responder = ScriptedResponder()
    responder.push(
        Reply((ReplyThinking("Thinking on 4.6."), ReplyText("One."))),
        "Two.",
    )
    cfg = config(model={"name": "claude-opus-4-6", "thinking": "adaptive", "max_tokens": 4096})
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, cfg=cfg) as fm,
    ):
        completed(await run_turn(fm, "c1", "one?"))
        # Fable 5 reads the blocks of the models before it and runs no prefix check.
        await fm.set_model_settings("c1", model="claude-fable-5")
        switched = completed(await run_turn(fm, "c1", "two?"))
        body = api.message_bodies()[-1]
    kinds = [b["type"] for m in body["messages"] for b in m["content"]]
    assert "thinking" in kinds
    assert not any("left out of the replay" in w for w in switched.warnings)
    assert any("the model changed" in w for w in switched.warnings)


async def test_a_prefix_checked_model_gets_no_stored_thinking_and_keeps_its_loop_s(
    tmp_path: Path,
) -> None:
    """Fable 5.1 checks that nothing before a replayed thinking block changed; every turn
    drops the notification center its blocks were written after, so the stored turns'
    thinking is left out (the local API, as a new account, answers 400 otherwise) while
    the current tool loop sends its own back, leading its assistant turn."""
    responder = ScriptedResponder()
    responder.push(
        Reply((ReplyThinking("Cats first."), ReplyText("Cats purr."))),
        Reply((ReplyThinking("I will list them."), ReplyToolUse("list_reminders", {}))),
        Reply((ReplyThinking("Nothing due."), ReplyText("No reminders."))),
    )
    cfg = config(model={"name": "claude-fable-5-1", "thinking": "adaptive", "max_tokens": 4096})
    async with (
        LocalMessagesAPI(responder=responder, account="new") as api,
        frontmind(api, tmp_path, cfg=cfg) as fm,
    ):
        completed(await run_turn(fm, "c1", "cats?"))
        second = completed(await run_turn(fm, "c1", "list my reminders"))
        bodies = api.message_bodies()
    assert second.warnings == ()
    loop_call = bodies[-1]["messages"]
    # Before the last three (the user's words, the call, its result): the stored turns.
    history = loop_call[: len(loop_call) - 3]
    assert not any(b["type"] == "thinking" for m in history for b in m["content"])
    assert loop_call[-2]["role"] == "assistant"
    assert loop_call[-2]["content"][0]["type"] == "thinking"  # this turn's own


async def test_a_dated_id_the_data_lists_is_taken_and_priced_as_its_row(
    api: LocalMessagesAPI, tmp_path: Path
) -> None:
    async with frontmind(api, tmp_path) as fm:
        _, choice = await fm.set_model_settings("c1", model="claude-sonnet-4-5-20250929")
        assert choice.name == "claude-sonnet-4-5-20250929"
        catalog = fm.models
        row = catalog.lookup("claude-sonnet-4-5-20991231")  # a record's model, priced
        assert row is not None
        assert row.name == "claude-sonnet-4-5"
        assert catalog.listed("claude-sonnet-4-5-20991231") is None  # but never asked for
