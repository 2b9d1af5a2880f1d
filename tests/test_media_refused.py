"""One image or document the API can no longer use never breaks its continuum
(actors/_media_refused.py): an image by URL that stopped answering, or an image the API
cannot process, in the history goes to the model as a note, the request is sent once
more, and later turns send the note at once; the stored history keeps the block. In
the message being answered, it fails that turn with an error naming the block, and
nothing is stored; in a tool's result of the running turn, it goes as a note and the
tool loop goes on."""

from __future__ import annotations

import base64
import itertools
import struct
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors._media_refused import with_unusable
from frontmind import tool
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyToolUse, ScriptedResponder
from storage import DEFAULT_USER, InvalidInput, Message, RawBlock, TextBlock, ToolResultBlock
from tests._factories import turn as stored_turn
from tests._harness import completed, config, failed, frontmind, run_turn, tool_finishes, unmarked
from tests.test_localapi_fetch import broken_png, by_url
from tests.test_localapi_models import image, png

pytestmark = pytest.mark.anyio

PHOTO = "https://photos.example/cat.png"


def sent_messages(api: LocalMessagesAPI) -> int:
    """The requests to /v1/messages so far, refused ones included."""
    return sum(r.path == "/v1/messages" for r in api.state.requests)


def blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    ]


async def test_an_image_by_url_that_stopped_answering_goes_as_a_note(tmp_path: Path) -> None:
    """The photo's page went away after turn 1: every later request was refused
    ("Unable to download the file") while it stayed in the history window."""
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        first: Any = [by_url(PHOTO), {"type": "text", "text": "what is this?"}]
        assert completed(await run_turn(fm, "c1", first)).text
        api.take_down(PHOTO)
        before = sent_messages(api)
        second = completed(await run_turn(fm, "c1", "and its colour?"))
        assert sent_messages(api) == before + 2  # refused once, then sent with the note
        assert any("its error names none: the 1 of the history" in w for w in second.warnings)
        third = completed(await run_turn(fm, "c1", "thanks"))
        assert sent_messages(api) == before + 3  # no refused request first
        assert third.warnings == ()
        body = api.message_bodies()[-1]
        history = await fm.history("c1")
        preview = msgspec.json.decode(msgspec.json.encode(await fm.context("c1", "and now?")))
    sent = blocks(body)
    assert [b for b in blocks(preview) if b["type"] == "image"] == []  # as a turn sends it
    assert not [b for b in sent if b["type"] == "image"]
    notes = [b["text"] for b in sent if b["type"] == "text" and PHOTO in b["text"]]
    assert notes == [
        f"[an image by URL {PHOTO} from earlier in the conversation, left out of this "
        "request: the Messages API could not download a file by URL of this conversation, "
        "and this may be it; ask for it again if it is needed]"
    ]
    stored = [b for m in history for b in m.content if isinstance(b, RawBlock)]
    assert [msgspec.json.decode(b.json) for b in stored] == [by_url(PHOTO)]
    assert len(history) == 6


async def test_an_image_the_api_cannot_process_in_the_history_goes_as_a_note(
    tmp_path: Path,
) -> None:
    """A stored image the API now refuses to decode ("Could not process image"). Its
    error names no block, so each base64 image of the history can be it: both go as
    notes, and the request is answered."""
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        content = (RawBlock("image", msgspec.json.encode(image(broken_png())).decode()),)
        good = RawBlock("image", msgspec.json.encode(image(png(4, 4))).decode())
        messages = (
            Message("user", (*content, good, TextBlock("two screenshots"))),
            Message("assistant", (TextBlock("Seen."),)),
        )
        write = stored_turn("c1", "t0", messages=messages)
        assert await fm.storage.commit_turn(DEFAULT_USER, write)
        assert completed(await run_turn(fm, "c1", "what did they show?")).text
        assert completed(await run_turn(fm, "c1", "thanks")).text
        body = api.message_bodies()[-1]
        history = await fm.history("c1")
    sent = blocks(body)
    assert not [b for b in sent if b["type"] == "image"]
    assert [b["text"] for b in sent if b["type"] == "text" and "image" in b["text"]] == [
        "[an image (image/png) from earlier in the conversation, left out of this request: "
        "the Messages API could not process an image of this conversation, and this may "
        "be it; ask for it again if it is needed]"
    ] * 2
    assert history[0].content[:2] == (*content, good)


