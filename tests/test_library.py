"""The library refuses bad input where it enters, before anything is composed or sent."""

from __future__ import annotations

import gc
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from actors import TurnStream
from frontmind import (
    ConfigError,
    DataDirLocked,
    Frontmind,
    InvalidInput,
    MessageTooLarge,
    ShuttingDown,
    StorageError,
    StorageUnavailable,
    TextDelta,
    Trinket,
    Turn,
    TurnError,
    TurnEvent,
    TurnStarted,
    tool,
)
from frontmind._exceptions import wire_error
from frontmind.config import ComposerSettings, Config
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyToolUse, ScriptedResponder
from storage import DEFAULT_USER, error_type
from tests._harness import FakeClock, completed, config, failed, frontmind, run_turn

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


async def test_two_instances_in_one_process_keep_apart_and_one_directory_opens_once(
    tmp_path: Path,
) -> None:
    """An app may open two instances on two directories; the same directory twice is
    refused, and the error says the holder is this process, not another one (it named
    "another Frontmind process" with the app's own pid)."""
    async with (
        LocalMessagesAPI() as api,
        frontmind(api, tmp_path / "a") as one,
        frontmind(api, tmp_path / "b") as two,
    ):
        await one.user("ann").put_document("about", "Ann of one")
        completed(await run_turn(one.user("ann"), "main", "hello"))
        completed(await run_turn(two.user("ann"), "main", "hello"))
        assert await two.user("ann").documents() == []
        assert len(await two.user("ann").history("main")) == 2
        with pytest.raises(DataDirLocked) as caught:
            async with frontmind(api, tmp_path / "a"):
                pass
        assert str(caught.value) == (
            f"the data directory {tmp_path / 'a'} is in use by another Frontmind "
            f"instance in this process (pid {os.getpid()})"
        )
        # The refused open left the holder's lock and store alone.
        completed(await run_turn(one.user("ann"), "main", "again"))


async def test_a_database_url_is_not_taken_for_a_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL URL handed to `Frontmind.open` where the data directory goes became a
    folder named after it, password and all, holding a SQLite store that took every
    write, and nothing said so. It is refused, naming only its scheme."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"storage\.url") as caught:
        async with Frontmind.open("postgresql://fm:secret@db.internal/frontmind", offline=True):
            pass
    assert "secret" not in str(caught.value)
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []


