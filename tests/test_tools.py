"""Tools: definitions generated from code, and the user's own tools end to end.

Schemas are checked as generated; the user tools run through the real SDK against the
local Messages API, with a scripted model that calls them."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import msgspec
import pytest

import frontmind as fm_module
from actors import (
    TOOL_NAMES,
    AnthropicModel,
    ModelEvent,
    ModelRequest,
    Tool,
    ToolDefinitionError,
    ToolOutcome,
    input_schema,
)
from actors._tool_spec import MAX_STRAGGLERS, TOOL_THREADS
from actors._tools import AddReminder, ToolRunner, tool_definitions
from frontmind import ConfigError, Frontmind, TextDelta, ToolFinished, ToolStarted, Turn, tool
from frontmind.config import load_config
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyText, ReplyToolUse, ScriptedResponder
from storage import DEFAULT_USER, AddMemory, Effect, RawBlock, SQLiteStorage, ToolResultBlock
from tests._embedder import BlockedEmbedder, ConceptEmbedder
from tests._factories import turn as turn_write
from tests._harness import completed, config, frontmind, run_turn, tool_finishes
from tests.test_localapi_models import png
from tests.test_readme import example as readme_example

pytestmark = pytest.mark.anyio


def schema(t: Tool[..., Any]) -> Any:
    return msgspec.json.decode(t.definition.input_schema)


# -- definitions ------------------------------------------------------------------------------


class Address(msgspec.Struct, frozen=True):
    """A postal address."""

    street: str
    city: Annotated[str, msgspec.Meta(description="The city.")]


class Shipment(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What to ship where."""

    item: str
    to: Address
    express: bool = False


def test_schema_from_type_hints_and_docstring() -> None:
    @tool
    def book(
        room: Annotated[str, msgspec.Meta(description="The room's name.")],
        hours: Annotated[int, msgspec.Meta(ge=1, le=8)] = 1,
        kind: Literal["meeting", "focus"] = "meeting",
        attendees: list[str] | None = None,
        *,
        turn: Turn,
    ) -> str:
        """Book a room.

        Longer text the model also sees."""
        return f"{room} for {hours}h by {turn.continuum_id}"

    assert book.name == "book"
    assert book.description == "Book a room.\n\nLonger text the model also sees."
    assert schema(book) == {
        "type": "object",
        "properties": {
            "room": {"description": "The room's name.", "type": "string"},
            "hours": {"type": "integer", "minimum": 1, "maximum": 8, "default": 1},
            "kind": {"enum": ["focus", "meeting"], "default": "meeting"},
            "attendees": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["room"],
        "additionalProperties": False,
    }
    # The `Turn` parameter is filled in by Frontmind, never asked of the model.
    assert "turn" not in schema(book)["properties"]
    # The default guidance line is the docstring's first line; the function still works.
    assert book.definition.guidance == "book: Book a room."
    turn = Turn("t", "ada", "x", 0.0, "UTC")
    assert book("lab", turn=turn) == "lab for 1h by ada"


def test_schema_from_a_struct_parameter_is_inlined() -> None:
    @tool(name="ship-it", timeout_s=2.5, guidance="ship-it: only when asked to ship.")
    async def ship(order: Shipment) -> str:
        """Ship an item."""
        return order.item

    assert (ship.name, ship.timeout_s) == ("ship-it", 2.5)
    assert ship.definition.guidance == "ship-it: only when asked to ship."
    generated = schema(ship)
    assert generated == {
        "type": "object",
        "properties": {
            "item": {"type": "string"},
            "to": {
                "title": "Address",
                "description": "A postal address.",
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"description": "The city.", "type": "string"},
                },
                "required": ["street", "city"],
            },
            "express": {"type": "boolean", "default": False},
        },
        "required": ["item", "to"],
        "additionalProperties": False,
    }
    assert "$ref" not in json.dumps(generated)  # one self-contained object


def test_builtin_definitions_are_generated_from_their_structs() -> None:
    definitions = tool_definitions(TOOL_NAMES)
    assert [d.name for d in definitions] == list(TOOL_NAMES)
    add = definitions[0]
    assert add.description == "Create a reminder for the user, optionally due at a time."
    assert msgspec.json.decode(add.input_schema) == input_schema(AddReminder)
    generated = msgspec.json.decode(add.input_schema)
    assert generated["required"] == ["text"]
    assert generated["properties"]["text"] == {
        "description": "What to remind the user of.",
        "type": "string",
    }
    assert generated["properties"]["due_in_minutes"]["description"] == (
        "Due this many minutes from now."
    )
    assert generated["additionalProperties"] is False
    complete = next(d for d in definitions if d.name == "complete_reminder")
    assert msgspec.json.decode(complete.input_schema)["required"] == ["id"]
    # Generated once: the very same bytes every time (the tools lead the cached prefix).
    assert tool_definitions(TOOL_NAMES) == definitions
    assert tool_definitions(TOOL_NAMES)[0].input_schema is add.input_schema


_SET_DEFAULT_TOOL = """
import sys
from frontmind import tool

@tool
def tagged(tags: frozenset[str] = frozenset({"alpha", "beta", "gamma", "delta", "eps"})) -> str:
    \"\"\"Tagged.\"\"\"
    return ""

sys.stdout.buffer.write(bytes(tagged.definition.input_schema))
"""


_ROOT = str(Path(__file__).resolve().parent.parent)


async def test_a_set_default_gives_the_same_schema_in_every_process() -> None:
    """A set's default was written in its iteration order, which string hashing
    changes from one process to the next: the tools array (the head of every cached
    prefix) differed after each restart, so the whole prefix was written again."""
    schemas = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        done = await anyio.run_process(
            [sys.executable, "-c", _SET_DEFAULT_TOOL],
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": _ROOT},
        )
        schemas.add(done.stdout)
    assert len(schemas) == 1, schemas
    default = json.loads(schemas.pop())["properties"]["tags"]["default"]
    assert default == ["alpha", "beta", "delta", "eps", "gamma"]


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


