"""The console at /ui/, driven in a real headless Chromium (Debian's `chromium`, through
Playwright for Python pointed at that executable) against a real daemon child process.

Screenshots of each view go to tests/artifacts/console/ (ignored by git). Without
Chromium or Playwright these tests skip, except in CI (the CI variable set), where they
fail: CI installs chromium (.ci/run).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from actors import BLOCK_FRAMING_TOKENS, estimate_tokens, input_cost
from actors._history_cost import IMAGE_TOKENS
from frontmind._models import shipped_catalog
from storage import (
    DEFAULT_USER,
    Message,
    RawBlock,
    SQLiteStorage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnUsage,
)
from tests._daemon import COMMAND, ROOT, child_env, daemon, sse_events, turn
from tests._factories import turn as stored_turn

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.browser]

# Debian's chromium; FRONTMIND_TEST_CHROMIUM names another (tests/test_install.py points
# it at nothing, to see the suite skip, or fail in CI).
CHROMIUM = Path(os.environ.get("FRONTMIND_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "tests" / "artifacts" / "console"
TOKEN = "console-test-token"
WAIT_MS = 30_000


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the console tests need Chromium and Playwright in CI: {why}")
    pytest.skip(why)


@asynccontextmanager
async def browser_page(
    width: int = 1280, height: int = 900, *, expected: tuple[str, ...] = ()
) -> AsyncIterator[Any]:
    """A page in headless Chromium whose console errors and page errors are collected
    and must be none when the block ends, but those holding one of `expected` (Chromium
    logs each HTTP error answer it loads)."""
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import async_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed: {exc}")
    async with async_playwright() as pw:
        try:
            browser = await pw.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
        except PlaywrightError as exc:
            _unavailable(f"Chromium would not start: {exc}")
        try:
            context = await browser.new_context(viewport={"width": width, "height": height})
            page = await context.new_page()
            page.set_default_timeout(WAIT_MS)
            problems: list[str] = []
            page.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "assert") and not any(e in m.text for e in expected)
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            yield page
            assert problems == [], problems
        finally:
            await browser.close()


async def shot(page: Any, name: str, *, element: str | None = None) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if element:
        await page.locator(element).screenshot(path=str(path))
    else:
        await page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def num(value: float, digits: int = 0) -> str:
    """A number as the console shows it (en-US grouping, rounded half away from zero)."""
    quantum = Decimal(1).scaleb(-digits)
    rounded = Decimal(str(round(value, 6))).quantize(quantum, rounding=ROUND_HALF_UP)
    return f"{rounded:,.{digits}f}"


async def send_and_watch(page: Any, text: str) -> list[str]:
    """Send `text` from the chat box; the reply texts seen while it streamed."""
    # Every text the live reply held, from the mutation records themselves: a batch of
    # deltas that arrives in one network read still shows as one record per delta.
    await page.evaluate(
        """() => {
          window.__seen = [];
          const t = document.getElementById('transcript');
          new MutationObserver((records) => {
            for (const r of records) {
              const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
              if (!el || !el.matches('.msg.assistant .text')) continue;
              for (const n of r.addedNodes) if (n.nodeType === 3) window.__seen.push(n.data);
            }
          }).observe(t, {childList: true, subtree: true, characterData: true});
        }"""
    )
    await page.fill("#chat textarea", text)
    await page.click("#chat button[type=submit]")
    await page.wait_for_selector("#transcript .msg.assistant:last-child .completed")
    await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
    seen: list[str] = await page.evaluate("window.__seen")
    return seen


async def test_console_views_turns_context_and_reminders(tmp_path: Path) -> None:
    async with (
        daemon(tmp_path / "data", "--token", TOKEN) as d,
        d.client(headers={"authorization": f"Bearer {TOKEN}"}) as api,
    ):
        # The page is public (it holds no data), the API is not.
        async with d.client() as anonymous:
            assert (await anonymous.get("/ui/")).status_code == 200
            assert (await anonymous.get("/v1/continuums")).status_code == 401
        first = await turn(api, "garden", "What should I plant in spring?")
        assert first[-1][0] == "turn.completed"

        async with browser_page() as page:
            # The list, after giving the token once.
            await page.goto(f"{d.url}/ui/")
            await page.fill("#token-input", TOKEN)
            await page.press("#token-input", "Enter")
            row = page.locator("#continuums tbody tr", has_text="garden")
            await row.wait_for()
            listed = (await api.get("/v1/continuums")).json()["continuums"][0]
            cells = await row.locator("td").all_inner_texts()
            assert cells[0] == "garden"
            assert cells[1] == "1"
            assert cells[3] == f"{num(listed['cached_share'] * 100, 1)}%"
            assert cells[4] == num(listed["input_cost_tokens"], 1)
            await shot(page, "list")

            # A continuum by deep link (the token stays in the tab's session storage).
            await page.goto(f"{d.url}/ui/continuums/garden")
            await page.wait_for_selector("#turns-table tbody tr")
            await page.wait_for_selector("#stack")
            assert await page.locator("#transcript .msg").count() == 2

            # A turn streams into the chat box.
            seen = await send_and_watch(page, "And which of them likes shade?")
            reply = await page.locator("#transcript .msg.assistant .text").last.inner_text()
            assert reply.startswith("You said: “And which of them likes shade?”")
            partial = [s for s in seen if s and s != reply]
            assert partial, f"the reply never showed partly streamed: {seen}"

            # Its row and bar carry the numbers the API reports.
            records = (await api.get("/v1/continuums/garden/turns")).json()["turns"]
            assert len(records) == 2
            last = records[-1]
            usage = last["usage"]
            rows = page.locator("#turns-table tbody tr")
            assert await rows.count() == 2
            cells = await rows.nth(1).locator("td").all_inner_texts()
            assert cells[2] == "And which of them likes shade?"
            assert cells[3] == num(usage["cache_read_input_tokens"])
            assert cells[4].startswith(num(usage["cache_creation_input_tokens"]))
            assert cells[5] == num(usage["input_tokens"])
            # The cost is the daemon's, priced on the turn's model, shown as it is.
            row = shipped_catalog().lookup(last["model"])
            assert last["input_cost_tokens"] == input_cost(TurnUsage(**usage), row)
            assert cells[6] == num(last["input_cost_tokens"], 1)
            assert cells[8] == num(last["first_token_ms"])
            assert cells[9] == num(last["total_ms"])
            for section in last["sections"]:
                shown = "left out" if section["status"] == "empty" else section["status"]
                assert f"{section['name']}: {shown}" in cells[10]
            assert usage["cache_read_input_tokens"] > 0  # the second turn reads the first's
            bar = page.locator(f"#turns-chart g.turn[data-turn='{last['turn_id']}'] rect.read")
            assert await bar.get_attribute("data-value") == str(usage["cache_read_input_tokens"])
            assert await page.locator("#turns-chart g.turn").count() == 2
            await shot(page, "continuum")

            # The next request as a stack: the notification center with its sections, and
            # both breakpoints (system, history).
            await page.wait_for_selector("#stack section[data-kind=notification]")
            expected = (
                await api.get("/v1/continuums/garden/context", params={"message": "x"})
            ).json()
            marks = [
                b
                for b in [
                    *expected["system"],
                    *(c for m in expected["messages"] for c in m["content"]),
                ]
                if "cache_control" in b
            ]
            assert len(marks) == 2
            assert await page.locator("#stack .breakpoint").count() == 2
            assert await page.locator("#stack section[data-kind=system] .breakpoint").count() == 1
            assert await page.locator("#stack section[data-kind=history] .breakpoint").count() == 1
            sections = page.locator("#stack section[data-kind=notification] .section .label")
            assert "datetime_section" in await sections.all_inner_texts()
            # Each tool says where it came from.
            tools = page.locator("#stack section[data-kind=tools] .block .label")
            assert "tool · built-in · add_reminder" in await tools.all_inner_texts()

            # Token estimates per block are Frontmind's (4 UTF-8 bytes a token, 3 a block).
            def shown(text: str) -> str:
                return f"≈{num(estimate_tokens(text) + BLOCK_FRAMING_TOKENS)} tok"

            current = page.locator("#stack section[data-kind=current] .block .tokens")
            assert await current.inner_text() == shown("(the next message)")
            delimiter = next(
                m["content"][0]["text"]
                for m in expected["messages"]
                if m["role"] == "user" and set(m["content"][0]["text"]) == {"═"}
            )
            block = page.locator("#stack section[data-kind=delimiter] .block .tokens")
            assert await block.inner_text() == shown(delimiter)
            prompt = page.locator("#stack section[data-kind=system] .block .tokens").first
            assert await prompt.inner_text() == shown(expected["system"][0]["text"])
            await shot(page, "context", element="#context-panel")

            # A past turn: the one this tab sent has its request, the one before does not.
            await rows.nth(1).click()
            await page.wait_for_selector("#context-title:has-text('previewed just before')")
            assert await page.locator("#stack .breakpoint").count() == 2
            await rows.nth(0).click()
            await page.wait_for_selector("#context-title:has-text('not recorded')")
            assert await page.locator("#stack").count() == 0

            # A reminder added in the console shows in the next turn's notification center.
            await page.click("a[href='/ui/library']")
            await page.fill("#add-reminder input[name=text]", "water the ferns")
            await page.click("#add-reminder button[type=submit]")
            await page.locator("#reminder-list li", has_text="water the ferns").wait_for()
            await page.fill("#add-memory input[name=text]", "ferns like shade")
            await page.click("#add-memory button[type=submit]")
            await page.locator("#memory-list li", has_text="ferns like shade").wait_for()
            await page.fill("#add-document input[name=label]", "garden-plan")
            await page.fill("#add-document textarea[name=content]", "Beds: north, south.")
            await page.click("#add-document button[type=submit]")
            await page.locator("#document-list li", has_text="garden-plan").wait_for()
            await shot(page, "library")

            await page.go_back()
            await page.wait_for_selector("#turns-table tbody tr")
            # This turn calls a tool: the call and its result show in the chat as they run.
            await send_and_watch(page, "Remind me to repot the basil in 2 hours")
            live = page.locator("#transcript .msg.assistant").last
            tool = live.locator(".tool")
            # The call as the model made it: its name and its input, as JSON.
            called, result = (await tool.inner_text()).split("\n", 1)
            assert called == '⚙ add_reminder {"due_in_minutes":120,"text":"repot the basil"}'
            assert result.startswith("↳ ")
            assert await tool.locator(".muted").count() == 1  # its result, not an error
            # The two model calls' replies read as two paragraphs.
            said = await live.locator(".text").inner_text()
            assert said.startswith("On it.\n\nTool done: "), said
            await page.locator("#turns-table tbody tr").nth(2).click()
            await page.wait_for_selector("#context-title:has-text('previewed just before')")
            reminder = page.locator(
                "#stack section[data-kind=notification] .section", has_text="water the ferns"
            )
            await reminder.wait_for()
            await shot(page, "turn-request", element="#context-panel")

            # Complete and delete from the console; the API agrees.
            await page.goto(f"{d.url}/ui/library")
            item = page.locator("#reminder-list li", has_text="water the ferns")
            await item.get_by_role("button", name="Complete").click()
            await page.locator("#reminder-list li", has_text="water the ferns").wait_for(
                state="detached"
            )
            reminders = (await api.get("/v1/reminders?include_completed=true")).json()
            done = {r["text"]: r["completed_at"] is not None for r in reminders["reminders"]}
            assert done == {"water the ferns": True, "repot the basil": False}
            memory = page.locator("#memory-list li", has_text="ferns like shade")
            await memory.get_by_role("button", name="Delete").click()
            await memory.wait_for(state="detached")
            document = page.locator("#document-list li", has_text="garden-plan")
            await document.get_by_role("button", name="Delete").click()
            await document.wait_for(state="detached")
            assert (await api.get("/v1/memories")).json()["memories"] == []
            assert (await api.get("/v1/documents")).json()["documents"] == []


async def test_console_at_a_phone_width(tmp_path: Path) -> None:
    async with daemon(tmp_path / "data") as d, d.client() as api:
        for i in range(5):
            await turn(api, "pocket", f"Hello from a small screen, {i + 1} of 5")
        await turn(api, "pocket", "שלום! מה שלומך?")
        async with browser_page(width=390, height=844) as page:
            await page.goto(f"{d.url}/ui/continuums/pocket")
            await page.wait_for_selector("#turns-table tbody tr")
            await page.wait_for_selector("#stack section[data-kind=notification]")
            # No token asked for (none set), and nothing wider than the screen but the
            # tables, which scroll inside their own box.
            assert await page.locator("#token-form").is_hidden()
            # Ten history blocks fold away; the history breakpoint stays in sight after them.
            history = page.locator("#stack section[data-kind=history]")
            fold = history.locator("details.fold > summary .label")
            assert await fold.inner_text() == "12 blocks"
            assert await history.locator("details.fold + .breakpoint").count() == 1
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, width
            # Hebrew reads right to left (its "!" at the left end), English left to right.
            hebrew = page.locator("#transcript .msg.user .text", has_text="שלום")
            assert await hebrew.evaluate("e => getComputedStyle(e).direction") == "rtl"
            english = page.locator("#transcript .msg.user .text").first
            assert await english.evaluate("e => getComputedStyle(e).direction") == "ltr"
            await shot(page, "phone")


async def test_serve_prints_the_console_address_second(tmp_path: Path) -> None:
    command = [*COMMAND, "serve", "--port", "0", "--offline", "--data-dir", str(tmp_path)]
    process = await anyio.open_process(command, cwd=ROOT, env=child_env())
    try:
        assert process.stdout is not None
        stdout = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(30):
            api = (await stdout.receive_until(b"\n", 1000)).decode()
            console = (await stdout.receive_until(b"\n", 1000)).decode()
        assert api.startswith("http://127.0.0.1:")
        assert console == f"console: {api}/ui/"
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()
        await process.aclose()


async def test_a_long_continuum_shows_its_latest_messages(tmp_path: Path) -> None:
    """The transcript holds the last 200 messages of a continuum of 2,400: it showed the
    first 200 (the API's pages run oldest first), months old under the newest turns."""
    data = tmp_path / "data"
    data.mkdir()
    async with await SQLiteStorage.open(data / "frontmind.db") as store:
        for i in range(1_200):
            await store.commit_turn(DEFAULT_USER, stored_turn("long", f"t{i}", at=1e6 + i))
    async with daemon(data, "--token", TOKEN) as d, browser_page() as page:
        await page.goto(f"{d.url}/ui/")
        await page.fill("#token-input", TOKEN)
        await page.press("#token-input", "Enter")
        await page.locator("#continuums tbody tr", has_text="long").wait_for()
        await page.goto(f"{d.url}/ui/continuums/long")
        await page.wait_for_selector("#transcript .msg")
        shown = await page.locator("#transcript .msg .text").all_inner_texts()
    assert len(shown) == 200
    assert shown[0] == "question t1100"
    assert shown[-1] == "answer t1199"


async def test_the_library_reaches_past_its_first_page(tmp_path: Path) -> None:
    """Reminders, memories and documents past the first 200 are one "More" away: the
    library showed a page of each and nothing beyond it, so a long-lived user's newest
    reminder (they are listed oldest first), oldest memories and last documents by
    label could not be seen, completed or deleted, and nothing said they were there."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        for i in range(201):
            made = await api.post("/v1/reminders", json={"text": f"reminder {i:03}"})
            assert made.status_code == 201, made.text
            made = await api.post("/v1/memories", json={"text": f"memory {i:03}"})
            assert made.status_code == 201, made.text
            made = await api.post("/v1/documents", json={"label": f"doc{i:03}", "content": "x"})
            assert made.status_code in (200, 201), made.text
        async with browser_page() as page:
            await page.goto(f"{d.url}/ui/library")
            for panel, last in (
                ("#reminders", "reminder 200"),
                ("#memories", "memory 000"),
                ("#documents", "doc200"),
            ):
                items = page.locator(f"{panel} ul.items > li")
                await items.nth(199).wait_for()
                assert await items.count() == 200
                assert await page.locator(f"{panel} li", has_text=last).count() == 0
                await page.locator(panel).get_by_role("button", name="More").click()
                await page.locator(f"{panel} li", has_text=last).wait_for()
                assert await items.count() == 201
                assert await page.locator(panel).get_by_role("button", name="More").is_hidden()
            # What is past the first page can be acted on: the newest reminder completed.
            newest = page.locator("#reminder-list li", has_text="reminder 200")
            await newest.get_by_role("button", name="Complete").click()
            await newest.wait_for(state="detached")
        done = (await api.get("/v1/reminders?include_completed=true&limit=1000")).json()
        assert [r["text"] for r in done["reminders"] if r["completed_at"]] == ["reminder 200"]


async def test_console_files_and_deep_links(tmp_path: Path) -> None:
    async with daemon(tmp_path / "data", "--token", TOKEN) as d, d.client() as http:
        page = await http.get("/ui/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        deep = await http.get("/ui/continuums/anything")
        assert deep.status_code == 200
        # The same page, its files named from one folder further down (a proxy's prefix
        # is the browser's alone: see the test under a prefix).
        assert 'src="./app.js"' in page.text
        assert deep.text == page.text.replace('"./', '"../')
        script = await http.get("/ui/app.js")
        assert script.headers["content-type"].startswith(
            ("text/javascript", "application/javascript")
        )
        assert (await http.get("/ui/missing.js")).status_code == 404
        assert (await http.get("/ui/settings.json")).json() == {"token_required": True}
        # Files only: nothing under /ui/ writes.
        assert (await http.post("/ui/", json={})).status_code == 405


async def test_ui_without_its_slash_redirects_within_any_prefix(tmp_path: Path) -> None:
    """/ui redirected to an absolute /ui/ built from the request the daemon saw: behind
    a proxy serving the daemon at https://host/fm/ (the prefix stripped), the browser
    landed on the host's /ui/, outside the prefix. The Location is relative, `ui/`,
    which the browser resolves against the URL it asked for, whatever the prefix."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from frontmind import Frontmind
    from frontmind.server._asgi import serve_app
    from frontmind.server._daemon import build_app
    from frontmind.server._metrics import Metrics

    async with daemon(tmp_path / "data", "--token", TOKEN) as d, d.client() as http:
        # As a proxy serving the daemon at /fm/ forwards /fm/ui: the prefix stripped.
        behind = await http.get("/ui")
        assert behind.status_code == 307
        assert behind.headers["location"] == "ui/"
        assert (await http.get("/ui?view=library")).headers["location"] == "ui/?view=library"
        assert (await http.head("/ui")).headers["location"] == "ui/"
        followed = await http.get("/ui", follow_redirects=True)
        assert (followed.status_code, followed.url.path) == (200, "/ui/")
        assert followed.headers["content-type"].startswith("text/html")
        assert (await http.post("/ui", json={})).status_code == 405  # files only
        assert await d.stop() == 0
    # Mounted at a path in another app, as a proxy's prefix is: followed from /fm/ui.
    async with (
        Frontmind.open(tmp_path / "mounted", offline=True) as fm,
        serve_app(Starlette(routes=[Mount("/fm", app=build_app(fm, metrics=Metrics()))])) as app,
        httpx2.AsyncClient(base_url=app.url, timeout=30) as http,
    ):
        redirect = await http.get("/fm/ui")
        assert redirect.headers["location"] == "ui/"
        page = await http.get("/fm/ui", follow_redirects=True)
        assert (page.status_code, page.url.path) == (200, "/fm/ui/")
        assert 'src="./app.js"' in page.text


async def test_the_console_works_under_a_prefix(tmp_path: Path) -> None:
    # Served under a prefix (mounted in another app at /fm, or behind a proxy serving
    # the daemon at /fm/), the page named its files and every API call from the root:
    # /ui/app.js and /v1/continuums, the prefix's host's, not the daemon's.
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from frontmind import Frontmind
    from frontmind.server._asgi import serve_app
    from frontmind.server._daemon import build_app
    from frontmind.server._metrics import Metrics
    from tests._harness import config

    cfg = config(offline={"time_to_first_token_s": 0.0, "tokens_per_second": 0.0})
    async with (
        Frontmind.open(tmp_path, cfg, offline=True) as fm,
        serve_app(Starlette(routes=[Mount("/fm", app=build_app(fm, metrics=Metrics()))])) as app,
        browser_page(expected=("status of 404",)) as page,  # c1's turns, before its first
    ):
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url.removeprefix(app.url)))
        await page.goto(f"{app.url}/fm/ui/continuums/c1")  # a deep link, loaded directly
        await send_and_watch(page, "hello under a prefix")
        reply = page.locator("#transcript .msg.assistant:last-child .text")
        assert "hello under a prefix" in await reply.inner_text()
        await page.click("header nav a:has-text('Reminders')")  # the page's own links
        await page.wait_for_selector("#reminder-list")
        assert await page.evaluate("location.pathname") == "/fm/ui/library"
        await page.click("header nav a:has-text('Continuums')")
        await page.locator("#continuums a", has_text="c1").wait_for()
        assert await page.evaluate("location.pathname") == "/fm/ui/"
    assert asked
    assert all(url.startswith("/fm/") for url in asked), asked
    assert {"/fm/ui/app.js", "/fm/ui/settings.json", "/fm/v1/continuums/c1/turns"} <= {
        url.split("?")[0] for url in asked
    }