async def test_an_empty_data_directory_is_refused_not_taken_for_the_working_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Frontmind.open("")` (an app's unset setting) opened a store in whatever
    directory the app ran from, and nothing said so."""
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match="data_dir is empty"):
            async with Frontmind.open(empty, offline=True):
                pass
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []
    async with Frontmind.open(".", offline=True) as fm:  # said outright, it is taken
        assert await fm.documents() == []
    assert (tmp_path / "frontmind.db").exists()


def test_a_bad_config_value_is_a_config_error(tmp_path: Path) -> None:
    from frontmind import load_config

    (tmp_path / "frontmind.toml").write_text("[composer]\ndeadline_ms = -1\n")
    with pytest.raises(ConfigError, match="deadline_ms"):
        load_config(None, tmp_path)
    assert Config(composer=ComposerSettings(deadline_ms=100)).composer.deadline_ms == 100


async def test_a_memory_whose_expiry_has_passed_is_refused(tmp_path: Path) -> None:
    """A memory expiring before now (by the instance's clock) was stored, and no turn
    ever showed it; it is refused, nothing stored. One expiring later is kept."""
    clock = FakeClock()
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path, clock=clock) as fm:
        past = datetime.fromtimestamp(clock.now - 60, UTC)
        with pytest.raises(InvalidInput, match="has passed: the memory would never be shown"):
            await fm.remember("the user is in Oslo", expires_at=past)
        assert await fm.memories() == []
        later = datetime.fromtimestamp(clock.now + 60, UTC)
        kept = await fm.remember("the user is in Oslo", expires_at=later)
        assert kept.expires_at == later


async def test_a_missing_continuum_id_is_invalid_input_everywhere(tmp_path: Path) -> None:
    """`fm.history(None)` (an unset variable) said the storage was unavailable, "a read
    failed: Incorrect number of bindings supplied", and the store's settings read gave
    another continuum's settings: None was taken for "every continuum"."""
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        await fm.set_model_settings("ada", max_tokens=100)
        with pytest.raises(InvalidInput, match="continuum id None is malformed"):
            await fm.history(None)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="continuum id None is malformed"):
            await fm.storage.continuum_model(DEFAULT_USER, None)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="continuum id None is malformed"):
            await fm.model_settings(None)  # type: ignore[arg-type]
        # Nor are the segments of every continuum the answer for one (the manifest's).
        with pytest.raises(InvalidInput, match="continuum id None is malformed"):
            await fm.storage.recent_segments(DEFAULT_USER, None)  # type: ignore[arg-type]


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


async def test_closing_with_a_turn_queued_ends_it_and_a_closed_instance_says_so(
    tmp_path: Path,
) -> None:
    """Leaving `Frontmind.open` while a turn waits behind a running one ends the waiting
    one as the daemon's shutdown does (a `shutting_down` event and a record); the
    running one finishes. Afterwards every call raises a `FrontmindError` saying why,
    never the kernel's or the driver's own error."""
    responder = ScriptedResponder()
    entered, gate = anyio.Event(), anyio.Event()

    @tool
    async def hold() -> str:
        """Waits for the test."""
        entered.set()
        await gate.wait()
        return "held"

    responder.push(Reply((ReplyToolUse("hold", {}, "toolu_1"),)), "first done")
    first: list[TurnEvent] = []
    second: list[TurnEvent] = []

    async def read(stream: TurnStream, into: list[TurnEvent]) -> None:
        into.extend([event async for event in stream])

    async def close_while_reading(api: LocalMessagesAPI, tg: anyio.abc.TaskGroup) -> Frontmind:
        async with frontmind(api, tmp_path, tools=[hold]) as fm:
            tg.start_soon(read, fm.turn("c1", "first"), first)
            await entered.wait()
            tg.start_soon(read, fm.turn("c1", "second"), second)
            with anyio.fail_after(5):  # the second waits for its turn
                while fm._runtime.admission.queued(DEFAULT_USER, "c1") < 2:
                    await anyio.lowlevel.checkpoint()
            gate.set()  # the first goes on; the instance is closed before it ends
        return fm

    # The readers outlive the instance: it is closed while they read.
    async with LocalMessagesAPI(responder=responder) as api, anyio.create_task_group() as tg:
        fm = await close_while_reading(api, tg)
    assert completed(first).text == "first done"
    assert failed(second).type == "shutting_down"
    with pytest.raises(ShuttingDown):
        await run_turn(fm, "c1", "after")
    with pytest.raises(StorageUnavailable, match="closed"):
        await fm.reminders()
    with pytest.raises(StorageUnavailable, match="closed"):  # it wrote a copy of the file
        await fm.backup(tmp_path / "after.db")
    assert not (tmp_path / "after.db").exists()
    with pytest.raises(ShuttingDown):  # was the kernel's ActorStopped
        await fm.run_background()
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        records = await fm.turns("c1")
    assert [(r.status, r.user_text) for r in records] == [
        ("completed", "first"),
        ("cancelled", "second"),
    ]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("", InvalidInput, "empty"),
        (" \u200b", InvalidInput, "empty"),
        ("a\ud800", InvalidInput, "lone surrogate"),
        ("x" * 200_001, MessageTooLarge, "limit"),
        (5, InvalidInput, "text or a list"),
    ],
)
async def test_compose_refuses_what_a_turn_refuses(
    tmp_path: Path, text: Any, error: type[Exception], message: str
) -> None:
    """`fm.compose` previews a turn's sections for a message: a message no turn would
    take is refused the same way, before any section renders (it was composed, or a
    section failed with a logged traceback)."""
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        with pytest.raises(error, match=message):
            await fm.compose("c1", text)
        with pytest.raises(error, match=message):
            await run_turn(fm, "c1", text)
        composed = await fm.compose("c1", "hello")
    assert composed.sections


async def test_closing_ends_a_turn_never_read_at_once_and_one_past_the_grace(
    tmp_path: Path,
) -> None:
    """Closing as the daemon shuts down: a turn started and never read ends at once
    (not after the grace) with its record; one still running at the grace is
    cancelled, its reader told `shutting_down`, its record `cancelled`."""
    responder = ScriptedResponder()
    entered = anyio.Event()

    @tool
    async def forever() -> str:
        """Never returns."""
        entered.set()
        await anyio.Event().wait()
        return "unreachable"

    responder.push(Reply((ReplyToolUse("forever", {}, "toolu_1"),)))
    running: list[TurnEvent] = []

    async def read(stream: TurnStream) -> None:
        running.extend([event async for event in stream])

    async def close_with_turns(api: LocalMessagesAPI, tg: anyio.abc.TaskGroup) -> Frontmind:
        cfg = config(server={"grace_seconds": 1}, tools={"timeout_s": 600})
        async with frontmind(api, tmp_path, cfg=cfg, tools=[forever]) as fm:
            tg.start_soon(read, fm.turn("c1", "run on"))
            await entered.wait()
            await fm.turn("c2", "never read").start()
        return fm

    with anyio.fail_after(30):  # a hang, not a figure: the grace is 1 s
        async with LocalMessagesAPI(responder=responder) as api, anyio.create_task_group() as tg:
            await close_with_turns(api, tg)
    assert isinstance(running[0], TurnStarted)
    error = failed(running)
    assert (error.type, error.turn_id) == ("shutting_down", running[0].turn_id)
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        ran, unread = (await fm.turns("c1"))[0], (await fm.turns("c2"))[0]
    assert (ran.status, unread.status) == ("cancelled", "cancelled")
    assert unread.error is not None
    assert unread.error.startswith("shutting_down")


async def test_an_offline_instance_whose_block_raised_leaves_the_next_one_working(
    tmp_path: Path,
) -> None:
    """The block's error comes out as itself, and the local API it served is stopped
    before its socket closes: the next offline instance's turns were never answered
    (the closed socket's descriptor stayed in the event loop's selector)."""
    with pytest.raises(ValueError, match="the app's own") as raised:
        async with Frontmind.open(tmp_path, offline=True):
            raise ValueError("the app's own") from KeyError("its cause")
    assert isinstance(raised.value.__cause__, KeyError)  # kept (`from None` cut it)
    async with Frontmind.open(tmp_path, offline=True) as fm:
        with anyio.fail_after(60):
            events = [event async for event in fm.turn("a", "hi")]
    completed(events)


async def test_a_stream_closed_by_another_task_ends_its_readers_loop_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop button: one task reads, another calls `aclose()`. The reader's loop ends
    (it got a false `internal_error` event, "the conversation actor failed:
    ClosedResourceError", and the log an error with a traceback); the record says
    `cancelled` and the continuum goes on."""
    cfg = config(offline={"tokens_per_second": 20.0})
    async with Frontmind.open(tmp_path, cfg, offline=True) as fm:
        stream = fm.turn("a", "please talk for a while " * 4)
        seen: list[TurnEvent] = []
        talking = anyio.Event()

        async def read() -> None:
            async for event in stream:
                seen.append(event)
                if isinstance(event, TextDelta):
                    talking.set()

        with anyio.fail_after(30), caplog.at_level(logging.ERROR):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await talking.wait()
                await stream.aclose()
        assert not [e for e in seen if isinstance(e, TurnError)]
        assert "failed" not in caplog.text
        ((record,),) = [await fm.turns("a")]
        assert record.status == "cancelled"
        completed([event async for event in fm.turn("a", "next")])


async def test_a_turn_taken_in_and_dropped_unread_leaves_its_record(tmp_path: Path) -> None:
    """`start()` takes the turn in; dropped before a read (its finalizer closes it, and
    cannot await), it left no record. The background worker writes it."""
    async with Frontmind.open(tmp_path, offline=True) as fm:
        stream = fm.turn("a", "started, never read")
        await stream.start()
        turn_id = stream.turn_id
        del stream
        gc.collect()
        await anyio.lowlevel.checkpoint()  # the finalizer's close runs on the loop
        await fm.run_background()  # after the record it was told to write
        (record,) = await fm.turns("a")
        assert (record.turn_id, record.status) == (turn_id, "cancelled")
        assert "dropped" in (record.error or "")
        assert fm.admission.active == fm.admission.waiting == 0


async def test_a_turn_closed_by_another_task_while_it_waits_for_its_slot_ends_its_reader(
    tmp_path: Path,
) -> None:
    """The stop button pressed on a turn queued behind its continuum's running turn:
    its reader waited for ever (its ticket went, its wait was never told)."""
    cfg = config(offline={"tokens_per_second": 20.0})
    async with Frontmind.open(tmp_path, cfg, offline=True) as fm:
        first = fm.turn("a", "please talk for a while " * 4)
        second = fm.turn("a", "queued behind the first")
        seen: list[TurnEvent] = []
        talking, ended = anyio.Event(), anyio.Event()

        async def read_first() -> None:
            async for event in first:
                if isinstance(event, TextDelta):
                    talking.set()

        async def read_second() -> None:
            seen.extend([event async for event in second])
            ended.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_first)
                await talking.wait()
                tg.start_soon(read_second)
                while fm.admission.waiting < 1:  # the second waits for the slot
                    await anyio.lowlevel.checkpoint()
                await second.aclose()
                await ended.wait()
        assert seen == []
        records = {r.user_text: r.status for r in await fm.turns("a")}
        assert records["queued behind the first"] == "cancelled"


class Rendering(Trinket):
    """A render that says it has begun, then never returns (a dead service)."""

    begun: ClassVar[anyio.Event | None] = None

    async def render(self, turn: Turn) -> str:
        assert self.begun is not None
        self.begun.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("leave", ["cancel", "aclose", "preview"])
async def test_leaving_a_first_turn_while_a_section_renders_returns_at_once(
    tmp_path: Path, leave: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Cancelled (or closed) while composing, a continuum's first turn let go of the
    lane it had spawned on its caller's path, and stopping the lane waited for the
    composer's gather and the render in hand, up to `server.grace_seconds` (10 s) each:
    the caller's cancel was held that long for work nobody wanted any more. So was a
    cancelled `fm.context` of a continuum not loaded."""
    Rendering.begun = begun = anyio.Event()
    trinket = {
        "name": "rendering",
        "use": "tests.test_library:Rendering",
        "placement": "notification",
        "order": 60,
        "deadline_ms": 60_000,
    }
    async with (
        LocalMessagesAPI() as api,
        frontmind(api, tmp_path, cfg=config(trinket=[trinket])) as fm,
    ):
        stream = fm.turn("c1", "hello")

        async def read() -> None:
            if leave == "preview":
                await fm.context("c1", "hello")
            async for _ in stream:
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            with anyio.fail_after(5):
                await begun.wait()
            left = anyio.current_time()
            if leave == "aclose":
                await stream.aclose()
            else:
                tg.cancel_scope.cancel()
        # It was 20 s: the composer's grace, then the render's (a shielded wait, which
        # no `fail_after` around it would have cut short).
        assert anyio.current_time() - left < 1.5
        assert fm.loaded_continuums() == []  # the lane went all the same
        if leave == "preview":
            assert await fm.continuums() == []
        else:
            assert [r.status for r in await fm.turns("c1")] == ["cancelled"]
        assert api.requests == []
    # The preview the conversation still held failed as its composer stopped: no crash
    # of the conversation actor (logged with its traceback, twice, as it was restarted
    # to try the preview again).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("seconds", [float("nan"), 0, -1, float("inf"), True])
async def test_check_storage_refuses_a_timeout_that_is_no_time(
    tmp_path: Path, seconds: float
) -> None:
    async with Frontmind.open(tmp_path, offline=True) as fm:
        await fm.check_storage()
        with pytest.raises(InvalidInput, match="timeout_s must be a number of seconds above 0"):
            await fm.check_storage(seconds)