async def test_a_refused_block_of_the_message_answered_fails_its_turn(tmp_path: Path) -> None:
    """The message being answered holds the block: the turn fails with an error that
    names it, nothing is stored, and the next turn goes on."""
    gone = "https://gone.invalid/cat.png"
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        assert completed(await run_turn(fm, "c1", "hello")).text
        before = sent_messages(api)
        by_link: Any = [{"type": "text", "text": "look"}, by_url(gone)]
        error = failed(await run_turn(fm, "c1", by_link))
        assert sent_messages(api) == before + 1  # nothing of the history to leave out
        assert completed(await run_turn(fm, "c1", "still there?")).text
        history = await fm.history("c1")
    assert error.type == "model_rejected"
    assert error.message == (
        'the Messages API could not use an image or document of this turn: "Unable to '
        "download the file\" (its error names no block; it can be the message's content[1] "
        f"(an image by URL {gone})). Nothing was stored: send the message again without "
        "it, or with a copy the API can use"
    )
    assert [m.content[0] for m in history if m.role == "user"] == [
        TextBlock("hello"),
        TextBlock("still there?"),
    ]


SHOT = "https://screens.invalid/now.png"


@tool
def screenshot() -> list[dict[str, Any]]:
    """The screen: an image by a URL the API cannot download."""
    return [by_url(SHOT)]


def result_notes(body: dict[str, Any]) -> list[str]:
    """The text items of a request's tool results that note a block left out."""
    return [
        item["text"]
        for block in blocks(body)
        if block["type"] == "tool_result" and isinstance(block["content"], list)
        for item in block["content"]
        if item["type"] == "text" and "left out of this request" in item["text"]
    ]


def stored_results(history: list[Message]) -> list[str]:
    return [b.content_json for m in history for b in m.content if isinstance(b, ToolResultBlock)]


async def test_a_tools_image_the_api_cannot_download_goes_as_a_note_and_the_loop_goes_on(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A tool's image by a URL the API cannot download, in the running turn: the turn
    failed naming it. Now the request goes once more with it as a note saying the tool
    returned it, and the model answers; the history's photo (used by the request
    before) stays; the history stores the result whole, and the next turn sends its
    note at once."""
    api, responder = script
    responder.push(
        "A cat.",
        Reply((ReplyToolUse("screenshot", {}, "toolu_1"),)),
        "The screenshot did not load.",
        "Hello again.",
    )
    async with frontmind(api, tmp_path, tools=[screenshot]) as fm:
        first: Any = [by_url(PHOTO), {"type": "text", "text": "what is this?"}]
        assert completed(await run_turn(fm, "c1", first)).text == "A cat."
        before = sent_messages(api)
        done = completed(await run_turn(fm, "c1", "what is on my screen?"))
        assert sent_messages(api) == before + 3  # the loop's call refused once, then sent
        answered = api.message_bodies()[-1]
        after = sent_messages(api)
        assert completed(await run_turn(fm, "c1", "hello")).text == "Hello again."
        assert sent_messages(api) == after + 1  # no refused request first
        history = await fm.history("c1")
    assert done.text == "The screenshot did not load."
    assert result_notes(answered) == [
        f"[an image by URL {SHOT} returned by the tool, left out of this request: the "
        "Messages API could not download a file by URL of this request, and this may be "
        "it; call a tool again, or go on without it, if it is needed]"
    ]
    assert [b["source"]["url"] for b in blocks(answered) if b["type"] == "image"] == [PHOTO]
    assert [w for w in done.warnings if "Messages API" in w] == [
        "the Messages API could not use an image or document a tool returned in this turn "
        "(a URL that does not answer, or an image it cannot process), and its error names "
        "none: the 1 it can be went to the model as a note, and will from now on (the "
        "history keeps the results whole)"
    ]
    assert msgspec.json.decode(stored_results(history)[0]) == [by_url(SHOT)]
    assert [m.text() for m in history if m.role == "assistant"][-2:] == [
        "The screenshot did not load.",
        "Hello again.",
    ]


async def test_a_tools_image_the_api_cannot_process_goes_as_a_note(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A tool's PNG whose chunks are whole but whose pixels the API cannot decode (past
    what is inflated where it enters): "Could not process image" failed the turn. Now
    it goes as a note, and the model answers."""
    api, responder = script
    garbled = base64.b64encode(large_png(garbled=True)).decode()

    @tool
    def screenshot() -> list[dict[str, Any]]:
        """The screen."""
        return [image(garbled)]

    responder.push(Reply((ReplyToolUse("screenshot", {}, "toolu_1"),)), "It did not load.")
    async with frontmind(api, tmp_path, tools=[screenshot]) as fm:
        done = completed(await run_turn(fm, "c1", "what is on my screen?"))
        assert sent_messages(api) == 3
        answered = api.message_bodies()[-1]
        history = await fm.history("c1")
    assert done.text == "It did not load."
    assert result_notes(answered) == [
        "[an image (image/png) returned by the tool, left out of this request: the Messages "
        "API could not process an image of this request, and this may be it; call a tool "
        "again, or go on without it, if it is needed]"
    ]
    assert garbled in stored_results(history)[0]


