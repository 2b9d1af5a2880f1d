"""`frontmind demo`: a scripted day-and-a-half conversation, run twice, offline.

Once with the notification center, once with the legacy placement (every section in the
system prompt), on the same script and the same simulated clock. The local Messages API
shares that clock, so cache entries expire across the lunch break and the night exactly
as they would for real. A live table shows each turn; the totals compare the layouts.
"""

from __future__ import annotations

import logging
import re
import sys
import tempfile
from collections.abc import Awaitable, Callable, Hashable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal, TextIO
from zoneinfo import ZoneInfo

import msgspec

from actors import (
    AnthropicModel,
    ComposerSettings,
    ModelSettings,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnError,
    input_cost,
    tool,
)
from storage import TurnRecord, TurnUsage

from .._exceptions import EdgeError
from .._frontmind import DATABASE_FILE, Frontmind
from .._models import shipped_catalog
from ..config import Config
from ..localapi import LocalMessagesAPI

__all__ = [
    "DEMO_SCRIPT",
    "LayoutTotals",
    "SimulatedClock",
    "run_conversation",
    "run_demo",
    "show_own_tool",
]

ZONE = "Europe/Berlin"
START = datetime(2026, 11, 30, 8, 55, tzinfo=ZoneInfo(ZONE)).timestamp()
MINUTE, HOUR = 60.0, 3600.0

# (simulated seconds since the previous turn, what the user says)
DEMO_SCRIPT: tuple[tuple[float, str], ...] = (
    (0, "Good morning! This week I'm launching Frontmind, so help me keep track."),
    (2 * MINUTE, "Remember that the launch is on Friday at 10:00 in the Berlin office."),
    (2 * MINUTE, "Remind me to send the press kit to Dana in 30 minutes."),
    (3 * MINUTE, "Remind me to book the rehearsal room tomorrow."),
    (2 * MINUTE, "What is on my plate this morning?"),
    (4 * MINUTE, "Remember that Dana prefers email over chat."),
    (4 * MINUTE, "Draft a two-line teaser for the launch post, please."),
    (3 * MINUTE, "Make it a little less formal."),
    (4 * MINUTE, "Good. I'm heading into a meeting now."),
    (3 * MINUTE, "Back. Did I miss anything urgent?"),
    (2 * MINUTE, "Complete reminder 1, the press kit is out."),
    (3 * MINUTE, "What did we say about the launch?"),
    (3 * HOUR, "Back from lunch. How should I structure the keynote?"),
    (3 * MINUTE, "Remember that the keynote runs 20 minutes."),
    (4 * MINUTE, "Which three points should open it?"),
    (3 * MINUTE, "Search for keynote"),
    (20 * HOUR + 50 * MINUTE, "Morning! What is still open from yesterday?"),
    (2 * MINUTE, "List my reminders"),
    (3 * MINUTE, "Remind me to rehearse the keynote in 2 hours."),
    (2 * MINUTE, "What do you remember about Dana?"),
    (3 * MINUTE, "Thanks, that's all for now."),
)

LAUNCH_PLAN = """\
Frontmind launch plan (owner: the user).
- Friday 10:00, Berlin office: keynote (20 minutes), live demo, questions.
- Press: Dana Ortiz coordinates; the press kit goes out early in the week.
- Rehearsal: book a room the day before; run the demo twice on the offline server.
- Message: long-lived agents stay fast and cheap because the expensive context stays
  cached while what changes every turn slides along in the notification center.
- Risks: venue Wi-Fi (the demo runs offline), timing (keep the keynote to 20 minutes),
  and too many slides (at most twelve).
Contacts: Dana Ortiz (press, prefers email), Lee Park (venue), Sam Ito (video).
"""


class SimulatedClock:
    """One clock for the app (called) and the local API's cache (`now()`)."""

    def __init__(self, start: float) -> None:
        self._now = start
        self._timers: dict[Hashable, tuple[float, Callable[[], Awaitable[None]]]] = {}

    def __call__(self) -> float:
        return self._now

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    # Timers (actors.Timers) on this clock: nothing fires by itself; `run_until` fires
    # the due ones in time order, the clock standing at each one's time.
    def schedule(self, key: Hashable, at: float, fire: Callable[[], Awaitable[None]]) -> None:
        self._timers[key] = (at, fire)

    def cancel(self, key: Hashable) -> None:
        self._timers.pop(key, None)

    async def run_until(self, at: float) -> int:
        """Advance to `at`, firing each timer due by then at its own time; how many fired."""
        fired = 0
        while self._timers:
            key, (due, fire) = min(self._timers.items(), key=lambda item: item[1][0])
            if due > at:
                break
            del self._timers[key]
            self._now = max(self._now, due)
            await fire()
            fired += 1
        self._now = max(self._now, at)
        return fired