def test_static_files_are_in_the_source_tree() -> None:
    # Guard against a file the page imports but the package would not ship.
    static = ROOT / "frontmind" / "server" / "console" / "static"
    names = {p.name for p in static.iterdir()}
    assert {"index.html", "app.js", "api.js", "console.css"} <= names
    for script in static.glob("*.js"):
        for line in script.read_text().splitlines():
            if line.startswith("import ") and '"./' in line:
                imported = line.split('"./', 1)[1].split('"', 1)[0]
                assert imported in names, (script.name, imported)


async def test_a_long_paste_is_sent_whole(tmp_path: Path) -> None:
    """A 20 KB paste is sent: the console previewed each turn's request through
    GET …/context?message=<the text>, which the daemon refuses (414) past a 16 KB request
    line, and then never sent the turn, its text gone from the box."""
    # A stack trace: its first line's indentation is part of it, and stays.
    paste = "\n".join(f"    at worker{i % 7}.run(Worker.java:{i}) timed out" for i in range(500))
    assert len(paste) > 20_000
    async with daemon(tmp_path / "data") as d, d.client() as api:
        await turn(api, "paste", "hello")
        async with browser_page() as page:
            await page.goto(f"{d.url}/ui/continuums/paste")
            await page.wait_for_selector("#turns-table tbody tr")
            await page.fill("#chat textarea", paste)
            await page.press("#chat textarea", "Enter")
            await page.wait_for_selector(
                "#transcript .msg.assistant:last-child .completed, #status.error"
            )
            assert await page.locator("#status").is_hidden()
            await page.wait_for_selector("#turns-table tbody tr:nth-child(2)")
            records = (await api.get("/v1/continuums/paste/turns")).json()["turns"]
            assert [r["user_text"] for r in records] == ["hello", paste]
            # Its request was not previewed (too long for a URL): the panel says so.
            await page.locator("#turns-table tbody tr").nth(1).click()
            await page.wait_for_selector("#context-title:has-text('not recorded')")


