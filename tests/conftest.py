"""Shared fixtures. aiosqlite needs asyncio, so anyio's plugin is pinned to it.

Suites are marked by what they need, so `python3 dev.py test --quick` can leave them
out: `postgres` (a test that starts or uses the PostgreSQL server, marked here from
its fixtures and parameters), `browser` (Chromium), `sdk_suite` (the SDK's own tests)
and `slow` (child processes, whole conversations). A run ends with the suites it
skipped and why.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from frontmind.localapi import LocalMessagesAPI, ScriptedResponder
from tests._postgres import PostgresServer, pgvector_bin_dir, running_server


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the session (each test makes its own database)."""
    with running_server() as server:
        yield server


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server with the pgvector extension (`pgserver`'s binaries)."""
    bin_dir = pgvector_bin_dir()
    if bin_dir is None:
        reason = "no PostgreSQL server with pgvector: pip install pgserver"
        if os.environ.get("CI"):  # CI installs it: missing there is a failure
            pytest.fail(reason)
        pytest.skip(reason)
    with running_server(bin_dir) as server:
        yield server


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., anthropic.AsyncAnthropic]]:
    """Makes SDK clients and closes them before the event loop goes away."""
    made: list[anthropic.AsyncAnthropic] = []

    def make(base_url: str, **options: Any) -> anthropic.AsyncAnthropic:
        options.setdefault("max_retries", 0)
        made.append(anthropic.AsyncAnthropic(api_key="test-key", base_url=base_url, **options))
        return made[-1]

    yield make
    for client in made:
        await client.close()


@pytest.fixture
def client(api: Any, clients: Callable[..., anthropic.AsyncAnthropic]) -> anthropic.AsyncAnthropic:
    """An SDK client of the test module's own `api` fixture (a LocalMessagesAPI)."""
    return clients(api.base_url)


@pytest.fixture
async def script() -> AsyncIterator[tuple[LocalMessagesAPI, ScriptedResponder]]:
    """The local server answering from a script: push the replies a test expects."""
    responder = ScriptedResponder()
    async with LocalMessagesAPI(responder=responder) as server:
        yield server, responder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        spec = getattr(item, "callspec", None)
        params = spec.params.values() if spec is not None else ()
        on_postgres = any(isinstance(p, str) and p in ("postgres", "pgvector") for p in params)
        fixtures = set(getattr(item, "fixturenames", ()))
        if on_postgres or fixtures & {"pg_server", "pgvector_server"}:
            item.add_marker(pytest.mark.postgres)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Which suites (test files) skipped tests, and why, in a few lines."""
    skipped: dict[tuple[str, str], int] = defaultdict(int)
    for report in terminalreporter.stats.get("skipped", []):
        path = Path(str(report.location[0])).as_posix() if report.location else "?"
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
        skipped[(path, reason.removeprefix("Skipped: "))] += 1
    if not skipped:
        return
    terminalreporter.section("skipped suites", sep="-")
    for (path, reason), count in sorted(skipped.items()):
        terminalreporter.write_line(f"{path}: {count} skipped: {reason}")