class LayoutTotals(msgspec.Struct, frozen=True):
    name: str
    turns: int
    errors: int
    usage: TurnUsage
    flagged: tuple[str, ...] = ()  # system sections the cache guard warned about
    model: str = ModelSettings().name  # the model the demo runs (its prices)

    @property
    def cached_share(self) -> float:
        total = self.usage.total_input
        return self.usage.cache_read_input_tokens / total if total else 0.0

    @property
    def input_cost(self) -> float:
        return input_cost(self.usage, shipped_catalog().lookup(self.model))


_GUARDED = re.compile(r"system section '(\w+)' changed")
_CODES = {"fresh": "F", "stale": "S", "timeout": "T", "failed": "X", "empty": "·"}


def _row(index: int, at: float, text: str, record: TurnRecord | None, event: object) -> str:
    when = datetime.fromtimestamp(at, ZoneInfo(ZONE)).strftime("%a %H:%M")
    said = text if len(text) <= 34 else text[:33] + "…"
    if record is None or not isinstance(event, TurnCompleted):
        message = event.message if isinstance(event, TurnError) else "no result"
        return f"{index:>3} {when}  {said:<34}  error: {message}"
    u = record.usage
    first = f"{record.first_token_ms:6.1f}" if record.first_token_ms is not None else "     -"
    codes = "".join(_CODES[s.status] for s in record.sections)
    tools = f" +{record.model_calls - 1} tool call" if record.model_calls > 1 else ""
    return (
        f"{index:>3} {when}  {said:<34} {record.compose_ms:7.1f} {first}"
        f" {u.cache_read_input_tokens:>7,} {u.cache_creation_input_tokens:>6,}"
        f" {u.input_tokens:>6,}  {codes}{tools}"
    )


HEADER = (
    "  # time       you said                            compose  1st tok"
    "    read  write uncached  sections"
)


TurnReport = Callable[[int, float, str, TurnRecord | None, object], None]


async def run_conversation(
    script: Sequence[tuple[float, str]],
    *,
    legacy: bool,
    data_dir: Path,
    on_turn: TurnReport | None = None,
    continuum: str = "demo",
    model_settings: ModelSettings | None = None,
    channel: Literal["frame", "system_message"] = "frame",
) -> list[TurnRecord]:
    """Run a script (seconds since the previous turn, text) offline on a simulated clock
    that the local API's cache shares; returns the turn records.

    `on_turn(index, now, text, record, last_event)` is called after every turn; `model_settings`
    and `channel` choose the model settings and the notification center's channel.
    """
    clock = SimulatedClock(START)
    config = Config(
        timezone=ZONE,
        composer=ComposerSettings(legacy_placement=legacy, channel=channel),
        model=model_settings or ModelSettings(),
    )
    async with LocalMessagesAPI(clock=clock) as api:
        model = AnthropicModel(
            api_key="offline-demo", base_url=api.base_url, max_retries=2, timeout=30
        )
        try:
            async with Frontmind.open(data_dir, config, model=model, clock=clock) as fm:
                await fm.put_document("launch-plan", LAUNCH_PLAN)
                for index, (advance, text) in enumerate(script, start=1):
                    clock.advance(advance)
                    last: object = None
                    async for event in fm.turn(continuum, text):
                        last = event
                    if on_turn is not None:
                        records = await fm.turns(continuum, limit=1)
                        on_turn(index, clock(), text, records[-1] if records else None, last)
                return await fm.turns(continuum, limit=len(script) + 1)
        finally:
            await model.aclose()


async def _run_layout(
    name: str,
    legacy: bool,
    data_dir: Path,
    write: Callable[[str], None],
    script: tuple[tuple[float, str], ...],
) -> LayoutTotals:
    write(f"\n{name}\n{HEADER}\n")
    usage = TurnUsage()
    errors = 0
    flagged: set[str] = set()

    def report(index: int, now: float, text: str, record: TurnRecord | None, last: object) -> None:
        nonlocal usage, errors
        write(_row(index, now, text, record, last) + "\n")
        if isinstance(last, TurnCompleted):
            usage = usage + last.usage
            flagged.update(_GUARDED.findall(" ".join(last.warnings)))
        else:
            errors += 1

    await run_conversation(script, legacy=legacy, data_dir=data_dir, on_turn=report)
    if flagged:
        write(
            "  the cache guard flagged these system sections as changing nearly every turn: "
            f"{', '.join(sorted(flagged))}\n"
        )
    return LayoutTotals(name, len(script), errors, usage, tuple(sorted(flagged)))


