"""Every message that crosses a mailbox round-trips through msgpack, so actors could
live in other processes; and a whole composition runs on encoded mailboxes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from actors import (
    Compose,
    Composed,
    ComposerActor,
    ComposerSettings,
    PlacementRegistry,
    SystemSection,
    TextDelta,
    Timings,
    ToolFinished,
    ToolStarted,
    Trinket,
    TrinketActor,
    Turn,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStart,
    TurnStarted,
)
from actors._conversation import ConversationMessage, Preview, RunTurn
from actors._messages import (
    ComposerMessage,
    SectionLate,
    SectionReply,
    TrinketMessage,
    TurnCommitted,
)
from runtime import ActorSystem
from runtime._codec import decode, encode
from storage import SectionStatus, TextBlock, ToolResultBlock, ToolUseBlock, TurnUsage

pytestmark = pytest.mark.anyio

TURN = Turn("t1", "c1", "hello ═ <b>", 1_795_000_000.5, "Europe/Oslo")
STATUS = SectionStatus("datetime_section", "notification", "stale", 3.5, age_s=60.0, tokens=12)

SAMPLES: list[tuple[Any, Any]] = [
    (TurnStart(TURN, 1_795_000_000.75), TrinketMessage),
    (TurnCommitted("default", "c1", "t1"), TrinketMessage),
    (SectionReply("datetime_section", "Now: 10:00"), SectionReply | None),
    (Compose(TURN), ComposerMessage),
    (SectionLate("default", "c1", "relevant_memories", "- cats", 5.0), ComposerMessage),
    (
        Composed(
            (SystemSection("base_prompt", "Be kind.", True),),
            "NOTIFICATION CENTER…",
            (STATUS,),
            ("a warning",),
            1.25,
        ),
        Composed | None,
    ),
    (RunTurn("t1", "hello"), ConversationMessage),
    (Preview("hello"), ConversationMessage),
    (TurnStarted("t1", "c1"), TurnEvent),
    (TextDelta("Hi"), TurnEvent),
    (ToolStarted("toolu_1", "remember", '{"text": "tea", "n": 1.50}'), TurnEvent),
    (ToolFinished("toolu_1", "remember", False, "ok"), TurnEvent),
    (
        TurnCompleted(
            "t1",
            "Hi",
            TurnUsage(1, 2, 3, 4, 2, 0),
            Timings(1.0, None, 3.0),
            (STATUS,),
            "messages_changed",
            2,
            ("w",),
        ),
        TurnEvent,
    ),
    (TurnError("busy", "later", None), TurnEvent),
    (ToolUseBlock("toolu_1", "remember", '{"text": "tea"}'), ToolUseBlock),
    (ToolResultBlock("toolu_1", "done", True), ToolResultBlock),
    (TextBlock("plain"), TextBlock),
]


@pytest.mark.parametrize(("message", "union"), SAMPLES, ids=lambda v: type(v).__name__)
def test_every_message_round_trips_through_msgpack(message: Any, union: Any) -> None:
    assert decode(encode(message), union) == message
    assert msgspec.json.decode(msgspec.json.encode(message), type=union) == message


class Fixed(Trinket):
    def __init__(self, text: str) -> None:
        self.text = text

    async def render(self, turn: Turn) -> str:
        return self.text


async def test_a_composition_runs_on_encoded_mailboxes() -> None:
    async with ActorSystem(encoded=True) as system:

        def trinket(name: str, text: str) -> Callable[[], TrinketActor]:
            return lambda: TrinketActor(name, Fixed(text), system.lookup)

        refs = [
            (name, system.spawn(trinket(name, text), name=f"trinket:{name}"))
            for name, text in (("base_prompt", "Be kind."), ("datetime_section", "Now: 10:00"))
        ]
        composer = system.spawn(
            lambda: ComposerActor(PlacementRegistry(), refs, ComposerSettings()),
            name="composer:c1",
        )
        composed = await composer.ask(Compose(TURN))
    assert isinstance(composed, Composed)
    assert composed.system == (SystemSection("base_prompt", "Be kind.", True),)
    assert "<datetime_section>\nNow: 10:00\n</datetime_section>" in composed.notification
    assert [s.status for s in composed.sections] == ["fresh", "fresh"]