def _no_doc(x: int) -> int:
    return x


def _no_hint(x) -> str:  # type: ignore[no-untyped-def]
    """Has no hint."""
    return str(x)


def _star(*values: int) -> str:
    """Takes *args."""
    return str(values)


def _unsupported(when: object) -> str:
    """Takes an object."""
    return str(when)


def _recursive(tree: Node) -> str:
    """Walks a tree."""
    return str(tree)


def _listed(tags: list[str] = ["a"]) -> str:  # noqa: B006 - the mistake under test
    """Tags."""
    return ",".join(tags)


def _callback(then: Callable[[], int]) -> str:
    """Takes a callable, which no JSON can be."""
    return str(then())


def _fine(x: int) -> str:
    """Fine."""
    return str(x)


class _TurnInside(msgspec.Struct):
    """A tool's whole input as one Struct, a Turn among its fields."""

    note: str
    turn: Turn | None = None


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Tool(_no_doc), "needs a description"),
        (lambda: Tool(_no_hint), "parameter 'x' needs a type hint"),
        (lambda: Tool(_star), "parameter 'values' must be an ordinary named parameter"),
        (lambda: Tool(_unsupported), "tool '_unsupported'"),
        (lambda: Tool(_recursive), "Node refers to itself"),
        (lambda: Tool(_listed), "tool '_listed': Using a non-empty mutable collection"),
        (lambda: Tool(_callback), "tool '_callback': _callback_input: Generating JSON schema"),
        (lambda: Tool(lambda x: x, description="anon"), "a tool name must be 1-64 of"),
        (lambda: Tool(_fine, name="has space"), "a tool name must be 1-64 of"),
        (lambda: Tool(_fine, timeout_s=0), "timeout_s must be greater than 0"),
        (lambda: tool_definitions(TOOL_NAMES, [Tool(_fine, name="remember")]), "built-in"),
        (lambda: tool_definitions((), [Tool(_fine), Tool(_fine)]), "declared twice"),
    ],
)
def test_bad_declarations_are_refused_with_the_reason(build: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        build()
    assert message in str(caught.value)
    assert isinstance(caught.value, fm_module.FrontmindError)


# -- user tools through the real SDK ------------------------------------------------------------


@tool(guidance="lookup_stock: check stock before promising a delivery date.")
async def lookup_stock(sku: str, warehouse: str = "main") -> dict[str, object]:
    """How many of an item are in stock."""
    return {"sku": sku, "warehouse": warehouse, "count": 7}


async def test_the_model_calls_a_user_tool(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    seen_turns: list[str] = []

    def shout(text: str, turn: Turn) -> str:  # plain and sync: runs in a worker thread
        """Upper-case a text."""
        seen_turns.append(turn.continuum_id)
        return text.upper()

    responder.push(
        Reply(
            (
                ReplyText("Checking."),
                ReplyToolUse("lookup_stock", {"sku": "A-1"}, "toolu_s"),
                ReplyToolUse("shout", {"text": "hey"}, "toolu_h"),
            )
        ),
        "Seven in stock.",
        "Again, seven.",
    )
    async with frontmind(api, tmp_path, tools=[lookup_stock, shout]) as fm:
        events = await run_turn(fm, "c1", "is A-1 in stock?")
        await run_turn(fm, "c1", "thanks")
        history = await fm.history("c1")
        records = await fm.turns("c1")
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = tool_finishes(events)
    assert [e.name for e in started] == ["lookup_stock", "shout"]
    assert [(e.is_error, e.content) for e in finished] == [
        (False, '{"sku":"A-1","warehouse":"main","count":7}'),
        (False, "HEY"),
    ]
    assert seen_turns == ["c1"]
    assert completed(events).model_calls == 2
    # The two calls' replies read as two paragraphs, streamed and in the record alike.
    assert completed(events).text == "Checking.\n\nSeven in stock."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == completed(events).text
    assert records[0].reply_text == completed(events).text
    bodies = api.message_bodies()
    assert len(bodies) == 3
    # The user's tools follow the built-in ones, and the list is byte-identical on every
    # call of the loop and every turn: the tools lead the cached prefix.
    names = [t["name"] for t in bodies[0]["tools"]]
    assert names == [*TOOL_NAMES, "lookup_stock", "shout"]
    assert bodies[0]["tools"] == bodies[1]["tools"] == bodies[2]["tools"]
    stock = bodies[0]["tools"][-2]
    assert stock["description"] == "How many of an item are in stock."
    assert stock["input_schema"]["required"] == ["sku"]
    # The guidance lives in the cached system prompt, the same on every request (its
    # breakpoint's TTL is the TTL policy's to choose, turn by turn).
    systems = [json.dumps([blk["text"] for blk in b["system"]]) for b in bodies]
    assert systems[0] == systems[1] == systems[2]
    assert "lookup_stock: check stock before promising a delivery date." in systems[0]
    assert "shout: Upper-case a text." in systems[0]
    assert "lookup_stock, shout" in systems[0]  # the tool hints name them
    results = bodies[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results[:2]] == ["toolu_s", "toolu_h"]
    assert not any(r.get("is_error") for r in results[:2])
    # Stored: the tool exchange of the first turn, then the plain second turn.
    assert [m.role for m in history] == ["user", "assistant"] * 3


async def test_failures_timeouts_and_bad_input_go_back_as_errors(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    never = anyio.Event()

    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    @tool(timeout_s=0.2)
    async def hang() -> str:
        """Never answers."""
        await never.wait()
        return "unreachable"

    responder.push(
        Reply(
            (
                ReplyToolUse("explode", {"reason": "test"}, "toolu_1"),
                ReplyToolUse("hang", {}, "toolu_2"),
                ReplyToolUse("lookup_stock", {"count": 3}, "toolu_3"),
            )
        ),
        "All three failed.",
    )
    # The per-tool timeout wins over a generous global one.
    cfg = config(tools={"timeout_s": 60})
    async with frontmind(api, tmp_path, cfg=cfg, tools=[explode, hang, lookup_stock]) as fm:
        events = await run_turn(fm, "c1", "try the tools")
        records = await fm.turns("c1")
    finished = tool_finishes(events)
    assert [e.is_error for e in finished] == [True, True, True]
    assert finished[0].content == "explode failed: RuntimeError: boom: test"
    assert finished[1].content == "hang timed out after 0.2s"
    assert finished[2].content.startswith("invalid input for lookup_stock:")
    assert completed(events).text == "All three failed."
    results = api.message_bodies()[1]["messages"][-1]["content"]
    assert [r.get("is_error") for r in results] == [True, True, True]
    assert results[0]["content"] == "explode failed: RuntimeError: boom: test"
    assert records[0].status == "completed"


async def test_the_calls_of_one_reply_run_side_by_side(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """The model asks for several calls in one reply when they are independent (parallel
    tool use): they ran one after the other, each waiting for the last. Now they run side
    by side; the results go back in the calls' order, whatever order they finish in, and
    Frontmind's own tools still take effect in the order they were asked."""
    api, responder = script
    asked = anyio.Event()

    @tool(timeout_s=5)
    async def slow_lookup() -> str:
        """Answers once the quick one has been asked."""
        await asked.wait()
        return "slow answer"

    @tool(timeout_s=5)
    async def quick_lookup() -> str:
        """Answers at once."""
        asked.set()
        return "quick answer"

    responder.push(
        Reply(
            (
                ReplyToolUse("slow_lookup", {}, "toolu_1"),
                ReplyToolUse("add_reminder", {"text": "first", "due_in_minutes": 5}, "toolu_2"),
                ReplyToolUse("quick_lookup", {}, "toolu_3"),
                ReplyToolUse("add_reminder", {"text": "second", "due_in_minutes": 5}, "toolu_4"),
            )
        ),
        "Both answered.",
    )
    async with frontmind(api, tmp_path, tools=[slow_lookup, quick_lookup]) as fm:
        events = await run_turn(fm, "c1", "look both up")
        reminders = await fm.reminders()
    order = [(type(e).__name__, e.id) for e in events if isinstance(e, ToolStarted | ToolFinished)]
    # The slow call finished after the quick one, which it waited on: side by side.
    assert order.index(("ToolFinished", "toolu_3")) < order.index(("ToolFinished", "toolu_1"))
    finishes = tool_finishes(events)
    assert [(e.name, e.is_error) for e in finishes] == [
        ("slow_lookup", False),
        ("add_reminder", False),
        ("quick_lookup", False),
        ("add_reminder", False),
    ]
    assert finishes[0].content == "slow answer"
    assert finishes[2].content == "quick answer"
    results = api.message_bodies()[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results if r["type"] == "tool_result"] == [
        "toolu_1",
        "toolu_2",
        "toolu_3",
        "toolu_4",
    ]
    assert [r.text for r in sorted(reminders, key=lambda r: r.id)] == ["first", "second"]
    assert completed(events).text == "Both answered."


class _IgnoresToolChoice:
    """A model client that drops the request's tool_choice (a proxy, or a model that
    asks for several calls anyway): the reply's calls come all together."""

    def __init__(self, inner: AnthropicModel) -> None:
        self._inner = inner

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        return self._inner.stream(msgspec.structs.replace(request, tool_choice=None))

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_with_parallel_off_the_model_is_asked_for_one_call_and_calls_run_alone(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """`[tools] parallel = false`, for tools not safe to run side by side: every request
    asks for one call a reply (tool_choice auto with disable_parallel_tool_use), and the
    calls of a reply that holds several anyway run one at a time, in order. (There was
    no way to keep two calls of such a tool apart.)"""
    api, responder = script
    running: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    second_asked = anyio.Event()

    @tool(timeout_s=5)
    async def ledger(entry: str) -> str:
        """Writes one ledger entry; never two at once."""
        if running:
            overlaps.append((*running, entry))
        running.append(entry)
        try:
            if entry == "first":  # side by side, the second would start meanwhile
                with anyio.move_on_after(0.5):
                    await second_asked.wait()
            else:
                second_asked.set()
            return f"wrote {entry}"
        finally:
            running.remove(entry)

    calls = (
        ReplyToolUse("ledger", {"entry": "first"}, "toolu_1"),
        ReplyToolUse("ledger", {"entry": "second"}, "toolu_2"),
    )
    responder.push(Reply(calls), "Written.", Reply(calls), "Written again.")
    cfg = config(tools={"parallel": False})
    async with frontmind(api, tmp_path, cfg=cfg, tools=[ledger]) as fm:
        honoured = await run_turn(fm, "c1", "write both")
    # The model honoured the request: one call in its reply.
    bodies = api.message_bodies()
    assert [b.get("tool_choice") for b in bodies] == [
        {"type": "auto", "disable_parallel_tool_use": True}
    ] * 2
    assert [e.content for e in tool_finishes(honoured)] == ["wrote first"]
    assert completed(honoured).text == "Written."

    inner = AnthropicModel(api_key="test-key", base_url=api.base_url, max_retries=0, timeout=10)
    try:  # the caller's model: closed here (left to the collector, it closes in a later loop)
        async with Frontmind.open(
            tmp_path / "b", cfg, model=_IgnoresToolChoice(inner), tools=[ledger]
        ) as fm:
            ignored = await run_turn(fm, "c1", "write both")
    finally:
        await inner.aclose()
    order = [(type(e).__name__, e.id) for e in ignored if isinstance(e, ToolStarted | ToolFinished)]
    assert order == [
        ("ToolStarted", "toolu_1"),
        ("ToolFinished", "toolu_1"),
        ("ToolStarted", "toolu_2"),
        ("ToolFinished", "toolu_2"),
    ]
    assert overlaps == []
    assert [e.content for e in tool_finishes(ignored)] == ["wrote first", "wrote second"]
    assert completed(ignored).text == "Written again."


async def test_a_wide_image_gives_way_in_a_request_of_more_than_twenty(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """Past 20 images a request takes none over 2000 px a side (docs: "Images and
    vision"). A 2500 px screenshot, taken in when the conversation held few images,
    made the request after a tool's 20 images a 400: the turn failed, and so did every
    turn that added an image. The request now carries a note in its place; the stored
    history keeps the image."""
    api, responder = script

    @tool
    def screens() -> list[dict[str, Any]]:
        """Twenty small screenshots."""
        shot = {"type": "base64", "media_type": "image/png", "data": png(10, 10)}
        return [{"type": "image", "source": shot} for _ in range(20)]

    wide = {"type": "base64", "media_type": "image/png", "data": png(2500, 10)}
    message: Any = [{"type": "image", "source": wide}, {"type": "text", "text": "my screen"}]
    responder.push("Seen.", Reply((ReplyToolUse("screens", {}, "toolu_s"),)), "Twenty more seen.")
    async with frontmind(api, tmp_path, tools=[screens]) as fm:
        assert completed(await run_turn(fm, "c1", message)).text == "Seen."
        done = completed(await run_turn(fm, "c1", "take twenty screenshots"))
        history = await fm.history("c1")
    assert done.text == "Twenty more seen."
    first = api.message_bodies()[-1]["messages"][0]["content"]
    assert first[0] == {
        "type": "text",
        "text": "[an image of 2500 x 10 px, left out of this request: a request of more "
        "than 20 images takes none over 2000 px a side]",
    }
    stored = history[0].content[0]
    assert isinstance(stored, RawBlock)
    assert stored.kind == "image"


async def test_every_call_of_a_reply_starts_before_any_finishes(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """The calls of one reply all start at once: their ToolStarted events come first,
    then each ToolFinished. A call with nothing to wait for (an async tool that awaits
    nothing) finished before the next one was even announced."""
    api, responder = script

    @tool
    async def at_once(n: int) -> str:
        """Answers without waiting."""
        return f"answer {n}"

    uses = [ReplyToolUse("at_once", {"n": i}, f"toolu_{i}") for i in range(3)]
    uses.append(ReplyToolUse("list_reminders", {}, "toolu_3"))
    responder.push(Reply(tuple(uses)), "Done.")
    async with frontmind(api, tmp_path, tools=[at_once]) as fm:
        events = await run_turn(fm, "c1", "all at once")
    kinds = [type(e).__name__ for e in events if isinstance(e, ToolStarted | ToolFinished)]
    assert kinds == ["ToolStarted"] * 4 + ["ToolFinished"] * 4
    assert [e.content for e in tool_finishes(events)][:3] == ["answer 0", "answer 1", "answer 2"]
    assert completed(events).text == "Done."


async def test_leaving_a_turn_while_its_calls_run_side_by_side_cancels_them_all(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A caller that leaves while the calls of one reply run (one waiting, one still in
    its thread): the turn ends at once as cancelled, with nothing of it kept, and the
    continuum's next turn runs."""
    api, responder = script
    never = anyio.Event()
    gate = threading.Event()
    cancelled: list[str] = []

    @tool(timeout_s=60)
    async def wait_forever() -> str:
        """Waits."""
        try:
            await never.wait()
        finally:
            cancelled.append("wait_forever")
        return "unreachable"

    @tool(timeout_s=60)
    def block_forever() -> str:
        """Blocks its thread until the test ends."""
        gate.wait(30)
        return "late"

    responder.push(
        Reply(
            (
                ReplyToolUse("wait_forever", {}, "toolu_1"),
                ReplyToolUse("add_reminder", {"text": "pay", "due_in_minutes": 5}, "toolu_2"),
                ReplyToolUse("block_forever", {}, "toolu_3"),
            )
        ),
        "Done.",
    )
    try:
        async with frontmind(api, tmp_path, tools=[wait_forever, block_forever]) as fm:
            started: set[str] = set()
            with anyio.fail_after(20):
                async with fm.turn("c1", "wait") as events:
                    async for event in events:
                        if isinstance(event, ToolStarted):
                            started.add(event.name)
                        if started >= {"wait_forever", "block_forever"}:
                            break  # leaving cancels the turn while both run
            assert cancelled == ["wait_forever"]
            responder.push("Hello.")
            completed(await run_turn(fm, "c1", "hello"))
            assert [r.status for r in await fm.turns("c1")] == ["cancelled", "completed"]
            assert await fm.reminders() == []
            assert [m.role for m in await fm.history("c1")] == ["user", "assistant"]
    finally:
        gate.set()


async def test_slow_sync_tools_leave_threads_for_the_storage(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """Sync tools held anyio's default 40 worker threads, the ones the storage's own
    thread work takes too: one reply of 40 slow calls stalled a backup (and the SQLite
    vector cache's first pass of every turn's recall) until they returned. Tools have
    threads of their own now."""
    api, responder = script
    gate, running = threading.Event(), threading.Event()
    started: list[int] = []
    lock = threading.Lock()

    @tool(timeout_s=60)
    def crunch(n: int) -> str:
        """Crunches slowly."""
        with lock:
            started.append(n)
            if len(started) == TOOL_THREADS:
                running.set()
        gate.wait(30)
        return f"crunched {n}"

    calls = 40
    responder.push(
        Reply(tuple(ReplyToolUse("crunch", {"n": i}, f"toolu_{i}") for i in range(calls))),
        "All crunched.",
    )
    own_thread = anyio.CapacityLimiter(1)  # waiting here takes none of the default ones
    try:
        async with (
            frontmind(api, tmp_path, tools=[crunch]) as fm,
            anyio.create_task_group() as tg,
        ):
            events: list[Any] = []

            async def turn() -> None:
                events.extend(await run_turn(fm, "c1", "crunch them all"))

            tg.start_soon(turn)
            assert await anyio.to_thread.run_sync(running.wait, 30, limiter=own_thread)
            with anyio.fail_after(10):  # while the tools hold every thread they may
                size = await fm.backup(tmp_path / "while-crunching.db")
            assert size > 0
            gate.set()
        assert len(tool_finishes(events)) == calls
        assert completed(events).text == "All crunched."
    finally:
        gate.set()


async def test_a_sync_tool_that_hangs_leaves_a_bounded_number_of_threads(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A sync tool's thread cannot be stopped at its timeout. One that hangs (a network
    call with no timeout of its own) left one more thread behind at every call, without
    bound; past MAX_STRAGGLERS still running, the tool is refused at once, and it runs
    again once they return."""
    api, responder = script
    gate = threading.Event()

    @tool(timeout_s=0.05)
    def fetch_page() -> str:
        """Fetches a page (and hangs until the gate opens)."""
        gate.wait(30)
        return "the page"

    def calls(count: int, prefix: str) -> Reply:
        return Reply(tuple(ReplyToolUse("fetch_page", {}, f"{prefix}{i}") for i in range(count)))

    responder.push(calls(MAX_STRAGGLERS, "toolu_a"), "The site is down.")
    responder.push(calls(2, "toolu_b"), "Still down.")
    async with frontmind(api, tmp_path, tools=[fetch_page]) as fm:
        events = await run_turn(fm, "c1", "fetch it")
        timed_out = ["fetch_page timed out after 0.05s"] * MAX_STRAGGLERS
        assert [e.content for e in tool_finishes(events)] == timed_out
        assert fetch_page.threads.stragglers == MAX_STRAGGLERS

        events = await run_turn(fm, "c1", "again")
        refusal = (
            f"fetch_page was not started: {MAX_STRAGGLERS} of its earlier calls are still "
            "running after their time ran out"
        )
        assert [e.content for e in tool_finishes(events)] == [refusal, refusal]

        gate.set()  # the hung calls return: the tool may run again
        drained = await anyio.to_thread.run_sync(fetch_page.threads.wait_for_stragglers, 1, 30)
        assert drained
        responder.push(Reply((ReplyToolUse("fetch_page", {}, "toolu_x"),)), "Got it.")
        events = await run_turn(fm, "c1", "try again")
        assert [e.content for e in tool_finishes(events)] == ["the page"]


async def test_a_sync_tool_that_exits_fails_its_call_at_once(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A sync tool runs in a thread of its own: whatever it raises, a SystemExit too, is
    handed back to the call, which fails at once with an error result saying so (a
    thread that ended unsettled left the call waiting out its timeout)."""
    api, responder = script

    @tool(timeout_s=60)
    def leave() -> str:
        """Leaves."""
        raise SystemExit(3)

    responder.push(Reply((ReplyToolUse("leave", {}, "toolu_1"),)), "After it.")
    async with frontmind(api, tmp_path, tools=[leave]) as fm:
        with anyio.fail_after(30):  # not the tool's 60 s
            events = await run_turn(fm, "c1", "go")
    (finish,) = tool_finishes(events)
    assert finish.is_error
    assert "SystemExit(3)" in finish.content
    assert completed(events).text == "After it."


async def test_calls_of_a_hung_sync_tool_that_never_got_a_thread_are_not_stragglers(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """One reply asks for more calls of a hanging sync tool than there are worker threads
    (anyio's limiter): those still waiting for a thread at their timeout never run. They
    were counted as stragglers all the same, and never counted off: once the hung calls
    returned, the tool stayed refused for good ("N of its earlier calls are still
    running"). Now only a call that runs in a thread is one, and the tool runs again."""
    api, responder = script
    gate = threading.Event()
    ran = 0

    @tool(timeout_s=0.2)
    def fetch_page() -> str:
        """Fetches a page (and hangs until the gate opens)."""
        nonlocal ran
        ran += 1
        gate.wait(30)
        return "the page"

    count = int(anyio.to_thread.current_default_thread_limiter().total_tokens) + 10
    calls = tuple(ReplyToolUse("fetch_page", {}, f"toolu_{i}") for i in range(count))
    responder.push(Reply(calls), "The site is down.")
    async with frontmind(api, tmp_path, tools=[fetch_page]) as fm:
        events = await run_turn(fm, "c1", "fetch them all")
        assert [e.content for e in tool_finishes(events)] == [
            "fetch_page timed out after 0.2s"
        ] * count
        gate.set()  # the hung calls return
        drained = await anyio.to_thread.run_sync(fetch_page.threads.wait_for_stragglers, 1, 10)
        assert drained, f"{fetch_page.threads.stragglers} stragglers left, {ran} calls ran"
        responder.push(Reply((ReplyToolUse("fetch_page", {}, "toolu_x"),)), "Got it.")
        events = await run_turn(fm, "c1", "try again")
        assert [e.content for e in tool_finishes(events)] == ["the page"]


async def test_a_tools_own_cancellation_oversized_or_unstorable_result_is_its_failure(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A tool that awaits a task someone else cancelled, or calls sys.exit, fails alone
    (the instance goes on for every continuum); a huge text result is cut with a note;
    a NUL or a lone surrogate in a result becomes U+FFFD instead of failing the turn's
    commit."""
    api, responder = script

    @tool
    async def orphan() -> str:
        """Awaits work another part of the app cancelled."""
        other = asyncio.get_running_loop().create_future()
        other.cancel()
        await other
        return "unreachable"

    @tool
    async def quits() -> str:
        """Calls sys.exit, as a command-line entry point does."""
        sys.exit(3)

    @tool(max_result_chars=1_000)
    def huge() -> str:
        """Returns far too much."""
        return "x" * 5_000

    @tool
    def odd() -> str:
        """Returns what no database stores as text."""
        return "a\x00b\ud800c"

    responder.push(
        Reply(
            (
                ReplyToolUse("orphan", {}, "toolu_1"),
                ReplyToolUse("huge", {}, "toolu_2"),
                ReplyToolUse("odd", {}, "toolu_3"),
                ReplyToolUse("quits", {}, "toolu_4"),
            )
        ),
        "Done.",
        "Still here.",
    )
    async with frontmind(api, tmp_path, tools=[orphan, huge, odd, quits]) as fm:
        events = await run_turn(fm, "c1", "try the tools")
        other = await run_turn(fm.user("bob"), "c2", "are you there?")
        history = await fm.history("c1")
        records = await fm.turns("c1")
    finished = tool_finishes(events)
    assert [e.is_error for e in finished] == [True, False, False, True]
    assert finished[0].content.startswith("orphan failed: CancelledError")
    assert finished[3].content.startswith("quits failed: SystemExit(3)")
    assert finished[1].content.startswith("x" * 1_000 + "\n[truncated: 4,000 more characters")
    assert finished[2].content == "a\ufffdb\ufffdc"
    assert completed(events).text == "Done."
    assert records[0].status == "completed"
    assert completed(other).text == "Still here."
    results = history[2].content
    assert [r.content for r in results if isinstance(r, ToolResultBlock)][2] == "a\ufffdb\ufffdc"


def test_max_result_chars_is_checked_where_the_tool_is_declared() -> None:
    with pytest.raises(ToolDefinitionError, match="max_result_chars must be an int of at least"):
        tool(max_result_chars=10)(lookup_stock.fn)


async def test_tools_from_the_config_file(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    config_file = tmp_path / "tools.toml"
    config_file.write_text(
        "[[tool]]\n"
        'use = "tests._user_tools:weather"\n'
        "timeout_s = 4\n"
        "\n"
        "[[tool]]\n"
        'use = "tests._user_tools:convert"\n'
        'name = "to_miles"\n'
    )
    cfg = load_config(config_file, tmp_path / "data")
    assert [t.use for t in cfg.tool] == ["tests._user_tools:weather", "tests._user_tools:convert"]
    responder.push(
        Reply(
            (
                ReplyToolUse("weather", {"city": "Oslo"}, "toolu_w"),
                ReplyToolUse("to_miles", {"value": 10}, "toolu_m"),
            )
        ),
        "Sunny, 6.2 miles.",
    )
    async with frontmind(api, tmp_path / "data", cfg=cfg) as fm:
        events = await run_turn(fm, "trip", "weather and distance?")
    finished = tool_finishes(events)
    assert [(e.name, e.content) for e in finished] == [
        ("weather", "sunny in Oslo"),
        ("to_miles", '{"miles":6.214,"in":"trip"}'),
    ]
    tools = {t["name"]: t for t in api.message_bodies()[0]["tools"]}
    assert tools["weather"]["input_schema"]["properties"]["city"]["description"] == "A city name."
    assert "turn" not in tools["to_miles"]["input_schema"]["properties"]
    system = json.dumps(api.message_bodies()[0]["system"])
    # The decorator's guidance survives the rename in the config.
    assert "convert: use it for every unit conversion." in system


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('use = "tests._user_tools"', "#1 (tests._user_tools): use = 'tests._user_tools' must"),
        ('use = "tests._no_such_module:f"', "#1 (tests._no_such_module:f): cannot import"),
        ('use = "tests._user_tools:missing"', "has no attribute 'missing'"),
        ('use = "tests._user_tools:NOT_A_FUNCTION"', "'tests._user_tools:NOT_A_FUNCTION' is not a"),
        (
            'use = "tests._user_tools:weather"\nname = "remember"',
            "'remember': the name is a built-in",
        ),
        ('use = "tests._user_tools:weather"\ntimeout_s = -1', "timeout_s must be greater than 0"),
    ],
)
async def test_a_bad_tool_entry_fails_at_startup(tmp_path: Path, entry: str, message: str) -> None:
    config_file = tmp_path / "frontmind.toml"
    config_file.write_text(f"[[tool]]\n{entry}\n")
    with pytest.raises(fm_module.FrontmindError) as caught:
        async with Frontmind.open(tmp_path, config_file=config_file, offline=True):
            pytest.fail("opened with a bad tool")
    assert message in str(caught.value)
    assert not (tmp_path / "frontmind.db").exists()  # refused before anything was created


async def test_a_tool_entry_with_an_unknown_key_is_a_config_error(tmp_path: Path) -> None:
    config_file = tmp_path / "frontmind.toml"
    config_file.write_text('[[tool]]\nuse = "tests._user_tools:weather"\ncolour = "red"\n')
    with pytest.raises(ConfigError, match=r"colour"):
        load_config(config_file, tmp_path)


def test_the_readme_tool_example_declares_a_tool() -> None:
    namespace: dict[str, Any] = {}
    exec(readme_example("### Your own tools"), namespace)
    stock = namespace["stock"]
    assert isinstance(stock, Tool)
    assert (stock.name, stock.timeout_s) == ("stock", 5)
    assert schema(stock)["required"] == ["sku"]
    assert "turn" not in schema(stock)["properties"]


async def test_remember_updates_a_memory_it_repeats_instead_of_copying_it(tmp_path: Path) -> None:
    """The offline model calls `remember` when asked plainly; the same memory said
    again (word overlap, the rule the segment summaries follow) is updated in place."""
    async with Frontmind.open(tmp_path, offline=True) as fm:
        said: list[str] = []
        for text in (
            "Remember that I like green tea",
            "Remember that I like green tea a lot",  # the same memory, said more fully
            "Remember that I like green tea a lot",  # nothing new
            "Remember that my sister lives in Bergen",  # another memory
        ):
            events = [e async for e in fm.turn("c1", text)]
            said.extend(e.content for e in tool_finishes(events))
        memories = await fm.memories()
    assert said[0] == "remembered (saved with this turn)"
    first = [m for m in memories if "tea" in m.text]
    assert len(first) == 1, memories
    assert said[1] == f"updated memory #{first[0].id}, which said the same (saved with this turn)"
    assert said[2] == "already remembered: nothing new to store"
    assert said[3] == "remembered (saved with this turn)"
    assert sorted(m.text for m in memories) == [
        "I like green tea a lot",
        "my sister lives in Bergen",
    ]


async def test_remember_by_meaning_through_frontmind(tmp_path: Path) -> None:
    """The engine hands the configured embedder to the tools: the offline model's
    `remember` of a memory said again in other words updates it (by words alone these
    two share too little to be the same)."""
    cfg = config(memory={"embedder": "tests._embedder:ConceptEmbedder"})
    async with Frontmind.open(tmp_path, cfg, offline=True) as fm:
        said: list[str] = []
        for text in (
            "Remember that Ingrid is my sister",
            "Remember that my sibling is called Ingrid",
        ):
            events = [e async for e in fm.turn("c1", text)]
            said.extend(e.content for e in tool_finishes(events))
        memories = await fm.memories()
    assert said[0] == "remembered (saved with this turn)"
    assert len(memories) == 1, memories
    assert (
        said[1] == f"updated memory #{memories[0].id}, which said the same (saved with this turn)"
    )
    assert memories[0].text == "my sibling is called Ingrid"


async def test_remember_by_meaning_updates_the_memory_it_repeats(tmp_path: Path) -> None:
    """With an embedder, `remember` finds the memory it repeats by its vector (a cosine
    reaching `same_memory_cosine`), as the extraction does, and stages the new text's
    vector with it; by words alone (overlap 0.375) the same text is a new memory, and an
    embedder that misses its deadline leaves it to the words."""
    embedder = ConceptEmbedder()
    said = "The user has a sibling called Ingrid"
    (said_vector,) = await embedder.embed([said])
    raw = msgspec.Raw(msgspec.json.encode({"text": said, "importance": 0.7}))
    turn = Turn("t1", "c1", "note this", now=1000.0, timezone="UTC")
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as storage:
        await storage.use_embedder("tests._embedder:ConceptEmbedder", len(said_vector))
        sister = await storage.add_memory(DEFAULT_USER, "Ingrid is the user's sister", now=10.0)
        await storage.set_memory_vectors([(sister, (await embedder.embed([sister.text]))[0])])

        by_words: list[Effect] = []
        words = ToolRunner(storage, lambda _: None, ["remember"])
        outcome = await words.run("remember", raw, turn, by_words)
        assert outcome == ToolOutcome("remembered (saved with this turn)")
        ((replaces, vector),) = [
            (e.replaces, e.vector) for e in by_words if isinstance(e, AddMemory)
        ]
        assert (replaces, vector) == (None, None)

        late: list[Effect] = []
        BlockedEmbedder.release = None
        blocked = ToolRunner(
            storage, lambda _: None, ["remember"], embedder=BlockedEmbedder(), embed_deadline=0.02
        )
        assert (await blocked.run("remember", raw, turn, late)).content.startswith("remembered")
        assert [e.vector for e in late if isinstance(e, AddMemory)] == [None]

        effects: list[Effect] = []
        meaning = ToolRunner(storage, lambda _: None, ["remember"], embedder=embedder)
        outcome = await meaning.run("remember", raw, turn, effects)
        assert outcome.content == (
            f"updated memory #{sister.id}, which said the same (saved with this turn)"
        )
        (effect,) = effects
        assert isinstance(effect, AddMemory)
        assert (effect.replaces, effect.vector) == (sister.id, tuple(said_vector))
        # Said again in the same turn: nothing more is staged.
        again = await meaning.run("remember", raw, turn, effects)
        assert again.content == "already remembered: nothing new to store"
        # The turn's commit writes the text and its vector together: nothing waits.
        write = msgspec.structs.replace(turn_write("c1", "t1", at=1000.0), effects=tuple(effects))
        assert await storage.commit_turn(DEFAULT_USER, write)
        assert await storage.count_memories_without_vectors() == 0
        ((memory, similarity),) = await storage.nearest_memories(
            DEFAULT_USER, said_vector, k=5, now=2000.0
        )
        assert (memory.id, memory.text, round(similarity, 5)) == (sister.id, said, 1.0)


async def test_two_texts_repeating_one_memory_in_a_turn_are_both_kept(tmp_path: Path) -> None:
    """Two `remember`s of one turn each repeat a stored memory (a cosine of 0.95 to it)
    but not each other (0.8): the first updates it, and the second, no repeat of what
    the memory now says, is a memory of its own, not a second update that overwrites
    the first in the same commit (the extraction's proposals are decided alike)."""
    embedder = ConceptEmbedder()
    turn = Turn("t1", "c1", "note this", now=1000.0, timezone="UTC")
    first = "My sister Ingrid, my sibling, likes tea"  # sister, sibling, tea
    second = "Ingrid drinks tea and coffee with her sister"  # sister, tea, coffee
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as storage:
        await storage.use_embedder("tests._embedder:ConceptEmbedder", 4)
        stored = await storage.add_memory(DEFAULT_USER, "Ingrid is my sister, she has tea")
        await storage.set_memory_vectors([(stored, (await embedder.embed([stored.text]))[0])])
        runner = ToolRunner(storage, lambda _: None, ["remember"], embedder=embedder)
        effects: list[Effect] = []
        said = []
        for text in (first, second):
            raw = msgspec.Raw(msgspec.json.encode({"text": text}))
            said.append((await runner.run("remember", raw, turn, effects)).content)
        assert said == [
            f"updated memory #{stored.id}, which said the same (saved with this turn)",
            "remembered (saved with this turn)",
        ]
        write = msgspec.structs.replace(turn_write("c1", "t1", at=1000.0), effects=tuple(effects))
        assert await storage.commit_turn(DEFAULT_USER, write)
        texts = {m.id: m.text for m in await storage.memories(DEFAULT_USER)}
        assert texts[stored.id] == first
        assert sorted(texts.values()) == sorted([first, second])


async def test_a_turn_parameter_that_may_be_none_is_never_the_models_to_fill() -> None:
    """`turn: Turn | None = None` (a tool also called outside a turn) receives the turn
    like `turn: Turn`: it is not in the schema, so the model cannot forge one (another
    user's, another continuum's) and have the tool act for it."""

    @tool
    def whose(note: str, turn: Turn | None = None) -> str:
        """Says whose turn it is."""
        return f"{note} for {turn.user if turn else 'nobody'}"

    @tool
    def marked(turn: Annotated[Turn | None, "the turn"] = None) -> str:
        """Says which continuum this is."""
        return turn.continuum_id if turn else "none"

    assert schema(whose)["properties"] == {"note": {"type": "string"}}
    assert schema(marked)["properties"] == {}
    current = Turn("t1", "c1", "hi", 0.0, "UTC", user="ada")
    forged = {"note": "x", "turn": {"turn_id": "t", "continuum_id": "c", "user_text": "",
                                    "now": 0, "timezone": "UTC", "user": "bob"}}  # fmt: skip
    refused = await whose.invoke(msgspec.Raw(msgspec.json.encode(forged)), current)
    assert refused.is_error
    assert "invalid input for whose" in refused.content
    done = await whose.invoke(msgspec.Raw(b'{"note": "x"}'), current)
    assert (done.is_error, done.content) == (False, "x for ada")
    assert (await marked.invoke(msgspec.Raw(b"{}"), current)).content == "c1"
    # Turn anywhere else in a hint is a mistake, named where the tool is declared.

    def many(turns: list[Turn]) -> str:
        """Takes turns."""
        return ""

    with pytest.raises(ToolDefinitionError, match="annotated Turn"):
        tool(many)

    def nested(request: _TurnInside) -> str:
        """Takes a request."""
        return request.note

    with pytest.raises(ToolDefinitionError, match="annotated Turn"):
        tool(nested)


async def test_an_exceptions_huge_message_is_cut_like_a_huge_result(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """An exception may carry megabytes (an HTTP error with the page it got): its
    message is held to the tool's `max_result_chars`, as a result is, instead of riding
    whole in the history and every later request."""
    api, responder = script

    @tool(max_result_chars=1_000)
    def fetch(url: str) -> str:
        """Fetches a page."""
        raise RuntimeError("HTTP 500: " + "<p>" * 5_000)

    responder.push(Reply((ReplyToolUse("fetch", {"url": "u"}, "toolu_1"),)), "It failed.")
    async with frontmind(api, tmp_path, tools=[fetch]) as fm:
        events = await run_turn(fm, "c1", "fetch u")
        history = await fm.history("c1")
    completed(events)
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.is_error
    assert finished.content.startswith("fetch failed: RuntimeError: HTTP 500: <p><p>")
    assert len(finished.content) < 1_200
    assert "[truncated: 14,0" in finished.content
    sent = api.message_bodies()[1]["messages"][-1]["content"][0]
    assert (sent["is_error"], sent["content"]) == (True, finished.content)
    stored = [b for b in history[2].content if isinstance(b, ToolResultBlock)]
    assert stored[0].content == finished.content


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no message")


async def test_an_exception_whose_message_cannot_be_read_is_still_the_tools_failure(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """An exception class whose `__str__` raises failed the whole turn as an internal
    error while its tool_result was written; it is the tool's failure like any other."""
    api, responder = script

    @tool
    def brittle() -> str:
        """Fails oddly."""
        raise _Unprintable

    responder.push(Reply((ReplyToolUse("brittle", {}, "toolu_1"),)), "It failed.")
    async with frontmind(api, tmp_path, tools=[brittle]) as fm:
        events = await run_turn(fm, "c1", "try it")
    assert completed(events).text == "It failed."
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.is_error
    assert finished.content == (
        "brittle failed: _Unprintable: (its message could not be read: ValueError)"
    )


async def test_list_reminders_lists_every_open_reminder(tmp_path: Path) -> None:
    # The tool the section points to for "the full list" listed the first 50: past
    # them, a reminder could be neither seen nor completed by its id.
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        for i in range(60):
            await fm.add_reminder(f"task {i}")
        events = await run_turn(fm, "ada", "list my reminders")
        completed(events)
        (listed,) = [e for e in events if isinstance(e, ToolFinished)]
        assert listed.name == "list_reminders"
        assert len(listed.content.splitlines()) == 60
        assert "task 59" in listed.content
