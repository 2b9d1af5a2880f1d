"""Cache economics: the adaptive TTL policy, the TTL order rule, the compact frame, the
user_message channel and `frontmind simulate`."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import msgspec
import pytest

from actors import (
    AdaptivePolicy,
    AnthropicModel,
    CacheView,
    FixedPolicy,
    input_cost,
    render_notification_center,
)
from actors._cache_book import CacheBook
from actors._notification import COMPACT_DELIMITER, DELIMITER
from actors._ttl import CHOICES, TTL_SECONDS, full_state_of, next_full, plan, system_entry_after
from frontmind import Frontmind
from frontmind.cli._render import render_context, render_stats
from frontmind.cli._simulate import OraclePolicy, parse_script, simulate_run, write_chart
from frontmind.localapi import LocalMessagesAPI, ManualClock
from storage import TtlChoice, TurnRecord, TurnUsage, moment
from tests._daemon import run_cli
from tests._harness import START, FakeClock, cache_marks, completed, config, frontmind, run_turn

MIN, HOUR = 60.0, 3600.0


def view(
    pauses: tuple[float, ...],
    *,
    reusable: float = 1.0,
    history: int = 3000,
    increment: int = 60,
    system: int = 1500,
) -> CacheView:
    return CacheView(
        now=START,
        pauses=pauses,
        since_last=pauses[-1] if pauses else None,
        previous=TtlChoice("1h", "5m") if pauses else None,
        system_tokens=system,
        history_tokens=history,
        increment_tokens=increment,
        reusable=reusable,
    )


def choice(
    pauses: tuple[float, ...], *, reusable: float = 1.0, history: int = 3000, increment: int = 60
) -> tuple[str, str]:
    v = view(pauses, reusable=reusable, history=history, increment=increment)
    chosen = AdaptivePolicy("1h", "5m").choose(v)
    return chosen.system, chosen.history


# -- the adaptive policy, on crafted pause histories ---------------------------------------


def test_before_any_pause_the_prior_alone_decides() -> None:
    # The first turn writes only the system prompt: at 1h it would cost 0.75x more for
    # sure, at 5m only if the next pause is medium (a third, by the prior).
    first = msgspec.structs.replace(view(()), history_tokens=0, increment_tokens=0)
    chosen = AdaptivePolicy("1h", "5m").choose(first)
    assert (chosen.system, chosen.history) == ("5m", "5m")
    assert "no pause seen yet, the prior alone; all to write" in chosen.reason


def test_a_few_quick_pauses_do_not_rule_out_medium_ones() -> None:
    # Without the prior, three quick pauses would make a medium one impossible and the
    # 3,000-token history would be bet on 5m; the prior keeps it at 1h until quick
    # pauses are the clear habit.
    assert choice((2 * MIN,) * 3) == ("1h", "1h")
    assert choice((2 * MIN,) * 40) == ("1h", "5m")


def test_quick_exchanges_keep_the_cheaper_5m_history() -> None:
    assert choice((1 * MIN, 3 * MIN, 2 * MIN, 4 * MIN) * 10)[1] == "5m"


def test_pauses_between_5_and_60_minutes_earn_a_1h_history() -> None:
    pauses = (2 * MIN, 20 * MIN, 3 * MIN, 45 * MIN, 1 * MIN, 12 * MIN, 2 * MIN)
    chosen = AdaptivePolicy("1h", "5m").choose(view(pauses))
    assert (chosen.system, chosen.history) == ("1h", "1h")
    assert "of 7 pauses, 3 between 5 and 60 min" in chosen.reason


def test_one_medium_pause_is_enough_once_the_history_outweighs_the_premium() -> None:
    # 1h costs 0.75x more on each turn's increment; one re-write of the history in 20
    # pauses costs more than that once the history is much larger than an increment.
    pauses = (2 * MIN,) * 10 + (30 * MIN,) + (2 * MIN,) * 9
    assert choice(pauses, history=200, increment=60)[1] == "5m"
    assert choice(pauses, history=6000, increment=60)[1] == "1h"


def test_daily_check_ins_outlive_any_ttl_so_both_are_written_at_5m() -> None:
    assert choice((20 * HOUR, 26 * HOUR, 23 * HOUR, 49 * HOUR)) == ("5m", "5m")


def test_a_prefix_that_changes_every_turn_gains_nothing_from_1h() -> None:
    medium = (2 * MIN, 20 * MIN, 30 * MIN, 45 * MIN)
    assert choice(medium, reusable=1.0) == ("1h", "1h")
    assert choice(medium, reusable=0.0) == ("5m", "5m")


def test_only_the_most_recent_pauses_count() -> None:
    # Months of quick chat, then a habit of medium pauses: the old habit has faded out.
    pauses = (2 * MIN,) * 500 + (30 * MIN,) * 64
    assert choice(pauses) == ("1h", "1h")


def test_the_choice_is_the_cheapest_in_expectation_and_keeps_the_ttl_order() -> None:
    rng = random.Random(15)
    for _ in range(300):
        pauses = tuple(
            rng.choice((rng.uniform(10, 290), rng.uniform(310, 3500), rng.uniform(3700, 90000)))
            for _ in range(rng.randint(1, 30))
        )
        v = view(
            pauses,
            reusable=rng.random(),
            history=rng.randint(0, 50_000),
            increment=rng.randint(10, 5000),
            system=rng.randint(0, 20_000),
        )
        chosen = AdaptivePolicy("1h", "5m").choose(v)
        assert TTL_SECONDS[chosen.system] >= TTL_SECONDS[chosen.history]
        costs = plan(v, pauses)
        assert costs[chosen.system, chosen.history] == min(costs.values())


def test_the_system_entry_keeps_the_ttl_it_was_written_with() -> None:
    # Written at 5m; a later turn's 1h mark reads it, which refreshes it for 5m only.
    entry = system_entry_after(None, START, True, TtlChoice("5m", "5m"))
    assert entry == ("5m", START)
    entry = system_entry_after(entry, START + 2 * MIN, False, TtlChoice("1h", "1h"))
    assert entry == ("5m", START + 2 * MIN)
    assert system_entry_after(entry, START + 40 * MIN, False, TtlChoice("1h", "1h")) is None
    entry = system_entry_after(None, START, True, TtlChoice("1h", "5m"))
    assert system_entry_after(entry, START + 40 * MIN, False, None) == ("1h", START + 40 * MIN)


def test_the_system_entry_is_read_off_the_turn_records() -> None:
    # What the conversation actor keeps (and rebuilds from stored records on a restart).
    def record(at: float, read: int, written: int, ttl: TtlChoice) -> TurnRecord:
        usage = TurnUsage(cache_creation_input_tokens=written, cache_read_input_tokens=read)
        return TurnRecord(
            "t",
            "c",
            "completed",
            moment(at),
            moment(at + 1),
            "m",
            "hi",
            call_usage=(usage,),
            cache_ttl=ttl,
        )

    book = CacheBook()

    def entry_after(at: float, read: int, written: int, ttl: TtlChoice) -> object:
        book.absorb(record(at, read, written, ttl))
        return book.system_entry

    # Read nothing, wrote: the system prompt at 5m.
    assert entry_after(START, 0, 1500, TtlChoice("5m", "5m")) == ("5m", START)
    later = START + 2 * MIN
    assert entry_after(later, 1500, 40, TtlChoice("1h", "1h")) == ("5m", later)
    # Read the 1h history 40 minutes later: the 5m system entry is gone.
    assert entry_after(START + 40 * MIN, 1540, 40, TtlChoice("1h", "1h")) is None
    assert list(book.turn_times) == [START, later, START + 40 * MIN]
    assert book.last_ttl == TtlChoice("1h", "1h")


def test_what_a_turn_finds_alive_follows_each_entry_s_own_ttl() -> None:
    def found(previous: TtlChoice, system_entry: str | None, pause: float) -> tuple[str, object]:
        v = msgspec.structs.replace(
            view((pause,)),
            previous=previous,
            system_entry=system_entry,
            system_entry_known=True,
        )
        return full_state_of(v)

    # A 1h history outlives a 5m system entry; the system entry alone is not reread.
    assert found(TtlChoice("1h", "1h"), "5m", 30 * MIN) == ("alive", None)
    assert found(TtlChoice("1h", "5m"), "1h", 30 * MIN) == ("history", "1h")
    # A 1h mark on a system entry written at 5m did not lengthen it.
    assert found(TtlChoice("1h", "5m"), "5m", 30 * MIN) == ("all", None)
    assert found(TtlChoice("1h", "5m"), "5m", 2 * MIN) == ("alive", "5m")
    # With a 5m system entry, a 5m history risks the whole prefix on a medium pause,
    # so the policy prefers 1h for the history sooner than with a 1h system entry.
    assert next_full(("alive", "5m"), 30 * MIN, "1h", "5m") == ("all", None)
    assert next_full(("alive", "1h"), 30 * MIN, "1h", "5m") == ("history", "1h")
    assert next_full(("all", None), 30 * MIN, "1h", "5m") == ("history", "1h")


def test_the_fixed_policy_and_the_oracle() -> None:
    assert FixedPolicy("1h", "5m").choose(view((30 * MIN,))).history == "5m"
    times = [START, START + 2 * MIN, START + 32 * MIN, START + 26 * HOUR]
    oracle = OraclePolicy(times)

    def at(now: float) -> tuple[str, str]:
        chosen = oracle.choose(msgspec.structs.replace(view((5 * MIN,)), now=now))
        return chosen.system, chosen.history

    assert at(times[0])[1] == "5m"  # the next turn comes in 2 minutes
    assert at(times[1]) == ("1h", "1h")  # then 30 minutes
    assert at(times[2])[1] == "5m"  # then a day: nothing survives it
    assert at(times[3])[1] == "5m"  # no next turn: the cheapest write


# -- the TTL order rule, through the local API ---------------------------------------------


@pytest.mark.anyio
async def test_adaptive_ttls_never_break_the_order_rule_and_are_recorded(tmp_path: Path) -> None:
    """The local API answers 400 to a 1h breakpoint after a 5m one: a conversation whose
    pauses move the choice through every combination, with tool loops (whose rolling
    breakpoint is 5m after a 1h history), completes every turn."""
    api_clock = ManualClock(START)
    clock = FakeClock(START)
    cfg = config(cache={"policy": "adaptive"})
    # Quick exchanges, then nights apart (nothing survives), then medium pauses.
    pauses = [0, 2 * MIN, 1 * MIN, 2 * MIN, 26 * HOUR, 2 * MIN, 30 * HOUR, 1 * MIN]
    pauses += [20 * MIN, 40 * MIN, 15 * MIN, 2 * MIN, 30 * MIN]
    async with LocalMessagesAPI(clock=api_clock) as api:
        async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
            for n, pause in enumerate(pauses):
                clock.advance(pause)
                api_clock.advance(pause)
                text = f"Remind me to stretch in {n + 5} minutes." if n % 3 == 2 else f"turn {n}"
                completed(await run_turn(fm, "ttl", text))
            records = await fm.turns("ttl", limit=100)
        bodies = api.message_bodies()
    choices = {(r.cache_ttl.system, r.cache_ttl.history) for r in records if r.cache_ttl}
    assert len(records) == len(pauses)
    assert choices == set(CHOICES), choices  # every combination was used
    assert all(r.cache_ttl and r.cache_ttl.reason.startswith("adaptive:") for r in records)
    assert any(r.model_calls > 1 for r in records)
    for body in bodies:
        ttls = [ttl for *_, ttl in cache_marks(body)]
        assert all(TTL_SECONDS[a] >= TTL_SECONDS[b] for a, b in pairwise(ttls)), ttls
    # The first call of every turn carries the turn's recorded choice.
    firsts = [b for b in bodies if b["messages"][-1]["content"][0].get("type") == "text"]
    for record, body in zip(records, firsts, strict=True):
        marks = cache_marks(body)
        assert record.cache_ttl is not None
        assert marks[0][3] == record.cache_ttl.system
        if len(marks) > 1:
            assert marks[-1][3] == record.cache_ttl.history


@pytest.mark.anyio
async def test_a_fixed_policy_keeps_the_configured_ttls(tmp_path: Path) -> None:
    clock = FakeClock(START)
    async with LocalMessagesAPI(clock=ManualClock(START)) as api:
        cfg = config(cache={"policy": "fixed", "history_ttl": "5m"})
        async with frontmind(api, tmp_path, cfg=cfg, clock=clock) as fm:
            for pause in (0, 30 * MIN, 30 * MIN, 30 * MIN):
                clock.advance(pause)
                completed(await run_turn(fm, "fixed", "hello"))
            records = await fm.turns("fixed")
    assert {(r.cache_ttl.system, r.cache_ttl.history) for r in records if r.cache_ttl} == {
        ("1h", "5m")
    }


# -- the compact frame and the user_message channel ------------------------------------------


def test_the_compact_frame_says_the_same_in_fewer_tokens() -> None:
    sections = [("datetime_section", "Monday 09:00", 50), ("active_reminders", "- call Bob", 40)]
    seed, _ = render_notification_center(sections, 2000)
    compact, _ = render_notification_center(sections, 2000, "compact")
    assert compact.startswith("NOTIFICATION CENTER")
    assert compact.endswith(COMPACT_DELIMITER)
    for name, content, _ in sections:
        assert f"<{name}>\n{content}\n</{name}>" in compact
    assert len(compact.encode()) < len(seed.encode()) - 300
    assert len(COMPACT_DELIMITER) < len(DELIMITER)


@pytest.mark.anyio
async def test_compact_frame_and_user_message_channel_on_the_wire(tmp_path: Path) -> None:
    async with LocalMessagesAPI() as api:
        cfg = config(composer={"frame": "compact"})
        async with frontmind(api, tmp_path / "compact", cfg=cfg) as fm:
            completed(await run_turn(fm, "c", "hello"))
        body = api.message_bodies()[-1]
        assert body["messages"][0]["content"][0]["text"] == COMPACT_DELIMITER
        assert body["messages"][1]["content"][0]["text"].startswith("NOTIFICATION CENTER")

        cfg = config(composer={"channel": "user_message"})
        async with frontmind(api, tmp_path / "user", cfg=cfg) as fm:
            completed(await run_turn(fm, "u", "first"))
            completed(await run_turn(fm, "u", "second"))
            history = await fm.history("u")
        body = api.message_bodies()[-1]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]  # no delimiter, no assistant frame
    current = body["messages"][-1]["content"]
    assert current[0]["text"].startswith("NOTIFICATION CENTER")
    assert current[-1]["text"] == "second"
    # The history keeps the user's words only: the context was stripped.
    assert [b["text"] for b in body["messages"][0]["content"]] == ["first"]
    assert [m.text() for m in history if m.role == "user"] == ["first", "second"]


# -- frontmind simulate --------------------------------------------------------------------------


def _script(tmp_path: Path) -> Path:
    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    pauses = [0, 2, 25, 1, 3, 90, 2, 40, 1]
    lines = []
    for n, minutes in enumerate(pauses):
        at += timedelta(minutes=minutes)
        text = "Remind me to call Bob in 30 minutes." if n == 3 else f"Turn {n}: what next?"
        lines.append(json.dumps({"at": at.isoformat(), "message": text}))
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_a_model_that_always_thinks_as_the_readme_shows(tmp_path: Path) -> None:
    """The README's `--model claude-fable-5-1` (a model that takes system messages) was
    refused at once for the default `thinking = "off"`, which it cannot turn off: the
    replay now thinks as the model must, and says so."""
    code, out, err = await run_cli(
        "simulate", str(_script(tmp_path)), "--model", "claude-fable-5-1",
        "--layout", "system_message", "--ttl", "5m", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert 'claude-fable-5-1 cannot turn thinking off: thinking = "adaptive"' in err
    (row,) = json.loads(out)["rows"]
    assert (row["layout"], row["ttl"]) == ("system_message", "5m")
    assert row["cache_read"] > 0


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_json_rows(tmp_path: Path) -> None:
    code, out, err = await run_cli("simulate", str(_script(tmp_path)), "--json")
    assert code == 0, err
    body = json.loads(out)
    rows = body["rows"]
    layouts = {r["layout"] for r in rows}
    assert {"notification", "user_message", "system_prompt", "none"} <= layouts
    assert set(body.get("not_available", [])) | layouts == {
        "notification",
        "system_message",
        "user_message",
        "system_prompt",
        "none",
    }
    keys = {"layout", "ttl", "input_cost", "cache_read", "cache_write", "uncached"}
    keys |= {"cache_write_5m", "cache_write_1h", "turns"}
    warm = {"warm_ups", "warm_cost", "warm_output_tokens"}  # the adaptive+warm row's
    # What summarising cost beside the turns (segment summaries; server compactions).
    summaries = {"summaries", "summary_cost", "summary_output_tokens", "output_tokens"}
    summaries |= {"compactions", "compaction_cost", "compaction_output_tokens"}
    assert all(set(r) == keys | {"avoidable_misses"} | warm | summaries for r in rows)
    assert len(rows) == 5 * len(layouts)
    for r in rows:
        # The writes split by TTL, and one row per turn that adds up to the totals (but
        # for the warm-ups between turns, which no turn's row holds).
        assert r["cache_write_5m"] + r["cache_write_1h"] == r["cache_write"]
        turns = r["turns"]
        assert [t["turn"] for t in turns] == list(range(1, 10))
        assert turns[3]["at"] == "2026-11-30T09:28:00+00:00"
        for key in ("cache_read", "cache_write_5m", "cache_write_1h", "uncached"):
            assert sum(t[key] for t in turns) <= r[key], key
            if r["warm_ups"] == 0:
                assert sum(t[key] for t in turns) == r[key], key
        for t in turns:
            u = TurnUsage(
                input_tokens=t["uncached"],
                cache_read_input_tokens=t["cache_read"],
                cache_creation_input_tokens=t["cache_write_5m"] + t["cache_write_1h"],
                cache_creation_5m=t["cache_write_5m"],
                cache_creation_1h=t["cache_write_1h"],
            )
            assert t["input_cost"] == round(input_cost(u), 2)
            assert t["output_tokens"] > 0
        if r["warm_ups"] == 0:
            assert abs(sum(t["input_cost"] for t in turns) - r["input_cost"]) < 0.1
    # Two policies that write the same tokens at different TTLs cost differently, and
    # the rows say why.
    fixed = {r["ttl"]: r for r in rows if r["layout"] == "notification"}
    assert fixed["1h"]["cache_write_1h"] > fixed["5m"]["cache_write_1h"]
    assert fixed["1h"]["cache_write_5m"] < fixed["5m"]["cache_write_5m"]
    assert fixed["5m"]["turns"][1]["ttl"] == ["1h", "5m"]
    cost = {(r["layout"], r["ttl"]): r["input_cost"] for r in rows}
    for layout in layouts:
        policies = {ttl: cost[(layout, ttl)] for ttl in ("5m", "1h", "adaptive", "oracle")}
        assert policies["oracle"] <= policies["adaptive"], (layout, policies)
        # After the 90-minute pause the segment's summary rides the cache; it writes the
        # next turn's history entry, at the TTL the policy chooses for that turn, so the
        # 40-minute pause after it re-writes nothing: nothing is left for a warm-up.
        # (The legacy layout re-writes its prefix every turn: a warm-up there is a bet.)
        if layout != "system_prompt":
            assert cost[(layout, "adaptive+warm")] <= policies["adaptive"], (layout, policies)
        assert policies["adaptive"] < min(policies["5m"], policies["1h"]), (layout, policies)
    for ttl in ("5m", "1h", "adaptive", "oracle"):
        assert cost[("none", ttl)] <= min(cost[(layout, ttl)] for layout in layouts), ttl
    assert all(r["avoidable_misses"] == 0 for r in rows)
    assert all(r["cache_read"] > 0 and r["uncached"] > 0 for r in rows)
    # The system prompt layout re-writes its whole prefix every turn.
    assert cost[("system_prompt", "5m")] > 2 * cost[("notification", "5m")]


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_chart_needs_matplotlib_and_says_so_before_running(
    tmp_path: Path,
) -> None:
    # A matplotlib that cannot be imported, found first on the path.
    broken = tmp_path / "site" / "matplotlib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('not installed here')\n")
    script = _script(tmp_path)
    code, out, err = await run_cli(
        "simulate", str(script), "--chart", str(tmp_path / "cost.png"),
        PYTHONPATH=str(tmp_path / "site"),
    )  # fmt: skip
    assert code == 2
    assert err.strip() == (
        "frontmind: error: --chart needs matplotlib: pip install matplotlib "
        "(or '.[bench]' in the clone)"
    )
    assert out == ""  # nothing was run: no table


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_refuses_a_chart_it_cannot_write_before_running(tmp_path: Path) -> None:
    # It ran the whole replay, printed its table, then died in matplotlib's savefig
    # with a traceback.
    script = _script(tmp_path)
    for chart, said in (
        (tmp_path / "no" / "such" / "cost.png", "no directory"),
        (tmp_path, "is a directory"),
    ):
        code, out, err = await run_cli("simulate", str(script), "--chart", str(chart))
        assert code == 2, err
        assert err.startswith(f"frontmind: error: --chart {chart}: "), err
        assert said in err
        assert len(err.strip().splitlines()) == 1, err
        assert out == ""  # nothing was run: no table


@pytest.mark.anyio
async def test_the_chart_draws_the_policies_asked_for(tmp_path: Path) -> None:
    script = parse_script(_script(tmp_path).read_text())[:4]
    rows = [
        (await simulate_run(script, layout="notification", policy=ttl))[0] for ttl in ("5m", "1h")
    ]
    path = tmp_path / "cost.png"
    assert write_chart(rows, path) == ["5m", "1h"]
    assert path.read_bytes().startswith(b"\x89PNG")


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_refuses_a_bad_script_with_the_line_at_fault(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"at": "2026-11-30T09:00:00+00:00", "message": "hi"}\n{"at": "tomorrow"}\n')
    code, _, err = await run_cli("simulate", str(path))
    assert code == 2
    assert "line 2" in err
    assert "Traceback" not in err
    path.write_text('{"at": "2026-11-30T09:00:00", "message": "no offset"}\n')
    code, _, err = await run_cli("simulate", str(path))
    assert code == 2
    assert "offset" in err


def test_an_exported_continuum_is_a_script() -> None:
    export = {
        "messages": [
            {"seq": 0, "turn_id": "t1", "role": "user", "created_at": START + 5,
             "content": [{"type": "text", "text": "hello"}]},
            {"seq": 1, "turn_id": "t1", "role": "assistant", "created_at": START + 5,
             "content": [{"type": "text", "text": "hi"}]},
            {"seq": 2, "turn_id": "t2", "role": "user", "created_at": START + 700,
             "content": [{"type": "text", "text": "remind me"}]},
            {"seq": 3, "turn_id": "t2", "role": "assistant", "created_at": START + 700,
             "content": [{"type": "tool_use", "id": "x", "name": "list_reminders", "input": {}}]},
            {"seq": 4, "turn_id": "t2", "role": "user", "created_at": START + 700,
             "content": [{"type": "tool_result", "tool_use_id": "x", "content": "none"}]},
        ],
        "turns": [
            {"turn_id": "t1", "started_at": START},
            {"turn_id": "t2", "started_at": "2026-11-18T11:17:40+00:00"},
        ],
    }  # fmt: skip
    script = parse_script(json.dumps(export, indent=1))
    assert [(t.at - START, t.message) for t in script] == [(0.0, "hello"), (660.0, "remind me")]
    # On one line, as `json.dumps` or `jq -c` writes it: the same script, not JSON Lines.
    assert parse_script(json.dumps(export)) == script
    del export["turns"]
    script = parse_script(json.dumps(export, indent=1))
    assert [t.at - START for t in script] == [5.0, 700.0]


PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def _export_with_an_image_turn(path: Path) -> None:
    """Five user turns, the third an image alone, as `GET .../messages` exports them."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    contents = [
        [{"type": "text", "text": "hello"}],
        [{"type": "text", "text": "look at this"}],
        [image],
        [{"type": "text", "text": "what do you see?"}, image],
        [{"type": "text", "text": "thanks"}],
    ]
    messages = []
    for n, content in enumerate(contents):
        at = START + 60 * n
        messages.append({"turn_id": f"t{n}", "role": "user", "created_at": at, "content": content})
        reply = [{"type": "text", "text": "ok"}]
        messages.append(
            {"turn_id": f"t{n}", "role": "assistant", "created_at": at, "content": reply}
        )
    path.write_text(json.dumps({"messages": messages}))