async def test_a_refused_or_cut_off_turn_says_so(tmp_path: Path) -> None:
    """A turn the daemon refuses (503 overloaded) shows as not sent, its text back in the
    box; one whose stream ends before its last event shows as cut off. Both left an empty
    reply with a blinking cursor, as if it were still coming, and the refused message was
    gone from the box."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        await turn(api, "flaky", "hello")
        async with browser_page(expected=("status of 503",)) as page:
            overloaded = {"error": {"type": "model_overloaded", "message": "try again soon"}}

            async def refuse(route: Any) -> None:
                await route.fulfill(status=503, json=overloaded, headers={"retry-after": "5"})

            await page.route("**/v1/continuums/flaky/turns", refuse)
            await page.goto(f"{d.url}/ui/continuums/flaky")
            await page.wait_for_selector("#turns-table tbody tr")
            await page.fill("#chat textarea", "are you there?")
            await page.press("#chat textarea", "Enter")
            last = page.locator("#transcript .msg.assistant").last
            await last.locator(".error").wait_for()
            assert await last.locator(".error").inner_text() == (
                "not sent: model_overloaded: try again soon"
            )
            assert await page.locator("#transcript .streaming, #transcript .live").count() == 0
            await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
            assert await page.input_value("#chat textarea") == "are you there?"
            assert await page.locator("#status").inner_text() == (
                "model_overloaded: try again soon"
            )

            # Accepted, a first word, then the stream ends: cut off, not still coming.
            partial = (
                'event: turn.started\ndata: {"turn_id": "t-cut", "continuum_id": "flaky"}\n\n'
                'event: text.delta\ndata: {"turn_id": "t-cut", "text": "Well"}\n\n'
            )

            async def cut(route: Any) -> None:
                await route.fulfill(
                    status=200, body=partial, headers={"content-type": "text/event-stream"}
                )

            await page.unroute("**/v1/continuums/flaky/turns")
            await page.route("**/v1/continuums/flaky/turns", cut)
            await page.press("#chat textarea", "Enter")
            sent = page.locator("#transcript .msg.user", has_text="are you there?")
            await sent.nth(1).wait_for()
            last = page.locator("#transcript .msg.assistant").last
            await last.locator(".error").wait_for()
            assert await last.locator(".text").inner_text() == "Well"
            assert "cut off" in await last.locator(".error").inner_text()
            assert await page.locator("#transcript .streaming, #transcript .live").count() == 0
            await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
            assert await page.input_value("#chat textarea") == ""


async def test_the_chat_box_by_keyboard_and_screen_reader(tmp_path: Path) -> None:
    """Typing Japanese (or Chinese, Korean) through an input method, Enter picks the
    characters; it sent the message instead, with the kana not yet converted. While a
    reply streams (the Send button disabled), Enter sent the next message anyway. And a
    screen reader heard no reply: the conversation was no live region."""
    slow = tmp_path / "slow.toml"
    slow.write_text("[offline]\ntime_to_first_token_s = 0.5\n")
    async with daemon(tmp_path / "data", "--config", str(slow)) as d, d.client() as api:
        await turn(api, "ime", "hello")
        async with browser_page() as page:
            await page.goto(f"{d.url}/ui/continuums/ime")
            await page.wait_for_selector("#turns-table tbody tr")
            # For a screen reader: the box has a name, the conversation is a log (a live
            # region), and the status line is there (empty) before it has news.
            conversation = page.get_by_role("log", name="Conversation")
            assert await conversation.get_by_text("hello", exact=True).count() == 1
            assert await page.get_by_role("status").count() == 1
            await page.get_by_role("textbox", name="Message", exact=True).focus()
            await page.keyboard.type("I live in ")
            cdp = await page.context.new_cdp_session(page)
            kana = {"text": "にほん", "selectionStart": 3, "selectionEnd": 3}
            await cdp.send("Input.imeSetComposition", kana)
            await page.keyboard.press("Enter")  # ends the composition: isComposing
            await cdp.send("Input.insertText", {"text": "日本"})  # the input method commits
            await page.keyboard.press("Enter")  # sends
            await page.wait_for_selector("#transcript .msg.assistant:last-child .completed")
            await page.wait_for_selector("#turns-table tbody tr:nth-child(2)")
            records = (await api.get("/v1/continuums/ime/turns")).json()["turns"]
            assert [r["user_text"] for r in records] == ["hello", "I live in 日本"]

            # Enter while the reply streams keeps the message in the box, unsent.
            await page.keyboard.type("And you?")
            await page.keyboard.press("Enter")
            await page.wait_for_selector("#chat button[type=submit][disabled]")
            # The reply is busy while it streams: read out once, when it is complete.
            await page.wait_for_selector("#transcript .msg.assistant[aria-busy=true]")
            await page.keyboard.type(" Where?")
            await page.keyboard.press("Enter")
            await page.wait_for_selector("#transcript .msg.assistant:last-child .completed")
            await page.wait_for_selector("#turns-table tbody tr:nth-child(3)")
            assert await page.input_value("#chat textarea") == " Where?"
            assert (
                await page.locator("#transcript[aria-busy], #transcript [aria-busy]").count() == 0
            )
            records = (await api.get("/v1/continuums/ime/turns")).json()["turns"]
            assert [r["user_text"] for r in records][2:] == ["And you?"]


async def test_a_turn_left_streaming_shows_when_its_continuum_is_opened_again(
    tmp_path: Path,
) -> None:
    """The operator looks at the list while a reply streams, then comes back: the reply
    was gone from the transcript ("No messages yet.") and stayed gone when it finished,
    the send button free as if nothing ran, until the page was loaded again."""
    slow = tmp_path / "slow.toml"
    slow.write_text("[offline]\ntokens_per_second = 2\n")
    async with daemon(tmp_path / "data", "--config", str(slow)) as d, d.client() as api:
        # A new continuum: its history and records answer 404 until its first turn.
        async with browser_page(expected=("status of 404",)) as page:
            await page.goto(f"{d.url}/ui/continuums/away")
            await page.wait_for_selector("#stack")
            await page.fill("#chat textarea", "Tell me about the tides")
            await page.press("#chat textarea", "Enter")
            await page.wait_for_selector("#live .text:not(:empty)")
            await page.click("a[href='/ui/']")
            await page.wait_for_selector("#continuums")
            await page.go_back()
            await page.wait_for_selector("#transcript:not([aria-busy])")  # history shown
            # Still streaming: the question and the live reply, once each.
            live = page.locator("#transcript .msg.assistant.live")
            assert await live.count() == 1
            asked = page.locator("#transcript .msg.user", has_text="Tell me about the tides")
            assert await asked.count() == 1
            assert await page.locator("#chat button[type=submit]").is_disabled()
            # Its record, as the page loaded it: running (it read failed, "interrupted").
            running = page.locator("#turns-table tbody tr").first
            assert await running.locator("td.miss").inner_text() == "running"
            assert await running.locator("td.total").inner_text() == "–"
            await page.wait_for_selector("#transcript .msg.assistant .completed")
            await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
            reply = await page.locator("#transcript .msg.assistant .text").inner_text()
            assert reply.startswith("You said: “Tell me about the tides”")
            # The turns table now has the turn's final record, not the running one's.
            row = page.locator("#turns-table tbody tr").first
            await row.locator("td.miss", has_text="–").wait_for()
        (record,) = (await api.get("/v1/continuums/away/turns")).json()["turns"]
        assert record["status"] == "completed"


async def test_a_message_sent_at_capacity_shows_while_it_waits_for_a_slot(
    tmp_path: Path,
) -> None:
    """The console previews the request before each turn, and a preview waits for a turn
    slot as a turn does. With every slot taken (here the only one, by another client's
    turn), the message sent stayed out of sight, the box as if nothing were sent, until
    that other turn was over; it shows at once now, its reply to come."""
    slow = tmp_path / "slow.toml"
    slow.write_text("[offline]\ntokens_per_second = 4\n\n[turns]\nmax_active = 1\n")
    async with (
        daemon(tmp_path / "data", "--config", str(slow)) as d,
        d.client() as api,
        anyio.create_task_group() as tg,
    ):
        streaming, other_done = anyio.Event(), anyio.Event()

        async def other_turn() -> None:
            message = {"message": "Tell me everything about the tides, the moon and the sea"}
            async with api.stream("POST", "/v1/continuums/other/turns", json=message) as r:
                async for name, _ in sse_events(r):
                    if name == "text.delta":
                        streaming.set()  # it holds the only slot
            other_done.set()

        tg.start_soon(other_turn)
        await streaming.wait()
        async with browser_page(expected=("status of 404",)) as page:
            await page.goto(f"{d.url}/ui/continuums/mine")
            # Its history (none), not its next request's preview, which waits for a slot.
            await page.wait_for_selector("#transcript:not([aria-busy])")
            await page.fill("#chat textarea", "Are you there?")
            await page.press("#chat textarea", "Enter")
            await page.locator("#transcript .msg.user", has_text="Are you there?").wait_for()
            assert not other_done.is_set(), "the message showed only once the slot was free"
            await page.wait_for_selector("#transcript .msg.assistant .completed")
            assert other_done.is_set()


async def test_another_users_turn_in_flight_stays_out_of_a_new_tokens_view(
    tmp_path: Path,
) -> None:
    """Alice's reply streams in her continuum "notes"; the operator switches the tab to
    Bob's token and the page shows Bob's "notes". Alice's question and live reply were
    shown in Bob's transcript (the tab kept turns in flight by continuum id alone), and
    Bob's send button stayed disabled until Alice's turn was over."""
    slow = tmp_path / "slow.toml"
    slow.write_text("[offline]\ntokens_per_second = 2\n")
    async with (
        daemon(tmp_path / "data", "--token", TOKEN, "--config", str(slow)) as d,
        d.client(headers={"authorization": f"Bearer {TOKEN}"}) as admin,
    ):
        tokens = {}
        for name in ("alice", "bob"):
            created = await admin.post("/v1/users", json={"name": name})
            assert created.status_code == 201, created.text
            tokens[name] = created.json()["token"]
        async with browser_page(expected=("status of 404",)) as page:
            await page.goto(f"{d.url}/ui/continuums/notes")
            await page.fill("#token-input", tokens["alice"])
            await page.press("#token-input", "Enter")
            await page.wait_for_selector("#transcript:not([aria-busy])")
            await page.fill("#chat textarea", "Alice's private question")
            await page.press("#chat textarea", "Enter")
            await page.wait_for_selector("#live .text:not(:empty)")

            await page.click("#token-button")
            await page.fill("#token-input", tokens["bob"])
            await page.press("#token-input", "Enter")
            await page.wait_for_selector("#transcript:not([aria-busy])")
            transcript = await page.locator("#transcript").inner_text()
            assert "Alice" not in transcript
            assert "You said" not in transcript
            assert await page.locator("#transcript .msg").count() == 0
            assert not await page.locator("#chat button[type=submit]").is_disabled()


async def test_a_queued_message_ended_before_it_started_goes_back_in_the_box(
    tmp_path: Path,
) -> None:
    """The daemon takes a turn (its answer's headers go out) and queues it for a slot;
    it can still end before it starts, with an error event and no `turn.started` (the
    daemon shutting down, a connection given to another client). Nothing was sent to
    the model, yet the console cleared the box for good, as for a reply it had: the
    message, here a long paste, was lost. It goes back in the box now, as for a refusal."""
    slow = tmp_path / "slow.toml"
    slow.write_text("[offline]\ntokens_per_second = 4\n\n[turns]\nmax_active = 1\n")
    # Too long to preview in a URL: the console sends the turn at once, to wait queued.
    paste = "line of a long paste\n" * 600
    async with (
        daemon(tmp_path / "data", "--config", str(slow)) as d,
        d.client() as api,
        anyio.create_task_group() as tg,
    ):
        streaming = anyio.Event()

        async def other_turn() -> None:
            message = {"message": "Tell me everything about the tides, the moon and the sea"}
            async with api.stream("POST", "/v1/continuums/other/turns", json=message) as r:
                async for name, _ in sse_events(r):
                    if name == "text.delta":
                        streaming.set()  # it holds the only slot

        tg.start_soon(other_turn)
        await streaming.wait()
        async with browser_page(
            expected=("status of 404", "status of 503", "Failed to load resource")
        ) as page:
            await page.goto(f"{d.url}/ui/continuums/mine")
            await page.wait_for_selector("#transcript:not([aria-busy])")
            await page.fill("#chat textarea", paste)
            async with page.expect_response(
                lambda r: r.url.endswith("/turns") and r.request.method == "POST"
            ) as taken:
                await page.press("#chat textarea", "Enter")
            assert (await taken.value).status == 200  # queued behind the other turn
            d.process.send_signal(signal.SIGTERM)
            bubble = page.locator("#transcript .msg.assistant .error")
            await bubble.wait_for()
            assert "shutting_down" in await bubble.inner_text()
            await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
            assert await page.input_value("#chat textarea") == paste.rstrip()
        tg.cancel_scope.cancel()


def _noise_png(side: int) -> bytes:
    """A PNG of random pixels (it does not compress: its base64 is long)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


async def test_an_image_in_the_context_panel_counts_as_frontmind_counts_it(
    tmp_path: Path,
) -> None:
    """The context panel estimated an image block by the length of its JSON, base64 and
    all: a photo of a few hundred KB showed as tens of thousands of tokens (Frontmind
    counts an image as IMAGE_TOKENS), and its base64 filled the block's text."""
    data = base64.b64encode(_noise_png(160)).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    message = [image, {"type": "text", "text": "What is in this picture?"}]
    async with daemon(tmp_path / "data") as d, d.client() as api:
        async with api.stream("POST", "/v1/continuums/photo/turns", json={"content": message}) as r:
            assert r.status_code == 200, await r.aread()
            events = [name async for name, _ in sse_events(r)]
        assert events[-1] == "turn.completed", events
        async with browser_page() as page:
            await page.goto(f"{d.url}/ui/continuums/photo")
            block = page.locator("#stack .block.history", has_text="history · user · image")
            await block.wait_for()
            tokens = await block.locator("summary .tokens").inner_text()
            assert tokens == f"≈{num(IMAGE_TOKENS + BLOCK_FRAMING_TOKENS)} tok"
            shown = await block.locator("pre.full").text_content()
            assert data not in shown
            assert len(shown) < 1000, shown


async def test_a_message_refused_for_its_token_survives_giving_the_token(
    tmp_path: Path,
) -> None:
    """A message refused with 401 (the tab's token rotated or mistyped) goes back in the
    box and the page asks for the token; giving it drew the view anew, and the message
    was gone from the box, to be typed again."""
    async with (
        daemon(tmp_path / "data", "--token", TOKEN) as d,
        browser_page(expected=("status of 401", "status of 404")) as page,
    ):
        await page.goto(f"{d.url}/ui/continuums/rotated")
        await page.fill("#token-input", "a-token-no-longer-valid")
        await page.press("#token-input", "Enter")
        await page.wait_for_selector("#token-form:not([hidden])")
        await page.fill("#chat textarea", "A long message I took care over")
        await page.press("#chat textarea", "Enter")
        await page.locator("#transcript .msg.assistant .error").wait_for()
        await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
        assert await page.input_value("#chat textarea") == "A long message I took care over"
        await page.fill("#token-input", TOKEN)
        await page.press("#token-input", "Enter")
        await page.wait_for_selector("#transcript:not([aria-busy])")
        assert await page.input_value("#chat textarea") == "A long message I took care over"
        await page.press("#chat textarea", "Enter")
        await page.wait_for_selector("#transcript .msg.assistant .completed")


async def test_a_tool_result_with_an_image_shows_its_text_not_its_base64(
    tmp_path: Path,
) -> None:
    """A tool result of text and an image (an MCP server's chart, a screenshot) showed in
    the transcript as its JSON array, the image's base64 and all: a screenful of
    characters per image, in every later view of the continuum."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data = base64.b64encode(_noise_png(60)).decode()
    result = [
        {"type": "text", "text": "the sales chart"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
    ]
    messages = (
        Message("user", (TextBlock("Show me the sales"),)),
        Message("assistant", (ToolUseBlock("tu_1", "chart", "{}"),)),
        Message(
            "user",
            (ToolResultBlock("tu_1", "the sales chart", content_json=json.dumps(result)),),
        ),
        Message("assistant", (TextBlock("Here it is."),)),
    )
    async with await SQLiteStorage.open(data_dir / "frontmind.db") as store:
        await store.commit_turn(DEFAULT_USER, stored_turn("sales", "t1", messages=messages))
    async with daemon(data_dir) as d, browser_page() as page:
        await page.goto(f"{d.url}/ui/continuums/sales")
        await page.wait_for_selector("#transcript:not([aria-busy])")
        shown = await page.locator("#transcript .msg.user .tool").inner_text()
        assert data[:40] not in shown
        assert shown == "↳ the sales chart [image]"


async def test_more_clicked_twice_adds_the_next_page_once(tmp_path: Path) -> None:
    """ "More" clicked again while its page loads (a slow daemon, a double click) asked
    for the same page twice and added it twice: the list showed each item past the
    first page two times."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        for i in range(201):
            made = await api.post("/v1/reminders", json={"text": f"reminder {i:03}"})
            assert made.status_code == 201, made.text
        async with browser_page() as page:
            asked: list[Any] = []
            page.on("request", lambda r: asked.append(r) if "cursor=" in r.url else None)
            await page.goto(f"{d.url}/ui/library")
            items = page.locator("#reminders ul.items > li")
            await items.nth(199).wait_for()
            await page.evaluate(
                "() => { const b = [...document.querySelectorAll('#reminders button')]"
                ".find((x) => x.textContent === 'More'); b.click(); b.click(); }"
            )
            await page.locator("#reminders li", has_text="reminder 200").first.wait_for()
            for request in asked:
                await request.response()
            texts = await items.all_inner_texts()
            assert len(asked) == 1
            assert len(texts) == 201


async def test_thinking_in_the_history_folds_above_the_reply(tmp_path: Path) -> None:
    """A reply's thinking folds above it while it streams, but once the page was loaded
    again (or the continuum opened later) it was a bare "[thinking]", its text out of
    reach in the console, and a redacted one the same "[redacted_thinking]"."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    thought = {"type": "thinking", "thinking": "The user wants tides.", "signature": "c2ln"}
    redacted = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    messages = (
        Message("user", (TextBlock("Tell me about tides"),)),
        Message(
            "assistant",
            (
                RawBlock("thinking", json.dumps(thought)),
                RawBlock("redacted_thinking", json.dumps(redacted)),
                TextBlock("The moon pulls the sea."),
            ),
        ),
    )
    async with await SQLiteStorage.open(data_dir / "frontmind.db") as store:
        await store.commit_turn(DEFAULT_USER, stored_turn("tides", "t1", messages=messages))
    async with daemon(data_dir) as d, browser_page() as page:
        await page.goto(f"{d.url}/ui/continuums/tides")
        await page.wait_for_selector("#transcript:not([aria-busy])")
        folds = page.locator("#transcript .msg.assistant details.thinking")
        assert await folds.count() == 2
        assert await folds.nth(0).locator("summary").inner_text() == "thinking"
        assert await folds.nth(0).locator("pre").text_content() == "The user wants tides."
        summary = await folds.nth(1).locator("summary").inner_text()
        assert summary == "redacted thinking (encrypted, not shown)"
        assert "ZW5jcnlwdGVk" not in await page.locator("#transcript").inner_text()


async def test_a_reply_cut_off_at_max_tokens_says_so(tmp_path: Path) -> None:
    """A reply cut off at max_tokens came with its warning in turn.completed, and the
    chat showed it as a finished reply: "You said: " and the usual numbers, nothing
    saying the rest was missing."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        settings = await api.put("/v1/continuums/short/settings", json={"max_tokens": 5})
        assert settings.status_code == 200, settings.text
        async with browser_page(expected=("status of 404",)) as page:
            await page.goto(f"{d.url}/ui/continuums/short")
            await page.wait_for_selector("#transcript:not([aria-busy])")
            await send_and_watch(page, "Tell me a long story about the sea and the moon")
            last = page.locator("#transcript .msg.assistant").last
            assert await last.locator(".warning").count() == 1
            warning = await last.locator(".warning").inner_text()
            assert "cut off at max_tokens (5)" in warning


async def test_the_continuum_lists_more_clicked_twice_adds_its_page_once(
    tmp_path: Path,
) -> None:
    """The continuums' "More", clicked again while its page loaded, added that page
    twice: each continuum past the first 50 was listed two times."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    async with await SQLiteStorage.open(data_dir / "frontmind.db") as store:
        for i in range(51):
            await store.commit_turn(DEFAULT_USER, stored_turn(f"c{i:02}", f"t{i}", at=1e6 + i))
    async with daemon(data_dir) as d, browser_page() as page:
        asked: list[Any] = []
        page.on("request", lambda r: asked.append(r) if "cursor=" in r.url else None)
        await page.goto(f"{d.url}/ui/")
        rows = page.locator("#continuums tbody tr")
        await rows.nth(49).wait_for()
        await page.evaluate(
            "() => { const b = [...document.querySelectorAll('main button')]"
            ".find((x) => x.textContent === 'More'); b.click(); b.click(); }"
        )
        await rows.nth(50).wait_for()
        for request in asked:
            await request.response()
        assert len(asked) == 1
        assert await rows.count() == 51


async def test_acting_on_an_item_past_the_first_page_keeps_the_pages_shown(
    tmp_path: Path,
) -> None:
    """Completing or deleting a reminder reloaded the list's first page: every page
    "More" had added was gone, and the user working through their oldest-first list
    clicked "More" and found their place again after each item."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        for i in range(203):
            made = await api.post("/v1/reminders", json={"text": f"reminder {i:03}"})
            assert made.status_code == 201, made.text
        async with browser_page() as page:
            await page.goto(f"{d.url}/ui/library")
            items = page.locator("#reminder-list > li")
            await items.nth(199).wait_for()
            await page.locator("#reminders").get_by_role("button", name="More").click()
            await items.nth(202).wait_for()
            gone = page.locator("#reminder-list li", has_text="reminder 201")
            await gone.get_by_role("button", name="Delete").click()
            await gone.wait_for(state="detached")
            done = page.locator("#reminder-list li", has_text="reminder 202")
            await done.get_by_role("button", name="Complete").click()
            await done.wait_for(state="detached")
            texts = await page.locator("#reminder-list .item-text").all_inner_texts()
            assert texts == [f"reminder {i:03}" for i in range(201)]
            # With completed reminders shown, the one completed stays, as completed.
            await page.check("#show-completed")
            first = page.locator("#reminder-list li", has_text="reminder 000")
            await first.get_by_role("button", name="Complete").click()
            await page.locator("#reminder-list li.done", has_text="reminder 000").wait_for()
            assert await first.get_by_role("button", name="Complete").count() == 0
        left = (await api.get("/v1/reminders?include_completed=true&limit=1000")).json()
        completed = [r["text"] for r in left["reminders"] if r["completed_at"]]
        assert (len(left["reminders"]), completed) == (202, ["reminder 000", "reminder 202"])


async def test_a_library_form_refused_for_its_token_survives_giving_the_token(
    tmp_path: Path,
) -> None:
    """A document typed in and refused with 401 stayed in its form, and the page asked
    for the token; giving it drew the library anew, its forms empty: the document had
    to be written again."""
    async with (
        daemon(tmp_path / "data", "--token", TOKEN) as d,
        d.client(headers={"authorization": f"Bearer {TOKEN}"}) as api,
        browser_page(expected=("status of 401",)) as page,
    ):
        await page.goto(f"{d.url}/ui/library")
        await page.fill("#token-input", "a-token-no-longer-valid")
        await page.press("#token-input", "Enter")
        await page.wait_for_selector("#token-form:not([hidden])")
        await page.fill("#add-document input[name=label]", "plan")
        await page.fill("#add-document textarea[name=content]", "A page I wrote with care")
        async with page.expect_response(lambda r: r.url.endswith("/v1/documents")) as put:
            await page.click("#add-document button[type=submit]")
        assert (await put.value).status == 401
        await page.fill("#token-input", TOKEN)
        await page.press("#token-input", "Enter")
        await page.locator("#document-list li", has_text="None.").wait_for()
        assert await page.input_value("#add-document input[name=label]") == "plan"
        content = await page.input_value("#add-document textarea[name=content]")
        assert content == "A page I wrote with care"
        await page.click("#add-document button[type=submit]")
        await page.locator("#document-list li", has_text="plan").wait_for()
        (document,) = (await api.get("/v1/documents")).json()["documents"]
        assert document["content"] == "A page I wrote with care"


async def test_a_turn_sent_after_a_refusal_clears_the_refusals_status(tmp_path: Path) -> None:
    """A turn refused (503) says so in the status line; sent again and answered, the
    page still said it was refused, above the reply that came."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        await turn(api, "retry", "hello")
        async with browser_page(expected=("status of 503",)) as page:
            overloaded = {"error": {"type": "overloaded", "message": "try again in 5 s"}}

            async def refuse(route: Any) -> None:
                await route.fulfill(status=503, json=overloaded, headers={"retry-after": "5"})

            await page.route("**/v1/continuums/retry/turns", refuse)
            await page.goto(f"{d.url}/ui/continuums/retry")
            await page.wait_for_selector("#turns-table tbody tr")
            await page.fill("#chat textarea", "are you there?")
            await page.press("#chat textarea", "Enter")
            await page.locator("#status", has_text="try again in 5 s").wait_for()
            await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
            await page.unroute("**/v1/continuums/retry/turns")
            await page.press("#chat textarea", "Enter")
            await page.locator("#transcript .msg.assistant .completed").last.wait_for()
            await page.wait_for_selector("#chat button[type=submit]:not([disabled])")
            assert await page.locator("#status").inner_text() == ""


async def test_deleting_what_was_deleted_meanwhile_takes_it_off_the_list(
    tmp_path: Path,
) -> None:
    """A memory deleted elsewhere (another tab, the API) while the library showed it
    stayed listed: its Delete said not_found, again at each click, until the page was
    loaded again."""
    async with daemon(tmp_path / "data") as d, d.client() as api:
        made = await api.post("/v1/memories", json={"text": "the old address"})
        assert made.status_code == 201, made.text
        async with browser_page(expected=("status of 404",)) as page:
            await page.goto(f"{d.url}/ui/library")
            item = page.locator("#memory-list li", has_text="the old address")
            await item.wait_for()
            gone = await api.delete(f"/v1/memories/{made.json()['id']}")
            assert gone.status_code == 204, gone.text
            async with page.expect_response(lambda r: "/v1/memories/" in r.url) as deleted:
                await item.get_by_role("button", name="Delete").click()
            assert (await deleted.value).status == 404
            await item.wait_for(state="detached")
            assert await page.locator("#status").inner_text() == ""
