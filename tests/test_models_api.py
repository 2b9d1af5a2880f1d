"""Online, the Models API (`GET /v1/models/{id}`, through the SDK) is read the first time a
model is met, kept in storage with a refresh age, and overrides the shipped data; a 404
refuses the model at settings time. Offline, the data (and the config's `[[models]]`
rows) decide. The API here is a small real HTTP server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from actors import InvalidModelSettings, SettingsError
from frontmind import Frontmind
from frontmind._models import REFRESH_SECONDS
from storage import SQLiteStorage
from tests._daemon import daemon, turn
from tests._harness import FakeClock, config
from tests._http import read_request, tiny_server

pytestmark = pytest.mark.anyio


def _support(value: bool) -> dict[str, bool]:
    return {"supported": value}


def model_info(
    model_id: str, *, window: int, output: int, thinking: tuple[str, ...], efforts: tuple[str, ...]
) -> dict[str, Any]:
    """A `GET /v1/models/{id}` answer in the Models API's shape."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": "2026-11-01T00:00:00Z",
        "lifecycle": "active",
        "max_input_tokens": window,
        "max_tokens": output,
        "capabilities": {
            "batch": _support(True),
            "citations": _support(True),
            "code_execution": _support(True),
            "context_management": {
                "supported": True,
                "clear_tool_uses_20250919": _support(True),
                "clear_thinking_20251015": _support(True),
                "compact_20260112": _support(False),
            },
            "effort": {
                "supported": bool(efforts),
                **{level: _support(level in efforts) for level in ("low", "medium", "high")},
                "max": _support("max" in efforts),
                "xhigh": _support("xhigh" in efforts),
            },
            "image_input": _support(True),
            "pdf_input": _support(False),
            "server_tools": {"supported": True},
            "structured_outputs": _support(True),
            "thinking": {
                "supported": True,
                "types": {
                    kind: _support(kind in thinking)
                    for kind in ("adaptive", "enabled", "disabled", "between_tools")
                },
            },
        },
    }


@dataclass
class ModelsAPI:
    models: dict[str, dict[str, Any]]
    asked: list[str] = field(default_factory=list)
    url: str = ""


@asynccontextmanager
async def models_api(models: dict[str, dict[str, Any]]) -> AsyncIterator[ModelsAPI]:
    api = ModelsAPI(models)

    async def answer(client: anyio.abc.SocketStream) -> None:
        head, _ = await read_request(client)
        path = head.split(b" ", 2)[1].decode()
        model = path.removeprefix("/v1/models/").split("?")[0]
        api.asked.append(model)
        found = api.models.get(model)
        if found is None:
            status = b"404 Not Found"
            error = {"type": "not_found_error", "message": f"model: {model}"}
            body = json.dumps({"type": "error", "error": error}).encode()
        else:
            status, body = b"200 OK", json.dumps(found).encode()
        await client.send(
            b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body
        )

    async with tiny_server(answer) as url:
        api.url = url
        yield api


ANSWERS = {
    # The default model, as the data has it.
    "claude-sonnet-4-6": model_info(
        "claude-sonnet-4-6",
        window=1_000_000,
        output=64_000,
        thinking=("adaptive", "enabled", "disabled"),
        efforts=("low", "medium", "high", "max"),
    ),
    # A known model the API corrects: a smaller output limit, no manual thinking.
    "claude-opus-4-6": model_info(
        "claude-opus-4-6",
        window=500_000,
        output=32_000,
        thinking=("adaptive", "disabled"),
        efforts=("low", "medium", "high"),
    ),
    # A model newer than the shipped data.
    "claude-opus-6": model_info(
        "claude-opus-6",
        window=2_000_000,
        output=256_000,
        thinking=("adaptive",),
        efforts=("low", "medium", "high", "xhigh", "max"),
    ),
}