def test_an_exported_turn_of_an_image_alone_is_a_turn(tmp_path: Path) -> None:
    _export_with_an_image_turn(tmp_path / "export.json")
    script = parse_script((tmp_path / "export.json").read_text())
    assert len(script) == 5
    assert [b["type"] for b in script[2].message] == ["image"]  # type: ignore[index]
    assert [b["type"] for b in script[3].message] == ["text", "image"]  # type: ignore[index]
    assert script[4].message == "thanks"


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_replays_a_turn_of_an_image_alone(tmp_path: Path) -> None:
    """`frontmind simulate` (a child process) on an export whose third turn is an image
    alone: it replays five turns, not four (the image turn was dropped unsaid, and the
    costs shifted), and each layout gets the same replies."""
    export = tmp_path / "export.json"
    _export_with_an_image_turn(export)
    args = ("--ttl", "5m", "--layout", "notification", "--layout", "user_message")
    code, out, err = await run_cli("simulate", str(export), *args)
    assert code == 0, err
    assert out.startswith("5 turns;"), out
    code, out, err = await run_cli("simulate", str(export), "--json", *args)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [len(row["turns"]) for row in rows] == [5, 5]
    # The same replies whatever the layout: the same output.
    assert rows[0]["output_tokens"] == rows[1]["output_tokens"] > 0


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_runs_the_system_message_layout_on_a_model_that_takes_it(
    tmp_path: Path,
) -> None:
    script = str(_script(tmp_path))
    args = ("--layout", "system_message", "--layout", "notification", "--ttl", "adaptive")
    code, out, err = await run_cli("simulate", script, "--json", *args)
    assert code == 0, err
    assert json.loads(out)["not_available"] == ["system_message"]  # the default model
    code, out, err = await run_cli(
        "simulate", script, "--json", "--model", "claude-opus-4-8", *args
    )
    assert code == 0, err
    rows = {r["layout"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {"system_message", "notification"}
    assert rows["system_message"]["avoidable_misses"] == 0
    # No delimiter message and no assistant frame: fewer uncached tokens every turn.
    assert rows["system_message"]["uncached"] < rows["notification"]["uncached"]


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_states_the_multipliers_it_priced_with(tmp_path: Path) -> None:
    """The table's first line names the multipliers its input cost is counted with: the
    model's own (Fable 5.1 reads at 0.025x), not the documented ones it was counted
    without, so the figures can be checked against the tokens beside them."""
    (tmp_path / "think.toml").write_text('[model]\nthinking = "adaptive"\n')
    args = ["--config", str(tmp_path / "think.toml"), "--model", "claude-fable-5-1"]
    args += ["--layout", "notification", "--ttl", "5m"]
    code, out, err = await run_cli("simulate", str(_script(tmp_path)), *args)
    assert code == 0, err
    header, _, row = out.splitlines()[:3]
    assert header.endswith(
        "(uncached 1x, cache write 1.25x for 5m and 2x for 1h, cache read 0.025x)"
    ), header
    cost, read, written_5m, written_1h, uncached = (
        int(x.replace(",", "")) for x in row.split()[2:7]
    )
    priced = read * 0.025 + written_5m * 1.25 + written_1h * 2 + uncached
    assert read > 0
    assert abs(cost - priced) <= 1, (cost, priced)


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_reads_which_models_take_system_messages_from_the_config(
    tmp_path: Path,
) -> None:
    """A `[[models]]` row of the config says what its model takes, for the simulator as
    for the daemon: a model of one's own that takes role-system messages runs the
    `system_message` layout (it was "not available": the shipped data alone was read)."""
    (tmp_path / "own.toml").write_text(
        '[[models]]\nname = "claude-private-1"\ncontext_window = 200000\n'
        "max_output = 8192\nsystem_messages = true\n"
    )
    args = ["--config", str(tmp_path / "own.toml"), "--model", "claude-private-1"]
    args += ["--layout", "system_message", "--ttl", "5m", "--json"]
    code, out, err = await run_cli("simulate", str(_script(tmp_path)), *args)
    assert code == 0, err
    body = json.loads(out)
    assert "not_available" not in body, body
    assert [row["layout"] for row in body["rows"]] == ["system_message"]


@pytest.mark.anyio
@pytest.mark.slow
async def test_simulate_takes_the_base_prompt_beside_its_config(tmp_path: Path) -> None:
    """`--config FILE` brings the base prompt in `base_prompt.md` beside the file, as it
    would one written in the file: the simulator looked for that file in the directory
    it was run from, so the same command priced another system prompt from elsewhere."""
    prompt = "You are Ada's assistant. " + " ".join(
        f"Rule {n}: be precise about topic {n}." for n in range(200)
    )
    beside, inline = tmp_path / "beside", tmp_path / "inline"
    beside.mkdir()
    inline.mkdir()
    (beside / "frontmind.toml").write_text('[model]\nname = "claude-sonnet-4-6"\n')
    (beside / "base_prompt.md").write_text(prompt)
    (inline / "frontmind.toml").write_text(f"base_prompt = {json.dumps(prompt)}\n")
    script = str(_script(tmp_path))
    costs = []
    for folder in (beside, inline):
        args = ("--config", str(folder / "frontmind.toml"), "--layout", "notification")
        code, out, err = await run_cli("simulate", script, *args, "--ttl", "5m", "--json")
        assert code == 0, err
        (row,) = json.loads(out)["rows"]
        costs.append(row["input_cost"])
    assert costs[0] == costs[1]


@pytest.mark.anyio
async def test_the_pauses_survive_a_restart_and_stats_and_inspect_show_the_ttls(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    api_clock = ManualClock(START)
    async with LocalMessagesAPI(clock=api_clock) as api:
        async with frontmind(api, tmp_path, clock=clock) as fm:
            for pause in (0, 20 * MIN, 2 * MIN, 30 * MIN):
                clock.advance(pause)
                api_clock.advance(pause)
                completed(await run_turn(fm, "r", "hello"))
        clock.advance(3 * MIN)
        api_clock.advance(3 * MIN)
        async with frontmind(api, tmp_path, clock=clock) as fm:  # a new process, same data
            completed(await run_turn(fm, "r", "hello again"))
            records = await fm.turns("r")
            request = await fm.context("r", "next")
    last = records[-1].cache_ttl
    assert last is not None
    assert "of 4 pauses, 2 between 5 and 60 min" in last.reason
    assert (last.system, last.history) == ("1h", "1h")
    stats = render_stats(records)
    assert "cache TTLs      system 1h history" in stats
    assert f"last TTL choice {last.reason}" in stats
    shown = render_context(request)
    assert "cached through here [1h]" in shown


@pytest.mark.anyio
async def test_the_context_view_counts_its_breakpoints_in_words(tmp_path: Path) -> None:
    # A new continuum's first request has one breakpoint (the system prompt's): the
    # view said "(1 breakpoints)".
    async with Frontmind.open(tmp_path, offline=True) as fm:
        first = await fm.context("c", "hi")
        completed(await run_turn(fm, "c", "hi"))
        second = await fm.context("c", "again")
    assert render_context(first).endswith("(1 breakpoint)")
    assert render_context(second).endswith("(2 breakpoints)")


@pytest.mark.anyio
async def test_stats_percentiles_are_nearest_rank(tmp_path: Path) -> None:
    # The rank was one too high: the p50 of two turns was the slower one, and the p99
    # of a hundred their max.
    async with Frontmind.open(tmp_path, offline=True) as fm:
        for text in ("one", "two"):
            completed(await run_turn(fm, "c", text))
        records = await fm.turns("c")
    fast, slow = sorted(r.total_ms for r in records)
    (line,) = (x for x in render_stats(records).splitlines() if x.startswith("turn total"))
    assert f"p50 {fast:.1f}  p90 {slow:.1f}" in line
    hundred = [msgspec.structs.replace(records[0], total_ms=float(ms)) for ms in range(1, 101)]
    (line,) = (x for x in render_stats(hundred).splitlines() if x.startswith("turn total"))
    assert line.endswith("p50 50.0  p90 90.0  p99 99.0  max 100.0")


# -- the model's own prices and cache minimum ------------------------------------------------


def test_the_plan_weighs_the_model_s_own_prices() -> None:
    from actors._ttl import turn_cost, warm_cost

    base = view((30 * MIN,) * 8, history=40_000, increment=500)
    fable = msgspec.structs.replace(base, read=0.025)  # Fable 5.1 reads at a quarter
    for state in ("alive", "system", "all"):
        for c in CHOICES:
            assert turn_cost(fable, state, *c) <= turn_cost(base, state, *c)  # type: ignore[arg-type]
    assert warm_cost(fable) < warm_cost(base)
    # Below the model's minimum cacheable prefix nothing is cached: every choice costs
    # the whole prefix at the base price.
    tiny = msgspec.structs.replace(base, system_tokens=300, history_tokens=100, min_cacheable=512)
    assert {turn_cost(tiny, "alive", *c) for c in CHOICES} == {400.0}


@pytest.mark.anyio
async def test_a_turn_plans_on_its_model_s_row(tmp_path: Path) -> None:
    seen: list[CacheView] = []

    class Recording(FixedPolicy):
        def choose(self, view: CacheView) -> TtlChoice:
            seen.append(view)
            return super().choose(view)

    cfg = config(model={"name": "claude-fable-5-1", "thinking": "adaptive", "max_tokens": 4096})
    async with LocalMessagesAPI() as api:
        model = AnthropicModel(api_key="k", base_url=api.base_url, max_retries=0, timeout=10)
        try:
            async with Frontmind.open(
                tmp_path, cfg, model=model, ttl_policy=Recording("1h", "5m")
            ) as fm:
                completed(await run_turn(fm, "c1", "hello"))
        finally:
            await model.aclose()
    assert [(v.read, v.write_5m, v.write_1h, v.min_cacheable) for v in seen] == [
        (0.025, 1.25, 2.0, 512)
    ]
