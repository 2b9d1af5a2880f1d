"""Shared fixtures. aiosqlite needs asyncio, so anyio's plugin is pinned to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._postgres import PostgresServer, running_server


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the session (each test makes its own database)."""
    with running_server() as server:
        yield server