async def test_the_models_api_is_read_once_kept_and_overrides_the_data(tmp_path: Path) -> None:
    clock = FakeClock()
    async with models_api(ANSWERS) as api:
        async with Frontmind.open(
            tmp_path, config(), api_key="test-key", base_url=api.url, clock=clock
        ) as fm:
            assert api.asked == ["claude-sonnet-4-6"]  # the config's model, at open
            # The API's limit stands over the data's 128K.
            with pytest.raises(InvalidModelSettings, match="from 1 to 32000 for claude-opus-4-6"):
                await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=64_000)
            with pytest.raises(InvalidModelSettings, match=r'"thinking\.type\.enabled"'):
                await fm.set_model_settings(
                    "c1", model="claude-opus-4-6", thinking="enabled", budget_tokens=1024
                )
            with pytest.raises(InvalidModelSettings, match="takes effort low, medium or high"):
                await fm.set_model_settings("c1", model="claude-opus-4-6", effort="max")
            # A model the data does not know, known to the API.
            _, effective = await fm.set_model_settings(
                "c2", model="claude-opus-6", thinking="adaptive", max_tokens=200_000
            )
            assert effective.max_tokens == 200_000
            # Unknown to the API: refused at settings time, nothing stored.
            with pytest.raises(InvalidModelSettings, match="Models API answers 404") as info:
                await fm.set_model_settings("c3", model="claude-opus-99")
            assert "claude-fable-5-1" in str(info.value)  # names the known ones
            assert (await fm.model_settings("c3"))[0].model is None
            asked = list(api.asked)
            # Met once per process: no second question.
            await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=8_000)
            assert api.asked == asked
        # Kept in storage with when it was fetched.
        async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
            kept = await store.model_facts("claude-opus-4-6")
        assert kept is not None
        assert json.loads(kept[0])["max_tokens"] == 32_000
        assert kept[1] == clock.now
        # A new process within the refresh age asks nothing; after it, it asks again.
        api.asked.clear()
        async with Frontmind.open(
            tmp_path, config(), api_key="test-key", base_url=api.url, clock=clock
        ) as fm:
            await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=8_000)
        assert api.asked == []
        clock.advance(REFRESH_SECONDS + 1)
        async with Frontmind.open(
            tmp_path, config(), api_key="test-key", base_url=api.url, clock=clock
        ) as fm:
            await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=8_000)
        assert api.asked == ["claude-sonnet-4-6", "claude-opus-4-6"]


async def test_a_running_process_asks_again_once_its_answer_is_stale(tmp_path: Path) -> None:
    clock = FakeClock()
    async with (
        models_api(dict(ANSWERS)) as api,
        Frontmind.open(tmp_path, config(), api_key="test-key", base_url=api.url, clock=clock) as fm,
    ):
        await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=8_000)
        assert api.asked == ["claude-sonnet-4-6", "claude-opus-4-6"]
        clock.advance(REFRESH_SECONDS / 2)
        await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=8_000)
        assert api.asked == ["claude-sonnet-4-6", "claude-opus-4-6"]  # still fresh
        # The API's answer changes (a larger output limit); the running process
        # learns it once the answer it keeps is older than the refresh age.
        api.models["claude-opus-4-6"] = model_info(
            "claude-opus-4-6",
            window=500_000,
            output=64_000,
            thinking=("adaptive", "disabled"),
            efforts=("low", "medium", "high"),
        )
        with pytest.raises(InvalidModelSettings, match="from 1 to 32000"):
            await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=64_000)
        clock.advance(REFRESH_SECONDS / 2 + 1)
        _, effective = await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=64_000)
        assert effective.max_tokens == 64_000
        assert api.asked == ["claude-sonnet-4-6", "claude-opus-4-6", "claude-opus-4-6"]


