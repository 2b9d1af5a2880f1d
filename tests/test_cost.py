"""One price table (the model data) and one cost function, used by the daemon's continuum
list and turn records, `frontmind stats`, the demo, the simulator and the console."""

from __future__ import annotations

from pathlib import Path

import httpx2
import msgspec
import pytest

from actors import cost, input_cost, records_cost
from frontmind import Client
from frontmind._models import load_catalog, local_api_rows, shipped_catalog
from frontmind.cli._chat import RemoteBackend
from frontmind.cli._render import render_stats
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyRawBlock, ReplyText, ScriptedResponder
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from storage import TurnUsage
from tests._daemon import run_cli
from tests._harness import completed, config, frontmind, run_turn

pytestmark = pytest.mark.anyio

USAGE = TurnUsage(
    input_tokens=1_000,
    cache_creation_input_tokens=3_000,
    cache_read_input_tokens=100_000,
    output_tokens=500,
    cache_creation_5m=1_000,
    cache_creation_1h=2_000,
)


def test_each_model_is_priced_on_its_row() -> None:
    catalog = shipped_catalog()
    sonnet = cost(USAGE, catalog.lookup("claude-sonnet-4-6"))  # $3 / $15, reads 0.1x
    # Base-price tokens: 1,000 + 1,000 x 1.25 + 2,000 x 2 + 100,000 x 0.1.
    assert sonnet.input_tokens == pytest.approx(16_250)
    assert sonnet.uncached_usd == pytest.approx(0.003)
    assert sonnet.write_5m_usd == pytest.approx(0.00375)
    assert sonnet.write_1h_usd == pytest.approx(0.012)
    assert sonnet.read_usd == pytest.approx(0.03)
    assert sonnet.output_usd == pytest.approx(0.0075)
    assert sonnet.total_usd == pytest.approx(0.05625)
    fable = cost(USAGE, catalog.lookup("claude-fable-5-1"))  # $10 / $50, reads 0.025x
    assert fable.input_tokens == pytest.approx(1_000 + 1_250 + 4_000 + 2_500)
    assert fable.read_usd == pytest.approx(0.025)  # a quarter of Fable 5's
    assert cost(USAGE, catalog.lookup("claude-fable-5")).read_usd == pytest.approx(0.1)
    opus55 = cost(USAGE, catalog.lookup("claude-opus-5-5"))
    assert opus55.read_usd == pytest.approx(100_000 * 0.05 * 4 / 1_000_000)
    # A model nobody knows: the documented multipliers, no dollars.
    unknown = cost(USAGE, None)
    assert unknown.input_tokens == pytest.approx(16_250)
    assert unknown.input_usd is None
    assert unknown.total_usd is None
    assert input_cost(USAGE, catalog.lookup("claude-fable-5-1")) == fable.input_tokens


def test_server_tool_requests_are_in_the_total() -> None:
    catalog = shipped_catalog()
    sonnet = catalog.lookup("claude-sonnet-4-6")
    searched = msgspec.structs.replace(USAGE, web_search_requests=3, web_fetch_requests=2)
    spent, tokens = cost(searched, sonnet), cost(USAGE, sonnet)
    # $10 per 1,000 searches; fetches cost only their tokens (the price table's figures).
    assert spent.server_tools_usd == pytest.approx(0.03)
    assert tokens.total_usd is not None
    assert spent.total_usd == pytest.approx(tokens.total_usd + 0.03)
    assert spent.input_usd == tokens.input_usd  # not input: beside it
    assert (spent + spent).server_tools_usd == pytest.approx(0.06)
    # A model without dollar prices has no total, though its searches are counted.
    unknown = cost(searched, None)
    assert unknown.total_usd is None
    assert unknown.server_tools_usd == pytest.approx(0.03)
    # A [[models]] row may correct the price, as any price.
    dearer = msgspec.structs.replace(sonnet, web_search_price=0.02) if sonnet else None
    assert cost(searched, dearer).server_tools_usd == pytest.approx(0.06)


def test_older_records_without_a_split_count_writes_at_5m() -> None:
    old = TurnUsage(input_tokens=10, cache_creation_input_tokens=100)
    assert input_cost(old) == pytest.approx(10 + 125)


