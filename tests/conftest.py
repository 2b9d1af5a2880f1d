"""Shared fixtures. aiosqlite needs asyncio, so anyio's plugin is pinned to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anthropic
import pytest

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
        pytest.skip("no PostgreSQL server with pgvector: pip install pgserver")
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