async def test_an_unknown_config_model_is_refused_at_open_on_a_404(tmp_path: Path) -> None:
    async with models_api(ANSWERS) as api:
        with pytest.raises(SettingsError, match="Models API answers 404 not_found_error"):
            async with Frontmind.open(
                tmp_path,
                config(model={"name": "claude-nope-1"}),
                api_key="test-key",
                base_url=api.url,
            ):
                pass


async def test_what_is_no_model_name_is_never_looked_up(tmp_path: Path) -> None:
    """Online, a name outside the model-name charset or over 256 characters is refused
    before the Models API is asked (it would go into the request's path), and the
    refusal quotes only an excerpt of it."""
    async with models_api(ANSWERS) as api:
        async with Frontmind.open(tmp_path, config(), api_key="test-key", base_url=api.url) as fm:
            api.asked.clear()
            for name in ("a\x00b", "../../v1/messages", "claude opus", "c" * 257, "c" * 10**7):
                with pytest.raises(InvalidModelSettings, match="is not a model name") as info:
                    await fm.set_model_settings("c1", model=name)
                assert len(str(info.value)) < 300
            assert api.asked == []
            assert (await fm.model_settings("c1"))[0].model is None
        with pytest.raises(SettingsError, match="is not a model name"):
            async with Frontmind.open(
                tmp_path, config(model={"name": "claude/x"}), api_key="test-key", base_url=api.url
            ):
                pass
        assert api.asked == []


async def test_a_long_name_the_models_api_does_not_know_is_quoted_as_an_excerpt(
    tmp_path: Path,
) -> None:
    # A well-formed name of 256 characters reaches the Models API; its 404 quoted the
    # name whole, where every other refusal quotes an excerpt (offline's included).
    async with (
        models_api(ANSWERS) as api,
        Frontmind.open(tmp_path, config(), api_key="test-key", base_url=api.url) as fm,
    ):
        with pytest.raises(InvalidModelSettings, match="Models API answers 404") as info:
            await fm.set_model_settings("c1", model="c" * 256)
    assert "c" * 41 not in str(info.value)
    assert "more characters" in str(info.value)


async def test_config_rows_correct_the_models_api(tmp_path: Path) -> None:
    cfg = config(models=[{"name": "claude-opus-4-6", "max_output": 16_000}])
    async with (
        models_api(ANSWERS) as api,
        Frontmind.open(tmp_path, cfg, api_key="test-key", base_url=api.url) as fm,
    ):
        with pytest.raises(InvalidModelSettings, match="from 1 to 16000"):
            await fm.set_model_settings("c1", model="claude-opus-4-6", max_tokens=20_000)


async def test_an_unreachable_models_api_leaves_the_data_in_charge(tmp_path: Path) -> None:
    async with models_api(ANSWERS) as api:
        url = api.url
    # The server is gone: the data decides (and a warning is logged).
    async with Frontmind.open(
        tmp_path, config(model={"max_retries": 0}), api_key="test-key", base_url=url
    ) as fm:
        _, effective = await fm.set_model_settings(
            "c1", model="claude-opus-4-6", max_tokens=100_000
        )
    assert effective.max_tokens == 100_000


async def test_offline_an_unknown_model_needs_a_config_row(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="'claude-local-1' is not a model Frontmind knows"):
        async with Frontmind.open(
            tmp_path / "a", config(model={"name": "claude-local-1"}), offline=True
        ):
            pass
    row = {"name": "claude-local-1", "context_window": 100_000, "max_output": 8_000}
    cfg = config(model={"name": "claude-local-1"}, models=[row])
    async with Frontmind.open(tmp_path / "b", cfg, offline=True) as fm:
        with pytest.raises(InvalidModelSettings, match="from 1 to 8000"):
            await fm.set_model_settings("c1", max_tokens=9_000)


async def _one_turn(fm: Frontmind, continuum: str) -> tuple[str, str | None, str]:
    async for _ in fm.turn(continuum, "hello"):
        pass
    (record,) = await fm.turns(continuum, limit=1)
    return record.status, record.error, record.model