def _comparison(nc: LayoutTotals, legacy: LayoutTotals) -> str:
    def line(label: str, a: str, b: str) -> str:
        return f"  {label:<34}{a:>20}{b:>20}"

    rows = [
        "",
        line("", "notification center", "legacy placement"),
        line("input tokens (all)", f"{nc.usage.total_input:,}", f"{legacy.usage.total_input:,}"),
        line(
            "  read from cache",
            f"{nc.usage.cache_read_input_tokens:,}",
            f"{legacy.usage.cache_read_input_tokens:,}",
        ),
        line(
            "  written to cache",
            f"{nc.usage.cache_creation_input_tokens:,}",
            f"{legacy.usage.cache_creation_input_tokens:,}",
        ),
        line("  uncached", f"{nc.usage.input_tokens:,}", f"{legacy.usage.input_tokens:,}"),
        line(
            "share of input read from cache", f"{nc.cached_share:.1%}", f"{legacy.cached_share:.1%}"
        ),
        line(
            "input cost (base-price tokens)", f"{nc.input_cost:,.0f}", f"{legacy.input_cost:,.0f}"
        ),
        line("relative input cost", "1.00", f"{legacy.input_cost / nc.input_cost:.2f}"),
        line("turns with errors", str(nc.errors), str(legacy.errors)),
    ]
    saving = 1 - nc.input_cost / legacy.input_cost if legacy.input_cost else 0.0
    rows.append(
        f"\nThe notification center cut input cost by {saving:.0%} on this script: the system "
        "prompt and history stay cached while the per-turn sections slide along after them."
    )
    return "\n".join(rows)


async def run_demo(
    data_dir: Path | None = None,
    *,
    out: TextIO = sys.stdout,
    script: tuple[tuple[float, str], ...] = DEMO_SCRIPT,
) -> tuple[LayoutTotals, LayoutTotals]:
    def write(text: str) -> None:
        out.write(text)
        out.flush()

    if data_dir is not None:
        # The script would go on from the earlier run's conversation: twice as long as
        # the table says, and other numbers than the demo's, without a word.
        earlier = [d for d in ("notification", "legacy") if (data_dir / d / DATABASE_FILE).exists()]
        if earlier:
            raise EdgeError(
                f"{data_dir} holds an earlier demo run ({', '.join(earlier)}): the script "
                "would go on from its conversation; give a new or empty --data-dir"
            )
    end = START + sum(advance for advance, _ in script)
    span = " to ".join(
        datetime.fromtimestamp(t, ZoneInfo(ZONE)).strftime("%a %H:%M") for t in (START, end)
    )
    write(
        f"Frontmind demo: one scripted conversation ({span}, {ZONE}),\n"
        "offline against the built-in Messages API and its prompt-cache simulator.\n"
        "sections: F fresh, S stale, T timeout, X failed, · empty, in registry order "
        "(4 system, then 5 notification center)\n"
    )
    # The guard's warnings are shown in the table's words below, not as log lines.
    logging.getLogger("frontmind.cache_guard").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="frontmind-demo-") as scratch:
        root = data_dir or Path(scratch)
        nc = await _run_layout(
            "NOTIFICATION CENTER LAYOUT", False, root / "notification", write, script
        )
        legacy = await _run_layout(
            "LEGACY LAYOUT (every section in the system prompt)",
            True,
            root / "legacy",
            write,
            script,
        )
    write(_comparison(nc, legacy) + "\n")
    with tempfile.TemporaryDirectory(prefix="frontmind-demo-tools-") as scratch:
        await show_own_tool(Path(scratch), write)
    return nc, legacy


_SHELVES = {"42": 7, "7": 0}


@tool(timeout_s=5, guidance="stock: check stock before promising a delivery date.")
async def stock(sku: Annotated[str, msgspec.Meta(description="The item's SKU.")]) -> dict[str, int]:
    """How many of an item are in stock."""
    return {"count": _SHELVES.get(sku, 0)}


async def show_own_tool(data_dir: Path, write: Callable[[str], None]) -> None:
    """Your own tool, offline: the local model calls a tool that the message names."""
    message = "Use the stock tool for sku 42."
    write(f"\nYOUR OWN TOOL (tools=[stock], offline)\n  you: {message}\n")
    async with Frontmind.open(data_dir, Config(timezone=ZONE), offline=True, tools=[stock]) as fm:
        speaking = False
        async for event in fm.turn("tools", message):
            if isinstance(event, TextDelta):
                if speaking:
                    write(event.text)
                # A reply after tool results opens with a paragraph break: not here.
                elif text := event.text.lstrip("\n"):
                    write(f"  model: {text}")
                    speaking = True
                continue
            if speaking:
                write("\n")
                speaking = False
            if isinstance(event, ToolStarted):
                write(f"  [tool {event.name}] input {event.input_json}\n")
            elif isinstance(event, ToolFinished):
                outcome = "failed" if event.is_error else "result"
                write(f"  [tool {event.name}] {outcome} {event.content}\n")
