"""One price table (the model data) and one cost function, used by the daemon's continuum
list and turn records, `frontmind stats`, the demo, the simulator and the console."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from frontmind._cost import cost, input_cost, records_cost
from frontmind._models import shipped_catalog
from frontmind.cli._render import render_stats
from frontmind.localapi import LocalMessagesAPI, ScriptedResponder
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from storage import TurnUsage
from tests._harness import completed, frontmind, run_turn

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


def test_older_records_without_a_split_count_writes_at_5m() -> None:
    old = TurnUsage(input_tokens=10, cache_creation_input_tokens=100)
    assert input_cost(old) == pytest.approx(10 + 125)


async def test_the_daemon_prices_turns_and_continuums_on_each_turn_s_model(
    tmp_path: Path,
) -> None:
    responder = ScriptedResponder()
    responder.push("one", "two", "three")
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path) as fm,
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
    total = records_cost(records, catalog)
    (summary,) = listed
    assert summary["input_cost_tokens"] == pytest.approx(total.input_tokens)
    assert summary["cost_usd"] == pytest.approx(total.total_usd)
    # `frontmind stats` shows the same figures.
    stats = render_stats(records, catalog=catalog)
    assert f"input {total.input_tokens:,.0f} base-price tokens" in stats
    assert total.input_usd is not None
    assert f"${total.input_usd:,.4f}" in stats