async def test_offline_the_local_api_serves_the_config_s_model_rows(tmp_path: Path) -> None:
    """Offline, the built-in local API serves the models Frontmind runs with: a model a
    `[[models]]` row adds runs its turns (it answered 404 `model: <name>` on every one),
    and a correction that raises a known model's max output is taken at turn time too
    (it was a 400 over the shipped row's 64,000)."""
    added = {"name": "claude-local-1", "context_window": 200_000, "max_output": 8_000}
    cfg = config(model={"name": "claude-local-1"}, models=[added])
    async with Frontmind.open(tmp_path / "a", cfg, offline=True) as fm:
        assert await _one_turn(fm, "c1") == ("completed", None, "claude-local-1")
        assert fm.local_api is not None
        sent = fm.local_api.message_bodies()[-1]
        assert sent["model"] == "claude-local-1"
    raised = {"name": "claude-sonnet-4-6", "max_output": 100_000}
    cfg = config(model={"name": "claude-sonnet-4-6", "max_tokens": 100_000}, models=[raised])
    async with Frontmind.open(tmp_path / "b", cfg, offline=True) as fm:
        assert await _one_turn(fm, "c1") == ("completed", None, "claude-sonnet-4-6")
        assert fm.local_api is not None
        assert fm.local_api.message_bodies()[-1]["max_tokens"] == 100_000


LOCAL_MODEL_CONFIG = """\
[model]
name = "claude-local-1"

[[models]]
name = "claude-local-1"
context_window = 200000
max_output = 8000
"""


def _write_config(data_dir: Path, text: str) -> None:
    (data_dir / "frontmind.toml").write_text(text)


async def test_serve_offline_serves_the_config_s_model_rows(tmp_path: Path) -> None:
    """`frontmind serve --offline` (a child process) with a frontmind.toml whose
    `[[models]]` row adds the model it runs: its turns complete."""
    _write_config(tmp_path, LOCAL_MODEL_CONFIG)
    async with daemon(tmp_path) as d, d.client() as client:
        events = await turn(client, "alice", "hello there")
        names = [name for name, _ in events]
        assert names[-1] == "turn.completed", events[-3:]
        turns = (await client.get("/v1/continuums/alice/turns")).json()["turns"]
        assert [(t["status"], t["model"]) for t in turns] == [("completed", "claude-local-1")]
        assert await d.stop() == 0


async def test_the_models_api_s_capabilities_refuse_a_server_tool(tmp_path: Path) -> None:
    """capabilities.server_tools.web_search false (say, an organization without web
    search): a [[server_tool]] web search is refused at open, naming the answer; a model
    whose answer says nothing of it keeps the data's versions."""
    answers = dict(ANSWERS)
    sonnet = json.loads(json.dumps(ANSWERS["claude-sonnet-4-6"]))
    sonnet["capabilities"]["server_tools"] = {
        "supported": False,
        "web_search": _support(False),
        "code_execution": _support(False),
    }
    answers["claude-sonnet-4-6"] = sonnet
    search = config(server_tool=[{"type": "web_search_20250305"}])
    async with models_api(answers) as api:
        with pytest.raises(
            SettingsError,
            match=r"claude-sonnet-4-6 does not take the web_search_20250305 tool: it takes no "
            r"version of web_search \(the Models API \(GET /v1/models/claude-sonnet-4-6\): "
            r".*capabilities\.server_tools\.web_search\.supported is false",
        ):
            async with Frontmind.open(tmp_path, search, api_key="test-key", base_url=api.url):
                pytest.fail("it started")
        fetch = config(server_tool=[{"type": "web_fetch_20260209"}])  # no key for web fetch
        async with Frontmind.open(tmp_path, fetch, api_key="test-key", base_url=api.url) as fm:
            # Opus 4.6's answer says nothing of server tools: the data's rows stand.
            await fm.set_model_settings("c1", model="claude-opus-4-6")