# Fable 5.1 always thinks, and checks that nothing before a replayed thinking block
# changed (for a new account, as the local API's is).
FABLE: dict[str, Any] = {"name": "claude-fable-5-1", "thinking": "adaptive", "max_tokens": 4096}


async def test_on_a_prefix_checked_model_the_newest_results_image_goes_as_a_note(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """On a model whose thinking is bound to all the loop sent before it, a block the
    newest results hold was not sent yet: it goes as a note, and every request still
    extends the one before it unchanged."""
    api, responder = script
    responder.push(
        Reply((ReplyToolUse("screenshot", {}, "toolu_1"),)),
        Reply((ReplyToolUse("screenshot", {}, "toolu_2"),)),
        "Neither loaded.",
    )
    async with frontmind(api, tmp_path, cfg=config(model=FABLE), tools=[screenshot]) as fm:
        done = completed(await run_turn(fm, "c1", "what is on my screen?"))
        bodies = api.message_bodies()
    assert done.text == "Neither loaded."
    # The second call refused once, sent again with the note; the third noted at once.
    assert len(bodies) == 4
    refused, answered = bodies[1], [bodies[0], *bodies[2:]]
    assert [
        item["source"]["url"]
        for b in blocks(refused)
        if b["type"] == "tool_result"
        for item in b["content"]
        if item["type"] == "image"
    ] == [SHOT]
    assert [len(result_notes(body)) for body in answered] == [0, 1, 2]
    for before, after in itertools.pairwise(answered):
        # Each answered request extends the one before it: nothing it sent was changed.
        sent = unmarked(before["messages"])
        assert unmarked(after["messages"])[: len(sent)] == sent
    assert any(b["type"] == "thinking" for b in blocks(answered[-1]))  # bound to its prefix


@pytest.mark.parametrize(
    ("model", "goes_on"), [(None, True), (FABLE, False)], ids=["sonnet", "prefix-checked"]
)
async def test_a_block_an_answered_request_sent_gives_way_unless_thinking_is_bound_to_it(
    script: tuple[LocalMessagesAPI, ScriptedResponder],
    tmp_path: Path,
    model: dict[str, Any] | None,
    goes_on: bool,
) -> None:
    """The page of a tool's image went away after the model read it (a later tool of the
    loop took it down). On most models, the older result goes as a note and the loop goes
    on. On a model that checks thinking's prefix, what the loop sent before goes again
    unchanged: the turn fails saying why, keeping its rounds (the image as its note)."""
    api, responder = script
    page = "https://screens.example/now.png"

    @tool
    def screenshot() -> list[dict[str, Any]]:
        """The screen."""
        return [by_url(page)]

    @tool
    def close_tab() -> str:
        """Close the tab."""
        api.take_down(page)
        return "closed"

    responder.push(
        Reply((ReplyToolUse("screenshot", {}, "toolu_1"),)),
        Reply((ReplyToolUse("close_tab", {}, "toolu_2"),)),
        "Closed it.",
    )
    cfg = config() if model is None else config(model=model)
    async with frontmind(api, tmp_path, cfg=cfg, tools=[screenshot, close_tab]) as fm:
        events = await run_turn(fm, "c1", "look, then close the tab")
        history = await fm.history("c1")
    if goes_on:
        assert completed(events).text == "Closed it."
        assert msgspec.json.decode(stored_results(history)[0]) == [by_url(page)]
        return
    error = failed(events)
    assert error.message.startswith(
        'the Messages API could not use an image or document of this turn: "Unable to '
        'download the file" (its error names no block; it can be the result of tool call '
        f"toolu_1 (an image by URL {page})); on claude-fable-5-1, the turn's thinking is "
        "bound to all its tool loop sent before it (the API checks that prefix), so a "
        "block sent then cannot be left out now; 2 tool round(s) of this turn were kept"
    )
    assert '"url"' not in stored_results(history)[0]  # kept as its note


async def test_a_png_cut_short_is_refused_where_it_enters(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A PNG whose header reads but whose pixels do not: the API refuses the request
    ("Could not process image"). In a message, it is refused before any model call; in
    a tool's result, the call's result is an error the model reads, and the turn goes
    on."""
    api, responder = script

    @tool
    def screenshot() -> list[dict[str, Any]]:
        """The screen."""
        return [image(broken_png())]

    responder.push(Reply((ReplyToolUse("screenshot", {}, "toolu_1"),)), "It did not load.")
    async with frontmind(api, tmp_path, tools=[screenshot]) as fm:
        broken: Any = [image(broken_png()), {"type": "text", "text": "what is this?"}]
        with pytest.raises(InvalidInput, match=r"content\[0\].source.data: the PNG's image"):
            await run_turn(fm, "c1", broken)
        assert sent_messages(api) == 0
        events = await run_turn(fm, "c1", "what is on my screen?")
        assert completed(events).text == "It did not load."
        history = await fm.history("c1")
    (finished,) = tool_finishes(events)
    assert finished.is_error
    assert "the PNG's image data is cut short or corrupt" in finished.content
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]


def large_png(*, garbled: bool = False) -> bytes:
    """A 2,100 x 2,100 grey PNG (4.4 MB of pixels); `garbled`: its stream ends early,
    in a whole chunk, past what the door inflates."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    side = 2_100
    stream = zlib.compress(b"\x00" * ((side + 1) * side))
    if garbled:
        stream = stream[:-40]  # its last few codes: past 4 MB of pixels
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", stream)
        + chunk(b"IEND", b"")
    )


async def test_a_large_png_is_read_at_the_door_only_as_far_as_a_few_megabytes(
    tmp_path: Path,
) -> None:
    """The door's check of a PNG runs on the event loop, and inflating an 8000 x 8000
    image's pixels took 0.6 s of it: past a few megabytes of pixels, a PNG whose chunks
    are whole goes on, and one the API then cannot process fails its turn naming it.
    One cut short (a download that stopped) is refused at the door, however large."""
    whole = large_png()
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        cut: Any = [image(base64.b64encode(whole[: len(whole) // 2]).decode())]
        with pytest.raises(InvalidInput, match="the PNG's image data is cut short"):
            await run_turn(fm, "c1", cut)
        assert sent_messages(api) == 0
        fine: Any = [image(base64.b64encode(whole).decode()), {"type": "text", "text": "hi"}]
        assert completed(await run_turn(fm, "c1", fine)).text
        garbled: Any = [image(base64.b64encode(large_png(garbled=True)).decode())]
        error = failed(await run_turn(fm, "c1", garbled))
    assert '"Could not process image"' in error.message
    assert "it can be the message's content[0]" in error.message


async def test_a_dead_url_and_an_image_the_api_cannot_process_both_go_as_notes(
    tmp_path: Path,
) -> None:
    """The history holds an image by a URL that stopped answering and an image the API
    cannot process: each refusal names one kind, so the request is refused once for
    each and then answered; the next turn sends both notes at once. (The second refusal
    failed the turn, and every later one, for good.)"""
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        broken = RawBlock("image", msgspec.json.encode(image(broken_png())).decode())
        linked = RawBlock("image", msgspec.json.encode(by_url(PHOTO)).decode())
        messages = (
            Message("user", (linked, broken, TextBlock("two pictures"))),
            Message("assistant", (TextBlock("Seen."),)),
        )
        assert await fm.storage.commit_turn(
            DEFAULT_USER, stored_turn("c1", "t0", messages=messages)
        )
        api.take_down(PHOTO)
        before = sent_messages(api)
        second = completed(await run_turn(fm, "c1", "what did they show?"))
        assert sent_messages(api) == before + 3  # refused for each kind, then answered
        third = completed(await run_turn(fm, "c1", "thanks"))
        assert sent_messages(api) == before + 4
        body = api.message_bodies()[-1]
    assert [w for w in second.warnings if "its error names none: the 2 of the history" in w]
    assert third.warnings == ()
    assert not [b for b in blocks(body) if b["type"] == "image"]


async def test_a_png_too_large_is_refused_for_its_size_before_its_pixels_are_read(
    tmp_path: Path,
) -> None:
    """Its pixels are inflated to be checked, and a PNG of a few MB that says it is
    100,000 pixels wide can hold gigabytes of them: the turn's door inflated them all
    (seconds of the event loop every turn shares) before refusing it for its size.
    Its size is read first; so it is refused for that, even when its data is cut short
    as well."""
    wide = base64.b64decode(broken_png())
    ihdr = struct.pack(">IIBBBBB", 100_000, 128, 8, 0, 0, 0, 0)
    wide = wide[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + wide[33:]
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        shown: Any = [image(base64.b64encode(wide).decode())]
        with pytest.raises(InvalidInput, match=r"it is 100000 x 128 pixels; the API takes"):
            await run_turn(fm, "c1", shown)
        assert sent_messages(api) == 0


async def test_the_warning_does_not_say_every_block_noted_was_refused(tmp_path: Path) -> None:
    """Two photos by URL, one of whose pages went away: the API's error names neither,
    so both go as notes; the warning said the API "could not use 2 image(s)"."""
    other = "https://photos.example/dog.png"
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        both: Any = [by_url(PHOTO), by_url(other), {"type": "text", "text": "which is older?"}]
        assert completed(await run_turn(fm, "c1", both)).text
        api.take_down(PHOTO)
        second = completed(await run_turn(fm, "c1", "and the colours?"))
    assert [w for w in second.warnings if "Messages API" in w] == [
        "the Messages API could not use an image or document of the history (a URL that no "
        "longer answers, or an image it cannot process), and its error names none: the 2 of "
        "the history it can be go to the model as a note from now on (the history keeps them)"
    ]


def test_only_the_blocks_of_a_remembered_kind_are_read_again() -> None:
    """Once a URL was remembered as unusable, every request of its continuum (each call
    of a tool loop) decoded and hashed the data of every base64 image of the history,
    looking for it (150 ms of the event loop a request with 100 screenshots of 1 MB, 52
    ms with only the kinds remembered read, once a turn). What is read is the kinds
    remembered: a URL leaves every base64 image as it was (the very block), and a base64
    image remembered leaves the URL's."""
    data = base64.b64encode(bytes(range(256)) * 2_800).decode()
    history = [
        Message("user", (RawBlock("image", msgspec.json.encode(image(f"{data}{i:04d}")).decode()),))
        for i in range(100)
    ]
    history.append(
        Message("user", (RawBlock("image", msgspec.json.encode(by_url(PHOTO)).decode()),))
    )
    kept = with_unusable(history, {f"url {PHOTO}"})
    assert isinstance(kept[-1].content[0], TextBlock)
    assert all(k is h for k, h in zip(kept[:-1], history[:-1], strict=True))
    other = with_unusable(history, {f"image {'0' * 32}"})  # a base64 image remembered
    assert other[-1] is history[-1]
    assert [m.content[0] for m in other[:-1]] == [m.content[0] for m in history[:-1]]