async def test_the_daemon_prices_turns_and_continuums_on_each_turn_s_model(
    tmp_path: Path,
) -> None:
    responder = ScriptedResponder()
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    searched = Reply(
        (ReplyRawBlock({**search, "input": {"query": "x"}}), ReplyRawBlock(found), ReplyText("2"))
    )
    responder.push("one", searched, "three")
    cfg = config(server_tool=[{"type": "web_search_20250305"}])
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, cfg=cfg) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        completed(await run_turn(fm, "c1", "hello"))
        await fm.set_model_settings("c1", model="claude-fable-5-1", thinking="adaptive")
        completed(await run_turn(fm, "c1", "again"))
        completed(await run_turn(fm, "c1", "and again"))
        records = await fm.turns("c1")
        turns = (await client.get("/v1/continuums/c1/turns")).json()["turns"]
        listed = (await client.get("/v1/continuums")).json()["continuums"]
    catalog = shipped_catalog()
    assert [t["model"] for t in turns] == [
        "claude-sonnet-4-6",
        "claude-fable-5-1",
        "claude-fable-5-1",
    ]
    for wire, record in zip(turns, records, strict=True):
        spent = cost(record.usage, catalog.lookup(record.model))
        assert wire["input_cost_tokens"] == pytest.approx(spent.input_tokens)
        assert wire["input_cost_usd"] == pytest.approx(spent.input_usd)
        assert wire["cost_usd"] == pytest.approx(spent.total_usd)
    assert records[1].usage.web_search_requests == 1  # priced in its turn's cost_usd above
    total = records_cost(records, catalog)
    assert total.server_tools_usd == pytest.approx(0.01)
    (summary,) = listed
    assert summary["input_cost_tokens"] == pytest.approx(total.input_tokens)
    assert summary["cost_usd"] == pytest.approx(total.total_usd)
    # `frontmind stats` shows the same figures.
    stats = render_stats(records, catalog=catalog)
    assert f"input {total.input_tokens:,.0f} base-price tokens" in stats
    assert total.input_usd is not None
    assert f"${total.input_usd:,.4f}" in stats
    assert f"with output and server tools ${total.total_usd:,.4f}" in stats
    # A failed turn's finished calls were billed: `stats` counts them, as the daemon's
    # continuum summary does (it counted completed turns alone).
    failed = msgspec.structs.replace(records[0], turn_id="t-failed", status="failed")
    with_failed = records_cost([*records, failed], catalog)
    stats = render_stats([*records, failed], catalog=catalog)
    assert f"input {with_failed.input_tokens:,.0f} base-price tokens" in stats
    assert with_failed.input_tokens > total.input_tokens


async def test_stats_from_a_daemon_show_the_daemon_s_prices(tmp_path: Path) -> None:
    """`frontmind stats --url` and the chat's `/stats` on a daemon show what the daemon
    priced, with the model rows of the daemon's config: they priced its turn records
    again on the model data of the machine they ran on (or the shipped data alone), and
    said "price unknown", or another sum, for the daemon's own figures."""
    responder = ScriptedResponder()
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    searched = Reply(
        (ReplyRawBlock({**search, "input": {"query": "x"}}), ReplyRawBlock(found), ReplyText("2"))
    )
    responder.push("one", searched)  # the search on the daemon's own model
    own_rows = [
        # A model of the daemon's own, and a price of its own for one the data knows.
        {"name": "claude-private-1", "context_window": 200_000, "max_output": 8_192,
         "input_price": 7.0, "output_price": 30.0, "web_search_price": 0.5},
        {"name": "claude-sonnet-4-6", "input_price": 1000.0},
    ]  # fmt: skip
    cfg = config(server_tool=[{"type": "web_search_20250305"}], models=own_rows)
    rows = local_api_rows(load_catalog(cfg.models), cfg.models)  # the local API serves it
    async with (
        LocalMessagesAPI(responder=responder, models=rows) as api,
        frontmind(api, tmp_path / "daemon", cfg=cfg) as fm,
        serve_app(build_app(fm)) as served,
        Client(served.url) as client,
    ):
        completed(await run_turn(fm, "ada", "hello"))
        await fm.set_model_settings("ada", model="claude-private-1")
        completed(await run_turn(fm, "ada", "again"))
        async with httpx2.AsyncClient(base_url=served.url, timeout=30) as http:
            turns = (await http.get("/v1/continuums/ada/turns")).json()["turns"]
        chat_stats = await RemoteBackend(client, "ada").stats()
        code, cli_stats, err = await run_cli(
            "stats", "--url", served.url, FRONTMIND_DATA_DIR=str(tmp_path / "elsewhere")
        )
    assert code == 0, err
    assert [t["model"] for t in turns] == ["claude-sonnet-4-6", "claude-private-1"]
    tokens = sum(t["input_cost_tokens"] for t in turns)
    input_usd = sum(t["input_cost_usd"] for t in turns)
    total_usd = sum(t["cost_usd"] for t in turns)
    for stats in (chat_stats, cli_stats):
        assert (
            f"cost            input {tokens:,.0f} base-price tokens (${input_usd:,.4f}),"
            f" with output and server tools ${total_usd:,.4f}"
        ) in stats, stats
        assert "1 web searches, 0 web fetches: $0.5000" in stats, stats
